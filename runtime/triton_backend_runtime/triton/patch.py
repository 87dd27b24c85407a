"""The registry patch of Triton's ``triton/backends/__init__.py``, as text: one per discovery shape.

Triton's discovery has had three shapes since 3.0, each with its patch in ``hooks/`` and
its :class:`Shape` here (found by the text of the file, never by a version number, since
forks carry their own):

* ``directory-scan`` (3.0-3.3): ``backends = _discover_backends()`` scans the directories
  under ``triton/backends/`` and loads ``compiler.py``/``driver.py`` by file path; the
  registry then discovers the same directories, and admitted backends are imported as
  ``triton.backends.<name>.compiler`` (through the import system, so that the verified
  source is what runs, never a pyc);
* ``entry-points`` (3.4-3.6): the ``triton.backends`` entry points only (no
  ``TRITON_BACKENDS_IN_TREE``, and no ``os`` imported by the module);
* ``entry-points-in-tree`` (3.7-3.9): entry points, or the directories with
  ``TRITON_BACKENDS_IN_TREE=1``.

A ``backends/__init__.py`` of any other shape cannot be wrapped: :func:`unwrappable` says
why. Pure functions over text; what is done about it is :mod:`.integration`'s.
"""

from __future__ import annotations

from ..base import record

__all__ = ["PATCH_ANCHOR", "PATCH_BLOCK", "PATCHED_MARK", "SHAPES", "Shape", "patch_source", "shape_of",
           "unwrappable"]

PATCH_ANCHOR = "backends: dict[str, Backend] = _discover_backends()\n"
PATCH_BLOCK = '''\
def _load_backend(name: str, package: str) -> Backend:
    compiler = importlib.import_module(f"{package}.compiler")
    driver = importlib.import_module(f"{package}.driver")
    return Backend(_find_concrete_subclasses(compiler, BaseBackend),  # type: ignore
                   _find_concrete_subclasses(driver, DriverBase))  # type: ignore


def _registry_backends() -> Union[dict[str, Backend], None]:
    # An installed backend registry (triton-backend-runtime) verifies backends and decides
    # which load; without it, or when its policy is "off", discovery is unchanged.
    try:
        from triton_backend_runtime.hook import triton_backends
    except ImportError:
        return None
    return triton_backends(_load_backend, os.path.dirname(__file__))


_registered = _registry_backends()
backends: dict[str, Backend] = _discover_backends() if _registered is None else _registered
'''


#: 3.4-3.6: entry points only; the module imports no ``os``, and ignores TRITON_BACKENDS_IN_TREE.
ENTRY_POINTS_BLOCK = PATCH_BLOCK.replace(
    "    return triton_backends(_load_backend, os.path.dirname(__file__))\n",
    "    import os\n    return triton_backends(_load_backend, os.path.dirname(__file__), in_tree=False)\n",
)
#: 3.0-3.3: the directories under triton/backends/, no entry points, no annotations.
DIRECTORY_SCAN_ANCHOR = "backends = _discover_backends()\n"
DIRECTORY_SCAN_BLOCK = '''\
def _load_backend(name, package):
    # The registry admitted it; the import system loads it, so that its verified source runs.
    import importlib
    compiler = importlib.import_module(package + ".compiler")
    driver = importlib.import_module(package + ".driver")
    return Backend(_find_concrete_subclasses(compiler, BaseBackend),
                   _find_concrete_subclasses(driver, DriverBase))


def _registry_backends():
    # An installed backend registry (triton-backend-runtime) verifies backends and decides
    # which load; without it, or when its policy is "off", discovery is unchanged.
    try:
        from triton_backend_runtime.hook import triton_backends
    except ImportError:
        return None
    return triton_backends(_load_backend, os.path.dirname(__file__), in_tree=True)


_registered = _registry_backends()
backends = _discover_backends() if _registered is None else _registered
'''
#: The module calls the registry already (the patch in hooks/ applied to the file itself).
PATCHED_MARK = "_registry_backends"


@record(eq=False, repr=False)  # compared by identity
class Shape:
    """One shape of Triton's ``backends/__init__.py``: how to recognise it, its patch."""

    name: str
    releases: str
    anchor: str
    block: str
    #: Text the source must hold (True) or must not hold (False) besides the anchor.
    marks: tuple[tuple[str, bool], ...] = ()

    def fits(self, source: str) -> bool:
        return source.count(self.anchor) == 1 and all((mark in source) == want for mark, want in self.marks)


_IN_TREE_MARK = "TRITON_BACKENDS_IN_TREE"
SHAPES = (
    Shape("entry-points-in-tree", "3.7-3.9", PATCH_ANCHOR, PATCH_BLOCK, ((_IN_TREE_MARK, True),)),
    Shape("entry-points", "3.4-3.6", PATCH_ANCHOR, ENTRY_POINTS_BLOCK,
          ((_IN_TREE_MARK, False), ('entry_points().select(group="triton.backends")', True))),
    Shape("directory-scan", "3.0-3.3", DIRECTORY_SCAN_ANCHOR, DIRECTORY_SCAN_BLOCK,
          (("def _load_module(name, path):", True), ("entry_points", False))),
)


def shape_of(source: str) -> Shape | None:
    """The discovery shape of a Triton ``backends/__init__.py``; None for an unknown one."""
    if PATCHED_MARK in source:
        return None
    return next((shape for shape in SHAPES if shape.fits(source)), None)


def patch_source(source: str) -> str | None:
    """Triton's ``backends/__init__.py`` with the registry patch for its shape; None when the
    shape is unknown or the file is patched already."""
    shape = shape_of(source)
    return None if shape is None else source.replace(shape.anchor, shape.block)


def unwrappable(origin: str | None, source: str | None) -> str | None:
    """Why the registry cannot be put in front of this ``backends/__init__.py``; None when it
    can, or when the file itself calls the registry (patched from ``hooks/``)."""
    if source is not None and PATCHED_MARK in source:
        return None
    if source is not None and shape_of(source) is not None:
        return None
    known = ", ".join(f"{s.name} ({s.releases})" for s in SHAPES)
    what = "cannot be read" if source is None else "has a discovery shape the registry does not know"
    return (f"{origin or 'triton.backends'} {what} (known: {known}): backends are not verified, "
            "the registry is not in use")
