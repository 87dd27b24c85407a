"""The signed payload: an in-toto Statement v1 whose predicate is the manifest.

``subject`` lists every artifact with its sha256, so one signature covers all artifact
hashes together (no mix-and-match of libraries from different builds);
``predicateType`` is the manifest schema URI; ``predicate`` is the manifest itself.
:func:`manifest_from_statement` checks that the subjects and the manifest's artifacts
agree, so neither can be edited without the other.
"""

from __future__ import annotations

import json
from typing import Any

from ..base import ManifestError, jsonlimits
from ..manifest import model as m
from ..manifest import schema

__all__ = ["STATEMENT_TYPE", "load", "manifest_from_statement", "manifest_of", "statement_bytes"]

STATEMENT_TYPE = "https://in-toto.io/Statement/v1"


def statement_bytes(manifest: m.Manifest) -> bytes:
    """Deterministic statement bytes: the exact payload that gets signed."""
    doc = {
        "_type": STATEMENT_TYPE,
        "subject": [{"name": a.path, "digest": {"sha256": a.sha256}} for a in manifest.artifacts],
        "predicateType": m.SCHEMA_URI,
        "predicate": schema.encode(manifest),
    }
    return json.dumps(doc, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def manifest_from_statement(body: bytes, where: str) -> m.Manifest:
    """Parse a (verified) statement; size cap, version check and subject check included."""
    return manifest_of(load(body, where), where)


def load(body: bytes, where: str, *, max_values: tuple[int, str] | None = None) -> dict[str, Any]:
    """The statement's JSON (bounded; ``max_values``: see :func:`.jsonlimits.loads`), checked
    to be an in-toto Statement v1."""
    doc = jsonlimits.loads(body, where, ManifestError, limit=m.MAX_MANIFEST_BYTES, max_values=max_values)
    if not isinstance(doc, dict) or doc.get("_type") != STATEMENT_TYPE:
        raise ManifestError("statement", where, f"not an in-toto Statement v1 (_type must be {STATEMENT_TYPE})")
    return doc


def manifest_of(doc: dict[str, Any], where: str) -> m.Manifest:
    """The manifest a loaded statement carries, its subjects checked against its artifacts."""
    kind = doc.get("predicateType")
    if not isinstance(kind, str) or not kind.startswith(m.SCHEMA_URI.rsplit(":", 1)[0]):
        raise ManifestError("statement", where, f"predicateType {str(kind)[:100]!r} is not a Triton backend manifest")
    subjects = doc.get("subject")
    if isinstance(subjects, list) and len(subjects) > m.MAX_ARTIFACTS:  # one subject per artifact
        raise ManifestError("limit", where, f"{len(subjects):,} statement subjects; the limit is "
                            f"{m.MAX_ARTIFACTS:,} (MAX_ARTIFACTS)")
    manifest = m.from_value(doc.get("predicate"), where)
    _check_subjects(subjects, manifest, where)
    return manifest


def _check_subjects(subjects: Any, manifest: m.Manifest, where: str) -> None:
    listed = set()
    for subject in subjects if isinstance(subjects, list) else [None]:
        fields = subject if isinstance(subject, dict) else {}
        digest = fields.get("digest")
        name, sha = fields.get("name"), digest.get("sha256") if isinstance(digest, dict) else None
        if not isinstance(name, str) or not isinstance(sha, str):
            raise ManifestError("statement", where, "statement subjects are malformed")
        listed.add((name, sha))
    expected = {(a.path, a.sha256) for a in manifest.artifacts}
    if listed != expected:
        raise ManifestError("statement", where, "statement subjects do not match the manifest's artifacts")
