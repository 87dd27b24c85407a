"""A wheel with nothing Triton in it (no backend, no plugin, no core: ``requests``) is signed
by ``migrate`` and ``adopt`` with one warning saying so; ``mirror`` copies it through and its
row says what it found. Real wheels are built, or installed by pip, and run through the
command line."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from helpers.cli import migrate, run_cli
from helpers.index import run_mirror
from helpers.projects import Keypair, keygen
from helpers.wheels import backend_files, pip_install, write_wheel
from triton_backend_runtime.base.layout import MANIFEST_FILENAME

PLAIN_FILES = {"plain_lib/__init__.py": b"VALUE = 1\n", "plain_lib/util.py": b"def f():\n    return 2\n"}
PLAIN_WARNING = "no Triton backend, plugin or core in it: signed anyway"


@pytest.fixture(scope="module")
def key(tmp_path_factory: pytest.TempPathFactory) -> Keypair:
    return keygen(tmp_path_factory.mktemp("keys"), "plain")


def plain_wheel(directory: Path) -> Path:
    return write_wheel(directory, "plain-lib", "1.0", PLAIN_FILES)


def plain_warnings(warnings: list[str]) -> list[str]:
    return [w for w in warnings if PLAIN_WARNING in w]


def test_migrating_a_plain_wheel_signs_it_with_one_warning(key: Keypair, tmp_path: Path) -> None:
    src = plain_wheel(tmp_path / "in")
    done = migrate(src, tmp_path / "out", key, "--json")
    assert done.returncode == 0, done.stderr
    assert done.outcome["warnings"] == [f"{src}: {PLAIN_WARNING} (a platform may sign every wheel)"]
    assert done.outcome["backends"] == [] and done.outcome["plugins"] == []
    assert run_cli("verify", str(done.signed()), "--trust", str(key.public)).returncode == 0
    plain = migrate(src, tmp_path / "plain", key)
    assert plain.returncode == 0
    assert plain.stderr.count(PLAIN_WARNING) == 1 and f"backend-packager: warning: {src}: " in plain.stderr


def test_a_wheel_with_a_backend_gets_no_such_warning(key: Keypair, tmp_path: Path) -> None:
    src = write_wheel(tmp_path / "in", "acme-backend", "1.0", backend_files("acme_backend", "Acme", "acme"),
                      {"acme": "acme_backend"})
    done = migrate(src, tmp_path / "out", key, "--json")
    assert done.returncode == 0, done.stderr
    assert done.outcome["warnings"] == [] and PLAIN_WARNING not in done.stderr


@pytest.mark.parametrize("files", [
    {"triton/__init__.py": b"__version__ = '3.9.0'\n"},  # provides the Triton package
    {"vendor_triton/_C/libtriton.so": b"not really a library\n", "vendor_triton/language.py": b""},
])
def test_a_triton_core_gets_no_such_warning(files: dict[str, bytes], key: Keypair, tmp_path: Path) -> None:
    src = write_wheel(tmp_path / "in", "core-only", "1.0", files)
    done = migrate(src, tmp_path / "out", key, "--json")
    assert done.returncode == 0, done.stderr
    assert plain_warnings(done.outcome["warnings"]) == []


def test_adopting_a_plain_distribution_warns_the_same(key: Keypair, tmp_path: Path) -> None:
    site = tmp_path / "site"
    pip_install(Path(sys.executable), plain_wheel(tmp_path / "in"), site)
    done = run_cli("adopt", "plain-lib", "--site-packages", str(site), "--key", str(key.private), "--json")
    assert done.returncode == 0, done.stderr
    (outcome,) = json.loads(done.stdout)["distributions"]
    (warning,) = outcome["warnings"]
    assert PLAIN_WARNING in warning and "plain_lib-1.0.dist-info" in warning
    assert (site / "plain_lib-1.0.dist-info" / MANIFEST_FILENAME).exists()
    wheel = run_cli("adopt", "plain-lib", "--site-packages", str(site), "--key", str(key.private),
                    "-o", str(tmp_path / "wheel"))
    assert wheel.returncode == 0, wheel.stderr
    assert wheel.stderr.count(PLAIN_WARNING) == 1 and "backend-packager: warning: " in wheel.stderr


def test_mirror_rows_say_what_each_wheel_holds(key: Keypair, tmp_path: Path) -> None:
    src = tmp_path / "src"
    plain = plain_wheel(src)
    core = write_wheel(src, "core-only", "1.0", {"vendor_triton/_C/libtriton.so": b"not really a library\n"})
    backend = write_wheel(src, "acme-backend", "1.0", backend_files("acme_backend", "Acme", "acme"),
                          {"acme": "acme_backend"})
    out = tmp_path / "out"
    code, doc, _ = run_mirror(src, out, key)
    assert code == 0
    rows = {w["filename"]: w for w in doc["wheels"]}
    assert rows[plain.name]["status"] == "copied" and rows[plain.name]["found"] == "nothing Triton"
    assert rows[plain.name]["core"] is None and rows[plain.name]["warnings"] == []  # copied, not signed
    assert rows[core.name]["status"] == "copied" and rows[core.name]["core"] == "vendor_triton"
    assert rows[core.name]["found"] == "core: vendor_triton"
    assert rows[backend.name]["status"] == "migrated" and rows[backend.name]["found"] == "backends: acme"
    _, again, _ = run_mirror(src, out, key)  # read back from the state: the same words
    assert {w["filename"]: w["found"] for w in again["wheels"]} == {n: r["found"] for n, r in rows.items()}
    text = run_cli("mirror", str(src), "-o", str(tmp_path / "text"), "--key", str(key.private))
    assert f"copied    {plain.name} (nothing Triton; " in text.stdout
