"""The vendor's ``[tool.backend-packager]`` table, read from ``pyproject.toml``.

Example::

    [tool.backend-packager]
    backends = [{ name = "demo", package = "demo_backend", targets = ["demo"] }]
    protocol-version = "1.0"
    triton = ">=3.9,<3.10"
    signing-key = "keys/signing.pem"      # else $BACKEND_PACKAGER_SIGNING_KEY; else hash-only
    require-signature = true              # no key -> error, no wheel
    repair = "auditwheel"                 # optional: repair before the scan
    inner-backend = "setuptools.build_meta"
    capture-plugins = "auto"              # ask plugins what they provide: auto | sandbox | off
    sigstore = true                       # and a Sigstore bundle (docs/vendor/keyless.md)
    sigstore-staging = false              # Sigstore's staging instance instead of production

Every problem raises :class:`~backend_packager.base.errors.ConfigError` whose path is the
``pyproject.toml`` and whose detail names the key (``tool.backend-packager.<key>``) and what
was expected, so a vendor can fix it without reading this module.

Relative key paths (see :func:`start_directory` and :func:`project_root`): one from the
environment is relative to the directory the build was started in, one from the table to
the project root, whether the frontend builds in the tree (``--wheel``, pip) or from an
unpacked sdist (``python -m build``'s default), which never holds the private key.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

from triton_backend_runtime.manifest import PROTOCOL_VERSION, PassPlacement, PluginContract

from ..base import ConfigError

__all__ = [
    "BackendSpec", "CAPTURE_CHOICES", "Config", "DEFAULT_INNER_BACKEND", "PluginSpec", "REPAIR_TOOLS",
    "SIGNING_KEY_ENV", "TABLE", "load", "parse", "project_root", "start_directory"
]

#: Environment variable naming the signing key file when the configuration names none.
SIGNING_KEY_ENV = "BACKEND_PACKAGER_SIGNING_KEY"

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

TABLE = "tool.backend-packager"
DEFAULT_INNER_BACKEND = "setuptools.build_meta"
REPAIR_TOOLS = ("auditwheel",)
#: ``capture-plugins``: "auto" asks each plugin in a sandbox, or (none can be made) as the
#: build itself runs, where the vendor's own code runs anyway; "sandbox" only in a sandbox
#: (else ``no-sandbox``); "off" runs no plugin code (``not-run``).
CAPTURE_CHOICES = ("auto", "sandbox", "off")

_KEYS = {
    "backends", "protocol-version", "triton", "signing-key", "require-signature", "repair",
    "inner-backend", "inner-backend-path", "plugins", "capture-plugins", "sigstore", "sigstore-staging",
}
_BACKEND_KEYS = {"name", "package", "targets"}
# Entry-point names are matched case-sensitively and must not contain '=' (entry points spec).
_EP_NAME = re.compile(r"^[A-Za-z0-9_.-]+$")
_MODULE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")
_MAJOR_MINOR = re.compile(r"^[0-9]+\.[0-9]+$")


@dataclass(frozen=True)
class BackendSpec:
    """One ``triton.backends`` entry point: ``name = package``."""

    name: str
    package: str
    targets: tuple[str, ...] = ()


@dataclass(frozen=True)
class PluginSpec:
    """A plugin's declared contract (``[[tool.backend-packager.plugins]]``), by wheel path."""

    path: str
    contract: PluginContract


@dataclass(frozen=True)
class Config:
    backends: tuple[BackendSpec, ...]
    protocol_version: str
    triton: str
    signing_key: Path | None
    signing_key_source: str  # "pyproject.toml", the environment variable, or "" without a key
    require_signature: bool
    repair: str | None
    inner_backend: str
    inner_backend_path: tuple[Path, ...]
    plugins: tuple[PluginSpec, ...] = ()
    capture_plugins: str = "auto"
    sigstore: bool = False
    sigstore_staging: bool = False

    def entry_points(self) -> dict[str, str]:
        """The ``[triton.backends]`` group this configuration injects."""
        return {b.name: b.package for b in self.backends}


def load(project: Path, environ: Mapping[str, str] | None = None, *, hints: Sequence[Path] = ()) -> Config:
    """Read ``project/pyproject.toml``; the signing key may come from ``environ``.

    ``hints`` are directories that may be the project root when ``project`` is an unpacked
    sdist (the parent of the output directory, which is ``<root>/dist`` by default)."""
    pyproject = project / "pyproject.toml"
    try:
        data = tomllib.loads(pyproject.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError("missing", str(pyproject), f"cannot read: {exc.strerror}") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError("toml", str(pyproject), f"not valid TOML: {exc}") from None
    table = data.get("tool", {}).get("backend-packager")
    if table is None:
        raise ConfigError("missing", str(pyproject), f"no [{TABLE}] table: it must name at least one backend")
    env = os.environ if environ is None else environ
    key = table.get("signing-key") if isinstance(table, dict) else None
    relative = isinstance(key, str) and not os.path.isabs(key)
    return parse(table, project, pyproject, env, root=project_root(project, env, hints) if relative else project)


def parse(table: object, project: Path, where: Path, environ: Mapping[str, str], *, root: Path | None = None) -> Config:
    """Check the table and build a :class:`Config`; paths are relative to ``project``, but
    ``signing-key`` is relative to ``root`` (the source tree the build started from)."""
    reader = _Reader(table, str(where))
    unknown = sorted(set(reader.table) - _KEYS)
    if unknown:
        reader.fail(unknown[0], f"unknown key; expected one of {', '.join(sorted(_KEYS))}")
    key, source = _signing_key(reader, project if root is None else root, environ)
    return Config(
        backends=_backends(reader),
        protocol_version=reader.string("protocol-version", PROTOCOL_VERSION, _MAJOR_MINOR, "'MAJOR.MINOR'"),
        triton=_specifier(reader),
        signing_key=key,
        signing_key_source=source,
        require_signature=reader.boolean("require-signature", False),
        repair=_repair(reader),
        inner_backend=reader.string("inner-backend", DEFAULT_INNER_BACKEND, re.compile(r"^[\w.]+(:[\w.]+)?$"),
                                    "an importable backend such as 'setuptools.build_meta'"),
        inner_backend_path=tuple(project / p for p in reader.strings("inner-backend-path")),
        plugins=_plugins(reader),
        capture_plugins=_choice(reader.table.get("capture-plugins", "auto"), CAPTURE_CHOICES, reader,
                                "capture-plugins"),
        sigstore=reader.boolean("sigstore", False),
        sigstore_staging=reader.boolean("sigstore-staging", False),
    )


class _Reader:
    """Typed access to the table; every failure names ``tool.backend-packager.<key>``."""

    def __init__(self, table: object, where: str) -> None:
        if not isinstance(table, dict):
            raise ConfigError("type", where, f"[{TABLE}] must be a table")
        self.table: dict[str, Any] = table
        self.where = where

    def fail(self, key: str, expected: str) -> NoReturn:
        raise ConfigError("value", self.where, f"{TABLE}.{key}: {expected}")

    def string(self, key: str, default: str, pattern: re.Pattern[str] | None = None, what: str = "") -> str:
        value = self.table.get(key, default)
        if not isinstance(value, str) or (pattern is not None and not pattern.match(value)):
            self.fail(key, f"expected a string{' ' + what if what else ''}, found {value!r}")
        return str(value)

    def boolean(self, key: str, default: bool) -> bool:
        value = self.table.get(key, default)
        if not isinstance(value, bool):
            self.fail(key, f"expected true or false, found {value!r}")
        return bool(value)

    def strings(self, key: str) -> list[str]:
        value = self.table.get(key, [])
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            self.fail(key, f"expected a list of strings, found {value!r}")
        return list(value)


def _backends(reader: _Reader) -> tuple[BackendSpec, ...]:
    value = reader.table.get("backends")
    expected = "expected a non-empty list of tables {name = ..., package = ..., targets = [...]}"
    if not isinstance(value, list) or not value:
        reader.fail("backends", f"{expected}, found {value!r}")
    specs: list[BackendSpec] = []
    for index, item in enumerate(value):
        key = f"backends[{index}]"
        if not isinstance(item, dict):
            reader.fail(key, f"{expected}, found {item!r}")
        extra = sorted(set(item) - _BACKEND_KEYS)
        if extra:
            reader.fail(f"{key}.{extra[0]}", "unknown key; expected name, package, targets")
        name, package, targets = item.get("name"), item.get("package"), item.get("targets", [])
        if not isinstance(name, str) or not _EP_NAME.match(name):
            reader.fail(f"{key}.name", f"expected an entry-point name (letters, digits, '_', '.', '-'), found {name!r}")
        if not isinstance(package, str) or not _MODULE.match(package):
            reader.fail(f"{key}.package", f"expected a dotted Python package name, found {package!r}")
        if not isinstance(targets, list) or not all(isinstance(t, str) and t for t in targets):
            reader.fail(f"{key}.targets", f"expected a list of target names, found {targets!r}")
        if any(s.name == name for s in specs):
            reader.fail(f"{key}.name", f"backend name {name!r} is given twice")
        specs.append(BackendSpec(str(name), str(package), tuple(targets)))
    return tuple(specs)


def _specifier(reader: _Reader) -> str:
    from packaging.specifiers import InvalidSpecifier, SpecifierSet

    text = reader.string("triton", "")
    try:
        SpecifierSet(text)
    except InvalidSpecifier:
        reader.fail("triton", f"expected a PEP 440 version specifier such as '>=3.9,<3.10', found {text!r}")
    return text


def _repair(reader: _Reader) -> str | None:
    value = reader.table.get("repair")
    if value is not None and value not in REPAIR_TOOLS:
        reader.fail("repair", f"expected one of {', '.join(repr(t) for t in REPAIR_TOOLS)}, found {value!r}")
    return None if value is None else str(value)


def _signing_key(reader: _Reader, project: Path, environ: Mapping[str, str]) -> tuple[Path | None, str]:
    # The table names the key where a project pins one; CI usually passes it by environment.
    if "signing-key" in reader.table:
        text = reader.string("signing-key", "")
        if not text:
            reader.fail("signing-key", "expected the path of a PEM private key, found ''")
        return project / text, f"{TABLE}.signing-key"
    env = environ.get(SIGNING_KEY_ENV, "")
    if env:
        return start_directory(environ) / env, SIGNING_KEY_ENV
    return None, ""


def start_directory(environ: Mapping[str, str]) -> Path:
    """The directory the build was started in: ``$PWD``, which POSIX shells keep (``cd``
    updates it) and frontends pass on unchanged, while they run each hook elsewhere (in the
    project or in an unpacked sdist). Without a usable ``$PWD``: the hook's own directory."""
    pwd = environ.get("PWD", "")
    if pwd and os.path.isabs(pwd) and os.path.isdir(pwd):
        return Path(pwd)
    return Path.cwd()


# Bounds for finding the source tree of an unpacked sdist: the directory is not ours.
_MAX_PYPROJECT = 1 << 20
_MAX_CHILDREN = 1024


def project_root(project: Path, environ: Mapping[str, str], hints: Sequence[Path] = ()) -> Path:
    """The source tree the build started from.

    In-tree builds run in it. ``python -m build`` by default builds the wheel from an unpacked
    sdist (``PKG-INFO`` at its root, PEP 517 / the core metadata spec), a copy elsewhere that
    keeps the vendor's ``pyproject.toml`` byte for byte but not the key: the tree is then the
    first of ``hints``, ``$PWD`` or (if exactly one matches) a subdirectory of ``$PWD`` whose
    ``pyproject.toml`` is identical. Not found: ``project`` (and an unreadable key says so).
    """
    if not (project / "PKG-INFO").is_file():
        return project
    own = _read_small(project / "pyproject.toml")
    if own is None:
        return project
    start = start_directory(environ)
    for candidate in (*hints, start):
        if _same_tree(candidate, project, own):
            return candidate
    try:
        with os.scandir(start) as entries:
            children = sorted(Path(e.path) for _, e in zip(range(_MAX_CHILDREN), entries, strict=False)
                              if e.is_dir(follow_symlinks=False))
    except OSError:
        return project
    matches = [c for c in children if _same_tree(c, project, own)]
    return matches[0] if len(matches) == 1 else project


def _same_tree(candidate: Path, project: Path, own: bytes) -> bool:
    try:
        if candidate.resolve() == project.resolve():
            return False
    except OSError:
        return False
    return _read_small(candidate / "pyproject.toml") == own


def _read_small(path: Path) -> bytes | None:
    try:
        with open(path, "rb") as stream:
            data = stream.read(_MAX_PYPROJECT + 1)
    except OSError:
        return None
    return data if len(data) <= _MAX_PYPROJECT else None


_PLUGIN_KEYS = {"path", "triton", "phase", "passes", "on-failure"}
_PHASES = ("import", "explicit")
_ON_FAILURE = ("fail", "fallback")
_PASS_NAME = re.compile(r"^[A-Za-z0-9_.:-]{1,200}$")


def _plugins(reader: _Reader) -> tuple[PluginSpec, ...]:
    """``plugins = [{ path, triton, phase, passes = [{ name, after | before }], on-failure }]``."""
    value = reader.table.get("plugins", [])
    if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
        reader.fail("plugins", f"expected a list of tables {{path = ..., triton = ..., ...}}, found {value!r}")
    specs: list[PluginSpec] = []
    for index, item in enumerate(value):
        key = f"plugins[{index}]"
        extra = sorted(set(item) - _PLUGIN_KEYS)
        if extra:
            reader.fail(f"{key}.{extra[0]}", f"unknown key; expected {', '.join(sorted(_PLUGIN_KEYS))}")
        path = item.get("path")
        if not isinstance(path, str) or not path or path.startswith("/") or ".." in path.split("/"):
            reader.fail(f"{key}.path", f"expected the plugin library's path inside the wheel, found {path!r}")
        if any(s.path == path for s in specs):
            reader.fail(f"{key}.path", f"plugin {path!r} is declared twice")
        contract = PluginContract(
            triton=_plugin_range(item.get("triton", ""), reader, key),
            phase=_choice(item.get("phase", "import"), _PHASES, reader, f"{key}.phase"),
            passes=_placements(item.get("passes", []), reader, key),
            on_failure=_choice(item.get("on-failure", "fallback"), _ON_FAILURE, reader, f"{key}.on-failure"),
        )
        specs.append(PluginSpec(path, contract))
    return tuple(specs)


def _choice(value: object, choices: tuple[Any, ...], reader: _Reader, key: str) -> Any:
    if value not in choices:
        reader.fail(key, f"expected one of {', '.join(map(repr, choices))}, found {value!r}")
    return value


def _plugin_range(text: object, reader: _Reader, key: str) -> str:
    from packaging.specifiers import InvalidSpecifier, SpecifierSet

    try:
        SpecifierSet(text if isinstance(text, str) else "?")
    except InvalidSpecifier:
        reader.fail(f"{key}.triton", f"expected a PEP 440 version specifier such as '>=3.9,<3.10', found {text!r}")
    return str(text)


def _placements(value: object, reader: _Reader, key: str) -> list[PassPlacement]:
    expected = "expected a list of tables {name = PASS, after = PASS_OR_STAGE} (or before = ...)"
    if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
        reader.fail(f"{key}.passes", f"{expected}, found {value!r}")
    out: list[PassPlacement] = []
    for index, item in enumerate(value):
        where = f"{key}.passes[{index}]"
        extra = sorted(set(item) - {"name", "after", "before"})
        if extra:
            reader.fail(f"{where}.{extra[0]}", "unknown key; expected name, after, before")
        name, after, before = item.get("name"), item.get("after"), item.get("before")
        for field_name, text in (("name", name), ("after", after), ("before", before)):
            if text is not None and not (isinstance(text, str) and _PASS_NAME.match(text)):
                reader.fail(f"{where}.{field_name}", f"expected a pass or stage name, found {text!r}")
        if name is None or (after is None) == (before is None):
            reader.fail(where, f"{expected}: a name and exactly one of after, before; found {item!r}")
        if any(p.name == name for p in out):
            reader.fail(f"{where}.name", f"pass {name!r} is placed twice")
        out.append(PassPlacement(str(name), after, before))
    return out
