"""DSSE signing and verification of manifests, and the trust store's key lines."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers.csrc import ElfFixtures
from helpers.manifests import sample
from triton_backend_runtime.base.errors import SignatureError, TrustStoreError
from triton_backend_runtime.trust import dsse
from triton_backend_runtime.trust.keys import TrustStore, parse_key_file, parse_key_line
from triton_backend_runtime.trust.statement import manifest_from_statement

from backend_packager.manifest import signing


@pytest.fixture()
def keypair(tmp_path: Path) -> tuple[signing.SigningKey, Path]:
    signing.generate(tmp_path / "key.pem", tmp_path / "key.pub", "test key", None)
    assert (tmp_path / "key.pem").stat().st_mode & 0o777 == 0o600
    return signing.load(tmp_path / "key.pem"), tmp_path / "key.pub"


def test_pae_matches_the_spec_example() -> None:
    # The DSSE spec's worked example: type "http://example.com/HelloWorld", body "hello world".
    assert dsse.pae("http://example.com/HelloWorld", b"hello world") == (
        b"DSSEv1 29 http://example.com/HelloWorld 11 hello world"
    )


def test_sign_and_verify_round_trip(elf_files: ElfFixtures, keypair: tuple[signing.SigningKey, Path]) -> None:
    key, pub = keypair
    trust = TrustStore.of(parse_key_file(pub.read_text(), str(pub)))
    manifest = sample(elf_files)
    envelope = dsse.decode(signing.seal(manifest, key), "env")
    verified = dsse.verify(envelope, trust, "env")
    assert verified.keyids == (key.public.keyid,)
    assert manifest_from_statement(verified.payload, "env") == manifest


def test_tampered_payload_wrong_key_revoked_unsigned(
    elf_files: ElfFixtures, keypair: tuple[signing.SigningKey, Path], tmp_path: Path
) -> None:
    key, pub = keypair
    trust = TrustStore.of(parse_key_file(pub.read_text(), str(pub)))
    envelope = dsse.decode(signing.seal(sample(elf_files), key), "env")
    tampered = dsse.Envelope(envelope.payload.replace(b"1.2.3", b"9.9.9"), envelope.payload_type, envelope.signatures)
    with pytest.raises(SignatureError, match="does not match"):
        dsse.verify(tampered, trust, "env")
    other = signing.generate(tmp_path / "o.pem", tmp_path / "o.pub", "", None)
    with pytest.raises(SignatureError, match="not trusted"):
        dsse.verify(envelope, TrustStore.of([other]), "env")
    with pytest.raises(SignatureError, match="revoked"):
        dsse.verify(envelope, TrustStore.of(list(trust.keys.values()), revoked={key.public.keyid}), "env")
    with pytest.raises(SignatureError, match="2 required"):
        dsse.verify(envelope, TrustStore.of(list(trust.keys.values()), threshold=2), "env")
    unsigned = dsse.decode(signing.seal(sample(elf_files), None), "env")
    with pytest.raises(SignatureError) as err:
        dsse.verify(unsigned, trust, "env")
    assert err.value.code == "signature.unsigned"


def test_statement_subjects_must_match_artifacts(elf_files: ElfFixtures) -> None:
    from triton_backend_runtime.base.errors import ManifestError
    from triton_backend_runtime.trust.statement import statement_bytes

    doc = json.loads(statement_bytes(sample(elf_files)))
    doc["subject"][0]["digest"]["sha256"] = "0" * 64
    with pytest.raises(ManifestError, match="subjects do not match"):
        manifest_from_statement(json.dumps(doc).encode(), "stmt")


def test_encrypted_key_needs_passphrase(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    signing.generate(tmp_path / "k.pem", tmp_path / "k.pub", "", b"s3cret")
    monkeypatch.delenv(signing.PASSPHRASE_ENV, raising=False)
    with pytest.raises(signing.ConfigError, match=signing.PASSPHRASE_ENV):
        signing.load(tmp_path / "k.pem")
    monkeypatch.setenv(signing.PASSPHRASE_ENV, "s3cret")
    assert signing.load(tmp_path / "k.pem").public.line() == (tmp_path / "k.pub").read_text().strip()


def test_key_line_errors(keypair: tuple[signing.SigningKey, Path]) -> None:
    _, pub = keypair
    algo, b64, keyid, *_ = pub.read_text().split()
    with pytest.raises(TrustStoreError, match="does not match"):
        parse_key_line(f"{algo} {b64} {'0' * 64}", "k")
    with pytest.raises(TrustStoreError, match="32 bytes"):
        parse_key_line(f"{algo} AAAA {keyid}", "k")
    with pytest.raises(TrustStoreError, match="expected"):
        parse_key_line("rsa xyz", "k")


def test_an_envelope_over_the_cap_is_refused_by_its_size() -> None:
    """``dsse.decode`` refuses more than MAX_ENVELOPE_BYTES before parsing a byte of it (the
    load side reads no more than that; any other caller gets the code, not a parse)."""
    with pytest.raises(SignatureError) as caught:
        dsse.decode(b" " * (dsse.MAX_ENVELOPE_BYTES + 1), "big.dsse.json")
    assert caught.value.code == "signature.too-large" and caught.value.path == "big.dsse.json"
