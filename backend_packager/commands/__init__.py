"""Layer 6: one module per command: ``scan``, ``migrate``, ``adopt``, ``mirror``, ``verify``,
``inspect`` (``inspection``), ``init`` (``scaffold``), and what they share (``published``,
``mirrorindex``).
"""

# A name is imported from its module when first asked for (PEP 562): importing one module of
# this layer must not import the others, since ``import triton`` pays for every module loaded.
# Not typing.TYPE_CHECKING: importing typing costs milliseconds at start-up.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from . import (
        adopt,
        against,
        confined,
        inplace,
        inspection,
        installed,
        migrate,
        mirror,
        mirrorindex,
        mirrorlock,
        mirrorrecords,
        mirrorsources,
        mirrorstate,
        mirrorwork,
        plugincapture,
        published,
        recordcheck,
        sbom,
        scaffold,
        scan,
        upstream,
        verify,
        wheelout,
    )
    from .inspection import as_json, inspect_wheel, render
    from .migrate import Options, expand_inputs, migrate_many
    from .sbom import sbom_for
    from .scan import scan_paths
    from .verify import verify_wheel

__all__ = [
    "Options",
    "adopt",
    "against",
    "as_json",
    "confined",
    "expand_inputs",
    "inplace",
    "inspect_wheel",
    "inspection",
    "installed",
    "migrate",
    "migrate_many",
    "mirror",
    "mirrorindex",
    "mirrorlock",
    "mirrorrecords",
    "mirrorsources",
    "mirrorstate",
    "mirrorwork",
    "plugincapture",
    "published",
    "recordcheck",
    "render",
    "sbom",
    "sbom_for",
    "scaffold",
    "scan",
    "scan_paths",
    "upstream",
    "verify",
    "verify_wheel",
    "wheelout",
]

_WHERE = {
    "Options": "migrate",
    "as_json": "inspection",
    "expand_inputs": "migrate",
    "inspect_wheel": "inspection",
    "migrate_many": "migrate",
    "render": "inspection",
    "sbom_for": "sbom",
    "scan_paths": "scan",
    "verify_wheel": "verify",
}


def __getattr__(name: str) -> object:
    where = _WHERE.get(name)
    if where is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(__import__(f"{__name__}.{where}", fromlist=[name]), name)
    globals()[name] = value  # the next import of this name finds it without this call
    return value
