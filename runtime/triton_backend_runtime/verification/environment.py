"""Whether a manifest fits this interpreter and this Triton: a wheel tag (``packaging.tags``,
PEP 425), the Python and Triton specifiers (PEP 440), the backend protocol major, and the
package Triton is imported as (``triton_package``, schema 1.2)."""

from __future__ import annotations

import re
import sys

from ..base import VerifyError
from ..manifest import model as m

__all__ = ["MAX_TAG_PARTS", "SUPPORTED_PROTOCOL_MAJORS", "check_environment"]

#: Backend protocol majors this runtime can load (manifest ``protocol_version``).
SUPPORTED_PROTOCOL_MAJORS = (1,)
_MAJOR = re.compile(r"[0-9]{1,6}")
#: Dotted parts in one field of a wheel tag: real compressed tag sets have a handful.
MAX_TAG_PARTS = 64


def check_environment(manifest: m.Manifest, where: str, triton_version: str | None, triton_package: str) -> None:
    """The manifest fits here: a wheel tag, the protocol major, the Python and Triton
    specifiers, the package Triton is imported as (``where`` names the manifest in errors)."""
    _check_tags(manifest.tags, where)
    major = manifest.protocol_version.split(".")[0]
    if not _MAJOR.fullmatch(major) or int(major) not in SUPPORTED_PROTOCOL_MAJORS:
        raise VerifyError("protocol", where, f"backend protocol {manifest.protocol_version[:50]!r} is not supported")
    python = ".".join(map(str, sys.version_info[:3]))
    _check_specifier("Python", manifest.requirements.python, python, where)
    if manifest.requirements.triton and triton_version is None:
        raise VerifyError("triton", where, f"requires Triton {manifest.requirements.triton}; Triton is not installed")
    _check_specifier("Triton", manifest.requirements.triton, triton_version, where)
    _check_triton_package(manifest, triton_package, where)


def _check_triton_package(manifest: m.Manifest, running: str, where: str) -> None:
    """Backends and plugins built for Triton imported as one package are never handed to a
    Triton imported as another (a vendor's rename has its own entry-point group, its own
    ``libtriton``): ``verify.triton-package``. A manifest with neither is Triton's own or a
    library's, and holds for any."""
    if (manifest.backends or manifest.plugins) and manifest.triton_package != running:
        raise VerifyError("triton-package", where, f"built for Triton imported as "
                          f"{manifest.triton_package[:100]!r}; this Triton is imported as {running!r}")


def _check_tags(tags: list[str], where: str) -> None:
    """PEP 425 compressed tag sets (``py2.py3-none-any``) matched field by field, with sets:
    of a tag's interpreters those this Python has, of their ABIs those it has with them, and
    whether their platforms meet. Never the product of the three fields (n**3 tags for n parts
    each), never every manifest tag against every interpreter tag (100,000 tags against ~1000
    took 40 s): at most 256 tags (``manifest.MAX_TAGS``), each a few set intersections."""
    if not tags:
        return
    fields = []
    for text in tags:
        parts = text.split("-")
        expanded = [set(p.lower().split(".")) for p in parts]  # packaging.tags.Tag lowercases too
        if len(parts) != 3 or any("" in e or len(e) > MAX_TAG_PARTS for e in expanded):
            raise VerifyError("tag", where, f"wheel tag {text[:100]!r} is not 'python-abi-platform' "
                              f"(at most {MAX_TAG_PARTS} dotted parts each)")
        fields.append(expanded)
    ours = _interpreter_tags()
    for interpreters, abis, platforms in fields:
        for interpreter in interpreters & ours.keys():
            if any(not platforms.isdisjoint(ours[interpreter][abi]) for abi in abis & ours[interpreter].keys()):
                return
    raise VerifyError("tag", where, f"wheel tags {', '.join(t[:100] for t in tags[:8])}"
                      f"{f' (and {len(tags) - 8} more)' if len(tags) > 8 else ''} do not fit this interpreter")


def _check_specifier(what: str, spec: str | None, installed: str | None, where: str) -> None:
    from packaging.specifiers import InvalidSpecifier, SpecifierSet

    if not spec or installed is None:
        return
    try:
        ok = SpecifierSet(spec).contains(installed, prereleases=True)
    except (InvalidSpecifier, ValueError):
        raise VerifyError(
            "requirement", where, f"{what} requirement {spec[:100]!r} is not a PEP 440 specifier"
        ) from None
    if not ok:
        raise VerifyError(what.lower(), where, f"requires {what} {spec}; installed is {installed}")


#: This interpreter's tags (``packaging.tags.sys_tags``): interpreter -> ABI -> platforms.
_TAGS: dict[str, dict[str, set[str]]] = {}


def _interpreter_tags() -> dict[str, dict[str, set[str]]]:
    if not _TAGS:
        from packaging.tags import sys_tags

        for tag in sys_tags():
            _TAGS.setdefault(tag.interpreter, {}).setdefault(tag.abi, set()).add(tag.platform)
    return _TAGS

