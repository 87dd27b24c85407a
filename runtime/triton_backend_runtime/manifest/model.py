"""The backend manifest: one definition, used by the packager and the runtime alike.

A manifest describes one wheel: who it is (name, version, wheel tags), what it provides
(Triton backends and plugin libraries), what it needs (Triton version, Python, the backend
protocol), and every native artifact it ships with the facts read from its ELF file.

Versioning: ``schema_version`` is ``"MAJOR.MINOR"``. A reader accepts every minor of its
own major and ignores fields it does not know; a manifest with another major is refused
with :class:`~triton_backend_runtime.base.errors.ManifestError` (code ``manifest.version``).
Manifests larger than :data:`MAX_MANIFEST_BYTES` are refused before they are parsed.

Symbol lists: a library's imports are always listed in full (they are what breaks when
Triton changes). Its exports are listed in full up to :data:`EXPORT_LIST_LIMIT`; above
that, :class:`ExportTable` keeps the count, a digest of the sorted names, and only the
exports that matter for compatibility (plugin API symbols and ``PyInit_*``).
"""

from __future__ import annotations

import json
import re
from dataclasses import field
from typing import Annotated, Any, Literal

from ..base import MANIFEST_FILENAME, SIGSTORE_BUNDLE_FILENAME, ManifestError, jsonlimits, record
from . import schema

__all__ = [
    "Artifact", "Backend", "Build", "COVERAGE_ALL", "COVERAGE_NATIVE", "CaptureFailure", "Coverage",
    "EXPORT_LIST_LIMIT", "ElfInfo", "ExportTable", "INSTALLER_FILES", "INTERP_MAX_CHARS", "Import", "MANIFEST_FILENAME",
    "MAX_ARTIFACTS", "MAX_BACKENDS", "MAX_MANIFEST_BYTES", "MAX_NAMES", "MAX_PLUGINS", "MAX_REPAIRS", "MAX_SYMBOLS",
    "MAX_TAGS", "MAX_UNSIGNED_LOOKUP_BYTES", "MAX_UNSIGNED_MANIFEST_BYTES",
    "MAX_UNSIGNED_MANIFEST_VALUES", "Manifest", "OnFailure",
    "PLUGIN_V1_SYMBOLS", "PLUGIN_V2_SYMBOL", "PROTOCOL_VERSION",
    "PassPlacement", "Phase", "Plugin", "PluginApi", "PluginContract", "PluginDialect", "PluginInfo", "PluginPass",
    "Provenance", "Repair", "Requirements", "UpstreamIdentity",
    "SCHEMA_MAJOR", "SCHEMA_MINOR", "SCHEMA_URI", "SCHEMA_VERSION", "Symbol",
    "VersionNeed", "check_version", "file_kind", "from_json", "from_value", "is_installer_file", "json_schema",
    "to_json",
]

SCHEMA_MAJOR = 1
#: 1.1 added ``Manifest.coverage``: "all" when every file of the wheel is an artifact.
#: 1.2 added ``Plugin.info`` (what ``tritonGetPluginInfo`` returned at build time) and
#: ``Plugin.contract`` (what the vendor declared); both optional, absent before 1.2.
#: 1.2 also added ``Manifest.triton_package`` and ``Provenance.repairs`` (defaults: "triton", []).
#: 1.3 added ``ElfInfo.interpreter`` (PT_INTERP; absent before 1.3, and for libraries).
#: 1.4 added ``PluginInfo.ran_in`` (where the plugin ran when it reported; absent before 1.4)
#: and the capture failures ``not-run`` and ``no-sandbox``.
#: 1.5 added ``Provenance.upstream`` (the PEP 740 identities ``mirror`` checked; default []).
#: 1.6 added ``Manifest.sbom`` (the PEP 770 SBOM the packager generated; absent before 1.6).
SCHEMA_MINOR = 6
SCHEMA_VERSION = f"{SCHEMA_MAJOR}.{SCHEMA_MINOR}"
# ASCII digits only: str.isdigit() accepts "²", which int() then refuses.
_MAJOR_MINOR = re.compile(r"[0-9]{1,6}\.[0-9]{1,6}")
SCHEMA_URI = f"urn:triton-backend:manifest:v{SCHEMA_MAJOR}"
#: The backend protocol (Triton's BaseBackend / DriverBase contract) this layer speaks.
PROTOCOL_VERSION = "1.0"
#: Manifests bigger than this are refused unread (a defence against endless data). 5.7 times
#: triton 3.9.0's (1.4 MB); a payload whose signature names a trusted key is base64-decoded and
#: hashed whole before it is known to be that key's (~10 ms a MB), so this is also what a forged
#: signature can cost a cold import.
MAX_MANIFEST_BYTES = 8 * 1024 * 1024
#: ``.dist-info`` files that installers write or rewrite, so no manifest can vouch for them
#: (PEP 376 RECORD, INSTALLER, REQUESTED; PEP 610 direct_url.json). The manifest itself is
#: the signature, not a subject of it; so is its keyless signature, the Sigstore bundle over its payload.
INSTALLER_FILES = ("RECORD", "INSTALLER", "REQUESTED", "direct_url.json", MANIFEST_FILENAME, SIGSTORE_BUNDLE_FILENAME)
#: What a manifest's artifacts cover: every file of the wheel, or (schema 1.0) native files only.
Coverage = Literal["all", "native"]
COVERAGE_ALL: Coverage = "all"
COVERAGE_NATIVE: Coverage = "native"
#: Longest ``ElfInfo.interpreter`` a manifest may hold: Linux's PATH_MAX (4096 bytes with the
#: NUL), which is also the most the scanner reads; a non-UTF-8 byte may decode to 4 characters.
INTERP_MAX_CHARS = 4 * 4096
#: Above this many exports, a library's export list is summarised (see ExportTable).
EXPORT_LIST_LIMIT = 4096

# Caps: every collection a manifest holds has one, checked by the decoder before any of its
# items is decoded (``schema.MaxItems``); over a cap is ``manifest.limit``, naming it. Each is
# far above real wheels (triton 3.9.0: 2 tags, 598 artifacts, 2 backends, 3 plugins, 691
# imports in its biggest list) and far below what makes the checks that use them slow. The
# table, with the why of each, is docs/reference/manifest.md.
#: Wheel tags (PEP 425 compressed tag sets: a real wheel has one to a few).
MAX_TAGS = 256
#: Files one manifest vouches for (every file of the wheel, for coverage "all").
MAX_ARTIFACTS = 1 << 16
#: Backends (entry points) one wheel declares.
MAX_BACKENDS = 64
#: Plugin libraries one wheel ships.
MAX_PLUGINS = 1024
#: Names in one list: targets, passes, dialects, ops, DT_NEEDED / RPATH / RUNPATH entries,
#: compilers, extension modules, plugin API symbols, version needs and their versions.
MAX_NAMES = 4096
#: Symbols one library imports, or lists as exports (imports are always listed in full).
MAX_SYMBOLS = 1 << 17
#: Repairs ``migrate --rewrite-record`` recorded (one per member at most, and the tags).
MAX_REPAIRS = 1 << 17
#: A manifest no trusted key signed (hash-only, or an unknown signer) is anyone's to write and
#: grants no trust: it is refused above these, before its payload is decoded or parsed. A
#: signed one has MAX_MANIFEST_BYTES, once its signature verified.
MAX_UNSIGNED_MANIFEST_BYTES = 4 << 20
MAX_UNSIGNED_MANIFEST_VALUES = 3 << 15
#: Bytes of import names such a manifest may have looked up in libtriton.so (triton 3.9.0's
#: plugins: 17 KB); each lookup hashes its name in Python.
MAX_UNSIGNED_LOOKUP_BYTES = 64 << 10
# The caps as the decoder reads them from the fields' annotations.
_ARTIFACTS = schema.MaxItems(MAX_ARTIFACTS, "MAX_ARTIFACTS")
_BACKENDS = schema.MaxItems(MAX_BACKENDS, "MAX_BACKENDS")
_NAMES = schema.MaxItems(MAX_NAMES, "MAX_NAMES")
_PLUGINS = schema.MaxItems(MAX_PLUGINS, "MAX_PLUGINS")
_REPAIRS = schema.MaxItems(MAX_REPAIRS, "MAX_REPAIRS")
_SYMBOLS = schema.MaxItems(MAX_SYMBOLS, "MAX_SYMBOLS")
_TAGS = schema.MaxItems(MAX_TAGS, "MAX_TAGS")

#: Plugin API v2: one entry point returning a struct of everything the plugin provides.
PLUGIN_V2_SYMBOL = "tritonGetPluginInfo"
#: Plugin API v1: the older set of enumeration / registration entry points.
PLUGIN_V1_SYMBOLS = (
    "tritonEnumeratePluginPasses",
    "tritonAddPluginPass",
    "tritonRegisterPluginPass",
    "tritonEnumeratePluginDialects",
    "tritonGetDialectPluginInfo",
    "tritonEnumeratePluginCustomOps",
    "tritonAddPluginCustomOp",
)


@record()
class Symbol:
    """A symbol a library defines (an export)."""

    name: str
    type: Annotated[str, "STT_* without the prefix: FUNC, OBJECT, TLS, IFUNC, NOTYPE..."]
    binding: Annotated[str, "GLOBAL, WEAK or UNIQUE (GNU_UNIQUE)"]
    version: Annotated[str | None, "The version it is defined with (.gnu.version_d), if any"]


@record()
class Import:
    """A symbol a library needs from elsewhere (undefined in .dynsym)."""

    name: str
    weak: Annotated[bool, "A weak reference may stay unresolved; a strong one may not"]
    version: Annotated[str | None, "Required symbol version, e.g. GLIBC_2.14"]
    library: Annotated[str | None, "Library the version requirement names, e.g. libc.so.6"]


@record()
class ExportTable:
    """A library's exports: complete up to EXPORT_LIST_LIMIT, else summarised.

    ``digest`` is the sha256 of the sorted raw names joined with ``\\n``, so two libraries
    with the same export set have the same digest whether or not the list is complete.
    """

    count: int
    digest: str
    complete: Annotated[bool, "True when `symbols` lists every export"]
    symbols: Annotated[list[Symbol], _SYMBOLS, "All exports, or only the significant ones when incomplete"]


@record()
class VersionNeed:
    """Versions required from one library (.gnu.version_r)."""

    library: str
    versions: Annotated[list[str], _NAMES]


@record()
class PluginApi:
    """The Triton plugin entry points a library exports."""

    api: Literal["v1", "v2"]
    symbols: Annotated[list[str], _NAMES]


@record()
class ElfInfo:
    """Facts read from a shared library or executable (ELF64, little-endian)."""

    machine: Annotated[str, "x86_64 or aarch64"]
    elf_class: Annotated[str, "ELF64"]
    endianness: Annotated[str, "little"]
    osabi: Annotated[str, "SYSV or GNU"]
    file_type: Annotated[str, "DYN (shared object / PIE) or EXEC"]
    soname: str | None
    needed: Annotated[list[str], _NAMES]
    rpath: Annotated[list[str], _NAMES]
    runpath: Annotated[list[str], _NAMES]
    build_id: str | None
    compiler: Annotated[list[str], _NAMES, "Entries of the .comment section, e.g. 'GCC: (...) 12.2.0'"]
    exports: ExportTable
    imports: Annotated[list[Import], _SYMBOLS]
    version_needs: Annotated[list[VersionNeed], _NAMES]
    glibc: Annotated[str | None, "Highest GLIBC_x.y version required"]
    manylinux: Annotated[str, "The manylinux tag the glibc requirement implies"]
    python_extension: Annotated[list[str], _NAMES, "Module names of PyInit_* exports"]
    plugin: PluginApi | None
    interpreter: Annotated[
        str | None,
        schema.MaxLength(INTERP_MAX_CHARS),
        "PT_INTERP, the program interpreter's path (e.g. /lib64/ld-linux-x86-64.so.2): an executable's, a PIE's "
        "included; null for a library, and absent before schema 1.3",
    ] = None


def file_kind(info: ElfInfo) -> Literal["executable", "library"]:
    """What a file is for a person: ET_EXEC, or ET_DYN with a program interpreter (a PIE), is
    an executable; ET_DYN without one is a library (gABI, "Program Header": PT_INTERP).

    A manifest before schema 1.3 records no interpreter, so its PIEs read as libraries.
    """
    return "library" if info.file_type == "DYN" and info.interpreter is None else "executable"


@record()
class Artifact:
    """One file in the wheel that the manifest vouches for."""

    path: Annotated[str, "Path inside the wheel, '/'-separated"]
    sha256: Annotated[str, "Hex sha256 of the file's bytes"]
    size: int
    elf: ElfInfo | None = None


@record()
class Backend:
    """A Triton backend the wheel provides (one `triton.backends` entry point)."""

    name: Annotated[str, "Entry-point name, e.g. 'nvidia'"]
    package: Annotated[str, "Package holding compiler.py and driver.py"]
    compiler: Annotated[str | None, "module:Class of the BaseBackend subclass, where known"]
    driver: Annotated[str | None, "module:Class of the DriverBase subclass, where known"]
    targets: Annotated[list[str], _NAMES] = field(default_factory=list)


@record()
class PluginPass:
    """A pass a plugin registers (Triton's ``PassInfo``: name and version)."""

    name: str
    version: str


@record()
class PluginDialect:
    """A dialect a plugin registers (Triton's ``DialectInfo``: name and version)."""

    name: str
    version: str


#: Why a plugin's own declaration could not be captured (``PluginInfo.reason_code``):
#: ``not-run``, its code was not run (the default for wheels the packager did not build);
#: ``no-sandbox``, no sandbox could be made to run it in.
CaptureFailure = Literal["no-libtriton", "foreign-arch", "load-failed", "call-failed", "timeout", "api-version",
                         "not-run", "no-sandbox"]
#: Where a plugin's code ran when it reported its ``PluginInfo`` (``PluginInfo.ran_in``).
CaptureIsolation = Literal["sandbox", "unsandboxed"]


@record()
class PluginInfo:
    """What the plugin's ``tritonGetPluginInfo()`` returned, called at signing time in a
    child process (the ``PluginInfo`` struct of Triton's ``PluginUtils.h``, plugin API
    version 2). ``captured`` is false when it was not or could not be called; the reason says
    why and nothing else is filled in: a field is never guessed.

    Every field but ``captured``, ``reason_code``, ``reason``, ``ran_in`` and ``libtriton`` is
    what the plugin's own code REPORTED about itself: the signer checked nothing of it, and
    a hostile plugin reports what it likes. ``ran_in`` says where that code ran."""

    captured: bool
    reason_code: CaptureFailure | None = None
    reason: str | None = None
    api_version: Annotated[int | None, "PluginInfo.apiVersion (TRITON_PLUGIN_API_VERSION)"] = None
    name: Annotated[str | None, "PluginInfo.pluginName"] = None
    version: Annotated[str | None, "PluginInfo.pluginVersion"] = None
    triton_version: Annotated[str | None, "PluginInfo.tritonVersion: the Triton it was built against"] = None
    passes: Annotated[list[PluginPass], _NAMES] = field(default_factory=list)
    dialects: Annotated[list[PluginDialect], _NAMES] = field(default_factory=list)
    ops: Annotated[list[str], _NAMES] = field(default_factory=list)
    libtriton: Annotated[str | None, "The libtriton.so it resolved against: a wheel path, or the build's"] = None
    ran_in: Annotated[
        CaptureIsolation | None,
        "Where the plugin's code ran when it reported the fields above: 'sandbox' (namespaces, a confined "
        "filesystem), 'unsandboxed' (as the signer, on request); null when it did not run, and absent before 1.4",
    ] = None


#: When a plugin's dialects, ops and passes are registered with Triton.
Phase = Literal["import", "explicit"]
#: What compiling does when the plugin is not loaded.
OnFailure = Literal["fail", "fallback"]


@record()
class PassPlacement:
    """Where one of the plugin's passes goes: after or before a named pass or stage."""

    name: Annotated[str, "A pass the plugin registers (checked against the captured info)"]
    after: Annotated[str | None, "A standard pass or stage (ttir, ttgir, llir, ...) it runs after"] = None
    before: Annotated[str | None, "A standard pass or stage it runs before"] = None

    def text(self) -> str:
        return f"{self.name} after {self.after}" if self.after else f"{self.name} before {self.before}"


@record()
class PluginContract:
    """What the vendor declared in ``[tool.backend-packager]`` for this plugin."""

    triton: Annotated[str, "PEP 440 range of Triton releases the plugin supports ('' for any)"] = ""
    phase: Annotated[Phase, "'import': registered when libtriton is imported; 'explicit': by the vendor's code"] = (
        "import")
    passes: Annotated[list[PassPlacement], _NAMES] = field(default_factory=list)
    on_failure: Annotated[OnFailure, "'fail': compiling raises when the plugin is not loaded; "
                                     "'fallback': a warning, and the standard pipeline"] = "fallback"


@record()
class Plugin:
    """A Triton plugin library (passes, dialects, ops) the wheel ships."""

    path: str
    api: Literal["v1", "v2"]
    name: str | None = None
    info: Annotated[PluginInfo | None, "Captured from the library at build time (schema 1.2)"] = None
    contract: Annotated[PluginContract | None, "Declared by the vendor (schema 1.2)"] = None


@record()
class Requirements:
    """What the wheel needs at load time."""

    triton: Annotated[str, "PEP 440 specifier the installed Triton must satisfy ('' for any)"]
    python: str | None = None


@record()
class Build:
    """How the wheel was produced."""

    tool: str
    tool_version: str
    compiler: Annotated[list[str], _NAMES] = field(default_factory=list)
    source_date_epoch: int | None = None


@record()
class Repair:
    """One disagreement between a legacy wheel's RECORD (or file name) and its contents."""

    code: Annotated[str, "record.mismatch, record.unlisted, record.absent or wheel.tags"]
    path: Annotated[str, "The member concerned (the wheel's file name for wheel.tags)"]
    detail: str


@record()
class UpstreamIdentity:
    """Who signed the wheel upstream, as ``mirror`` checked before re-signing it: a PEP 740
    attestation's Fulcio certificate, its OIDC issuer and SAN."""

    issuer: Annotated[str, "The OIDC issuer the certificate records"]
    identity: Annotated[str, "The certificate's subject alternative name (a workflow URI or e-mail)"]
    kind: Annotated[Literal["pep740"], "How it was attested: 'pep740', a PEP 740 attestation"] = "pep740"


@record()
class Provenance:
    """Whether the manifest was written at build time or added to a legacy wheel."""

    kind: Literal["build", "migrate"]
    source: Annotated[str | None, "For 'migrate': the legacy wheel's file name"]
    source_sha256: str | None = None
    repairs: Annotated[
        list[Repair],
        _REPAIRS,
        "Where the legacy wheel's RECORD or file-name tags disagreed with its contents, each repaired "
        "from the contents (`migrate --rewrite-record`); empty when the input agreed with itself",
    ] = field(default_factory=list)
    upstream: Annotated[
        list[UpstreamIdentity],
        _NAMES,
        "The upstream identities whose PEP 740 attestations of the input wheel `mirror` verified before "
        "re-signing it (schema 1.5); empty when none was checked",
    ] = field(default_factory=list)


@record()
class Manifest:
    """The signed description of one backend wheel."""

    schema_version: str
    name: str
    version: str
    tags: Annotated[list[str], _TAGS, "Wheel tags, e.g. cp311-cp311-manylinux_2_27_x86_64"]
    protocol_version: Annotated[str, "Backend protocol version, 'MAJOR.MINOR'"]
    requirements: Requirements
    backends: Annotated[list[Backend], _BACKENDS]
    plugins: Annotated[list[Plugin], _PLUGINS]
    artifacts: Annotated[list[Artifact], _ARTIFACTS]
    build: Build
    provenance: Provenance
    coverage: Annotated[
        Coverage,
        "'all': every file of the wheel is an artifact but the .dist-info files installers write "
        "(RECORD, INSTALLER, REQUESTED, direct_url.json) and this manifest; 'native' (the default, "
        "what schema 1.0 manifests meant): native files only",
    ] = "native"
    triton_package: Annotated[
        str,
        "The import package of the Triton the backends plug into: 'triton' (the default, what a manifest "
        "without the field means), or a vendor release's rename; Triton reads its backends from the "
        "entry-point group '<triton_package>.backends'",
    ] = "triton"
    sbom: Annotated[
        str | None,
        "The CycloneDX SBOM the packager generated with this manifest (PEP 770), relative to the .dist-info "
        "directory: 'sboms/triton-backend.cdx.json', itself an artifact; null when none was, and absent "
        "before schema 1.6",
    ] = None


def is_installer_file(path: str) -> bool:
    """Whether a wheel path is a ``.dist-info`` file no manifest can cover (see INSTALLER_FILES)."""
    top, _, name = path.partition("/")
    return top.endswith(".dist-info") and name in INSTALLER_FILES


def to_json(manifest: Manifest) -> bytes:
    """Deterministic serialisation: sorted keys, fixed separators, UTF-8, final newline."""
    text = json.dumps(schema.encode(manifest), sort_keys=True, indent=1, ensure_ascii=False)
    return text.encode("utf-8") + b"\n"


def from_json(data: bytes, where: str = "manifest") -> Manifest:
    """Parse and check a manifest; the size cap is applied before anything is parsed."""
    value = jsonlimits.loads(data, where, ManifestError, limit=MAX_MANIFEST_BYTES)
    return from_value(value, where)


def from_value(value: object, where: str = "manifest") -> Manifest:
    """Check and build a manifest from an already-decoded JSON value."""
    if not isinstance(value, dict):
        raise ManifestError("schema", where, "a manifest must be a JSON object")
    check_version(value.get("schema_version"), where)
    try:
        return schema.decode(Manifest, value)
    except ManifestError as exc:  # the location inside the manifest joins the detail; the code stays
        raise ManifestError(exc.code.partition(".")[2], where, f"{exc.path}: {exc.detail}") from None


def check_version(found: object, where: str) -> None:
    """Accept any MINOR of SCHEMA_MAJOR; refuse the rest, saying what was found."""
    supported = f"this reader supports {SCHEMA_MAJOR}.x"
    if not isinstance(found, str) or not _MAJOR_MINOR.fullmatch(found):
        shown = repr(found)[:50]
        raise ManifestError("version", where, f"schema_version {shown} is not 'MAJOR.MINOR'; {supported}")
    if int(found.split(".")[0]) != SCHEMA_MAJOR:
        raise ManifestError("version", where, f"manifest schema {found} found; {supported}")


def json_schema() -> dict[str, Any]:
    """The JSON Schema of :class:`Manifest`, generated from the dataclasses above."""
    return schema.json_schema(Manifest, schema_id=SCHEMA_URI, title=f"Triton backend manifest {SCHEMA_VERSION}")
