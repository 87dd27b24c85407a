"""Every collection a manifest holds has a named cap, checked before any of its items is used.

For each cap: a manifest at the cap is decoded, one item over is refused as ``manifest.limit``
naming the cap. The budgets of a manifest no trusted key signed (bytes, JSON values, names to
look up in libtriton.so) are checked the way an import meets them: real distributions on disk,
hash-only or signed, verified by ``verify_distribution``.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from helpers.csrc import ElfFixtures
from helpers.disttree import TrustEnv, statement_of, write_dist
from triton_backend_runtime.base.errors import ManifestError
from triton_backend_runtime.base.jsonlimits import _NOT_BRACKETS, _outside_strings
from triton_backend_runtime.manifest import model as m
from triton_backend_runtime.manifest import schema
from triton_backend_runtime.trust import statement
from triton_backend_runtime.verification.environment import _check_tags

SHA = "0" * 64


def full() -> dict[str, Any]:
    """A manifest with one item in every collection the schema has."""
    elf = m.ElfInfo(
        machine="x86_64", elf_class="ELF64", endianness="little", osabi="SYSV", file_type="DYN", soname=None,
        needed=["libc.so.6"], rpath=["$ORIGIN"], runpath=["$ORIGIN"], build_id=None, compiler=["GCC: 12"],
        exports=m.ExportTable(count=1, digest=SHA, complete=True, symbols=[m.Symbol("f", "FUNC", "GLOBAL", None)]),
        imports=[m.Import("g", weak=False, version=None, library=None)],
        version_needs=[m.VersionNeed("libc.so.6", ["GLIBC_2.2.5"])], glibc=None, manylinux="manylinux_2_5",
        python_extension=["mod"], plugin=m.PluginApi("v2", [m.PLUGIN_V2_SYMBOL]),
    )
    info = m.PluginInfo(captured=True, passes=[m.PluginPass("p", "1")], dialects=[m.PluginDialect("d", "1")],
                        ops=["o"])
    manifest = m.Manifest(
        schema_version=m.SCHEMA_VERSION, name="x", version="1", tags=["py3-none-any"], protocol_version="1.0",
        requirements=m.Requirements(triton=""), backends=[m.Backend("b", "b", None, None, ["t"])],
        plugins=[m.Plugin("lib/p.so", "v2", None, info, m.PluginContract(passes=[m.PassPlacement("p", "ttir")]))],
        artifacts=[m.Artifact("lib/p.so", SHA, 1, elf)], build=m.Build("t", "0", ["GCC: 12"]),
        provenance=m.Provenance("migrate", "x.whl", None, [m.Repair("record.absent", "x", "d")]),
    )
    doc: dict[str, Any] = schema.encode(manifest)
    return doc


#: Each collection: its cap, and where it is in the manifest (the last key names the list).
COLLECTIONS = {
    "tags": ("MAX_TAGS", ("tags",)),
    "artifacts": ("MAX_ARTIFACTS", ("artifacts",)),
    "backends": ("MAX_BACKENDS", ("backends",)),
    "plugins": ("MAX_PLUGINS", ("plugins",)),
    "targets": ("MAX_NAMES", ("backends", 0, "targets")),
    "passes": ("MAX_NAMES", ("plugins", 0, "info", "passes")),
    "dialects": ("MAX_NAMES", ("plugins", 0, "info", "dialects")),
    "ops": ("MAX_NAMES", ("plugins", 0, "info", "ops")),
    "placements": ("MAX_NAMES", ("plugins", 0, "contract", "passes")),
    "needed": ("MAX_NAMES", ("artifacts", 0, "elf", "needed")),
    "rpath": ("MAX_NAMES", ("artifacts", 0, "elf", "rpath")),
    "runpath": ("MAX_NAMES", ("artifacts", 0, "elf", "runpath")),
    "compiler": ("MAX_NAMES", ("artifacts", 0, "elf", "compiler")),
    "python-extension": ("MAX_NAMES", ("artifacts", 0, "elf", "python_extension")),
    "version-needs": ("MAX_NAMES", ("artifacts", 0, "elf", "version_needs")),
    "versions": ("MAX_NAMES", ("artifacts", 0, "elf", "version_needs", 0, "versions")),
    "plugin-api": ("MAX_NAMES", ("artifacts", 0, "elf", "plugin", "symbols")),
    "build-compilers": ("MAX_NAMES", ("build", "compiler")),
    "imports": ("MAX_SYMBOLS", ("artifacts", 0, "elf", "imports")),
    "exports": ("MAX_SYMBOLS", ("artifacts", 0, "elf", "exports", "symbols")),
    "repairs": ("MAX_REPAIRS", ("provenance", "repairs")),
}


def with_items(path: tuple[Any, ...], count: int) -> dict[str, Any]:
    """``full()`` with ``count`` copies of the first item at ``path`` (an artifact without its ELF facts)."""
    doc = full()
    parent: Any = doc
    for key in path[:-1]:
        parent = parent[key]
    item = parent[path[-1]][0]
    if path == ("artifacts",):
        item = {k: v for k, v in item.items() if k != "elf"}
    parent[path[-1]] = [copy.deepcopy(parent[path[-1]][0]), *[item] * (count - 1)]
    return doc


@pytest.mark.parametrize("name", list(COLLECTIONS))
def test_each_cap_takes_its_limit_and_refuses_one_more(name: str) -> None:
    cap, path = COLLECTIONS[name]
    limit = getattr(m, cap)
    decoded = m.from_value(with_items(path, limit), "manifest")
    value: Any = decoded
    for key in path:
        value = value[key] if isinstance(key, int) else getattr(value, key)
    assert len(value) == limit
    with pytest.raises(ManifestError) as err:
        m.from_value(with_items(path, limit + 1), "manifest")
    assert err.value.code == "manifest.limit" and f"({cap})" in err.value.detail
    assert err.value.detail.startswith(f"$.{'.'.join(str(k) for k in path)}".replace(".0", "[0]"))


def test_the_json_schema_states_every_cap() -> None:
    defs = m.json_schema()["$defs"]
    assert defs["Manifest"]["properties"]["tags"]["maxItems"] == m.MAX_TAGS
    assert defs["ElfInfo"]["properties"]["imports"]["maxItems"] == m.MAX_SYMBOLS
    assert defs["PluginInfo"]["properties"]["ops"]["maxItems"] == m.MAX_NAMES


def test_subjects_are_capped_before_the_manifest_is_decoded() -> None:
    doc = {"_type": statement.STATEMENT_TYPE, "predicateType": m.SCHEMA_URI, "predicate": "not even a manifest",
           "subject": [{}] * (m.MAX_ARTIFACTS + 1)}
    with pytest.raises(ManifestError) as err:
        statement.manifest_of(doc, "manifest")
    assert err.value.code == "manifest.limit" and "(MAX_ARTIFACTS)" in err.value.detail


# -- at import: what a distribution on sys.path holds ---------------------------------------


def hostile(env: TrustEnv, site: Path, edit: Callable[[dict[str, Any]], Any], *, signed: bool = False,
            padding: int = 0) -> Any:
    """A distribution whose statement ``edit`` changed (padded with blanks), hash-only unless
    ``signed``; its verdict's reason (None when it has none)."""
    dist = write_dist(site)
    doc = statement_of(dist.describe())
    edit(doc)
    body = json.dumps(doc).encode()
    dist.seal_statement(body + b" " * padding, *([env.key] if signed else []))
    return env.verify(dist).problem


@pytest.mark.parametrize(("tags", "signed", "code", "cap"), [
    (50_000, False, "manifest.limit", "MAX_TAGS"),  # within the unsigned budget, then over the cap
    (100_000, False, "manifest.limit", "MAX_UNSIGNED_MANIFEST_VALUES"),  # 3.5 MB: refused before it is parsed
    (100_000, True, "manifest.limit", "MAX_TAGS"),
    (200_000, False, "manifest.limit", "MAX_UNSIGNED_MANIFEST_BYTES"),  # refused before it is decoded
    (200_000, True, "manifest.limit", "MAX_TAGS"),
    (400_000, False, "verify.too-large", ""),  # the envelope over MAX_ENVELOPE_BYTES: never read
])
def test_100k_tags_and_more_are_refused_by_code(env: TrustEnv, site: Path, tags: int, signed: bool, code: str,
                                                cap: str) -> None:
    reason = hostile(env, site, lambda doc: doc["predicate"].update(tags=doc["predicate"]["tags"] * tags),
                     signed=signed)
    assert reason.code == code and f"({cap})" in (reason.message if cap else "()")


def statement_size(doc: dict[str, Any]) -> int:
    return len(json.dumps(doc).encode())


def test_an_unsigned_manifest_takes_its_byte_budget_and_refuses_one_more(env: TrustEnv, site: Path) -> None:
    size = statement_size(statement_of(write_dist(site).describe()))
    assert hostile(env, site, lambda doc: None, padding=m.MAX_UNSIGNED_MANIFEST_BYTES - size) is None
    reason = hostile(env, site, lambda doc: None, padding=m.MAX_UNSIGNED_MANIFEST_BYTES - size + 1)
    assert reason.code == "manifest.limit" and "(MAX_UNSIGNED_MANIFEST_BYTES)" in reason.message
    # signed by a trusted key, the same manifest is verified
    assert hostile(env, site, lambda doc: None, padding=m.MAX_UNSIGNED_MANIFEST_BYTES, signed=True) is None


def values(doc: dict[str, Any]) -> int:
    """The count jsonlimits takes: containers, plus the commas between elements, plus one."""
    outside = _outside_strings(json.dumps(doc).encode())
    return outside.count(b",") + len(outside.translate(None, _NOT_BRACKETS)) // 2 + 1


def test_an_unsigned_manifest_takes_its_value_budget_and_refuses_one_more(env: TrustEnv, site: Path) -> None:
    base = statement_of(write_dist(site).describe())
    spare = m.MAX_UNSIGNED_MANIFEST_VALUES - values({**base, "junk": [0]})

    def junk(count: int) -> Callable[[dict[str, Any]], None]:
        return lambda doc: doc.update(junk=[0] * count)  # an unknown key: ignored, once parsed

    assert values({**base, "junk": [0] * (spare + 1)}) == m.MAX_UNSIGNED_MANIFEST_VALUES
    assert hostile(env, site, junk(spare + 1)) is None
    reason = hostile(env, site, junk(spare + 2))
    assert reason.code == "manifest.limit" and "(MAX_UNSIGNED_MANIFEST_VALUES)" in reason.message
    assert hostile(env, site, junk(spare + 2), signed=True) is None


def test_names_looked_up_for_an_unsigned_manifest_are_budgeted(env: TrustEnv, site: Path,
                                                               elf_files: ElfFixtures) -> None:
    def imports(total: int) -> Callable[[dict[str, Any]], None]:
        names = [f"hostile_{n:08d}".ljust(1000, "x") for n in range(total // 1000)]
        names.append(f"hostile_{len(names):08d}".ljust(total - 1000 * len(names), "x"))

        def edit(doc: dict[str, Any]) -> None:
            elf = next(a["elf"] for a in doc["predicate"]["artifacts"] if a["path"].endswith(".so"))
            elf["imports"] = [{"name": n, "weak": False, "version": None, "library": None} for n in names]
        return edit

    files = {"demo_backend/libdemo_plugin.so": elf_files.plugin_v2}
    ctx = env.context(libtriton=str(elf_files.exports))
    for total, code in [(m.MAX_UNSIGNED_LOOKUP_BYTES, "verify.symbols"), (m.MAX_UNSIGNED_LOOKUP_BYTES + 1,
                                                                          "manifest.limit")]:
        dist = write_dist(site, files=files)
        doc = statement_of(dist.describe())
        imports(total)(doc)
        dist.seal_statement(doc)
        reason = env.verify(dist, ctx).problem
        assert reason is not None and reason.code == code, reason
    assert "(MAX_UNSIGNED_LOOKUP_BYTES)" in reason.message


@pytest.mark.parametrize(("tags", "fits"), [
    (["py2.py3-none-any"], True),
    (["cp27.py3-abc.none-linux_armv0.any"], True),  # a compressed set: py3-none-any fits
    (["-".join(".".join(f"x{field}{n}" for n in range(64)) for field in range(3))] * m.MAX_TAGS, False),
    ([*["py2-none-win32"] * (m.MAX_TAGS - 1), "PY3-NONE-ANY"], True),  # matched case-blind, as packaging does
])
def test_tags_are_matched_as_sets(tags: list[str], fits: bool) -> None:
    from triton_backend_runtime.base.errors import VerifyError

    if fits:
        _check_tags(tags, "manifest")
    else:
        with pytest.raises(VerifyError) as err:
            _check_tags(tags, "manifest")
        assert err.value.code == "verify.tag" and err.value.detail.count(",") <= 8  # a bounded message


def test_a_forged_signature_repeated_is_checked_once(env: TrustEnv, site: Path) -> None:
    """Every check of a signature hashes the whole payload: 64 signatures naming one trusted
    key cost one check, not 64."""
    from triton_backend_runtime.trust import dsse

    dist = write_dist(site)
    body = json.dumps(statement_of(dist.describe())).encode()
    forged = tuple(dsse.Signature(env.key.keyid, bytes(64)) for _ in range(dsse.MAX_SIGNATURES))
    dist.write_envelope(dsse.encode(dsse.Envelope(body, dsse.PAYLOAD_TYPE, forged)))
    reason = env.verify(dist).problem
    assert reason is not None and reason.code == "signature.signature"
    assert reason.message.count("does not match the manifest") == 1
