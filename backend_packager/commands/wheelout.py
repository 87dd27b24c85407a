"""``adopt --wheel-out``: the checked files, read again and compared with what was checked,
written into a plain wheel in a scratch directory, which ``migrate`` then signs into the output."""

from __future__ import annotations

import hashlib
import os
import shutil
import stat
import tempfile
import time
import zipfile
from pathlib import Path
from typing import BinaryIO

from triton_backend_runtime.base import atomic_output
from triton_backend_runtime.manifest import is_installer_file
from triton_backend_runtime.site import CHUNK, open_installed

from ..base import InstalledError, fsutil
from ..formats import records
from ..manifest import SigningKey, plugininfo
from ..wheel import escape_name
from .installed import Adoption, Installed
from .migrate import Options as MigrateOptions
from .migrate import migrate_wheel
from .recordcheck import Checked

#: ``--wheel-out``'s scratch directories in the output directory: PREFIX + pid + "-" + random + ".tmp".
SCRATCH_PREFIX = ".backend-packager-adopt."


def adopt_into_wheel(installed: Installed, checked: list[Checked], out_dir: Path, key: SigningKey, jobs: int,
                      outcome: Adoption, capture: plugininfo.Policy = "off") -> None:
    """A plain wheel of the checked files in a scratch directory of ``out_dir``, then ``migrate``
    into ``out_dir``. The plain wheel is written unnamed (the one atomic writer) and named
    only when whole; the scratch directory carries this process's pid, and the next run
    removes those whose process is gone (a ``kill -9`` leaves one, never a wheel in ``out_dir``)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    fsutil.remove_orphan_dirs(out_dir, SCRATCH_PREFIX, ".tmp")  # a killed adopt's, pid gone
    scratch = Path(tempfile.mkdtemp(prefix=f"{SCRATCH_PREFIX}{os.getpid()}-", suffix=".tmp", dir=out_dir))
    try:
        plain = scratch / wheel_filename(installed)
        with atomic_output(str(plain), durable=False) as stream:
            write_plain_wheel(stream, installed, checked)
        migrated = migrate_wheel(plain, out_dir, key, jobs=jobs, options=MigrateOptions(capture=capture))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    for name in ("output", "status", "backends", "plugins", "artifacts", "native", "signed_by", "warnings"):
        setattr(outcome, name, getattr(migrated, name))
    if migrated.error is not None:
        raise migrated.error


def wheel_filename(installed: Installed) -> str:
    """``name-version[-build]-py-abi-plat.whl`` (the binary distribution format), the tags of
    WHEEL compressed into one set; refused when they are not one."""
    tags = sorted(set(installed.wheel.get_all("Tag") or []))
    where = installed.full(f"{installed.dist_info}/WHEEL")
    triples = [t.split("-") for t in tags]
    if any(len(t) != 3 or not all(t) for t in triples):
        raise InstalledError("tags", where, f"malformed Tag in {tags}")
    parts = [sorted({t[i] for t in triples}) for i in range(3)]
    if len(parts[0]) * len(parts[1]) * len(parts[2]) != len(tags):
        raise InstalledError("tags", where, f"the tags {tags} are not one compressed tag set; cannot name a wheel")
    build = installed.wheel.get("Build")
    name = escape_name(installed.metadata["Name"])
    fields = [name, installed.metadata["Version"], *([build] if build else []), *(".".join(p) for p in parts)]
    return "-".join(fields) + ".whl"


def write_plain_wheel(wheel: Path | BinaryIO, installed: Installed, checked: list[Checked]) -> None:
    """Every checked file but those installers write, each read again and compared with what
    was checked, and a RECORD of them: the wheel the distribution was installed from, less
    what the installer generated."""
    record = f"{installed.dist_info}/RECORD"
    members = [c for c in checked if not is_installer_file(c.path) and c.path != record]
    with zipfile.ZipFile(wheel, "w", zipfile.ZIP_DEFLATED) as archive:
        for item in members:
            _add_member(archive, item)
        rows = [records.RecordRow(c.path, c.artifact.sha256, c.artifact.size) for c in members]
        archive.writestr(record, records.render([*rows, records.RecordRow(record, None, None)]))


def _add_member(archive: zipfile.ZipFile, item: Checked) -> None:
    info = zipfile.ZipInfo(item.path, date_time=time.gmtime(max(item.mtime, 315532800))[:6])
    info.external_attr = (stat.S_IFREG | (0o755 if item.mode & 0o111 else 0o644)) << 16
    info.compress_type = zipfile.ZIP_DEFLATED
    info.file_size = item.artifact.size
    fd, _ = open_installed(item.full)
    digest = hashlib.sha256()
    with os.fdopen(fd, "rb") as source, archive.open(info, "w") as target:
        left = item.artifact.size
        while left > 0 and (chunk := source.read(min(CHUNK, left))):
            digest.update(chunk)
            target.write(chunk)
            left -= len(chunk)
    if digest.hexdigest() != item.artifact.sha256:
        raise InstalledError("changed", item.full, "changed since it was checked against RECORD")
