"""The PEP 770 SBOM: CycloneDX 1.6 from the scanner's facts, about libraries gcc compiled and
linked to each other, in a wheel and in its install; every SBOM checked by the library's
strict validator against the 1.6 schema."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from cyclonedx.model.bom import Bom
from cyclonedx.output.json import JsonV1Dot6
from cyclonedx.schema import SchemaVersion
from cyclonedx.validation.json import JsonStrictValidator
from helpers.cli import run_cli
from helpers.csrc import ElfFixtures
from helpers.wheels import backend_files, write_wheel
from triton_backend_runtime.manifest import model as m

from backend_packager.commands.sbom import sbom_of_installed, sbom_of_wheel
from backend_packager.manifest.sbom import SBOM_PATH, sbom_bytes
from backend_packager.scanning import artifact_from_bytes, artifact_from_file

NAME, VERSION = "demo-pkg", "1.0"
DIST_INFO = "demo_pkg-1.0.dist-info"
LIBDEVICE = b"BC\xc0\xde" + bytes(range(60))
AUDITWHEEL = json.dumps({"bomFormat": "CycloneDX", "specVersion": "1.6", "version": 1}).encode()


def valid(data: bytes) -> dict[str, Any]:
    """The SBOM parsed, once the strict validator found nothing wrong with it."""
    error = JsonStrictValidator(SchemaVersion.V1_6).validate_str(data.decode("utf-8"))
    assert error is None, error
    doc: dict[str, Any] = json.loads(data)
    assert doc["specVersion"] == "1.6" and data.endswith(b"\n")
    return doc


def layout(elf: ElfFixtures) -> dict[str, bytes]:
    """librpath (RPATH $ORIGIN) and librunpath (RUNPATH $ORIGIN/../lib) need libexports.so, of
    which the wheel has two copies: the $ORIGIN directories say which one; a backend with a
    plugin; libdevice bitcode; auditwheel's SBOM."""
    return {
        "demo_pkg/__init__.py": b"",
        "demo_pkg/lib/libexports.so": elf.exports.read_bytes(),
        "demo_pkg/lib/librpath.so": elf.rpath.read_bytes(),
        "demo_pkg/bin/librunpath.so.1": elf.runpath.read_bytes(),
        "demo_pkg/vendored/libexports.so": elf.exports.read_bytes(),
        "demo_pkg/libdevice.10.bc": LIBDEVICE,
        **backend_files("triton/backends/demo", "Demo", "cuda"),
        "triton/backends/demo/lib/libdemo_plugin.so": elf.plugin_v2.read_bytes(),
        f"{DIST_INFO}/sboms/auditwheel.cdx.json": AUDITWHEEL,
    }


@pytest.fixture(scope="module")
def wheel(elf_files: ElfFixtures, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_wheel(tmp_path_factory.mktemp("wheel"), NAME, VERSION, layout(elf_files),
                       backends={"demo": "triton.backends.demo"})


def by_ref(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["bom-ref"]: c for c in doc["components"]}


def edges(doc: dict[str, Any]) -> dict[str, list[str]]:
    return {d["ref"]: d.get("dependsOn", []) for d in doc["dependencies"]}


def props(component: dict[str, Any], name: str) -> list[str]:
    return [p["value"] for p in component.get("properties", []) if p["name"] == f"triton-backend:{name}"]


def test_each_native_file_is_a_component_with_its_sha256_and_needed_edges(wheel: Path, elf_files: ElfFixtures) -> None:
    doc = valid(sbom_of_wheel(wheel, epoch=None).data)
    components = by_ref(doc)
    files = {path: data for path, data in layout(elf_files).items() if path.endswith((".so", ".so.1", ".bc"))}
    assert {ref for ref in components if ref.startswith("file:")} == {f"file:{p}" for p in files}
    for path, data in files.items():
        component = components[f"file:{path}"]
        assert component["hashes"] == [{"alg": "SHA-256", "content": hashlib.sha256(data).hexdigest()}]
        assert props(component, "path") == [path] and "version" not in component
    graph = edges(doc)
    assert graph["file:demo_pkg/lib/librpath.so"] == ["file:demo_pkg/lib/libexports.so"]  # RPATH $ORIGIN
    assert graph["file:demo_pkg/bin/librunpath.so.1"] == ["file:demo_pkg/lib/libexports.so"]  # $ORIGIN/../lib
    assert graph["file:demo_pkg/lib/libexports.so"] == ["soname:libc.so.6", "soname:libm.so.6"]
    assert graph["pkg:pypi/demo-pkg@1.0"] == sorted(f"file:{p}" for p in files)
    libc = components["soname:libc.so.6"]
    assert libc["type"] == "library" and "hashes" not in libc and "version" not in libc


def test_elf_facts_are_properties(wheel: Path) -> None:
    components = by_ref(valid(sbom_of_wheel(wheel, epoch=None).data))
    exports = components["file:demo_pkg/lib/libexports.so"]
    assert exports["type"] == "library" and exports["name"] == "libexports.so"
    assert len(props(exports, "elf.build_id")[0]) == 40
    assert any(c.startswith("GCC: ") for c in props(exports, "elf.compiler"))
    assert props(exports, "elf.needed") == ["libc.so.6", "libm.so.6"]
    assert all(v.startswith(("libc.so.6:GLIBC_", "libm.so.6:GLIBC_")) for v in props(exports, "elf.version_need"))
    assert props(exports, "elf.version_need")
    assert props(components["file:demo_pkg/bin/librunpath.so.1"], "elf.soname") == ["librunpath.so.1"]
    plugin = components["file:triton/backends/demo/lib/libdemo_plugin.so"]
    assert props(plugin, "triton.plugin") == ["v2"] and props(plugin, "triton.backend") == ["demo"]
    assert props(exports, "triton.backend") == []
    bitcode = components["file:demo_pkg/libdevice.10.bc"]
    assert bitcode["type"] == "file" and props(bitcode, "elf.type") == []


def test_an_executable_is_a_file_component(elf_files: ElfFixtures, tmp_path: Path) -> None:
    exe = tmp_path / "tool"
    subprocess.run(["gcc", "-o", str(exe), "-x", "c", "-"], input=b"int main(void){return 0;}\n", check=True)
    artifacts = [artifact_from_file(exe, "demo_pkg/bin/tool"), artifact_from_file(elf_files.exports, "x/libexports.so")]
    components = by_ref(valid(sbom_bytes(artifacts, name=NAME, version=VERSION)))
    assert components["file:demo_pkg/bin/tool"]["type"] == "file"
    assert props(components["file:demo_pkg/bin/tool"], "elf.interpreter")
    assert components["file:x/libexports.so"]["type"] == "library"


def test_the_same_input_gives_the_same_bytes(wheel: Path) -> None:
    first, second = sbom_of_wheel(wheel, epoch=None).data, sbom_of_wheel(wheel, epoch=None).data
    assert first == second
    doc = valid(first)
    assert "timestamp" not in doc["metadata"] and doc["serialNumber"].startswith("urn:uuid:")
    stamped = sbom_of_wheel(wheel, epoch=1_700_000_000).data
    assert stamped == sbom_of_wheel(wheel, epoch=1_700_000_000).data
    assert valid(stamped)["metadata"]["timestamp"] == "2023-11-14T22:13:20+00:00"
    assert valid(stamped)["serialNumber"] == doc["serialNumber"]  # the serial names what is described


def test_the_serial_number_follows_the_described_files(elf_files: ElfFixtures) -> None:
    lib = artifact_from_file(elf_files.exports, "pkg/libexports.so")
    other = m.Artifact(lib.path, "0" * 64, lib.size, lib.elf)
    serials = {valid(sbom_bytes([a], name=NAME, version=VERSION))["serialNumber"] for a in (lib, other)}
    assert len(serials) == 2
    python = artifact_from_bytes("pkg/__init__.py", b"")  # not described: changes nothing
    assert sbom_bytes([lib], name=NAME, version=VERSION) == sbom_bytes([lib, python], name=NAME, version=VERSION)


def test_an_auditwheel_sbom_is_referenced_with_its_hash(wheel: Path) -> None:
    doc = valid(sbom_of_wheel(wheel, epoch=None).data)
    root = doc["metadata"]["component"]
    assert root["purl"] == "pkg:pypi/demo-pkg@1.0" and root["bom-ref"] == root["purl"]
    [reference] = root["externalReferences"]
    assert reference["type"] == "bom" and reference["url"] == "auditwheel.cdx.json"
    assert reference["hashes"] == [{"alg": "SHA-256", "content": hashlib.sha256(AUDITWHEEL).hexdigest()}]
    assert not any(c["name"] == "auditwheel.cdx.json" for c in doc["components"])


def test_a_manifest_that_lists_the_sbom_describes_the_rest(elf_files: ElfFixtures) -> None:
    lib = artifact_from_file(elf_files.plugin_v2, "pkg/libdemo_plugin.so")
    own = artifact_from_bytes(f"{DIST_INFO}/{SBOM_PATH}", b"{}")
    audit = artifact_from_bytes(f"{DIST_INFO}/sboms/auditwheel.cdx.json", AUDITWHEEL)
    info = m.PluginInfo(captured=True, version="0.3", ran_in="sandbox")
    manifest = m.Manifest(
        schema_version=m.SCHEMA_VERSION, name=NAME, version=VERSION, tags=[], protocol_version=m.PROTOCOL_VERSION,
        requirements=m.Requirements(triton=""), backends=[], artifacts=[lib, own, audit],
        plugins=[m.Plugin(path=lib.path, api="v2", info=info)],
        build=m.Build(tool="backend-packager", tool_version="0"), provenance=m.Provenance("build", None))
    data = sbom_bytes(manifest, name=NAME, version=VERSION)
    doc = valid(data)
    files = [c["bom-ref"] for c in doc["components"] if c["bom-ref"].startswith("file:")]
    assert files == ["file:pkg/libdemo_plugin.so"]
    plugin = by_ref(doc)["file:pkg/libdemo_plugin.so"]
    assert props(plugin, "triton.plugin") == ["v2"] and props(plugin, "triton.plugin.reported_version") == ["0.3"]
    assert len(doc["metadata"]["component"]["externalReferences"]) == 1
    assert data == sbom_bytes([lib, audit], name=NAME, version=VERSION, plugins=manifest.plugins)


def test_the_sbom_command_on_a_wheel_and_on_its_install(wheel: Path, tmp_path: Path) -> None:
    printed = run_cli("sbom", str(wheel))
    assert printed.returncode == 0, printed.stderr
    assert printed.stdout.encode() == sbom_of_wheel(wheel, epoch=None).data
    site = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-index", "--target", str(site),
                    str(wheel)], check=True, capture_output=True)
    out = tmp_path / "out" / "demo.cdx.json"
    out.parent.mkdir()
    written = run_cli("sbom", "demo-pkg", "--site-packages", str(site), "-o", str(out), "--json")
    assert written.returncode == 0, written.stderr
    summary = json.loads(written.stdout)
    assert summary["files"] == 6 and summary["output"] == str(out) and summary["source"].endswith(DIST_INFO)
    assert out.read_bytes() == printed.stdout.encode()  # a wheel and its install: the same SBOM
    assert sbom_of_installed([site], NAME, epoch=None).data == out.read_bytes()


def test_the_sbom_command_takes_source_date_epoch(wheel: Path) -> None:
    exe = Path(sys.executable).parent / "backend-packager"
    env = {**os.environ, "SOURCE_DATE_EPOCH": "1700000000"}
    result = subprocess.run([str(exe), "sbom", str(wheel)], capture_output=True, env=env)
    assert result.returncode == 0 and result.stdout == sbom_of_wheel(wheel, epoch=1_700_000_000).data


def test_an_installed_file_changed_since_record_is_refused(wheel: Path, tmp_path: Path) -> None:
    site = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-index", "--target", str(site),
                    str(wheel)], check=True, capture_output=True)
    (site / "demo_pkg" / "lib" / "libexports.so").write_bytes(b"\x7fELF changed")
    result = run_cli("sbom", "demo-pkg", "--site-packages", str(site))
    assert result.returncode == 1 and result.stderr.rstrip().endswith("(installed.mismatch)"), result.stderr
    assert result.stdout == ""


def test_site_packages_with_a_wheel_is_a_usage_error(wheel: Path, tmp_path: Path) -> None:
    result = run_cli("sbom", str(wheel), "--site-packages", str(tmp_path))
    assert result.returncode == 2 and result.stderr.rstrip().endswith("(input.usage)"), result.stderr


def test_an_sbom_with_an_odd_name_is_referenced_by_a_valid_uri() -> None:
    odd = artifact_from_bytes(f"{DIST_INFO}/sboms/odd name%zz.json", b"{}")
    doc = valid(sbom_bytes([odd], name=NAME, version=VERSION))
    assert doc["metadata"]["component"]["externalReferences"][0]["url"] == "odd%20name%25zz.json"


def test_the_sbom_is_what_the_librarys_own_outputter_writes(wheel: Path) -> None:
    data = sbom_of_wheel(wheel, epoch=1_700_000_000).data  # a timestamp: parsing one back without it stamps the clock
    again = JsonV1Dot6(Bom.from_json(json.loads(data))).output_as_string(indent=1)  # type: ignore[attr-defined]
    assert again.encode("utf-8") + b"\n" == data


def test_many_files_give_one_component_and_one_dependency_entry_each(elf_files: ElfFixtures) -> None:
    # a hostile wheel's empty bitcode members, and one library needing libc and libm; the strict
    # schema validation is what takes time (~5 ms a component): bench_migrate times 32k members
    count = 600
    empty = [m.Artifact(f"pkg/k{i:05d}.bc", hashlib.sha256(b"").hexdigest(), 0) for i in range(count)]
    lib = artifact_from_file(elf_files.exports, "pkg/libexports.so")
    doc = valid(sbom_bytes([*empty, lib], name=NAME, version=VERSION))
    refs = [c["bom-ref"] for c in doc["components"]]
    assert len(refs) == len(set(refs)) == count + 3
    graph = edges(doc)
    assert len(doc["dependencies"]) == len(graph) == count + 4 and set(graph) == {*refs, "pkg:pypi/demo-pkg@1.0"}
    assert len(graph["pkg:pypi/demo-pkg@1.0"]) == count + 1 and graph["soname:libc.so.6"] == []
    assert graph["file:pkg/libexports.so"] == ["soname:libc.so.6", "soname:libm.so.6"]
    assert sum(map(len, graph.values())) == count + 3
