"""The call of ``tritonGetPluginInfo`` in a child: in the :mod:`.sandbox` (namespaces of its
own, a filesystem holding only the interpreter, the system libraries and the plugin's
private directory, no environment but ``LD_LIBRARY_PATH``, no descriptors, limits on address
space, core and file size, a timeout), or, unsafe and on request only, as a plain child of
the signer. Either way the child runs :data:`.pluginanswer.CHILD` and its answer is decoded
by :func:`.pluginanswer.decode`.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from triton_backend_runtime.manifest import model as m

from ..scanning import sandbox
from .pluginanswer import CHILD, Limits, decode, failed

__all__ = ["PRELUDE", "as_links", "call_sandboxed", "call_unsandboxed"]

# The unsafe call's own limits, set in the child before :data:`.pluginanswer.CHILD` runs
# (the sandbox sets them itself). argv ends: parent pid, memory.
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


def call_sandboxed(plugin: Path, libdirs: list[Path], tmp: Path, limits: Limits,
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
        return failed("no-sandbox", f"the sandbox could not be made: {ran.detail}")
    if ran.status == "timeout":
        return failed("timeout", f"tritonGetPluginInfo did not return within {limits.timeout:g} s")
    if ran.code != 0:
        why = f"signal {sandbox.signal_name(ran.code)}" if ran.status == "signalled" else f"exit status {ran.code}"
        return failed("call-failed", f"the child calling tritonGetPluginInfo died ({why}): {_tail(work / 'stderr')}")
    return decode(answer, limits)


def as_links(held: tuple[tuple[int, Path, Path], ...]) -> tuple[int, ...]:
    """Unsandboxed (unsafe) only: each placeholder becomes a link to its descriptor, which
    the child inherits."""
    for fd, placeholder, _ in held:
        if not placeholder.is_symlink():
            placeholder.unlink()
            placeholder.symlink_to(f"/proc/self/fd/{fd}")
    return tuple(fd for fd, _, _ in held)


def call_unsandboxed(plugin: Path, libdirs: list[Path], tmp: Path, limits: Limits,
                     fds: tuple[int, ...] = ()) -> m.PluginInfo:
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
            return failed("timeout", f"tritonGetPluginInfo did not return within {limits.timeout:g} s")
        finally:
            sandbox.kill_group(child)  # whatever the plugin started in its session goes too
    if code != 0:
        why = f"signal {sandbox.signal_name(-code)}" if code < 0 else f"exit status {code}"
        return failed("call-failed", f"the child calling tritonGetPluginInfo died ({why}): {_tail(tmp / 'stderr')}")
    return decode(answer, limits)


def _tail(path: Path) -> str:
    with path.open("rb") as stream:
        stream.seek(max(0, path.stat().st_size - 300))
        lines = stream.read().decode("utf-8", "replace").strip().splitlines()
    return lines[-1] if lines else "no message"
