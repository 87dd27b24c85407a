"""The reason codes the runtime can give, read from its sources, and the codes the tests assert,
read from theirs; both with :mod:`ast`, so that a code in a comment or a docstring counts for
neither side.

A code is ``<family>.<name>`` (``verify.sha256``, ``cache.too-large``): the family is the
``code_prefix`` of the error class raised, or the code is written whole.
"""

from __future__ import annotations

import ast
import functools
import re
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RUNTIME = ROOT / "runtime" / "triton_backend_runtime"
TESTS = ROOT / "tests"
#: What a code looks like once its family is known: digits allowed (``verify.sha256``).
NAME = r"[a-z0-9][a-z0-9-]*"


@functools.cache
def _sources(directory: Path) -> list[tuple[Path, ast.Module]]:
    """Every module under ``directory`` (``rglob``: subpackages included), parsed once a run
    (the trees are only read)."""
    return [(p, ast.parse(p.read_text(encoding="utf-8"))) for p in sorted(directory.rglob("*.py"))]


def error_prefixes() -> dict[str, str]:
    """Each TrustError subclass of the runtime and its code prefix, read from the sources."""
    prefixes = {"TrustError": "error"}
    sources = [tree for _, tree in _sources(RUNTIME)]
    changed = True
    while changed:
        changed = False
        for tree in sources:
            for node in (n for n in tree.body if isinstance(n, ast.ClassDef) and n.name not in prefixes):
                bases = [b.id for b in node.bases if isinstance(b, ast.Name) and b.id in prefixes]
                if not bases:
                    continue
                own = [s.value.value for s in node.body if isinstance(s, ast.Assign)
                       and any(isinstance(t, ast.Name) and t.id == "code_prefix" for t in s.targets)
                       and isinstance(s.value, ast.Constant)]
                prefixes[node.name] = own[0] if own else prefixes[bases[0]]
                changed = True
    return prefixes


def _docstrings(tree: ast.AST) -> set[int]:
    """The ids of the constants that are docstrings (or other bare string statements)."""
    return {id(n.value) for n in ast.walk(tree) if isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant)}


def _name_of(func: ast.expr) -> str | None:
    if isinstance(func, ast.Name):
        return func.id
    return func.attr if isinstance(func, ast.Attribute) else None


def _strings(node: ast.AST, skip: set[int] = frozenset()) -> Iterator[str]:  # type: ignore[assignment]
    for sub in ast.walk(node):
        if isinstance(sub, ast.Constant) and isinstance(sub.value, str) and id(sub) not in skip:
            yield sub.value


def raised_codes() -> set[str]:
    """Every code the runtime can give at load time: ``SomeError("name", ...)`` with the class's
    family, a whole code written as a string (not in a docstring or comment), and the
    ``too-large`` and ``json`` of each error class handed to ``jsonlimits.loads``. The runtime
    CLI (``cli/``) is left out: its usage errors are not load-time reasons."""
    prefixes = error_prefixes()
    families = sorted(set(prefixes.values()) - {"error"})
    whole = re.compile(rf"(?:{'|'.join(families)})\.{NAME}")
    codes: set[str] = set()
    for path, tree in _sources(RUNTIME):
        if path.name == "__main__.py" or path.relative_to(RUNTIME).parts[0] == "cli":
            continue
        codes |= {s for s in _strings(tree, _docstrings(tree)) if whole.fullmatch(s)}
        for call in (n for n in ast.walk(tree) if isinstance(n, ast.Call)):
            name = _name_of(call.func)
            first = call.args[0] if call.args else None
            if name in prefixes and prefixes[name] != "error" and isinstance(first, ast.Constant) \
                    and isinstance(first.value, str) and re.fullmatch(NAME, first.value):
                codes.add(f"{prefixes[name]}.{first.value}")
            if name == "loads" and isinstance(call.func, ast.Attribute) and _name_of(call.func.value) == "jsonlimits":
                for arg in (a for a in call.args if isinstance(a, ast.Name) and a.id in prefixes):
                    codes |= {f"{prefixes[arg.id]}.too-large", f"{prefixes[arg.id]}.json"}
    return {c for c in codes if not c.endswith((".py", ".pth"))}


def _parametrized_names(func: ast.FunctionDef, decorator: ast.Call) -> set[str]:
    first = decorator.args[0] if decorator.args else None
    if isinstance(first, ast.Constant) and isinstance(first.value, str):
        return {n.strip() for n in first.value.split(",")}
    if isinstance(first, (ast.Tuple, ast.List)):
        return {e.value for e in first.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)}
    return set()


def asserted_in(tree: ast.Module) -> set[str]:
    """The strings a test module asserts on:

    - any string in an ``assert`` statement;
    - the first argument of a ``@case("code", ...)`` decorator (a table the test asserts by);
    - the values of a ``pytest.mark.parametrize`` (inline, or a module-level table it names)
      whose test asserts on one of the parameters.
    """
    tables = {t.id: n.value for n in tree.body if isinstance(n, (ast.Assign, ast.AnnAssign))
              for t in (n.targets if isinstance(n, ast.Assign) else [n.target]) if isinstance(t, ast.Name)
              and n.value is not None}
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Assert):
            found |= set(_strings(node))
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        asserted_names = {n.id for a in ast.walk(node) if isinstance(a, ast.Assert)
                          for n in ast.walk(a) if isinstance(n, ast.Name)}
        for decorator in (d for d in node.decorator_list if isinstance(d, ast.Call)):
            name = _name_of(decorator.func)
            if name == "case" and decorator.args and isinstance(decorator.args[0], ast.Constant):
                found |= set(_strings(decorator.args[0]))
            if name == "parametrize" and isinstance(node, ast.FunctionDef) \
                    and _parametrized_names(node, decorator) & asserted_names:
                for values in decorator.args[1:2]:
                    found |= set(_strings(tables[values.id] if isinstance(values, ast.Name)
                                          and values.id in tables else values))
    return found


def asserted_codes(directory: Path = TESTS) -> dict[str, list[str]]:
    """Each string some test module under ``directory`` (``rglob``) asserts on, with the modules."""
    found: dict[str, list[str]] = {}
    for path, tree in _sources(directory):
        if path.name.startswith("test_"):
            for code in asserted_in(tree):
                found.setdefault(code, []).append(str(path.relative_to(directory)))
    return found
