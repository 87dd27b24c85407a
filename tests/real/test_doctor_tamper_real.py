"""``doctor`` agrees with ``import triton`` in every tampered state of the real triton 3.9.0.

The signed install (the session's ``migrated`` site) is hard-linked into one venv whose only
protection is the ``.pth`` hook. Each state changes the install, runs the real ``import triton``
under strict and ``doctor`` (as text and ``--json``) in that venv, and puts the install back: a changed name is
unlinked first (the shared original is never written) and linked to the original again after,
so the verdict cache stays warm for the next state. Both ways: a refused import is doctor's
``import.refused`` with the same code, file and message and both exit 1; an import that works is
``refused: null`` and both exit 0.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from helpers.hookvenv import HookVenv, make_hook_venv
from helpers.venv import Venv
from triton_backend_runtime.base.layout import MANIFEST_FILENAME
from triton_backend_runtime.trust import dsse

pytestmark = pytest.mark.triton_wheel

DIST_INFO = "triton-3.9.0.dist-info"
MANIFEST = f"{DIST_INFO}/{MANIFEST_FILENAME}"
COMPILER = "triton/backends/nvidia/compiler.py"
CUPTI = "triton/backends/nvidia/lib/cupti/libcupti.so"
LIBTRITON = "triton/_C/libtriton.so"
REFUSED = "triton_backend_runtime.triton.core.CoreRejected: triton core not verified: "


@dataclass
class Install:
    """The hook venv and the pristine site its files are linked from; what a state touched."""

    venv: HookVenv
    pristine: Path
    touched: set[str] = field(default_factory=set)

    def path(self, rel: str) -> Path:
        return self.venv.site / rel

    def unlink(self, rel: str) -> Path:
        self.touched.add(rel)
        path = self.path(rel)
        path.unlink()
        return path

    def write(self, rel: str, data: bytes) -> Path:
        mode = self.path(rel).stat().st_mode
        path = self.unlink(rel)
        path.write_bytes(data)
        path.chmod(mode)
        return path

    def flip(self, rel: str) -> Path:
        """One byte in the middle changed, same size (copied, not read: libtriton is 500 MB)."""
        path = self.unlink(rel)
        shutil.copy2(self.pristine / rel, path)
        with path.open("r+b") as stream:
            stream.seek(path.stat().st_size // 2)
            byte = stream.read(1)
            stream.seek(-1, 1)
            stream.write(bytes([byte[0] ^ 0x01]))
        return path

    def add(self, rel: str, data: bytes) -> Path:
        self.touched.add(rel)
        path = self.path(rel)
        path.write_bytes(data)
        return path

    def restore(self) -> None:
        for rel in self.touched:
            path = self.path(rel)
            if path.is_symlink() or path.is_file():
                path.unlink()
            if (self.pristine / rel).exists():
                os.link(self.pristine / rel, path)
        self.touched.clear()


@pytest.fixture(scope="module")
def installed(venv: Venv, migrated: Path, tmp_path_factory: pytest.TempPathFactory) -> Install:
    made = make_hook_venv(tmp_path_factory.mktemp("doctor-tamper") / "venv")
    subprocess.run(["cp", "-al", f"{migrated}/.", str(made.site)], check=True)
    return Install(made, migrated)


@pytest.fixture()
def install(installed: Install, venv: Venv, monkeypatch: pytest.MonkeyPatch) -> Iterator[Install]:
    monkeypatch.setenv("TRITON_BACKEND_TRUSTED_KEYS", str(venv.pub))
    monkeypatch.setenv("TRITON_BACKEND_CACHE_DIR", str(installed.venv.root / "cache"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(installed.venv.root / "config"))
    yield installed
    installed.restore()


def edited_payload(install: Install) -> Path:
    """One artifact's digest changed in the signed statement, the old signature kept."""
    envelope = dsse.decode(install.path(MANIFEST).read_bytes(), MANIFEST)
    statement = json.loads(envelope.payload)
    statement["predicate"]["artifacts"][0]["sha256"] = "0" * 64
    payload = json.dumps(statement, sort_keys=True, separators=(",", ":")).encode()
    return install.write(MANIFEST, dsse.encode(dsse.Envelope(payload, envelope.payload_type, envelope.signatures)))


def edited_version(install: Install) -> Path:
    rel = f"{DIST_INFO}/METADATA"
    install.write(rel, install.path(rel).read_bytes().replace(b"\nVersion: 3.9.0\n", b"\nVersion: 3.9.1\n", 1))
    return install.path(MANIFEST)


def redirected_entry_point(install: Install) -> Path:
    rel = f"{DIST_INFO}/entry_points.txt"
    text = install.path(rel).read_bytes()
    assert b"nvidia = triton.backends.nvidia" in text
    return install.write(rel, text.replace(b"nvidia = triton.backends.nvidia", b"nvidia = evil_backend", 1))


def symlinked(install: Install, rel: str) -> Path:
    path = install.unlink(rel)
    path.symlink_to(install.pristine / rel)
    return path


Tamper = Callable[[Install], Path]
#: (id, tamper, the code strict refuses the import with; None where nothing is changed)
STATES: list[tuple[str, Tamper | None, str | None]] = [
    ("untouched", None, None),
    ("compiler.py one byte", lambda i: i.flip(COMPILER), "verify.sha256"),
    ("compiler.py code appended", lambda i: i.write(COMPILER, i.path(COMPILER).read_bytes() + b"\nimport os\n"),
     "verify.size"),
    ("compiler.py a symlink to the same bytes", lambda i: symlinked(i, COMPILER), "verify.not-regular"),
    ("backend libcupti.so one byte", lambda i: i.flip(CUPTI), "verify.sha256"),
    ("libtriton.so one byte", lambda i: i.flip(LIBTRITON), "verify.sha256"),
    ("python module added", lambda i: i.add("triton/language/evil.py", b"import os\n"), "verify.unlisted"),
    ("shared library added", lambda i: i.add("triton/language/libevil.so", i.path(CUPTI).read_bytes()),
     "verify.unlisted"),
    ("language/core.py deleted", lambda i: i.unlink("triton/language/core.py"), "verify.missing"),
    ("manifest payload edited", edited_payload, "signature.signature"),
    ("manifest truncated", lambda i: i.write(MANIFEST, i.path(MANIFEST).read_bytes()[:100]), "signature.json"),
    ("manifest deleted", lambda i: (i.unlink(MANIFEST), i.path("triton/__init__.py"))[1], "policy.not-verified"),
    ("METADATA version edited", edited_version, "verify.version"),
    ("entry_points.txt points nvidia elsewhere", redirected_entry_point, "verify.size"),
]


@pytest.mark.parametrize(("tamper", "code"), [pytest.param(t, c, id=i) for i, t, c in STATES])
def test_doctor_agrees_with_import(install: Install, tamper: Tamper | None, code: str | None) -> None:
    path = tamper(install) if tamper is not None else None
    imported = install.venv.run("-c", "import triton")
    text, doc = install.venv.doctor()  # the text and --json, which exit alike
    assert doc["enforced"] and doc["import"]["core_checked"], text.stdout
    refused = doc["import"]["refused"]
    if code is None:
        assert (imported.returncode, text.returncode, refused) == (0, 0, None), imported.stderr + text.stdout
        assert doc["healthy"] and "strict refused" not in text.stdout
        return
    assert (imported.returncode, text.returncode) == (1, 1), imported.stderr[-2000:]
    assert refused is not None and (refused["code"], refused["path"]) == (code, str(path)), refused
    last = imported.stderr.strip().splitlines()[-1]
    assert last == f"{REFUSED}{refused['path']}: {refused['message']} ({refused['code']})"
    assert f"strict refused import triton: {code} {path}" in text.stdout
