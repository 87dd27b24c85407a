"""Layer 5: the decisions. The registry discovers, verifies, admits, resolves and locates,
then returns a plan; ``policy``, ``conflicts`` and ``hookorder`` are the rules it applies.
Nothing here touches a Triton object.
"""

# A name is imported from its module when first asked for (PEP 562): importing one module of
# this layer must not import the others, since ``import triton`` pays for every module loaded.
# Not typing.TYPE_CHECKING: importing typing costs milliseconds at start-up.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from . import conflicts, hookorder, policy, registry
    from .hookorder import CODE, calling_pth, imported_early, position
    from .registry import BackendWarning, PluginEntry, Registry, emit

__all__ = [
    "BackendWarning",
    "CODE",
    "PluginEntry",
    "Registry",
    "calling_pth",
    "conflicts",
    "emit",
    "hookorder",
    "imported_early",
    "policy",
    "position",
    "registry",
]

_WHERE = {
    "BackendWarning": "registry",
    "CODE": "hookorder",
    "PluginEntry": "registry",
    "Registry": "registry",
    "calling_pth": "hookorder",
    "emit": "registry",
    "imported_early": "hookorder",
    "position": "hookorder",
}


def __getattr__(name: str) -> object:
    where = _WHERE.get(name)
    if where is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(__import__(f"{__name__}.{where}", fromlist=[name]), name)
