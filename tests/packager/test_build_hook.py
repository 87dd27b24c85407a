"""The PEP 517 backend: configuration, keys, metadata, reproducibility and repair, through
real frontends (`python -m build`, pyproject_hooks) building the real examples."""

from __future__ import annotations

import tarfile
import zipfile
from pathlib import Path

import pytest
from helpers.cli import run_cli
from helpers.projects import Keypair, build_env, built_wheel, copy_example, python_build
from pyproject_hooks import BuildBackendHookCaller

from backend_packager.base.errors import ConfigError
from backend_packager.manifest import config

# -- configuration ------------------------------------------------------------------------

GOOD = {"backends": [{"name": "demo", "package": "demo_backend", "targets": ["demo"]}]}


def parse(table: dict[str, object], environ: dict[str, str] | None = None) -> config.Config:
    return config.parse(table, Path("proj"), Path("proj/pyproject.toml"), environ or {})


def test_config_defaults() -> None:
    cfg = parse(GOOD)
    assert cfg.backends == (config.BackendSpec("demo", "demo_backend", ("demo",)),)
    assert cfg.inner_backend == "setuptools.build_meta"
    assert (cfg.signing_key, cfg.require_signature, cfg.repair, cfg.triton) == (None, False, None, "")
    assert cfg.entry_points() == {"demo": "demo_backend"}


def test_config_key_from_table_wins_over_environment() -> None:
    env = {"BACKEND_PACKAGER_SIGNING_KEY": "/keys/ci.pem"}
    assert parse(GOOD, env).signing_key == Path("/keys/ci.pem")
    assert parse({**GOOD, "signing-key": "k.pem"}, env).signing_key == Path("proj/k.pem")


@pytest.mark.parametrize(
    ("table", "expected"),
    [
        ({}, "tool.backend-packager.backends: expected a non-empty list of tables"),
        ({"backends": [{"name": "demo"}]}, "tool.backend-packager.backends[0].package: expected a dotted Python"),
        ({"backends": [{"name": "a=b", "package": "p"}]}, "tool.backend-packager.backends[0].name: expected an"),
        ({"backends": [{"name": "x", "package": "p", "compiler": "c"}]},
         "tool.backend-packager.backends[0].compiler: unknown key; expected name, package, targets"),
        ({**GOOD, "protocol-version": 1}, "tool.backend-packager.protocol-version: expected a string 'MAJOR.MINOR'"),
        ({**GOOD, "triton": "3.9"}, "tool.backend-packager.triton: expected a PEP 440 version specifier"),
        ({**GOOD, "require-signature": "yes"}, "tool.backend-packager.require-signature: expected true or false"),
        ({**GOOD, "repair": "delocate"}, "tool.backend-packager.repair: expected one of 'auditwheel'"),
        ({**GOOD, "signing_key": "k.pem"}, "tool.backend-packager.signing_key: unknown key; expected one of"),
    ],
)
def test_config_errors_name_the_key(table: dict[str, object], expected: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse(table)
    assert caught.value.path == "proj/pyproject.toml"
    assert caught.value.detail.startswith(expected), caught.value.detail


# -- building through a frontend ---------------------------------------------------------


def set_config(project: Path, old: str, new: str) -> None:
    pyproject = project / "pyproject.toml"
    text = pyproject.read_text()
    assert old in text
    pyproject.write_text(text.replace(old, new))


def test_bad_config_fails_the_build_with_one_line(tmp_path: Path, signing_key: Keypair) -> None:
    project = copy_example("setuptools_backend", tmp_path / "src")
    set_config(project, 'protocol-version = "1.0"', 'protocol-version = "one"')
    result = python_build(project, tmp_path / "dist", "--wheel", env=build_env(signing_key))
    assert result.returncode != 0
    assert (f"backend-packager: error: {project}/pyproject.toml: tool.backend-packager.protocol-version: "
            "expected a string 'MAJOR.MINOR', found 'one'") in result.stderr
    assert "Traceback" not in result.stderr
    assert not list((tmp_path / "dist").glob("*.whl"))


def test_required_signature_without_key_writes_no_wheel(tmp_path: Path) -> None:
    project = copy_example("setuptools_backend", tmp_path / "src")
    result = python_build(project, tmp_path / "dist", "--wheel", env=build_env(None))
    assert result.returncode != 0
    assert ("backend-packager: error: pyproject.toml: tool.backend-packager.require-signature is true but no "
            "signing key is configured") in result.stderr
    assert not list((tmp_path / "dist").glob("*.whl"))


def test_without_key_hash_only_and_a_warning(tmp_path: Path, signing_key: Keypair) -> None:
    project = copy_example("setuptools_backend", tmp_path / "src")
    set_config(project, "require-signature = true", "require-signature = false")
    result = python_build(project, tmp_path / "dist", "--wheel", env=build_env(None))
    assert result.returncode == 0, result.stderr
    assert "backend-packager: warning: no signing key" in result.stderr
    (wheel,) = (tmp_path / "dist").glob("*.whl")
    assert "signature:  none (hash-only manifest)" in run_cli("inspect", str(wheel)).stdout
    check = run_cli("verify", str(wheel), "--trust", str(signing_key.public))
    assert check.returncode == 1 and "signature.unsigned" in check.stdout


def test_key_file_named_in_pyproject(tmp_path: Path, signing_key: Keypair) -> None:
    project = copy_example("setuptools_backend", tmp_path / "src")
    (project / "keys").mkdir()
    (project / "keys" / "vendor.pem").write_bytes(signing_key.private.read_bytes())
    set_config(project, "require-signature = true", 'require-signature = true\nsigning-key = "keys/vendor.pem"')
    wheel = built_wheel(project, tmp_path / "dist", build_env(None))
    assert run_cli("verify", str(wheel), "--trust", str(signing_key.public)).returncode == 0


def test_backend_package_must_hold_compiler_and_driver(tmp_path: Path, signing_key: Keypair) -> None:
    project = copy_example("setuptools_backend", tmp_path / "src")
    (project / "demo_backend" / "driver.py").unlink()
    result = python_build(project, tmp_path / "dist", "--wheel", env=build_env(signing_key))
    assert result.returncode != 0
    assert ("tool.backend-packager.backends: backend 'demo' names package 'demo_backend', but the wheel has no "
            "demo_backend/driver.py (Triton imports demo_backend.driver)") in result.stderr


@pytest.mark.parametrize("example", ["setuptools_backend", "scikit_build_backend"])
def test_two_builds_are_byte_identical(example: str, tmp_path: Path, signing_key: Keypair) -> None:
    # Different source paths, sdist then wheel from the sdist, as `python -m build` does by default.
    wheels = []
    for copy in ("a", "b"):
        project = copy_example(example, tmp_path / copy / "src")
        result = python_build(project, tmp_path / copy / "dist", env=build_env(signing_key))
        assert result.returncode == 0, result.stderr[-3000:]
        wheels += list((tmp_path / copy / "dist").glob("*.whl"))
    first, second = wheels
    assert first.name == second.name
    assert first.read_bytes() == second.read_bytes()


@pytest.mark.parametrize("example", ["setuptools_backend", "scikit_build_backend"])
def test_prepared_metadata_matches_the_wheel(example: str, tmp_path: Path, example_wheels: dict[str, Path],
                                             signing_key: Keypair) -> None:
    project = copy_example(example, tmp_path / "src")
    hooks = BuildBackendHookCaller(str(project), "backend_packager.build")
    (tmp_path / "meta").mkdir()
    with pytest.MonkeyPatch.context() as env:
        env.setenv("BACKEND_PACKAGER_SIGNING_KEY", str(signing_key.private))
        dist_info = hooks.prepare_metadata_for_build_wheel(str(tmp_path / "meta"))
    prepared = tmp_path / "meta" / dist_info
    with zipfile.ZipFile(example_wheels[example]) as wheel:
        for leaf in ("entry_points.txt", "METADATA"):
            assert (prepared / leaf).read_bytes() == wheel.read(f"{dist_info}/{leaf}"), leaf
    assert "[triton.backends]\n" in (prepared / "entry_points.txt").read_text()


def test_every_hook_is_delegated(tmp_path: Path, signing_key: Keypair) -> None:
    project = copy_example("setuptools_backend", tmp_path / "src")
    set_config(project, "require-signature = true", 'require-signature = true\nrepair = "auditwheel"')
    hooks = BuildBackendHookCaller(str(project), "backend_packager.build",
                                   runner=_runner({"BACKEND_PACKAGER_SIGNING_KEY": str(signing_key.private)}))
    assert "auditwheel>=6" in hooks.get_requires_for_build_wheel()
    assert "auditwheel>=6" not in hooks.get_requires_for_build_sdist()
    for out in ("sdist", "editable"):
        (tmp_path / out).mkdir()
    sdist = hooks.build_sdist(str(tmp_path / "sdist"))
    with tarfile.open(tmp_path / "sdist" / sdist) as tar:
        assert any(n.endswith("csrc/demo_driver.c") for n in tar.getnames())
    editable = tmp_path / "editable" / hooks.build_editable(str(tmp_path / "editable"))
    with zipfile.ZipFile(editable) as wheel:
        names = wheel.namelist()
        entry_points = next(n for n in names if n.endswith("entry_points.txt"))
        assert wheel.read(entry_points).decode() == "[triton.backends]\ndemo = demo_backend\n"
        assert any(n.endswith(".dist-info/triton_backend.dsse.json") for n in names)
    from helpers.wheelcheck import assert_vouches_for_every_file

    assert_vouches_for_every_file(editable)  # the path hook and .pth an editable wheel holds, too


def _runner(extra: dict[str, str]):  # type: ignore[no-untyped-def]
    from pyproject_hooks import default_subprocess_runner

    def run(cmd, cwd=None, extra_environ=None):  # type: ignore[no-untyped-def]
        default_subprocess_runner(cmd, cwd, {**(extra_environ or {}), **extra})

    return run


def test_repair_with_auditwheel_before_the_scan(tmp_path: Path, signing_key: Keypair) -> None:
    project = copy_example("setuptools_backend", tmp_path / "src")
    set_config(project, "require-signature = true", 'require-signature = true\nrepair = "auditwheel"')
    wheel = built_wheel(project, tmp_path / "dist", build_env(signing_key))
    assert "manylinux" in wheel.name and "linux_x86_64" not in wheel.name.replace("manylinux", "")
    check = run_cli("verify", str(wheel), "--trust", str(signing_key.public))
    assert check.returncode == 0, check.stdout
    inspect = run_cli("inspect", str(wheel)).stdout
    assert "manylinux" in inspect.splitlines()[0]
    from helpers.wheelcheck import assert_vouches_for_every_file

    # Hashed after the repair: the retagged WHEEL and whatever auditwheel changed are what is vouched for.
    assert_vouches_for_every_file(wheel)
