"""The plugin contract on real plugins: triton 3.9.0's bundled ones captured from the wheel,
triton-utlx 3.8 captured with a real triton 3.8.0 and diagnosed beside 3.9.0; in a venv with the
real triton 3.9.0 (the runtime through the .pth hook), utlx refused before any dlopen, a required
plugin that is excluded stopping compilation, and the compile-cache key per plugin. Contract
plugins compiled here: :class:`helpers.csrc.Libs`.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

import pytest
from helpers.contract import LIBTRITON, PLUGIN, parse, table
from helpers.csrc import Libs
from helpers.wheels import backend_files, write_wheel
from triton_backend_runtime.manifest import model as m

from backend_packager.build import describe_build
from backend_packager.manifest import contents as assemble
from backend_packager.manifest import plugininfo
from backend_packager.rewrite import rewrite_wheel
from backend_packager.scanning.artifacts import artifact_from_file


@pytest.fixture(scope="module")
def libs(tmp_path_factory: pytest.TempPathFactory) -> Libs:
    return Libs(tmp_path_factory.mktemp("contract"))


def _members(wheel: Path, out: Path, names: list[str]) -> list[m.Artifact]:
    with zipfile.ZipFile(wheel) as archive:
        for name in names:
            archive.extract(name, out)
    return [artifact_from_file(out / n, n) for n in names]


@pytest.mark.triton_wheel
def test_triton_390_bundled_plugins_captured_from_the_wheel(triton_wheel: Path, tmp_path: Path) -> None:
    names = [LIBTRITON, "triton/plugins/libTritonPluginsTestLib.so", "triton/plugins/libMLIRDialectPlugin.so"]
    artifacts = _members(triton_wheel, tmp_path, names)
    plugins = plugininfo.capture_all(triton_wheel, artifacts, assemble.find_plugins(artifacts))
    captured = {p.path: p.info for p in plugins}
    test_lib, dialect = captured[names[1]], captured[names[2]]
    assert test_lib is not None and dialect is not None and test_lib.captured and dialect.captured
    assert test_lib.ran_in == dialect.ran_in == "sandbox"  # libtriton.so (500 MB) and all, in the sandbox
    assert (test_lib.name, test_lib.version, test_lib.triton_version, test_lib.libtriton) == (
        "TritonPlugin", "0.1.0", "3.9.0", LIBTRITON)
    assert [p.name for p in test_lib.passes] == ["plugin"]
    assert [d.name for d in dialect.dialects] == ["DialectPlugin"] and dialect.ops == ["custom_op"]
    assert "libTritonPluginsTestLib" not in Path("/proc/self/maps").read_text()


@pytest.mark.triton_wheel
def test_utlx_38_captured_with_triton_380_and_diagnosed_beside_390(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    from _wheels import fetch_wheel
    from triton_backend_runtime.base.errors import VerifyError
    from triton_backend_runtime.verification.contract import check_terms
    from triton_backend_runtime.verification.verdict import plugin_terms

    site = tmp_path / "site"  # the build environment: a real triton 3.8.0's files
    _members(fetch_wheel("triton==3.8.0"), site, [LIBTRITON, "triton/__init__.py"])
    monkeypatch.syspath_prepend(str(site))
    utlx = fetch_wheel("triton-utlx==3.8.0.post16")
    artifacts = _members(utlx, tmp_path / "utlx", ["utlx_plugin/libutlx.so"])
    (plugin,) = plugininfo.capture_all(utlx, artifacts, assemble.find_plugins(artifacts))
    info = plugin.info
    assert info is not None and info.captured, info
    assert (info.name, info.version, info.triton_version) == ("uTLXPlugin", "3.8.0", "3.8.0+gitc01b6774")
    assert info.libtriton == "build environment: triton 3.8.0"
    assert len(info.passes) == 20 and [d.name for d in info.dialects] == ["TLXDialect"] and len(info.ops) > 50
    terms = plugin_terms(plugin)
    assert terms is not None
    check_terms(terms, "3.8.0", "libutlx.so")  # its own Triton: admitted
    with pytest.raises(VerifyError) as caught:  # beside 3.9.0: refused before any dlopen
        check_terms(terms, "3.9.0", "libutlx.so")
    assert caught.value.code == "verify.plugin-triton" and "3.8.0+gitc01b6774" in caught.value.detail


KERNEL = '''import triton


@triton.jit
def kernel(x):
    pass
'''


RUN = '''
import json, os, triton
from triton.backends.compiler import GPUTarget
from triton_backend_runtime.loading import registry
import kern
hook = triton.knobs.runtime.add_stages_inspection_hook
def attempt(call):
    try:
        return [call(), None]
    except Exception as exc:
        return [None, [type(exc).__name__, getattr(exc, "code", None), str(exc), isinstance(exc, RuntimeError)]]
key = attempt(lambda: hook()[0] if hook else None)
src = triton.compiler.ASTSource(kern.kernel, {"x": "*fp32"})
compiled = attempt(lambda: triton.compile(src, target=GPUTarget("cuda", 80, 32)) and "compiled")
maps = open("/proc/self/maps").read()
print(json.dumps({"plugins": registry.get().report().to_dict()["plugins"], "key": key, "compile": compiled,
                  "mapped": [n for n in ("libutlx", "libcontract") if n in maps]}))
'''


def run_in_venv(venv: Any, *sites: Path) -> dict[str, Any]:
    (sites[0] / "kern.py").write_text(KERNEL)
    done = venv.run(RUN, *sites, TRITON_BACKEND_TRUSTED_KEYS=str(venv.pub))
    assert done.returncode == 0, done.stderr[-3000:]
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    result["stderr"] = done.stderr
    return result


def signed_plugin_wheel(venv: Any, so: Path, out: Path, version: str = "1.0", **declared: Any) -> Path:
    """A wheel of the contract plugin (and a backend, which a build needs), built by the build
    hook's plan with ``declared`` and signed with the venv's trusted key."""
    from backend_packager.manifest import signing

    wheel = write_wheel(out / "in", "contract-backend", version,
                        {**backend_files("contract_pkg", "Contract", "contract"), PLUGIN: so.read_bytes()},
                        backends={"contract": "contract_pkg"})
    cfg = parse(table(**declared), out)

    def plan(contents: Any) -> Any:
        return describe_build(contents, cfg, wheel=wheel)

    return rewrite_wheel(wheel, out / "signed", plan, signing.load(venv.key))


@pytest.mark.triton_wheel
def test_utlx_installed_beside_triton_390_is_refused_before_dlopen(venv: Any, tmp_path: Path) -> None:
    from _wheels import fetch_wheel
    from helpers.wheels import pip_install

    site38 = tmp_path / "triton38"  # the build environment has triton 3.8.0
    _members(fetch_wheel("triton==3.8.0"), site38, [LIBTRITON, "triton/__init__.py"])
    utlx = fetch_wheel("triton-utlx==3.8.0.post16")
    env = {**os.environ, "PYTHONPATH": str(site38)}
    exe = Path(sys.executable).parent / "backend-packager"
    done = subprocess.run([str(exe), "migrate", str(utlx), "-o", str(tmp_path / "out"), "--key", str(venv.key),
                           "--capture-plugins"], capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr
    (site := tmp_path / "site").mkdir()
    pip_install(venv.python, tmp_path / "out" / utlx.name, site)
    result = run_in_venv(venv, site)
    (row,) = [p for p in result["plugins"] if p["distribution"] == "triton-utlx"]
    assert (row["trust"], row["state"], row["handed_over"]) == ("rejected", "excluded", ""), row
    # what the library said at build time is the reason; its METADATA's triton~=3.8.0 agrees
    assert row["reason"]["code"] == "verify.plugin-triton", row["reason"]
    message = row["reason"]["message"]
    assert "3.8.0+gitc01b6774" in message and "installed is 3.9.0" in message and "verify.triton" in message
    assert row["contract"]["built_for"] == "3.8.0+gitc01b6774" and len(row["contract"]["passes"]) == 20
    assert result["mapped"] == []  # never dlopen'ed
    doctor = venv.cli("doctor", paths=(site,), TRITON_BACKEND_TRUSTED_KEYS=str(venv.pub)).stdout
    assert "captured:  uTLXPlugin 3.8.0, built for Triton 3.8.0+gitc01b6774" in doctor
    assert "declared:  nothing" in doctor


@pytest.mark.triton_wheel
def test_a_required_plugin_that_is_excluded_stops_compilation(venv: Any, libs: Libs, tmp_path: Path) -> None:
    from helpers.wheels import pip_install

    so = libs.plugin("venv-3.8", "TRITON_VERSION=\"3.8.0\"", libtriton=False)
    wheel = signed_plugin_wheel(venv, so, tmp_path, triton=">=3.8", **{"on-failure": "fail"})
    (site := tmp_path / "site").mkdir()
    pip_install(venv.python, wheel, site)
    result = run_in_venv(venv, site)
    (row,) = [p for p in result["plugins"] if p["distribution"] == "contract-backend"]
    assert (row["state"], row["reason"]["code"]) == ("excluded", "verify.plugin-triton")
    for attempt in (result["key"], result["compile"]):  # the hook, and triton.compile through it
        name, code, message, runtime_error = attempt[1]
        assert (name, code, runtime_error) == ("PluginRequiredError", "load.plugin-required", True)
        assert "contract" in message and "verify.plugin-triton" in message
    assert 'on-failure = "fail": compiling raises' in result["stderr"]


@pytest.mark.triton_wheel
def test_the_compile_cache_key_per_plugin(venv: Any, libs: Libs, tmp_path: Path) -> None:
    from helpers.wheels import pip_install

    runs: list[str] = []

    def key(so: Path, version: str, *extra: Path, **declared: Any) -> str:
        out = tmp_path / f"run-{len(runs)}"
        (site := out / "site").mkdir(parents=True)
        pip_install(venv.python, signed_plugin_wheel(venv, so, out, version, **declared), site)
        result = run_in_venv(venv, site, *extra)
        (row,) = [p for p in result["plugins"] if p["distribution"] == "contract-backend"]
        assert row["state"] == "loaded" and row["handed_over"] == "extend_with; mapped (/proc/self/maps)", row
        assert result["key"][1] is None, result["key"]
        value: str = result["key"][0]
        runs.append(value)
        return value

    unrelated = {v: write_wheel(tmp_path / f"unrelated-{v}", "unrelated-tool", v, {"unrelated_tool/__init__.py": b""})
                 for v in ("1.0", "2.0")}
    extra = {}
    for version, wheel in unrelated.items():
        pip_install(venv.python, wheel, extra.setdefault(version, tmp_path / f"extra-{version}"))
    v10 = libs.plugin("venv-1.0", libtriton=False)
    v11 = libs.plugin("venv-1.1", "PLUGIN_VERSION=\"1.1\"", libtriton=False)
    base = key(v10, "1.0", extra["1.0"])
    assert key(v10, "1.0", extra["2.0"]) == base  # an unrelated distribution's upgrade: a hit
    assert key(v11, "1.0", extra["1.0"]) != base  # the plugin's own version: a miss
    placed = {"passes": [{"name": "contract-lower", "after": "ttgir"}]}
    assert key(v10, "1.0", extra["1.0"], **placed) != base  # its declared placement: a miss
