"""Layer 4: one distribution against its signed manifest, offline. ``distribution`` verifies,
``verdict`` is what it found (one typed shape), ``cache`` keeps verdicts on file identity so a
warm import only stats, ``dynsym`` reads a library's exports.

    >>> from triton_backend_runtime.verification import verify_distribution
"""

# A name is imported from its module when first asked for (PEP 562): importing one module of
# this layer must not import the others, since ``import triton`` pays for every module loaded.
# Not typing.TYPE_CHECKING: importing typing costs milliseconds at start-up.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from . import cache, contract, distribution, dynsym, environment, prefetch, unlisted, verdict
    from .cache import REHASH_ENV, VerifyCache, cache_dir, cache_file, context_digest, unsafe_owner_or_mode
    from .contract import check_terms
    from .distribution import Context, verify_distribution
    from .dynsym import EXPORT_BINDINGS
    from .prefetch import hash_ahead
    from .verdict import PluginClaim, PluginTerms, Verdict

__all__ = [
    "Context",
    "EXPORT_BINDINGS",
    "PluginClaim",
    "PluginTerms",
    "REHASH_ENV",
    "Verdict",
    "VerifyCache",
    "cache",
    "cache_dir",
    "cache_file",
    "check_terms",
    "context_digest",
    "contract",
    "distribution",
    "dynsym",
    "environment",
    "hash_ahead",
    "prefetch",
    "unlisted",
    "unsafe_owner_or_mode",
    "verdict",
    "verify_distribution",
]

_WHERE = {
    "Context": "distribution",
    "EXPORT_BINDINGS": "dynsym",
    "PluginClaim": "verdict",
    "PluginTerms": "verdict",
    "REHASH_ENV": "cache",
    "Verdict": "verdict",
    "VerifyCache": "cache",
    "cache_dir": "cache",
    "cache_file": "cache",
    "check_terms": "contract",
    "context_digest": "cache",
    "hash_ahead": "prefetch",
    "unsafe_owner_or_mode": "cache",
    "verify_distribution": "distribution",
}


def __getattr__(name: str) -> object:
    where = _WHERE.get(name)
    if where is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(__import__(f"{__name__}.{where}", fromlist=[name]), name)
    globals()[name] = value  # the next import of this name finds it without this call
    return value
