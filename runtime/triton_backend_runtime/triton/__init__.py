"""Layer 6: acting on Triton. The core checked before ``triton`` runs, plugins handed over,
Triton's own plugin loading guarded, driver selection, the compile-cache key, verified
bytecode, and the import watch that runs it all at the right moment.
"""

# A name is imported from its module when first asked for (PEP 562): importing one module of
# this layer must not import the others, since ``import triton`` pays for every module loaded.
# Not typing.TYPE_CHECKING: importing typing costs milliseconds at start-up.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from . import bytecode, compilekey, core, pluginguard, plugins, selection
    from .bytecode import SourceChanged, code_for, verified_source
    from .compilekey import isolate, manifest_digest, plugin_keys
    from .core import check_core
    from .pluginguard import LIBTRITON, guard
    from .plugins import check_terms, hand_over
    from .selection import probe_active, wrap_create_driver

__all__ = [
    "LIBTRITON",
    "SourceChanged",
    "bytecode",
    "check_core",
    "check_terms",
    "code_for",
    "compilekey",
    "core",
    "guard",
    "hand_over",
    "isolate",
    "manifest_digest",
    "plugin_keys",
    "pluginguard",
    "plugins",
    "probe_active",
    "selection",
    "verified_source",
    "wrap_create_driver",
]

_WHERE = {
    "LIBTRITON": "pluginguard",
    "SourceChanged": "bytecode",
    "check_core": "core",
    "check_terms": "plugins",
    "code_for": "bytecode",
    "guard": "pluginguard",
    "hand_over": "plugins",
    "isolate": "compilekey",
    "manifest_digest": "compilekey",
    "plugin_keys": "compilekey",
    "probe_active": "selection",
    "verified_source": "bytecode",
    "wrap_create_driver": "selection",
}


def __getattr__(name: str) -> object:
    where = _WHERE.get(name)
    if where is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(__import__(f"{__name__}.{where}", fromlist=[name]), name)
