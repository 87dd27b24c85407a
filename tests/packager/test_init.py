"""`backend-packager init`: the scaffolded project builds as it is and its wheel verifies."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from helpers.cli import run_cli
from helpers.projects import build_env

from backend_packager.commands import scaffold

BIN = Path(sys.executable).parent


def test_init_output_builds_and_verifies(tmp_path: Path) -> None:
    """``init`` prints a "next:" line; run as printed, in a shell where the venv is active (its bin
    first on PATH) and no index is reachable, it makes the key and builds a wheel that verifies."""
    env = build_env(None)
    env.pop("PWD", None)  # the shell sets it: a relative key path is relative to where the build starts
    env["PIP_NO_INDEX"] = "1"  # the packager is on no index, and nothing else may be fetched
    created = subprocess.run([str(BIN / "backend-packager"), "init", "acme-triton-backend"], capture_output=True,
                             text=True, env=env, cwd=tmp_path)
    assert created.returncode == 0, created.stderr
    (line,) = [line for line in created.stdout.splitlines() if line.startswith("next: ")]
    command = line.removeprefix("next: ")
    result = subprocess.run(["bash", "-c", command], capture_output=True, text=True, env=env, cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    # Plain `python -m build`: sdist, then the wheel built from the sdist.
    (wheel,) = (tmp_path / "acme-triton-backend" / "dist").glob("*.whl")
    check = run_cli("verify", str(wheel), "--trust", str(tmp_path / "signing-key.pub"))
    assert check.returncode == 0, check.stdout
    assert "artifacts match (coverage all)" in check.stdout
    shown = run_cli("inspect", str(wheel)).stdout
    assert "acme = acme_backend  targets: acme" in shown
    assert "compiler: acme_backend.compiler:AcmeBackend" in shown and "driver: acme_backend.driver:AcmeDriver" in shown


def test_init_json_and_quiet(tmp_path: Path) -> None:
    created = run_cli("init", str(tmp_path / "acme-triton-backend"), "--json")
    assert created.returncode == 0, created.stderr
    doc = json.loads(created.stdout)
    assert (doc["backend"], doc["package"], doc["name"]) == ("acme", "acme_backend", "acme-triton-backend")
    assert doc["files"] == [
        ".gitignore", "README.md", "acme_backend/__init__.py", "acme_backend/compiler.py", "acme_backend/driver.py",
        "csrc/acme_driver.c", "pyproject.toml", "setup.py",
    ]
    assert "python -m build --no-isolation" in doc["next"]
    quiet = run_cli("init", "-q", str(tmp_path / "other"))
    assert (quiet.returncode, quiet.stdout, quiet.stderr) == (0, "", "")
    assert (tmp_path / "other" / "pyproject.toml").is_file()


def test_init_names(tmp_path: Path) -> None:
    project = scaffold.project_for(tmp_path / "x", "Foo.Bar-backend", None, None)
    assert (project.backend, project.package, project.class_prefix) == ("foo_bar", "foo_bar_backend", "FooBar")
    custom = scaffold.project_for(tmp_path / "x", None, "npu", "vendor_npu")
    assert (custom.name, custom.backend, custom.package, custom.device_env) == ("x", "npu", "vendor_npu",
                                                                               "NPU_BACKEND_DEVICES")


def test_init_refuses_a_non_empty_directory(tmp_path: Path) -> None:
    (tmp_path / "taken").mkdir()
    (tmp_path / "taken" / "keep.txt").write_text("mine")
    result = run_cli("init", str(tmp_path / "taken"))
    assert result.returncode == 2  # unusable input, as keygen on an existing key
    assert result.stderr == (f"backend-packager: error: {tmp_path / 'taken'}: exists and is not an empty directory "
                             "(input.exists)\n")
    assert sorted(p.name for p in (tmp_path / "taken").iterdir()) == ["keep.txt"]


def test_init_rejects_bad_names_before_writing(tmp_path: Path) -> None:
    result = run_cli("init", str(tmp_path / "new"), "--package", "not-a-package")
    assert result.returncode == 2
    assert "not-a-package: not a valid Python package name" in result.stderr
    assert list(tmp_path.iterdir()) == []
