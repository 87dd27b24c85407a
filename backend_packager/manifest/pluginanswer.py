"""The answer a Triton plugin gives about itself, and how it is read back.

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

The child (:data:`CHILD`) loads the library, calls ``tritonGetPluginInfo`` and writes what it
read to an answer file (not stdout, which the plugin may print to). The answer is hostile
input: read within a size bound (never through a symlink, never from a FIFO) and decoded
field by field, and recorded as what the plugin reported (``PluginInfo.ran_in``), never as a
fact the signer checked.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from triton_backend_runtime.base import ManifestError, jsonlimits
from triton_backend_runtime.base import describe as describe_error
from triton_backend_runtime.manifest import model as m

__all__ = ["API_VERSION", "CHILD", "Limits", "SANDBOX", "UNSANDBOXED", "decode", "describe", "failed", "reported_where"]

#: The only ``PluginInfo`` layout this module knows (PluginUtils.h of Triton 3.9).
API_VERSION = 2
#: Where the call ran, as ``PluginInfo.ran_in`` records it.
SANDBOX, UNSANDBOXED = "sandbox", "unsandboxed"


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
# child after :data:`.plugincall.PRELUDE`. Kept free of anything but ctypes/json so that nothing
# of the packager is imported there. argv: plugin, answer, items, text.
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


def decode(answer: Path, limits: Limits) -> m.PluginInfo:
    try:
        data = _read_answer(answer, limits.answer_bytes + 1)
        doc = jsonlimits.loads(data, str(answer), ManifestError, limit=limits.answer_bytes)
        return _info(doc, limits)
    except Exception as exc:  # the child ran the plugin's code: its answer is hostile, any shape
        return failed("call-failed", f"no usable answer from the child: {describe_error(exc, 300)}")


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
        return failed("load-failed", f"dlopen failed: {_text(doc['error'], 400)}")
    if stage == "api":
        info = failed("api-version", f"PluginInfo.apiVersion is {int(doc['api_version'])}; only the layout of "
                       f"version {API_VERSION} is known (Triton 3.9's PluginUtils.h)")
        info.api_version = int(doc["api_version"])
        return info
    if stage != "done":
        return failed("call-failed", _text(doc["error"], 400))
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


def failed(code: m.CaptureFailure, reason: str) -> m.PluginInfo:
    return m.PluginInfo(captured=False, reason_code=code, reason=reason)


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
