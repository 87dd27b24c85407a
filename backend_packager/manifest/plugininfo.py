"""What a Triton plugin says about itself: whether, where and with which files its
``tritonGetPluginInfo()`` is asked (the call: :mod:`.plugincall`; the answer: :mod:`.pluginanswer`).

The call runs plugin code (its constructors, the entry point), so it never runs in the
packager, and by default not at all: ``migrate``, ``mirror`` and ``adopt`` record every plugin
``captured: false`` (``not-run``) unless asked (:data:`Policy`). When asked, it runs in the
:mod:`.sandbox`; where no sandbox can be made, it is refused (``no-sandbox``) unless the unsafe
policy runs it as a plain child of the signer.

The plugin's ``NEEDED libtriton.so`` is resolved from the same wheel
(``triton/_C/libtriton.so``, as Triton's own ``triton/plugins/*.so`` need), else from the
Triton installed where the packager runs; other ``NEEDED`` libraries the wheel ships are
extracted beside it. Every extracted file is checked against the sha256 the wheel's pass
computed, so what answers is what gets signed. ``adopt`` has no wheel: :func:`capture_from`
takes the installed files instead (the same sandbox; how they are held to what was hashed
is the caller's :class:`Files`: descriptors the sandbox bind-mounts read-only), and the
``libtriton.so`` installed beside the distribution when it ships none. Private temporary
directories carry the packager's pid; one left by a killed packager is removed by the next capture.
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib.util
import os
import platform
import shutil
import tempfile
import zipfile
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, Protocol

from triton_backend_runtime.manifest import model as m

from ..base import WheelError, fsutil
from ..scanning import sandbox
from ..wheel import open_zip
from . import plugincall
from .pluginanswer import SANDBOX, UNSANDBOXED, Limits, failed

__all__ = [
    "BUILD_ENVIRONMENT", "Files", "LIBTRITON_MEMBER", "POLICIES", "Policy", "WheelMembers", "capture_all",
    "capture_from", "environment_libtriton", "host_machine", "libtriton_member", "migrated_plugins", "not_run",
    "plain_name", "warnings"
]

LIBTRITON_MEMBER = "triton/_C/libtriton.so"


def libtriton_member(paths: Iterable[str]) -> str | None:
    """The Triton core's library among a wheel's members: ``<package>/_C/libtriton.so`` of
    whatever package the Triton is imported as (``triton``, ``tokenspeed_triton``...); the
    default package's first."""
    found = sorted(p for p in paths if p.count("/") == 2 and p.endswith("/_C/libtriton.so"))
    return LIBTRITON_MEMBER if LIBTRITON_MEMBER in found else (found[0] if found else None)
BUILD_ENVIRONMENT = "build environment"
_TMP_PREFIX = "backend-packager-plugin-"
_HOST_MACHINES = {"x86_64": "x86_64", "amd64": "x86_64", "aarch64": "aarch64", "arm64": "aarch64"}
_CHUNK = 1 << 20

#: Whether and where a plugin's code runs to ask it: ``off`` never (``not-run``, the default
#: for input the packager did not build); ``sandbox`` only in a :mod:`.sandbox` (else
#: ``no-sandbox``); ``sandbox-or-unsafe`` in a sandbox where one can be made, else as the
#: signer, with a warning (``--capture-plugins-unsafe-no-sandbox``, the build hook's "auto");
#: ``unsafe`` never in a sandbox (benchmarks and tests only: no option reaches it).
Policy = Literal["off", "sandbox", "sandbox-or-unsafe", "unsafe"]
POLICIES: tuple[Policy, ...] = ("off", "sandbox", "sandbox-or-unsafe", "unsafe")


class Files(Protocol):
    """A distribution's files for the call, exactly as hashed: a wheel's members, or
    (``adopt``) the installed files."""

    def place(self, artifact: m.Artifact, into: Path, name: str) -> Path:
        """``into/name`` holding the bytes ``artifact`` describes; a TrustError when it cannot."""
        ...

    def held(self) -> tuple[tuple[int, Path, Path], ...]:
        """What was placed as an empty placeholder: the descriptor held on the file as
        checked, the placeholder, and the file's path. The sandbox bind-mounts the file
        read-only onto its placeholder (its own code, before the plugin's runs) and checks
        that it mounted the held inode; the plugin gets no descriptor."""
        ...

    def confirm(self) -> None:
        """After the calls: a TrustError if what was placed may have changed meanwhile."""
        ...


@dataclass(frozen=True)
class WheelMembers:
    """A wheel's members, each extracted from the archive and checked against its sha256."""

    wheel: Path

    def place(self, artifact: m.Artifact, into: Path, name: str) -> Path:
        return _extract(artifact, self.wheel, into, name)

    def held(self) -> tuple[tuple[int, Path, Path], ...]:
        return ()

    def confirm(self) -> None:
        return None  # private copies: nothing else writes them


@dataclass
class _Source:
    """Where the libraries a plugin needs come from for this distribution."""

    files: Files
    members: dict[str, m.Artifact]
    libtriton: str | None  # a member, or the environment's label
    env_libtriton: Path | None
    env_label: str = BUILD_ENVIRONMENT
    extracted: dict[str, Path] = field(default_factory=dict)
    #: "sandbox", "unsandboxed" (unsafe, on request), or why no sandbox can be made here.
    isolation: str = "sandbox"


def capture_all(wheel: Path, artifacts: list[m.Artifact], plugins: list[m.Plugin],
                limits: Limits | None = None, *, policy: Policy = "sandbox") -> list[m.Plugin]:
    """Each plugin with ``info`` filled in: captured, or ``captured: false`` and why."""
    return capture_from(WheelMembers(wheel), artifacts, plugins, limits, policy=policy)


def capture_from(files: Files, artifacts: list[m.Artifact], plugins: list[m.Plugin], limits: Limits | None = None,
                 *, libtriton: Path | None = None, label: str = BUILD_ENVIRONMENT,
                 policy: Policy = "sandbox") -> list[m.Plugin]:
    """:func:`capture_all` for any :class:`Files`: every file of the distribution that the
    call uses is placed by ``files``, as hashed. A ``libtriton.so`` that is not among the
    artifacts is ``libtriton`` (``adopt``: the one installed beside), else the one of the
    Triton importable here; the manifest names its release after ``label``. ``policy``
    says whether and where the plugins' code runs (:data:`Policy`)."""
    if not plugins or policy == "off":
        return not_run(plugins)
    limits = limits or Limits()
    members = {a.path: a for a in artifacts}
    env = libtriton or environment_libtriton()
    source = _Source(files, members, libtriton_member(members) or (label if env else None), env, label,
                     isolation=_isolation(policy))
    # what a killed packager left (its pid gone): extracted libtriton copies are big
    fsutil.remove_orphan_dirs(Path(tempfile.gettempdir()), _TMP_PREFIX)
    with _private_dir() as tmp:
        captured = [_with_info(p, _capture(members[p.path], source, tmp / f"plugin-{i}", limits))
                    for i, p in enumerate(plugins)]
    files.confirm()
    return captured


def not_run(plugins: list[m.Plugin]) -> list[m.Plugin]:
    """The plugins recorded ``captured: false`` (``not-run``): what they would say is not
    asked, so none of their code runs; the ELF facts of the artifacts still say what they export."""
    info = m.PluginInfo(captured=False, reason_code="not-run", reason="not asked: capturing runs the plugin's "
                        "code, which this run was not told to do (--capture-plugins runs it in a sandbox)")
    return [_with_info(p, dataclasses.replace(info)) for p in plugins]


def _isolation(policy: Policy) -> str:
    """Where the plugins' code runs under ``policy``: see :data:`Policy`."""
    if policy == "unsafe":
        return UNSANDBOXED
    why = sandbox.available()
    if why is None:
        return SANDBOX
    return UNSANDBOXED if policy == "sandbox-or-unsafe" else why


def warnings(plugins: list[m.Plugin], where: str) -> list[str]:
    """A warning for each plugin whose code ran outside a sandbox (on request)."""
    return [f"{where}!{p.path}: the plugin's code ran WITHOUT a sandbox, as the signer (none can be made here; "
            "the unsafe choice allowed it): it could read the signing key and everything the signer can"
            for p in plugins if p.info is not None and p.info.ran_in == UNSANDBOXED]


def _with_info(plugin: m.Plugin, info: m.PluginInfo) -> m.Plugin:
    return m.Plugin(path=plugin.path, api=plugin.api, name=info.name or plugin.name, info=info,
                    contract=plugin.contract)


def environment_libtriton() -> Path | None:
    """The ``libtriton.so`` of the Triton importable here, found without importing it."""
    try:
        spec = importlib.util.find_spec("triton")
    except (ImportError, ValueError):
        return None
    for location in (spec.submodule_search_locations or []) if spec else []:
        candidate = Path(location) / "_C" / "libtriton.so"
        if candidate.is_file():
            return candidate
    return None


def host_machine() -> str:
    return _HOST_MACHINES.get(platform.machine().lower(), platform.machine())


def _capture(artifact: m.Artifact, source: _Source, tmp: Path, limits: Limits) -> m.PluginInfo:
    elf = artifact.elf
    assert elf is not None and elf.plugin is not None  # only scanned plugins get here
    if elf.plugin.api != "v2":
        return failed("api-version", f"plugin API {elf.plugin.api} exports no tritonGetPluginInfo; the signatures "
                       "of its entry points are not in Triton's public header, so nothing is called")
    if elf.machine != host_machine():
        return failed("foreign-arch", f"a {elf.machine} library cannot be called on this {host_machine()} host")
    if source.isolation not in (SANDBOX, UNSANDBOXED):
        return failed("no-sandbox", f"not asked: its code would run as the signer, and no sandbox can be made "
                       f"here ({source.isolation}); --capture-plugins-unsafe-no-sandbox runs it anyway")
    try:
        libdirs = _libraries(elf.needed, source, tmp.parent / "lib")
        plugin = source.files.place(artifact, tmp, artifact.path.rsplit("/", 1)[-1])
    except _NoLibtriton as exc:
        return failed("no-libtriton", str(exc))
    if source.isolation == SANDBOX:
        info = plugincall.call_sandboxed(plugin, libdirs, tmp, limits, source.files.held())
    else:
        info = plugincall.call_unsandboxed(plugin, libdirs, tmp, limits, plugincall.as_links(source.files.held()))
    info.ran_in = "sandbox" if source.isolation == SANDBOX else "unsandboxed"
    if info.reason:  # the same wheel gives the same manifest: no temporary path in it
        info.reason = info.reason.replace(str(plugin), artifact.path).replace(str(tmp.parent), "<temporary>")
    if info.captured and any(n.startswith("libtriton.so") for n in elf.needed):
        info.libtriton = source.libtriton if source.libtriton != source.env_label else (
            f"{source.env_label}: triton {_environment_version(source.env_libtriton)}")
    return info


def _environment_version(libtriton: Path | None) -> str:
    """The build environment's ``triton.__version__``, read from its ``__init__.py`` (a
    signed manifest names the release, not a path on the packager's machine)."""
    import re

    init = libtriton.parent.parent / "__init__.py" if libtriton else None
    try:
        with open(init or "", "rb") as stream:
            head = stream.read(1 << 16).decode("utf-8", "replace")
    except OSError:
        return "(version unknown)"
    found = re.search(r"^__version__\s*=\s*['\"]([0-9A-Za-z.+!_-]{1,64})['\"]", head, re.MULTILINE)
    return found.group(1) if found else "(version unknown)"


class _NoLibtriton(Exception):
    pass


def _libraries(needed: list[str], source: _Source, libdir: Path) -> list[Path]:
    """The directories for ``LD_LIBRARY_PATH``: needed libraries extracted from the wheel
    (once per wheel), then the build environment's libtriton directory when the wheel has none."""
    dirs = [libdir]
    for name in needed:
        if not plain_name(name):  # a path in DT_NEEDED: never a file name to write under libdir
            continue
        member = _member_for(name, source)
        if member is None:
            continue
        if member == source.env_label and name.startswith("libtriton.so"):  # a label, not a member
            assert source.env_libtriton is not None
            dirs.append(source.env_libtriton.parent)
            continue
        if member not in source.extracted:
            source.extracted[member] = source.files.place(source.members[member], libdir, name)
    return dirs


def plain_name(name: str) -> bool:
    """A file name of one component (what a library is placed under in the private directory)."""
    return name not in ("", ".", "..") and "/" not in name and "\0" not in name


def _member_for(name: str, source: _Source) -> str | None:
    if name.startswith("libtriton.so"):
        if source.libtriton is None:
            raise _NoLibtriton(f"needs {name}: the wheel has no {LIBTRITON_MEMBER} and no Triton is installed "
                               "where the packager runs")
        return source.libtriton
    # Another library the wheel ships (by file name or soname); else the system's.
    for path, artifact in sorted(source.members.items()):
        if artifact.elf is not None and (path.rsplit("/", 1)[-1] == name or artifact.elf.soname == name):
            return path
    return None


def _extract(artifact: m.Artifact, wheel: Path, into: Path, name: str) -> Path:
    """Stream one member out of the wheel, never past its size, and check its sha256."""
    if not plain_name(name):
        raise WheelError("member", f"{wheel}!{artifact.path}", f"{name[:80]!r} is not a plain file name")
    into.mkdir(mode=0o700, exist_ok=True)
    target = into / name
    digest = hashlib.sha256()
    seen = 0
    try:
        with (
            open_zip(wheel, str(wheel)) as archive,  # as migrate reads it: one descriptor, no symlink
            archive.open(artifact.path) as stream,
            target.open("xb") as out,
        ):
            while chunk := stream.read(min(_CHUNK, artifact.size - seen + 1)):
                seen += len(chunk)
                if seen > artifact.size:
                    break
                digest.update(chunk)
                out.write(chunk)
    except (OSError, KeyError, zipfile.BadZipFile, EOFError) as exc:
        raise WheelError("member", f"{wheel}!{artifact.path}", f"cannot extract for the plugin call: {exc}") from None
    if seen != artifact.size or digest.hexdigest() != artifact.sha256:
        raise WheelError("member", f"{wheel}!{artifact.path}", "changed since it was hashed; not calling it")
    return target


@contextmanager
def _private_dir() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix=f"{_TMP_PREFIX}{os.getpid()}-"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def migrated_plugins(artifacts: list[m.Artifact], previous: list[m.Plugin], wheel: Path | None,
                     policy: Policy = "off") -> list[m.Plugin]:
    """A migrated wheel's plugins: contracts a previous manifest declared are kept (re-signing
    keeps declarations), what the libraries say is captured anew from ``wheel`` under
    ``policy`` (by default not: ``not-run``); without a wheel (``adopt``) it is left to the caller."""
    from .contents import find_plugins

    declared = {p.path: p.contract for p in previous}
    plugins = [m.Plugin(path=p.path, api=p.api, contract=declared.get(p.path)) for p in find_plugins(artifacts)]
    return capture_all(wheel, artifacts, plugins, policy=policy) if wheel is not None else plugins
