"""A complete manifest with every section filled, one artifact scanned from a real plugin; the
plugins an envelope declares."""

from __future__ import annotations

from triton_backend_runtime.manifest import model as m
from triton_backend_runtime.trust import dsse
from triton_backend_runtime.trust.statement import manifest_from_statement

from backend_packager.scanning.artifacts import artifact_from_file
from helpers.csrc import ElfFixtures


def sample(elf_files: ElfFixtures) -> m.Manifest:
    return m.Manifest(
        schema_version=m.SCHEMA_VERSION,
        name="demo-backend",
        version="1.2.3",
        tags=["cp311-cp311-manylinux_2_17_x86_64"],
        protocol_version="1.0",
        requirements=m.Requirements(triton=">=3.9,<3.10", python=">=3.10"),
        backends=[m.Backend(name="demo", package="demo_backend", compiler="demo_backend.compiler:DemoBackend",
                            driver="demo_backend.driver:DemoDriver", targets=["demo"])],
        plugins=[m.Plugin(path="demo_backend/lib/libdemo_plugin.so", api="v2", name="demo")],
        artifacts=[artifact_from_file(elf_files.plugin_v2, "demo_backend/lib/libdemo_plugin.so")],
        build=m.Build(tool="backend-packager", tool_version="0.1.0", compiler=["GCC: 12"], source_date_epoch=0),
        provenance=m.Provenance(kind="build", source=None, source_sha256=None),
    )


def manifest_plugins(envelope: bytes) -> list[m.Plugin]:
    """The plugins a manifest envelope declares (its signatures not checked)."""
    return manifest_from_statement(dsse.unverified_payload(dsse.decode(envelope, "manifest")), "manifest").plugins
