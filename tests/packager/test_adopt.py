"""``backend-packager adopt``: an installed distribution signed in place, or written as a wheel.

The quick tests install a small directory-scan-era backend (``triton/backends/forkgpu/`` with
a real shared library compiled by gcc, a console script, no ``triton.backends`` entry points)
with pip into a venv, and hand every test its own copy of that site-packages. The runtime then
verifies the adopted distribution in process (``verify_distribution``, a registry under
strict). A real triton 3.9.0 adopted: ``tests/real/test_adopt_real.py``.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from helpers import adopted
from helpers.adopted import DIST_INFO, NAME, PACKAGE, cli_adopt, key_file, plugpack, snapshot
from helpers.cli import run_cli, run_on_terminal
from helpers.csrc import ElfFixtures
from helpers.disttree import TrustEnv
from helpers.manifests import manifest_plugins
from helpers.projects import ROOT, fresh_venv, pip_install, record_hash
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from triton_backend_runtime.base.layout import MANIFEST_FILENAME
from triton_backend_runtime.site import discovery
from triton_backend_runtime.verification.distribution import verify_distribution

from backend_packager.commands import plugincapture
from backend_packager.commands.adopt import adopt
from backend_packager.manifest import signing
from backend_packager.wheel import deflate

#: The fork backend's wheel, its pip install (pristine), a copy per test (site), a trust env.
fork_wheel, pristine, site, trust = adopted.fork_wheel, adopted.pristine, adopted.site, adopted.trust


def record_of(site: Path) -> dict[str, list[str]]:
    text = (site / DIST_INFO / "RECORD").read_text()
    return {row[0]: row for row in (line.split(",") for line in text.splitlines())}


def verdict_of(site: Path, env: TrustEnv) -> Any:
    found = discovery.discover([str(site)], in_tree=False)
    dist = next(d for d in found.distributions if d.key == NAME)
    return verify_distribution(dist, env.context())


def test_adopt_in_place_then_the_runtime_verifies(site: Path, trust: TrustEnv) -> None:
    code, doc = cli_adopt(site, "--key", str(key_file(trust)))
    assert code == 0, doc
    (outcome,) = doc["distributions"]
    assert doc["format"] == 1 and outcome["status"] == "adopted" and outcome["backends"] == ["forkgpu"]
    assert outcome["native"] == 1 and outcome["plugins"] == []
    assert outcome["written"] == [f"{DIST_INFO}/{MANIFEST_FILENAME}", f"{DIST_INFO}/entry_points.txt",
                                  f"{DIST_INFO}/sboms/triton-backend.cdx.json", f"{DIST_INFO}/RECORD"]
    assert outcome["skipped"] == 4  # three compiled .pyc, one script wrapper: the installer's, not the wheel's
    # Directory-scan era: entry points declared for the backend, the console script kept.
    entry_points = (site / DIST_INFO / "entry_points.txt").read_text()
    assert "[triton.backends]\nforkgpu = triton.backends.forkgpu" in entry_points and "forkgpu-info =" in entry_points
    rows = record_of(site)
    for leaf in (MANIFEST_FILENAME, "entry_points.txt"):
        data = (site / DIST_INFO / leaf).read_bytes()
        assert rows[f"{DIST_INFO}/{leaf}"][1:] == [record_hash(data), str(len(data))]
    assert "../../../bin/forkgpu-info" in rows and list(rows)[-1] == f"{DIST_INFO}/RECORD"
    verdict = verdict_of(site, trust)
    assert (verdict.status, verdict.problem) == ("verified", None), verdict.problem
    assert [(b.name, b.package) for b in verdict.backends] == [("forkgpu", "triton.backends.forkgpu")]


def test_adopt_again_changes_nothing_but_record(site: Path, trust: TrustEnv) -> None:
    assert cli_adopt(site, "--key", str(key_file(trust)))[0] == 0
    before = snapshot(site)
    code, doc = cli_adopt(site, "--key", str(key_file(trust)))
    assert code == 0 and doc["distributions"][0]["status"] == "re-signed"
    assert doc["distributions"][0]["written"] == [f"{DIST_INFO}/RECORD"]
    assert snapshot(site) == before  # the same statement signed again: the same bytes


def _edit(site: Path) -> str:
    path = site / PACKAGE / "compiler.py"
    data = path.read_bytes()
    path.write_bytes(data.replace(b"forkgpu-1", b"forkgpu-2"))  # same size, other bytes
    return str(path)


def _grow(site: Path) -> str:
    path = site / PACKAGE / "driver.py"
    path.write_bytes(path.read_bytes() + b"\n# edited\n")
    return str(path)


def _remove(site: Path) -> str:
    path = site / PACKAGE / "lib" / "libfork_driver.so"
    path.unlink()
    return str(path)


def _symlinked_file(site: Path) -> str:
    path = site / PACKAGE / "driver.py"
    outside = site.parents[3] / "driver.py"
    outside.write_bytes(path.read_bytes())  # the very bytes RECORD lists, but outside
    path.unlink()
    path.symlink_to(outside)
    return str(path)


def _symlinked_directory(site: Path) -> str:
    package = site / PACKAGE
    outside = site.parents[3] / "elsewhere"
    shutil.move(package, outside)  # identical files, reached through a symlink out of site-packages
    package.symlink_to(outside, target_is_directory=True)
    return str(package / "__init__.py")


def _record_row(site: Path, row: str) -> str:
    record = site / DIST_INFO / "RECORD"
    record.write_text(record.read_text() + row + "\n")
    return row.split(",")[0]


def _dotdot_row(site: Path) -> str:
    secret = site.parents[3] / "secret.txt"
    data = b"outside\n"
    secret.write_bytes(data)  # it matches its row: refused for where it is, unread
    return _record_row(site, f"../../../../secret.txt,{record_hash(data)},{len(data)}")


def _dotdot_inside(site: Path) -> str:
    return _record_row(site, f"triton/../triton/backends/forkgpu/driver.py,{record_hash(b'x')},1")


def _unrecorded(site: Path) -> str:
    path = site / PACKAGE / "extra.py"
    path.write_text("print('not in RECORD')\n")
    return str(path)


TAMPERING = {
    "edited": (_edit, "installed.sha256"),
    "grown": (_grow, "installed.size"),
    "missing": (_remove, "installed.missing"),
    "symlinked-file": (_symlinked_file, "installed.not-regular"),
    "symlink-escapes": (_symlinked_directory, "installed.path"),
    "record-dotdot": (_dotdot_row, "installed.path"),
    "record-dotdot-inside": (_dotdot_inside, "installed.path"),
    "unrecorded-code": (_unrecorded, "installed.unrecorded"),
}


@pytest.mark.parametrize("case", sorted(TAMPERING))
def test_tampered_install_is_refused_and_listed(case: str, site: Path, trust: TrustEnv, tmp_path: Path) -> None:
    tamper, code = TAMPERING[case]
    path = tamper(site)
    before = snapshot(site)
    done = run_cli("adopt", NAME, "--site-packages", str(site), "--key", str(key_file(trust)), "--json")
    assert done.returncode == 1, done.stderr
    (outcome,) = json.loads(done.stdout)["distributions"]
    assert outcome["error"]["code"] == "installed.mismatch"
    assert {"code": code, "path": path} in [{k: m[k] for k in ("code", "path")} for m in outcome["mismatches"]]
    assert f"{path}: " in done.stderr and f"({code})" in done.stderr  # each file listed on its own line
    assert snapshot(site) == before  # nothing written
    wheel = run_cli("adopt", NAME, "--site-packages", str(site), "--key", str(key_file(trust)),
                    "--wheel-out", str(tmp_path / "out"))
    assert wheel.returncode == 1 and not list((tmp_path / "out").glob("*"))


def test_dist_info_symlinked_out_of_site_packages_is_refused(site: Path, trust: TrustEnv) -> None:
    outside = site.parents[3] / "dist-info-elsewhere"
    shutil.move(site / DIST_INFO, outside)
    (site / DIST_INFO).symlink_to(outside, target_is_directory=True)
    before = snapshot(outside)
    code, doc = cli_adopt(site, "--key", str(key_file(trust)))
    assert code == 1 and doc["distributions"][0]["error"]["code"] == "installed.path"
    assert snapshot(outside) == before


def test_wheel_out_writes_a_signed_wheel_and_leaves_the_install(site: Path, trust: TrustEnv, tmp_path: Path) -> None:
    from helpers.wheelcheck import assert_strict_zip, assert_vouches_for_every_file, entry_points_of

    before = snapshot(site)
    code, doc = cli_adopt(site, "--key", str(key_file(trust)), "--wheel-out", str(tmp_path / "out"))
    assert code == 0, doc
    wheel = Path(doc["distributions"][0]["output"])
    assert wheel.parent == tmp_path / "out" and wheel.name.startswith("triton_fork-1.0-")
    assert doc["distributions"][0]["deflate"] == deflate.engine().name  # the bytes depend on it
    assert snapshot(site) == before
    assert_strict_zip(wheel)
    manifest = assert_vouches_for_every_file(wheel)
    assert {b["name"] for b in manifest["backends"]} == {"forkgpu"}
    assert "forkgpu = triton.backends.forkgpu" in entry_points_of(wheel)
    verified = run_cli("verify", str(wheel), "--trust", str(trust.key.pub))
    assert verified.returncode == 0, verified.stdout + verified.stderr
    python = fresh_venv(tmp_path / "again")
    pip_install(python, str(wheel))  # a regular wheel: pip installs it as it would the original


def test_wheel_out_shows_the_progress_bar_on_a_terminal(site: Path, trust: TrustEnv, tmp_path: Path) -> None:
    """As ``migrate``'s: the bytes streamed into the wheel, on stderr when it is a terminal."""
    returncode, screen, _ = run_on_terminal("adopt", NAME, "--site-packages", str(site), "--key",
                                            str(key_file(trust)), "--wheel-out", str(tmp_path / "out"))
    assert returncode == 0, screen
    assert b"1/1 wheels" in screen and b"100%" in screen


def _interrupt_before_record(site: Path, key: Path) -> None:
    """The state a run killed after its manifest and entry points, before RECORD, leaves:
    every file whole, RECORD still the installer's."""
    record = site / DIST_INFO / "RECORD"
    original = record.read_bytes()
    assert run_cli("adopt", NAME, "--site-packages", str(site), "--key", str(key)).returncode == 0
    record.write_bytes(original)


def test_an_interrupted_adopt_is_finished_by_the_same_key(site: Path, trust: TrustEnv) -> None:
    _interrupt_before_record(site, key_file(trust))
    code, doc = cli_adopt(site, "--key", str(key_file(trust)))
    assert code == 0, doc
    assert verdict_of(site, trust).status == "verified"


def test_an_interrupted_adopt_is_not_finished_by_another_key(site: Path, trust: TrustEnv, tmp_path: Path) -> None:
    _interrupt_before_record(site, key_file(trust))
    other = tmp_path / "other.pem"
    signing.generate(other, tmp_path / "other.pub", "other", None)
    code, doc = cli_adopt(site, "--key", str(other))
    assert code == 1
    codes = {(m["path"], m["code"]) for m in doc["distributions"][0]["mismatches"]}
    assert codes == {(str(site / DIST_INFO / "entry_points.txt"), "installed.size")}


KILLED_AT = """
import os, signal, sys
from pathlib import Path
from backend_packager.commands import adopt, inplace
from backend_packager.manifest import signing
written = []
real = inplace.write_atomic
def write_or_die(path, data, **kw):  # kill -9 just before write number LIMIT + 1
    if len(written) == {limit}:
        os.kill(os.getpid(), signal.SIGKILL)
    real(path, data, **kw)
    written.append(path)
inplace.write_atomic = write_or_die
adopt.adopt(Path({site!r}), {name!r}, signing.load(Path({key!r})))
"""


@pytest.mark.parametrize("writes", [0, 1, 2, 3])
def test_killed_adopt_leaves_whole_files_and_a_rerun_finishes(writes: int, site: Path, trust: TrustEnv) -> None:
    """kill -9 before the manifest, after it, after entry_points.txt, after the SBOM (RECORD not yet written)."""
    code = KILLED_AT.format(limit=writes, site=str(site), name=NAME, key=str(key_file(trust)))
    killed = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert killed.returncode == -9, killed.stderr
    info = site / DIST_INFO
    assert not [p for p in os.listdir(info) if p.endswith(".tmp")]
    assert (info / MANIFEST_FILENAME).exists() == (writes >= 1)
    done, doc = cli_adopt(site, "--key", str(key_file(trust)))
    assert done == 0, doc
    assert verdict_of(site, trust).status == "verified"


def test_unusable_input_exits_2(site: Path, trust: TrustEnv, tmp_path: Path) -> None:
    key = str(key_file(trust))
    missing = run_cli("adopt", "no-such-dist", "--site-packages", str(site), "--key", key, "--json")
    assert missing.returncode == 2
    assert json.loads(missing.stdout)["distributions"][0]["error"]["code"] == "input.not-installed"
    for args, code in (
        (["--site-packages", str(tmp_path / "nowhere"), "--key", key], "(input.site-packages)"),
        (["--site-packages", str(site), "--key", str(tmp_path / "no.pem")], "(input."),
        (["--site-packages", str(site), "--key", str(trust.key.pub)], "(input."),
    ):
        done = run_cli("adopt", NAME, *args)
        assert done.returncode == 2 and code in done.stderr and "Traceback" not in done.stderr, done.stderr
    env = {k: v for k, v in os.environ.items() if k != "BACKEND_PACKAGER_SIGNING_KEY"}
    exe = Path(sys.executable).parent / "backend-packager"
    nokey = subprocess.run([str(exe), "adopt", NAME, "--site-packages", str(site)], capture_output=True, text=True,
                           env=env)
    assert nokey.returncode == 2 and "(input.key)" in nokey.stderr
    assert run_cli("adopt", NAME, "--jobs", "0", "--key", key).returncode == 2


_ROW_PATHS = st.one_of(
    st.sampled_from([f"{PACKAGE}/driver.py", f"{PACKAGE}/compiler.py", f"{DIST_INFO}/METADATA", "../x", "/etc/passwd",
                     "a/../../b", "", ".", f"{PACKAGE}/__pycache__/x.pyc", "bin/forkgpu-info", "a\\b", "x\0y",
                     "a" * 140_000]),
    st.text(min_size=1, max_size=40),
)
_ROW_HASHES = st.one_of(st.just(""), st.just(record_hash(b"")), st.just("md5=abc"), st.text(max_size=50))
_ROW_SIZES = st.one_of(st.just(""), st.integers(-5, 1 << 40).map(str), st.text(max_size=8))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rows=st.lists(st.tuples(_ROW_PATHS, _ROW_HASHES, _ROW_SIZES), max_size=6), keep=st.booleans())
def test_hostile_record_is_a_reason_never_a_crash(rows: list[tuple[str, str, str]], keep: bool, pristine: Path,
                                                  tmp_path_factory: pytest.TempPathFactory) -> None:
    """Whatever RECORD holds: an outcome with a reason (or a verified adoption), nothing
    written outside the distribution's .dist-info, no exception."""
    import csv
    import io

    base = tmp_path_factory.mktemp("fuzz")
    site = base / "site"
    shutil.copytree(pristine, site, symlinks=True)
    record = site / DIST_INFO / "RECORD"
    out = io.StringIO()
    csv.writer(out, lineterminator="\n").writerows(rows)
    record.write_text((record.read_text() if keep else "") + out.getvalue())
    key_path = base / "keys" / "k.pem"
    key_path.parent.mkdir()
    signing.generate(key_path, key_path.with_suffix(".pub"), "fuzz", None)
    before = snapshot(site)
    outcome = adopt(site, NAME, signing.load(key_path), jobs=2)
    after = snapshot(base / "site")
    changed = {p for p in before.keys() | after.keys() if before.get(p) != after.get(p)}
    assert all(p.startswith(str(site / DIST_INFO) + os.sep) for p in changed)
    if outcome.error is None:
        assert outcome.status in ("adopted", "re-signed")
    else:
        assert not changed and outcome.error.code.split(".")[0] in ("installed", "wheel", "input", "verify")

# -- without --site-packages: purelib, then platlib ------------------------------------------------


@dataclass
class SplitPython:
    """This CPython started with ``PYTHONHOME=PREFIX:EXEC_PREFIX`` (a wrapper script), so that
    its prefix and exec_prefix, and with them sysconfig's purelib and platlib, differ."""

    python: Path
    purelib: Path
    platlib: Path

    def cli(self, *args: str) -> subprocess.CompletedProcess[str]:
        """The packager run by this interpreter, from this checkout and this venv's packages."""
        env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
        env.update(COLUMNS="1000", PYTHONPATH=os.pathsep.join(
            [str(ROOT), str(ROOT / "runtime"), sysconfig.get_paths()["purelib"]]))
        return subprocess.run([str(self.python), "-m", "backend_packager", *args], capture_output=True, text=True,
                              env=env)


def split_python(root: Path) -> SplitPython:
    """The standard library linked under PREFIX, ``lib-dynload`` under EXEC_PREFIX (where
    CPython looks for each), and a site-packages directory under both."""
    version = f"python{sys.version_info[0]}.{sys.version_info[1]}"
    prefix, exec_prefix = root / "prefix", root / "exec-prefix"
    stdlib, platstdlib = prefix / sys.platlibdir / version, exec_prefix / sys.platlibdir / version
    (stdlib / "site-packages").mkdir(parents=True)
    for entry in Path(os.__file__).parent.iterdir():
        if entry.name not in ("site-packages", "lib-dynload"):
            (stdlib / entry.name).symlink_to(entry)
    (platstdlib / "site-packages").mkdir(parents=True)
    (platstdlib / "lib-dynload").symlink_to(next(p for p in sys.path if p.endswith("lib-dynload")))
    wrapper = root / "python"
    base = os.path.realpath(getattr(sys, "_base_executable", sys.executable))
    wrapper.write_text(f'#!/bin/sh\nPYTHONHOME="{prefix}:{exec_prefix}" exec "{base}" "$@"\n')
    wrapper.chmod(0o755)
    query = "import json, sysconfig; print(json.dumps(sysconfig.get_paths()))"
    paths = json.loads(subprocess.run([str(wrapper), "-c", query], capture_output=True, text=True,
                                      check=True).stdout)
    return SplitPython(wrapper, Path(paths["purelib"]), Path(paths["platlib"]))


def test_without_site_packages_purelib_then_platlib_are_searched(fork_wheel: Path, trust: TrustEnv,
                                                                 tmp_path: Path) -> None:
    split = split_python(tmp_path / "split")
    assert split.purelib != split.platlib
    pip_install(split.python, str(fork_wheel))  # pip's own choice: not Root-Is-Purelib, so platlib
    assert (split.platlib / DIST_INFO).is_dir() and not (split.purelib / DIST_INFO).exists()
    shown = split.cli("adopt", "--help").stdout
    assert f"this interpreter's purelib {split.purelib}, then its platlib {split.platlib}" in shown
    key = str(key_file(trust))
    done = split.cli("adopt", NAME, "--key", key, "--json")
    assert done.returncode == 0, done.stderr
    (outcome,) = json.loads(done.stdout)["distributions"]
    assert (outcome["status"], outcome["source"]) == ("adopted", str(split.platlib / DIST_INFO))
    assert verdict_of(split.platlib, trust).status == "verified"
    missing = split.cli("adopt", "no-such-dist", "--key", key)
    assert missing.returncode == 2 and "(input.not-installed)" in missing.stderr
    assert f"in {split.purelib} and {split.platlib}" in missing.stderr
    shutil.copytree(split.platlib / DIST_INFO, split.purelib / DIST_INFO)  # a second install of it
    both = split.cli("adopt", NAME, "--key", key, "--json")
    assert both.returncode == 2
    (error,) = [o["error"] for o in json.loads(both.stdout)["distributions"]]
    assert error["code"] == "input.ambiguous" and f"{split.purelib} and {split.platlib}" in error["message"]
    assert split.cli("adopt", NAME, "--key", key, "--site-packages", str(split.platlib)).returncode == 0


# -- --wheel-out killed: no wheel left, the next run writes it ------------------------------------

HELD_AT = """
import importlib, sys
from pathlib import Path
from backend_packager.commands import adopt
from backend_packager.manifest import signing
module = importlib.import_module("backend_packager.{module}")
real = getattr(module, {function!r})
def hold(*args, **kwargs):  # say so, then wait for the SIGKILL
    print("holding", flush=True)
    sys.stdin.read()
    return real(*args, **kwargs)
setattr(module, {function!r}, hold)
adopt.adopt(Path({site!r}), {name!r}, signing.load(Path({key!r})), wheel_out=Path({out!r}))
"""


def _killed_while_holding(module: str, function: str, site: Path, key: Path, out: Path) -> None:
    """Run ``--wheel-out`` in a child held in ``function``, check what exists then, SIGKILL it."""
    code = HELD_AT.format(module=module, function=function, site=str(site), name=NAME, key=str(key), out=str(out))
    child = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None and child.stdout.readline() == "holding\n"
        assert list(out.iterdir()) == []  # the wheel being written has no name yet
        fds = Path(f"/proc/{child.pid}/fd")
        assert any(os.readlink(fd).startswith(f"{out}/") for fd in fds.iterdir())
    finally:
        child.kill()
        child.wait()
    assert child.returncode == -9
    assert list(out.iterdir()) == []


@pytest.mark.parametrize(("module", "function"), [("wheel.filewriter", "_read_chunk"),
                                                  ("wheel.filewriter", "write_record_and_directory")])
def test_wheel_out_killed_leaves_no_wheel_and_the_next_run_writes_it(module: str, function: str, site: Path,
                                                                      trust: TrustEnv, tmp_path: Path) -> None:
    """Killed while the files are streamed, or before RECORD is written: nothing named."""
    out = tmp_path / "out"
    _killed_while_holding(module, function, site, key_file(trust), out)
    code, doc = cli_adopt(site, "--key", str(key_file(trust)), "--wheel-out", str(out))
    assert code == 0, doc
    assert [p.name for p in out.iterdir()] == [Path(doc["distributions"][0]["output"]).name]


# -- --wheel-out streamed: the wheel a plain wheel of the checked files migrated gives ---------------


def _plain_then_migrated(site: Path, key: signing.SigningKey, out: Path) -> Path:
    """What ``--wheel-out`` wrote before it streamed: the checked files (less the installer's)
    and their RECORD in a plain wheel, which ``migrate`` then signed."""
    from triton_backend_runtime.manifest import is_installer_file

    from backend_packager.commands.installed import Adoption, read_installed
    from backend_packager.commands.migrate import migrate_wheel
    from backend_packager.commands.recordcheck import check_installed
    from backend_packager.commands.wheelout import wheel_filename
    from backend_packager.formats import records

    installed = read_installed(site, NAME)
    record = f"{installed.dist_info}/RECORD"
    checked = [c for c in check_installed(installed, key, 1, Adoption(site))
               if not is_installer_file(c.path) and c.path != record]
    (out / "plain").mkdir(parents=True)
    plain = out / "plain" / wheel_filename(installed)
    with zipfile.ZipFile(plain, "w", zipfile.ZIP_DEFLATED) as archive:
        for item in checked:
            archive.write(item.full, item.path)
        rows = [records.RecordRow(c.path, c.artifact.sha256, c.artifact.size) for c in checked]
        archive.writestr(record, records.render([*rows, records.RecordRow(record, None, None)]))
    migrated = migrate_wheel(plain, out / "old", key)
    assert migrated.error is None and migrated.output is not None, migrated.error
    return migrated.output


def _described(wheel: Path) -> tuple[list[str], bytes, dict[str, str]]:
    """Members in order, RECORD, and the manifest's sha256 of each artifact."""
    from helpers.wheelcheck import assert_strict_zip
    from triton_backend_runtime.trust import dsse, manifest_from_statement

    assert_strict_zip(wheel)
    with zipfile.ZipFile(wheel) as archive:
        assert archive.testzip() is None  # every member's CRC, over its inflated bytes
        envelope = archive.read(f"{DIST_INFO}/{MANIFEST_FILENAME}")
        manifest = manifest_from_statement(dsse.unverified_payload(dsse.decode(envelope, "m")), "m")
        return archive.namelist(), archive.read(f"{DIST_INFO}/RECORD"), {a.path: a.sha256 for a in manifest.artifacts}


def test_wheel_out_is_the_plain_wheel_migrated_and_rebuilds_byte_identical(site: Path, trust: TrustEnv,
                                                                            tmp_path: Path,
                                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """The same members, RECORD and manifest as the plain wheel migrate signed; the same bytes
    again whatever the thread count (chunks of 1000 bytes: files of several chunks, joined)."""
    from backend_packager.wheel import filewriter

    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1700000000")
    monkeypatch.setattr(filewriter, "CHUNK", 1000)
    key = signing.load(key_file(trust))
    expected = _described(_plain_then_migrated(site, key, tmp_path / "before"))
    wheels = []
    for jobs in (1, 3):
        outcome = adopt(site, NAME, key, wheel_out=tmp_path / f"jobs{jobs}", jobs=jobs)
        assert outcome.error is None and outcome.output is not None, outcome.error
        assert outcome.status == "migrated" and outcome.backends == ["forkgpu"]
        wheels.append(outcome.output)
    assert _described(wheels[0]) == expected
    assert wheels[0].read_bytes() == wheels[1].read_bytes()
    verified = run_cli("verify", str(wheels[0]), "--trust", str(trust.key.pub))
    assert verified.returncode == 0, verified.stdout + verified.stderr


def _edit_library(site: Path) -> str:
    """A file the plan does not read again: only the stream finds it changed."""
    path = site / PACKAGE / "lib" / "libfork_driver.so"
    with path.open("r+b") as stream:  # same size, in place
        stream.seek(-1, os.SEEK_END)
        stream.write(b"\xff")
    return str(path)


@pytest.mark.parametrize("change", [_edit, _grow, _edit_library], ids=["same-size", "grown", "library"])
def test_wheel_out_refuses_a_file_changed_after_the_check(change: Any, site: Path, trust: TrustEnv,
                                                          tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A file written between the check and the stream: the bytes streamed are not the ones
    checked; refused, naming the member, and no wheel is left."""
    from backend_packager.commands import adopt as adopt_module

    real = adopt_module.check_installed
    changed: list[str] = []

    def check_then_change(*args: Any, **kwargs: Any) -> Any:
        checked = real(*args, **kwargs)
        changed.append(change(site))
        return checked

    monkeypatch.setattr(adopt_module, "check_installed", check_then_change)
    out = tmp_path / "out"
    outcome = adopt(site, NAME, signing.load(key_file(trust)), wheel_out=out)
    assert outcome.error is not None and outcome.error.code == "installed.changed", outcome.error
    assert outcome.error.path == changed[0] and outcome.output is None
    assert change is not _edit_library or f"member {PACKAGE}/lib/libfork_driver.so:" in str(outcome.error)
    assert not list(out.glob("*"))  # the plan's reads refuse before the output exists


# -- plugins: what they say about themselves, captured from the installed files ---------------------


def test_plugins_captured_from_the_installed_files(elf_files: ElfFixtures, trust: TrustEnv, tmp_path: Path) -> None:
    """adopt records what ``migrate`` records for the same wheel, with the build
    environment's Triton the one installed beside."""
    wheel, site = plugpack(elf_files, tmp_path)
    done = run_cli("adopt", "plugpack", "--site-packages", str(site), "--key", str(key_file(trust)), "--json",
                   "--capture-plugins")
    assert done.returncode == 0, done.stdout + done.stderr
    adopted = {p.path: p for p in manifest_plugins((site / "plugpack-1.0.dist-info" / MANIFEST_FILENAME).read_bytes())}
    shared, old, contract = (adopted[f"plugpack/lib{n}.so"].info for n in ("shared", "old", "contract"))
    assert shared is not None and shared.captured, shared
    assert (shared.name, shared.version, shared.triton_version, shared.libtriton) == ("shared", "1.0", "3.9.0", None)
    assert old is not None and (old.captured, old.reason_code) == (False, "api-version")
    assert contract is not None and contract.captured and contract.ran_in == "sandbox", contract
    assert [p.name for p in contract.passes] == ["contract-lower", "contract-fuse"]
    assert contract.libtriton == "installed beside it: triton 3.9.0"
    assert "libcontract" not in Path("/proc/self/maps").read_text()
    # migrate of the same wheel, its build environment's Triton the one installed beside
    exe = Path(sys.executable).parent / "backend-packager"
    migrated = subprocess.run([str(exe), "migrate", str(wheel), "-o", str(tmp_path / "out"), "--key",
                               str(key_file(trust)), "--capture-plugins"], capture_output=True, text=True,
                              env={**os.environ, "PYTHONPATH": str(site)})
    assert migrated.returncode == 0, migrated.stderr
    with zipfile.ZipFile(tmp_path / "out" / wheel.name) as archive:
        expected = {p.path: p for p in manifest_plugins(archive.read(f"plugpack-1.0.dist-info/{MANIFEST_FILENAME}"))}
    built = expected["plugpack/libcontract.so"].info
    assert built is not None and built.libtriton == "build environment: triton 3.9.0"
    built.libtriton = contract.libtriton  # the one difference: where that Triton was found
    assert adopted == expected


@pytest.mark.skipif(importlib.util.find_spec("triton") is not None, reason="a Triton is importable here")
def test_a_plugin_without_libtriton_anywhere_is_recorded_uncaptured(elf_files: ElfFixtures, trust: TrustEnv,
                                                                    tmp_path: Path) -> None:
    _, site = plugpack(elf_files, tmp_path, triton=False)
    outcome = adopt(site, "plugpack", signing.load(key_file(trust)), capture="sandbox")
    assert outcome.error is None and outcome.status == "adopted", outcome.error
    plugins = {p.path: p.info for p in manifest_plugins((site / "plugpack-1.0.dist-info" / MANIFEST_FILENAME)
                                                        .read_bytes())}
    contract = plugins["plugpack/libcontract.so"]
    assert contract is not None and (contract.captured, contract.reason_code) == (False, "no-libtriton")
    assert contract.reason is not None and "needs libtriton.so" in contract.reason
    shared = plugins["plugpack/libshared.so"]
    assert shared is not None and shared.captured


@pytest.mark.parametrize("when", ["before", "during"])
def test_a_plugin_written_after_the_check_is_refused(when: str, elf_files: ElfFixtures, trust: TrustEnv,
                                                     tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The very bytes, written again after the check (before the plugin is handed to the
    child, or while the child runs): not the file as hashed; nothing is signed."""
    from backend_packager.manifest import plugincall

    _, site = plugpack(elf_files, tmp_path)
    plugin = site / "plugpack" / "libshared.so"
    data = plugin.read_bytes()
    stage = "place" if when == "before" else "call_sandboxed"
    target = plugincapture.InstalledFiles if when == "before" else plugincall
    real = getattr(target, stage)

    def rewrite_first(*args: Any, **kwargs: Any) -> Any:
        # place(self, artifact, into, name), call_sandboxed(plugin, ...)
        called = args[-1] if when == "before" else args[0].name
        if called == plugin.name:
            plugin.write_bytes(data)
        return real(*args, **kwargs)

    monkeypatch.setattr(target, stage, rewrite_first)
    outcome = adopt(site, "plugpack", signing.load(key_file(trust)), capture="sandbox")
    assert outcome.error is not None and outcome.error.code == "installed.changed", outcome.error
    assert outcome.error.path == str(plugin)
    assert ("while its plugin was being asked" in outcome.error.detail) == (when == "during")
    assert not (site / "plugpack-1.0.dist-info" / MANIFEST_FILENAME).exists()


# -- adopt: a FIFO for site-packages, a plugin swapped while it is asked -------------------


def test_adopt_with_a_fifo_for_site_packages_is_one_line(tmp_path: Path, elf_files: ElfFixtures) -> None:
    fifo = tmp_path / "site"
    os.mkfifo(fifo)
    proc = run_cli("adopt", "triton", "--site-packages", str(fifo), "--key", str(tmp_path / "nokey.pem"))
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and "input." in proc.stderr


def test_a_plugin_renamed_over_while_asked_is_not_what_the_child_calls(elf_files: ElfFixtures, tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """Another file renamed over the plugin's path while the child asks it (a new inode
    there): the sandbox mounts only the inode held on the file as hashed, and the swap is
    still seen after the call: nothing is signed."""
    from helpers.adopted import key_file, plugpack
    from helpers.disttree import TrustEnv
    from triton_backend_runtime.base.layout import MANIFEST_FILENAME

    from backend_packager.commands import adopt as adopt_module
    from backend_packager.manifest import plugincall, signing

    trust = TrustEnv.make(tmp_path / "trust-env", monkeypatch)
    _, site = plugpack(elf_files, tmp_path)
    plugin = site / "plugpack" / "libshared.so"
    hashed = hashlib.sha256(plugin.read_bytes()).hexdigest()
    real = plugincall.call_sandboxed

    def swap_first(*args: Any, **kwargs: Any) -> Any:
        if args[0].name == plugin.name:
            other = plugin.with_name("swap.tmp")
            shutil.copyfile(elf_files.exports, other)  # a library that is no plugin at all
            os.replace(other, plugin)
        return real(*args, **kwargs)

    monkeypatch.setattr(plugincall, "call_sandboxed", swap_first)
    outcome = adopt_module.adopt(site, "plugpack", signing.load(key_file(trust)), capture="sandbox")
    # The held inode lost its name (its link count, so its ctime, changed): refused, unsigned.
    assert outcome.error is not None and outcome.error.code == "installed.changed", outcome.error
    assert "while its plugin was being asked" in outcome.error.detail
    assert not (site / "plugpack-1.0.dist-info" / MANIFEST_FILENAME).exists()
    assert hashlib.sha256(plugin.read_bytes()).hexdigest() != hashed
