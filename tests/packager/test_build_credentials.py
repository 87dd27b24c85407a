"""The build hook keeps its credentials from the vendor's code: every PEP 517/660 hook takes the
OIDC identity token, the key's passphrase and the key's path out of the environment before the
inner backend runs, so neither the inner backend, nor what it starts, nor ``/proc/self/environ``
shows them; the signing (build_wheel, build_editable) still gets them.

The inner backend here is a real one, ``spy_backend``: each hook writes what its environment
holds to a log, then lets setuptools build. Hooks run as a frontend runs them (pyproject_hooks,
each in a child process of its own, the frontend's environment inherited), or in one process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from helpers.cli import run_cli
from helpers.projects import EPOCH
from pyproject_hooks import BuildBackendHookCaller

from backend_packager.manifest import config, keyless, signing

TOKEN = "eyJSECRET.identity-token.7f3c9a"  # sigstore rejects it: no network needed
PASSPHRASE = "hunter2-passphrase-5b1e"
HOOKS = ("get_requires_for_build_wheel", "get_requires_for_build_sdist", "get_requires_for_build_editable",
         "prepare_metadata_for_build_wheel", "prepare_metadata_for_build_editable",
         "build_sdist", "build_wheel", "build_editable")

SPY = '''
import json, os, subprocess, sys
from pathlib import Path
from setuptools import build_meta

HOOKS = {hooks!r}


def record(hook):
    child = subprocess.run([sys.executable, "-c", "import os; print(sorted(os.environ.items()))"],
                           capture_output=True, text=True, check=True).stdout
    seen = {{"outer": os.environ["SPY_HOOK"], "inner": hook, "environ": repr(sorted(os.environ.items())),
            "proc": Path("/proc/self/environ").read_bytes().decode("utf-8", "replace"), "child": child}}
    with open(os.environ["SPY_LOG"], "a", encoding="utf-8") as log:
        log.write(json.dumps(seen) + "\\n")


def spied(name):
    def hook(*args, **kwargs):
        record(name)
        return getattr(build_meta, name)(*args, **kwargs)
    return hook


for _name in HOOKS:
    globals()[_name] = spied(_name)
'''


def project(root: Path, *, prepare: bool, sigstore: bool) -> Path:
    """A pure-Python backend project whose inner backend is the spy (``prepare``: with the
    prepare_metadata hooks; without, the packager builds the wheel to get the metadata)."""
    (root / "demo_backend").mkdir(parents=True)
    for module in ("__init__", "compiler", "driver"):
        (root / "demo_backend" / f"{module}.py").write_text("")
    (root / "spy").mkdir()
    hooks = HOOKS if prepare else tuple(h for h in HOOKS if not h.startswith("prepare_"))
    (root / "spy" / "spy_backend.py").write_text(SPY.format(hooks=hooks))
    (root / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["setuptools>=61"]\nbuild-backend = "backend_packager.build"\n\n'
        '[project]\nname = "spied-backend"\nversion = "0.1.0"\n\n[tool.setuptools]\npackages = ["demo_backend"]\n\n'
        '[tool.backend-packager]\nbackends = [{ name = "demo", package = "demo_backend" }]\n'
        'inner-backend = "spy_backend"\ninner-backend-path = ["spy"]\nrequire-signature = true\n'
        f"sigstore = {'true' if sigstore else 'false'}\n")
    return root


def encrypted_key(directory: Path) -> tuple[Path, Path]:
    private = directory / "keys" / "vendor.pem"
    private.parent.mkdir()
    exe = Path(sys.executable).parent / "backend-packager"
    subprocess.run([str(exe), "keygen", "-o", str(private), "--comment", "vendor"], check=True, capture_output=True,
                   env={**os.environ, signing.PASSPHRASE_ENV: PASSPHRASE})
    return private, private.with_suffix(".pub")


def environment(key: Path, log: Path) -> dict[str, str]:
    """A frontend's environment holding every credential, and no CI's ambient one."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ACTIONS_", "GITHUB_"))}
    return {**env, "SOURCE_DATE_EPOCH": EPOCH, "SPY_LOG": str(log), keyless.IDENTITY_TOKEN_ENV: TOKEN,
            signing.PASSPHRASE_ENV: PASSPHRASE, config.SIGNING_KEY_ENV: str(key)}


class Frontend:
    """pyproject_hooks' caller, each hook a child process with ``env``; its stderr kept."""

    def __init__(self, root: Path, env: dict[str, str]) -> None:
        self.env, self.stderr = env, ""
        self.hooks = BuildBackendHookCaller(str(root), "backend_packager.build", runner=self.run)

    def run(self, cmd: list[str], cwd: str | None = None, extra_environ: dict[str, str] | None = None) -> None:
        env = {**self.env, **(extra_environ or {}), "SPY_HOOK": cmd[2]}  # cmd: python _in_process.py HOOK DIR
        proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True)
        self.stderr = proc.stderr
        if proc.returncode != 0:
            raise subprocess.CalledProcessError(proc.returncode, cmd, proc.stdout, proc.stderr)

    def call(self, hook: str, out: Path) -> object:
        if hook.startswith("get_requires_"):
            return getattr(self.hooks, hook)()
        out.mkdir(parents=True, exist_ok=True)
        return getattr(self.hooks, hook)(str(out))


def records(log: Path) -> list[dict[str, str]]:
    return [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines()] if log.exists() else []


def assert_no_credential(seen: list[dict[str, str]], *secrets: str) -> None:
    for record in seen:
        for where in ("environ", "proc", "child"):
            for secret in secrets:
                assert secret not in record[where], f"{record['outer']} -> inner {record['inner']}: {where}"


@pytest.mark.parametrize("prepare", [True, False], ids=["inner-prepare-metadata", "prepare-metadata-fallback"])
def test_no_hook_shows_the_credentials_to_the_inner_backend(prepare: bool, tmp_path: Path) -> None:
    root = project(tmp_path / "src", prepare=prepare, sigstore=False)
    private, public = encrypted_key(tmp_path)
    log = tmp_path / "hooks.jsonl"
    frontend = Frontend(root, environment(private, log))
    results = {hook: frontend.call(hook, tmp_path / hook) for hook in HOOKS}
    seen = records(log)
    assert {r["outer"] for r in seen} == set(HOOKS)  # every hook ran the vendor's code
    assert_no_credential(seen, TOKEN, PASSPHRASE, str(private))
    # The signing still had the key and its passphrase: the wheel verifies.
    wheel = tmp_path / "build_wheel" / str(results["build_wheel"])
    check = run_cli("verify", str(wheel), "--trust", str(public))
    assert check.returncode == 0, check.stdout + check.stderr


def test_build_wheel_still_signs_with_the_token_the_others_never_show(tmp_path: Path) -> None:
    root = project(tmp_path / "src", prepare=False, sigstore=True)
    private, _ = encrypted_key(tmp_path)
    log = tmp_path / "hooks.jsonl"
    frontend = Frontend(root, environment(private, log))
    for hook in HOOKS:
        if hook in ("build_wheel", "build_editable"):
            with pytest.raises(subprocess.CalledProcessError):
                frontend.call(hook, tmp_path / hook)
            # The token reached the signer (and was refused there, unshown), the inner build never ran.
            assert f"{keyless.IDENTITY_TOKEN_ENV}: not a usable OIDC identity token" in frontend.stderr
            assert TOKEN not in frontend.stderr, frontend.stderr
        else:
            frontend.call(hook, tmp_path / hook)
    seen = records(log)
    assert {r["outer"] for r in seen} == set(HOOKS) - {"build_wheel", "build_editable"}
    assert_no_credential(seen, TOKEN, PASSPHRASE, str(private))


def test_hooks_in_one_process_keep_the_token_for_the_signing(tmp_path: Path) -> None:
    # A caller running several hooks in one process: the first takes the token, build_wheel still has it.
    root = project(tmp_path / "src", prepare=True, sigstore=True)
    private, _ = encrypted_key(tmp_path)
    log = tmp_path / "hooks.jsonl"
    code = "from backend_packager import build; print(build.get_requires_for_build_wheel()); build.build_wheel('dist')"
    env = {**environment(private, log), "SPY_HOOK": "get_requires_for_build_wheel"}
    proc = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True, env=env)
    assert proc.returncode != 0
    assert f"{keyless.IDENTITY_TOKEN_ENV}: not a usable OIDC identity token" in proc.stderr, proc.stderr
    assert TOKEN not in proc.stdout + proc.stderr
    seen = records(log)
    assert [r["inner"] for r in seen] == ["get_requires_for_build_wheel"]
    assert_no_credential(seen, TOKEN, PASSPHRASE, str(private))
