"""Every file an installed distribution's RECORD lists, checked against the file on disk and
hashed (:class:`Checked`), with the runtime's rules; code RECORD does not list is refused, and
what an interrupted ``adopt`` with the same key wrote is accepted (``docs/platform/adopt.md``)."""

from __future__ import annotations

import dataclasses
import hashlib
import os
import posixpath
from concurrent.futures import as_completed
from dataclasses import dataclass

from triton_backend_runtime.base import BACKENDS_GROUP, TrustError, VerifyError, is_shared_library, read_views
from triton_backend_runtime.manifest import Artifact, ElfInfo
from triton_backend_runtime.site import (
    MAX_WALK_ENTRIES,
    Confinement,
    Distribution,
    RecordClaims,
    open_installed,
    read_bounded,
    walk_files,
    wheel_path_parts,
)
from triton_backend_runtime.trust import TrustStore, dsse, manifest_from_statement

from ..base import ElfError, InstalledError, checkpoint, worker_pool
from ..formats import records
from ..manifest import SigningKey, sbom_member
from ..scanning import ELF_MAGIC, artifact_from_bytes, scan_elf
from ..wheel import FOREIGN_BINARY
from .installed import Adoption, Installed

__all__ = [
    "Checked", "Hashed", "SCRIPT_DIRS", "Scan", "check_installed", "describe_file", "file_identity", "hash_file",
    "open_recorded", "own_manifest"
]

#: Where installers put script wrappers, relative to the scheme's prefix.
SCRIPT_DIRS = ("bin", "Scripts")
_SCRIPT_GROUPS = ("console_scripts", "gui_scripts")
#: Hashing reads: 1 MiB pieces stay in cache; a file of _LARGE_FILE or more is read in
#: _LARGE_PIECE ones (fewer waits for the GIL beside the scan; a few such files at once).
_PIECE = 1 << 20
_LARGE_FILE = 64 << 20
_LARGE_PIECE = 8 << 20
_CODE_SUFFIXES = (".py", ".pyw", ".pyc", ".so", ".pyd")


@dataclass(frozen=True)
class Checked:
    """One installed file, checked against RECORD: its record for the manifest, as read."""

    path: str  # as RECORD names it, relative to site-packages
    full: str  # on disk
    artifact: Artifact
    mode: int
    mtime: float
    warning: str | None = None
    identity: tuple[int, ...] = ()  # of the file as hashed: device, inode, size, mtime and ctime in ns


def check_installed(installed: Installed, key: SigningKey | None, jobs: int, outcome: Adoption) -> list[Checked]:
    """Every file RECORD lists, checked; raises listing every mismatch (in ``outcome`` too)."""
    wanted, mismatches = _classify(installed, outcome)
    mismatches += _unlisted_metadata(installed, {r.path for r in wanted})
    checked, failed = _check_all(installed, wanted, jobs)
    failed = _finish_interrupted(installed, key, failed, checked)
    mismatches += failed + _unrecorded(installed, [installed.full(r.path) for r in wanted])
    if mismatches:
        outcome.mismatches = sorted(mismatches, key=lambda e: e.path)
        more = f" (and {len(mismatches) - 1} more)" if len(mismatches) > 1 else ""
        first = outcome.mismatches[0]
        raise InstalledError("mismatch", first.path, f"{first.detail}{more}: the installed files differ from "
                             "RECORD; not signing them (reinstall the distribution)")
    return sorted(checked, key=lambda c: c.path)


def _classify(installed: Installed, outcome: Adoption) -> tuple[list[records.RecordRow], list[TrustError]]:
    """Rows to check, and rows refused outright; rows for generated files are counted, not read."""
    scripts = {n for g in _SCRIPT_GROUPS for n in installed.entry_points.get(g, {})}
    own_record = f"{installed.dist_info}/RECORD"
    wanted: list[records.RecordRow] = []
    refused: list[TrustError] = []
    for row in installed.rows:
        if row.path == own_record:
            continue
        if not _inside(row.path):
            if _is_script_wrapper(row.path, scripts):
                outcome.skipped += 1
            else:
                refused.append(InstalledError("path", row.path, "RECORD names a file outside site-packages "
                                              "(not a plain relative path); adopt reads only inside it"))
        elif row.sha256 is None:
            if _is_bytecode(row.path):
                outcome.skipped += 1
            else:
                refused.append(InstalledError("unhashed", installed.full(row.path), "RECORD gives no sha256"))
        elif row.size is None:
            refused.append(InstalledError("unsized", installed.full(row.path), "RECORD gives no size"))
        else:
            wanted.append(row)
    return wanted, refused


def _unlisted_metadata(installed: Installed, listed: set[str]) -> list[TrustError]:
    """METADATA and WHEEL, and ``entry_points.txt`` when present, must be among the rows checked:
    the plan reads them, and a RECORD that leaves them out is not this distribution's."""
    leaves = ["METADATA", "WHEEL"]
    if os.path.lexists(installed.full(f"{installed.dist_info}/entry_points.txt")):
        leaves.append("entry_points.txt")
    return [InstalledError("unrecorded", installed.full(path), "RECORD does not list this metadata file")
            for path in (f"{installed.dist_info}/{leaf}" for leaf in leaves) if path not in listed]


def _inside(path: str) -> bool:
    try:
        wheel_path_parts(path, path)
    except VerifyError:
        return False
    return True


def _is_script_wrapper(path: str, scripts: set[str]) -> bool:
    """``../../../bin/NAME``: what installers write for a console or GUI script entry point."""
    parts = posixpath.normpath(path).split("/")
    name = parts[-1].removesuffix(".exe").removesuffix("-script.py")
    return len(parts) >= 2 and parts[-2] in SCRIPT_DIRS and name in scripts


def _is_bytecode(path: str) -> bool:
    return path.endswith(".pyc") and "/__pycache__/" in f"/{path}"


def _check_all(installed: Installed, rows: list[records.RecordRow],
               jobs: int) -> tuple[list[Checked], list[TrustError]]:
    """Check each row: ``jobs`` threads hash, biggest file first (reads and hashing release
    the GIL), while this thread scans the native files, biggest first too, so that the scan
    of the largest library overlaps its own hashing. A scan counts only for the file as hashed."""
    confine = Confinement(installed.site)
    order = sorted(rows, key=lambda r: -(r.size or 0))
    checked: list[Checked] = []
    failed: list[TrustError] = []
    with worker_pool(max(1, jobs)) as pool:
        futures = [pool.submit(hash_file, installed.full(row.path), row, confine) for row in order]
        early = {row.path: _scan_ahead(installed.full(row.path), row, confine) for row in order}
        for future in as_completed(futures):
            try:
                hashed = future.result()
                checked.append(describe_file(hashed, early.get(hashed.row.path)))
            except TrustError as exc:
                failed.append(exc)
    return checked, failed


@dataclass(frozen=True)
class Scan:
    """An ELF file's facts, or why it could not be scanned, and the file they were read from."""

    st: os.stat_result
    elf: ElfInfo | None
    warning: str | None


def _scan_ahead(full: str, row: records.RecordRow, confine: Confinement) -> Scan | None:
    """The scan of a native file, read before its hash is known (an optimisation only: it is
    used for the file as hashed, else the file is scanned again); None for anything else."""
    try:
        fd, st = open_recorded(full, confine)
    except TrustError:
        return None  # the hashing thread says why
    try:
        if st.st_size != row.size or os.pread(fd, 4, 0) != ELF_MAGIC:
            return None
        return _scan_fd(fd, st, full)
    except OSError:
        return None
    finally:
        os.close(fd)


def _scan_fd(fd: int, st: os.stat_result, full: str) -> Scan:
    """Scan in place, within the file's size as opened; an ELF error is a warning, not a refusal."""
    try:
        with open(fd, "rb", closefd=False) as stream:
            return Scan(st, scan_elf(stream, full, size=st.st_size), None)
    except ElfError as exc:
        return Scan(st, None, f"{full}: not scanned: {exc.detail}")


@dataclass(frozen=True)
class Hashed:
    """A file whose size and sha256 are RECORD's, as it was when hashed."""

    row: records.RecordRow
    full: str
    st: os.stat_result
    head: bytes


def hash_file(full: str, row: records.RecordRow, confine: Confinement) -> Hashed:
    """One installed file against its row: confined, regular, RECORD's size before any read,
    then its sha256 over exactly that many bytes."""
    assert row.sha256 is not None and row.size is not None
    fd, st = open_recorded(full, confine)
    try:
        if st.st_size != row.size:
            raise InstalledError("size", full, f"{st.st_size} bytes; RECORD says {row.size}")
        digest, head = _sha256(fd, row.size, full)
    except OSError as exc:
        raise InstalledError("read", full, f"cannot read: {exc.strerror}") from None
    finally:
        os.close(fd)
    if digest != row.sha256:
        raise InstalledError("sha256", full, "sha256 differs from RECORD (the file was changed)")
    return Hashed(row, full, st, head)


def open_recorded(full: str, confine: Confinement | None) -> tuple[int, os.stat_result]:
    try:
        if confine is not None:
            confine.check(full)
        return open_installed(full)
    except VerifyError as exc:
        detail = "listed in RECORD but not installed" if exc.code == "verify.missing" else exc.detail
        raise InstalledError(exc.code.split(".", 1)[1], full, detail) from None


def _sha256(fd: int, size: int, full: str) -> tuple[str, bytes]:
    """sha256 of exactly ``size`` bytes (never more), and the first 64 of them."""
    digest = hashlib.sha256()
    head = b""
    left = size
    for view in read_views(fd, size, _LARGE_PIECE if size >= _LARGE_FILE else _PIECE):
        checkpoint()
        if len(head) < 64:
            head += bytes(view[: 64 - len(head)])
        digest.update(view)
        left -= len(view)
    if left:
        raise InstalledError("size", full, "shorter than RECORD says (truncated while read)")
    return digest.hexdigest(), head


def describe_file(hashed: Hashed, early: Scan | None = None) -> Checked:
    """The artifact record, as the wheel writer makes it: ELF facts for a native file (scanned
    in place, from the file as hashed), or why a native-looking file was listed without them."""
    row, full = hashed.row, hashed.full
    assert row.sha256 is not None and row.size is not None
    artifact, warning = Artifact(row.path, row.sha256, row.size), None
    if hashed.head[:4] == ELF_MAGIC:
        scan = early if early is not None and file_identity(early.st) == file_identity(hashed.st) else _rescan(hashed)
        artifact, warning = dataclasses.replace(artifact, elf=scan.elf), scan.warning
    elif hashed.head.startswith(FOREIGN_BINARY):
        warning = f"{full}: unsupported binary format (PE or Mach-O): listed, not scanned"
    elif is_shared_library(row.path):
        warning = f"{full}: named like a shared library but not ELF: listed, not scanned"
    return Checked(row.path, full, artifact, hashed.st.st_mode, hashed.st.st_mtime, warning, file_identity(hashed.st))


def _rescan(hashed: Hashed) -> Scan:
    fd, st = open_recorded(hashed.full, None)  # the file confined and hashed, if it is still the same
    try:
        if file_identity(st) != file_identity(hashed.st):
            raise InstalledError("changed", hashed.full, "changed while it was being checked")
        return _scan_fd(fd, st, hashed.full)
    except OSError as exc:
        raise InstalledError("read", hashed.full, f"cannot read: {exc.strerror}") from None
    finally:
        os.close(fd)


def file_identity(st: os.stat_result) -> tuple[int, int, int, int, int]:
    return st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns


def _unrecorded(installed: Installed, recorded: list[str]) -> list[TrustError]:
    """Code in the top-level packages of the ``recorded`` files that RECORD does not list
    (bytecode in ``__pycache__`` aside: the runtime never runs it in place of a verified source),
    nor another installed distribution's RECORD, as the file is on disk: an add-on's files in
    Triton's ``_C/``, Triton's own around a backend installed in ``triton/backends/<name>/``.
    Each distribution is adopted on its own files; the runtime verifies the other on its own."""
    known = set(recorded)
    tops = {os.path.join(installed.site, p.split(os.sep)[0])
            for p in (os.path.relpath(f, installed.site) for f in recorded)}
    # The packages the entry points name, even when RECORD lists none of their files.
    tops |= {os.path.join(installed.site, v.split(":")[0].split(".")[0].strip())
             for v in installed.entry_points.get(BACKENDS_GROUP, {}).values()}
    tops = {t for t in tops if not t.endswith((".dist-info", ".data")) and os.path.isdir(t)}
    budget = [MAX_WALK_ENTRIES]
    unknown: list[str] = []
    limit: list[TrustError] = []
    try:
        for top in sorted(tops):
            for here, names in walk_files(top, budget):
                if os.path.basename(here) == "__pycache__":
                    continue
                unknown += [p for n in names if _is_code(n) and (p := os.path.join(here, n)) not in known]
    except VerifyError as exc:
        limit.append(InstalledError("walk-limit", exc.path, exc.detail))
    others = RecordClaims(Distribution("", "", installed.full(installed.dist_info), installed.site))
    return [InstalledError("unrecorded", p, "code that RECORD does not list") for p in unknown
            if others.owner(p) is None] + limit


def _is_code(name: str) -> bool:
    return name.endswith(_CODE_SUFFIXES) or is_shared_library(name)


def _finish_interrupted(installed: Installed, key: SigningKey | None, failed: list[TrustError],
                        checked: list[Checked]) -> list[TrustError]:
    """Mismatches that an interrupted adopt with this key explains, taken out of ``failed``.

    Only the files adopt writes qualify, and only when the manifest on disk is signed by
    ``key`` (only its holder can have written it) and lists each as it now is.
    """
    written = (installed.manifest_path, f"{installed.dist_info}/entry_points.txt", sbom_member(installed.dist_info))
    ours = {installed.full(p): p for p in written}
    candidates = [e for e in failed if e.path in ours and e.code in ("installed.sha256", "installed.size")]
    if not candidates:
        return failed
    vouched = own_manifest(installed, key)
    if vouched is None:
        return failed
    accepted = []
    for exc in candidates:
        path = ours[exc.path]
        data = read_bounded(exc.path, dsse.MAX_ENVELOPE_BYTES)
        if path == installed.manifest_path or vouched.get(path) == (hashlib.sha256(data).hexdigest(), len(data)):
            accepted.append(exc)
            checked.append(_checked_bytes(installed, path, data))
    return [e for e in failed if e not in accepted]


def own_manifest(installed: Installed, key: SigningKey | None) -> dict[str, tuple[str, int]] | None:
    """path -> (sha256, size) from the manifest on disk, if ``key`` signed it; else None (and
    without a key: a keyless-only adopt recognises no earlier run as its own)."""
    if key is None:
        return None
    where = installed.full(installed.manifest_path)
    try:
        envelope = dsse.decode(read_bounded(where, dsse.MAX_ENVELOPE_BYTES), where)
        verified = dsse.verify(envelope, TrustStore.of([key.public]), where)
        manifest = manifest_from_statement(verified.payload, where)
    except TrustError:
        return None
    return {a.path: (a.sha256, a.size) for a in manifest.artifacts}


def _checked_bytes(installed: Installed, path: str, data: bytes) -> Checked:
    full = installed.full(path)
    st = os.lstat(full)
    return Checked(path, full, artifact_from_bytes(path, data), st.st_mode, st.st_mtime, identity=file_identity(st))

