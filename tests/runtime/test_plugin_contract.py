"""The plugin contract: captured from ``tritonGetPluginInfo`` at build time, declared in
``[tool.backend-packager]``, checked at load before any ``dlopen``, folded into the cache key.

Plugins are real shared libraries compiled here from ``tests/csrc/contract_plugin.c`` (the
``PluginInfo`` layout of Triton 3.9's ``PluginUtils.h``) against a stub ``libtriton.so``
(``tests/csrc/stub_libtriton.c``). The real ones (the triton 3.9.0 and 3.8.0 wheels and the
triton-utlx 3.8 wheel): ``tests/real/test_plugin_contract_real.py``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from helpers.cli import run_cli
from helpers.contract import LIBTRITON, PLUGIN, parse, table
from helpers.csrc import ElfFixtures, Libs, patched_copy
from helpers.disttree import Dist, TrustEnv, write_dist
from helpers.wheels import backend_files, write_wheel
from hypothesis import given, settings
from hypothesis import strategies as st
from triton_backend_runtime.loading.registry import Registry
from triton_backend_runtime.manifest import model as m
from triton_backend_runtime.triton.compilekey import PluginRequiredError, StagesHook, manifest_digest, plugin_keys

from backend_packager.base.errors import ConfigError
from backend_packager.build import describe_build
from backend_packager.manifest import config, pluginanswer, plugininfo
from backend_packager.manifest import contents as assemble
from backend_packager.rewrite import rewrite_wheel
from backend_packager.scanning.artifacts import artifact_from_file


@pytest.fixture(scope="module")
def libs(tmp_path_factory: pytest.TempPathFactory) -> Libs:
    return Libs(tmp_path_factory.mktemp("contract"))


def plugin_wheel(out: Path, plugin: Path, *, libtriton: Path | None, name: str = "contract-backend",
                 version: str = "1.0") -> Path:
    files = {**backend_files("contract_pkg", "Contract", "contract"), PLUGIN: plugin.read_bytes()}
    if libtriton is not None:
        files[LIBTRITON] = libtriton.read_bytes()
    return write_wheel(out, name, version, files, backends={"contract": "contract_pkg"})


def capture(wheel: Path, limits: pluginanswer.Limits | None = None) -> list[m.Plugin]:
    with zipfile.ZipFile(wheel) as archive:
        archive.extractall(wheel.parent / "x")
    artifacts = [artifact_from_file(wheel.parent / "x" / p, p) for p in (PLUGIN, LIBTRITON)
                 if (wheel.parent / "x" / p).exists()]
    return plugininfo.capture_all(wheel, artifacts, assemble.find_plugins(artifacts), limits)


def inspected(wheel: Path) -> dict[str, Any]:
    """``backend-packager inspect --json`` of one wheel."""
    done = run_cli("inspect", "--json", str(wheel))
    assert done.returncode == 0, done.stderr
    doc: dict[str, Any] = json.loads(done.stdout)
    return doc["wheels"][0] if "wheels" in doc else doc


def leftovers() -> list[str]:
    import tempfile

    return [n for n in os.listdir(tempfile.gettempdir()) if n.startswith(f"backend-packager-plugin-{os.getpid()}-")]


# -- 1. capture ------------------------------------------------------------------------------


def test_captured_from_the_same_wheel_in_a_child(libs: Libs, tmp_path: Path) -> None:
    (plugin,) = capture(plugin_wheel(tmp_path, libs.plugin("good"), libtriton=libs.stub))
    info = plugin.info
    assert info is not None and info.captured, info
    assert (info.api_version, info.name, info.version, info.triton_version) == (2, "contract", "1.0", "3.9.0")
    assert [(p.name, p.version) for p in info.passes] == [("contract-lower", "1.0"), ("contract-fuse", "1.0")]
    assert [(d.name, d.version) for d in info.dialects] == [("ContractDialect", "1.0")] and info.ops == ["contract_op"]
    assert info.libtriton == LIBTRITON and plugin.name == "contract"
    # no code of the plugin in this process, nothing left in the temporary directory
    assert "libcontract" not in Path("/proc/self/maps").read_text()
    assert leftovers() == []


def test_captured_against_the_build_environments_triton(libs: Libs, tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    site = tmp_path / "site"
    (site / "triton" / "_C").mkdir(parents=True)
    (site / "triton" / "__init__.py").write_text('__version__ = "3.9.0"\n')
    shutil.copy(libs.stub, site / "triton" / "_C" / "libtriton.so")
    monkeypatch.syspath_prepend(str(site))
    (plugin,) = capture(plugin_wheel(tmp_path / "w", libs.plugin("good"), libtriton=None))
    assert plugin.info is not None and plugin.info.captured, plugin.info
    assert plugin.info.libtriton == "build environment: triton 3.9.0"  # the release, not a path


@pytest.mark.parametrize(("variant", "code"), [
    ("no-libtriton", "no-libtriton"), ("hang", "timeout"), ("crash", "call-failed"), ("api3", "api-version"),
    ("hog", "call-failed"), ("foreign", "foreign-arch"), ("v1", "api-version"), ("unresolved", "load-failed"),
    ("realtime-signal", "call-failed"),
])
def test_not_captured_says_why(variant: str, code: str, libs: Libs, elf_files: ElfFixtures, tmp_path: Path) -> None:
    limits = pluginanswer.Limits(timeout=3, memory=1 << 30)
    stub: Path | None = libs.stub
    plugin = {"hang": lambda: libs.plugin("hang", "HANG"), "crash": lambda: libs.plugin("crash", "CRASH"),
              "api3": lambda: libs.plugin("api3", "API_VERSION=3"), "hog": lambda: libs.plugin("hog", "HOG=2048"),
              "realtime-signal": lambda: libs.plugin("rt", "DIE_BY_SIGNAL=40"),
              "v1": lambda: elf_files.plugin_v1}.get(variant, lambda: libs.plugin("good"))()
    if variant == "no-libtriton":
        stub = None
    if variant == "foreign":  # e_machine = EM_AARCH64: scanned, never run here
        plugin = patched_copy(plugin, tmp_path / "libforeign.so", 18, (183).to_bytes(2, "little"))
    if variant == "unresolved":  # a libtriton.so without the symbol the plugin needs
        stub = elf_files.exports
    (captured,) = capture(plugin_wheel(tmp_path, plugin, libtriton=stub), limits)
    info = captured.info
    assert info is not None and not info.captured and info.reason_code == code, info
    assert info.name is None and info.passes == [] and info.triton_version is None  # never guessed
    if variant == "api3":
        assert info.api_version == 3
    assert info.reason is not None and "backend-packager-plugin-" not in info.reason  # reproducible
    if variant == "unresolved":
        assert f"{PLUGIN}: undefined symbol: tritonStubAbi" in info.reason
    if variant == "realtime-signal":
        assert "signal 40" in info.reason
    assert leftovers() == []


def test_a_killed_packagers_temporary_directory_is_removed(libs: Libs, tmp_path: Path) -> None:
    import tempfile

    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    stale = Path(tempfile.gettempdir()) / f"backend-packager-plugin-{dead.pid}-stale"
    (stale / "lib").mkdir(parents=True)
    (stale / "lib" / "libtriton.so").write_bytes(b"\0" * 4096)
    capture(plugin_wheel(tmp_path, libs.plugin("good"), libtriton=libs.stub))
    assert not stale.exists()


# -- 2. declare ------------------------------------------------------------------------------


@pytest.mark.parametrize("plugin", [
    {"phase": "lazy"}, {"on-failure": "ignore"}, {"triton": "3.9"}, {"passes": [{"name": "x"}]},
    {"passes": [{"name": "x", "after": "ttir", "before": "llir"}]}, {"passes": [{"name": "x y", "after": "ttir"}]},
    {"path": "/abs/lib.so"}, {"colour": "red"},
])
def test_a_malformed_declaration_is_refused(plugin: dict[str, Any], tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        parse(table(**plugin), tmp_path)
    assert caught.value.code == "config.value"


def build_manifest(wheel: Path, cfg: config.Config, out: Path) -> m.Manifest:
    """The build hook's plan over ``wheel`` (capture, check, describe), as ``python -m build`` runs it."""
    made: list[m.Manifest] = []

    def plan(contents: Any) -> Any:
        injection = describe_build(contents, cfg, wheel=wheel)
        made.append(injection.manifest)
        return injection

    rewrite_wheel(wheel, out, plan, None)
    return made[0]


GOOD = {"triton": ">=3.9,<3.10", "phase": "import", "on-failure": "fail",
        "passes": [{"name": "contract-lower", "after": "ttgir"}, {"name": "contract-fuse", "before": "contract-lower"}]}


def test_declared_and_captured_are_signed_together(libs: Libs, tmp_path: Path) -> None:
    wheel = plugin_wheel(tmp_path / "in", libs.plugin("good"), libtriton=libs.stub)
    manifest = build_manifest(wheel, parse(table(**GOOD), tmp_path), tmp_path / "out")
    (plugin,) = manifest.plugins
    assert plugin.info is not None and plugin.info.captured and plugin.contract is not None
    assert plugin.contract.on_failure == "fail" and plugin.contract.triton == ">=3.9,<3.10"
    assert [p.text() for p in plugin.contract.passes] == ["contract-lower after ttgir",
                                                          "contract-fuse before contract-lower"]
    doc = inspected(tmp_path / "out" / wheel.name)
    assert doc["plugins"][0]["captured"] and doc["plugins"][0]["declared"]["on_failure"] == "fail"


@pytest.mark.parametrize(("change", "code", "named"), [
    ({"passes": [{"name": "contract-inline", "after": "ttir"}]}, "config.plugin-pass",
     ["contract-inline", PLUGIN, "contract-lower, contract-fuse"]),
    ({"triton": ">=3.10"}, "config.plugin-triton", ["3.9.0", ">=3.10", PLUGIN]),
    ({"path": "contract_pkg/libnothere.so"}, "config.plugin-path", ["libnothere.so", PLUGIN]),
    ({"libtriton": None}, "config.plugin-uncaptured", ["no-libtriton", PLUGIN]),
])
def test_a_wrong_declaration_is_a_build_error(change: dict[str, Any], code: str, named: list[str], libs: Libs,
                                              tmp_path: Path) -> None:
    stub = None if "libtriton" in change else libs.stub
    wheel = plugin_wheel(tmp_path / "in", libs.plugin("good"), libtriton=stub)
    declared = {**GOOD, **{k: v for k, v in change.items() if k != "libtriton"}}
    with pytest.raises(ConfigError) as caught:
        build_manifest(wheel, parse(table(**declared), tmp_path), tmp_path / "out")
    assert caught.value.code == code
    assert all(n in str(caught.value) for n in named), caught.value
    assert not (tmp_path / "out" / wheel.name).exists()


def test_the_example_plugin_is_captured_and_declared(example_wheels: dict[str, Path]) -> None:
    (row,) = inspected(example_wheels["scikit_build_backend"])["plugins"]
    assert row["captured"] and row["info"]["name"] == "skdemo" and row["info"]["triton_version"] == "3.9.0"
    assert [p["name"] for p in row["info"]["passes"]] == ["skdemo-lower-to-device", "skdemo-fuse-elementwise"]
    assert row["declared"]["on_failure"] == "fail" and row["declared"]["triton"] == ">=3.9,<3.10"
    text = run_cli("inspect", str(example_wheels["scikit_build_backend"])).stdout
    assert "captured:  skdemo 0.1.0, plugin API 2, built for Triton 3.9.0" in text
    assert "declared:  triton >=3.9,<3.10, phase import, on-failure fail" in text


# -- 3. checked at load, before any dlopen ---------------------------------------------------


def installed(site: Path, env: TrustEnv, so: Path, name: str, info: m.PluginInfo | None,
              contract: m.PluginContract | None = None) -> Dist:
    """A distribution holding the plugin, its manifest carrying what the build captured."""
    dist = write_dist(site, name, "1.0", backends={}, files={f"{name.replace('-', '_')}/libp.so": so})

    def edit(man: m.Manifest) -> None:
        man.plugins = [replace(p, info=info, contract=contract) for p in man.plugins]

    dist.sign(env.key, edit=edit)
    return dist


def info_of(libs: Libs, tmp_path: Path, name: str, *defines: str) -> tuple[Path, m.PluginInfo]:
    """A plugin that needs nothing from libtriton (none is installed here), and what it says."""
    so = libs.plugin(f"rt-{name}", *defines, libtriton=False)
    (plugin,) = capture(plugin_wheel(tmp_path / name, so, libtriton=libs.stub))
    assert plugin.info is not None and plugin.info.captured
    return so, plugin.info


@pytest.mark.parametrize(("defines", "code", "name"), [
    (("PLUGIN_NAME=\"rival\"", "PASS_B=\"rival-fuse\"", "DIALECT=\"RivalDialect\"", "OP=\"rival_op\""),
     "conflict.pass", "contract-lower"),
    (("PLUGIN_NAME=\"rival\"", "PASS_A=\"rival-lower\"", "PASS_B=\"rival-fuse\"", "OP=\"rival_op\""),
     "conflict.dialect", "ContractDialect"),
    (("PLUGIN_NAME=\"rival\"", "PASS_A=\"rival-lower\"", "PASS_B=\"rival-fuse\"", "DIALECT=\"RivalDialect\""),
     "conflict.op", "contract_op"),
])
def test_two_plugins_registering_one_name(defines: tuple[str, ...], code: str, name: str, libs: Libs, env: TrustEnv,
                                          tmp_path: Path) -> None:
    site = tmp_path / "site"
    site.mkdir()
    _triton_dist(site, "3.9.0")
    good, good_info = info_of(libs, tmp_path, "good")
    rival, rival_info = info_of(libs, tmp_path, f"rival-{code}", *defines)
    installed(site, env, good, "alpha-plugin", good_info)
    installed(site, env, rival, "beta-plugin", rival_info)
    reg = env.registry(site)
    states = {p.dist.name: (p.state, p.reason.code if p.reason else None) for p in reg.plugins}
    # verified alike, neither the core: neither registers it until the trust store pins one
    assert states == {"alpha-plugin": ("excluded", code), "beta-plugin": ("excluded", code)}
    assert all(p.reason is not None and name in p.reason.message and "trust pin" in p.reason.message
               for p in reg.plugins)
    (env.trust / "pins").write_text(f"{code.split('.')[1]}:{name} alpha-plugin\n")
    reg = env.registry(site)
    states = {p.dist.name: (p.state, p.reason.code if p.reason else None) for p in reg.plugins}
    # the winner waits for libtriton (Triton 3.9 is installed): admitted, handed over by extend_with
    assert states == {"alpha-plugin": ("pending", None), "beta-plugin": ("excluded", code)}
    (loser,) = [p for p in reg.plugins if p.state == "excluded"]
    assert loser.reason is not None and name in loser.reason.message and "alpha-plugin" in loser.reason.message
    assert loser.handed_over == "" and str(loser.file) not in os.environ.get("TRITON_PLUGIN_PATHS", "")


def _triton_dist(site: Path, version: str) -> None:
    dist = write_dist(site, "triton", version, backends={},
                      files={"triton/__init__.py": f'__version__ = "{version}"\n'.encode()})
    record = "".join(f"{p},,\n" for p in dist.wheel_paths())
    (dist.dist_info / "RECORD").write_text(record)


@pytest.mark.parametrize(("built_for", "declared", "code"), [
    ("3.8.0", "", "verify.plugin-triton"), ("3.9.0", "<3.9", "verify.plugin-range"),
])
def test_the_installed_triton_against_the_contract(built_for: str, declared: str, code: str, libs: Libs, env: TrustEnv,
                                                   tmp_path: Path) -> None:
    site = tmp_path / "site"
    site.mkdir()
    _triton_dist(site, "3.9.0")
    so, info = info_of(libs, tmp_path, f"built-{built_for}", f"TRITON_VERSION=\"{built_for}\"")
    installed(site, env, so, "contract-plugin", info, m.PluginContract(triton=declared, on_failure="fail"))
    reg = env.registry(site)
    (plugin,) = [p for p in reg.plugins if p.dist.name == "contract-plugin"]
    assert (plugin.state, plugin.reason.code if plugin.reason else None) == ("excluded", code), plugin.reason
    assert plugin.handed_over == "" and str(so) not in os.environ.get("TRITON_PLUGIN_PATHS", "")
    (missing,) = reg.missing_required()
    assert "contract" in missing and code in missing and 'on-failure = "fail"' in missing
    with pytest.raises(PluginRequiredError) as caught:
        StagesHook("digest", None, reg.missing_required)()
    assert caught.value.code == "load.plugin-required" and isinstance(caught.value, RuntimeError)


def test_fallback_warns_and_compiles(libs: Libs, env: TrustEnv, tmp_path: Path) -> None:
    site = tmp_path / "site"
    site.mkdir()
    _triton_dist(site, "3.9.0")
    so, info = info_of(libs, tmp_path, "built-3.8", "TRITON_VERSION=\"3.8.0\"")
    installed(site, env, so, "contract-plugin", info, m.PluginContract(on_failure="fallback"))
    with pytest.warns(UserWarning, match=r"libp.so .*verify.plugin-triton|on-failure = \"fallback\""):
        reg = env.registry(site)
    assert reg.missing_required() == []
    assert StagesHook("digest", None, reg.missing_required)() == ("-backend-manifests-digest", "digest")


# -- 4. cache isolation ----------------------------------------------------------------------


def _key(site: Path, env: TrustEnv) -> str:
    reg: Registry = env.registry(site)
    admitted = [p for p in reg.plugins if p.state in ("loaded", "pending")]  # as hook._after_load counts them
    used = [(p.dist.key, p.dist.version, reg.verdicts[p.dist.dist_info].envelope_sha256) for p in admitted]
    return manifest_digest(used, plugin_keys(admitted, reg.verdicts))


def test_a_plugin_version_misses_the_cache_an_unrelated_upgrade_does_not(libs: Libs, env: TrustEnv,
                                                                          tmp_path: Path) -> None:
    site = tmp_path / "site"
    site.mkdir()
    _triton_dist(site, "3.9.0")
    so, info = info_of(libs, tmp_path, "v1")
    plugin = installed(site, env, so, "contract-plugin", info)
    other = write_dist(site, "unrelated-tool", "1.0", backends={}, files={"unrelated_tool/__init__.py": b""})
    other.sign(env.key)
    before = _key(site, env)
    shutil.rmtree(other.dist_info)
    upgraded = write_dist(site, "unrelated-tool", "2.0", backends={}, files={"unrelated_tool/__init__.py": b"x = 2\n"})
    upgraded.sign(env.key)
    assert _key(site, env) == before
    so2, info2 = info_of(libs, tmp_path, "v2", "PLUGIN_VERSION=\"1.1\"")
    shutil.copy(so2, site / "contract_plugin" / "libp.so")
    plugin.manifest_path.unlink()
    installed(site, env, so2, "contract-plugin", info2)
    assert _key(site, env) != before


# -- 5. the build, explicit phases, any answer of the child, migrate -----------------------


def test_python_m_build_stops_on_a_pass_the_example_plugin_does_not_register(tmp_path: Path,
                                                                              signing_key: Any) -> None:
    from helpers import projects

    project = projects.copy_example("scikit_build_backend", tmp_path / "src")
    pyproject = project / "pyproject.toml"
    text = pyproject.read_text().replace('{ name = "skdemo-fuse-elementwise"', '{ name = "skdemo-inline"')
    pyproject.write_text(text)
    done = projects.python_build(project, tmp_path / "dist", "--wheel", env=projects.build_env(signing_key))
    assert done.returncode != 0
    (line,) = [x for x in done.stderr.splitlines() if x.startswith("backend-packager: error:")]
    assert "'skdemo-inline'" in line and "skdemo_backend/lib/libskdemo_plugin.so" in line, line
    assert "registers skdemo-lower-to-device, skdemo-fuse-elementwise" in line
    assert not list((tmp_path / "dist").glob("*.whl"))


def test_phase_explicit_is_left_to_the_vendors_code(libs: Libs, env: TrustEnv, tmp_path: Path) -> None:
    site = tmp_path / "site"
    site.mkdir()
    _triton_dist(site, "3.9.0")
    so, info = info_of(libs, tmp_path, "explicit")
    installed(site, env, so, "contract-plugin", info, m.PluginContract(phase="explicit"))
    reg = env.registry(site)
    (plugin,) = [p for p in reg.plugins if p.dist.name == "contract-plugin"]
    assert plugin.reason is None and plugin.handed_over.startswith("not loaded here: phase explicit")
    assert os.environ.get("TRITON_PLUGIN_PATHS", "") == ""


@given(st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=40),
                    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(
                        st.sampled_from(["stage", "error", "api_version", "name", "version", "passes", "dialects",
                                         "ops", "triton_version"]) | st.text(max_size=5), inner, max_size=9),
                    max_leaves=30))
@settings(max_examples=300, deadline=None)
def test_any_answer_from_the_child_is_a_plugin_info(doc: Any) -> None:
    """The answer file is written by a process that ran the plugin: whatever it holds is a
    PluginInfo, captured or not, and nothing in the packager raises."""
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        answer = Path(tmp) / "answer.json"
        answer.write_text(json.dumps(doc))
        info = pluginanswer.decode(answer, pluginanswer.Limits())
    assert isinstance(info, m.PluginInfo) and (info.captured or info.reason_code is not None)
    if info.captured:
        assert all(isinstance(p.name, str) for p in info.passes)


def test_a_range_that_cannot_be_checked_is_recorded_with_a_warning(libs: Libs, tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    wheel = plugin_wheel(tmp_path / "in", libs.plugin("good"), libtriton=None)
    manifest = build_manifest(wheel, parse(table(triton=">=3.9"), tmp_path), tmp_path / "out")
    (plugin,) = manifest.plugins
    assert plugin.info is not None and plugin.info.reason_code == "no-libtriton"
    assert plugin.contract is not None and plugin.contract.triton == ">=3.9"
    assert f"{PLUGIN}: the declared Triton range '>=3.9' is recorded unchecked (no-libtriton" in capsys.readouterr().err


def test_migrate_keeps_the_declaration_and_captures_again(libs: Libs, tmp_path: Path) -> None:
    wheel = plugin_wheel(tmp_path / "in", libs.plugin("good"), libtriton=libs.stub)
    build_manifest(wheel, parse(table(**GOOD), tmp_path), tmp_path / "built")
    done = run_cli("migrate", str(tmp_path / "built" / wheel.name), "-o", str(tmp_path / "again"), "--drop-signature",
                   "--capture-plugins")
    assert done.returncode == 0, done.stderr
    (row,) = inspected(tmp_path / "again" / wheel.name)["plugins"]
    assert row["captured"] and row["info"]["libtriton"] == LIBTRITON
    assert row["declared"]["on_failure"] == "fail" and row["declared"]["passes"][0]["after"] == "ttgir"


_VERSIONS = (st.from_regex(r"[0-9]{1,2}(\.[0-9]{1,2}){0,3}(\+[a-zA-Z0-9._!-]{0,5})?", fullmatch=True)
             | st.text(alphabet="0123456789.+-_aZ!\u017f v", max_size=10))


@settings(max_examples=400, deadline=None)
@given(installed=_VERSIONS, built_for=st.none() | _VERSIONS)
def test_the_check_without_a_range_agrees_with_packaging(installed: str, built_for: str | None) -> None:
    # The check skips packaging for plain versions: the verdict must be the one packaging gives.
    from packaging.version import InvalidVersion, Version
    from triton_backend_runtime.base import VerifyError
    from triton_backend_runtime.verification.contract import check_terms
    from triton_backend_runtime.verification.verdict import PluginTerms

    def release(version: str) -> tuple[int, ...] | None:
        try:
            return Version(version).release
        except InvalidVersion:
            return None

    passes = not installed or (release(installed) is not None
                               and (built_for is None or release(built_for) == release(installed)))
    try:
        check_terms(PluginTerms(captured=True, built_for=built_for), installed, "here")
    except VerifyError as error:
        assert not passes and error.code == "verify.plugin-triton", (installed, built_for, error)
    else:
        assert passes, (installed, built_for)
