"""The local test Sigstore (tests/helpers/sigstoreca.py) against sigstore-python's real, offline
``Verifier``: a good bundle gives back its exact payload, and each tamper case is refused by
sigstore for its own reason (the exception and message sigstore raises are asserted)."""

from __future__ import annotations

import json
import re
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from helpers.sigstoreca import (
    DEFAULT_SIGNED_AT,
    IN_TOTO_PAYLOAD_TYPE,
    TEST_IDENTITY,
    TEST_ISSUER,
    LocalSigstore,
    Tamper,
    make_local_sigstore,
)
from sigstore.errors import CertValidationError, VerificationError
from sigstore.models import Bundle, InvalidBundle, TrustedRoot
from sigstore.verify import policy

STATEMENT = json.dumps(
    {
        "_type": "https://in-toto.io/Statement/v1",
        "subject": [{"name": "backend-1.0.0-py3-none-any.whl", "digest": {"sha256": "ab" * 32}}],
        "predicateType": "https://triton-backend.test/manifest/v1",
        "predicate": {"files": 3},
    },
    separators=(",", ":"),
).encode()
POLICY = policy.Identity(identity=TEST_IDENTITY, issuer=TEST_ISSUER)


@pytest.fixture(scope="module")
def local(tmp_path_factory: pytest.TempPathFactory) -> LocalSigstore:
    return make_local_sigstore(tmp_path_factory.mktemp("sigstore"))


def verify(local: LocalSigstore, bundle: bytes, identity_policy: Any = POLICY) -> tuple[str, bytes]:
    return local.verifier().verify_dsse(Bundle.from_json(bundle), identity_policy)


def sign(local: LocalSigstore, payload: bytes = STATEMENT, **knobs: Any) -> bytes:
    knobs.setdefault("identity", TEST_IDENTITY)
    knobs.setdefault("issuer", TEST_ISSUER)
    return local.sign_dsse(payload, **knobs)


def test_a_good_bundle_gives_back_its_exact_payload(local: LocalSigstore) -> None:
    assert verify(local, sign(local)) == (IN_TOTO_PAYLOAD_TYPE, STATEMENT)


@pytest.mark.parametrize("intermediate", [True, False], ids=["root-intermediate-leaf", "root-leaf"])
def test_a_chain_with_or_without_an_intermediate_verifies(tmp_path: Path, intermediate: bool) -> None:
    local = make_local_sigstore(tmp_path, seed=f"chain-{intermediate}", intermediate=intermediate)
    assert verify(local, sign(local))[1] == STATEMENT


def test_an_email_identity_is_an_email_san(local: LocalSigstore) -> None:
    bundle = sign(local, identity="release@vendor.test", issuer="https://accounts.vendor.test")
    identity = policy.Identity(identity="release@vendor.test", issuer="https://accounts.vendor.test")
    assert verify(local, bundle, identity)[1] == STATEMENT


@pytest.mark.parametrize(("tree_size", "log_index"), [(1, 0), (2, 0), (7, 6), (64, 33)])
def test_any_position_in_the_log_tree_proves_inclusion(local: LocalSigstore, tree_size: int, log_index: int) -> None:
    assert verify(local, sign(local, tree_size=tree_size, log_index=log_index))[1] == STATEMENT


def test_the_trust_root_is_what_sigstore_reads(local: LocalSigstore) -> None:
    root = TrustedRoot.from_file(str(local.trusted_root_path))
    assert root.get_fulcio_certs() == [local.issuer.certificate, local.root.certificate]
    assert local.tsa and local.tsa_root
    [tsa] = root.get_timestamp_authorities()
    assert tsa.certificates(allow_expired=False) == [local.tsa.certificate, local.tsa_root.certificate]


def test_the_same_seed_and_arguments_make_the_same_bytes(local: LocalSigstore, tmp_path: Path) -> None:
    again = make_local_sigstore(tmp_path / "again", seed=local.seed)
    assert again.trusted_root_path.read_bytes() == local.trusted_root_path.read_bytes()
    assert sign(again) == sign(local)
    assert make_local_sigstore(tmp_path / "other", seed="other").trusted_root_path.read_bytes() != (
        local.trusted_root_path.read_bytes()
    )


def test_a_bundle_of_another_statement_verifies_as_that_statement(local: LocalSigstore) -> None:
    """sigstore checks the signature, not which statement: the caller compares the payload."""
    other = STATEMENT.replace(b"ab" * 32, b"cd" * 32)
    assert verify(local, sign(local, other))[1] == other != STATEMENT


def test_a_bundle_of_another_sigstore_is_refused(local: LocalSigstore, tmp_path: Path) -> None:
    stranger = make_local_sigstore(tmp_path, seed="stranger")
    with pytest.raises(CertValidationError, match="failed to build timestamp certificate chain"):
        verify(local, sign(stranger))


@pytest.mark.parametrize("promise", [True, False], ids=["with-inclusion-promise", "signed-timestamp-alone"])
def test_a_signed_timestamp_inside_the_validity_verifies(local: LocalSigstore, promise: bool) -> None:
    tamper = () if promise else Tamper.NO_PROMISE
    bundle = sign(local, timestamped_at=DEFAULT_SIGNED_AT + timedelta(seconds=5), tamper=tamper)
    assert verify(local, bundle)[1] == STATEMENT


def test_a_signed_timestamp_needs_a_root_with_a_tsa(local: LocalSigstore, tmp_path: Path) -> None:
    without_tsa = make_local_sigstore(tmp_path, seed=local.seed, tsa=False)
    bundle = sign(local, timestamped_at=DEFAULT_SIGNED_AT + timedelta(seconds=5))
    with pytest.raises(VerificationError, match="no Timestamp Authorities have been provided"):
        verify(without_tsa, bundle)


LEAF_LIFETIME = timedelta(minutes=10)
TAMPERED = [
    pytest.param(
        {"identity": "https://github.com/attacker/fork/.github/workflows/release.yml@refs/heads/main"},
        VerificationError,
        "Certificate's SANs do not match",
        id="wrong-identity",
    ),
    pytest.param(
        {"issuer": "https://issuer.attacker.test"},
        VerificationError,
        "Certificate's OIDCIssuer does not match",
        id="wrong-issuer",
    ),
    pytest.param(
        {"integrated_at": DEFAULT_SIGNED_AT + LEAF_LIFETIME + timedelta(seconds=1)},
        CertValidationError,
        "cert is not valid at validation time",
        id="expired-at-integration",
    ),
    pytest.param(
        {"integrated_at": DEFAULT_SIGNED_AT - timedelta(seconds=1)},
        CertValidationError,
        "cert is not valid at validation time",
        id="integrated-before-issue",
    ),
    pytest.param(
        {"timestamped_at": DEFAULT_SIGNED_AT + LEAF_LIFETIME + timedelta(seconds=1), "tamper": Tamper.NO_PROMISE},
        CertValidationError,
        "cert is not valid at validation time",
        id="expired-at-signed-timestamp",
    ),
    pytest.param(
        {"timestamped_at": DEFAULT_SIGNED_AT, "tamper": [Tamper.TIMESTAMP_KEY, Tamper.NO_PROMISE]},
        VerificationError,
        "not enough sources of verified time",
        id="timestamp-of-another-tsa",
    ),
    pytest.param(
        {"tamper": Tamper.NO_PROMISE},
        InvalidBundle,
        "must contain an inclusion promise or signed timestamp",
        id="no-time-source",
    ),
    pytest.param(
        {"tamper": Tamper.PROOF_HASH},
        VerificationError,
        "inclusion proof contains invalid root hash",
        id="inclusion-proof",
    ),
    pytest.param(
        {"tamper": Tamper.CHECKPOINT_ROOT},
        VerificationError,
        "Inclusion proof contains invalid root hash signature",
        id="checkpoint-root",
    ),
    pytest.param(
        {"tamper": Tamper.CHECKPOINT_KEY}, VerificationError, "checkpoint: invalid signature", id="checkpoint-key"
    ),
    pytest.param(
        {"tamper": Tamper.PROMISE_KEY}, VerificationError, "SET: invalid inclusion promise", id="inclusion-promise-key"
    ),
    pytest.param(
        {"tamper": Tamper.SCT_KEY},
        VerificationError,
        "failed to verify SCT on signing certificate: SCT verify failed",
        id="sct-key",
    ),
    pytest.param(
        {"tamper": Tamper.NO_SCT}, VerificationError, "does not contain a signed certificate timestamp", id="no-sct"
    ),
    pytest.param(
        {"tamper": Tamper.UNTRUSTED_CA},
        CertValidationError,
        "failed to build timestamp certificate chain",
        id="untrusted-ca",
    ),
    pytest.param(
        {"tamper": Tamper.NO_CODE_SIGNING}, VerificationError, "does not contain `code signing`", id="no-code-signing"
    ),
    pytest.param(
        {"tamper": Tamper.PAYLOAD_SWAPPED}, VerificationError, "DSSE: invalid signature", id="payload-swapped"
    ),
    pytest.param(
        {"tamper": Tamper.ENVELOPE_RESIGNED},
        VerificationError,
        "log entry payload hash does not match bundle",
        id="envelope-re-signed",
    ),
]


@pytest.mark.parametrize(("knobs", "error", "fragment"), TAMPERED)
def test_each_tamper_case_is_refused_for_its_own_reason(
    local: LocalSigstore, knobs: dict[str, Any], error: type[Exception], fragment: str
) -> None:
    with pytest.raises(error, match=re.escape(fragment)) as caught:
        verify(local, sign(local, lifetime=LEAF_LIFETIME, **knobs))
    assert type(caught.value) is error


def test_every_tamper_knob_has_a_case() -> None:
    used: set[Tamper] = set()
    for case in TAMPERED:
        tamper = case.values[0].get("tamper", ())  # type: ignore[union-attr]
        used.update([tamper] if isinstance(tamper, Tamper) else tamper)
    assert used == set(Tamper)
