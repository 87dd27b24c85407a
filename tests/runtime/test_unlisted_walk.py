"""A review of the runtime's newest pieces, as an attacker: the unlisted-code walk confined to a
distribution's own directories, the verdict cache's format 3, the legacy salting of a backend
compiler's ``hash()``. Dist-info trees in ``tmp_path`` with real signed manifests
(:mod:`helpers.disttree`); each test names the promise it holds to."""

from __future__ import annotations

import json
import os
import sysconfig
from pathlib import Path

import pytest
from helpers.csrc import ElfFixtures
from helpers.disttree import Dist, TrustEnv, write_dist, write_record
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_registry_gaps import _no_triton_imported, entry  # noqa: F401  (an autouse fixture shared with the registry gap tests)
from triton_backend_runtime import compilekey
from triton_backend_runtime.registry import Registry


def rejected_for(reg: Registry, dist: Dist, path: Path) -> None:
    """The distribution's verdict is a rejection for unlisted code at ``path``."""
    verdict = reg.verdicts[str(dist.dist_info)]
    assert verdict.status == "rejected" and verdict.problem is not None, verdict
    assert (verdict.problem.code, verdict.problem.path) == ("verify.unlisted", str(path))


# -- 1. the walk confined to the distribution's own directories --------------------------------

EXT = sysconfig.get_config_var("EXT_SUFFIX") or ".so"


def _ns_backend_with_helper(site: Path, env: TrustEnv) -> Dist:
    """A backend in a namespace ``triton/backends/`` (PEP 420) that also installs a module
    beside its package there, ``triton/backends/nshelper.py``, which the backend imports."""
    dist = write_dist(site, "ns-backend", backends={"nsdemo": "triton.backends.nsdemo"},
                      files={"triton/backends/nshelper.py": b"HELP = 1\n"})
    dist.sign(env.key)
    return dist


@pytest.mark.parametrize("shadow", ["nshelper/__init__.py", f"nshelper{EXT}", "nshelper.abi3.so"])
def test_code_that_shadows_a_listed_module_in_a_shared_directory_is_caught(env: TrustEnv, site: Path,
                                                                           shadow: str) -> None:
    """Python's path finder prefers a package directory, then an extension module, to a
    source of the same name: dropped beside the listed ``nshelper.py``, either runs in its
    place when the backend imports it. Strict admits only verified code, so it is unlisted."""
    dist = _ns_backend_with_helper(site, env)
    assert entry(env.registry(site, policy="strict"), "nsdemo").state == "loaded"  # the cache is warm
    path = site / "triton" / "backends" / shadow
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"import os\n")
    reg = env.registry(site, policy="strict")
    rejected_for(reg, dist, path)
    assert entry(reg, "nsdemo").state == "excluded"


def test_another_distributions_module_beside_a_listed_one_is_not_the_backends(env: TrustEnv, site: Path) -> None:
    """Only names that shadow a listed module count: a module of another name in the shared
    directory is someone else's (its own verdict's, or nobody's under PEP 420)."""
    _ns_backend_with_helper(site, env)
    (site / "triton" / "backends" / "other.py").write_text("")
    (site / "triton" / "backends" / f"other{EXT}").write_bytes(b"")
    assert entry(env.registry(site, policy="strict"), "nsdemo").state == "loaded"


@pytest.mark.parametrize("dropped", ["triton/backends/__init__.py", "triton/__init__.py"])
def test_an_init_above_a_listed_module_in_a_namespace_is_caught(env: TrustEnv, tmp_path: Path, dropped: str) -> None:
    """A distribution whose only code in a namespace is a module (no package of its own there):
    importing it runs every ``__init__.py`` above it. In a site whose path has dots in it."""
    site = tmp_path / "lib" / "python3.11" / "site-packages"
    site.mkdir(parents=True)
    dist = write_dist(site, "helper-only", backends={}, files={"triton/backends/nshelper.py": b"HELP = 1\n"})
    dist.sign(env.key)
    assert env.registry(site, policy="strict").verdicts[str(dist.dist_info)].status == "verified"
    path = site.joinpath(*dropped.split("/"))
    path.write_text("import os\n")
    rejected_for(env.registry(site, policy="strict"), dist, path)


def _plugin_in_a_namespace(site: Path, env: TrustEnv, elf_files: ElfFixtures) -> Dist:
    """A plugin-only distribution whose library lives in a namespace (``vendorns/`` has no
    ``__init__.py``, as NVIDIA's wheels share ``nvidia/``)."""
    dist = write_dist(site, "ns-plugin", backends={}, files={"vendorns/lib/libp.so": elf_files.plugin_shared})
    dist.sign(env.key)
    return dist


@pytest.mark.parametrize("claimed", [False, True])
def test_a_library_dropped_beside_a_plugin_in_a_namespace_is_caught(env: TrustEnv, site: Path,
                                                                     elf_files: ElfFixtures, claimed: bool) -> None:
    """The loader searches the plugin's own directory (``$ORIGIN``) first: an unlisted library
    there is code the loader could run, in a namespace as in a package of its own. ``claimed``:
    a hostile wheel installed an ``__init__.py`` over the namespace, its RECORD claiming it
    (what pip writes): the package is then another's, and the walk stays on the plugin's files."""
    dist = _plugin_in_a_namespace(site, env, elf_files)
    if claimed:
        (site / "vendorns" / "__init__.py").write_text("import os\n")
        _hostile_claim(site, "vendorns/__init__.py")
    reg = env.registry(site, policy="strict")
    assert reg.verdicts[str(dist.dist_info)].status == "verified"
    dropped = site / "vendorns" / "lib" / "libcudart.so.12"
    dropped.write_bytes(elf_files.plugin_shared.read_bytes())
    rejected_for(env.registry(site, policy="strict"), dist, dropped)


def test_another_distributions_directory_in_the_namespace_is_not_walked(env: TrustEnv, site: Path,
                                                                        elf_files: ElfFixtures) -> None:
    dist = _plugin_in_a_namespace(site, env, elf_files)
    (site / "vendorns" / "other").mkdir()
    (site / "vendorns" / "other" / "libother.so").write_bytes(b"\x7fELF")
    assert env.registry(site, policy="strict").verdicts[str(dist.dist_info)].status == "verified"


def test_another_distributions_library_beside_a_plugin_is_its_own_until_edited(env: TrustEnv, site: Path,
                                                                                elf_files: ElfFixtures) -> None:
    """A library beside the plugin that another distribution's RECORD describes is that one's;
    edited afterwards (the cache warm), it is nobody's: unlisted code beside the plugin."""
    dist = _plugin_in_a_namespace(site, env, elf_files)
    other = write_dist(site, "ns-other", backends={}, files={"vendorns/lib/libother.so": elf_files.exports})
    write_record(other)
    assert env.registry(site, policy="strict").verdicts[str(dist.dist_info)].status == "verified"
    lib = site / "vendorns" / "lib" / "libother.so"
    data = bytearray(lib.read_bytes())
    data[-1] ^= 1
    lib.write_bytes(bytes(data))
    rejected_for(env.registry(site, policy="strict"), dist, lib)


def _hostile_claim(site: Path, wheel_path: str, row: str | None = None) -> Path:
    """A dist-info of a hostile distribution whose RECORD claims ``wheel_path`` (by default
    with the sha256 and size of the file on disk: a matching row)."""
    import base64
    import hashlib

    info = site / "hostile-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: hostile\nVersion: 1.0\n\n")
    if row is None:
        data = site.joinpath(*wheel_path.split("/")).read_bytes()
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        row = f"{wheel_path},sha256={digest},{len(data)}"
    (info / "RECORD").write_text(f"{row}\nhostile-1.0.dist-info/RECORD,,\n")
    return info


@pytest.mark.parametrize("row", [
    "triton/__init__.py,sha256=AAAA,24",  # the wrong digest
    "triton/__init__.py,,",  # no hash at all
    "triton/__init__.py,md5=x,24",  # not sha256
    "./triton/__init__.py,{digest},{size}",  # another spelling of the path
    "triton/__init__.py,sha256={digest},99999999999999999999",  # a size no file has
])
def test_a_claim_that_does_not_describe_the_file_does_not_narrow_the_walk(env: TrustEnv, site: Path,
                                                                          row: str) -> None:
    """Only a RECORD row with the sha256 and size of the file on disk makes a package another
    distribution's; any other claim leaves the walk whole (fail closed)."""
    import base64
    import hashlib

    dist = write_dist(site, "foo-backend", backends={"foo": "triton.backends.foo"},
                      files={"triton/__init__.py": b"", "triton/backends/__init__.py": b""})
    own = [p for p in dist.wheel_paths() if p.startswith(("triton/backends/foo/", dist.dist_info.name + "/"))]
    dist.seal(dist.describe(own), env.key)
    init = site / "triton" / "__init__.py"
    init.write_bytes(b"import os  # not the backend's\n")
    data = init.read_bytes()
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    _hostile_claim(site, "triton/__init__.py", row.format(digest=f"sha256={digest}", size=len(data)))
    reg = env.registry(site, policy="strict")
    verdict = reg.verdicts[str(dist.dist_info)]
    assert verdict.status == "rejected" and verdict.problem is not None
    assert verdict.problem.code == "verify.unlisted"


def test_a_claiming_record_that_is_a_fifo_or_a_directory_does_not_block_or_narrow(env: TrustEnv, site: Path) -> None:
    dist = write_dist(site, "foo-backend", backends={"foo": "triton.backends.foo"},
                      files={"triton/__init__.py": b"", "triton/backends/__init__.py": b""})
    own = [p for p in dist.wheel_paths() if p.startswith(("triton/backends/foo/", dist.dist_info.name + "/"))]
    dist.seal(dist.describe(own), env.key)
    (site / "triton" / "__init__.py").write_text("import os\n")
    for name, make in (("fifo", os.mkfifo), ("dir", os.mkdir)):
        info = site / f"hostile_{name}-1.0.dist-info"
        info.mkdir()
        make(info / "RECORD")
    verdict = env.registry(site, policy="strict").verdicts[str(dist.dist_info)]
    assert verdict.problem is not None and verdict.problem.code == "verify.unlisted"


# -- 2. the verdict cache, format 3: hostile shapes are a miss ---------------------------------


@pytest.fixture()
def warm(env: TrustEnv, site: Path) -> tuple[TrustEnv, Path, dict[str, object]]:
    write_dist(site).sign(env.key)
    assert entry(env.registry(site, policy="strict"), "demo").state == "loaded"
    doc = json.loads(env.cache_file().read_bytes())
    assert doc["format"] == 3
    return env, site, doc


identity_text = st.one_of(
    st.text(max_size=40), st.text(alphabet="0123456789:", max_size=80),
    st.builds(lambda n: "9" * n, st.integers(20, 5000)), st.builds(lambda n: ":" * n, st.integers(0, 10)),
)


@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_format_3_identities_and_hashes_of_any_shape_are_a_miss(warm: tuple[TrustEnv, Path, dict[str, object]],
                                                                data: st.DataObject) -> None:
    """Identity strings with non-digit parts, huge numbers, a list of another length than the
    verdict's files, hash strings of any text: never a crash, never a dropped backend."""
    env, site, doc = warm
    doc = json.loads(json.dumps(doc))
    (item,) = doc["verdicts"].values()
    identities = item["identities"]
    how = data.draw(st.sampled_from(["edit", "longer", "shorter", "hashes"]))
    if how == "edit":
        identities[data.draw(st.integers(0, len(identities) - 1))] = data.draw(identity_text)
    elif how == "longer":
        identities.extend(data.draw(st.lists(st.none() | identity_text, min_size=1, max_size=3)))
    elif how == "shorter":
        del identities[data.draw(st.integers(0, len(identities) - 1))]
    else:
        hashes = doc["hashes"]
        for path in list(hashes)[: data.draw(st.integers(1, 3))]:
            hashes[path] = data.draw(identity_text)
    env.cache_file().write_text(json.dumps(doc))
    os.chmod(env.cache_file(), 0o600)
    reg = env.registry(site, policy="strict")
    demo = entry(reg, "demo")
    assert (demo.trust, demo.state, demo.reason) == ("verified", "loaded", None)
    assert reg.problems == [] and all(n.code.startswith("cache.") for n in reg.notes)


# -- 3. the legacy salting of a compiler's hash() -----------------------------------------------


def test_a_subclass_salted_after_its_base_carries_the_digest_once() -> None:
    """Two backends whose compiler classes inherit one ``hash()``: the key holds the digest
    once whichever is salted first (the table's order must not change the key)."""

    class Base:
        def hash(self) -> str:
            return "base"

    class Child(Base):
        pass

    assert compilekey.salt_backends({"a": type("B", (), {"compiler": Base}),
                                     "b": type("B", (), {"compiler": Child})}, "d1") == []
    assert Child().hash() == Base().hash() == "base-backend-manifests-d1"
    compilekey.salt_backends({"a": type("B", (), {"compiler": Base})}, "d2")
    assert Base().hash() == "base-backend-manifests-d2"


def test_a_class_that_drops_the_new_hash_silently_is_named() -> None:
    """A metaclass whose ``__setattr__`` ignores the assignment raises nothing: the class is
    still reported as one whose key the manifests do not reach (the registry warns)."""

    class Deaf(type):
        def __setattr__(cls, name: str, value: object) -> None:
            pass

    class Compiler(metaclass=Deaf):
        def hash(self) -> str:
            return "raw"

    class Plain:
        def hash(self) -> str:
            return "plain"

    assert compilekey.salt_backends({"deaf": type("B", (), {"compiler": Compiler}),
                                     "plain": type("B", (), {"compiler": Plain})}, "d") == ["deaf"]
    assert Compiler().hash() == "raw" and Plain().hash() == "plain-backend-manifests-d"


def test_a_hook_call_in_a_comment_or_string_does_not_skip_the_salting(tmp_path: Path) -> None:
    """Only a call of the hook in code is one ``compile()`` makes: mentioned in a comment (a
    fork's note, a 3.6 compiler.py documenting 3.7), the ``hash()`` salting stays."""
    compiler = tmp_path / "triton" / "compiler"
    compiler.mkdir(parents=True)
    (compiler / "compiler.py").write_text(
        "# 3.7 calls knobs.runtime.add_stages_inspection_hook() here\n"
        "def compile(src):\n    hook = knobs.runtime.add_stages_inspection_hook\n"
        "    if hook is not None:\n        hook(src, stages)\n")
    assert compilekey.compile_reads_hook(str(tmp_path / "triton")) is False
    (compiler / "compiler.py").write_text(
        "def compile(src):\n    if knobs.runtime.add_stages_inspection_hook is not None:\n"
        "        key, h = knobs.runtime.add_stages_inspection_hook()\n")
    assert compilekey.compile_reads_hook(str(tmp_path / "triton")) is True


def test_record_helper_matches_what_an_installer_writes(site: Path) -> None:
    """The hostile claim above is a real PEP 376 row: the same one write_record makes."""
    dist = write_dist(site, "x", backends={}, files={"x/__init__.py": b"A = 1\n"})
    write_record(dist)
    info = _hostile_claim(site, "x/__init__.py")
    row = (info / "RECORD").read_text().splitlines()[0]
    assert row in (dist.dist_info / "RECORD").read_text().splitlines()


# -- 4. files of /proc and /dev where small files belong ---------------------------------------


@pytest.mark.parametrize("target", ["/proc/self/mem", "/proc/kmsg", "/proc/self/pagemap", "/dev/zero", "/proc/self"])
def test_a_trust_file_linked_to_proc_or_dev_is_a_reason_not_a_hang(env: TrustEnv, site: Path, target: str) -> None:
    """Opened without blocking (``/proc/kmsg`` waits for kernel messages), read within the
    bound (``/proc/self/pagemap`` is a "regular" file of size 0 with gigabytes in it): the
    trust file is one problem with a code, the trusted key beside it still verifies."""
    if not os.path.exists(target):
        pytest.skip(f"{target} is not on this machine")
    write_dist(site).sign(env.key)
    (env.trust / "linked.pub").symlink_to(target)
    reg = env.registry(site, policy="warn")
    demo = entry(reg, "demo")
    expected = "trust.key-format" if target == "/proc/self/pagemap" else "trust.read"  # read, bounded: not a key
    assert [(p.code, p.path.split(".pub")[0]) for p in reg.problems] == [(expected, str(env.trust / "linked"))]
    assert (demo.trust, demo.state, demo.reason) == ("verified", "loaded", None)
