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
    from . import dsse, keys, paths, revocation, statement
    from .keys import (
        PublicKey,
        TrustStore,
        admit_signers,
        check_floor,
        keyid_of,
        load_pins,
        load_trust_store,
        parse_key_file,
        pin_text,
        ungranted,
    )
    from .paths import REVOKED_FILE, trust_sources
    from .revocation import revoking
    from .statement import manifest_from_statement, statement_bytes

__all__ = [
    "PublicKey",
    "REVOKED_FILE",
    "TrustStore",
    "admit_signers",
    "check_floor",
    "dsse",
    "keyid_of",
    "keys",
    "load_pins",
    "load_trust_store",
    "manifest_from_statement",
    "parse_key_file",
    "paths",
    "pin_text",
    "revocation",
    "revoking",
    "statement",
    "statement_bytes",
    "trust_sources",
    "ungranted",
]

_WHERE = {
    "PublicKey": "keys",
    "REVOKED_FILE": "paths",
    "TrustStore": "keys",
    "admit_signers": "keys",
    "check_floor": "keys",
    "keyid_of": "keys",
    "load_pins": "keys",
    "load_trust_store": "keys",
    "manifest_from_statement": "statement",
    "parse_key_file": "keys",
    "pin_text": "keys",
    "revoking": "revocation",
    "statement_bytes": "statement",
    "trust_sources": "paths",
    "ungranted": "keys",
}


def __getattr__(name: str) -> object:
    where = _WHERE.get(name)
    if where is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(__import__(f"{__name__}.{where}", fromlist=[name]), name)
