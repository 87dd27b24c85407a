"""``entry_points.txt``: INI with case-sensitive keys, ``=`` only, values ``module[:attr]``.

Parsed into ``{group: {name: value}}`` and rendered back deterministically (groups and
names sorted), so that the same entry points always give the same bytes.
"""

from __future__ import annotations

from triton_backend_runtime.base import BACKENDS_GROUP as BACKENDS_GROUP
from triton_backend_runtime.site import DEFAULT_PACKAGE as DEFAULT_PACKAGE
from triton_backend_runtime.site import backends_group as backends_group
from triton_backend_runtime.site import parse_entry_points

from ..base import WheelError

__all__ = ["EntryPoints", "merged", "parse", "render"]

EntryPoints = dict[str, dict[str, str]]


def parse(text: str, where: str) -> EntryPoints:
    """The runtime's parser (one definition for both sides), strict: bad lines are errors."""
    try:
        return parse_entry_points(text, strict=True)
    except ValueError as exc:
        raise WheelError("entry-points", where, f"malformed entry_points.txt: {exc}") from None


def render(entry_points: EntryPoints) -> str:
    lines: list[str] = []
    for group in sorted(entry_points):
        if not entry_points[group]:
            continue
        lines.append(f"[{group}]")
        lines.extend(f"{name} = {value}" for name, value in sorted(entry_points[group].items()))
        lines.append("")
    return "\n".join(lines)


def merged(base: EntryPoints, extra: EntryPoints) -> EntryPoints:
    """``base`` with the groups and names of ``extra`` added (extra wins on a clash)."""
    out = {group: dict(names) for group, names in base.items()}
    for group, names in extra.items():
        out.setdefault(group, {}).update(names)
    return out
