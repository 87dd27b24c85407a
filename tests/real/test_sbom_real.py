"""The SBOM of the real triton 3.9.0 as ``migrate`` writes it: read from the session's migrated
and installed wheel (``tests/conftest.py``'s ``migrated``: no migration of its own). The writers
on small wheels: ``tests/packager/test_sbom_writers.py``."""

from __future__ import annotations

import csv
import hashlib
import json
from pathlib import Path

import pytest
from cyclonedx.schema import SchemaVersion
from cyclonedx.validation.json import JsonStrictValidator
from helpers.projects import record_hash
from triton_backend_runtime.base.layout import MANIFEST_FILENAME
from triton_backend_runtime.trust import dsse, manifest_from_statement

pytestmark = pytest.mark.triton_wheel

DIST_INFO = "triton-3.9.0.dist-info"
SBOM = "sboms/triton-backend.cdx.json"
#: What a scanner must see: the core library (LLVM and MLIR inside), a bundled executable, and
#: the bitcode linked into every kernel.
NATIVE = ("triton/_C/libtriton.so", "triton/backends/nvidia/bin/ptxas", "triton/backends/nvidia/lib/libdevice.10.bc")


def test_the_sbom_lists_libtriton_ptxas_and_libdevice_as_signed(migrated: Path) -> None:
    info = migrated / DIST_INFO
    data = (info / SBOM).read_bytes()
    envelope = dsse.decode((info / MANIFEST_FILENAME).read_bytes(), "manifest")
    manifest = manifest_from_statement(dsse.unverified_payload(envelope), "manifest")
    listed = {a.path: a.sha256 for a in manifest.artifacts}
    assert manifest.sbom == SBOM and listed[f"{DIST_INFO}/{SBOM}"] == hashlib.sha256(data).hexdigest()
    rows = {r[0]: r for r in csv.reader((info / "RECORD").read_text().splitlines())}
    assert rows[f"{DIST_INFO}/{SBOM}"][1:] == [record_hash(data), str(len(data))]
    assert JsonStrictValidator(SchemaVersion.V1_6).validate_str(data.decode()) is None
    sbom = json.loads(data)
    by_path = {}
    for component in sbom["components"]:
        for prop in component.get("properties", []):
            if prop["name"] == "triton-backend:path":
                by_path[prop["value"]] = component
    for path in NATIVE:
        assert by_path[path]["hashes"] == [{"alg": "SHA-256", "content": listed[path]}], path
        # the installed file is the one signed and described
        assert hashlib.sha256((migrated / path).read_bytes()).hexdigest() == listed[path], path
    assert sbom["metadata"]["component"]["purl"] == "pkg:pypi/triton@3.9.0"
