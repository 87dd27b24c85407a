"""``python -m triton_backend_runtime``: doctor, list, hook and trust commands.

Exit codes: 0 all is well; 1 something was excluded, failed or rejected (doctor, list) or
a command failed; 2 usage error.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

from . import registry as reg
from .errors import TrustError
from .verdict import Reason
from .vocab import BAD_STATES, STRICT

PROG = "python -m triton_backend_runtime"


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
        print(json.dumps(doc, indent=1, sort_keys=True))
    else:
        for row in doc["backends"]:
            print(f"{row['name']}\t{row['distribution']} {row['version']}\t{row['trust']}\t{row['state']}")
        for row in doc["plugins"]:
            print(f"plugin {row['path']}\t{row['distribution']} {row['version']}\t{row['trust']}\t{row['state']}")
    return 0 if _healthy(doc) else 1


def cmd_doctor(args: argparse.Namespace) -> int:
    from .autohook import pth_path

    registry = _exercise(args.rehash)
    doc = registry.report()
    hook = "installed" if os.path.exists(pth_path()) else "not installed"
    print("Triton backend doctor")
    print(f"  triton:      {doc['triton'] or 'not installed'}")
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


def _details(row: dict[str, Any]) -> None:
    if row["signers"]:
        label = "signed by" if row["trust"] == "verified" else "signatures (untrusted)"
        print(f"      {label}: {', '.join(row['signers'])}")
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
    with open(args.key, encoding="utf-8") as stream:
        text = stream.read()
    keys = t.parse_key_file(text, args.key)
    if not keys:
        raise TrustError("key", args.key, "the file holds no public key")
    scope = t.parse_scope_names(args.scope, "--scope") if args.scope is not None else None
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

    name = t.parse_name(dist, "min-version")
    try:
        Version(version)
    except InvalidVersion:
        raise TrustError("version", "min-version", f"{version[:80]!r} is not a PEP 440 version") from None
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
    doctor.set_defaults(func=cmd_doctor)
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
    trust.set_defaults(func=cmd_trust)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args))
    except TrustError as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return 1
    except OSError as exc:
        print(f"{PROG}: error: {exc.filename}: {exc.strerror}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
