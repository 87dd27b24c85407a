"""Files one distribution installs into another's packages: an add-on (a profiler writing into
``triton/_C/`` and ``triton/backends/nvidia/lib/``, with its own RECORD) and a backend installed
as ``triton/backends/<name>/`` (the 3.2/3.3 layout). Each is verified on its own files; the
Triton's verdict names the owner of each file lent to it, and holds only while that owner's
verdict does; an add-on's ``Requires-Dist`` on the Triton it extends must hold. Dist-info
trees in ``tmp_path`` with real signed manifests and real RECORDs (:mod:`helpers.disttree`)."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
from helpers import disttree
from helpers.disttree import Dist, TrustEnv, entry, write_dist, write_record
from triton_backend_runtime.loading.registry import Registry
from triton_backend_runtime.manifest import schema
from triton_backend_runtime.verification.verdict import Verdict

from backend_packager.formats.records import hash_field

#: Trees found by the finders; what a test imports from its tree is forgotten after it.
_no_triton_imported = disttree.no_triton_imported

pytestmark = pytest.mark.filterwarnings("ignore::triton_backend_runtime.loading.registry.BackendWarning")

ADDON_FILES = {
    "triton/_C/libproton.so": b"not ELF: a stand-in for the profiler's library\n",
    "triton/_C/proton_hooks.py": b"HOOKED = True\n",
    "triton/backends/nvidia/lib/libcupti_extra.so": b"not ELF: a stand-in for a CUPTI library\n",
}


def _core(site: Path, env: TrustEnv) -> Dist:
    """A signed Triton 3.9.0 with its own backend, and the RECORD pip writes: signed and
    recorded before anything else is installed into its packages."""
    core = write_dist(site, "triton", "3.9.0", backends={"nvidia": "triton.backends.nvidia"}, files={
        "triton/__init__.py": b"__version__ = '3.9.0'\n",
        "triton/backends/__init__.py": b"",
        "triton/_C/libtriton.so": b"not ELF: a stand-in for libtriton\n",
        "triton/backends/nvidia/lib/libdevice.so": b"not ELF: a stand-in\n",
    })
    core.sign(env.key)
    write_record(core)
    return core


def _own(dist: Dist, files: dict[str, bytes]) -> list[str]:
    """The wheel paths of ``dist`` alone: ``files`` and its ``.dist-info``'s."""
    info = dist.dist_info.name
    return sorted([*files, *(p for p in dist.wheel_paths() if p.startswith(info + "/"))])


def _record(dist: Dist, paths: list[str]) -> None:
    """The RECORD pip writes for ``paths`` as they are on disk (PEP 376 rows)."""
    rows = []
    for path in paths:
        data = dist.file(path).read_bytes()
        rows.append(f"{path},{hash_field(hashlib.sha256(data).hexdigest())},{len(data)}\n")
    (dist.dist_info / "RECORD").write_text("".join(rows) + f"{dist.dist_info.name}/RECORD,,\n")


def _addon(site: Path, env: TrustEnv | None, requires: str = "") -> Dist:
    """The profiler add-on: its files in Triton's packages, its own RECORD; signed by
    ``env``'s key unless None (RECORD only, as a wheel without a manifest leaves it)."""
    addon = write_dist(site, "triton-profiler", "1.2", backends={}, files=ADDON_FILES)
    if requires:
        meta = addon.dist_info / "METADATA"
        meta.write_text(meta.read_text().rstrip("\n") + "\n" + requires + "\n\n")
    paths = _own(addon, ADDON_FILES)
    if env is not None:
        addon.seal(addon.describe(paths), env.key)
        paths = _own(addon, ADDON_FILES)  # the manifest too
    _record(addon, paths)
    return addon


def _verdict(reg: Registry, dist: Dist) -> Verdict:
    return reg.verdicts[str(dist.dist_info)]


def _core_refused(reg: Registry, core: Dist, file: str, owner: Dist) -> None:
    """The core's verdict is a rejection for unlisted code at ``file``, naming its owner; its
    backend goes with it, and so does ``import triton`` under strict."""
    from triton_backend_runtime.triton.core import core_reason

    verdict = _verdict(reg, core)
    assert verdict.status == "rejected" and verdict.problem is not None, verdict
    assert (verdict.problem.code, verdict.problem.path) == ("verify.unlisted", str(core.file(file)))
    assert owner.dist_info.name in verdict.problem.message
    assert entry(reg, "nvidia").trust == "rejected"
    reason = core_reason(reg, str(core.file("triton/__init__.py")))
    assert reason is not None and reason.code == "verify.unlisted"


# -- an add-on writing into Triton's packages ----------------------------------------------


def test_a_signed_addon_leaves_triton_and_itself_verified(env: TrustEnv, site: Path) -> None:
    from triton_backend_runtime.triton.core import core_reason

    core = _core(site, env)
    addon = _addon(site, env, "Requires-Dist: triton==3.9.0\nRequires-Dist: triton==1.0; extra == \"old\"")
    for warm in (False, True):
        reg = env.registry(site, policy="strict")
        assert (_verdict(reg, core).status, _verdict(reg, addon).status) == ("verified", "verified")
        assert (entry(reg, "nvidia").trust, entry(reg, "nvidia").state) == ("verified", "loaded")
        assert core_reason(reg, str(core.file("triton/__init__.py"))) is None
        assert _verdict(reg, core).lent == {str(addon.dist_info): [str(core.file(p)) for p in sorted(ADDON_FILES)]}
        assert (reg.hashed_bytes == 0) == warm  # the second run: the verdicts, lent files included, from the cache


def test_an_unsigned_addon_makes_its_files_unlisted_code_of_triton(env: TrustEnv, site: Path) -> None:
    core = _core(site, env)
    addon = _addon(site, None)
    reg = env.registry(site, policy="strict")
    _core_refused(reg, core, "triton/_C/libproton.so", addon)
    assert "no manifest" in str(_verdict(reg, core).problem)


@pytest.mark.parametrize("record", ["as-installed", "rewritten"])
def test_a_tampered_addon_makes_triton_rejected(env: TrustEnv, site: Path, record: str) -> None:
    """Changed after install, the file is nobody's (its RECORD no longer describes it); with
    its RECORD rewritten to match, it is the add-on's, whose own verdict is then a rejection."""
    core = _core(site, env)
    addon = _addon(site, env)
    assert _verdict(env.registry(site, policy="strict"), core).status == "verified"  # the cache is warm
    addon.file("triton/_C/proton_hooks.py").write_bytes(b"HOOKED = None\n")  # the same size
    if record == "rewritten":
        _record(addon, _own(addon, ADDON_FILES))
    reg = env.registry(site, policy="strict")
    found = _verdict(reg, addon).problem
    assert found is not None and (found.code, found.path) == (
        "verify.sha256", str(addon.file("triton/_C/proton_hooks.py")))
    if record == "rewritten":  # the first file lent to the add-on, whose verdict does not hold
        _core_refused(reg, core, "triton/_C/libproton.so", addon)
        assert "verify.sha256" in str(_verdict(reg, core).problem)
    else:  # the changed file alone, nobody's
        verdict = _verdict(reg, core)
        assert verdict.status == "rejected" and verdict.problem is not None
        assert (verdict.problem.code, verdict.problem.path) == ("verify.unlisted", str(core.file(
            "triton/_C/proton_hooks.py")))


def test_a_record_alone_vouches_for_nothing(env: TrustEnv, site: Path) -> None:
    """Code dropped into Triton with a RECORD that describes it (a hostile dist-info): the file
    is that one's, which has no manifest, so Triton is refused all the same."""
    core = _core(site, env)
    dropped = {"triton/language_patch.py": b"import os\n"}
    hostile = write_dist(site, "hostile", "1.0", backends={}, files=dropped)
    _record(hostile, _own(hostile, dropped))
    _core_refused(env.registry(site, policy="strict"), core, "triton/language_patch.py", hostile)


def test_a_requires_dist_pin_on_another_triton_refuses_the_addon(env: TrustEnv, site: Path) -> None:
    core = _core(site, env)
    addon = _addon(site, env, "Requires-Dist: triton==3.8.0")
    for _ in ("cold", "warm"):  # checked at every load, the verdicts from the cache or not
        reg = env.registry(site, policy="strict")
        found = _verdict(reg, addon).problem
        assert found is not None and (found.code, found.path) == ("verify.triton", str(addon.dist_info / "METADATA"))
        assert "triton==3.8.0" in found.message and "triton 3.9.0" in found.message
        _core_refused(reg, core, "triton/_C/libproton.so", addon)  # its files in Triton are not verified code


# -- a backend installed inside Triton ---------------------------------------------------------


def test_a_signed_backend_inside_triton_and_triton_are_both_verified(env: TrustEnv, site: Path) -> None:
    core = _core(site, env)
    files = {"triton/backends/foo/lib/helper.py": b"X = 1\n"}
    foo = write_dist(site, "foo-backend", backends={"foo": "triton.backends.foo"}, files=files)
    backend = {p: b"" for p in foo.wheel_paths() if p.startswith("triton/backends/foo/")}
    foo.seal(foo.describe(_own(foo, backend)), env.key)
    _record(foo, _own(foo, backend))
    reg = env.registry(site, policy="strict")
    for name, dist in (("nvidia", core), ("foo", foo)):
        assert (entry(reg, name).trust, entry(reg, name).state) == ("verified", "loaded"), entry(reg, name).reason
        assert _verdict(reg, dist).status == "verified"
    assert list(_verdict(reg, core).lent) == [str(foo.dist_info)]


# -- the verdict cache keeps what was lent -------------------------------------------------------


def test_lent_files_round_trip_through_the_cache_codec() -> None:
    verdict = Verdict("verified", lent={"/site/x-1.0.dist-info": ["/site/triton/_C/libx.so"]})
    assert schema.decode(Verdict, schema.encode(verdict), complete=True) == verdict
    assert schema.decode(Verdict, schema.encode(Verdict("rejected")), complete=True).lent == {}


@pytest.mark.parametrize("where", ["triton/evil.py", "triton/_C/evil.py", "triton/backends/nvidia/evil.py"])
def test_a_row_added_to_a_verified_addons_record_vouches_for_nothing(env: TrustEnv, site: Path, where: str) -> None:
    """RECORDs are not signed: code dropped into Triton's packages and listed afterwards in a
    verified add-on's RECORD is not the add-on's to lend; only what its manifest covers is."""
    core = _core(site, env)
    addon = _addon(site, env)
    assert _verdict(env.registry(site, policy="strict"), core).status == "verified"
    (site / where).write_bytes(b"EVIL = 1\n")
    _record(addon, [*_own(addon, ADDON_FILES), where])
    reg = env.registry(site, policy="strict", rehash=True)
    _core_refused(reg, core, where, addon)
    assert "whose RECORD lists it but whose manifest does not" in _verdict(reg, core).problem.message  # type: ignore[union-attr]


def test_a_record_row_is_ended_by_a_newline_only(env: TrustEnv, site: Path) -> None:
    """A RECORD whose line holds a form feed (which str.splitlines ends a line at) lists
    nothing at the path after it: the owner search reads rows as discovery does."""
    core = _core(site, env)
    (site / "triton" / "evil.py").write_bytes(b"EVIL = 1\n")
    info = site / "junk-1.0.dist-info"
    info.mkdir()
    data = b"EVIL = 1\n"
    row = f"triton/evil.py,{hash_field(hashlib.sha256(data).hexdigest())},{len(data)}"
    (info / "RECORD").write_text(f"junk\x0c{row}\njunk-1.0.dist-info/RECORD,,\n")
    reg = env.registry(site, policy="strict", rehash=True)
    verdict = _verdict(reg, core)
    assert (verdict.status, verdict.problem.code if verdict.problem else None) == ("rejected", "verify.unlisted")
    assert verdict.lent == {}
