"""Layer 6: acting on Triton. The core checked before ``triton`` runs, plugins handed over,
Triton's own plugin loading guarded, driver selection, the compile-cache key, verified
bytecode, and the import watch that runs it all at the right moment.
"""

# A name is imported from its module when first asked for (PEP 562): importing one module of
# this layer must not import the others, since ``import triton`` pays for every module loaded.
# Not typing.TYPE_CHECKING: importing typing costs milliseconds at start-up.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from . import (
        bytecode,
        compilekey,
        core,
        importwatch,
        integration,
        libtriton,
        mapped,
        nativeguard,
        patch,
        pluginguard,
        plugins,
        selection,
        sources,
    )
    from .integration import admit
    from .selection import probe_active

__all__ = [
    "admit",
    "bytecode",
    "compilekey",
    "core",
    "importwatch",
    "integration",
    "libtriton",
    "mapped",
    "nativeguard",
    "patch",
    "pluginguard",
    "plugins",
    "probe_active",
    "selection",
    "sources",
]

_WHERE = {
    "admit": "integration",
    "probe_active": "selection",
}


def __getattr__(name: str) -> object:
    where = _WHERE.get(name)
    if where is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(__import__(f"{__name__}.{where}", fromlist=[name]), name)
    globals()[name] = value  # the next import of this name finds it without this call
    return value
