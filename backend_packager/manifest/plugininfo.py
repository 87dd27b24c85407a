"""What a Triton plugin says about itself: ``tritonGetPluginInfo()``, called in a child.

Triton's plugin loader (``triton/include/triton/Tools/PluginUtils.h``, shipped in the
triton 3.9.0 wheel) calls the library's ``tritonGetPluginInfo`` and reads the returned
``PluginInfo`` struct, plugin API version 2 (``TRITON_PLUGIN_API_VERSION``)::

    struct PassInfo    { const char *name; const char *version; AddPassCallback addPass;
                         RegisterPassCallback registerPass; };
    struct DialectInfo { const char *name; const char *version; RegisterDialectCallback registerDialect; };
    struct OpInfo      { const char *name; AddOpCallback addOp; };
    struct PluginInfo  { uint32_t apiVersion; const char *pluginName; const char *pluginVersion;
                         PassInfo *passes; size_t numPasses; DialectInfo *dialects; size_t numDialects;
                         OpInfo *ops; size_t numOps; const char *tritonVersion; };

``apiVersion`` comes first so that a loader can refuse another layout before reading on;
that is the one field read from a library of another API version, and nothing else is
guessed: such a library is recorded ``captured: false`` (``api-version``), as are v1
libraries, whose entry points' signatures Triton's public header does not give.

The call runs plugin code (its constructors, the entry point), so it never runs in the
packager, and by default not at all: ``migrate``, ``mirror`` and ``adopt`` record every plugin
``captured: false`` (``not-run``) unless asked (:data:`Policy`). When asked, it runs in the
:mod:`.sandbox` (namespaces of its own, a filesystem holding only the interpreter, the
system libraries and the plugin's private directory, no environment but
``LD_LIBRARY_PATH``, no descriptors, limits on address space, core and file size, a
timeout); where no sandbox can be made, it is refused (``no-sandbox``) unless the unsafe
policy runs it as a plain child of the signer. The child writes its answer to a file (not
stdout, which the plugin may print to). The answer is hostile input: read within a size bound
(never through a symlink, never from a FIFO) and decoded field by field, and recorded as
what the plugin reported (``PluginInfo.ran_in``), never as a fact the signer checked.

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
import stat
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol

from triton_backend_runtime.base import ManifestError, jsonlimits
from triton_backend_runtime.base import describe as describe_error
from triton_backend_runtime.manifest import model as m

from ..base import ConfigError, WheelError, fsutil
from ..scanning import sandbox
from ..wheel import open_zip

#: The only ``PluginInfo`` layout this module knows (PluginUtils.h of Triton 3.9).
API_VERSION = 2
LIBTRITON_MEMBER = "triton/_C/libtriton.so"
BUILD_ENVIRONMENT = "build environment"
_TMP_PREFIX = "backend-packager-plugin-"
_HOST_MACHINES = {"x86_64": "x86_64", "amd64": "x86_64", "aarch64": "aarch64", "arm64": "aarch64"}
_CHUNK = 1 << 20
SANDBOX, UNSANDBOXED = "sandbox", "unsandboxed"

#: Whether and where a plugin's code runs to ask it: ``off`` never (``not-run``, the default
#: for input the packager did not build); ``sandbox`` only in a :mod:`.sandbox` (else
#: ``no-sandbox``); ``sandbox-or-unsafe`` in a sandbox where one can be made, else as the
#: signer, with a warning (``--capture-plugins-unsafe-no-sandbox``, the build hook's "auto");
#: ``unsafe`` never in a sandbox (benchmarks and tests only: no option reaches it).
Policy = Literal["off", "sandbox", "sandbox-or-unsafe", "unsafe"]
POLICIES: tuple[Policy, ...] = ("off", "sandbox", "sandbox-or-unsafe", "unsafe")


@dataclass(frozen=True)
class Limits:
    """Bounds on one call: libtriton.so alone maps ~500 MB, and its constructors run."""

    timeout: float = 120.0
    memory: int = 6 << 30
    answer_bytes: int = 4 << 20
    #: More passes, dialects or ops than this is not a plugin but an attack on the reader.
    items: int = 4096
    text: int = 1024


# The call, run in the sandbox (:mod:`.sandbox`, which sets the limits) or, unsafe, in a plain
# child after PRELUDE. Kept free of anything but ctypes/json so that nothing of the packager is
# imported there. argv: plugin, answer, items, text.
PRELUDE = r"""
import ctypes, os, resource, signal, sys
memory, parent = int(sys.argv.pop()), int(sys.argv.pop())
try:
    ctypes.CDLL(None).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG: die with the packager
except (OSError, AttributeError):
    pass
if os.getppid() != parent:
    sys.exit(3)
resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
resource.setrlimit(resource.RLIMIT_FSIZE, (4 << 20, 4 << 20))
resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
"""
CHILD = r"""
import ctypes, json, os, sys
plugin, answer, items, text = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
P = ctypes.c_void_p
def say(doc):
    with open(answer, "w") as out:
        json.dump(doc, out)
def string(addr):
    if not addr:
        return None
    raw = ctypes.string_at(addr)
    if len(raw) > text:
        raise ValueError(f"a string of {len(raw)} bytes")
    return raw.decode("utf-8")
def table(base, count, width, fields):
    if count > items:
        raise ValueError(f"{count} entries")
    if count and not base:
        raise ValueError(f"{count} entries at NULL")
    rows = []
    for i in range(count):
        at = base + i * width * 8
        rows.append([string(P.from_address(at + 8 * k).value) for k in range(fields)])
    return rows
try:
    lib = ctypes.CDLL(plugin, mode=os.RTLD_NOW | os.RTLD_LOCAL)
except OSError as exc:
    say({"stage": "load", "error": str(exc)}); sys.exit(0)
try:
    entry = lib.tritonGetPluginInfo
except AttributeError:
    say({"stage": "call", "error": "no tritonGetPluginInfo"}); sys.exit(0)
entry.restype, entry.argtypes = P, []
base = entry()
if not base:
    say({"stage": "call", "error": "tritonGetPluginInfo() returned NULL"}); sys.exit(0)
api = ctypes.c_uint32.from_address(base).value
if api != 2:
    say({"stage": "api", "api_version": api}); sys.exit(0)
word = lambda i: P.from_address(base + 8 * i).value or 0
size = lambda i: ctypes.c_size_t.from_address(base + 8 * i).value
try:
    doc = {"stage": "done", "api_version": api, "name": string(word(1)), "version": string(word(2)),
           "passes": table(word(3), size(4), 4, 2), "dialects": table(word(5), size(6), 3, 2),
           "ops": table(word(7), size(8), 2, 1), "triton_version": string(word(9))}
except (ValueError, UnicodeDecodeError) as exc:
    say({"stage": "call", "error": f"malformed PluginInfo: {exc}"}); sys.exit(0)
say(doc)
"""


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
    source = _Source(files, members, LIBTRITON_MEMBER if LIBTRITON_MEMBER in members else
                     (label if env else None), env, label, isolation=_isolation(policy))
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
        return _failed("api-version", f"plugin API {elf.plugin.api} exports no tritonGetPluginInfo; the signatures "
                       "of its entry points are not in Triton's public header, so nothing is called")
    if elf.machine != host_machine():
        return _failed("foreign-arch", f"a {elf.machine} library cannot be called on this {host_machine()} host")
    if source.isolation not in (SANDBOX, UNSANDBOXED):
        return _failed("no-sandbox", f"not asked: its code would run as the signer, and no sandbox can be made "
                       f"here ({source.isolation}); --capture-plugins-unsafe-no-sandbox runs it anyway")
    try:
        libdirs = _libraries(elf.needed, source, tmp.parent / "lib")
        plugin = source.files.place(artifact, tmp, artifact.path.rsplit("/", 1)[-1])
    except _NoLibtriton as exc:
        return _failed("no-libtriton", str(exc))
    if source.isolation == SANDBOX:
        info = _call_sandboxed(plugin, libdirs, tmp, limits, source.files.held())
    else:
        info = _call(plugin, libdirs, tmp, limits, _as_links(source.files.held()))
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


def _call_sandboxed(plugin: Path, libdirs: list[Path], tmp: Path, limits: Limits,
                    held: tuple[tuple[int, Path, Path], ...]) -> m.PluginInfo:
    """The call in the :mod:`.sandbox`: it sees the plugin's directory and the library
    directories (read-only), and writes its answer into a directory of its own."""
    work = tmp.parent / f"{tmp.name}.sandbox"  # beside the plugin's directory, never in it
    out = work / "out"
    out.mkdir(mode=0o700, parents=True)
    answer = out / "answer.json"
    plan = sandbox.Plan(read_only=tuple(d for d in (tmp, *libdirs) if d.is_dir()), writable=(out,),
                        held=tuple(sandbox.Held.of(fd, source, target) for fd, target, source in held),
                        env={"LD_LIBRARY_PATH": os.pathsep.join(map(str, libdirs)), "LC_ALL": "C"})
    argv = [str(plugin), str(answer), str(limits.items), str(limits.text)]
    ran = sandbox.run(CHILD, argv, plan, work / "root", work / "stderr",
                      sandbox.Limits(timeout=limits.timeout, memory=limits.memory))
    if ran.status == "no-sandbox":
        return _failed("no-sandbox", f"the sandbox could not be made: {ran.detail}")
    if ran.status == "timeout":
        return _failed("timeout", f"tritonGetPluginInfo did not return within {limits.timeout:g} s")
    if ran.code != 0:
        why = f"signal {sandbox.signal_name(ran.code)}" if ran.status == "signalled" else f"exit status {ran.code}"
        return _failed("call-failed", f"the child calling tritonGetPluginInfo died ({why}): {_tail(work / 'stderr')}")
    return _decode(answer, limits)


def _as_links(held: tuple[tuple[int, Path, Path], ...]) -> tuple[int, ...]:
    """Unsandboxed (unsafe) only: each placeholder becomes a link to its descriptor, which
    the child inherits."""
    for fd, placeholder, _ in held:
        if not placeholder.is_symlink():
            placeholder.unlink()
            placeholder.symlink_to(f"/proc/self/fd/{fd}")
    return tuple(fd for fd, _, _ in held)


def _call(plugin: Path, libdirs: list[Path], tmp: Path, limits: Limits, fds: tuple[int, ...] = ()) -> m.PluginInfo:
    """The call in a plain child of the same user: unsafe, for ``unsandboxed`` only."""
    answer = tmp / f"answer-{plugin.name}.json"
    answer.unlink(missing_ok=True)
    argv = [sys.executable, "-I", "-S", "-c", PRELUDE + CHILD, str(plugin), str(answer), str(limits.items),
            str(limits.text), str(os.getpid()), str(limits.memory)]
    env = {"LD_LIBRARY_PATH": os.pathsep.join(map(str, libdirs)), "LC_ALL": "C"}
    with open(tmp / "stderr", "wb") as err:
        child = subprocess.Popen(argv, env=env, cwd=tmp, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                 stderr=err, start_new_session=True, pass_fds=fds)
        try:
            code = child.wait(limits.timeout)
        except subprocess.TimeoutExpired:
            sandbox.kill_group(child)
            return _failed("timeout", f"tritonGetPluginInfo did not return within {limits.timeout:g} s")
        finally:
            sandbox.kill_group(child)  # whatever the plugin started in its session goes too
    if code != 0:
        why = f"signal {sandbox.signal_name(-code)}" if code < 0 else f"exit status {code}"
        return _failed("call-failed", f"the child calling tritonGetPluginInfo died ({why}): {_tail(tmp / 'stderr')}")
    return _decode(answer, limits)


def _tail(path: Path) -> str:
    with path.open("rb") as stream:
        stream.seek(max(0, path.stat().st_size - 300))
        lines = stream.read().decode("utf-8", "replace").strip().splitlines()
    return lines[-1] if lines else "no message"


def _decode(answer: Path, limits: Limits) -> m.PluginInfo:
    try:
        data = _read_answer(answer, limits.answer_bytes + 1)
        doc = jsonlimits.loads(data, str(answer), ManifestError, limit=limits.answer_bytes)
        return _info(doc, limits)
    except Exception as exc:  # the child ran the plugin's code: its answer is hostile, any shape
        return _failed("call-failed", f"no usable answer from the child: {describe_error(exc, 300)}")


def _read_answer(answer: Path, limit: int) -> bytes:
    """The answer file, which the plugin could have replaced: a regular file, never followed
    through a symlink (to the key), never a FIFO that blocks."""
    fd = os.open(answer, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    with os.fdopen(fd, "rb") as stream:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise ValueError("the answer is not a regular file")
        return stream.read(limit)


def _info(doc: Any, limits: Limits) -> m.PluginInfo:
    stage = doc["stage"]
    if stage == "load":
        return _failed("load-failed", f"dlopen failed: {_text(doc['error'], 400)}")
    if stage == "api":
        info = _failed("api-version", f"PluginInfo.apiVersion is {int(doc['api_version'])}; only the layout of "
                       f"version {API_VERSION} is known (Triton 3.9's PluginUtils.h)")
        info.api_version = int(doc["api_version"])
        return info
    if stage != "done":
        return _failed("call-failed", _text(doc["error"], 400))
    def text(value: Any) -> str:
        return _name(value, limits) or ""

    return m.PluginInfo(
        captured=True, api_version=int(doc["api_version"]), name=_name(doc["name"], limits),
        version=_name(doc["version"], limits), triton_version=_name(doc["triton_version"], limits),
        passes=[m.PluginPass(text(n), text(v)) for n, v in _rows(doc["passes"], 2)],
        dialects=[m.PluginDialect(text(n), text(v)) for n, v in _rows(doc["dialects"], 2)],
        ops=[text(n) for (n,) in _rows(doc["ops"], 1)],
    )


def _rows(value: Any, width: int) -> list[list[Any]]:
    if not isinstance(value, list) or not all(isinstance(r, list) and len(r) == width for r in value):
        raise ValueError("a table of the wrong shape")
    return value


def _name(value: Any, limits: Limits) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or len(value) > limits.text or not value.isprintable():
        raise ValueError(f"not a printable string of at most {limits.text} characters: {str(value)[:60]!r}")
    return value


def _text(value: Any, limit: int) -> str:
    return str(value)[:limit]


def _failed(code: m.CaptureFailure, reason: str) -> m.PluginInfo:
    return m.PluginInfo(captured=False, reason_code=code, reason=reason)


@contextmanager
def _private_dir() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix=f"{_TMP_PREFIX}{os.getpid()}-"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def describe(info: m.PluginInfo | None) -> str:
    """One line: what was captured, or why not."""
    if info is None:
        return "not captured (manifest before schema 1.2)"
    if not info.captured:
        return f"not captured: {info.reason_code}: {info.reason}"
    return (f"as reported by the plugin ({reported_where(info)}): {info.name} {info.version} (plugin API "
            f"{info.api_version}, built for Triton {info.triton_version}): {len(info.passes)} passes, "
            f"{len(info.dialects)} dialects, {len(info.ops)} ops")


def reported_where(info: m.PluginInfo) -> str:
    """Whose word a captured ``PluginInfo`` is: the plugin's own, never checked by the signer."""
    where = {SANDBOX: "in a sandbox", UNSANDBOXED: "WITHOUT a sandbox"}.get(info.ran_in or "", "before schema 1.4")
    return f"its own code, run {where}; not checked by the signer" if info.ran_in else f"recorded {where}; unchecked"



def check_contract(plugin: m.Plugin, where: str) -> list[str]:
    """The vendor's declaration against what the library said about itself (build time).

    A declared pass the library does not register, or a captured Triton version outside the
    declared range, is a :class:`ConfigError` naming both. Returns warnings: a range that
    could not be checked because nothing was captured.
    """
    contract, info = plugin.contract, plugin.info
    if contract is None:
        return []
    key = f"tool.backend-packager.plugins[{plugin.path}]"
    if info is None or not info.captured:
        why = f"{info.reason_code}: {info.reason}" if info else "not captured"
        if contract.passes:
            raise ConfigError("plugin-uncaptured", where, f"{key}.passes: cannot check the declared passes of "
                              f"{plugin.path} against the library, which could not be asked ({why})")
        return [f"{plugin.path}: the declared Triton range {contract.triton!r} is recorded unchecked ({why})"] \
            if contract.triton else []
    registered = [p.name for p in info.passes]
    for placement in contract.passes:
        if placement.name not in registered:
            have = ", ".join(registered) or "no passes"
            raise ConfigError("plugin-pass", where, f"{key}.passes: declares pass {placement.name!r}, but "
                              f"{plugin.path} ({info.name} {info.version}) registers {have}")
    _check_range(contract.triton, info, plugin.path, where, key)
    return []


def _check_range(spec: str, info: m.PluginInfo, path: str, where: str, key: str) -> None:
    from packaging.specifiers import SpecifierSet
    from packaging.version import InvalidVersion, Version

    if not spec:
        return
    try:
        built_for = Version(info.triton_version or "")
    except InvalidVersion:
        raise ConfigError("plugin-triton", where, f"{key}.triton: {path} says it was built for Triton "
                          f"{info.triton_version!r}, not a PEP 440 version: the range {spec!r} cannot hold") from None
    if not SpecifierSet(spec).contains(built_for, prereleases=True):
        raise ConfigError("plugin-triton", where, f"{key}.triton: {path} ({info.name} {info.version}) was built for "
                          f"Triton {info.triton_version}, outside the declared range {spec!r}")


def migrated_plugins(artifacts: list[m.Artifact], previous: list[m.Plugin], wheel: Path | None,
                     policy: Policy = "off") -> list[m.Plugin]:
    """A migrated wheel's plugins: contracts a previous manifest declared are kept (re-signing
    keeps declarations), what the libraries say is captured anew from ``wheel`` under
    ``policy`` (by default not: ``not-run``); without a wheel (``adopt``) it is left to the caller."""
    from .contents import find_plugins

    declared = {p.path: p.contract for p in previous}
    plugins = [m.Plugin(path=p.path, api=p.api, contract=declared.get(p.path)) for p in find_plugins(artifacts)]
    return capture_all(wheel, artifacts, plugins, policy=policy) if wheel is not None else plugins
