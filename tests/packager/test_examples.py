"""The example backends as users get them: installed with pip into fresh venvs, found by
importlib.metadata; repaired by auditwheel and re-signed. Found by the real Triton 3.9:
``tests/real/test_examples_triton.py``."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from helpers.cli import run_cli
from helpers.projects import Keypair, build_env, fresh_venv, pip_install
from helpers.venv import run_in

EXPECTED = {
    "setuptools_backend": ("demo", "demo_backend", ["demo_backend/lib/libdemo_driver.so"]),
    "scikit_build_backend": (
        "skdemo", "skdemo_backend",
        ["skdemo_backend/lib/libskdemo_driver.so", "skdemo_backend/lib/libskdemo_plugin.so"],
    ),
}

ENTRY_POINTS = """
import importlib.metadata as md, json, sys, pathlib
eps = {ep.name: ep.value for ep in md.entry_points(group="triton.backends")}
files = sorted(str(f) for f in md.files(sys.argv[1]) if str(f).endswith(".so"))
print(json.dumps({"entry_points": eps, "files": files}))
"""


@pytest.mark.parametrize("example", sorted(EXPECTED))
def test_built_example_verifies(example: str, example_wheels: dict[str, Path], signing_key: Keypair) -> None:
    from helpers.wheelcheck import assert_strict_zip, vouched_members

    result = run_cli("verify", str(example_wheels[example]), "--trust", str(signing_key.public))
    assert result.returncode == 0, result.stdout
    assert f"{len(vouched_members(example_wheels[example]))} artifacts match (coverage all)" in result.stdout
    assert_strict_zip(example_wheels[example])


@pytest.mark.parametrize("example", sorted(EXPECTED))
def test_pip_install_exposes_entry_points(example: str, example_wheels: dict[str, Path], tmp_path: Path) -> None:
    python = fresh_venv(tmp_path / "venv")
    pip_install(python, str(example_wheels[example]))
    name, package, libraries = EXPECTED[example]
    dist = example_wheels[example].name.split("-")[0]
    found = run_in(python, ENTRY_POINTS, dist)
    assert found == {"entry_points": {name: package}, "files": libraries}


def test_repaired_then_resigned_wheel_verifies(
    example_wheels: dict[str, Path], signing_key: Keypair, tmp_path: Path
) -> None:
    env = build_env(signing_key)
    python = Path(env["PATH"].split(":")[0]) / "python"
    repair = subprocess.run(
        [str(python), "-m", "auditwheel", "repair", "-w", str(tmp_path / "repaired"),
         str(example_wheels["scikit_build_backend"])], capture_output=True, text=True, env=env,
    )
    assert repair.returncode == 0, repair.stderr[-2000:]
    (repaired,) = (tmp_path / "repaired").glob("*.whl")
    assert "manylinux" in repaired.name
    # auditwheel retags the wheel: the signed tags no longer match until it is re-signed.
    stale = run_cli("verify", str(repaired), "--trust", str(signing_key.public))
    assert stale.returncode == 1 and "identity.tags" in stale.stdout
    resign = run_cli("migrate", str(repaired), "-o", str(tmp_path / "signed"), "--key", str(signing_key.private))
    assert resign.returncode == 0, resign.stderr
    (signed,) = (tmp_path / "signed").glob("*.whl")
    result = run_cli("verify", str(signed), "--trust", str(signing_key.public))
    assert result.returncode == 0, result.stdout
    from helpers.wheelcheck import vouched_members

    assert f"{len(vouched_members(signed))} artifacts match (coverage all)" in result.stdout


# -- the real Triton ----------------------------------------------------------------------


