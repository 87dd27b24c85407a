"""Assemble a manifest from what a pass over a wheel found.

Shared by the build hook and ``migrate``: finding the backends a wheel provides (declared
``triton.backends`` entry points, or the ``triton/backends/<name>/`` directories that
Triton 3.2/3.3 and vendor forks scan), the plugin libraries among its artifacts, the
build record, and (:func:`describe`) the manifest itself with the files added beside it.

The manifest vouches for every file of the output wheel (coverage "all"): each file the
writer copied, and each file added here, hashed from its final bytes before anything is
sealed.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass

from packaging.requirements import InvalidRequirement, Requirement
from triton_backend_runtime import manifest as m

from . import __version__
from .artifacts import artifact_from_bytes
from .entrypoints import BACKENDS_GROUP, EntryPoints, render
from .wheelfile import WheelContents

_BACKEND_DIR = re.compile(r"^triton/backends/([^/]+)/(compiler|driver)\.py$")
_COMPILER_BASES = {"BaseBackend"}
_DRIVER_BASES = {"DriverBase", "GPUDriver"}


@dataclass
class Injection:
    """What a plan adds to ``.dist-info``: the manifest to seal, and the files (name ->
    final bytes) written beside it, which the manifest already lists as artifacts."""

    manifest: m.Manifest
    files: dict[str, bytes]


@dataclass
class Backends:
    """Backends found, and the entry points the wheel must declare for them."""

    backends: list[m.Backend]
    entry_points: EntryPoints


def find_backends(contents: WheelContents, overrides: dict[str, str] | None = None) -> Backends:
    """Overrides (name -> package) win; else declared entry points; else backend directories."""
    declared = contents.entry_points.get(BACKENDS_GROUP, {})
    if overrides:
        chosen = dict(overrides)
    elif declared:
        chosen = {name: value.split(":")[0].strip() for name, value in declared.items()}
    else:
        chosen = _scanned_directories(contents.names)
    backends = [_describe(name, package, contents) for name, package in sorted(chosen.items())]
    points = {group: dict(names) for group, names in contents.entry_points.items()}
    if chosen:
        points[BACKENDS_GROUP] = {**declared, **chosen} if not overrides else dict(chosen)
    return Backends(backends, points)


def _scanned_directories(names: list[str]) -> dict[str, str]:
    """Directory-scan era: every triton/backends/<name>/ holding compiler.py and driver.py."""
    found: dict[str, set[str]] = {}
    for name in names:
        match = _BACKEND_DIR.match(name)
        if match:
            found.setdefault(match.group(1), set()).add(match.group(2))
    return {name: f"triton.backends.{name}" for name, kinds in found.items() if kinds == {"compiler", "driver"}}


def _describe(name: str, package: str, contents: WheelContents) -> m.Backend:
    base = package.replace(".", "/")
    compiler = _single_subclass(contents, f"{base}/compiler.py", f"{package}.compiler", _COMPILER_BASES)
    driver = _single_subclass(contents, f"{base}/driver.py", f"{package}.driver", _DRIVER_BASES)
    return m.Backend(name=name, package=package, compiler=compiler, driver=driver, targets=[])


def _single_subclass(contents: WheelContents, path: str, module: str, bases: set[str]) -> str | None:
    """``module:Class`` when the source defines exactly one class deriving from ``bases``."""
    source = contents.read_member(path)
    if source is None:
        return None
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return None
    classes = [
        node.name
        for node in tree.body
        if isinstance(node, ast.ClassDef) and any(_base_name(b) in bases for b in node.bases)
    ]
    return f"{module}:{classes[0]}" if len(classes) == 1 else None


def _base_name(node: ast.expr) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return ""


def find_plugins(artifacts: list[m.Artifact]) -> list[m.Plugin]:
    return [
        m.Plugin(path=a.path, api=a.elf.plugin.api, name=None)
        for a in artifacts
        if a.elf is not None and a.elf.plugin is not None
    ]


def triton_requirement(contents: WheelContents) -> str:
    """The Triton specifier from METADATA's Requires-Dist, '' when it names none."""
    for line in contents.metadata.get_all("Requires-Dist") or []:
        try:
            req = Requirement(line)
        except InvalidRequirement:
            continue
        if req.name.lower() == "triton" and not req.marker:
            return str(req.specifier)
    return ""


def build_record(artifacts: list[m.Artifact], epoch: int | None) -> m.Build:
    compilers = sorted({c for a in artifacts if a.elf for c in a.elf.compiler})
    return m.Build(tool="backend-packager", tool_version=__version__, compiler=compilers, source_date_epoch=epoch)


def describe(
    contents: WheelContents,
    backends: list[m.Backend],
    entry_points: EntryPoints,
    *,
    requirements: m.Requirements,
    provenance: m.Provenance,
    epoch: int | None,
    protocol_version: str = m.PROTOCOL_VERSION,
    plugins: list[m.Plugin] | None = None,
) -> Injection:
    """The manifest for ``contents`` and the ``entry_points.txt`` it is injected with.

    Its artifacts are every file of the output: the copied ones as the writer described
    them, and ``entry_points.txt`` hashed from the bytes that will be written.
    """
    files = added_files(contents.dist_info, entry_points)
    added = [artifact_from_bytes(path, data) for path, data in files.items()]
    manifest = m.Manifest(
        schema_version=m.SCHEMA_VERSION,
        name=contents.name,
        version=contents.version,
        tags=sorted(contents.tags),
        protocol_version=protocol_version,
        requirements=requirements,
        backends=backends,
        plugins=find_plugins(contents.artifacts) if plugins is None else plugins,
        artifacts=sorted([*contents.artifacts, *added], key=lambda a: a.path),
        build=build_record(contents.artifacts, epoch),
        provenance=provenance,
        coverage=m.COVERAGE_ALL,
    )
    return Injection(manifest, files)


def added_files(dist_info: str, entry_points: EntryPoints) -> dict[str, bytes]:
    """The ``.dist-info`` files a rewrite adds besides the manifest: the entry points, when
    there are any (rendered by the function ``prepare_metadata_for_build_wheel`` uses)."""
    text = render(entry_points)
    return {f"{dist_info}/entry_points.txt": text.encode("utf-8")} if text else {}
