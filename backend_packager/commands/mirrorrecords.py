"""The plain records of a mirror run: an input wheel, what the state keeps of it, its result,
the finished run, and the hooks a caller watches the run through."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..base import TrustError

if TYPE_CHECKING:
    from .migrate import ByteProgress

__all__ = [
    "COPIED", "Entry", "FAILED", "Hooks", "INDEX_DIR", "MIGRATED", "MirrorError", "Result", "Run", "STATUSES",
    "Source", "UNCHANGED", "failure"
]

INDEX_DIR = "simple"

MIGRATED, UNCHANGED, COPIED, FAILED = "migrated", "unchanged", "copied", "failed"
STATUSES = (MIGRATED, UNCHANGED, COPIED, FAILED)


class MirrorError(TrustError):
    """A mirror input or output that cannot be used: a source link, a duplicate, the lock."""

    code_prefix = "mirror"


@dataclass(frozen=True)
class Source:
    """One input wheel: where it is (a path inside ``root``, as its URL names it), its file
    name, its project, the sha256 its index gave, and the source tree it must stay in."""

    path: Path
    filename: str
    project: str
    expected_sha256: str | None = None
    root: Path | None = None  # resolved; None: the path's own directory
    #: Its PEP 740 provenance: ``<wheel>.provenance`` beside a wheel of a directory (read when
    #: it exists), or the file a source index's ``data-provenance`` names (which must exist).
    provenance: Path | None = None
    provenance_named: bool = False


@dataclass
class Entry:
    """What the state file records about one input wheel (keyed by its file name)."""

    filename: str
    source: str
    project: str
    stat: list[int]  # device, inode, size, mtime_ns, ctime_ns of the input
    sha256: str
    kind: str  # migrated | copied | failed
    served: bool  # OUTDIR holds OUTDIR/<filename> and the index names it
    output_sha256: str | None
    output_stat: list[int]  # device, inode, size, mtime_ns, ctime_ns of the output; [] when not served
    keyid: str | None
    backends: list[str] = field(default_factory=list)
    plugins: list[str] = field(default_factory=list)
    error: dict[str, str] | None = None
    core: str | None = None  # the Triton package whose core the wheel carries
    #: The upstream identities (issuer, identity, kind) whose PEP 740 attestations verified,
    #: and the sha256 of the provenance they were read from; [] and None without --upstream-identity.
    upstream: list[dict[str, str]] = field(default_factory=list)
    provenance_sha256: str | None = None
    #: With ``--sigstore-bundle DIR``: the sha256 of the bundle attached to its output (or
    #: that failed it); None when none was (copied through, signed now, or no DIR).
    bundle_sha256: str | None = None

    def found(self) -> str:
        """What the wheel carries of Triton, in words ("nothing Triton" for a copied ``requests``)."""
        parts = [f"backends: {', '.join(self.backends)}"] if self.backends else []
        parts += [f"plugins: {len(self.plugins)}"] if self.plugins else []
        parts += [f"core: {self.core}"] if self.core else []
        return "; ".join(parts) or "nothing Triton"


@dataclass
class Result:
    """One input wheel in this run: its status (migrated | unchanged | copied | failed)."""

    filename: str
    source: str
    status: str
    served: bool = False
    entry: Entry | None = None
    error: dict[str, str] | None = None
    warnings: list[str] = field(default_factory=list)
    seconds: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        entry = self.entry
        return {
            "filename": self.filename,
            "source": self.source,
            "status": self.status,
            "kind": entry.kind if entry else FAILED,
            "served": self.served,
            "project": entry.project if entry else None,
            "sha256": entry.sha256 if entry else None,
            "output_sha256": entry.output_sha256 if entry and self.served else None,
            "backends": entry.backends if entry else [],
            "plugins": entry.plugins if entry else [],
            "core": entry.core if entry else None,
            "found": entry.found() if entry and entry.kind != FAILED else None,
            "upstream": entry.upstream if entry else [],
            "error": self.error,
            "warnings": self.warnings,
            "seconds": round(self.seconds, 3),
        }


@dataclass
class Run:
    """A finished run: one result per input wheel, run-level warnings, what the index holds."""

    outdir: Path
    keyid: str | None  # None: signed by Sigstore bundles alone
    results: list[Result]
    warnings: list[str]

    def counts(self) -> dict[str, int]:
        return {status: sum(r.status == status for r in self.results) for status in STATUSES}

    @property
    def failed(self) -> bool:
        return any(r.status == FAILED for r in self.results)

    def as_dict(self) -> dict[str, Any]:
        return {
            "format": 1,
            "outdir": str(self.outdir),
            "index": str(self.outdir / INDEX_DIR),
            "keyid": self.keyid,
            "wheels": [r.as_dict() for r in self.results],
            "summary": self.counts(),
            "warnings": self.warnings,
        }


@dataclass
class Hooks:
    """What the caller sees while the run goes: the lock wait, bytes, finished wheels."""

    waiting: Callable[[Path], None] | None = None
    start: Callable[[list[Path]], None] | None = None
    progress: ByteProgress | None = None
    done: Callable[[Path, Result], None] | None = None
    #: Each stage of the run as it completes: "worked" (every output staged), "generation"
    #: (the new index tree written, not yet served), "swapped" (it is served), "placed" (the
    #: outputs renamed into OUTDIR), "state" (the state written).
    step: Callable[[str], None] | None = None


def failure(filename: str, source: str, error: TrustError) -> Result:
    return Result(filename, source, FAILED, error=error.as_dict())
