"""Layer 2: who is trusted for what. Keys with their scopes, floors, pins and revocations
(``keys``, ``revocation``), where the trust files are (``paths``), and the DSSE envelope and
in-toto statement a signature covers (``dsse``, ``statement``).

    >>> from triton_backend_runtime.trust import load_trust_store
    >>> store, problems = load_trust_store()
"""

# A name is imported from its module when first asked for (PEP 562): importing one module of
# this layer must not import the others, since ``import triton`` pays for every module loaded.
# Not typing.TYPE_CHECKING: importing typing costs milliseconds at start-up.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from . import (
        delegation,
        dsse,
        editing,
        floors,
        identities,
        keys,
        paths,
        pins,
        revocation,
        scopes,
        sigstorebundle,
        statement,
        syntax,
    )
    from .delegation import admit_signers, check_floor, ungranted
    from .dsse import MAX_ENVELOPE_BYTES
    from .editing import write_atomic
    from .floors import MAX_VERSION_CHARS, set_floor
    from .identities import Identity, identity_id, parse_identity, remove_identity, set_identity, sigstore_state
    from .keys import PublicKey, TrustStore, keyid_of, load_trust_store, parse_key_file, parse_key_line
    from .paths import (
        FLOORS_FILE,
        IDENTITIES_FILE,
        PINS_FILE,
        REVOKED_FILE,
        SCOPES_FILE,
        SIGSTORE_ROOT_FILE,
        system_trust_dir,
        trust_sources,
        user_trust_dir,
    )
    from .pins import load_pins, parse_pin_name, pin_text, remove_pin, set_pin
    from .revocation import revoking
    from .scopes import parse_scope, set_scope
    from .sigstorebundle import MAX_BUNDLE_BYTES, KeylessSigner, certificate_issuer, verify_bundle
    from .statement import manifest_from_statement, statement_bytes
    from .syntax import parse_name

__all__ = [
    "FLOORS_FILE",
    "IDENTITIES_FILE",
    "Identity",
    "KeylessSigner",
    "MAX_BUNDLE_BYTES",
    "MAX_ENVELOPE_BYTES",
    "MAX_VERSION_CHARS",
    "PINS_FILE",
    "PublicKey",
    "REVOKED_FILE",
    "SCOPES_FILE",
    "SIGSTORE_ROOT_FILE",
    "TrustStore",
    "admit_signers",
    "certificate_issuer",
    "check_floor",
    "delegation",
    "dsse",
    "editing",
    "floors",
    "identities",
    "identity_id",
    "keyid_of",
    "keys",
    "load_pins",
    "load_trust_store",
    "manifest_from_statement",
    "parse_identity",
    "parse_key_file",
    "parse_key_line",
    "parse_name",
    "parse_pin_name",
    "parse_scope",
    "paths",
    "pin_text",
    "pins",
    "remove_identity",
    "remove_pin",
    "revocation",
    "revoking",
    "scopes",
    "set_floor",
    "set_identity",
    "set_pin",
    "set_scope",
    "sigstore_state",
    "sigstorebundle",
    "statement",
    "statement_bytes",
    "syntax",
    "system_trust_dir",
    "trust_sources",
    "ungranted",
    "user_trust_dir",
    "verify_bundle",
    "write_atomic",
]

_WHERE = {
    "FLOORS_FILE": "paths",
    "IDENTITIES_FILE": "paths",
    "Identity": "identities",
    "KeylessSigner": "sigstorebundle",
    "MAX_BUNDLE_BYTES": "sigstorebundle",
    "MAX_ENVELOPE_BYTES": "dsse",
    "MAX_VERSION_CHARS": "floors",
    "PINS_FILE": "paths",
    "PublicKey": "keys",
    "REVOKED_FILE": "paths",
    "SCOPES_FILE": "paths",
    "SIGSTORE_ROOT_FILE": "paths",
    "TrustStore": "keys",
    "admit_signers": "delegation",
    "certificate_issuer": "sigstorebundle",
    "check_floor": "delegation",
    "identity_id": "identities",
    "keyid_of": "keys",
    "load_pins": "pins",
    "load_trust_store": "keys",
    "manifest_from_statement": "statement",
    "parse_identity": "identities",
    "parse_key_file": "keys",
    "parse_key_line": "keys",
    "parse_name": "syntax",
    "parse_pin_name": "pins",
    "parse_scope": "scopes",
    "pin_text": "pins",
    "remove_identity": "identities",
    "remove_pin": "pins",
    "revoking": "revocation",
    "set_floor": "floors",
    "set_identity": "identities",
    "set_pin": "pins",
    "set_scope": "scopes",
    "sigstore_state": "identities",
    "statement_bytes": "statement",
    "system_trust_dir": "paths",
    "trust_sources": "paths",
    "ungranted": "delegation",
    "user_trust_dir": "paths",
    "verify_bundle": "sigstorebundle",
    "write_atomic": "editing",
}


def __getattr__(name: str) -> object:
    where = _WHERE.get(name)
    if where is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(__import__(f"{__name__}.{where}", fromlist=[name]), name)
    globals()[name] = value  # the next import of this name finds it without this call
    return value
