"""Files lent: code in one distribution's packages that another's RECORD lists as it is on disk
(an add-on writing into Triton's ``_C/``, a backend installed as ``triton/backends/<name>/``).

Each distribution is verified alone, on its own files; its verdict names the owners of the
files it found lent (``Verdict.lent``, :mod:`..verification.unlisted`). With every verdict at
hand, two rules bind them together:

* an add-on is bound to the Triton it installs into: a ``Requires-Dist`` on that Triton
  distribution which its installed version does not satisfy rejects the add-on
  (``verify.triton``, as a manifest built for another Triton);
* a verified distribution is verified only with its lent files: one whose owner is not
  verified, or has no manifest, rejects it (``verify.unlisted``, naming the file and the
  owner), as if the file were its own unlisted code.

The verdicts given may be the cache's: a changed verdict is a copy.
"""

from __future__ import annotations

import dataclasses
import os
import re

from ..base import REJECTED, VERIFIED, Reason, VerifyError, canonicalize_name, reason_of
from ..site import Distribution, read_small_text
from ..verification import Verdict

__all__ = ["MAX_REQUIREMENTS", "settle"]

#: Requires-Dist headers read from an add-on's METADATA (a real one has tens).
MAX_REQUIREMENTS = 1000
#: The distribution name a requirement starts with (PEP 508).
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


def settle(verdicts: dict[str, Verdict], triton: Distribution | None) -> dict[str, Verdict]:
    """``verdicts`` (by ``.dist-info``) with both rules applied."""
    settled = dict(verdicts)
    core = settled.get(triton.dist_info) if triton is not None else None
    if triton is not None and core is not None:
        for owner in sorted(core.lent):
            found = settled.get(owner)
            problem = _pin_problem(owner, triton) if found is not None and found.status != REJECTED else None
            if found is not None and problem is not None:
                settled[owner] = dataclasses.replace(found, status=REJECTED, problem=problem)
    _withdraw(settled)
    return settled


def _withdraw(verdicts: dict[str, Verdict]) -> None:
    """Reject each verified verdict that lends files to an owner not verified, until none
    does (an owner rejected here may itself be another's owner: at most one pass each)."""
    changed = True
    while changed:
        changed = False
        for key, verdict in list(verdicts.items()):
            if verdict.status != VERIFIED:
                continue
            refused = next(((o, f) for o, files in sorted(verdict.lent.items())
                            for f in _unvouched(files, verdicts.get(o))), None)
            if refused is not None:
                owner, path = refused
                found = verdicts.get(owner)
                why = (_owner(owner, found) if found is None or found.status != VERIFIED
                       else f"{os.path.basename(owner)[:200]}, whose RECORD lists it but whose manifest does not")
                problem = reason_of(VerifyError("unlisted", path, f"code the signed manifest does not list, "
                                                f"installed by {why}"))
                verdicts[key] = dataclasses.replace(verdict, status=REJECTED, problem=problem)
                changed = True


def _unvouched(files: list[str], owner: Verdict | None) -> list[str]:
    """The lent files ``owner`` does not vouch for: all when it is not verified; else those its
    verified verdict does not cover (RECORDs are not signed: a row added to a verified
    distribution's RECORD makes it claim a file, not vouch for it)."""
    if owner is None or owner.status != VERIFIED:
        return files[:1]
    covered = set(owner.files)
    return [f for f in files if f not in covered][:1]


def _owner(dist_info: str, verdict: Verdict | None) -> str:
    """The owner, and why its files are not verified code."""
    name = os.path.basename(dist_info)[:200]
    if verdict is None:
        return f"{name}, which has no manifest (its RECORD lists the file; nothing vouches for it)"
    why = f"{verdict.problem.code}: {verdict.problem.message[:300]}" if verdict.problem else verdict.note[:300]
    return f"{name}, which is {verdict.status} ({why})"


def _pin_problem(dist_info: str, triton: Distribution) -> Reason | None:
    """The add-on's ``Requires-Dist`` on ``triton``'s distribution, if its installed version
    does not satisfy it (markers evaluated here, without extras); None when it does or there
    is none. The METADATA is read within its bound; a line that is not a requirement is not one."""
    where = os.path.join(dist_info, "METADATA")
    pins = [line for line in _requires_dist(read_small_text(where) or "")
            if (name := _NAME.match(line)) and canonicalize_name(name.group()) == triton.key]
    if not pins:
        return None  # the common case: packaging's requirement parser is not imported
    from packaging.markers import UndefinedEnvironmentName
    from packaging.requirements import InvalidRequirement, Requirement

    for line in pins:
        try:
            req = Requirement(line)
            if canonicalize_name(req.name) != triton.key or (req.marker and not req.marker.evaluate({"extra": ""})):
                continue
            fits = req.specifier.contains(triton.version, prereleases=True)
        except (InvalidRequirement, UndefinedEnvironmentName, ValueError):
            continue
        if not fits:
            return reason_of(VerifyError("triton", where, f"requires {line[:200]} (Requires-Dist) of the Triton it "
                                         f"installs files into; installed is {triton.label()[:200]}"))
    return None


def _requires_dist(text: str) -> list[str]:
    """The ``Requires-Dist`` values of METADATA's headers (the first block, before the body)."""
    found = []
    for line in text.splitlines():
        if not line.strip():
            break
        name, sep, value = line.partition(":")
        if sep and name.strip().lower() == "requires-dist":
            found.append(value.strip())
            if len(found) >= MAX_REQUIREMENTS:
                break
    return found
