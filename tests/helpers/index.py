"""A mirror run and its simple index: the source wheels (module-scoped fixtures, built with
``python -m build``), ``backend-packager mirror --json``, and the PEP 503/691 pages read back
and checked against each other.

The mirror test modules take the fixtures by assignment (``wheels, keys, src = index.wheels,
index.keys, index.src``), which makes pytest register them there.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from helpers.cli import run_cli
from helpers.csrc import ElfFixtures
from helpers.projects import Keypair, build_env, built_wheel, keygen, write_legacy_project

PURE_PYPROJECT = """[build-system]
requires = ["setuptools"]
build-backend = "setuptools.build_meta"

[project]
name = "plain-helper"
version = "1.0"

[tool.setuptools]
packages = ["plain_helper"]
"""


@pytest.fixture(scope="module")
def wheels(tmp_path_factory: pytest.TempPathFactory, elf_files: ElfFixtures) -> dict[str, Path]:
    """A legacy backend wheel (entry point, C extension, plugin), a pure-Python wheel, and a
    file named like a wheel that is not a zip."""
    base = tmp_path_factory.mktemp("mirror-wheels")
    backend = write_legacy_project(base / "backend", "legacy-ep-backend", "legacy_ep_backend", elf_files.plugin_v2,
                             "legacyep")
    pure = base / "pure"
    (pure / "plain_helper").mkdir(parents=True)
    (pure / "plain_helper" / "__init__.py").write_text("VALUE = 1\n")
    (pure / "pyproject.toml").write_text(PURE_PYPROJECT)
    broken = base / "broken_backend-0.1-py3-none-any.whl"
    broken.write_bytes(b"PK\x03\x04 this is not a complete zip file")
    return {
        "backend": built_wheel(backend, base / "backend-dist", build_env(None)),
        "pure": built_wheel(pure, base / "pure-dist", build_env(None)),
        "broken": broken,
    }


@pytest.fixture(scope="module")
def keys(tmp_path_factory: pytest.TempPathFactory) -> tuple[Keypair, Keypair]:
    base = tmp_path_factory.mktemp("mirror-keys")
    return keygen(base, "mirror-one"), keygen(base, "mirror-two")


@pytest.fixture
def src(tmp_path: Path, wheels: dict[str, Path]) -> Path:
    d = tmp_path / "src"
    d.mkdir()
    for wheel in wheels.values():
        shutil.copy2(wheel, d / wheel.name)
    return d


def run_mirror(src: Path | str, out: Path, key: Keypair, *extra: str) -> tuple[int, dict[str, Any], str]:
    proc = run_cli("mirror", str(src), "-o", str(out), "--key", str(key.private), "--json", "--jobs", "2", *extra)
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc.returncode, json.loads(proc.stdout), proc.stderr


def statuses(doc: dict[str, Any]) -> dict[str, str]:
    return {w["filename"]: w["status"] for w in doc["wheels"]}


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def index_files(out: Path, project: str) -> dict[str, str]:
    """filename -> sha256 from the PEP 691 page, checked against the PEP 503 page's anchors."""
    doc = json.loads((out / "simple" / project / "index.json").read_text())
    assert doc["meta"] == {"api-version": "1.0"} and doc["name"] == project
    files = {f["filename"]: f["hashes"]["sha256"] for f in doc["files"]}
    html = (out / "simple" / project / "index.html").read_text()
    for name, digest in files.items():
        assert f'href="{name}#sha256={digest}"' in html
    return files


def mtimes(out: Path) -> dict[str, int]:
    """Every file of the mirror: the outputs and the state, and the served index as clients
    name it (``simple/...``; the generation behind it is named by its content)."""
    found = {str(p.relative_to(out)): p.stat().st_mtime_ns for p in sorted(out.glob("*")) if p.is_file()}
    served = (out / "simple").resolve()
    found |= {f"simple/{p.relative_to(served)}": p.stat().st_mtime_ns for p in sorted(served.rglob("*"))
              if p.is_file()}
    return found


def pip_from_mirror(python: Path, out: Path, *args: str) -> None:
    """pip with the mirror as its only index (no config file, no find-links of this machine)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    env["PIP_CONFIG_FILE"] = os.devnull
    cmd = [sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--disable-pip-version-check",
           "--index-url", (out / "simple").as_uri(), *args]
    result = subprocess.run(cmd, capture_output=True, text=True, env=env)
    assert result.returncode == 0, result.stderr[-3000:]
