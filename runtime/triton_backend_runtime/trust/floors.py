"""Floors (``min-versions`` files, ``NAME VERSION``): a release of NAME below VERSION (PEP 440)
is refused (rollback), signed or not. A name with several floors gets the highest. A malformed
line that still names a distribution is reported with its ``file:line`` and admits no release
of it: skipping it would drop the floor."""

from __future__ import annotations

import os

from ..base import TrustStoreError, canonicalize_name, record
from .editing import set_line
from .paths import FLOORS_FILE, content_lines
from .syntax import DIST_NAME

__all__ = ["Floor", "MAX_VERSION_CHARS", "parse_floors", "set_floor"]

#: The longest version string parsed (PEP 440 sets none; real ones are a few dozen characters).
#: Longer is refused unparsed: a 5000-digit release number is past int()'s digit limit.
MAX_VERSION_CHARS = 200


def _valid_version(text: str) -> bool:
    from packaging.version import Version

    if len(text) > MAX_VERSION_CHARS:
        return False
    try:
        Version(text)
    except ValueError:  # InvalidVersion, or a release number too long for int()
        return False
    return True


@record(frozen=True)
class Floor:
    """The lowest admitted version of a distribution, and the ``file:line`` that sets it.

    ``version`` None: the line naming the distribution could not be read; nothing is admitted.
    """

    version: str | None
    source: str

    def describe(self) -> str:
        return self.version if self.version is not None else "unreadable"

    def higher(self, other: Floor) -> Floor:
        """The stricter of two floors (an unreadable one is the strictest; ties keep ``self``)."""
        if self.version is None or other.version is None:
            return self if self.version is None else other
        from packaging.version import Version

        return other if Version(other.version) > Version(self.version) else self


def parse_floors(text: str, where: str) -> tuple[dict[str, Floor], list[TrustStoreError]]:
    """A ``min-versions`` file: ``NAME VERSION`` lines (PEP 440 versions), ``#`` comments.

    A line that names a distribution but no valid version sets an unreadable floor (no release
    of it is admitted) and is reported; a line without a distribution name is reported and skipped.
    """
    floors: dict[str, Floor] = {}
    problems: list[TrustStoreError] = []
    for at, content in content_lines(text, where):
        fields = content.split()
        if not DIST_NAME.fullmatch(fields[0]):
            detail = f"expected 'NAME VERSION', found {fields[0][:80]!r} where a distribution name goes; line skipped"
            problems.append(TrustStoreError("min-version-format", at, detail))
            continue
        name = canonicalize_name(fields[0])
        version: str | None = fields[1] if len(fields) == 2 else None
        if version is None or not _valid_version(version):
            found = " ".join(fields[1:])[:80]
            detail = (f"expected 'NAME VERSION' with a PEP 440 version, found {found!r}; "
                      f"no release of {name} is admitted until the line is fixed")
            problems.append(TrustStoreError("min-version-format", at, detail))
            version = None
        floor = Floor(version, at)
        floors[name] = floors[name].higher(floor) if name in floors else floor
    return floors, problems


def set_floor(directory: str, name: str, version: str) -> list[str]:
    """Set ``name``'s floor to ``version`` in ``directory``'s min-versions file (replacing its line)."""
    wanted = canonicalize_name(name)

    def matches(first: str) -> bool:
        return DIST_NAME.fullmatch(first) is not None and canonicalize_name(first) == wanted

    return set_line(os.path.join(directory, FLOORS_FILE), matches, f"{wanted} {version}")
