"""The unlisted-code walk, as an attacker shapes a site: code dropped into a distribution's own
directories is caught (a module shadowing a listed one, an ``__init__.py`` above it, a library
beside a plugin), another distribution's files are not the walked one's, a hostile RECORD
claim neither blocks nor narrows the walk, and a backend installed inside another
distribution's package (Triton's) is walked in its own directories only. Dist-info trees in
``tmp_path`` with real signed manifests (:mod:`helpers.disttree`)."""

from __future__ import annotations

import os
import sysconfig
from pathlib import Path

import pytest
from helpers import disttree
from helpers.csrc import ElfFixtures
from helpers.disttree import Dist, TrustEnv, entry, write_dist, write_record
from triton_backend_runtime.loading.registry import Registry

#: Trees found by the finders; what a test imports from its tree is forgotten after it.
_no_triton_imported = disttree.no_triton_imported


def rejected_for(reg: Registry, dist: Dist, path: Path) -> None:
    """The distribution's verdict is a rejection for unlisted code at ``path``."""
    verdict = reg.verdicts[str(dist.dist_info)]
    assert verdict.status == "rejected" and verdict.problem is not None, verdict
    assert (verdict.problem.code, verdict.problem.path) == ("verify.unlisted", str(path))


# -- the walk confined to the distribution's own directories ------------------------------------

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


def test_record_helper_matches_what_an_installer_writes(site: Path) -> None:
    """The hostile claim above is a real PEP 376 row: the same one write_record makes."""
    dist = write_dist(site, "x", backends={}, files={"x/__init__.py": b"A = 1\n"})
    write_record(dist)
    info = _hostile_claim(site, "x/__init__.py")
    row = (info / "RECORD").read_text().splitlines()[0]
    assert row in (dist.dist_info / "RECORD").read_text().splitlines()


# -- a backend installed inside another distribution's package -----------------------------


def _triton_with_a_backend_inside(site: Path, env: TrustEnv) -> tuple[Dist, Dist]:
    """A Triton (RECORD only, as pip leaves it) and a fork's backend installed into its
    ``triton/backends/foo/``, signed: its manifest lists its own files only."""
    triton = write_dist(site, "triton", "3.9.0", backends={}, files={
        "triton/__init__.py": b"__version__ = '3.9.0'\n",
        "triton/backends/__init__.py": b"",
        "triton/language/core.py": b"def f():\n    pass\n",
        "triton/_C/libtriton.so": b"\x7fELF not really\n",
    })
    write_record(triton)
    foo = write_dist(site, "foo-backend", backends={"foo": "triton.backends.foo"}, files={
        "triton/backends/foo/lib/helper.py": b"X = 1\n",
    })
    own = [p for p in foo.wheel_paths() if p.startswith(("triton/backends/foo/", foo.dist_info.name + "/"))]
    foo.seal(foo.describe(own), env.key)
    write_record(foo)
    return triton, foo


def test_backend_inside_triton_does_not_list_tritons_files(env: TrustEnv, site: Path) -> None:
    _triton_with_a_backend_inside(site, env)
    reg = env.registry(site, policy="strict")
    foo = entry(reg, "foo")
    assert (foo.trust, foo.state, foo.reason) == ("verified", "loaded", None)
    files = next(v for k, v in reg.verdicts.items() if "foo_backend" in k).files
    assert str(site / "triton" / "language") not in files  # Triton's directories are not walked


@pytest.mark.parametrize("dropped", ["triton/backends/foo/evil.py", "triton/backends/foo/lib/sub/evil.so"])
def test_a_file_dropped_into_the_backends_own_directory_is_caught(env: TrustEnv, site: Path, dropped: str) -> None:
    _triton_with_a_backend_inside(site, env)
    assert entry(env.registry(site, policy="strict"), "foo").state == "loaded"  # the cache is warm
    path = site.joinpath(*dropped.split("/"))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"import os\n")
    foo = entry(env.registry(site, policy="strict"), "foo")
    assert foo.trust == "rejected" and foo.reason is not None
    assert (foo.reason.code, foo.reason.path) == ("verify.unlisted", str(path))


def test_a_file_dropped_into_tritons_own_directory_is_not_the_backends(env: TrustEnv, site: Path) -> None:
    _triton_with_a_backend_inside(site, env)
    (site / "triton" / "backends" / "stray.py").write_text("")  # Triton's directory: its own verdict's
    foo = entry(env.registry(site, policy="strict"), "foo")
    assert (foo.trust, foo.state) == ("verified", "loaded")


@pytest.mark.parametrize("change", ["no-record", "init-edited"])
def test_a_package_no_one_else_owns_is_walked_whole(env: TrustEnv, site: Path, change: str) -> None:
    """Only another distribution's RECORD that describes the file on disk makes the package
    someone else's: without it, every file of it not listed is unlisted code (fail closed),
    also when the verdict was cached while the RECORD held."""
    triton, _ = _triton_with_a_backend_inside(site, env)
    assert entry(env.registry(site, policy="strict"), "foo").state == "loaded"
    init = site / "triton" / "__init__.py"
    if change == "no-record":
        (triton.dist_info / "RECORD").unlink()
    else:
        init.write_text("__version__ = '3.9.0'  # edited\n")
    foo = entry(env.registry(site, policy="strict"), "foo")
    assert foo.trust == "rejected" and foo.reason is not None and foo.reason.code == "verify.unlisted"
    # with the RECORD gone, every file of it is the backend's; edited, only the edited file is
    # (Triton's others are lent to it, then refused with Triton's verdict: it has no manifest)
    dropped = {"no-record": ("_C", "libtriton.so"), "init-edited": ("__init__.py",)}[change]
    assert foo.reason.path == str(site.joinpath("triton", *dropped))


@pytest.mark.parametrize("dropped", ["triton/backends/__init__.py", "triton/__init__.py"])
def test_an_init_dropped_above_a_backend_in_a_namespace_is_caught(env: TrustEnv, site: Path, dropped: str) -> None:
    """Importing ``triton.backends.nsdemo`` runs every ``__init__.py`` above it: one dropped into
    the namespace (turning it into a package) is unlisted code, also with the cache warm."""
    write_dist(site, "ns-backend", backends={"nsdemo": "triton.backends.nsdemo"}).sign(env.key)
    assert entry(env.registry(site, policy="strict"), "nsdemo").state == "loaded"
    path = site.joinpath(*dropped.split("/"))
    path.write_text("import os\n")
    demo = entry(env.registry(site, policy="strict"), "nsdemo")
    assert demo.trust == "rejected" and demo.reason is not None
    assert (demo.reason.code, demo.reason.path) == ("verify.unlisted", str(path))


def test_an_edited_file_and_unlisted_code_together_give_the_edit(env: TrustEnv, site: Path) -> None:
    """The walk runs while the artifacts hash; what it finds is raised after them, so with both
    a listed file edited and code dropped beside it, the reason is the edit (``verify.sha256``),
    and with the edit undone, the dropped code (``verify.unlisted``)."""
    dist = write_dist(site)
    dist.sign(env.key)
    edited = dist.file("demo_backend/compiler.py")
    original = edited.read_bytes()
    edited.write_bytes(original[:-1] + bytes([original[-1] ^ 1]))  # the same size
    dropped = edited.parent / "dropped.py"
    dropped.write_bytes(b"import os\n")
    reg = env.registry(site, policy="strict", rehash=True)
    problem = reg.verdicts[str(dist.dist_info)].problem
    assert problem is not None and (problem.code, problem.path) == ("verify.sha256", str(edited))
    edited.write_bytes(original)
    rejected_for(env.registry(site, policy="strict", rehash=True), dist, dropped)
