"""``python -m triton_backend_runtime``: doctor, list, hook and trust commands.

Exit codes: 0 all is well; 1 a checked failure (doctor, list: something excluded, failed or
rejected; trust list: a bad trust file; trust remove: no such key; a file that cannot be
written); 2 usage or unusable input (a bad option, a key file that cannot be read or holds
no public key). ``--json`` documents carry ``"format": JSON_FORMAT``. A closed pipe
(``| head``) ends the command quietly; an OSError is one line, never a traceback.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import sys
import warnings
from collections.abc import Callable, Iterator
from typing import Any

from . import registry as reg
from .errors import TrustError, from_os_error
from .verdict import Reason
from .vocab import BAD_STATES, STRICT

PROG = "python -m triton_backend_runtime"
EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2
#: 128 + SIGPIPE, what a shell reports for a tool whose reader went away (as backend-packager).
EXIT_BROKEN_PIPE = 141
#: The version of every --json document's layout; raised when a key changes meaning or goes.
JSON_FORMAT = 1


class UnusableInput(Exception):
    """A file or value given on the command line that cannot be used: exit 2."""


def _exercise(rehash: bool) -> reg.Registry:
    """Import Triton the way a user does, so the registry sees what Triton loads."""
    registry = reg.get()
    registry.verify(rehash=rehash)
    try:
        import triton.backends as tb  # through the hook or the patch, when installed
    except Exception as exc:
        registry.problems.append(Reason("load.triton", "triton", reg.describe(exc)))
        return registry
    if not registry.used_by_triton and registry.policy != "off":
        # Triton loaded its backends itself (no hook): show what the registry would admit.
        registry.load(lambda name, package: _triton_load(tb, package))
    from .selection import probe_active

    probe_active(registry)
    return registry


def _triton_load(tb: Any, package: str) -> Any:
    import importlib

    compiler = importlib.import_module(f"{package}.compiler")
    driver = importlib.import_module(f"{package}.driver")
    return tb.Backend(
        tb._find_concrete_subclasses(compiler, tb.BaseBackend), tb._find_concrete_subclasses(driver, tb.DriverBase)
    )


def _healthy(doc: dict[str, Any]) -> bool:
    rows = doc["backends"] + doc["plugins"]
    return not doc["problems"] and all(r["state"] not in BAD_STATES for r in rows) and not _unenforced(doc)


def _unenforced(doc: dict[str, Any]) -> bool:
    """strict was asked for, but import triton does not go through the registry."""
    return bool(doc["policy"] == STRICT and not doc["used_by_triton"])


def cmd_list(args: argparse.Namespace) -> int:
    doc = _exercise(args.rehash).report()
    if args.json:
        print(json.dumps({"format": JSON_FORMAT, **doc}, indent=1, sort_keys=True))
    else:
        for row in doc["backends"]:
            reason = f"\t{row['reason']['code']}" if args.verbose and row["reason"] else ""
            print(f"{row['name']}\t{row['distribution']} {row['version']}\t{row['trust']}\t{row['state']}{reason}")
        for row in doc["plugins"]:
            print(f"plugin {row['path']}\t{row['distribution']} {row['version']}\t{row['trust']}\t{row['state']}")
    return 0 if _healthy(doc) else 1


def cmd_doctor(args: argparse.Namespace) -> int:
    from .autohook import pth_path

    registry = _exercise(args.rehash)
    doc = registry.report()
    hook = "installed" if os.path.exists(pth_path()) else "not installed"
    print("Triton backend doctor")
    print(f"  triton:      {_core_line(doc.get('triton_core'))}")
    print(f"  policy:      {doc['policy']} (TRITON_BACKEND_POLICY = strict | warn | off)")
    used = "yes" if doc["used_by_triton"] else "no (Triton discovered its backends itself)"
    print(f"  registry:    used by import triton: {used}; .pth hook {hook}")
    print(f"  trust files: {', '.join(doc['trust_sources']) or 'none (no key is trusted)'}")
    print(f"  cache:       {doc['cache']}")
    for note in doc["notes"]:
        print(f"               note: {note['path']}: {note['message']} ({note['code']})")
    if doc["manifest_digest"]:
        print(f"  cache key:   manifests {doc['manifest_digest'][:16]} folded into Triton's compile cache key")
    print("\nBackends:")
    if not doc["backends"]:
        print("  none discovered")
    for row in doc["backends"]:
        active = {True: "active", False: "inactive", None: "-"}[row["active"]]
        print(f"  {row['name']:<10} {row['distribution']} {row['version']}  [{row['trust']}, {row['state']}, "
              f"{active}] via {row['source']} {row['package']}")
        _details(row)
    print("\nPlugins:")
    if not doc["plugins"]:
        print("  none")
    for row in doc["plugins"]:
        how = f", {row['handed_over']}" if row["handed_over"] else ""
        print(f"  {row['path']} ({row['api']}) {row['distribution']} {row['version']}  [{row['trust']}, "
              f"{row['state']}{how}]")
        _details(row)
        for line in _contract_lines(row.get("contract")):
            print(f"      {line}")
    if doc["problems"]:
        print("\nProblems:")
        for problem in doc["problems"]:
            print(f"  {problem['path']}: {problem['message']} ({problem['code']})")
    if _unenforced(doc):
        if not doc["problems"]:
            print("\nProblems:")
        print("  policy strict is not enforced: import triton does not go through the registry "
              f"(run `{PROG} hook install`, or apply the patch in hooks/)")
    healthy = _healthy(doc)
    print(f"\n{'OK' if healthy else 'ATTENTION: see the reasons above'}")
    return 0 if healthy else 1


def _contract_lines(terms: dict[str, Any] | None) -> list[str]:
    """A plugin's contract: what was captured from the library at build time, what its
    vendor declared (schema 1.2; nothing before)."""
    if terms is None:
        return ["contract:  none recorded (manifest before schema 1.2)"]
    if terms["captured"]:
        lines = [f"captured:  {terms['name']} {terms['version']}, built for Triton {terms['built_for']}; "
                 f"passes {', '.join(terms['passes']) or 'none'}; dialects {', '.join(terms['dialects']) or 'none'}; "
                 f"ops {len(terms['ops'])}"]
    else:
        lines = [f"captured:  no ({terms['capture_note'] or 'not recorded'})"]
    if not terms["declared"]:
        return [*lines, "declared:  nothing (defaults: any Triton, phase import, on-failure fallback)"]
    return [*lines, f"declared:  triton {terms['triton'] or '(any)'}, phase {terms['phase']}, "
                    f"on-failure {terms['on_failure']}; placement {'; '.join(terms['placement']) or 'none'}"]


def _core_line(core: dict[str, Any] | None) -> str:
    """What ``import triton`` imports: its distribution (found by the file, not the name)."""
    if core is None:
        return "not installed (no installed distribution's RECORD lists the triton/__init__.py on sys.path)"
    version = core["__version__"] or "unknown"
    line = f"{core['distribution']} {core['version']} (triton.__version__ {version}; {core['init']})"
    also = core.get("also_claimed_by") or []
    return line + (f"; its files are also claimed by {', '.join(also)}" if also else "")


#: How a row's signatures were judged, apart from why it was rejected (verdict.signature).
_SIGNATURE_LABELS = {"trusted": ("signed by", " (a trusted key)"), "untrusted": ("signatures", " (not a trusted key)")}


def _details(row: dict[str, Any]) -> None:
    if row["signers"]:
        label, trust = _SIGNATURE_LABELS.get(row.get("signature") or "", ("signatures", ""))
        print(f"      {label}: {', '.join(row['signers'])}{trust}")
    if row.get("note"):
        print(f"      note: {row['note']}")
    if row.get("coverage"):
        covers = "every file" if row["coverage"] == "all" else "native files only"
        print(f"      manifest covers: {covers}")
    if row["reason"]:
        reason = row["reason"]
        print(f"      reason: {reason['path']}: {reason['message']} ({reason['code']})")


def cmd_hook(args: argparse.Namespace) -> int:
    from .autohook import PTH_LINE, pth_path

    path = pth_path(args.site)
    if args.action == "install":
        from .atomicfile import write_atomic

        write_atomic(path, PTH_LINE.encode("utf-8"))
        print(f"installed {path}: import triton now goes through the backend registry")
    elif args.action == "uninstall":
        if os.path.exists(path):
            os.unlink(path)
            print(f"removed {path}")
        else:
            print(f"not installed ({path} does not exist)")
    else:
        print(f"{'installed' if os.path.exists(path) else 'not installed'}: {path}")
    return 0


def cmd_trust(args: argparse.Namespace) -> int:
    from . import trust as t

    if args.action == "list":
        return _trust_list()
    directory = t.user_trust_dir() if args.user else t.system_trust_dir()
    if args.action == "min-version":
        return _trust_min_version(directory, args.dist, args.version)
    if args.action == "remove":
        return _trust_remove(directory, args.key)
    text, keys = _key_file(args.key)
    try:
        scope = t.parse_scope_names(args.scope, "--scope") if args.scope is not None else None
    except TrustError as exc:
        raise UnusableInput(str(exc)) from None
    os.makedirs(directory, exist_ok=True)
    # The scope goes in before the key: a failure in between leaves a scope, never a wider key.
    if scope is not None:
        for key in keys:
            t.set_scope(directory, key.keyid, scope)
    target = os.path.join(directory, f"{keys[0].keyid[:16]}.pub")
    t.write_atomic(target, text.encode("utf-8"))
    print(f"trusted {len(keys)} key(s) from {args.key}: {target}")
    if scope is not None:
        print(f"  scope: {', '.join(sorted(scope))} ({os.path.join(directory, t.SCOPES_FILE)})")
    return 0


def _trust_min_version(directory: str, dist: str, version: str) -> int:
    from packaging.version import InvalidVersion, Version

    from . import trust as t

    try:
        name = t.parse_name(dist, "min-version")
        Version(version)
    except TrustError as exc:
        raise UnusableInput(str(exc)) from None
    except InvalidVersion:
        raise UnusableInput(f"min-version: {version[:80]!r} is not a PEP 440 version") from None
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, t.FLOORS_FILE)
    replaced = t.set_floor(directory, name, version)
    print(f"floor for {name}: releases below {version} are refused ({path})")
    if replaced:
        print(f"  replaced: {'; '.join(line.strip() for line in replaced)}")
    return 0


def _trust_list() -> int:
    from .trust import load_trust_store

    store, problems = load_trust_store()
    for key in store.keys.values():
        scope = store.scopes.get(key.keyid)
        where = f"  scope: {scope.describe()} ({', '.join(scope.sources)})" if scope else ""
        print(f"{key.keyid}  {key.comment}  ({key.source}){where}")
    for keyid, scope in store.scopes.items():
        if keyid not in store.keys:
            print(f"scope {keyid}: {scope.describe()} ({', '.join(scope.sources)}; no such trusted key)")
    for name, floor in sorted(store.floors.items()):
        print(f"min-version {name} {floor.describe()}  ({floor.source})")
    for keyid in sorted(store.revoked):
        print(f"revoked {keyid}")
    if store.threshold > 1:
        print(f"threshold {store.threshold}")
    for problem in problems:
        print(f"{PROG}: error: {problem} ({problem.code})", file=sys.stderr)
    return 1 if problems else 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG, description="Discover, verify and report the Triton backends and plugins this Python would load."
    )
    sub = parser.add_subparsers(dest="command", required=True)
    doctor = sub.add_parser("doctor", help="explain every backend and plugin: distribution, state, signer, reason")
    doctor.add_argument("--rehash", action="store_true", help="ignore the verification cache; hash every file")
    doctor.add_argument("--json", action="store_true", help=f"the report as JSON (\"format\": {JSON_FORMAT})")
    doctor.set_defaults(func=_doctor_entry)
    listing = sub.add_parser("list", help="list backends and plugins with their state")
    listing.add_argument("--json", action="store_true", help="the full report as JSON")
    listing.add_argument("--rehash", action="store_true", help="ignore the verification cache; hash every file")
    listing.set_defaults(func=cmd_list)
    hook = sub.add_parser("hook", help="install or remove the .pth hook for an unmodified Triton")
    hook.add_argument("action", choices=["install", "uninstall", "status"])
    hook.add_argument("--site", help="site-packages directory (default: this interpreter's)")
    hook.set_defaults(func=cmd_hook)
    trust = sub.add_parser("trust", help="the trust store: signing keys, their scopes, version floors")
    trust_actions = trust.add_subparsers(dest="action", required=True)
    user_help = "the user's trust directory, not this environment's"
    trust_add = trust_actions.add_parser("add", help="trust a signing key (copy its .pub line into a trust directory)")
    trust_add.add_argument("key", help="public key file written by backend-packager keygen")
    trust_add.add_argument(
        "--scope", metavar="NAME[,NAME...]",
        help="the only distributions this key may sign (replaces its scope in that directory)",
    )
    trust_add.add_argument("--user", action="store_true", help=user_help)
    floor = trust_actions.add_parser("min-version", help="refuse releases of a distribution below a version (rollback)")
    floor.add_argument("dist", help="distribution name")
    floor.add_argument("version", help="lowest admitted version (PEP 440)")
    floor.add_argument("--user", action="store_true", help=user_help)
    trust_actions.add_parser("list", help="trusted keys with their scopes, version floors, revocations")
    remove = trust_actions.add_parser(
        "remove", help="stop trusting a key: its lines leave the trust directory's .pub files (atomically)"
    )
    remove.add_argument("key", metavar="KEYID_OR_FILE",
                        help="a keyid (or a prefix of at least 8 hex digits) or a public key file")
    remove.add_argument("--user", action="store_true", help=user_help)
    trust.set_defaults(func=cmd_trust)
    _grammar(parser, sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    try:
        try:
            code = _main(argv)
        except SystemExit as exc:  # argparse: --help, --version, usage errors
            code = exc.code if isinstance(exc.code, int) else EXIT_OK if exc.code is None else EXIT_USAGE
        sys.stdout.flush()  # here, so that a closed pipe is met inside the handler below
        return code
    except BrokenPipeError:
        return _pipe_closed()


def _main(argv: list[str] | None) -> int:
    args = build_parser().parse_args(argv)
    try:
        with _quiet(args.quiet and not getattr(args, "json", False)):
            return int(args.func(args))
    except BrokenPipeError:
        raise  # an OSError, but not an error of the command: main ends quietly
    except UnusableInput as exc:
        return _fail(str(exc), EXIT_USAGE)
    except TrustError as exc:
        return _fail(f"{exc} ({exc.code})", EXIT_FAILED)
    except OSError as exc:
        error = from_os_error(exc)
        return _fail(f"{error} ({error.code})", EXIT_FAILED)



# -- one grammar: --version, -q/-v, exit codes, pipes -------------------------------------


def _grammar(parser: argparse.ArgumentParser, sub: Any) -> None:
    """``--version`` and ``-q``/``-v``, the latter before or after the command."""
    from . import __version__

    parser.add_argument("--version", action="version", version=f"{PROG} {__version__}")
    for command, default in [(parser, False), *((p, argparse.SUPPRESS) for p in _commands(sub))]:
        group = command.add_mutually_exclusive_group()
        group.add_argument("-q", "--quiet", action="store_true", default=default,
                           help="print nothing but errors; the exit code tells the rest")
        group.add_argument("-v", "--verbose", action="store_true", default=default,
                           help="print more detail (doctor: the core and discovery; list: reason codes)")


def _commands(sub: Any) -> list[argparse.ArgumentParser]:
    found: list[argparse.ArgumentParser] = []
    for command in dict.fromkeys(sub.choices.values()):
        found.append(command)
        for action in command._actions:
            if isinstance(action, argparse._SubParsersAction):
                found += _commands(action)
    return found


@contextlib.contextmanager
def _quiet(enabled: bool) -> Iterator[None]:
    if not enabled:
        yield
        return
    from .registry import BackendWarning

    with open(os.devnull, "w") as devnull, contextlib.redirect_stdout(devnull), warnings.catch_warnings():
        warnings.simplefilter("ignore", BackendWarning)
        yield


def _fail(message: str, code: int) -> int:
    try:
        print(f"{PROG}: error: {message}", file=sys.stderr)
    except BrokenPipeError:
        return _pipe_closed()
    return code


def _os_error(exc: OSError) -> str:
    where = exc.filename if exc.filename is not None else "error"
    return f"{where}: {exc.strerror or exc}"


def _pipe_closed() -> int:
    """The reader went away (``| head``): stop without a traceback, and keep Python's exit
    flush from raising again (the recipe in the signal module's documentation)."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass
    return EXIT_BROKEN_PIPE


# -- doctor --json ------------------------------------------------------------------------


def _doctor_entry(args: argparse.Namespace) -> int:
    if not args.json:
        code = int(cmd_doctor(args))
        if args.verbose:
            _doctor_details(reg.get().report())
        return code
    from .autohook import pth_path

    doc = _exercise(args.rehash).report()
    hook = pth_path()
    healthy = _healthy(doc)
    out = {"format": JSON_FORMAT, "healthy": healthy, "enforced": not _unenforced(doc),
           "hook": {"installed": os.path.exists(hook), "path": hook}, **doc}
    print(json.dumps(out, indent=1, sort_keys=True))
    return EXIT_OK if healthy else EXIT_FAILED


def _doctor_details(doc: dict[str, Any]) -> None:
    print("\nDetails:")
    print(f"  discovery:   {doc['discovery']}")
    print(f"  cache file:  {doc['cache']}")
    print(f"  manifests:   {doc['manifest_digest'] or 'none'}")
    core = doc.get("triton_core") or {}
    for key in sorted(core):
        print(f"  core {key}: {core[key]}")


# -- trust remove -------------------------------------------------------------------------


def _key_file(path: str) -> tuple[str, list[Any]]:
    """The public keys of a file named on the command line; anything else is unusable input."""
    from . import trust as t

    try:
        text = _read_regular(path, 1024 * 1024).decode("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        detail = _os_error(exc) if isinstance(exc, OSError) else f"{path}: not a text file"
        raise UnusableInput(f"cannot read key file: {detail}") from None
    try:
        keys = t.parse_key_file(text, path)
    except TrustError as exc:
        raise UnusableInput(f"{exc} (a public key line as written by backend-packager keygen)") from None
    if not keys:
        raise UnusableInput(f"{path}: the file holds no public key")
    return text, keys


def _read_regular(path: str, limit: int) -> bytes:
    """At most ``limit`` bytes of a regular file; opened without blocking, so a FIFO named
    where a key file belongs is refused at once instead of hanging the command."""
    import errno
    import stat

    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(errno.EINVAL, "not a regular file", path)
        return os.read(fd, limit)
    finally:
        os.close(fd)


def _trust_remove(directory: str, target: str) -> int:
    wanted = _keyids(target)
    removed: set[str] = set()
    for path in _pub_files(directory):
        removed |= _remove_lines(path, wanted)
    if not removed:
        print(f"{PROG}: error: {directory}: no trusted key matches {target}", file=sys.stderr)
        return EXIT_FAILED
    if len(removed) > 1 and not os.path.isfile(target):
        raise UnusableInput(f"{target}: the prefix matches {len(removed)} keys ({', '.join(sorted(removed))}); "
                            "give more digits")
    for keyid in sorted(removed):
        print(f"removed {keyid} from {directory}")
    from .trust import load_trust_store

    still = sorted(k for k in load_trust_store()[0].keys if k in removed)
    for keyid in still:
        print(f"  note: {keyid} is still trusted from another trust directory (trust list shows where)")
    return EXIT_OK


def _keyids(target: str) -> Callable[[str], bool]:
    if os.path.isfile(target):
        exact = {key.keyid for key in _key_file(target)[1]}
        return exact.__contains__
    prefix = target.lower()
    if not re.fullmatch(r"[0-9a-f]{8,64}", prefix):
        raise UnusableInput(f"{target}: neither a key file nor a keyid (8 to 64 hex digits)")
    return lambda keyid: keyid.startswith(prefix)


def _pub_files(directory: str) -> list[str]:
    try:
        with os.scandir(directory) as entries:
            return sorted(e.path for e in entries if e.name.endswith(".pub") and e.is_file(follow_symlinks=False))
    except FileNotFoundError:
        return []


def _remove_lines(path: str, matches: Callable[[str], bool]) -> set[str]:
    """Drop the key lines of ``path`` whose keyid ``matches``: the file is rewritten at once,
    or removed when no key is left in it. Lines that are not keys are kept as they are."""
    from . import trust as t

    data = _read_regular(path, (1 << 20) + 1)
    if len(data) > 1 << 20:  # rewriting only the first MiB would lose the rest
        raise UnusableInput(f"{path}: over 1 MiB: not a key file this command rewrites")
    lines = data.decode("utf-8", errors="replace").splitlines()
    kept: list[str] = []
    removed: set[str] = set()
    keys_left = 0
    for line in lines:
        keyid = _keyid_of_line(line, path)
        if keyid is not None and matches(keyid):
            removed.add(keyid)
            continue
        kept.append(line)
        keys_left += keyid is not None
    if removed:
        if keys_left:
            t.write_atomic(path, ("\n".join(kept) + "\n").encode("utf-8"))
        else:
            os.unlink(path)
    return removed


def _keyid_of_line(line: str, where: str) -> str | None:
    from . import trust as t

    if not line.strip() or line.lstrip().startswith("#"):
        return None
    try:
        return t.parse_key_line(line.strip(), where).keyid
    except TrustError:
        return None


if __name__ == "__main__":
    sys.exit(main())
