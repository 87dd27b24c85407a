"""``adopt`` in place: the checked files planned and sealed as ``migrate`` does, then the manifest,
``entry_points.txt``, the SBOM (``sboms/triton-backend.cdx.json``) and RECORD written into the
``.dist-info``, each whole or not at all."""

from __future__ import annotations

import dataclasses
import hashlib
import os
from collections.abc import Callable
from pathlib import Path

from triton_backend_runtime.base import VerifyError, write_atomic
from triton_backend_runtime.manifest import is_installer_file
from triton_backend_runtime.site import read_bounded
from triton_backend_runtime.trust import dsse

from ..base import InstalledError, source_date_epoch
from ..formats import entrypoints, records
from ..manifest import Injection, Keyless, SigningKey, keyless_files, plugininfo, regenerated_members, seal
from ..rewrite import check_coverage
from ..scanning import artifact_from_bytes
from ..wheel import WheelContents, bundle_member
from .installed import Adoption, Installed
from .migrate import add_sbom, plan_migration
from .plugincapture import capture_plugins
from .recordcheck import Checked

__all__ = ["adopt_in_place", "contents_of", "plan_and_seal", "write_in_place"]


def adopt_in_place(installed: Installed, checked: list[Checked], key: SigningKey | None, outcome: Adoption,
                   capture: plugininfo.Policy = "off", keyless: Keyless | None = None) -> None:
    files = plan_and_seal(installed, checked, key, outcome, capture, keyless)
    outcome.written = write_in_place(installed, files)
    outcome.status = "adopted" if outcome.status == "migrated" else outcome.status
    outcome.output = Path(installed.full(installed.manifest_path))
    outcome.signed_by = key.public.keyid if key else None
    outcome.sigstore = keyless is not None


def contents_of(installed: Installed, checked: list[Checked]) -> WheelContents:
    """The checked files as ``migrate``'s plan sees a wheel's: artifacts for every file but the
    ones installers write and the ones a rewrite replaces (RECORD, entry points, manifest, SBOM)."""
    replaced = regenerated_members(installed.dist_info)
    by_path = {c.path: c for c in checked}
    artifacts = [c.artifact for c in checked if not is_installer_file(c.path) and c.path not in replaced]
    existing = by_path.get(installed.manifest_path)
    return WheelContents(
        name=installed.metadata["Name"],
        version=installed.metadata["Version"],
        tags=list(installed.wheel.get_all("Tag") or []),
        dist_info=installed.dist_info,
        names=sorted(by_path),
        artifacts=artifacts,
        entry_points=installed.entry_points,
        metadata=installed.metadata,
        existing_manifest=read_bounded(existing.full, dsse.MAX_ENVELOPE_BYTES) if existing else None,
        read_member=_reader(by_path),
        warnings=[c.warning for c in checked if c.warning],
    )


def _reader(by_path: dict[str, Checked]) -> Callable[[str], bytes | None]:
    """Reads a checked file again for the plan (``compiler.py``, ``driver.py``): only a file
    that was checked, and only if it still has the bytes that were checked."""

    def read(path: str) -> bytes | None:
        item = by_path.get(path)
        if item is None:
            return None
        try:
            data = read_bounded(item.full, item.artifact.size)
        except VerifyError as exc:  # grown, gone or replaced since
            raise InstalledError("changed", item.full, f"changed since it was checked against RECORD: "
                                 f"{exc.detail}") from None
        if hashlib.sha256(data).hexdigest() != item.artifact.sha256:
            raise InstalledError("changed", item.full, "changed since it was checked against RECORD")
        return data

    return read


def plan_and_seal(installed: Installed, checked: list[Checked], key: SigningKey | None, outcome: Adoption,
                  capture: plugininfo.Policy = "off", keyless: Keyless | None = None) -> dict[str, bytes]:
    """``.dist-info`` path -> final bytes: the signed manifest, its Sigstore bundle with
    ``keyless``, and the files planned beside it, the SBOM of the complete plan last."""
    contents = contents_of(installed, checked)
    injection = plan_migration(contents, None, source_date_epoch(), outcome)
    injection.manifest.plugins = capture_plugins(installed, checked, contents.artifacts, injection.manifest.plugins,
                                                 capture)
    outcome.warnings.extend(plugininfo.warnings(injection.manifest.plugins, str(outcome.source)))
    _keep_equivalent_entry_points(injection, contents.read_member)
    injection = add_sbom(injection, installed.dist_info, outcome)
    check_coverage(contents, injection, installed.full)
    bundle = bundle_member(installed.dist_info)
    return {installed.manifest_path: seal(injection.manifest, key), **injection.files,
            **keyless_files(injection.manifest, keyless, bundle, installed.full(bundle))}


def _keep_equivalent_entry_points(injection: Injection, read: Callable[[str], bytes | None]) -> None:
    """Keep the installed ``entry_points.txt`` when the planned one means the same: adopt
    changes only what it must (the manifest then vouches for the installed bytes)."""
    for path, planned in list(injection.files.items()):
        if not path.endswith("/entry_points.txt"):
            continue
        current = read(path)
        if current is None or current == planned:
            continue
        parsed = entrypoints.parse(current.decode("utf-8", "replace"), path)
        if parsed == entrypoints.parse(planned.decode("utf-8"), path):
            injection.files[path] = current
            injection.manifest.artifacts = [artifact_from_bytes(path, current) if a.path == path else a
                                            for a in injection.manifest.artifacts]


def write_in_place(installed: Installed, files: dict[str, bytes]) -> list[str]:
    """Write ``files`` into ``.dist-info``, the manifest first and RECORD last, each whole or
    not at all; a file that already holds its bytes is left alone. A Sigstore bundle of an earlier
    adopt that ``files`` does not replace signs another statement: removed first, and from RECORD.
    Returns the paths written (or removed)."""
    written = []
    stale = bundle_member(installed.dist_info)
    if stale not in files and os.path.lexists(installed.full(stale)):
        os.unlink(installed.full(stale))
        written.append(stale)
        installed = dataclasses.replace(installed, rows=[r for r in installed.rows if r.path != stale])
    for path in sorted(files, key=lambda p: (p != installed.manifest_path, p)):
        full = installed.full(path)
        if _holds(full, files[path]):
            continue
        os.makedirs(os.path.dirname(full), exist_ok=True)  # sboms/, the first time
        write_atomic(full, files[path])
        written.append(path)
    record = f"{installed.dist_info}/RECORD"
    write_atomic(installed.full(record), records.render(_updated_rows(installed, files)))
    return [*written, record]


def _holds(full: str, data: bytes) -> bool:
    try:
        return read_bounded(full, len(data)) == data
    except VerifyError:
        return False


def _updated_rows(installed: Installed, files: dict[str, bytes]) -> list[records.RecordRow]:
    """RECORD's rows in their order, with the rows of ``files`` replaced or added before RECORD's own."""
    new = {p: records.RecordRow(p, hashlib.sha256(d).hexdigest(), len(d)) for p, d in files.items()}
    own = f"{installed.dist_info}/RECORD"
    rows = [new.pop(r.path, r) for r in installed.rows if r.path != own]
    return [*rows, *(new[p] for p in sorted(new)), records.RecordRow(own, None, None)]

