"""The wheel's PEP 770 SBOM: CycloneDX 1.6 JSON from the facts the scanner already read.

API (pure: plain data in, bytes out; nothing read, nothing run)::

    SBOM_PATH = "sboms/triton-backend.cdx.json"        # relative to the .dist-info directory

    sbom_bytes(source, *, name, version, existing_sboms=None, plugins=None, backends=None,
               epoch=None) -> bytes

``source`` is a :class:`Manifest` (its artifacts, plugins and backends are used) or the
scanned artifacts themselves (``WheelContents.artifacts``; plugins then default to the
artifacts exporting a plugin API). ``existing_sboms``: the SBOMs already in the wheel
(auditwheel's ``.dist-info/sboms/auditwheel.cdx.json``) as artifacts; None takes every
``.dist-info/sboms/*`` artifact of ``source`` but this one. ``epoch``: ``SOURCE_DATE_EPOCH``
(pass :func:`~backend_packager.base.source_date_epoch`); None omits the timestamp. A
manifest or artifact list that already lists this SBOM is fine: it is never described.
Usage in a writer, before the manifest is made::

    data = sbom_bytes(contents.artifacts, name=contents.name, version=contents.version,
                      epoch=source_date_epoch())
    files[f"{contents.dist_info}/{SBOM_PATH}"] = data   # then listed as an artifact, signed

What it says: the wheel is the root component (purl ``pkg:pypi/NAME@VERSION``); every ELF
file and native non-ELF code (LLVM bitcode such as ``libdevice.10.bc``, cubins, fatbins)
is a component with its sha256 and path, an ELF library of type ``library``, an
executable (``ET_EXEC``, or a PIE) and non-ELF code of type ``file``. ELF facts are
properties under ``triton-backend:``: type, machine, soname, build id, ``.comment``
compiler strings, NEEDED, RPATH/RUNPATH, interpreter, the symbol versions required from
each library (``libc.so.6:GLIBC_2.14``), the highest glibc and its manylinux tag, Python
extension modules, and ``triton.backend`` (the file lies in a backend's package) or
``triton.plugin`` (the manifest lists it as a plugin: its API, and the version it reported
when its ``tritonGetPluginInfo`` was captured). Dependencies: the root depends on every
file; each file on the wheel's libraries its NEEDED entries name (by SONAME or file name,
the ``$ORIGIN`` RPATH/RUNPATH directories preferred where two match) and on external
libraries, components of their own by SONAME, without hash.

No component has a version: the scanner reads no version string from a binary, and a
version is never guessed (a SONAME's number is an ABI version, not a release).

Reproducible: the same input gives the same bytes. The serial number is a UUIDv5 of the
sha256 over the name, the version and the sorted (path, sha256) of every described file
(components and referenced SBOMs): the manifest's digest would be circular, since the
manifest lists this SBOM. Every bom-ref is set here (``file:PATH``, ``soname:NAME``, the
root's purl); components, properties and dependencies are sorted by the library; no
timestamp unless ``epoch`` is given.
"""

from __future__ import annotations

import hashlib
import json
import posixpath
import uuid
from collections.abc import Iterable, Sequence
from datetime import datetime, timezone
from urllib.parse import quote

from cyclonedx.model import ExternalReference, ExternalReferenceType, HashAlgorithm, HashType, Property, XsUri
from cyclonedx.model.bom import Bom
from cyclonedx.model.component import Component, ComponentType
from cyclonedx.model.dependency import Dependency
from cyclonedx.schema import SchemaVersion
from cyclonedx.schema.schema import SchemaVersion1Dot6
from packageurl import PackageURL
from triton_backend_runtime.base import canonicalize_name
from triton_backend_runtime.manifest import model as m

from .. import __version__

__all__ = ["NATIVE_SUFFIXES", "PROPERTY_PREFIX", "SBOM_DIR", "SBOM_PATH", "described_files", "sbom_bytes",
           "serial_number"]

SBOM_DIR = "sboms"
SBOM_PATH = f"{SBOM_DIR}/triton-backend.cdx.json"
PROPERTY_PREFIX = "triton-backend:"
#: Native code that is not ELF, recognised by name: LLVM bitcode (libdevice), CUDA cubins and fatbins.
NATIVE_SUFFIXES = (".bc", ".cubin", ".fatbin")
#: The namespace of serial numbers (UUIDv5 of a digest of what is described).
_SERIAL_NAMESPACE = uuid.uuid5(uuid.NAMESPACE_URL, "urn:triton-backend:sbom")
_ORIGIN = ("$ORIGIN", "${ORIGIN}")
_SCHEMA_URI = "http://cyclonedx.org/schema/bom-1.6.schema.json"


def sbom_bytes(
    source: m.Manifest | Iterable[m.Artifact],
    *,
    name: str,
    version: str,
    existing_sboms: Iterable[m.Artifact] | None = None,
    plugins: Iterable[m.Plugin] | None = None,
    backends: Iterable[m.Backend] | None = None,
    epoch: int | None = None,
) -> bytes:
    """The SBOM's bytes (UTF-8 JSON, final newline); see the module docstring."""
    if isinstance(source, m.Manifest):
        artifacts = list(source.artifacts)
        plugins = source.plugins if plugins is None else plugins
        backends = source.backends if backends is None else backends
    else:
        artifacts = list(source)
    if plugins is None:
        plugins = [m.Plugin(path=a.path, api=a.elf.plugin.api) for a in artifacts if a.elf and a.elf.plugin]
    files = described_files(artifacts)
    sboms = sorted(_other_sboms(artifacts) if existing_sboms is None else existing_sboms, key=lambda a: a.path)
    root = _root(name, version, sboms)
    bom = Bom(serial_number=serial_number(name, version, [*files, *sboms]))
    bom.metadata.timestamp = None  # type: ignore[assignment]  # the library stamps the clock: omitted
    if epoch is not None:
        bom.metadata.timestamp = datetime.fromtimestamp(epoch, tz=timezone.utc)
    bom.metadata.component = root
    bom.metadata.tools.components.add(Component(
        type=ComponentType.APPLICATION, name="backend-packager", version=__version__, bom_ref="tool:backend-packager"))
    _add_files(bom, root, files, {p.path: p for p in plugins}, list(backends or ()))
    return _json_text(bom).encode("utf-8") + b"\n"


def _json_text(bom: Bom) -> str:
    """What ``JsonV1Dot6(bom).output_as_string(indent=1)`` gives, linear in the components.

    The outputter first runs ``Bom.validate`` (a ``register_dependency`` per component, each
    scanning every dependency) and a bom-ref discriminator (a list search per bom-ref): both
    quadratic, and no-ops here, since every component has its dependency entry and every
    bom-ref is set and unique. Its flattening of nested dependencies is one as well: none nest.
    """
    doc = json.loads(bom.as_json(view_=SchemaVersion1Dot6))  # type: ignore[attr-defined]
    doc.update({"$schema": _SCHEMA_URI, "bomFormat": "CycloneDX", "specVersion": SchemaVersion.V1_6.to_version()})
    return json.dumps(doc, indent=1)


def described_files(artifacts: Iterable[m.Artifact]) -> list[m.Artifact]:
    """The artifacts that become components: ELF files and native non-ELF code, by path."""
    return sorted((a for a in artifacts if _is_native(a) and not _is_sbom(a.path)), key=lambda a: a.path)


def serial_number(name: str, version: str, files: Iterable[m.Artifact]) -> uuid.UUID:
    """UUIDv5 of the sha256 over the normalised name, the version and the sorted (path, sha256)."""
    facts = [canonicalize_name(name), version, sorted([a.path, a.sha256] for a in files)]
    digest = hashlib.sha256(json.dumps(facts, separators=(",", ":")).encode("utf-8")).hexdigest()
    return uuid.uuid5(_SERIAL_NAMESPACE, digest)


def _is_native(artifact: m.Artifact) -> bool:
    return artifact.elf is not None or artifact.path.endswith(NATIVE_SUFFIXES)


def _sbom_dir(path: str) -> str | None:
    """The name under ``.dist-info/sboms/`` when ``path`` is there (top-level .dist-info only)."""
    top, _, rest = path.partition("/")
    folder, _, leaf = rest.partition("/")
    return leaf if top.endswith(".dist-info") and folder == SBOM_DIR and leaf and "/" not in leaf else None


def _is_sbom(path: str) -> bool:
    return _sbom_dir(path) == SBOM_PATH.rpartition("/")[2]


def _other_sboms(artifacts: Iterable[m.Artifact]) -> list[m.Artifact]:
    return [a for a in artifacts if _sbom_dir(a.path) is not None and not _is_sbom(a.path)]


def _sha256(artifact: m.Artifact) -> list[HashType]:
    return [HashType(alg=HashAlgorithm.SHA_256, content=artifact.sha256)]


def _root(name: str, version: str, sboms: Sequence[m.Artifact]) -> Component:
    purl = PackageURL(type="pypi", name=canonicalize_name(name), version=version)
    references = [
        ExternalReference(
            type=ExternalReferenceType.BOM,
            # A URI reference relative to this file, which lies in the same sboms/ directory.
            url=XsUri(quote(_sbom_dir(s.path) or s.path, safe="", errors="backslashreplace")),
            comment=f"an SBOM already in the wheel, kept: {s.path}",
            hashes=_sha256(s),
        )
        for s in sboms
    ]
    return Component(type=ComponentType.LIBRARY, name=name, version=version, purl=purl, bom_ref=purl.to_string(),
                     external_references=references)


def _add_files(bom: Bom, root: Component, files: list[m.Artifact], plugins: dict[str, m.Plugin],
               backends: list[m.Backend]) -> None:
    """A component per file and per external library; the NEEDED edges between them."""
    components = {a.path: _component(a, plugins.get(a.path), backends) for a in files}
    by_name = _libraries_by_name(files)
    external: dict[str, Component] = {}
    needs: dict[str, list[Component]] = {path: [] for path in components}  # a path listed twice: one entry
    for artifact in files:
        targets = needs[artifact.path]
        for needed in artifact.elf.needed if artifact.elf else []:
            inside = _resolve(needed, artifact, by_name)
            if inside:
                targets += [components[p] for p in inside if p != artifact.path]
            else:
                if needed not in external:
                    external[needed] = _external(needed)
                targets.append(external[needed])
    graph = [(root, list(components.values())), *((components[p], ts) for p, ts in needs.items()),
             *((library, []) for library in external.values())]
    for component in [*components.values(), *external.values()]:
        bom.components.add(component)
    # Assigned at once: Bom.register_dependency scans every entry on each call (quadratic).
    bom.dependencies = [Dependency(c.bom_ref, [Dependency(t.bom_ref) for t in ts]) for c, ts in graph]


def _component(artifact: m.Artifact, plugin: m.Plugin | None, backends: list[m.Backend]) -> Component:
    info = artifact.elf
    kind = ComponentType.LIBRARY if info is not None and m.file_kind(info) == "library" else ComponentType.FILE
    facts: list[tuple[str, str]] = [("path", artifact.path)]
    if info is not None:
        facts += _elf_facts(info)
    facts += [("triton.backend", b.name) for b in backends if _inside(artifact.path, b.package)]
    if plugin is not None:
        facts.append(("triton.plugin", plugin.api))
        if plugin.info is not None and plugin.info.captured and plugin.info.version:
            facts.append(("triton.plugin.reported_version", plugin.info.version))
    return Component(
        type=kind,
        name=posixpath.basename(artifact.path),
        bom_ref=f"file:{artifact.path}",
        hashes=_sha256(artifact),
        properties=[Property(name=PROPERTY_PREFIX + key, value=value) for key, value in facts],
    )


def _elf_facts(info: m.ElfInfo) -> list[tuple[str, str]]:
    single = [("elf.type", info.file_type), ("elf.machine", info.machine), ("elf.soname", info.soname),
              ("elf.build_id", info.build_id), ("elf.interpreter", info.interpreter), ("elf.glibc", info.glibc),
              ("elf.manylinux", info.manylinux if info.glibc else None)]
    facts = [(key, value) for key, value in single if value]
    facts += [("elf.compiler", c) for c in info.compiler]
    facts += [("elf.needed", n) for n in info.needed]
    facts += [("elf.rpath", r) for r in info.rpath]
    facts += [("elf.runpath", r) for r in info.runpath]
    facts += [("elf.version_need", f"{need.library}:{v}") for need in info.version_needs for v in need.versions]
    facts += [("python.extension", module) for module in info.python_extension]
    return facts


def _inside(path: str, package: str) -> bool:
    return path.startswith(package.replace(".", "/") + "/")


def _external(soname: str) -> Component:
    return Component(type=ComponentType.LIBRARY, name=soname, bom_ref=f"soname:{soname}",
                     description="not in the wheel: found by the dynamic loader at run time",
                     properties=[Property(name=PROPERTY_PREFIX + "elf.soname", value=soname)])


def _libraries_by_name(files: list[m.Artifact]) -> dict[str, list[m.Artifact]]:
    """The wheel's ELF files by each name a NEEDED entry may give: SONAME and file name."""
    found: dict[str, list[m.Artifact]] = {}
    for artifact in files:
        if artifact.elf is None:
            continue
        names = {posixpath.basename(artifact.path), artifact.elf.soname or ""} - {""}
        for key in sorted(names):
            found.setdefault(key, []).append(artifact)
    return found


def _resolve(needed: str, owner: m.Artifact, by_name: dict[str, list[m.Artifact]]) -> list[str]:
    """The paths in the wheel a NEEDED entry names: the one candidate; else those in the
    first ``$ORIGIN`` RPATH/RUNPATH directory holding one; else every candidate (ambiguous)."""
    candidates = [a.path for a in by_name.get(needed, []) if "/" not in needed]
    if len(candidates) < 2 or owner.elf is None:
        return candidates
    for directory in _origin_dirs(owner.path, owner.elf):
        here = [p for p in candidates if posixpath.dirname(p) == directory]
        if here:
            return here
    return candidates


def _origin_dirs(path: str, info: m.ElfInfo) -> list[str]:
    """The wheel directories ``$ORIGIN`` entries of RUNPATH (or RPATH when none) point to."""
    origin = posixpath.dirname(path)
    found = []
    for entry in info.runpath or info.rpath:
        for token in _ORIGIN:
            if entry == token or entry.startswith(token + "/"):
                directory = posixpath.normpath(posixpath.join(origin, entry[len(token) + 1:]))
                found.append("" if directory == "." else directory)
    return found
