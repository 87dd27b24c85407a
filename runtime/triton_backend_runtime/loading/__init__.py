"""Layer 5: the decisions. The registry discovers, verifies, admits, resolves and locates,
then returns a plan; ``policy``, ``conflicts`` and ``hookorder`` are the rules it applies.
Nothing here touches a Triton object.
"""

# A name is imported from its module when first asked for (PEP 562): importing one module of
# this layer must not import the others, since ``import triton`` pays for every module loaded.
# Not typing.TYPE_CHECKING: importing typing costs milliseconds at start-up.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from . import claims, conflicts, entries, hookorder, lending, policy, registry, report
    from .entries import NEVER_SERVED, BackendWarning, Entry, Plan, PluginEntry
    from .hookorder import CODE, position
    from .registry import Registry, emit, get
    from .report import BackendRow, CoreRow, PluginRow, Report

__all__ = [
    "BackendRow",
    "BackendWarning",
    "CODE",
    "CoreRow",
    "Entry",
    "NEVER_SERVED",
    "Plan",
    "PluginEntry",
    "PluginRow",
    "Registry",
    "Report",
    "claims",
    "conflicts",
    "emit",
    "entries",
    "get",
    "hookorder",
    "lending",
    "policy",
    "position",
    "registry",
    "report",
]

_WHERE = {
    "BackendRow": "report",
    "BackendWarning": "entries",
    "CODE": "hookorder",
    "CoreRow": "report",
    "Entry": "entries",
    "NEVER_SERVED": "entries",
    "Plan": "entries",
    "PluginEntry": "entries",
    "PluginRow": "report",
    "Registry": "registry",
    "Report": "report",
    "emit": "registry",
    "get": "registry",
    "position": "hookorder",
}


def __getattr__(name: str) -> object:
    where = _WHERE.get(name)
    if where is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(__import__(f"{__name__}.{where}", fromlist=[name]), name)
    globals()[name] = value  # the next import of this name finds it without this call
    return value
