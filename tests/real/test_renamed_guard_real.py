"""The real renamed release ``tokenspeed-triton``, guarded by the ``.pth`` hook alone.

Its wheel as published (no patch in its ``backends/__init__.py``), migrated and signed, installed
into a venv whose only protection is ``hook install``: under strict an edited compiler and an
edited backend library are each refused before any of the package runs, as for ``triton``.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest
from helpers.cli import migrate
from helpers.hookvenv import HookVenv, make_hook_venv
from helpers.projects import Keypair, keygen
from helpers.renamed import TOKENSPEED
from helpers.wheels import fetch_wheel, pip_install

PACKAGE = "tokenspeed_triton"
IMPORT = f"import {PACKAGE}.backends as b; print(sorted(b.backends))"


@pytest.fixture(scope="module")
def signed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Keypair]:
    root = tmp_path_factory.mktemp("tokenspeed")
    key = keygen(root / "keys", "platform")
    run = migrate(fetch_wheel(TOKENSPEED), root / "out", key, "--jobs", "2")
    return run.signed(), key


@pytest.fixture()
def venv(signed: tuple[Path, Keypair], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> HookVenv:
    wheel, key = signed
    made = make_hook_venv(tmp_path / "venv")
    pip_install(Path(sys.executable), wheel, made.site)
    monkeypatch.setenv("TRITON_BACKEND_TRUSTED_KEYS", str(key.public))
    monkeypatch.setenv("TRITON_BACKEND_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    return made


def flip(path: Path) -> None:
    """One byte in the middle changed, same size (a copy first: the file may be a hard link)."""
    copy = path.with_name(path.name + ".tmp")
    shutil.copy2(path, copy)
    with copy.open("r+b") as stream:
        stream.seek(copy.stat().st_size // 2)
        byte = stream.read(1)
        stream.seek(-1, 1)
        stream.write(bytes([byte[0] ^ 0x01]))
    copy.replace(path)


@pytest.mark.triton_wheel
def test_the_signed_renamed_release_loads_under_strict(venv: HookVenv) -> None:
    done = venv.run("-c", IMPORT)
    assert done.stdout.strip() == "['amd', 'nvidia']", done.stderr[-2000:]


@pytest.mark.triton_wheel
@pytest.mark.parametrize("member", [f"{PACKAGE}/compiler/compiler.py",
                                    f"{PACKAGE}/backends/amd/lib/libtriton_amd_codegen.so"])
def test_an_edited_renamed_release_is_refused_through_the_hook_alone(venv: HookVenv, member: str) -> None:
    flip(venv.site / member)
    done = venv.run("-c", IMPORT)
    last = done.stderr.strip().splitlines()[-1]
    assert done.returncode == 1 and done.stdout == ""
    assert last.startswith("triton_backend_runtime.triton.core.CoreRejected: triton core not verified: ")
    assert str(venv.site / member) in last and last.endswith("(verify.sha256)")
    warned = venv.run("-c", f"import {PACKAGE}", policy="warn")
    assert warned.returncode == 0 and "(verify.sha256)" in warned.stderr
