"""The registry's report as typed rows: what ``doctor`` renders and ``list --json`` prints.

Each row is a dataclass; ``to_dict()`` gives the plain data of the ``list --json`` document
(its keys are the documented format, ``docs/reference/cli.md``). Renderers read the fields,
never dicts by string key.
"""

from __future__ import annotations

import os
from dataclasses import asdict, field
from typing import TYPE_CHECKING, Any

from ..base import record
from ..site import DEFAULT_PACKAGE, core_init, core_version

if TYPE_CHECKING:
    from ..base import Reason
    from ..site import Discovery, Distribution
    from ..verification import PluginTerms, Verdict
    from .entries import Entry, PluginEntry

__all__ = ["BackendRow", "CoreRow", "PluginRow", "RenamedCore", "Report", "backend_row", "core_row",
           "plugin_row"]


def _reason(reason: Reason | None) -> dict[str, str] | None:
    return None if reason is None else {"code": reason.code, "path": reason.path, "message": reason.message}


@record()
class _DistFields:
    """The distribution a row belongs to, and how its manifest was judged; None without one."""

    distribution: str | None = None
    version: str | None = None
    dist_info: str | None = None
    manifest: str | None = None
    coverage: str | None = None
    signature: str | None = None
    #: The trusted identity whose keyless signature (Sigstore bundle) counted: issuer, SAN, id.
    identity: dict[str, str] | None = None
    #: The upstream identities its manifest records (``provenance.upstream``: who signed the
    #: wheel before a mirror checked and re-signed it), each {issuer, identity, kind}.
    upstream: list[dict[str, str]] = field(default_factory=list)

    def _dist_dict(self) -> dict[str, Any]:
        return {"distribution": self.distribution, "version": self.version, "dist_info": self.dist_info,
                "manifest": self.manifest, "coverage": self.coverage, "signature": self.signature,
                "identity": self.identity, "upstream": self.upstream}


def _dist_fields(dist: Distribution | None, verdicts: dict[str, Verdict]) -> dict[str, Any]:
    if dist is None:
        return {}
    verdict = verdicts.get(dist.dist_info)
    return {"distribution": dist.name, "version": dist.version, "dist_info": dist.dist_info,
            "manifest": dist.manifest, "coverage": verdict.coverage if verdict and verdict.coverage else None,
            "signature": verdict.signature or None if verdict else None,
            "identity": _identity(verdict.keyless) if verdict and verdict.keyless else None,
            "upstream": [asdict(u) for u in verdict.upstream] if verdict else []}


def _identity(keyless: Any) -> dict[str, str]:
    return {"issuer": keyless.issuer, "san": keyless.san, "id": keyless.id, "pattern": keyless.pattern}


@record()
class BackendRow(_DistFields):
    """One backend."""

    name: str = ""
    package: str = ""
    source: str = ""
    trust: str = ""
    state: str = ""
    active: bool | None = None
    signers: list[str] = field(default_factory=list)
    targets: list[str] = field(default_factory=list)
    note: str = ""
    reason: Reason | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "package": self.package, "source": self.source, **self._dist_dict(),
                "trust": self.trust, "state": self.state, "active": self.active, "signers": self.signers,
                "targets": self.targets, "note": self.note, "reason": _reason(self.reason)}


@record()
class PluginRow(_DistFields):
    """One plugin library."""

    path: str = ""
    file: str = ""
    api: str = ""
    name: str | None = None
    trust: str = ""
    state: str = ""
    signers: list[str] = field(default_factory=list)
    handed_over: str = ""
    note: str = ""
    reason: Reason | None = None
    contract: PluginTerms | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"path": self.path, "file": self.file, "api": self.api, "name": self.name, **self._dist_dict(),
                "trust": self.trust, "state": self.state, "signers": self.signers,
                "handed_over": self.handed_over, "note": self.note, "reason": _reason(self.reason),
                "contract": asdict(self.contract) if self.contract else None}


@record()
class CoreRow:
    """What ``import <package>`` imports: the distribution whose RECORD lists the file, its
    version, ``<package>.__version__`` and the ``libtriton.so`` beside it."""

    distribution: str
    version: str
    dist_info: str
    init: str
    version_attr: str | None
    libtriton: str | None
    also_claimed_by: list[str]
    #: The size of the libtriton.so beside it: 0 for a core that fetches its library at import.
    libtriton_bytes: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"distribution": self.distribution, "version": self.version, "dist_info": self.dist_info,
                "init": self.init, "__version__": self.version_attr, "libtriton": self.libtriton,
                "libtriton_bytes": self.libtriton_bytes, "also_claimed_by": self.also_claimed_by}


@record()
class RenamedCore:
    """A signed distribution that installs Triton under another package name."""

    distribution: str
    package: str

    def to_dict(self) -> dict[str, Any]:
        return {"distribution": self.distribution, "package": self.package}


@record()
class Report:
    """Everything the registry knows: the ``list --json`` document, typed."""

    policy: str
    used_by_triton: bool
    discovery: str
    triton: str | None
    triton_core: CoreRow | None
    package: str
    renamed_cores: list[RenamedCore]
    trust_sources: list[str]
    cache: str
    manifest_digest: str | None
    core: Reason | None
    problems: list[Reason]
    notes: list[Reason]
    backends: list[BackendRow]
    plugins: list[PluginRow]

    def to_dict(self) -> dict[str, Any]:
        return {
            "policy": self.policy, "used_by_triton": self.used_by_triton, "discovery": self.discovery,
            "triton": self.triton, "triton_core": self.triton_core.to_dict() if self.triton_core else None,
            "package": self.package, "renamed_cores": [r.to_dict() for r in self.renamed_cores],
            "trust_sources": self.trust_sources, "cache": self.cache, "manifest_digest": self.manifest_digest,
            "core": asdict(self.core) if self.core else None,
            "problems": [asdict(p) for p in self.problems], "notes": [asdict(n) for n in self.notes],
            "backends": [b.to_dict() for b in self.backends], "plugins": [p.to_dict() for p in self.plugins],
        }


def backend_row(e: Entry, verdicts: dict[str, Verdict]) -> BackendRow:
    return BackendRow(**_dist_fields(e.dist, verdicts), name=e.name, package=e.package, source=e.source,
                      trust=e.trust, state=e.state, active=e.active, signers=e.signers, targets=e.targets,
                      note=e.note, reason=e.reason)


def plugin_row(p: PluginEntry, verdicts: dict[str, Verdict]) -> PluginRow:
    return PluginRow(**_dist_fields(p.dist, verdicts), path=p.path, file=p.file, api=p.api, name=p.name,
                     trust=p.trust, state=p.state, signers=p.signers, handed_over=p.handed_over, note=p.note,
                     reason=p.reason, contract=p.terms)


def core_row(found: Discovery | None, libtriton: str | None) -> CoreRow | None:
    triton = found.triton if found else None
    if found is None or triton is None:
        return None
    try:
        size: int | None = os.stat(libtriton).st_size if libtriton else None
    except OSError:
        size = None
    return CoreRow(triton.name, triton.version, triton.dist_info,
                   os.path.join(triton.root, *core_init(found.package).split("/")),
                   core_version(triton, found.package), libtriton, [d.label() for d in found.core_claims[1:]], size)


def renamed_cores(found: Discovery | None) -> list[RenamedCore]:
    """Looked for only when no ``triton`` core is on the path: signed distributions that install
    Triton under another package name (``doctor --package NAME`` examines one)."""
    if found is None or found.triton is not None or found.package != DEFAULT_PACKAGE:
        return []
    from ..site import renamed_cores as find

    signed = [d for d in found.distributions if d.manifest]
    return [RenamedCore(d.label(), p) for d, p in find(signed)]
