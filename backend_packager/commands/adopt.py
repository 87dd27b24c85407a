"""``backend-packager adopt``: sign an installed distribution in place, or write its wheel.

A platform team whose Triton came preinstalled (a container image, a GPU machine) has no
wheel to migrate. ``adopt`` takes the distribution as it is installed, in three steps:

1. **Check** every row of its RECORD (PEP 376, and the "Recording installed projects"
   specification) against the file on disk, reading the installed tree as hostile input
   with the runtime's own rules (:mod:`triton_backend_runtime.site.installed`): a plain relative
   path inside the site-packages directory, whose directory does not resolve outside it
   through a symlink; a regular file, opened without following a final symlink and without
   blocking; its size compared with RECORD's before any read, and no more read than that.
   Code in the distribution's packages that RECORD does not list is refused too (the
   runtime would refuse it as ``verify.unlisted``). Any difference refuses the adoption,
   listing every file. What the installer generated is not part of the wheel and is left
   out unread: the bytecode it compiled (``__pycache__/*.pyc``, recorded without a hash) and
   the wrappers of the distribution's console and GUI scripts (``bin/NAME`` outside
   site-packages, where the entry points say).
2. **Plan and seal** exactly as ``migrate`` does: the checked files become a
   :class:`~backend_packager.wheel.reader.WheelContents`, planned by
   :func:`~backend_packager.commands.migrate.plan_migration` (backends from the ``triton.backends``
   entry points, else the ``triton/backends/<name>/`` directories, then declared as entry
   points), checked by :func:`~backend_packager.rewrite.check_coverage` and signed by
   :func:`~backend_packager.manifest.signing.seal`. ``entry_points.txt`` is rewritten only when its
   meaning changes.
3. **Write in place**, each file whole or not at all (the one atomic writer): the manifest
   first, then ``entry_points.txt``, RECORD last. An interrupted run is finished by running
   ``adopt`` again with the same key: a file adopt writes (the manifest, ``entry_points.txt``)
   that differs from RECORD is accepted when the manifest on disk is signed by that key and
   vouches for it as it is.

Plugins (:mod:`.plugininfo`): as with ``migrate``, no plugin code runs unless asked
(``--capture-plugins``); then what each says about itself is captured in the same sandbox,
from the installed files in place, each held to the file as hashed (:class:`InstalledFiles`);
a plugin that ships no ``libtriton.so`` is called against the one installed beside it.

``--wheel-out DIR`` leaves the installed files alone and writes a wheel instead: the checked
files, read again and compared with what was checked, into a plain wheel, which ``migrate``
itself then signs into ``DIR``. The plain wheel is written unnamed into a scratch directory
of ``DIR`` that carries the pid; one a killed run left is removed by the next.

``--against WHEEL|INDEX``: RECORD on disk is what the installer wrote, and whoever changed
an installed file could rewrite it to match; :func:`check_against` also requires every
checked file to be the published wheel's member, byte for byte (:mod:`.published`).

Where to look: the site-packages directory given, else the interpreter's purelib and
platlib (sysconfig), searched in that order; a distribution found in both is refused.
"""

from __future__ import annotations

import dataclasses
import email.parser
import hashlib
import os
import posixpath
import shutil
import stat
import tempfile
import time
import zipfile
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from email.message import Message
from pathlib import Path
from typing import BinaryIO

from triton_backend_runtime.base import (
    BACKENDS_GROUP,
    MANIFEST_FILENAME,
    TrustError,
    VerifyError,
    atomic_output,
    canonicalize_name,
    is_shared_library,
    read_chunks,
    write_atomic,
)
from triton_backend_runtime.manifest import Artifact, ElfInfo, Plugin, is_installer_file
from triton_backend_runtime.site import (
    CHUNK,
    MAX_WALK_ENTRIES,
    Confinement,
    open_installed,
    read_bounded,
    walk_files,
    wheel_path_parts,
)
from triton_backend_runtime.trust import TrustStore, dsse, manifest_from_statement

from ..base import ElfError, InputError, InstalledError, fsutil, source_date_epoch
from ..formats import entrypoints, records
from ..manifest import Injection, SigningKey, plugininfo, seal
from ..rewrite import check_coverage
from ..scanning import ELF_MAGIC, artifact_from_bytes, scan_elf
from ..wheel import FOREIGN_BINARY, WheelContents, escape_name, replaced_members
from . import published
from .migrate import Options as MigrateOptions
from .migrate import Outcome, migrate_wheel, plan_migration

#: RECORD, METADATA, WHEEL, entry_points.txt larger than these are not a distribution's own.
MAX_RECORD_BYTES = 16 << 20
MAX_METADATA_BYTES = 4 << 20
#: ``--wheel-out``'s scratch directories in the output directory: PREFIX + pid + "-" + random + ".tmp".
SCRATCH_PREFIX = ".backend-packager-adopt."
#: Where installers put script wrappers, relative to the scheme's prefix.
SCRIPT_DIRS = ("bin", "Scripts")
_SCRIPT_GROUPS = ("console_scripts", "gui_scripts")
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


@dataclass
class Installed:
    """One installed distribution: where it is, its metadata, and its RECORD rows in order."""

    site: str
    dist_info: str  # the directory's name, as wheel paths start
    metadata: Message
    wheel: Message
    rows: list[records.RecordRow]
    entry_points: entrypoints.EntryPoints

    def full(self, path: str) -> str:
        return os.path.join(self.site, *path.split("/"))

    @property
    def manifest_path(self) -> str:
        return f"{self.dist_info}/{MANIFEST_FILENAME}"


@dataclass
class Adoption(Outcome):
    """What happened to one installed distribution (``migrate``'s outcome, plus what adopt saw)."""

    mismatches: list[TrustError] = field(default_factory=list)
    written: list[str] = field(default_factory=list)
    skipped: int = 0  # rows for files the installer generated (bytecode, script wrappers)

    def as_dict(self) -> dict[str, object]:
        return {**super().as_dict(), "mismatches": [e.as_dict() for e in self.mismatches],
                "written": self.written, "skipped": self.skipped}


def adopt(sites: Path | Sequence[Path], name: str, key: SigningKey, *, wheel_out: Path | None = None,
          against: str | None = None, jobs: int = 1, capture: plugininfo.Policy = "off") -> Adoption:
    """Adopt the distribution ``name`` installed in ``sites`` (one site-packages directory, or
    several to search: :func:`find_site`); errors land in the outcome. ``capture``: whether
    and where its plugins' code runs to ask them (:data:`.plugininfo.Policy`; not by default)."""
    searched = [sites] if isinstance(sites, Path) else list(sites)
    outcome = Adoption(searched[0] / name)
    started = time.perf_counter()
    try:
        site = find_site(searched, name)
        outcome.source = site / name
        installed = read_installed(site, name)
        outcome.source = Path(installed.full(installed.dist_info))
        checked = check_installed(installed, key, jobs, outcome)
        if against is not None:
            check_against(installed, checked, key, against, outcome)
        if wheel_out is not None:
            _adopt_into_wheel(installed, checked, wheel_out, key, jobs, outcome, capture)
        else:
            _adopt_in_place(installed, checked, key, outcome, capture)
    except TrustError as exc:
        outcome.error, outcome.status = exc, "failed"
    except OSError as exc:  # no space left, a read-only .dist-info: this distribution's failure
        where = exc.filename or str(outcome.source)
        outcome.error, outcome.status = InstalledError("os", str(where), exc.strerror or str(exc)), "failed"
    outcome.seconds = time.perf_counter() - started
    return outcome


# --- locate and read -------------------------------------------------------------------------


def find_site(sites: list[Path], name: str) -> Path:
    """The one of ``sites`` that holds ``name``'s ``.dist-info``. Searching several (an
    interpreter's purelib and platlib: pip puts a wheel that is not ``Root-Is-Purelib``, as
    Triton's, in platlib), a directory that does not exist is skipped, and a distribution
    found in two is refused: which one is imported depends on ``sys.path``, not on adopt."""
    found = [site for site in sites if _dist_infos(site, name, missing_ok=len(sites) > 1)]
    where = str(sites[0] / name)
    if not found:
        searched = " and ".join(str(s) for s in sites)
        raise InputError("not-installed", where, f"no installed distribution of that name in {searched}")
    if len(found) > 1:
        raise InputError("ambiguous", where, f"installed in {' and '.join(map(str, found))}: "
                         "name the one to adopt with --site-packages")
    return found[0]


def read_installed(site: Path, name: str) -> Installed:
    """The one ``.dist-info`` for ``name`` in ``site`` (PEP 503 names), its metadata read within bounds."""
    dist_info = _locate(site, name)
    full = os.path.join(site, dist_info)
    try:
        Confinement(str(site)).check(os.path.join(full, "RECORD"))
    except VerifyError as exc:
        raise InstalledError("path", full, exc.detail) from None
    metadata = _headers(full, "METADATA", ("Name", "Version"))
    if canonicalize_name(metadata["Name"]) != canonicalize_name(name):
        raise InstalledError("metadata", os.path.join(full, "METADATA"), f"names {metadata['Name']!r}, not {name!r}")
    record_text = _text(os.path.join(full, "RECORD"), MAX_RECORD_BYTES)
    if record_text is None:
        raise InstalledError("record", os.path.join(full, "RECORD"), "no RECORD: nothing to check the files against")
    rows = _record_rows(record_text, os.path.join(full, "RECORD"))
    eps_path = os.path.join(full, "entry_points.txt")
    eps_text = _text(eps_path, MAX_METADATA_BYTES)
    eps = entrypoints.parse(eps_text, eps_path) if eps_text else {}
    return Installed(str(site), dist_info, metadata, _headers(full, "WHEEL", ("Wheel-Version", "Tag")), rows, eps)


def _locate(site: Path, name: str) -> str:
    found = _dist_infos(site, name)
    if not found:
        raise InputError("not-installed", str(site / name), "no installed distribution of that name here")
    if len(found) > 1:
        raise InputError("ambiguous", str(site / name), f"several installed: {', '.join(found)}")
    return found[0]


def _dist_infos(site: Path, name: str, *, missing_ok: bool = False) -> list[str]:
    """The ``.dist-info`` directories in ``site`` whose name is ``name``'s (PEP 503)."""
    try:
        entries = os.listdir(site)
    except FileNotFoundError:
        if missing_ok:
            return []
        raise InputError("site-packages", str(site), "no such directory") from None
    except OSError as exc:
        raise InputError("site-packages", str(site), f"cannot list the directory: {exc.strerror}") from None
    want = canonicalize_name(name)
    return sorted(e for e in entries
                  if e.endswith(".dist-info") and canonicalize_name(e[: -len(".dist-info")].split("-")[0]) == want)


def _text(path: str, limit: int) -> str | None:
    """A small regular file's text; None when absent. Never follows a symlink, never blocks."""
    try:
        data = read_bounded(path, limit)
    except VerifyError as exc:
        if exc.code == "verify.missing":
            return None
        raise InstalledError(exc.code.split(".", 1)[1], path, exc.detail) from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise InstalledError("metadata", path, "not UTF-8") from None


def _headers(dist_info: str, leaf: str, required: tuple[str, ...]) -> Message:
    path = os.path.join(dist_info, leaf)
    text = _text(path, MAX_METADATA_BYTES)
    message = email.parser.HeaderParser().parsestr(text or "")
    for header in required:
        if not message.get(header):
            raise InstalledError("metadata", path, f"no {header} header" if text is not None else "missing")
    return message


def _record_rows(text: str, where: str) -> list[records.RecordRow]:
    """RECORD's rows in order; a path listed twice is refused (which row would be checked?)."""
    rows = records.parse_rows(text, where)
    repeated = len(rows) - len({row.path for row in rows})
    if repeated:
        raise InstalledError("record", where, f"lists {repeated} path(s) more than once")
    return rows


# --- check -----------------------------------------------------------------------------------


def check_installed(installed: Installed, key: SigningKey, jobs: int, outcome: Adoption) -> list[Checked]:
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
    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
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
        fd, st = _open(full, confine)
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
    fd, st = _open(full, confine)
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


def _open(full: str, confine: Confinement | None) -> tuple[int, os.stat_result]:
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
    for chunk in read_chunks(fd, size):  # 1 MiB: stays in cache (8 MiB measured slower)
        if len(head) < 64:
            head += chunk[: 64 - len(head)]
        digest.update(chunk)
        left -= len(chunk)
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
        scan = early if early is not None and _identity(early.st) == _identity(hashed.st) else _rescan(hashed)
        artifact, warning = dataclasses.replace(artifact, elf=scan.elf), scan.warning
    elif hashed.head.startswith(FOREIGN_BINARY):
        warning = f"{full}: unsupported binary format (PE or Mach-O): listed, not scanned"
    elif is_shared_library(row.path):
        warning = f"{full}: named like a shared library but not ELF: listed, not scanned"
    return Checked(row.path, full, artifact, hashed.st.st_mode, hashed.st.st_mtime, warning, _identity(hashed.st))


def _rescan(hashed: Hashed) -> Scan:
    fd, st = _open(hashed.full, None)  # the file confined and hashed, if it is still the same
    try:
        if _identity(st) != _identity(hashed.st):
            raise InstalledError("changed", hashed.full, "changed while it was being checked")
        return _scan_fd(fd, st, hashed.full)
    except OSError as exc:
        raise InstalledError("read", hashed.full, f"cannot read: {exc.strerror}") from None
    finally:
        os.close(fd)


def _identity(st: os.stat_result) -> tuple[int, int, int, int, int]:
    return st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns


def _unrecorded(installed: Installed, recorded: list[str]) -> list[TrustError]:
    """Code in the top-level packages of the ``recorded`` files that RECORD does not list
    (bytecode in ``__pycache__`` aside: the runtime never runs it in place of a verified source)."""
    known = set(recorded)
    tops = {os.path.join(installed.site, p.split(os.sep)[0])
            for p in (os.path.relpath(f, installed.site) for f in recorded)}
    # The packages the entry points name, even when RECORD lists none of their files.
    tops |= {os.path.join(installed.site, v.split(":")[0].split(".")[0].strip())
             for v in installed.entry_points.get(BACKENDS_GROUP, {}).values()}
    tops = {t for t in tops if not t.endswith((".dist-info", ".data")) and os.path.isdir(t)}
    budget = [MAX_WALK_ENTRIES]
    found: list[TrustError] = []
    try:
        for top in sorted(tops):
            for here, names in walk_files(top, budget):
                if os.path.basename(here) == "__pycache__":
                    continue
                found += [InstalledError("unrecorded", p, "code that RECORD does not list")
                          for n in names if _is_code(n) and (p := os.path.join(here, n)) not in known]
    except VerifyError as exc:
        found.append(InstalledError("walk-limit", exc.path, exc.detail))
    return found


def _is_code(name: str) -> bool:
    return name.endswith(_CODE_SUFFIXES) or is_shared_library(name)


def _finish_interrupted(installed: Installed, key: SigningKey, failed: list[TrustError],
                        checked: list[Checked]) -> list[TrustError]:
    """Mismatches that an interrupted adopt with this key explains, taken out of ``failed``.

    Only the files adopt writes qualify, and only when the manifest on disk is signed by
    ``key`` (only its holder can have written it) and lists each as it now is.
    """
    ours = {installed.full(p): p for p in (installed.manifest_path, f"{installed.dist_info}/entry_points.txt")}
    candidates = [e for e in failed if e.path in ours and e.code in ("installed.sha256", "installed.size")]
    if not candidates:
        return failed
    vouched = _own_manifest(installed, key)
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


def _own_manifest(installed: Installed, key: SigningKey) -> dict[str, tuple[str, int]] | None:
    """path -> (sha256, size) from the manifest on disk, if ``key`` signed it; else None."""
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
    return Checked(path, full, artifact_from_bytes(path, data), st.st_mode, st.st_mtime, identity=_identity(st))


def check_against(installed: Installed, checked: list[Checked], key: SigningKey, against: str,
                  outcome: Adoption) -> None:
    """The checked files must be those of the published release ``against`` names (a wheel,
    or the same wheel in a simple index: :mod:`.published`), not only RECORD's: every
    difference is listed in ``outcome`` and the adoption refused (``installed.differs``).
    Not compared: RECORD, the files installers write, the manifest (this adoption replaces
    it), and an ``entry_points.txt`` an adopt with this key wrote (its manifest vouches for it)."""
    wanted = published.Wanted(installed.metadata["Name"], installed.metadata["Version"],
                              installed.wheel.get("Build"), frozenset(installed.wheel.get_all("Tag") or []))
    with tempfile.TemporaryDirectory(prefix="backend-packager-against.") as work:
        release = published.load(against, wanted, Path(work))
    files = {c.path: (c.artifact.sha256, c.artifact.size) for c in checked if not is_installer_file(c.path)}
    skip = {f"{installed.dist_info}/RECORD", installed.manifest_path}
    entry_points = f"{installed.dist_info}/entry_points.txt"
    mine = files.get(entry_points)
    if mine is not None and release.files.get(entry_points) != mine:
        vouched = _own_manifest(installed, key) or {}
        if vouched.get(entry_points) == mine:  # written by an adopt with this key
            skip.add(entry_points)
    found = published.compare(release, files, {c.path: c.full for c in checked}, skip)
    if found:
        outcome.mismatches = found
        raise published.summary(found, release.source)


# --- plan and seal ---------------------------------------------------------------------------


def contents_of(installed: Installed, checked: list[Checked]) -> WheelContents:
    """The checked files as ``migrate``'s plan sees a wheel's: artifacts for every file but the
    ones installers write and the ones a rewrite replaces (RECORD, entry points, manifest)."""
    replaced = replaced_members(installed.dist_info)
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
        data = read_bounded(item.full, item.artifact.size)
        if hashlib.sha256(data).hexdigest() != item.artifact.sha256:
            raise InstalledError("changed", item.full, "changed since it was checked against RECORD")
        return data

    return read


def plan_and_seal(installed: Installed, checked: list[Checked], key: SigningKey,
                  outcome: Adoption, capture: plugininfo.Policy = "off") -> dict[str, bytes]:
    """``.dist-info`` path -> final bytes: the signed manifest and the files planned beside it."""
    contents = contents_of(installed, checked)
    injection = plan_migration(contents, None, source_date_epoch(), outcome)
    injection.manifest.plugins = capture_plugins(installed, checked, contents.artifacts, injection.manifest.plugins,
                                                 capture)
    outcome.warnings.extend(plugininfo.warnings(injection.manifest.plugins, str(outcome.source)))
    _keep_equivalent_entry_points(injection, contents.read_member)
    check_coverage(contents, injection, installed.full)
    return {installed.manifest_path: seal(injection.manifest, key), **injection.files}


@dataclass
class InstalledFiles:
    """The checked files as :mod:`.plugininfo` hands them to the child, in place: a copy of
    ``libtriton.so`` (500 MB) would cost most of what checking the whole install costs. Each
    is opened again as it was checked (confined, regular, no final symlink) and must be the
    file as hashed (device, inode, size, mtime and ctime); an empty placeholder stands for it
    in the plugin's private directory, onto which the sandbox's own code bind-mounts the file
    read-only, refusing any other inode than the one held (the plugin gets no descriptor into
    the real tree). After the calls each must still be as hashed: a write in between sets its ctime,
    which no unprivileged process can set back."""

    installed: Installed
    checked: dict[str, Checked]
    placed: list[tuple[int, Checked, Path]] = field(default_factory=list)

    def place(self, artifact: Artifact, into: Path, name: str) -> Path:
        item = self.checked.get(artifact.path)
        if item is None:
            raise InstalledError("changed", self.installed.full(artifact.path), "not among the files checked")
        if not plugininfo.plain_name(name):
            raise InstalledError("changed", item.full, f"{name[:80]!r} is not a plain file name to place it under")
        fd, st = _open(item.full, Confinement(self.installed.site))
        if _identity(st) != item.identity:
            os.close(fd)
            raise InstalledError("changed", item.full, "changed since it was checked against RECORD; not calling it")
        into.mkdir(mode=0o700, exist_ok=True)
        placeholder = into / name
        placeholder.touch(mode=0o600, exist_ok=False)
        self.placed.append((fd, item, placeholder))
        return placeholder

    def held(self) -> tuple[tuple[int, Path, Path], ...]:
        return tuple((fd, placeholder, Path(item.full)) for fd, item, placeholder in self.placed)

    def confirm(self) -> None:
        for fd, item, _ in self.placed:
            if _identity(os.fstat(fd)) != item.identity:
                raise InstalledError("changed", item.full, "changed while its plugin was being asked; not signing it")

    def close(self) -> None:
        for fd, _, _ in self.placed:
            os.close(fd)
        self.placed.clear()


def capture_plugins(installed: Installed, checked: list[Checked], artifacts: list[Artifact],
                    plugins: list[Plugin], policy: plugininfo.Policy = "off") -> list[Plugin]:
    """What each plugin says about itself (``tritonGetPluginInfo``), as ``migrate`` captures
    it from a wheel, in the same isolated child, from the installed files held to what was
    hashed (:class:`InstalledFiles`). A plugin that needs ``libtriton.so`` and ships none is
    called against the Triton installed beside it (the same site-packages), else the Triton
    importable here; it is ``captured: false``, with the reason, when it cannot be, and
    ``not-run`` unless ``policy`` asks for it."""
    if not plugins or policy == "off":
        return plugininfo.not_run(plugins)
    beside = _libtriton_beside(installed)
    files = InstalledFiles(installed, {c.path: c for c in checked})
    try:
        return plugininfo.capture_from(files, artifacts, plugins, libtriton=beside, policy=policy,
                                       label="installed beside it" if beside else plugininfo.BUILD_ENVIRONMENT)
    finally:
        files.close()


def _libtriton_beside(installed: Installed) -> Path | None:
    full = os.path.join(installed.site, *plugininfo.LIBTRITON_MEMBER.split("/"))
    try:
        Confinement(installed.site).check(full)
        fd, _ = open_installed(full)
    except VerifyError:
        return None
    os.close(fd)
    return Path(full)


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


# --- write -----------------------------------------------------------------------------------


def _adopt_in_place(installed: Installed, checked: list[Checked], key: SigningKey, outcome: Adoption,
                    capture: plugininfo.Policy = "off") -> None:
    files = plan_and_seal(installed, checked, key, outcome, capture)
    outcome.written = write_in_place(installed, files)
    outcome.status = "adopted" if outcome.status == "migrated" else outcome.status
    outcome.output = Path(installed.full(installed.manifest_path))
    outcome.signed_by = key.public.keyid


def write_in_place(installed: Installed, files: dict[str, bytes]) -> list[str]:
    """Write ``files`` into ``.dist-info``, the manifest first and RECORD last, each whole or
    not at all; a file that already holds its bytes is left alone. Returns the paths written."""
    written = []
    for path in sorted(files, key=lambda p: (p != installed.manifest_path, p)):
        full = installed.full(path)
        if _holds(full, files[path]):
            continue
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


def _adopt_into_wheel(installed: Installed, checked: list[Checked], out_dir: Path, key: SigningKey, jobs: int,
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
