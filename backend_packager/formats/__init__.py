"""Layer 1: the file formats a wheel is made of, as bytes: ZIP (``zipformat``), RECORD
(``records``), ``entry_points.txt`` (``entrypoints``) and the PEP 503 simple index
(``simpleindex``).
"""

# A name is imported from its module when first asked for (PEP 562): importing one module of
# this layer must not import the others, since ``import triton`` pays for every module loaded.
# Not typing.TYPE_CHECKING: importing typing costs milliseconds at start-up.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from . import entrypoints, records, simpleindex, zipformat
    from .entrypoints import DEFAULT_PACKAGE, EntryPoints, backends_group, render
    from .records import Discrepancy
    from .simpleindex import IndexFile, pages

__all__ = [
    "DEFAULT_PACKAGE",
    "Discrepancy",
    "EntryPoints",
    "IndexFile",
    "backends_group",
    "entrypoints",
    "pages",
    "records",
    "render",
    "simpleindex",
    "zipformat",
]

_WHERE = {
    "DEFAULT_PACKAGE": "entrypoints",
    "Discrepancy": "records",
    "EntryPoints": "entrypoints",
    "IndexFile": "simpleindex",
    "backends_group": "entrypoints",
    "pages": "simpleindex",
    "render": "entrypoints",
}


def __getattr__(name: str) -> object:
    where = _WHERE.get(name)
    if where is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(__import__(f"{__name__}.{where}", fromlist=[name]), name)
    globals()[name] = value  # the next import of this name finds it without this call
    return value
