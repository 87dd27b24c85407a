"""The tamper matrix: the real triton 3.9.0, migrated and signed (every file of the
wheel listed, coverage "all"), installed in a site of its own; each case copies that site
with hard links (``cp -al``: fast, and the one file a case changes is replaced by a new
file, so the shared original is never written), changes one thing and runs ``import
triton`` in a subprocess (with a timeout: nothing may hang) under ``strict`` with the
signing key trusted. Each case asserts the reason code, and the file, that come out.

Under strict a core that does not verify stops ``import triton`` before ``triton/__init__``
runs: :class:`triton_backend_runtime.triton.core.CoreRejected` (an ImportError) carries the
reason. Every case runs with a cache directory of its own.
"""

from __future__ import annotations

import importlib.util
import json
import marshal
import os
import py_compile
import shutil
import stat
import subprocess
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from helpers.cli import migrate, run_cli
from helpers.csrc import ElfFixtures
from helpers.projects import ROOT
from helpers.venv import Venv
from helpers.wheels import fetch_wheel, pip_install
from triton_backend_runtime.autohook import PTH_NAME
from triton_backend_runtime.base.layout import MANIFEST_FILENAME
from triton_backend_runtime.trust import dsse
from triton_backend_runtime.trust.statement import manifest_from_statement

pytestmark = pytest.mark.triton_wheel

RUNTIME = ROOT / "runtime"
DIST_INFO = "triton-3.9.0.dist-info"
MANIFEST = f"{DIST_INFO}/{MANIFEST_FILENAME}"
COMPILER = "triton/backends/nvidia/compiler.py"
LIBDEVICE = "triton/backends/nvidia/lib/libdevice.10.bc"
LIBTRITON = "triton/_C/libtriton.so"
#: A cold import verifies ~1 GB; a case that hangs is a failure, not a stuck CI job.
TIMEOUT = 120
#: Where a FIFO is the input: verification refuses it without reading, so seconds suffice.
FIFO_TIMEOUT = 10

OUTCOME = """
import json, warnings
warnings.simplefilter("always")
table = error = None
try:
    import triton.backends as tb
    table = sorted(tb.backends)
except ImportError as exc:
    reason = getattr(exc, "reason", None)
    error = {"type": type(exc).__name__, "reason": vars(reason) if reason is not None else None, "text": str(exc)}
from triton_backend_runtime.loading import registry
r = registry.get()
print(json.dumps({"table": table, "error": error, "hashed": r.hashed_bytes, "report": r.report().to_dict()}))
"""


@dataclass
class Signed:
    """The pristine installs every case starts from (never written by a case)."""

    venv: Venv
    site: Path  # triton 3.9.0 migrated and signed with venv.key, pip --target
    attacker: Path  # a key nobody trusts


@pytest.fixture(scope="module")
def signed(venv: Venv, triton_wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Signed:
    out = tmp_path_factory.mktemp("tamper")
    wheel = migrate(triton_wheel, out / "wheels", venv.key, "--capture-plugins").signed()
    pip_install(venv.python, wheel, out / "site")
    attacker = out / "keys" / "attacker.pem"
    attacker.parent.mkdir()
    assert run_cli("keygen", "-o", str(attacker), "--comment", "attacker").returncode == 0
    return Signed(venv, out / "site", attacker)


@pytest.fixture(scope="module")
def triton38(venv: Venv, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """triton 3.8.0 migrated and signed with the same key (a validly signed older release)."""
    return migrate(fetch_wheel("triton==3.8.0"), tmp_path_factory.mktemp("triton38"), venv.key,
                   "--capture-plugins").signed()


@dataclass
class Case:
    signed: Signed
    elf: ElfFixtures
    dir: Path
    site: Path

    @property
    def venv(self) -> Venv:
        return self.signed.venv

    def path(self, rel: str) -> Path:
        return self.site / rel

    def pristine(self, rel: str) -> Path:
        return self.signed.site / rel

    def _unlink(self, rel: str) -> Path:
        """The case's own name for ``rel``, unlinked (it is a hard link to the original)."""
        path = self.path(rel)
        path.unlink()
        return path

    def write(self, rel: str, data: bytes) -> Path:
        """A new file in place of ``rel`` (mode kept): the shared original is untouched."""
        mode = stat.S_IMODE(self.pristine(rel).stat().st_mode)
        path = self._unlink(rel)
        path.write_bytes(data)
        path.chmod(mode)
        return path

    def flip(self, rel: str) -> Path:
        """One byte in the middle changed, same size (copied first: libtriton is 500 MB)."""
        path = self._unlink(rel)
        shutil.copy2(self.pristine(rel), path)
        size = path.stat().st_size
        with path.open("r+b") as stream:
            stream.seek(size // 2)
            byte = stream.read(1)
            stream.seek(size // 2)
            stream.write(bytes([byte[0] ^ 0x01]))
        return path

    def truncate(self, rel: str) -> Path:
        path = self._unlink(rel)
        shutil.copy2(self.pristine(rel), path)
        os.truncate(path, path.stat().st_size // 2)
        return path

    def add(self, rel: str, data: bytes) -> Path:
        path = self.path(rel)
        assert not path.exists()
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        return path

    def env(self, policy: str | None, trusted: bool, paths: tuple[Path, ...], runtime: bool,
            extra: dict[str, str]) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("TRITON_", "PYTHON"))}
        pythonpath = [*paths, self.site] + ([RUNTIME] if runtime else [])
        env.update(PYTHONPATH=os.pathsep.join(map(str, pythonpath)), XDG_CONFIG_HOME=str(self.dir / "config"),
                   TRITON_BACKEND_CACHE_DIR=str(self.dir / "cache"))
        if policy is not None:
            env["TRITON_BACKEND_POLICY"] = policy
        if trusted:
            env["TRITON_BACKEND_TRUSTED_KEYS"] = str(self.venv.pub)
        env.update(extra)
        return env

    def run(self, code: str = OUTCOME, *, flags: tuple[str, ...] = (), policy: str | None = "strict",
            trusted: bool = True, paths: tuple[Path, ...] = (), runtime: bool = True, cwd: Path | None = None,
            timeout: float = TIMEOUT, **extra: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(self.venv.python), *flags, "-c", code], capture_output=True, text=True, timeout=timeout,
            cwd=cwd or self.dir, env=self.env(policy, trusted, paths, runtime, extra),
        )

    def outcome(self, **kwargs: Any) -> dict[str, Any]:
        done = self.run(**kwargs)
        assert done.returncode == 0, done.stderr
        return dict(json.loads(done.stdout.strip().splitlines()[-1]), stderr=done.stderr)

    def cli(self, *args: str) -> None:
        code = f"import sys; from triton_backend_runtime.cli.main import main; sys.exit(main({list(args)!r}))"
        done = self.run(code, trusted=False, policy=None)
        assert done.returncode == 0, done.stderr


@pytest.fixture
def case(signed: Signed, elf_files: ElfFixtures, tmp_path: Path) -> Case:
    site = tmp_path / "site"
    subprocess.run(["cp", "-al", str(signed.site), str(site)], check=True)
    return Case(signed, elf_files, tmp_path, site)


def nvidia(result: dict[str, Any]) -> dict[str, Any]:
    (row,) = [r for r in result["report"]["backends"] if r["name"] == "nvidia"]
    return row


def assert_refused(result: dict[str, Any], code: str, path: Path | str, *, rejected: bool = True,
                   core: bool = True) -> None:
    """``import triton`` raised CoreRejected naming ``code`` and ``path`` (with ``core``); with
    ``rejected`` the distribution's own verdict (the nvidia backend's row) has that reason."""
    error = result["error"]
    assert error is not None and error["type"] == "CoreRejected", result["stderr"]
    assert result["table"] is None and result["report"]["core"] == error["reason"]
    if core:
        assert (error["reason"]["code"], error["reason"]["path"]) == (code, str(path)), error
        assert f"({code})" in error["text"] and str(path) in error["text"]
    if rejected:
        row = nvidia(result)
        assert (row["trust"], row["reason"]["code"], row["reason"]["path"]) == ("rejected", code, str(path))


def assert_verified(result: dict[str, Any]) -> None:
    assert result["error"] is None and result["table"] == ["amd", "nvidia"], result["stderr"]
    assert {r["trust"] for r in result["report"]["backends"]} == {"verified"}
    assert result["report"]["core"] is None


# -- one file changed, added, removed or replaced -------------------------------------------


def _pyc(code: Any, header: bytes) -> bytes:
    return importlib.util.MAGIC_NUMBER + header + marshal.dumps(code)


def timestamp_pyc(case: Case, rel: str) -> Path:
    """A pyc for ``rel`` with its source's mtime and size (the import system runs it) but
    other code: the source plus one line."""
    source = case.path(rel)
    st = source.stat()
    code = compile(source.read_text() + "\nimport sys\nsys.stderr.write('TAMPERED PYC RAN\\n')\n", str(source), "exec")
    header = (0).to_bytes(4, "little") + (int(st.st_mtime) & 0xFFFFFFFF).to_bytes(4, "little") + (
        (st.st_size & 0xFFFFFFFF).to_bytes(4, "little"))
    pyc = Path(importlib.util.cache_from_source(str(source)))
    pyc.unlink(missing_ok=True)
    pyc.parent.mkdir(exist_ok=True)
    pyc.write_bytes(_pyc(code, header))
    return pyc


def unchecked_hash_pyc(case: Case, rel: str) -> Path:
    """PEP 552 unchecked hash-based pyc: the import system never looks at the source."""
    source = case.path(rel)
    tampered = case.dir / "tampered.py"
    tampered.write_text(source.read_text() + "\nimport sys\nsys.stderr.write('TAMPERED PYC RAN\\n')\n")
    pyc = Path(importlib.util.cache_from_source(str(source)))
    pyc.unlink(missing_ok=True)
    py_compile.compile(str(tampered), cfile=str(pyc), dfile=str(source), doraise=True,
                       invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH)
    return pyc


def sourceless_pyc(case: Case, rel: str) -> Path:
    source = case.dir / "evil.py"
    source.write_text("import sys\nsys.stderr.write('SOURCELESS PYC RAN\\n')\n")
    target = case.path(rel)
    py_compile.compile(str(source), cfile=str(target), doraise=True)
    return target


def so_in_symlinked_dir(case: Case) -> Path:
    outside = case.dir / "outside"
    outside.mkdir()
    (outside / "libevil.so").write_bytes(case.elf.exports.read_bytes())
    (case.path("triton/language") / "vendored").symlink_to(outside, target_is_directory=True)
    return case.path("triton/language/vendored/libevil.so")


def symlink_to_original(case: Case, rel: str) -> Path:
    """The same bytes, through a symlink: an installed file is a regular file."""
    path = case._unlink(rel)
    path.symlink_to(case.pristine(rel))
    return path


def fifo(case: Case, rel: str) -> Path:
    path = case._unlink(rel)
    os.mkfifo(path)
    return path


def directory(case: Case, rel: str) -> Path:
    path = case._unlink(rel)
    path.mkdir()
    (path / "x").write_text("")
    return path


def directory_moved_outside(case: Case) -> Path:
    """nvidia/bin replaced by a symlink to an identical copy outside the install root."""
    rel = "triton/backends/nvidia/bin"
    subprocess.run(["cp", "-al", str(case.pristine(rel)), str(case.dir / "bin")], check=True)
    shutil.rmtree(case.path(rel))  # unlinks this copy's names only
    case.path(rel).symlink_to(case.dir / "bin", target_is_directory=True)
    _, statement = manifest_document(case)
    first = next(a["path"] for a in statement["predicate"]["artifacts"] if a["path"].startswith(rel + "/"))
    return case.path(first)  # the first listed file there is the one named


def edited_metadata(case: Case) -> Path:
    rel = f"{DIST_INFO}/METADATA"
    text = case.path(rel).read_bytes()
    assert b"\nVersion: 3.9.0\n" in text
    case.write(rel, text.replace(b"\nVersion: 3.9.0\n", b"\nVersion: 3.9.1\n", 1))
    return case.path(MANIFEST)  # the identity check names the manifest, before any hash


def redirected_entry_point(case: Case) -> Path:
    rel = f"{DIST_INFO}/entry_points.txt"
    text = case.path(rel).read_bytes()
    assert b"nvidia = triton.backends.nvidia" in text
    return case.write(rel, text.replace(b"nvidia = triton.backends.nvidia", b"nvidia = evil_backend", 1))


def manifest_document(case: Case) -> tuple[dsse.Envelope, dict[str, Any]]:
    envelope = dsse.decode(case.path(MANIFEST).read_bytes(), MANIFEST)
    return envelope, json.loads(envelope.payload)


def edited_manifest(case: Case) -> Path:
    """The attacker changes compiler.py and writes its new size and sha256 into the signed
    statement (subject and predicate), keeping the old signature."""
    import hashlib

    new = case.path(COMPILER).read_bytes() + b"\nprint('pwned')\n"
    case.write(COMPILER, new)
    envelope, statement = manifest_document(case)
    digest = hashlib.sha256(new).hexdigest()
    for artifact in statement["predicate"]["artifacts"]:
        if artifact["path"] == COMPILER:
            artifact.update(sha256=digest, size=len(new))
    for subject in statement["subject"]:
        if subject["name"] == COMPILER:
            subject["digest"]["sha256"] = digest
    payload = json.dumps(statement, sort_keys=True, separators=(",", ":")).encode()
    return case.write(MANIFEST, dsse.encode(dsse.Envelope(payload, envelope.payload_type, envelope.signatures)))


def resigned_by_attacker(case: Case) -> Path:
    """The same edit, signed again by a key nobody trusts: a sound manifest, unverified."""
    import hashlib

    from backend_packager.manifest import signing

    new = case.path(COMPILER).read_bytes() + b"\nprint('pwned')\n"
    case.write(COMPILER, new)
    envelope, _ = manifest_document(case)
    manifest = manifest_from_statement(envelope.payload, MANIFEST)
    (artifact,) = [a for a in manifest.artifacts if a.path == COMPILER]
    artifact.sha256, artifact.size = hashlib.sha256(new).hexdigest(), len(new)
    return case.write(MANIFEST, signing.seal_with(manifest, [signing.load(case.signed.attacker)]))


def truncated_manifest(case: Case) -> Path:
    data = case.path(MANIFEST).read_bytes()
    return case.write(MANIFEST, data[: len(data) // 2])


def deleted_manifest(case: Case) -> Path:
    case._unlink(MANIFEST)
    return case.path("triton/__init__.py")  # a legacy triton: nothing vouches for the core


def revoked_key(case: Case) -> Path:
    """The signing key revoked in the user's trust directory (the key itself still trusted
    through TRITON_BACKEND_TRUSTED_KEYS: revocations add up)."""
    keyid = case.venv.pub.read_text().split()[2]
    trusted = case.dir / "config" / "triton-backend" / "trusted"
    trusted.mkdir(parents=True)
    (trusted / "revoked").write_text(f"{keyid}\n")
    return case.path(MANIFEST)


Tamper = Callable[[Case], Path]
#: (id, tamper, the code it must produce, whether verification stops before the files are
#: located: signature and envelope problems; see test_core_reason_of_a_broken_manifest)
CASES: list[tuple[str, Tamper, str, bool]] = [
    ("code appended to nvidia/compiler.py", lambda c: c.write(
        COMPILER, c.path(COMPILER).read_bytes() + b"\nimport os; os.system('id')\n"), "verify.size", False),
    ("one byte of nvidia/compiler.py changed", lambda c: c.flip(COMPILER), "verify.sha256", False),
    ("libdevice.10.bc byte flipped", lambda c: c.flip(LIBDEVICE), "verify.sha256", False),
    ("ptxas truncated", lambda c: c.truncate("triton/backends/nvidia/bin/ptxas"), "verify.size", False),
    ("cuobjdump truncated", lambda c: c.truncate("triton/backends/nvidia/bin/cuobjdump"), "verify.size", False),
    ("libtriton.so byte flipped", lambda c: c.flip(LIBTRITON), "verify.sha256", False),
    ("extension module dropped into triton/language", lambda c: c.add(
        "triton/language/evil.cpython-311-x86_64-linux-gnu.so", c.elf.pyext.read_bytes()), "verify.unlisted", False),
    ("python module dropped into triton/language", lambda c: c.add(
        "triton/language/evil.py", b"import os\n"), "verify.unlisted", False),
    ("shared library dropped into triton/language", lambda c: c.add(
        "triton/language/libevil.so", c.elf.exports.read_bytes()), "verify.unlisted", False),
    ("shared library in a symlinked directory", so_in_symlinked_dir, "verify.unlisted", False),
    ("sourceless pyc dropped into triton/language", lambda c: sourceless_pyc(c, "triton/language/evil.pyc"),
     "verify.unlisted", False),
    ("new subpackage triton/evil", lambda c: c.add("triton/evil/__init__.py", b"import os\n"), "verify.unlisted",
     False),
    ("triton/language/core.py deleted", lambda c: c._unlink("triton/language/core.py"), "verify.missing", False),
    ("compiler.py replaced by a symlink to the same bytes", lambda c: symlink_to_original(c, COMPILER),
     "verify.not-regular", False),
    ("libtriton.so replaced by a symlink to the same bytes", lambda c: symlink_to_original(c, LIBTRITON),
     "verify.not-regular", False),
    ("a FIFO in place of triton/language/core.py", lambda c: fifo(c, "triton/language/core.py"),
     "verify.not-regular", False),
    ("a FIFO in place of libdevice.10.bc", lambda c: fifo(c, LIBDEVICE), "verify.not-regular", False),
    ("a directory in place of libdevice.10.bc", lambda c: directory(c, LIBDEVICE), "verify.not-regular", False),
    ("nvidia/bin a symlink to a copy outside the root", directory_moved_outside, "verify.path", False),
    ("METADATA version edited", edited_metadata, "verify.version", False),
    ("entry_points.txt points nvidia elsewhere", redirected_entry_point, "verify.size", False),
    ("manifest edited without re-signing", edited_manifest, "signature.signature", True),
    ("manifest envelope truncated", truncated_manifest, "signature.json", True),
    ("manifest replaced by a symlink", lambda c: symlink_to_original(c, MANIFEST), "verify.not-regular", True),
    ("signing key revoked", revoked_key, "signature.signature", True),
]


@pytest.mark.parametrize(("tamper", "code", "early"), [pytest.param(t, c, e, id=i) for i, t, c, e in CASES])
def test_tampered_install_refuses_the_core(case: Case, tamper: Tamper, code: str, early: bool) -> None:
    path = tamper(case)
    result = case.outcome(timeout=FIFO_TIMEOUT if "FIFO" in str(path) else TIMEOUT)
    assert_refused(result, code, path)
    assert "PYC RAN" not in result["stderr"]


@pytest.mark.parametrize("tamper", [timestamp_pyc, unchecked_hash_pyc], ids=["timestamp", "unchecked-hash"])
def test_a_pyc_beside_a_verified_source_never_runs(case: Case, tamper: Callable[[Case, str], Path]) -> None:
    """Bytecode is not used: the verified compiler.py's own code runs, whatever its pyc holds
    (a timestamp pyc the import system would take, or one it never checks against the source)."""
    tamper(case, COMPILER)
    result = case.outcome()
    assert result["error"] is None and result["table"] == ["amd", "nvidia"], result["stderr"]
    assert (nvidia(result)["trust"], nvidia(result)["state"]) == ("verified", "loaded")
    assert "PYC RAN" not in result["stderr"]


@pytest.mark.parametrize("tamper", [pytest.param(t, id=i) for i, t, _, e in CASES if e])
def test_core_reason_of_a_broken_manifest(case: Case, tamper: Tamper) -> None:
    path = tamper(case)
    result = case.outcome()
    assert result["error"]["reason"] == nvidia(result)["reason"]
    assert result["error"]["reason"]["path"] == str(path)


@pytest.mark.parametrize("member", [
    pytest.param(f"{DIST_INFO}/entry_points.txt", id="entry_points.txt"),
    pytest.param(f"{DIST_INFO}/METADATA", id="METADATA"),
])
def test_fifo_in_dist_info_does_not_hang(case: Case, member: str) -> None:
    path = fifo(case, member)
    # an unreadable entry_points.txt declares no backend: the core's refusal is the whole story
    readable = not member.endswith("entry_points.txt")
    assert_refused(case.outcome(timeout=FIFO_TIMEOUT), "verify.not-regular", path, rejected=readable)


# -- the manifest ---------------------------------------------------------------------------


def test_manifest_of_triton_380_signed_by_the_same_key(case: Case, triton38: Path) -> None:
    with zipfile.ZipFile(triton38) as wheel:
        older = wheel.read(f"triton-3.8.0.dist-info/{MANIFEST_FILENAME}")
    path = case.write(MANIFEST, older)
    result = case.outcome()
    assert_refused(result, "verify.version", path)
    assert "3.8.0" in result["error"]["reason"]["message"] and "3.9.0" in result["error"]["reason"]["message"]


def test_manifest_resigned_by_an_untrusted_key(case: Case) -> None:
    path = resigned_by_attacker(case)
    result = case.outcome()
    assert_refused(result, "policy.not-verified", path, rejected=False)
    assert nvidia(result)["trust"] == "unverified"
    assert "not a trusted key" in result["error"]["reason"]["message"]


def test_manifest_deleted_is_a_legacy_core(case: Case) -> None:
    path = deleted_manifest(case)
    result = case.outcome()
    assert_refused(result, "policy.not-verified", path, rejected=False)
    assert nvidia(result)["trust"] == "legacy"


# -- shadowing: another `triton` earlier on sys.path ------------------------------------------


def _shadow(base: Path, *, dist_info: bool = False) -> Path:
    (base / "triton").mkdir(parents=True)
    (base / "triton" / "__init__.py").write_text("import sys\nsys.stderr.write('SHADOW RAN\\n')\n")
    if dist_info:
        meta = base / DIST_INFO
        meta.mkdir()
        (meta / "METADATA").write_text("Metadata-Version: 2.1\nName: triton\nVersion: 3.9.0\n\n")
    return base / "triton" / "__init__.py"


def test_triton_shadowed_from_pythonpath(case: Case) -> None:
    init = _shadow(case.dir / "shadow")
    result = case.outcome(paths=(case.dir / "shadow",))
    # core.core_reason: the verified triton lives elsewhere than the one about to run
    assert_refused(result, "verify.shadowed", init, rejected=False)
    assert "SHADOW RAN" not in result["stderr"] and nvidia(result)["trust"] == "verified"


def test_triton_shadowed_from_the_working_directory(case: Case) -> None:
    init = _shadow(case.dir / "cwd")
    result = case.outcome(cwd=case.dir / "cwd")
    assert_refused(result, "verify.shadowed", init, rejected=False)
    assert "SHADOW RAN" not in result["stderr"]


def test_triton_shadowed_by_a_legacy_install(case: Case) -> None:
    """The shadow has a dist-info named triton, without a RECORD: no installed distribution
    owns the file about to run (the core is found by its RECORD, not by a name), so the
    verified triton further along sys.path is shadowed."""
    init = _shadow(case.dir / "shadow", dist_info=True)
    result = case.outcome(paths=(case.dir / "shadow",))
    assert_refused(result, "verify.shadowed", init, rejected=False)
    assert "SHADOW RAN" not in result["stderr"]


# -- the trust store ----------------------------------------------------------------------------


def test_untrusted_key_under_strict(case: Case) -> None:
    result = case.outcome(trusted=False)
    assert_refused(result, "policy.not-verified", case.path(MANIFEST), rejected=False)
    assert nvidia(result)["trust"] == "unverified"


def test_key_scoped_to_another_name(case: Case) -> None:
    case.cli("trust", "add", "--user", "--scope", "triton-fork", str(case.venv.pub))
    result = case.outcome(trusted=False)
    assert_refused(result, "trust.scope", case.path(MANIFEST))
    assert "triton-fork" in result["error"]["reason"]["message"]


def test_rollback_to_signed_380_below_the_floor(case: Case, triton38: Path) -> None:
    site38 = case.dir / "site38"
    pip_install(case.venv.python, triton38, site38)
    case.site = site38
    case.cli("trust", "add", "--user", str(case.venv.pub))
    assert_verified(case.outcome(trusted=False))  # validly signed: verified without a floor
    case.cli("trust", "min-version", "--user", "triton", "3.9")
    result = case.outcome(trusted=False)
    assert_refused(result, "trust.rollback", site38 / f"triton-3.8.0.dist-info/{MANIFEST_FILENAME}")
    assert "below the floor 3.9" in result["error"]["reason"]["message"]


def test_floor_admits_the_release_at_it(case: Case) -> None:
    case.cli("trust", "add", "--user", str(case.venv.pub))
    case.cli("trust", "min-version", "--user", "triton", "3.9")
    assert_verified(case.outcome(trusted=False))


# -- the verdict cache ----------------------------------------------------------------------------


def _cache_file(case: Case) -> Path:
    (file,) = (case.dir / "cache").glob("verify-*.json")
    return file


def _notes(result: dict[str, Any]) -> list[str]:
    return [n["code"] for n in result["report"]["notes"]]


@pytest.mark.parametrize("what", ["file", "directory"])
def test_world_writable_cache_is_not_used(case: Case, what: str) -> None:
    first = case.outcome()
    assert_verified(first)
    assert first["hashed"] > 900_000_000
    assert case.outcome()["hashed"] == 0  # warm
    target = _cache_file(case) if what == "file" else case.dir / "cache"
    target.chmod(0o777 if what == "directory" else 0o666)
    result = case.outcome()
    assert_verified(result)
    assert "cache.unsafe" in _notes(result) and result["hashed"] == first["hashed"]  # verified cold


def test_garbage_cache_is_rebuilt(case: Case) -> None:
    assert_verified(case.outcome())
    cache = _cache_file(case)
    cache.write_bytes(b"\x00{garbage" * 1000)
    result = case.outcome()
    assert_verified(result)
    assert "cache.json" in _notes(result) and result["hashed"] > 900_000_000
    assert json.loads(cache.read_bytes())["format"] == 3
    warm = case.outcome()
    assert warm["hashed"] == 0 and _notes(warm) == []


def test_tampered_file_restored_byte_for_byte(case: Case) -> None:
    assert_verified(case.outcome())
    original = case.pristine(LIBDEVICE).read_bytes()
    path = case.flip(LIBDEVICE)
    assert_refused(case.outcome(), "verify.sha256", path)
    case.write(LIBDEVICE, original)  # the cache is kept
    result = case.outcome()
    assert_verified(result)
    assert result["hashed"] == len(original)  # only the restored file was hashed again


# -- policy and start-up ----------------------------------------------------------------------------


def test_misspelt_policy_means_strict(case: Case) -> None:
    result = case.outcome(policy="strcit")
    assert_verified(result)
    assert result["report"]["policy"] == "strict"
    assert [p["code"] for p in result["report"]["problems"]] == ["policy.value"]
    assert "'strcit'" in result["report"]["problems"][0]["message"]
    refused = case.outcome(policy="strcit", trusted=False)
    assert_refused(refused, "policy.not-verified", case.path(MANIFEST), rejected=False)


def test_warn_with_rejected_backend_under_W_error(case: Case) -> None:
    path = case.flip(COMPILER)
    done = case.run("import triton, triton.backends as tb; print(sorted(tb.backends))",
                    flags=("-W", "error"), policy="warn")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
    assert f"BackendWarning: triton core not verified: {path}" in done.stderr and "(verify.sha256)" in done.stderr
    assert "BackendWarning: Triton backend nvidia (triton 3.9.0) excluded" in done.stderr


def test_pth_left_behind_without_the_runtime(case: Case) -> None:
    startup = case.run("pass", runtime=False)
    assert startup.returncode == 0 and startup.stderr.startswith("triton-backend-runtime: /"), startup.stderr
    assert (f"{PTH_NAME} is installed but the runtime cannot be imported (No module named "
            "'triton_backend_runtime'): backends are not verified; remove it: rm /") in startup.stderr
    assert set(startup.stderr.splitlines()) == {startup.stderr.splitlines()[0]}
    done = case.run("import triton.backends as tb; print(sorted(tb.backends))", runtime=False)
    assert done.returncode == 0 and done.stdout.strip() == "['amd', 'nvidia']", done.stderr
    assert done.stderr == startup.stderr


def test_pth_warning_is_one_line(case: Case) -> None:
    startup = case.run("pass", runtime=False)
    assert len(startup.stderr.splitlines()) == 1, startup.stderr
