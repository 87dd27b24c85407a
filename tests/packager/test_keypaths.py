"""Relative signing-key paths, as a vendor types them in a shell.

``BACKEND_PACKAGER_SIGNING_KEY=keys/vendor.pem`` is relative to the directory the build was
started in; ``signing-key = "keys/vendor.pem"`` in pyproject.toml to the project root. Both
hold whether the frontend builds in the tree (``--wheel``) or from an unpacked sdist
(``python -m build``'s default), which holds neither the key nor the project's location.
Each build runs through ``bash -c 'cd START && ...'`` so ``$PWD`` is what a shell sets.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from helpers.cli import run_cli
from helpers.projects import Keypair, build_env, copy_example

from backend_packager.manifest import config


def shell_build(start: Path, project: str, *args: str, key_env: str | None = None) -> subprocess.CompletedProcess[str]:
    """``cd START && [KEY=...] python -m build --no-isolation ARGS PROJECT`` in a real shell."""
    env = build_env(None)
    env.pop("PWD", None)
    prefix = f"BACKEND_PACKAGER_SIGNING_KEY={shlex.quote(key_env)} " if key_env else ""
    line = (f"cd {shlex.quote(str(start))} && {prefix}{shlex.quote(sys.executable)} -m build --no-isolation "
            f"{' '.join(map(shlex.quote, args))} {shlex.quote(project)}")
    return subprocess.run(["bash", "-c", line], capture_output=True, text=True, env=env, cwd="/")


def verified(wheels: Path, key: Keypair) -> bool:
    (wheel,) = wheels.glob("*.whl")
    return run_cli("verify", str(wheel), "--trust", str(key.public)).returncode == 0


def vendor(tmp_path: Path, key: Keypair, *, table_key: bool) -> Path:
    """START/vendor, a signature-requiring project, with the key in START/keys or vendor/keys."""
    project = copy_example("setuptools_backend", tmp_path / "start" / "vendor")
    keys = (project if table_key else tmp_path / "start") / "keys"
    keys.mkdir()
    (keys / "vendor.pem").write_bytes(key.private.read_bytes())
    if table_key:
        pyproject = project / "pyproject.toml"
        text = pyproject.read_text()
        line = 'require-signature = true\nsigning-key = "keys/vendor.pem"'
        pyproject.write_text(text.replace("require-signature = true", line))
    return project


@pytest.mark.parametrize("mode", [(), ("--wheel",)], ids=["sdist-to-wheel", "wheel"])
def test_relative_key_from_the_environment_is_relative_to_the_start(
    mode: tuple[str, ...], tmp_path: Path, signing_key: Keypair
) -> None:
    project = vendor(tmp_path, signing_key, table_key=False)
    result = shell_build(project.parent, "vendor", *mode, key_env="keys/vendor.pem")
    assert result.returncode == 0, result.stderr[-2000:]
    assert verified(project / "dist", signing_key)


@pytest.mark.parametrize(
    ("mode", "outdir"),
    [((), None), (("--wheel",), None), ((), "elsewhere")],
    ids=["sdist-to-wheel", "wheel", "sdist-to-wheel-outdir-elsewhere"],
)
def test_relative_key_in_pyproject_is_relative_to_the_project(
    mode: tuple[str, ...], outdir: str | None, tmp_path: Path, signing_key: Keypair
) -> None:
    project = vendor(tmp_path, signing_key, table_key=True)
    args = (*mode, "--outdir", str(tmp_path / outdir)) if outdir else mode
    result = shell_build(project.parent, "vendor", *args)
    assert result.returncode == 0, result.stderr[-2000:]
    assert verified(tmp_path / outdir if outdir else project / "dist", signing_key)


def test_a_key_not_found_names_the_resolved_path_and_the_rule(tmp_path: Path, signing_key: Keypair) -> None:
    project = vendor(tmp_path, signing_key, table_key=False)
    result = shell_build(project.parent, "vendor", "--wheel", key_env="nokeys/vendor.pem")
    assert result.returncode != 0
    line = next(x for x in result.stderr.splitlines() if x.startswith("backend-packager: error:"))
    assert str(project.parent / "nokeys" / "vendor.pem") in line
    assert "relative to the directory the build was started in ($PWD)" in line
    assert not list((project / "dist").glob("*.whl"))


def test_a_public_key_given_to_the_build_is_named_as_such(tmp_path: Path, signing_key: Keypair) -> None:
    project = vendor(tmp_path, signing_key, table_key=False)
    (project.parent / "keys" / "vendor.pub").write_bytes(signing_key.public.read_bytes())
    result = shell_build(project.parent, "vendor", "--wheel", key_env="keys/vendor.pub")
    assert result.returncode != 0
    line = next(x for x in result.stderr.splitlines() if x.startswith("backend-packager: error:"))
    assert "vendor.pub: is a public key; pass the private key (.pem)" in line
    assert not list((project / "dist").glob("*.whl"))


def test_the_unpacked_sdist_is_found_only_by_an_identical_pyproject(tmp_path: Path) -> None:
    start = tmp_path / "start"
    (start / "a").mkdir(parents=True)
    (start / "b").mkdir()
    unpacked = tmp_path / "unpacked"
    unpacked.mkdir()
    (unpacked / "PKG-INFO").write_text("Metadata-Version: 2.1\n")
    (unpacked / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    (start / "a" / "pyproject.toml").write_text("[project]\nname = 'y'\n")
    env = {"PWD": str(start)}
    assert config.project_root(unpacked, env) == unpacked
    (start / "b" / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    assert config.project_root(unpacked, env) == start / "b"
    (start / "a" / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    assert config.project_root(unpacked, env) == unpacked, "two candidates: ambiguous, not guessed"
    assert config.project_root(unpacked, env, [start / "a"]) == start / "a", "the output directory's parent first"
    # Built in the tree (no PKG-INFO at the root): the project is the root, nothing is searched.
    os.unlink(unpacked / "PKG-INFO")
    assert config.project_root(unpacked, env, [start / "a"]) == unpacked


def test_start_directory_falls_back_to_the_hook_directory(tmp_path: Path) -> None:
    assert config.start_directory({"PWD": str(tmp_path)}) == tmp_path
    assert config.start_directory({"PWD": "relative/dir"}) == Path.cwd()
    assert config.start_directory({"PWD": str(tmp_path / "gone")}) == Path.cwd()
    assert config.start_directory({}) == Path.cwd()
