"""``python -m triton_backend_runtime``: doctor, list, hook and trust commands.

Exit codes: 0 all is well; 1 a checked failure (doctor, list: something excluded, failed or
rejected; trust list: a bad trust file; trust remove: no such key; trust unpin: no such pin;
a file that cannot be written); 2 usage or unusable input (a bad option, a key file that
cannot be read or holds no public key). ``--json`` documents carry ``"format": JSON_FORMAT``. A closed pipe
(``| head``) ends the command quietly (141).

Every error is one line, ``PROG: error: PATH: DETAIL (CODE)``, the packager's form: unusable
input as ``input.*`` (its codes where they mean the same), an OSError as ``file.<errno>``, a
bug of ours as ``error.internal`` (exit 1, as the packager; ``-v`` shows the traceback).
With ``--json`` the error is also ``{"format": 1, "error": {"code", "path", "message"}}``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import keyword
import os
import re
import sys
import warnings
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from ..base import BAD_STATES, STRICT, TrustError, describe, from_os_error
from ..loading import registry as reg
from ..site import DEFAULT_PACKAGE
from ..verification import Reason
from .grammar import EXIT_FAILED, EXIT_OK, EXIT_USAGE, JSON_FORMAT, fail, pipe_closed, run_command

if TYPE_CHECKING:
    from ..trust import TrustStore

PROG = "python -m triton_backend_runtime"
#: A key file is one line per key; anything bigger is not one (the packager's bound too).
MAX_KEY_FILE = 1 << 20
#: The longest --package accepted (discovery reads package names up to this length).
MAX_PACKAGE_NAME = 100
PACKAGE_HELP = ("the import name of the Triton to examine, for a vendor release that renames the package "
                "(group NAME.backends); default: %(default)s")


class UnusableInput(TrustError):
    """A file or value given on the command line that cannot be used: exit 2. Its codes are
    the packager's ``input.*`` where they mean the same (``input.missing``,
    ``input.not-a-file``, ``input.too-big``...)."""

    code_prefix = "input"


def _exercise(rehash: bool, package: str = DEFAULT_PACKAGE) -> reg.Registry:
    """Import Triton the way a user does (``<package>.backends``, ``triton.backends`` unless a
    vendor release renamed it), so the registry sees what Triton loads."""
    import importlib

    registry = reg.get()
    registry.verify(rehash=rehash, package=package)
    try:
        tb = importlib.import_module(f"{package}.backends")  # through the hook or the patch, when installed
    except Exception as exc:
        registry.problems.append(Reason("load.triton", package, describe(exc)))
        return registry
    if not registry.used_by_triton and registry.policy != "off":
        # Triton loaded its backends itself (no hook): show what the registry would admit.
        registry.load(lambda name, package: _triton_load(tb, package))
    from ..triton import probe_active

    probe_active(registry)
    return registry


def _triton_load(tb: Any, package: str) -> Any:
    import importlib

    compiler = importlib.import_module(f"{package}.compiler")
    driver = importlib.import_module(f"{package}.driver")
    return tb.Backend(
        tb._find_concrete_subclasses(compiler, tb.BaseBackend), tb._find_concrete_subclasses(driver, tb.DriverBase)
    )


def _package(args: argparse.Namespace) -> str:
    """``--package``: the import name of the Triton to examine; anything else is unusable input."""
    name: str = args.package
    if not name.isidentifier() or keyword.iskeyword(name) or len(name) > MAX_PACKAGE_NAME:
        raise UnusableInput("name", "--package", f"{name[:80]!r} is not a Python package name (an identifier, "
                                                 "as a Triton is imported: triton, vendor_triton)")
    return name


def _healthy(doc: dict[str, Any]) -> bool:
    rows = doc["backends"] + doc["plugins"]
    return not doc["problems"] and all(r["state"] not in BAD_STATES for r in rows) and not _unenforced(doc)


def _unenforced(doc: dict[str, Any]) -> bool:
    """strict was asked for, but import triton does not go through the registry."""
    return bool(doc["policy"] == STRICT and not doc["used_by_triton"])


def cmd_list(args: argparse.Namespace) -> int:
    doc = _exercise(args.rehash, _package(args)).report()
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
    from ..autohook import pth_path

    registry = _exercise(args.rehash, _package(args))
    doc = registry.report()
    hook = "installed" if os.path.exists(pth_path()) else "not installed"
    print("Triton backend doctor")
    print(f"  {doc['package'] + ':':<12} {_core_line(doc.get('triton_core'), doc['package'])}")
    print(f"  policy:      {doc['policy']} (TRITON_BACKEND_POLICY = strict | warn | off)")
    used = "yes" if doc["used_by_triton"] else "no (Triton discovered its backends itself)"
    print(f"  registry:    used by import {doc['package']}: {used}; .pth hook {hook}")
    for line in _hook_lines(pth_path()):
        print(f"               hook: {line}")
    print(f"  trust files: {', '.join(doc['trust_sources']) or 'none (no key is trusted)'}")
    print(f"  cache:       {doc['cache']}")
    for note in doc["notes"]:
        print(f"               note: {note['path']}: {note['message']} ({note['code']})")
    for renamed in doc["renamed_cores"]:
        print(f"               note: a Triton is installed as {renamed['package']} ({renamed['distribution']}): "
              f"{PROG} doctor --package {renamed['package']}")
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
        print(f"  policy strict is not enforced: import {doc['package']} does not go through the registry "
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
                 f"ops {len(terms['ops'])}",
                 "  (as the plugin's own code reported it when it was signed: nothing the signer checked)"]
    else:
        lines = [f"captured:  no ({terms['capture_note'] or 'not recorded'})"]
    if not terms["declared"]:
        return [*lines, "declared:  nothing (defaults: any Triton, phase import, on-failure fallback)"]
    return [*lines, f"declared:  triton {terms['triton'] or '(any)'}, phase {terms['phase']}, "
                    f"on-failure {terms['on_failure']}; placement {'; '.join(terms['placement']) or 'none'}"]


def _core_line(core: dict[str, Any] | None, package: str = DEFAULT_PACKAGE) -> str:
    """What ``import <package>`` imports: its distribution (found by the file, not the name)."""
    if core is None:
        return f"not installed (no installed distribution's RECORD lists the {package}/__init__.py on sys.path)"
    version = core["__version__"] or "unknown"
    line = f"{core['distribution']} {core['version']} ({package}.__version__ {version}; {core['init']})"
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
    from ..autohook import OLD_PTH_NAMES, PTH_LINE, pth_path

    path = pth_path(args.site)
    olds = [p for n in OLD_PTH_NAMES if os.path.lexists(p := os.path.join(os.path.dirname(path), n))]
    if args.action == "install":
        from ..base import write_atomic

        write_atomic(path, PTH_LINE.encode("utf-8"))
        for old in olds:  # the old name sorts after other .pth files: it must not run as well
            os.unlink(old)
            print(f"removed {old} (the hook's old name)")
        print(f"installed {path}: import triton now goes through the backend registry")
    elif args.action == "uninstall":
        for old in [*olds, path] if os.path.lexists(path) else olds:
            os.unlink(old)
            print(f"removed {old}")
        if not olds and not os.path.lexists(path):
            print(f"not installed ({path} does not exist)")
    else:
        print(f"{'installed' if os.path.exists(path) else 'not installed'}: {path}")
        for line in _hook_lines(path):
            print(f"  {line}")
    return 0


def _hook_lines(path: str) -> list[str]:
    """Where the hook's .pth stands among the .pth files site runs, and what this process saw."""
    from ..autohook import OLD_PTH_NAMES
    from ..base import printable
    from ..loading import CODE, position

    where = position(path, OLD_PTH_NAMES)
    lines = []
    if where["installed"]:
        before = where["before"]
        lines.append("runs first of the .pth files" if not before else
                     f"runs after {len(before)} .pth file(s): {', '.join(before[:5])}")
        lines += [f"note: {p} runs before the hook and imports triton: strict stops every process "
                  f"({CODE})" for p in where["before_importing"]]
    lines += [f"note: {p} is the hook's old name, run after other .pth files: `{PROG} hook install` "
              "replaces it" for p in where["old_names"]]
    seen = where["imported_before_hook"]
    if seen is not None:
        by = ", ".join(seen["by"]) or "code that ran before the hook"
        lines.append(f"triton was imported before the hook in this process, by {by} ({CODE})")
    return [printable(line) for line in lines]  # .pth names are anyone's: one line each


def cmd_trust(args: argparse.Namespace) -> int:
    from ..trust import keys as t

    if args.action == "list":
        return _trust_list()
    directory = t.user_trust_dir() if args.user else t.system_trust_dir()
    if args.action == "min-version":
        return _trust_min_version(directory, args.dist, args.version)
    if args.action == "remove":
        return _trust_remove(directory, args.key)
    if args.action in ("revoke", "unrevoke"):
        return _trust_revoke(directory, args.keyid, revoke=args.action == "revoke")
    if args.action in ("pin", "unpin"):
        return _trust_pin(directory, args.name, getattr(args, "dist", None))
    text, keys = _key_file(args.key)
    try:
        scope = t.parse_scope(args.scope, "--scope") if args.scope is not None else None
    except TrustError as exc:
        raise UnusableInput("name", exc.path, exc.detail) from None
    os.makedirs(directory, exist_ok=True)
    # The scope goes in before the key: a failure in between leaves a scope, never a wider key.
    if scope is not None:
        for key in keys:
            t.set_scope(directory, key.keyid, scope)
    target = os.path.join(directory, f"{keys[0].keyid[:16]}.pub")
    t.write_atomic(target, text.encode("utf-8"))
    print(f"trusted {len(keys)} key(s) from {args.key}: {target}")
    if scope is not None:
        where = os.path.join(directory, t.SCOPES_FILE)
        print(f"  scope: {scope.describe()}; may declare {scope.describe_grants()} ({where})")
    return 0


def _trust_pin(directory: str, name: str, dist: str | None) -> int:
    """``trust pin NAME DIST`` (``dist`` given) or ``trust unpin NAME``, in ``directory``."""
    from ..base import TrustStoreError
    from ..trust import keys as t

    try:
        kind, value = t.parse_pin_name(name, "pin")
        owner = t.parse_name(dist, "pin") if dist is not None else None
    except TrustError as exc:
        raise UnusableInput("name", exc.path, exc.detail) from None
    spec, path = t.pin_text(kind, value), os.path.join(directory, t.PINS_FILE)
    if owner is None:
        removed = t.remove_pin(directory, kind, value)
        if not removed:
            raise TrustStoreError("not-pinned", path, f"{spec} is not pinned here")
        print(f"unpinned {spec} ({path})")
    else:
        os.makedirs(directory, exist_ok=True)
        replaced = t.set_pin(directory, kind, value, owner)
        print(f"pinned {spec} to {owner}: where it is contested, {owner} keeps it ({path})")
        if replaced:
            print(f"  replaced: {'; '.join(line.strip() for line in replaced)}")
    pins, _ = t.load_pins()
    now = pins.get((kind, value))
    if now is not None and now.dist != owner:
        print(f"  note: {spec} is pinned to {now.describe()} by {', '.join(now.sources)}")
    return EXIT_OK


def _trust_min_version(directory: str, dist: str, version: str) -> int:
    from packaging.version import InvalidVersion, Version

    from ..trust import keys as t

    try:
        name = t.parse_name(dist, "min-version")
        if len(version) > t.MAX_VERSION_CHARS:  # before parsing: a 5000-digit release is past int()'s limit
            raise InvalidVersion(version)
        Version(version)
    except TrustError as exc:
        raise UnusableInput("name", exc.path, exc.detail) from None
    except (InvalidVersion, ValueError):  # ValueError: a release number too long for int()
        raise UnusableInput("version", "min-version", f"{version[:80]!r} is not a PEP 440 version of at most "
                                                      f"{t.MAX_VERSION_CHARS} characters") from None
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, t.FLOORS_FILE)
    replaced = t.set_floor(directory, name, version)
    print(f"floor for {name}: releases below {version} are refused ({path})")
    if replaced:
        print(f"  replaced: {'; '.join(line.strip() for line in replaced)}")
    return 0


def _trust_list() -> int:
    from ..trust import load_trust_store

    store, problems = load_trust_store()
    for key in store.keys.values():
        if store.suspended() or store.revoked_by(key.keyid):
            continue  # not in effect: listed with the revocations
        scope = store.scopes.get(key.keyid)
        where = f"  scope: {scope.describe()} ({', '.join(scope.sources)})" if scope else ""
        print(f"{key.keyid}  {key.comment}  ({key.source}){where}")
        if scope is not None:
            print(f"  may declare: {scope.describe_grants()}")
    for keyid, scope in store.scopes.items():
        if keyid not in store.keys:
            print(f"scope {keyid}: {scope.describe()} ({', '.join(scope.sources)}; no such trusted key)")
    for name, floor in sorted(store.floors.items()):
        print(f"min-version {name} {floor.describe()}  ({floor.source})")
    from ..trust import pin_text

    for (kind, value), pin in sorted(store.pins.items()):
        print(f"pin {pin_text(kind, value)} {pin.describe()}  ({', '.join(pin.sources)})")
    for line in _revocation_lines(store):
        print(line)
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
    doctor.add_argument("--package", default=DEFAULT_PACKAGE, metavar="NAME", help=PACKAGE_HELP)
    doctor.set_defaults(func=_doctor_entry)
    listing = sub.add_parser("list", help="list backends and plugins with their state")
    listing.add_argument("--json", action="store_true", help="the full report as JSON")
    listing.add_argument("--rehash", action="store_true", help="ignore the verification cache; hash every file")
    listing.add_argument("--package", default=DEFAULT_PACKAGE, metavar="NAME", help=PACKAGE_HELP)
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
        "--scope", metavar="ITEM[,ITEM...]",
        help="the only distributions this key may sign (DIST) and names it may declare (backend:NAME, "
             "pass:NAME, dialect:NAME, op:NAME; KIND:* for any): replaces its scope in that directory",
    )
    trust_add.add_argument("--user", action="store_true", help=user_help)
    floor = trust_actions.add_parser("min-version", help="refuse releases of a distribution below a version (rollback)")
    floor.add_argument("dist", help="distribution name")
    floor.add_argument("version", help="lowest admitted version (PEP 440)")
    floor.add_argument("--user", action="store_true", help=user_help)
    trust_actions.add_parser("list", help="trusted keys with their scopes, version floors, pins, revocations")
    pin = trust_actions.add_parser("pin", help="let a distribution keep a contested name (the core's included)")
    pin.add_argument("name", metavar="[KIND:]NAME", help="a backend name, or pass:, dialect:, op:, target:NAME")
    pin.add_argument("dist", help="the distribution that owns it")
    pin.add_argument("--user", action="store_true", help=user_help)
    unpin = trust_actions.add_parser("unpin", help="drop a pin from a trust directory")
    unpin.add_argument("name", metavar="[KIND:]NAME", help="the pinned name")
    unpin.add_argument("--user", action="store_true", help=user_help)
    remove = trust_actions.add_parser(
        "remove", help="stop trusting a key: its lines leave the trust directory's .pub files (atomically)"
    )
    remove.add_argument("key", metavar="KEYID_OR_FILE",
                        help="a keyid (or a prefix of at least 8 hex digits) or a public key file")
    remove.add_argument("--user", action="store_true", help=user_help)
    keyid_help = ("the keyid: its first 16 hex digits as the tools print it, or all 64, any case, 'keyid:' allowed; "
                  "16 to 63 digits revoke every key whose keyid starts with them")
    revoke = trust_actions.add_parser(
        "revoke", help="refuse a key's signatures, even where the key is trusted (a line in the revoked file)"
    )
    revoke.add_argument("keyid", metavar="KEYID", help=keyid_help)
    revoke.add_argument("--user", action="store_true", help=user_help)
    unrevoke = trust_actions.add_parser("unrevoke", help="take back the revocations of a key in a trust directory")
    unrevoke.add_argument("keyid", metavar="KEYID", help=keyid_help)
    unrevoke.add_argument("--user", action="store_true", help=user_help)
    trust.set_defaults(func=cmd_trust)
    _grammar(parser, sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run one command. Every failure ends here as one line, ``PROG: error: PATH: DETAIL
    (CODE)`` on stderr (with ``--json`` also ``{"format": 1, "error": {...}}`` on stdout),
    and an exit code: never a traceback, unless ``-v`` asks for the one of an internal error."""
    try:
        try:
            code = _main(argv)
        except SystemExit as exc:  # argparse: --help, --version, usage errors
            code = exc.code if isinstance(exc.code, int) else EXIT_OK if exc.code is None else EXIT_USAGE
        sys.stdout.flush()  # here, so that a closed pipe is met inside the handlers below
        return code
    except BrokenPipeError:
        return pipe_closed()
    except OSError as exc:  # the flush above: stdout on a full disk (`> /dev/full`)
        pipe_closed()  # what stdout still holds is lost either way; the exit flush must not raise
        return _fail(argparse.Namespace(), from_os_error(exc, "<stdout>"), EXIT_FAILED)


def _main(argv: list[str] | None) -> int:
    args = build_parser().parse_args(argv)

    def command() -> int:
        with _quiet(args.quiet and not getattr(args, "json", False)):
            return int(args.func(args))

    return run_command(PROG, args, command, (UnusableInput,))


# -- one grammar: --version, -q/-v, exit codes, pipes -------------------------------------


def _grammar(parser: argparse.ArgumentParser, sub: Any) -> None:
    """``--version`` and ``-q``/``-v``, the latter before or after the command."""
    from .. import __version__

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
    from ..loading import BackendWarning

    with open(os.devnull, "w") as devnull, contextlib.redirect_stdout(devnull), warnings.catch_warnings():
        warnings.simplefilter("ignore", BackendWarning)
        yield


def _fail(args: argparse.Namespace, error: TrustError, code: int) -> int:
    return fail(PROG, args, error, code)


# -- doctor --json ------------------------------------------------------------------------


def _doctor_entry(args: argparse.Namespace) -> int:
    if not args.json:
        code = int(cmd_doctor(args))
        if args.verbose:
            _doctor_details(reg.get().report())
        return code
    from ..autohook import pth_path

    doc = _exercise(args.rehash, _package(args)).report()
    from ..autohook import OLD_PTH_NAMES
    from ..loading import position

    healthy = _healthy(doc)
    out = {"format": JSON_FORMAT, "healthy": healthy, "enforced": not _unenforced(doc),
           "hook": position(pth_path(), OLD_PTH_NAMES), **doc}
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
    from ..base import RegularFileError, read_regular
    from ..trust import keys as t

    try:
        text = read_regular(path, MAX_KEY_FILE).decode("utf-8")
    except RegularFileError as exc:
        raise UnusableInput(exc.reason, path, exc.detail) from None
    except UnicodeDecodeError:
        raise UnusableInput("key", path, "cannot read key file: not UTF-8 text") from None
    try:
        keys = t.parse_key_file(text, path)
    except TrustError as exc:
        raise UnusableInput("key", exc.path, f"{exc.detail} (a public key line as written by backend-packager "
                                             "keygen)") from None
    if not keys:
        raise UnusableInput("key", path, "the file holds no public key")
    return text, keys


def _trust_remove(directory: str, target: str) -> int:
    wanted = _keyids(target)
    files = {path: _key_lines(path) for path in _pub_files(directory)}
    removed = {keyid for lines in files.values() for _, keyid in lines if keyid is not None and wanted(keyid)}
    if not removed:
        from ..base import TrustStoreError

        raise TrustStoreError("no-such-key", directory, f"no trusted key matches {target}")
    if len(removed) > 1 and not os.path.lexists(target):  # refused before anything is removed
        raise UnusableInput("ambiguous", target, f"the prefix matches {len(removed)} keys "
                                                 f"({', '.join(sorted(removed))}); give more digits")
    for path, lines in files.items():
        _drop_lines(path, lines, removed)
    for keyid in sorted(removed):
        print(f"removed {keyid} from {directory}")
    from ..trust import load_trust_store

    still = sorted(k for k in load_trust_store()[0].keys if k in removed)
    for keyid in still:
        print(f"  note: {keyid} is still trusted from another trust directory (trust list shows where)")
    return EXIT_OK


def _keyids(target: str) -> Callable[[str], bool]:
    """What ``target`` names: the keys of a file when something is there (a FIFO or a
    directory too, refused as such), else a keyid or a prefix of one."""
    if os.path.lexists(target):
        exact = {key.keyid for key in _key_file(target)[1]}
        return exact.__contains__
    prefix = target.lower()
    if not re.fullmatch(r"[0-9a-f]{8,64}", prefix):
        raise UnusableInput("key", target, "neither a key file nor a keyid (8 to 64 hex digits)")
    return lambda keyid: keyid.startswith(prefix)


def _pub_files(directory: str) -> list[str]:
    try:
        with os.scandir(directory) as entries:
            return sorted(e.path for e in entries if e.name.endswith(".pub") and e.is_file(follow_symlinks=False))
    except FileNotFoundError:
        return []


def _key_lines(path: str) -> list[tuple[str, str | None]]:
    """The lines of a trust directory's ``.pub`` file, each with the keyid it holds, if any."""
    from ..base import RegularFileError, TrustStoreError, read_regular

    try:
        data = read_regular(path, MAX_KEY_FILE)
    except RegularFileError as exc:
        if exc.reason == "too-big":  # rewriting only the first MiB would lose the rest
            raise UnusableInput("too-big", path, f"{exc.detail}: not a key file this command rewrites") from None
        raise TrustStoreError("read", path, f"cannot read trust file: {exc.detail}") from None
    return [(line, _keyid_of_line(line, path)) for line in data.decode("utf-8", errors="replace").splitlines()]


def _drop_lines(path: str, lines: list[tuple[str, str | None]], keyids: set[str]) -> None:
    """Rewrite ``path`` without the key lines of ``keyids`` at once, or remove it when no key
    is left in it. Lines that are not keys are kept as they are."""
    from ..trust import keys as t

    kept = [(line, keyid) for line, keyid in lines if keyid not in keyids]
    if len(kept) == len(lines):
        return
    if any(keyid is not None for _, keyid in kept):
        t.write_atomic(path, ("\n".join(line for line, _ in kept) + "\n").encode("utf-8"))
    else:
        os.unlink(path)


def _keyid_of_line(line: str, where: str) -> str | None:
    from ..trust import keys as t

    if not line.strip() or line.lstrip().startswith("#"):
        return None
    try:
        return t.parse_key_line(line.strip(), where).keyid
    except TrustError:
        return None


# -- trust revoke / unrevoke ----------------------------------------------------------------


def _trust_revoke(directory: str, text: str, *, revoke: bool) -> int:
    """``trust revoke KEYID`` or ``trust unrevoke KEYID`` in ``directory``'s revoked file."""
    from ..base import TrustStoreError
    from ..trust import REVOKED_FILE, load_trust_store, revocation

    wanted = revocation.parse_id(text)
    if wanted is None:
        raise UnusableInput("keyid", text[:100], f"not a keyid: {revocation.MIN_PREFIX_HEX} to "
                                                 f"{revocation.KEYID_HEX} hex digits ('keyid:' allowed)")
    path = os.path.join(directory, REVOKED_FILE)
    if revoke:
        os.makedirs(directory, exist_ok=True)
        already = revocation.add(path, wanted)
        if already is not None:
            print(f"already revoked: {path}:{already[1]}: {already[0].strip()}")
        else:
            print(f"revoked {wanted} ({path})")
    else:
        removed = revocation.remove(path, wanted)
        if not removed:
            raise TrustStoreError("not-revoked", path, f"no revocation of {wanted} here")
        print(f"took back {'; '.join(line.strip() for line in removed)} ({path})")
    store, _ = load_trust_store()
    keys = [k for k in store.keys.values() if k.keyid.startswith(wanted) or wanted.startswith(k.keyid)]
    for key in keys:
        by = store.revoked_by(key.keyid)
        state = f"revoked ({by} in {store.revoked_at.get(by, '-')})" if by else "trusted: its signatures count"
        comment = f" {key.comment}" if key.comment else ""
        print(f"  key {key.keyid}{comment} ({key.source}): {state}")
    if not keys:
        print(f"  no trusted key has this keyid{' now: a key with it is refused when added' if revoke else ''}")
    if store.suspended():
        print(f"  note: {store.suspended()} (trust list shows the line)")
    return EXIT_OK


def _revocation_lines(store: TrustStore) -> list[str]:
    """What the revocations do, for ``trust list``: the keys they revoke; a revocation that
    matches no trusted key says so, never shown as a revoked key."""
    from ..trust import revoking

    lines = []
    reason = store.suspended()
    for key in store.keys.values():
        by = revoking(store.revoked, key.keyid)
        if by is not None:
            lines.append(f"revoked {key.keyid}  {key.comment}  ({key.source}; by {by} in {store.revoked_at.get(by)})")
        elif reason is not None:
            lines.append(f"suspended {key.keyid}  {key.comment}  ({key.source}): {reason}")
    matched = {revoking(store.revoked, k) for k in store.keys}
    for wanted in sorted(set(store.revoked) - matched):
        lines.append(f"revocation {wanted} ({store.revoked_at.get(wanted, '-')}): matches no trusted key, "
                     "revokes nothing now (a key with it is refused when added)")
    if reason is not None and not store.keys:
        lines.append(f"no key counts: {reason}")
    return lines

