"""A sandbox for code the packager must run but must not trust: a plugin's constructors.

Loading a shared library runs its constructors, so asking a plugin anything runs the
plugin's code. That code must not see the signer: its key file, the passphrase in its
environment, its command line, its working directory, its sockets. :func:`run` runs a piece
of Python (the *payload*) in a child that is cut off from all of them:

- new user, PID, mount and network namespaces, and IPC, UTS and cgroup ones where the kernel
  has them (``unshare(2)`` through
  ``ctypes``: Python 3.11 has no ``os.unshare``), the user namespace mapping only the
  packager's own uid and gid;
- a filesystem of its own: a small ``tmpfs`` becomes the root (``pivot_root(2)``, the old
  root detached), holding read-only bind mounts of only what the payload needs (the
  interpreter, its standard library, the system library directories, the paths of the
  :class:`Plan`), ``/dev/null``, ``/dev/zero``, ``/dev/random``, ``/dev/urandom``, an empty
  ``/tmp``, a fresh empty working directory ``/work``, the plan's writable directories, and
  a fresh ``/proc`` of the new PID namespace (none at all where it cannot be mounted): the
  packager's processes, its ``/proc/<pid>`` and every other file are not there;
- no network but a loopback interface that is down;
- an empty environment (the plan's variables only) and no inherited descriptors; a file the
  caller holds open as checked (``adopt``'s installed files) is bind-mounted read-only by its
  path onto a placeholder, and the sandbox refuses to start unless what got mounted is that
  very inode (device and inode number, which stay the caller's while it holds the file open);
- ``PR_SET_NO_NEW_PRIVS``, every capability dropped (bounding set included), not dumpable;
- ``RLIMIT_AS``, ``RLIMIT_CORE`` = 0, ``RLIMIT_FSIZE``, a timeout, and death with the
  packager (``PR_SET_PDEATHSIG``).

Three processes: the *launcher* (a ``python -I -S`` child of the packager) unshares the
namespaces and forks the *init* of the new PID namespace, which builds the filesystem and
forks the *worker* that runs the payload. Neither the launcher nor init runs anything of the
payload's. When the worker ends, init ends, and the kernel kills every process left in the
namespace (a ``setsid`` daemon included) before the launcher's ``waitpid`` returns: nothing
the payload started outlives :func:`run`. The launcher enforces the timeout by killing init;
the packager kills the launcher's process group as a backstop, and init dies with the
launcher. The outcome comes back on the launcher's stdout, which neither init nor the worker
holds.

Where the namespaces cannot be made (user namespaces disabled, a container's seccomp
profile, an unknown architecture), :func:`available` says why, and :func:`run` returns
status ``no-sandbox`` without running the payload.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import sysconfig
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

__all__ = [
    "DEVICES", "GRACE", "Held", "LAUNCHER", "LIBRARY_DIRS", "Limits", "MAX_LINKS", "MAX_REPORT", "Outcome",
    "PROBE_PREFIX", "Plan", "SYSTEM_FILES", "Status", "available", "interpreter", "interpreter_paths", "kill_group",
    "layout", "plan_document", "run", "signal_name"
]

#: The system's library directories (those that exist are exposed, read-only).
LIBRARY_DIRS = ("/lib", "/lib32", "/lib64", "/libx32", "/usr/lib", "/usr/lib32", "/usr/lib64", "/usr/libx32",
                "/usr/local/lib", "/usr/local/lib64")
#: Files the dynamic loader and the interpreter read.
SYSTEM_FILES = ("/etc/ld.so.cache",)
DEVICES = ("/dev/null", "/dev/zero", "/dev/random", "/dev/urandom")
#: Symlinks followed while laying out a path, as the kernel's own limit.
MAX_LINKS = 40
#: The launcher's report on stdout is a line of JSON; more than this is not ours.
MAX_REPORT = 1 << 16
#: Seconds the packager waits beyond the launcher's own timeout before killing it.
GRACE = 10.0
#: The probe's scratch directory: PREFIX + pid + "-" + random (swept once its process is gone).
PROBE_PREFIX = "backend-packager-sandbox-probe-"

Status = Literal["exited", "signalled", "timeout", "no-sandbox"]


@dataclass(frozen=True)
class Held:
    """A file the caller holds open: ``source`` bind-mounted read-only onto ``target`` (an
    existing empty placeholder under a ``read_only`` path), and it must be this inode."""

    source: Path
    target: Path
    device: int
    inode: int

    @classmethod
    def of(cls, fd: int, source: Path, target: Path) -> Held:
        st = os.fstat(fd)
        return cls(source, target, st.st_dev, st.st_ino)


@dataclass(frozen=True)
class Plan:
    """What the payload may see, each at its own absolute path: ``read_only`` paths (files or
    directories), ``writable`` directories, ``held`` files, and the environment ``env``."""

    read_only: tuple[Path, ...] = ()
    writable: tuple[Path, ...] = ()
    held: tuple[Held, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Limits:
    """Bounds on the payload: seconds, address space, bytes of any one file it writes."""

    timeout: float = 120.0
    memory: int = 6 << 30
    file_size: int = 4 << 20


@dataclass(frozen=True)
class Outcome:
    """How the payload ended: ``exited`` (``code``), ``signalled`` (``code`` is the signal),
    ``timeout``, or ``no-sandbox`` (nothing ran; ``detail`` says why)."""

    status: Status
    code: int = 0
    detail: str = ""


def interpreter() -> Path:
    """The base interpreter (a virtual environment's ``python`` is a symlink into it, and
    its ``pyvenv.cfg`` would point the child at site-packages it must not see)."""
    base = getattr(sys, "_base_executable", None) or sys.executable
    return Path(os.path.realpath(base))


def interpreter_paths() -> list[Path]:
    """What ``python -I -S`` needs to start and import ``ctypes`` and ``json``: the binary,
    the standard library, its extension modules and ``libpython`` where it is shared."""
    paths = [interpreter(), Path(sysconfig.get_path("stdlib"))]
    dynload = sysconfig.get_config_var("DESTSHARED")
    if dynload:
        paths.append(Path(dynload))
    libdir, soname = sysconfig.get_config_var("LIBDIR"), sysconfig.get_config_var("INSTSONAME")
    if sysconfig.get_config_var("Py_ENABLE_SHARED") and libdir and soname:
        paths.append(Path(libdir) / soname)
    return [p for p in paths if os.path.exists(p)]


def layout(paths: Iterable[Path]) -> list[tuple[str, str, str]]:
    """The steps that make each path resolve inside the new root as it does outside:
    ``("link", PATH, TARGET)`` for every symlink met on the way (``/lib64`` -> ``usr/lib64``),
    ``("bind", REALPATH, "")`` for where each ends. Sorted, so that a directory comes
    before what is mounted or made under it."""
    steps: set[tuple[str, str, str]] = set()
    for path in paths:
        steps.update(_walk(str(path), 0))
    return sorted(steps, key=lambda s: (s[1], s[0]))


def _walk(path: str, depth: int) -> list[tuple[str, str, str]]:
    if depth > MAX_LINKS:
        raise OSError(f"{path}: too many levels of symbolic links")
    parts = [p for p in path.split("/") if p not in ("", ".")]
    current = "/"
    for index, part in enumerate(parts):
        if part == "..":
            current = os.path.dirname(current)  # ``current`` has no symlink in it: exact
            continue
        candidate = os.path.join(current, part)
        if os.path.islink(candidate):
            target = os.readlink(candidate)
            rest = "/".join(parts[index + 1:])
            base = target if target.startswith("/") else f"{current}/{target}"
            return [("link", candidate, target), *_walk(f"{base}/{rest}" if rest else base, depth + 1)]
        current = candidate
    return [("bind", current, "")]


def plan_document(plan: Plan, root: Path, limits: Limits) -> str:
    """The launcher's instructions, as JSON (argv): nothing in them is secret."""
    read_only = [*interpreter_paths(), *(Path(p) for p in LIBRARY_DIRS + SYSTEM_FILES if os.path.exists(p)),
                 *plan.read_only]
    steps = [[kind, path, target, "ro"] for kind, path, target in layout(read_only)]
    steps += [[kind, path, target, "rw"] for kind, path, target in layout(plan.writable)]
    steps += [["dev", d, "", "rw"] for d in DEVICES if os.path.exists(d)]
    steps += [["dir", "/tmp", "", "1777"], ["dir", "/work", "", "700"]]
    steps.sort(key=lambda s: (s[1], s[0]))
    return json.dumps({
        "parent": os.getpid(), "uid": os.getuid(), "gid": os.getgid(), "root": str(root), "steps": steps,
        "held": [[str(h.source), str(h.target), h.device, h.inode] for h in plan.held], "timeout": limits.timeout,
        "memory": limits.memory, "file_size": limits.file_size, "machine": os.uname().machine,
        "env": dict(plan.env),
    })


def run(payload: str, argv: list[str], plan: Plan, root: Path, stderr: Path, limits: Limits = Limits()) -> Outcome:
    """Run ``payload`` (Python source; ``sys.argv[1:]`` is ``argv``) in the sandbox. ``root``
    is an empty private directory (the new root is mounted on it, in the sandbox only);
    the payload's stderr goes to the file ``stderr``."""
    root.mkdir(mode=0o700, exist_ok=True)
    command = [str(interpreter()), "-I", "-S", "-c", LAUNCHER, plan_document(plan, root, limits), payload, *argv]
    with open(stderr, "wb") as err:
        # No environment for the launcher: an LD_LIBRARY_PATH there would load the wheel's
        # libraries into it (libffi for ctypes) before any namespace exists. The payload gets
        # the plan's, by execve inside the sandbox.
        child = subprocess.Popen(command, env={}, cwd="/", stdin=subprocess.DEVNULL,
                                 stdout=subprocess.PIPE, stderr=err, start_new_session=True)
        try:
            out, _ = child.communicate(timeout=limits.timeout + GRACE)
        except subprocess.TimeoutExpired:
            kill_group(child)
            return Outcome("timeout", detail=f"the sandbox did not end within {limits.timeout + GRACE:g} s")
        finally:
            kill_group(child)
    return _outcome(out[:MAX_REPORT], child.returncode)


def signal_name(number: int) -> str:
    """``SIGKILL`` for 9; the number for one Python has no name for (a real-time signal)."""
    try:
        return signal.Signals(number).name
    except ValueError:
        return str(number)


def kill_group(child: subprocess.Popen[bytes]) -> None:
    """Kill a child started in its own session, and whatever it started there, and reap it."""
    try:
        os.killpg(child.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    child.wait()


def _outcome(report: bytes, code: int) -> Outcome:
    """The launcher's last line (it alone writes to that pipe), else how it died."""
    lines = report.decode("utf-8", "replace").strip().splitlines()
    try:
        doc = json.loads(lines[-1]) if lines else None
        if isinstance(doc, dict) and doc.get("status") in ("exited", "signalled", "timeout", "no-sandbox"):
            return Outcome(doc["status"], int(doc.get("code", 0)), str(doc.get("detail", ""))[:500])
    except ValueError:
        pass
    why = f"signal {signal_name(-code)}" if code < 0 else f"exit status {code}"
    return Outcome("no-sandbox", detail=f"the sandbox launcher ended without a report ({why})")


_probe_lock = threading.Lock()
_probed: list[str | None] = []


def available() -> str | None:
    """None where the sandbox works here, else why not (probed once per process: a
    sandbox that runs ``pass``)."""
    with _probe_lock:
        if not _probed:
            _probed.append(_probe())
        return _probed[0]


def _probe() -> str | None:
    import shutil
    import tempfile

    from ..base import remove_orphan_dirs

    remove_orphan_dirs(Path(tempfile.gettempdir()), PROBE_PREFIX)  # a killed packager's
    scratch = Path(tempfile.mkdtemp(prefix=f"{PROBE_PREFIX}{os.getpid()}-"))
    try:
        outcome = run("import sys", [], Plan(), scratch / "root", scratch / "stderr", Limits(timeout=30))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    if outcome.status == "exited" and outcome.code == 0:
        return None
    # recorded in manifests: the same input must give the same bytes, no temporary path
    return (outcome.detail or f"the probe ended {outcome.status} {outcome.code}").replace(str(scratch), "<temporary>")


# The launcher, init and the worker: one program, stdlib only. The launcher's stdout is the
# report; init points its own at /dev/null before anything else, and the worker closes every
# descriptor but 0-2 before the payload. Flags and numbers: <sched.h>, <sys/mount.h>,
# <sys/prctl.h>, <linux/capability.h>; pivot_root(2) has no libc wrapper.
LAUNCHER = r"""
import ctypes, json, os, resource, select, signal, sys
plan, payload, args = json.loads(sys.argv[1]), sys.argv[2], sys.argv[3:]
libc = ctypes.CDLL(None, use_errno=True)
libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p]
PR_SET_PDEATHSIG, PR_SET_DUMPABLE, PR_CAPBSET_DROP, PR_SET_NO_NEW_PRIVS = 1, 4, 24, 38
NEWNS, NEWCGROUP, NEWUTS, NEWIPC, NEWUSER, NEWPID, NEWNET = (0x20000, 0x2000000, 0x4000000, 0x8000000,
                                                            0x10000000, 0x20000000, 0x40000000)
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = (
    1, 2, 4, 8, 32, 4096, 16384, 1 << 18)
MNT_DETACH = 2
# statvfs f_flag -> the mount flags a remount inside a user namespace must keep (locked)
KEEP = {2: 2, 4: 4, 8: 8, 1024: 1024, 2048: 2048, 4096: 1 << 21}
PIVOT_ROOT = {"x86_64": 155, "aarch64": 41}

def say(doc):
    os.write(1, (json.dumps(doc) + "\n").encode())

def check(rc, what):
    if rc != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")

def write(path, text):
    fd = os.open(path, os.O_WRONLY)
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)

def mount(source, target, fstype, flags, data=None):
    enc = lambda s: None if s is None else s.encode()
    check(libc.mount(enc(source), enc(target), enc(fstype), flags, enc(data)), f"mount {target}")

def ensure(path, directory):
    if os.path.lexists(path):
        return
    os.makedirs(os.path.dirname(path), exist_ok=True)
    if directory:
        os.mkdir(path)
    else:
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))

def bind(source, target, read_only):
    ensure(target, os.path.isdir(source))
    mount(source, target, None, MS_BIND)
    if read_only:
        flags = os.statvfs(target).f_flag
        keep = sum(v for k, v in KEEP.items() if flags & k)
        mount(None, target, None, MS_REMOUNT | MS_BIND | MS_RDONLY | keep)

def build(root):
    mount(None, "/", None, MS_REC | MS_PRIVATE)
    mount("tmpfs", root, "tmpfs", MS_NOSUID | MS_NODEV, "size=16m,nr_inodes=4096,mode=0755")
    for kind, path, target, mode in plan["steps"]:
        inside = root + path
        if kind == "link":
            if not os.path.lexists(inside):
                os.makedirs(os.path.dirname(inside), exist_ok=True)
                os.symlink(target, inside)
        elif kind in ("bind", "dev"):
            bind(path, inside, mode == "ro")
        elif kind == "dir":
            os.makedirs(inside, exist_ok=True)
            os.chmod(inside, int(mode, 8))
    for source, target, device, inode in plan["held"]:
        bind(source, root + target, True)
        st = os.stat(root + target)
        if (st.st_dev, st.st_ino) != (device, inode):
            raise OSError(0, f"{source}: not the file that was checked (replaced meanwhile)")
    try:
        os.mkdir(root + "/proc")
        mount("proc", root + "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
    except OSError:
        pass  # no /proc at all: still none of the packager's
    os.mkdir(root + "/.old")
    number = PIVOT_ROOT.get(plan["machine"])
    if number is None:
        raise OSError(0, f"pivot_root: unknown on {plan['machine']}")
    check(libc.syscall(number, root.encode(), (root + "/.old").encode()), "pivot_root")
    os.chdir("/")
    check(libc.umount2(b"/.old", MNT_DETACH), "umount the old root")
    os.rmdir("/.old")

class Cap(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]

class CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]

def harden():
    check(libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "no_new_privs")
    for cap in range(64):
        if libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0:
            break  # past the last capability this kernel knows
    check(libc.capset(ctypes.byref(CapHeader(0x20080522, 0)), (Cap * 2)()), "capset")
    check(libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0), "dumpable")

def worker():
    os.closerange(3, 1 << 16)
    code = 1
    try:
        os.chdir("/work")
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        resource.setrlimit(resource.RLIMIT_FSIZE, (plan["file_size"], plan["file_size"]))
        resource.setrlimit(resource.RLIMIT_AS, (plan["memory"], plan["memory"]))
        # a new image: the loader reads the plan's LD_LIBRARY_PATH only at exec, here, inside
        os.execve(sys.executable, [sys.executable, "-I", "-S", "-c", payload, *args], plan["env"])
    except BaseException as exc:
        os.write(2, f"payload: {type(exc).__name__}: {exc}\n".encode("utf-8", "replace"))
    os._exit(code & 0xFF)

def init(alive, status):
    null = os.open("/dev/null", os.O_RDWR)
    os.dup2(null, 0)
    os.dup2(null, 1)
    os.close(null)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if select.select([alive], [], [], 0)[0]:
        os._exit(1)  # the launcher died before the line above: nobody would end us
    try:
        build(plan["root"])
        harden()
    except OSError as exc:
        os.write(status, f"sandbox {exc}".encode())
        os._exit(1)
    pid = os.fork()
    if pid == 0:
        worker()
    _, raw = os.waitpid(pid, 0)
    sig = os.WTERMSIG(raw) if os.WIFSIGNALED(raw) else 0
    os.write(status, (f"signalled {sig}" if sig else f"exited {os.WEXITSTATUS(raw)}").encode())
    os._exit(0)  # the kernel now kills whatever is left in the namespace, then reports our exit

libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
if os.getppid() != plan["parent"]:
    sys.exit(3)
try:
    REQUIRED = NEWUSER | NEWNS | NEWPID | NEWNET
    if libc.unshare(REQUIRED | NEWIPC | NEWUTS | NEWCGROUP) != 0:  # a kernel without the extra ones
        check(libc.unshare(REQUIRED), "unshare")
    write("/proc/self/setgroups", "deny")
    write("/proc/self/uid_map", f"0 {plan['uid']} 1")
    write("/proc/self/gid_map", f"0 {plan['gid']} 1")
except OSError as exc:
    say({"status": "no-sandbox", "detail": f"cannot make the namespaces: {exc}"})
    sys.exit(0)
alive_r, alive_w = os.pipe()
status_r, status_w = os.pipe()
child = os.fork()
if child == 0:
    os.close(alive_w)
    os.close(status_r)
    init(alive_r, status_w)
os.close(alive_r)
os.close(status_w)
expired = []
def expire(*_):
    expired.append(1)
    os.kill(child, signal.SIGKILL)
signal.signal(signal.SIGALRM, expire)
signal.setitimer(signal.ITIMER_REAL, plan["timeout"])
report = b""
while chunk := os.read(status_r, 4096):
    report = (report + chunk)[:4096]
os.waitpid(child, 0)
signal.setitimer(signal.ITIMER_REAL, 0)
word, _, rest = report.decode("utf-8", "replace").partition(" ")
if expired:
    say({"status": "timeout", "detail": f"killed after {plan['timeout']:g} s"})
elif word in ("exited", "signalled"):
    say({"status": word, "code": int(rest)})
elif word == "sandbox":
    say({"status": "no-sandbox", "detail": rest})
else:
    say({"status": "no-sandbox", "detail": "the sandbox's init ended without a report"})
"""
