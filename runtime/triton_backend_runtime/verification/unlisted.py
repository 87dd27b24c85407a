"""Nothing unlisted that Python or the loader could run, in a verified distribution's packages.

With a manifest that covers every file (schema 1.1 ``coverage: all``): no ``.py``, extension
module, shared library or sourceless ``.pyc`` anywhere in the distribution's own import
packages (symlinked directories followed), nor in the packages above them, nor beside a listed
file in a directory it shares with others, unless another distribution's RECORD lists it (PEP
376). Such a file in the distribution's own packages (an add-on's) is lent: the verdict names
its owner (``Verdict.lent``), whose own verdict must hold too (the registry's to decide).
With a 1.0 manifest (native files only): no unlisted shared library in the backend packages.
``__pycache__`` is not checked: a verified source's pyc is never used (:mod:`.bytecode`).
"""

from __future__ import annotations

import os
from collections.abc import Callable

from ..base import VerifyError, is_shared_library
from ..manifest import model as m
from ..site import MAX_WALK_ENTRIES, Distribution, HashCache, RecordClaims, walk_files
from .verdict import Verdict

__all__ = ["MAX_LENT_SHOWN", "check_unlisted"]

#: What the import system or the dynamic loader could run, by file name.
_CODE_SUFFIXES = (".py", ".pyw", ".pyc", ".so", ".pyd")


def _is_code(directory: str, name: str) -> bool:
    """A file the import system or the loader could run; ``__pycache__`` bytecode is Python's
    cache of a source beside it, never run in place of a verified one (:mod:`.bytecode`)."""
    if os.path.basename(directory) == "__pycache__":
        return False
    return name.endswith(_CODE_SUFFIXES) or is_shared_library(name)


def check_unlisted(manifest: m.Manifest, dist: Distribution, located: dict[str, str], verdict: Verdict,
                    hashes: HashCache) -> None:
    listed = set(located.values())
    if manifest.coverage == m.COVERAGE_ALL:
        tops = _import_packages(located, dist.root)
        is_extra = _is_code
    else:
        tops = {os.path.join(dist.root, *b.package.split(".")) for b in manifest.backends}
        tops |= {os.path.dirname(p) for p in listed if os.path.dirname(p) != dist.root}
        def is_extra(directory: str, name: str) -> bool:  # noqa: E306 - schema 1.0: libraries only
            return is_shared_library(name)
    claims = _Claims(dist, verdict, hashes)  # the other distributions' RECORDs, read once if at all
    tops = _confined(tops, manifest, dist, listed, claims)
    _check_strays(_strays(listed, tops, dist, is_extra), manifest, listed, is_extra, claims)
    budget = [MAX_WALK_ENTRIES]
    unlisted: list[str] = []
    for top in sorted(tops):
        for here, names in walk_files(top, budget, hashes.taken):  # each directory's identity before it is listed
            verdict.files.append(here)
            unlisted += [p for n in names if is_extra(here, n) and (p := os.path.join(here, n)) not in listed]
    unlisted = _lend(sorted(set(unlisted)), claims, verdict)
    if unlisted:
        more = f" (and {len(unlisted) - 1} more)" if len(unlisted) > 1 else ""
        raise VerifyError("unlisted", unlisted[0], f"code the signed manifest does not list{more}")


#: Files a message names for one owner (``lent`` keeps them all: each is checked).
MAX_LENT_SHOWN = 16


def _lend(found: list[str], claims: _Claims, verdict: Verdict) -> list[str]:
    """Of the code ``found`` in the distribution's own packages, what no other distribution's
    RECORD lists as it is on disk. The rest is that one's (an add-on writing into Triton's
    ``_C/``, a backend installed as ``backends/<name>/``), noted in ``verdict.lent``: the
    registry keeps this verdict only while each owner's own verdict is verified."""
    unlisted = []
    for path in found:
        owner = claims.owner(path)
        if owner is None:
            unlisted.append(path)
        else:  # bounded by the walk's own budget (MAX_WALK_ENTRIES)
            verdict.lent.setdefault(owner, []).append(path)
    return unlisted


def _confined(tops: set[str], manifest: m.Manifest, dist: Distribution, listed: set[str],
              claims: _Claims) -> set[str]:
    """The directories walked for unlisted code: the distribution's own. A top-level package
    is its own unless another distribution owns it (a fork's or plugin's backend installed
    inside Triton's ``triton/``: Triton's files are not this distribution's to list) or it is
    a namespace (PEP 420: shared by design). Inside such a package it owns the directories of
    its declared backend packages and the topmost packages whose ``__init__.py`` its manifest
    lists, each walked whole: a file dropped there is still caught. Importing one of those
    runs the ``__init__.py`` of every package above it, so each must be listed, another
    distribution's, or absent. The decision's inputs (those directories, their
    ``__init__.py``, the owners' RECORDs) join the verdict's files."""
    whole: set[str] = set()
    inside: set[str] = set()  # directories owned inside a shared package
    shared: dict[str, bool] = {}
    for directory in tops:
        top = os.path.join(dist.root, os.path.relpath(directory, dist.root).split(os.sep)[0])
        if top not in shared:
            shared[top] = _package_owner(top, listed, claims) != "own"
        if not shared[top]:
            whole.add(directory)
            continue
        owned = _owned_below(top, manifest, dist, listed)
        if any(directory == o or directory.startswith(o + os.sep) for o in owned):
            inside.add(directory)
        else:
            inside |= {o for o in owned if o.startswith(directory + os.sep)}
    inside = {d for d in inside if not any(d.startswith(o + os.sep) for o in inside)}
    if manifest.coverage == m.COVERAGE_ALL:  # a 1.0 manifest lists no Python: libraries only
        for directory in sorted(inside):
            _check_parents(directory, listed, claims)
    out = whole | inside
    return {d for d in out if not any(d.startswith(o + os.sep) for o in out)}


def _strays(listed: set[str], walked: set[str], dist: Distribution, is_extra: Callable[[str, str], bool]) -> set[str]:
    """Listed code outside every walked directory: a module or library the distribution
    installs into a directory it shares (``triton/backends/helper.py`` in a namespace, a
    plugin in ``nvidia/lib/``); top-level modules are left to the shadowing check."""
    return {
        p for p in listed
        if os.path.dirname(p) != dist.root and is_extra(os.path.dirname(p), os.path.basename(p))
        and not any(p.startswith(w + os.sep) for w in walked)
    }


def _check_strays(strays: set[str], manifest: m.Manifest, listed: set[str],
                  is_extra: Callable[[str, str], bool], claims: _Claims) -> None:
    """In a shared directory the loader searches a listed library's directory (``$ORIGIN``)
    and the path finder prefers ``X/__init__.py`` and then ``X<extension suffix>`` to a listed
    ``X.py``: unlisted code there, or in ``X/``, runs in the verified file's place unless
    another distribution's RECORD describes it (PEP 376). The packages above a listed module
    run before it, as for an owned directory. Each directory looked at joins the verdict's files."""
    unlisted: list[str] = []
    for directory in sorted({os.path.dirname(p) for p in strays}):
        here = sorted(p for p in strays if os.path.dirname(p) == directory)
        claims.watch(directory)
        found = _shadowing(directory, here, is_extra, claims)
        unlisted += [p for p in found if p not in listed and not claims.owned(p)]
        if manifest.coverage == m.COVERAGE_ALL and not all(is_shared_library(os.path.basename(p)) for p in here):
            _check_parents(os.path.join(directory, "-"), listed, claims)  # from directory's own up
    if unlisted:
        raise VerifyError("unlisted", sorted(unlisted)[0], "code the signed manifest does not list, in a "
                          "directory it shares with others (it runs in place of the verified file)")


def _shadowing(directory: str, strays: list[str], is_extra: Callable[[str, str], bool], claims: _Claims) -> list[str]:
    """The code in ``directory`` that could run in place of its listed ``strays``: any library
    beside a library, ``X.*`` code beside a module ``X``, and the code in a directory ``X/``."""
    code = _code_in(directory, is_extra)
    libraries = any(is_shared_library(os.path.basename(p)) for p in strays)
    stems = {os.path.basename(p).split(".")[0] for p in strays if not is_shared_library(os.path.basename(p))}
    found = [p for p in code if (libraries and is_shared_library(os.path.basename(p)))
             or os.path.basename(p).split(".")[0] in stems]
    for stem in sorted(stems):
        package = os.path.join(directory, stem)
        if os.path.isdir(package):
            claims.watch(package)
            found += _code_in(package, is_extra)
    return found


def _code_in(directory: str, is_extra: Callable[[str, str], bool]) -> list[str]:
    """The code files directly in ``directory`` (one bounded listing; none if unreadable)."""
    try:
        with os.scandir(directory) as entries:
            names = [e.name for _, e in zip(range(MAX_WALK_ENTRIES), entries, strict=False)]
    except OSError:
        return []
    return [path for n in sorted(names)
            if is_extra(directory, n) and not os.path.isdir(path := os.path.join(directory, n))]


class _Claims:
    """The other distributions' RECORDs in ``dist``'s ``sys.path`` entry, read once, when first
    asked (only a distribution with files not its own in its directories asks)."""

    def __init__(self, dist: Distribution, verdict: Verdict, hashes: HashCache) -> None:
        self.dist, self.verdict, self.hashes = dist, verdict, hashes
        self.records = RecordClaims(dist, hashes.watch)

    def watch(self, path: str) -> None:
        """``path`` joins the verdict's files under its identity before it is looked at."""
        self.hashes.watch(path)
        self.verdict.files.append(path)

    def owned(self, path: str) -> bool:
        """Whether another distribution's RECORD lists ``path`` as it is on disk; the file and
        that RECORD then join the verdict's files (an edit to either: verified again)."""
        return self.owner(path) is not None

    def owner(self, path: str) -> str | None:
        """The ``.dist-info`` of the other distribution whose RECORD lists ``path`` as it is on
        disk (PEP 376); the file and that RECORD then join the verdict's files."""
        self.hashes.watch(path)
        record = self.records.owner(path)
        if record is None:
            return None
        self.verdict.files += [path, record]
        return os.path.dirname(record)


def _package_owner(directory: str, listed: set[str], claims: _Claims) -> str:
    """Whose package ``directory`` is: ``"own"`` (its manifest lists the ``__init__.py``, or
    nobody else claims one that is there: then it is unlisted code of this distribution),
    ``"other"`` (another installed distribution's RECORD lists it, as the file on disk is) or
    ``"namespace"`` (no ``__init__.py``: PEP 420)."""
    init = os.path.join(directory, "__init__.py")
    if init in listed or not os.path.isdir(directory):
        return "own"
    claims.hashes.watch(directory)  # before looking: an __init__.py added later makes it a package
    if not os.path.lexists(init):
        claims.verdict.files.append(directory)
        return "namespace"
    if not claims.owned(init):
        return "own"
    claims.verdict.files.append(directory)
    return "other"


def _check_parents(directory: str, listed: set[str], claims: _Claims) -> None:
    """The packages above an owned directory run first when it is imported: an ``__init__.py``
    there that this manifest does not list and no other distribution owns is unlisted code
    (dropped into a namespace, it turns it into a package that runs on import)."""
    root = claims.dist.root
    parent = os.path.dirname(directory)
    while parent != root and parent.startswith(root + os.sep):
        init = os.path.join(parent, "__init__.py")
        if _package_owner(parent, listed, claims) == "own" and init not in listed:
            raise VerifyError("unlisted", init, "code the signed manifest does not list (it runs before "
                              f"{os.path.relpath(directory, root)} is imported)")
        parent = os.path.dirname(parent)


def _owned_below(top: str, manifest: m.Manifest, dist: Distribution, listed: set[str]) -> set[str]:
    """Inside a package another distribution owns: the declared backend packages' directories
    and the topmost packages the manifest lists an ``__init__.py`` of."""
    backends = {os.path.join(dist.root, *b.package.split(".")) for b in manifest.backends}
    packages = {os.path.dirname(p) for p in listed if os.path.basename(p) == "__init__.py"}
    return {d for d in backends | packages if d.startswith(top + os.sep)}


def _import_packages(located: dict[str, str], root: str) -> set[str]:
    """The top-level directories the distribution installs, but its metadata directories."""
    tops = set()
    for path in located.values():
        top = os.path.relpath(path, root).split(os.sep)[0]
        if not top.endswith((".dist-info", ".data")) and os.path.isdir(os.path.join(root, top)):
            tops.add(os.path.join(root, top))
    return tops
