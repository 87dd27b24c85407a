"""The manifest schema: round trip, unknown fields, versions, size cap, JSON Schema."""

from __future__ import annotations

import json

import pytest
from helpers.cli import run_cli
from helpers.csrc import ElfFixtures
from helpers.manifests import sample
from hypothesis import given
from hypothesis import strategies as st
from triton_backend_runtime.base.errors import ManifestError
from triton_backend_runtime.manifest import model as m


def test_round_trip_is_exact_and_deterministic(elf_files: ElfFixtures) -> None:
    original = sample(elf_files)
    data = m.to_json(original)
    parsed = m.from_json(data)
    assert parsed == original
    assert m.to_json(parsed) == data


def test_unknown_fields_are_ignored_and_newer_minor_accepted(elf_files: ElfFixtures) -> None:
    doc = json.loads(m.to_json(sample(elf_files)))
    doc["schema_version"] = f"{m.SCHEMA_MAJOR}.{m.SCHEMA_MINOR + 7}"
    doc["from_the_future"] = {"anything": [1, 2]}
    doc["artifacts"][0]["elf"]["new_fact"] = True
    parsed = m.from_json(json.dumps(doc).encode())
    assert parsed.name == "demo-backend"
    assert parsed.artifacts[0].elf is not None


def test_higher_major_is_refused_with_versions_named(elf_files: ElfFixtures) -> None:
    doc = json.loads(m.to_json(sample(elf_files)))
    doc["schema_version"] = f"{m.SCHEMA_MAJOR + 1}.0"
    with pytest.raises(ManifestError) as err:
        m.from_json(json.dumps(doc).encode(), "demo.dist-info/triton_backend.json")
    assert err.value.code == "manifest.version"
    assert f"{m.SCHEMA_MAJOR + 1}.0 found" in str(err.value)
    assert f"supports {m.SCHEMA_MAJOR}.x" in str(err.value)
    assert "demo.dist-info/triton_backend.json" in str(err.value)


def test_oversize_is_refused_before_parsing() -> None:
    data = b"{" + b" " * m.MAX_MANIFEST_BYTES + b"}"
    with pytest.raises(ManifestError) as err:
        m.from_json(data)
    assert err.value.code == "manifest.too-large"


@pytest.mark.parametrize(
    ("path", "value", "message"),
    [
        (("size",), "12", "expected integer, found str"),
        (("size",), True, "expected integer, found bool"),
        (("path",), None, "expected string, found null"),
    ],
)
def test_wrong_types_are_refused_with_location(elf_files: ElfFixtures, path: tuple[str, ...], value: object,
                                               message: str) -> None:
    doc = json.loads(m.to_json(sample(elf_files)))
    doc["artifacts"][0][path[0]] = value
    with pytest.raises(ManifestError) as err:
        m.from_json(json.dumps(doc).encode())
    assert f"$.artifacts[0].{path[0]}" in str(err.value)
    assert message in str(err.value)


def test_missing_field_and_bad_literal(elf_files: ElfFixtures) -> None:
    doc = json.loads(m.to_json(sample(elf_files)))
    del doc["name"]
    with pytest.raises(ManifestError, match="missing required field 'name'"):
        m.from_json(json.dumps(doc).encode())
    doc = json.loads(m.to_json(sample(elf_files)))
    doc["provenance"]["kind"] = "stolen"
    with pytest.raises(ManifestError, match="expected one of"):
        m.from_json(json.dumps(doc).encode())
    with pytest.raises(ManifestError, match="not valid JSON"):
        m.from_json(b"{nope")


def test_schema_command_matches_definition(elf_files: ElfFixtures) -> None:
    proc = run_cli("schema")
    assert proc.returncode == 0
    schema = json.loads(proc.stdout)
    assert schema == m.json_schema()
    manifest_def = schema["$defs"]["Manifest"]
    assert set(manifest_def["properties"]) == {f.name for f in __import__("dataclasses").fields(m.Manifest)}
    assert "schema_version" in manifest_def["required"]
    # The generated schema accepts a real manifest (checked with an independent validator).
    jsonschema = pytest.importorskip("jsonschema")
    jsonschema.validate(json.loads(m.to_json(sample(elf_files))), schema)


@given(st.fixed_dictionaries({"name": st.text(max_size=5) | st.integers(), "weak": st.booleans() | st.none(),
                              "version": st.none() | st.text(max_size=3) | st.booleans(),
                              "library": st.none() | st.text(max_size=3)},
                             optional={"extra": st.integers()}),
       st.sets(st.sampled_from(["name", "weak", "version", "library"]), max_size=2))
def test_plain_objects_decode_the_same_on_either_path(value: dict[str, object], dropped: set[str]) -> None:
    """An object of scalar fields given with exactly its fields, each of its type, takes the
    decoder's short path (``cls(**value)``); any other shape the field-by-field one. Both give
    the same object, or the same error, as the field-by-field path alone does."""
    from triton_backend_runtime.manifest import schema

    value = {k: v for k, v in value.items() if k not in dropped}
    padded = {**value, "extra": 0}  # an unknown field: never the short path
    outcomes = []
    for given_value in (value, padded):
        try:
            outcomes.append(schema.decode(m.Import, given_value))
        except ManifestError as exc:
            outcomes.append((exc.code, exc.path, exc.detail))
    assert outcomes[0] == outcomes[1]
    if isinstance(outcomes[0], m.Import):
        assert list(vars(outcomes[0])) == ["name", "weak", "version", "library"]
