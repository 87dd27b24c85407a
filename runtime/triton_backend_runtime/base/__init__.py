"""Layer 0: what every other layer speaks. Errors and reasons, the vocabulary of trust,
state and policy, names fixed by the wheel layout, and the one reader of small regular files
and the one atomic writer, for both distributions.
"""

# A name is imported from its module when first asked for (PEP 562): importing one module of
# this layer must not import the others, since ``import triton`` pays for every module loaded.
# Not typing.TYPE_CHECKING: importing typing costs milliseconds at start-up.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from . import atomicfile, errors, jsonlimits, layout, names, reason, records, regularfile, switchinterval, vocab
    from .atomicfile import atomic_output, write_atomic
    from .errors import (
        CacheError,
        ConflictError,
        FileError,
        LoadError,
        ManifestError,
        PolicyError,
        SelectionError,
        SignatureError,
        TrustError,
        TrustStoreError,
        VerifyError,
        describe,
        from_os_error,
        printable,
    )
    from .layout import BACKENDS_GROUP, MANIFEST_FILENAME, SIGSTORE_BUNDLE_FILENAME, is_shared_library
    from .names import canonicalize_name, same_version
    from .reason import Reason, reason_of
    from .records import record
    from .regularfile import RegularFileError, open_regular, read_chunks, read_regular, read_views
    from .switchinterval import short_switch_interval
    from .vocab import (
        BAD_STATES,
        EXCLUDED,
        FAILED,
        LEGACY,
        LOADED,
        NAME_KINDS,
        OFF,
        PENDING,
        PIN_KINDS,
        RANK,
        REJECTED,
        SELECTED,
        STRICT,
        UNVERIFIED,
        VERIFIED,
        WARN,
        Policy,
        State,
        Trust,
    )

__all__ = [
    "BACKENDS_GROUP",
    "BAD_STATES",
    "CacheError",
    "ConflictError",
    "EXCLUDED",
    "FAILED",
    "FileError",
    "LEGACY",
    "LOADED",
    "LoadError",
    "MANIFEST_FILENAME",
    "ManifestError",
    "NAME_KINDS",
    "OFF",
    "PENDING",
    "PIN_KINDS",
    "Policy",
    "PolicyError",
    "RANK",
    "REJECTED",
    "Reason",
    "RegularFileError",
    "SELECTED",
    "SIGSTORE_BUNDLE_FILENAME",
    "STRICT",
    "SelectionError",
    "SignatureError",
    "State",
    "Trust",
    "TrustError",
    "TrustStoreError",
    "UNVERIFIED",
    "VERIFIED",
    "VerifyError",
    "WARN",
    "atomic_output",
    "atomicfile",
    "canonicalize_name",
    "describe",
    "errors",
    "from_os_error",
    "is_shared_library",
    "jsonlimits",
    "layout",
    "names",
    "open_regular",
    "printable",
    "read_chunks",
    "read_regular",
    "read_views",
    "reason",
    "reason_of",
    "record",
    "records",
    "regularfile",
    "same_version",
    "short_switch_interval",
    "switchinterval",
    "vocab",
    "write_atomic",
]

_WHERE = {
    "BACKENDS_GROUP": "layout",
    "BAD_STATES": "vocab",
    "CacheError": "errors",
    "ConflictError": "errors",
    "EXCLUDED": "vocab",
    "FAILED": "vocab",
    "FileError": "errors",
    "LEGACY": "vocab",
    "LOADED": "vocab",
    "LoadError": "errors",
    "MANIFEST_FILENAME": "layout",
    "ManifestError": "errors",
    "NAME_KINDS": "vocab",
    "OFF": "vocab",
    "PENDING": "vocab",
    "PIN_KINDS": "vocab",
    "Policy": "vocab",
    "PolicyError": "errors",
    "RANK": "vocab",
    "REJECTED": "vocab",
    "Reason": "reason",
    "RegularFileError": "regularfile",
    "SELECTED": "vocab",
    "SIGSTORE_BUNDLE_FILENAME": "layout",
    "STRICT": "vocab",
    "SelectionError": "errors",
    "SignatureError": "errors",
    "State": "vocab",
    "Trust": "vocab",
    "TrustError": "errors",
    "TrustStoreError": "errors",
    "UNVERIFIED": "vocab",
    "VERIFIED": "vocab",
    "VerifyError": "errors",
    "WARN": "vocab",
    "atomic_output": "atomicfile",
    "canonicalize_name": "names",
    "describe": "errors",
    "from_os_error": "errors",
    "is_shared_library": "layout",
    "open_regular": "regularfile",
    "printable": "errors",
    "read_chunks": "regularfile",
    "read_regular": "regularfile",
    "read_views": "regularfile",
    "reason_of": "reason",
    "record": "records",
    "same_version": "names",
    "short_switch_interval": "switchinterval",
    "write_atomic": "atomicfile",
}


def __getattr__(name: str) -> object:
    where = _WHERE.get(name)
    if where is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(__import__(f"{__name__}.{where}", fromlist=[name]), name)
    globals()[name] = value  # the next import of this name finds it without this call
    return value
