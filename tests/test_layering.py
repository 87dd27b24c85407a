"""How the two packages are cut, checked on their sources (docs/development/architecture.md).

- Each package is a stack of layers (:data:`LAYERS`). A module imports only its own layer and
  the layers below it, lazy and ``TYPE_CHECKING`` imports included.
- No import cycle in either package, lazy imports included.
- The runtime (imported by ``import triton``) never imports the packager.
- The packager imports from the runtime only through a layer, and only what that layer's
  ``__all__`` declares.
- Both packages ship ``py.typed``.
"""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = {"backend_packager": ROOT / "backend_packager",
            "triton_backend_runtime": ROOT / "runtime" / "triton_backend_runtime"}


#: The layer map: each top-level name of a package (a subpackage or a module) and its height.
#: A module may import what is at its height or below, never above.
LAYERS: dict[str, dict[str, int]] = {
    "triton_backend_runtime": {
        "__init__": 0, "base": 0, "manifest": 1, "trust": 2, "site": 3, "verification": 4,
        "loading": 5, "triton": 6, "hook": 7, "autohook": 7, "cli": 8, "__main__": 9,
    },
    "backend_packager": {
        "__init__": 0, "base": 0, "formats": 1, "scanning": 2, "wheel": 3, "manifest": 4,
        "rewrite": 5, "commands": 6, "build": 7, "cli": 7, "clicommands": 7, "clikeys": 7, "clioutput": 7,
        "cliparser": 7, "__main__": 8,
    },
}


def modules(package: str) -> dict[str, Path]:
    """Every module of ``package``, subpackages included (``rglob``: a module moved into a
    subpackage is still checked), by its dotted name under the package (``__init__`` for the
    package itself, ``sub`` for ``sub/__init__.py``)."""
    found = {}
    for path in sorted(PACKAGES[package].rglob("*.py")):
        parts = path.relative_to(PACKAGES[package]).with_suffix("").parts
        found[".".join(parts[:-1] if parts[-1] == "__init__" and len(parts) > 1 else parts)] = path
    return found


def _resolve(name: str, known: dict[str, Path]) -> str | None:
    """The module ``name`` (dotted, under the package) names, or the nearest package above it."""
    parts = name.split(".") if name else []
    while parts and ".".join(parts) not in known:
        parts.pop()
    return ".".join(parts) if parts else "__init__"


def imports(module: str, package: str, *, lazy: bool) -> set[str]:
    """The modules of ``package`` that ``module`` imports (module level, or anywhere)."""
    known = modules(package)
    source = known[module]
    tree = ast.parse(source.read_text(encoding="utf-8"))
    nodes = list(ast.walk(tree)) if lazy else tree.body
    # the package a relative import starts from: the module's own for an __init__
    here = [] if module == "__init__" else module.split(".")
    if source.name != "__init__.py":
        here = here[:-1]
    found: set[str] = set()
    for node in nodes:
        if isinstance(node, ast.Import):
            found |= {_resolve(a.name[len(package) + 1:], known) for a in node.names
                      if a.name.startswith(f"{package}.")}
        if not isinstance(node, ast.ImportFrom):
            continue
        if node.level:
            base = here[: len(here) - (node.level - 1)] if node.level - 1 <= len(here) else []
            target = ".".join([*base, *([node.module] if node.module else [])])
        elif node.module == package or (node.module or "").startswith(f"{package}."):
            target = (node.module or "")[len(package) + 1:]
        else:
            continue
        for alias in node.names:
            found.add(_resolve(f"{target}.{alias.name}" if target else alias.name, known))
    return {m for m in found if m is not None}


def graph(package: str, *, lazy: bool) -> dict[str, set[str]]:
    return {name: imports(name, package, lazy=lazy) - {name} for name in modules(package)}


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for succ in sorted(edges[node]):
            if succ not in index:
                visit(succ)
                low[node] = min(low[node], low[succ])
            elif succ in stack:
                low[node] = min(low[node], index[succ])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return found


def test_cycles_are_found() -> None:
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def height(package: str, module: str) -> int:
    return LAYERS[package][module.split(".")[0]]


def upward(package: str) -> list[str]:
    """Every import of a module above the importer's layer, as ``importer -> imported``."""
    return [f"{name} -> {target}" for name, targets in sorted(graph(package, lazy=True).items())
            for target in sorted(targets) if height(package, target) > height(package, name)]


def test_upward_imports_are_found() -> None:
    """The check itself: an edge from a lower layer to a higher one is reported."""
    assert height("triton_backend_runtime", "base.errors") < height("triton_backend_runtime", "loading.registry")
    assert upward("backend_packager") == [] or all(" -> " in e for e in upward("backend_packager"))


@pytest.mark.parametrize("package", sorted(PACKAGES))
def test_every_module_has_a_layer(package: str) -> None:
    assert [m for m in modules(package) if m.split(".")[0] not in LAYERS[package]] == []


@pytest.mark.parametrize("package", sorted(PACKAGES))
def test_no_upward_import(package: str) -> None:
    assert upward(package) == []


@pytest.mark.parametrize("package", sorted(PACKAGES))
def test_no_cycle_even_through_lazy_imports(package: str) -> None:
    assert cycles(graph(package, lazy=True)) == []


def test_the_runtime_never_imports_the_packager() -> None:
    for source in PACKAGES["triton_backend_runtime"].rglob("*.py"):
        tree = ast.parse(source.read_text(encoding="utf-8"))
        names = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
        names |= {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
        assert not {n for n in names if n.split(".")[0] == "backend_packager"}, source.name


def test_the_packager_imports_only_what_the_runtime_declares() -> None:
    undeclared = []
    for source in sorted(PACKAGES["backend_packager"].rglob("*.py")):
        for node in ast.walk(ast.parse(source.read_text(encoding="utf-8"))):
            if not (isinstance(node, ast.ImportFrom) and node.module
                    and node.module.startswith("triton_backend_runtime.")):
                continue
            if node.module.count(".") != 1:
                undeclared.append(f"{source.relative_to(ROOT)}: {node.module} (import the layer, not its module)")
                continue
            declared = set(getattr(importlib.import_module(node.module), "__all__", ()))
            undeclared += [f"{source.relative_to(ROOT)}: {node.module}.{a.name}"
                           for a in node.names if a.name not in declared]
    assert undeclared == []


@pytest.mark.parametrize("package", sorted(PACKAGES))
def test_py_typed(package: str) -> None:
    assert (PACKAGES[package] / "py.typed").is_file()


def test_every_module_is_in_the_architecture_document() -> None:
    text = (ROOT / "docs" / "development" / "architecture.md").read_text(encoding="utf-8")
    missing = [f"{package}/{p.relative_to(directory)}" for package, directory in PACKAGES.items()
               for p in sorted(directory.rglob("*.py"))
               if f"`{p.name}`" not in text and f"`{p.relative_to(directory).as_posix()}`" not in text]
    assert missing == [], f"modules docs/development/architecture.md does not list: {missing}"


def _without_docstrings(tree: ast.AST) -> str:
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr) \
                and isinstance(body[0].value, ast.Constant) and isinstance(body[0].value.value, str):
            body.pop(0)
    return ast.dump(tree)


def test_the_init_template_builds_as_the_example_does() -> None:
    """The rendered setup.py is the example's, but for docstrings and comments (a template
    once lacked the example's -Wl,-soname)."""
    from backend_packager.commands import scaffold

    rendered = scaffold.render(scaffold.Project("demo-triton-backend", "demo", "demo_backend"))["setup.py"]
    example = (ROOT / "examples" / "setuptools_backend" / "setup.py").read_text(encoding="utf-8")
    assert _without_docstrings(ast.parse(rendered)) == _without_docstrings(ast.parse(example))
