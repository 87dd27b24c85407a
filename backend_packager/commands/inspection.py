"""``backend-packager inspect``: show what a wheel's manifest says, without trusting it.

Inspection reads the payload *unverified* (it is a report, not a decision) and says so:
a signed manifest shows its signers' keyids, to be checked with ``backend-packager verify``;
a hash-only manifest is labelled as such.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from triton_backend_runtime.base import printable
from triton_backend_runtime.manifest import (
    COVERAGE_ALL,
    MANIFEST_FILENAME,
    ElfInfo,
    Manifest,
    Plugin,
    file_kind,
    schema,
)
from triton_backend_runtime.trust import dsse, manifest_from_statement

from ..base import ManifestError
from ..manifest import reported_where
from ..wheel import WheelArchive, manifest_member

__all__ = [
    "Inspection", "as_json", "coverage_text", "inspect_wheel", "kind_text", "plugin_json", "plugin_lines", "render"
]


@dataclass(frozen=True)
class Inspection:
    wheel: str
    manifest: Manifest
    signers: tuple[str, ...]  # keyids named by the envelope; not verified here

    @property
    def signed(self) -> bool:
        return bool(self.signers)


def inspect_wheel(path: Path) -> Inspection:
    # Only the envelope is read: a report needs no member hashed (verify does that).
    with WheelArchive(path, check_name=False) as wheel:
        data = wheel.read(manifest_member(wheel.dist_info))
        where = f"{path}!{wheel.dist_info}/{MANIFEST_FILENAME}"
    if data is None:
        raise ManifestError("missing", where, "the wheel has no manifest")
    envelope = dsse.decode(data, where)
    manifest = manifest_from_statement(dsse.unverified_payload(envelope), where)
    return Inspection(str(path), manifest, tuple(s.keyid for s in envelope.signatures))


def as_json(inspection: Inspection) -> dict[str, Any]:
    return {
        "wheel": inspection.wheel,
        "signed": inspection.signed,
        "signers": list(inspection.signers),
        "verified": False,
        "coverage": inspection.manifest.coverage,
        "plugins": [plugin_json(p) for p in inspection.manifest.plugins],
        "kinds": {a.path: file_kind(a.elf) for a in inspection.manifest.artifacts if a.elf is not None},
        "manifest": schema.encode(inspection.manifest),
    }


def render(inspection: Inspection) -> str:
    """The manifest as a person reads it: who, what it provides, what it needs, what it ships."""
    m = inspection.manifest
    out = [f"{m.name} {m.version}  ({', '.join(m.tags)})"]
    if inspection.signed:
        out.append(f"  signature:  signed by {', '.join(k[:16] for k in inspection.signers)} "
                   "(not checked here: use `backend-packager verify --trust KEY`)")
    else:
        out.append("  signature:  none (hash-only manifest)")
    out.append(f"  schema {m.schema_version}, backend protocol {m.protocol_version}, "
               f"provenance {m.provenance.kind}" + (f" from {m.provenance.source}" if m.provenance.source else ""))
    out.append(f"  coverage:   {coverage_text(m)}")
    out.append(f"  built by {m.build.tool} {m.build.tool_version}"
               + (f", SOURCE_DATE_EPOCH={m.build.source_date_epoch}" if m.build.source_date_epoch else ""))
    out.append(f"  requires:   triton {m.requirements.triton or '(any)'}"
               + (f", python {m.requirements.python}" if m.requirements.python else ""))
    out.append("backends:" if m.backends else "backends:   none")
    for b in m.backends:
        targets = f"  targets: {', '.join(b.targets)}" if b.targets else ""
        out.append(f"  {b.name} = {b.package}{targets}")
        for role, where in (("compiler", b.compiler), ("driver", b.driver)):
            if where:
                out.append(f"      {role}: {where}")
    out.append("plugins:" if m.plugins else "plugins:    none")
    for p in m.plugins:
        out.append(f"  {p.path}  (plugin API {p.api}{', ' + p.name if p.name else ''})")
        out += [f"      {line}" for line in plugin_lines(p)]
    native = sum(a.elf is not None for a in m.artifacts)
    out.append(f"artifacts: {len(m.artifacts)} ({native} native)")
    for a in m.artifacts:
        out.append(f"  {a.path}  {a.size} bytes  sha256 {a.sha256[:16]}")
        if a.elf is not None:
            e = a.elf
            out.append(f"      {e.machine} {kind_text(e)}, glibc {e.glibc or '-'} ({e.manylinux}), "
                       f"{e.exports.count} exports, {len(e.imports)} imports"
                       + (f", needs {', '.join(e.needed)}" if e.needed else ""))
    return "\n".join(out)


def kind_text(elf: ElfInfo) -> str:
    """'library (DYN)', 'executable (EXEC)', 'executable (DYN, PIE; interpreter PATH)'."""
    if elf.interpreter is None:
        return f"{file_kind(elf)} ({elf.file_type})"
    pie = ", PIE" if elf.file_type == "DYN" else ""
    return f"executable ({elf.file_type}{pie}; interpreter {printable(elf.interpreter)})"


def coverage_text(manifest: Manifest) -> str:
    """What the artifacts cover, in words: the difference matters to whoever reads a 1.0 manifest."""
    if manifest.coverage == COVERAGE_ALL:
        return "all (every file but RECORD, the manifest and what installers add)"
    return "native (native files only, as schema 1.0 manifests; other files rely on RECORD)"


def plugin_json(plugin: Plugin) -> dict[str, Any]:
    """A plugin's contract: what the library said (``captured``) and what the vendor ``declared``."""
    info = plugin.info
    return {
        "path": plugin.path,
        "api": plugin.api,
        "captured": bool(info and info.captured),
        "reason_code": info.reason_code if info else "not-recorded",
        "reported_by": "plugin" if info and info.captured else None,
        "ran_in": info.ran_in if info else None,
        "info": schema.encode(info) if info else None,
        "declared": schema.encode(plugin.contract) if plugin.contract else None,
    }


def plugin_lines(plugin: Plugin) -> list[str]:
    """What the library registers (captured at build time) and what its vendor declared."""
    info, contract = plugin.info, plugin.contract
    if info is None:
        lines = ["captured:  nothing recorded (a manifest before schema 1.2)"]
    elif not info.captured:
        lines = [f"captured:  no ({info.reason_code}: {info.reason})"]
    else:
        against = f", against {info.libtriton}" if info.libtriton else ""
        lines = [f"captured:  {info.name} {info.version}, plugin API {info.api_version}, "
                 f"built for Triton {info.triton_version}{against}",
                 f"  as reported by the plugin ({reported_where(info)})",
                 f"  passes:   {', '.join(f'{p.name} {p.version}' for p in info.passes) or 'none'}",
                 f"  dialects: {', '.join(f'{d.name} {d.version}' for d in info.dialects) or 'none'}",
                 f"  ops:      {', '.join(info.ops) or 'none'}"]
    if contract is None:
        return [*lines, "declared:  nothing (no [[tool.backend-packager.plugins]] entry)"]
    placement = "; ".join(p.text() for p in contract.passes) or "no placement"
    return [*lines, f"declared:  triton {contract.triton or '(any)'}, phase {contract.phase}, "
                    f"on-failure {contract.on_failure}; passes: {placement}"]
