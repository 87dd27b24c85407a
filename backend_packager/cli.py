"""The ``backend-packager`` command line.

Exit codes: 0 success; 1 the command ran and found a problem (a file failed to scan, a
wheel failed to verify); 2 bad usage or unusable input (argparse's own convention).
Errors print as one line, ``backend-packager: error: PATH: DETAIL``, never a traceback.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from triton_backend_runtime.base import TrustStoreError, printable
from triton_backend_runtime.cli import EXIT_FAILED, EXIT_OK, EXIT_USAGE, JSON_FORMAT, fail, run_command
from triton_backend_runtime.manifest import model as manifest_mod
from triton_backend_runtime.manifest import schema

from . import __version__
from .base import InputError, TrustError

PROG = "backend-packager"


def _progress(enabled: bool) -> Any:
    if not enabled:
        return None

    def show(item: str) -> None:
        sys.stderr.write(f"\r\x1b[Kscanning {item[-100:]}")
        sys.stderr.flush()

    return show


def _end_progress(enabled: bool) -> None:
    if enabled:
        sys.stderr.write("\r\x1b[K")


def cmd_scan(args: argparse.Namespace) -> int:
    from .commands import scan_paths

    live = sys.stderr.isatty() and not args.json
    result = scan_paths(args.paths, progress=_progress(live))
    _end_progress(live)
    if args.json:
        doc = {
            "format": JSON_FORMAT,
            "artifacts": [schema.encode(a) for a in result.artifacts],
            "errors": [e.as_dict() for e in result.errors],
            "warnings": [w.as_dict() for w in result.warnings],
        }
        print(json.dumps(doc, indent=1, sort_keys=True))
    else:
        _print_scan_table(result.artifacts, result.kinds)
    for warning in result.warnings:
        print(f"backend-packager: warning: {warning}", file=sys.stderr)
    for error in result.errors:
        print(f"backend-packager: error: {error}", file=sys.stderr)
    return EXIT_FAILED if result.errors else EXIT_OK


def _print_scan_table(artifacts: list[Any], kinds: list[str]) -> None:
    """One row per artifact; ``kinds`` (from scan.kind_of) labels PIE files executables."""
    if not artifacts:
        return
    rows = [("PATH", "ARCH", "EXPORTS", "IMPORTS", "GLIBC", "MANYLINUX", "KIND", "SHA256")]
    for art, kind in zip(artifacts, kinds, strict=True):
        elf = art.elf
        rows.append((
            art.path,
            elf.machine if elf else "-",
            str(elf.exports.count) if elf else "-",
            str(len(elf.imports)) if elf else "-",
            (elf.glibc or "-") if elf else "-",
            elf.manylinux if elf else "-",
            kind,
            art.sha256[:12],
        ))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for row in rows:
        print("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip())


def cmd_schema(args: argparse.Namespace) -> int:
    print(json.dumps(manifest_mod.json_schema(), indent=2))
    return EXIT_OK


def cmd_keygen(args: argparse.Namespace) -> int:
    from .manifest import signing

    private, public = key_paths(args.output)
    for path in (private, public):
        if path.exists() and not args.force:
            raise InputError("exists", str(path), "exists (use --force to replace it)")
    passphrase = os.environ.get(signing.PASSPHRASE_ENV)
    key = signing.generate(private, public, args.comment, passphrase.encode() if passphrase else None)
    if args.json:
        print(json.dumps({"format": JSON_FORMAT, "private": str(private), "public": str(public),
                          "keyid": key.keyid, "line": key.line()}))
    elif not args.quiet:
        print(f"private key: {private}{' (encrypted)' if passphrase else ''}")
        print(f"public key:  {public}")
        print(f"keyid:       {key.keyid}")
    return EXIT_OK


def key_paths(private: Path) -> tuple[Path, Path]:
    """The private key's path and its public twin's (``.pub`` beside it), refusing any
    choice where writing one would destroy the other."""
    public = private.with_suffix(".pub")
    if private.suffix == ".pub":
        raise InputError("key-path", str(private), "ends in .pub, the name of the public twin: the public key "
                         "would overwrite the private one (use e.g. -o vendor.pem)")
    if private.is_dir():
        raise InputError("key-path", str(private), "is a directory: give the private key's file name")
    if private.exists() and public.exists() and os.path.samefile(private, public):
        raise InputError("key-path", str(private), f"is the same file as {public}: the public key would "
                         "overwrite the private one")
    return private, public


def _signing_key(path: Path | None) -> Any:
    """The key from --key, else from BACKEND_PACKAGER_SIGNING_KEY, else None (hash-only).
    Called before any input is opened: the key's path and its passphrase are taken out of
    the environment first, so that no child (and nothing that reads this process's
    ``/proc/PID/environ``) finds them."""
    from .manifest import SIGNING_KEY_ENV, signing

    named = signing.take_env(SIGNING_KEY_ENV)
    passphrase = signing.take_env(signing.PASSPHRASE_ENV)
    if path is None and named:
        path = Path(named)
    return signing.load(path, passphrase.encode() if passphrase else None) if path else None


def _capture_policy(args: argparse.Namespace) -> Any:
    """--capture-plugins[-unsafe-no-sandbox] as a :data:`.plugininfo.Policy` (off by
    default: loading a plugin runs its code); the unsafe flag warns where it takes effect."""
    if args.capture_plugins_unsafe_no_sandbox:
        from .scanning import available

        why = available()
        if why is not None:
            print(f"backend-packager: warning: no sandbox can be made here ({printable(why)}): "
                  "--capture-plugins-unsafe-no-sandbox runs each plugin's code as this user, where it can read "
                  "the signing key", file=sys.stderr)
        return "sandbox-or-unsafe"
    return "sandbox" if args.capture_plugins else "off"


def _backend_overrides(values: list[str]) -> dict[str, str]:
    overrides = {}
    for value in values:
        name, sep, package = value.partition("=")
        if not sep or not name or not package:
            raise argparse.ArgumentTypeError(f"--backend {value!r}: expected NAME=PACKAGE")
        overrides[name.strip()] = package.strip()
    return overrides


def cmd_migrate(args: argparse.Namespace) -> int:
    from .base import WheelProgress
    from .commands import Options, migrate_many

    try:
        overrides = _backend_overrides(args.backend)
    except argparse.ArgumentTypeError as exc:
        raise InputError("usage", "--backend", str(exc)) from None
    key = _signing_key(args.key)
    wheels = _wheels_in(args.inputs)
    bar = WheelProgress(wheels, enabled=False if args.json or args.quiet else None)
    plain = not bar.enabled and not args.json

    def done(outcome: Any) -> None:
        bar.on_wheel(outcome.source)
        if plain:
            _print_outcome(outcome, args.quiet)

    options = Options(triton_package=args.triton_package, rewrite_record=args.rewrite_record,
                      capture=_capture_policy(args))
    outcomes = migrate_many(wheels, args.output, key, overrides=overrides, jobs=args.jobs,
                            progress=bar.on_bytes, done=done, drop_signature=args.drop_signature, options=options)
    bar.close()
    if args.json:
        print(json.dumps({"format": JSON_FORMAT, "wheels": [o.as_dict() for o in outcomes],
                          "failed": sum(o.error is not None for o in outcomes)}, indent=1))
    elif bar.enabled:
        for outcome in outcomes:
            _print_outcome(outcome, args.quiet)
    return EXIT_FAILED if any(o.error for o in outcomes) else EXIT_OK


def _wheels_in(paths: list[Path]) -> list[Path]:
    """Wheel files as given and every ``*.whl`` of a directory; none at all is a usage error."""
    from .commands import expand_inputs

    wheels = expand_inputs(paths)
    if not wheels:
        raise InputError("no-wheels", " ".join(map(str, paths)), "no wheels found in the given paths")
    return wheels


def _print_outcome(outcome: Any, quiet: bool = False) -> None:
    if outcome.error:
        print(f"backend-packager: error: {outcome.error} ({outcome.error.code})", file=sys.stderr)
        return
    for found in outcome.discrepancies:  # each rewritten from the contents (--rewrite-record)
        print(f"backend-packager: repaired: {outcome.source}: {found.code}: {found.path}: {found.detail}",
              file=sys.stderr)
    if quiet:
        return
    signer = f"signed by {outcome.signed_by[:16]}" if outcome.signed_by else "hash-only"
    backends = ", ".join(outcome.backends) or "none"
    print(f"{outcome.status} {outcome.source.name} -> {outcome.output} "
          f"(backends: {backends}; {outcome.artifacts} artifacts, {outcome.native} native; "
          f"{len(outcome.plugins)} plugins; {signer}; "
          f"{outcome.seconds:.1f}s)")
    for warning in outcome.warnings:
        print(f"backend-packager: warning: {printable(warning)}", file=sys.stderr)


def cmd_adopt(args: argparse.Namespace) -> int:
    """Exit 0 when every distribution is adopted, 1 when one was refused (files that differ from
    RECORD) or failed, 2 for an unusable key, site-packages directory or distribution name."""
    from .base import ConfigError
    from .commands.adopt import adopt

    try:
        key = _signing_key(args.key)
    except ConfigError as exc:
        raise InputError("key", exc.path, exc.detail) from None
    if key is None:
        raise InputError("key", "--key", "adopt signs: give --key KEY or set BACKEND_PACKAGER_SIGNING_KEY")
    if args.site_packages is not None and not args.site_packages.is_dir():
        raise InputError("site-packages", str(args.site_packages), "not a directory")
    sites = [args.site_packages] if args.site_packages is not None else interpreter_sites()
    capture = _capture_policy(args)
    outcomes = [adopt(sites, name, key, wheel_out=args.wheel_out,
                      against=args.against, jobs=args.jobs, capture=capture)
                for name in args.dists]
    if args.json:
        print(json.dumps({"format": JSON_FORMAT, "distributions": [o.as_dict() for o in outcomes],
                          "failed": sum(o.error is not None for o in outcomes)}, indent=1))
    for outcome in outcomes:
        _print_adoption(outcome, args.quiet or args.json)
    if any(isinstance(o.error, InputError) for o in outcomes):
        return EXIT_USAGE
    return EXIT_FAILED if any(o.error for o in outcomes) else EXIT_OK


def interpreter_sites() -> list[Path]:
    """Where ``adopt`` looks without ``--site-packages``: this interpreter's purelib, then its
    platlib (sysconfig's default scheme), once each; they differ where ``sys.platlibdir`` is
    lib64 or the exec_prefix is not the prefix, and pip installs Triton into platlib."""
    import sysconfig

    paths = sysconfig.get_paths()
    return list(dict.fromkeys(Path(paths[key]) for key in ("purelib", "platlib")))


def _searched(sites: list[Path]) -> str:
    if len(sites) == 1:
        return f"this interpreter's purelib and platlib, here one directory: {sites[0]}"
    return (f"this interpreter's purelib {sites[0]}, then its platlib {sites[1]}; a distribution found in both "
            "is refused")


def _print_adoption(outcome: Any, quiet: bool) -> None:
    if outcome.error:
        print(f"backend-packager: error: {outcome.error} ({outcome.error.code})", file=sys.stderr)
        for mismatch in outcome.mismatches:
            print(f"backend-packager: error:   {mismatch} ({mismatch.code})", file=sys.stderr)
        return
    if quiet:
        return
    backends = ", ".join(outcome.backends) or "none"
    print(f"{outcome.status} {outcome.source} -> {outcome.output} (backends: {backends}; {outcome.artifacts} "
          f"artifacts, {outcome.native} native; signed by {outcome.signed_by[:16]}; wrote "
          f"{', '.join(outcome.written) or 'a wheel'}; {outcome.seconds:.1f}s)")
    for warning in outcome.warnings:
        print(f"backend-packager: warning: {printable(warning)}", file=sys.stderr)


def cmd_mirror(args: argparse.Namespace) -> int:
    """Exit 0 when every wheel is served, 1 when any failed, 2 for usage, an unusable source
    or key, or (with --no-wait) an output directory another run holds."""
    from .base import WheelProgress
    from .commands import mirror

    bars: list[WheelProgress] = []

    def start(paths: list[Path]) -> None:
        bars.append(WheelProgress([p for p in paths if p.exists()], enabled=False if args.json else None))

    def done(path: Path, result: Any) -> None:
        if bars:
            bars[0].on_wheel(path)

    def on_bytes(path: Path, member: str, nbytes: int) -> None:
        if bars:
            bars[0].on_bytes(path, member, nbytes)

    def waiting(lock: Path) -> None:
        print(f"backend-packager: waiting for another mirror run to finish ({lock} is locked)", file=sys.stderr)

    hooks = mirror.Hooks(waiting=waiting, start=start, progress=on_bytes, done=done)
    try:
        key = _signing_key(args.key)
        if key is None:
            print("backend-packager: error: mirror needs --key (or $BACKEND_PACKAGER_SIGNING_KEY)", file=sys.stderr)
            return EXIT_USAGE
        run = mirror.mirror(args.sources, args.output, key, jobs=max(args.jobs, 1),
                            pass_through=args.pass_through_failures, wait=not args.no_wait, hooks=hooks,
                            capture=_capture_policy(args))
    except TrustError as exc:  # a source, the key or the lock: the run could not start
        _fail(args, exc)
        return EXIT_USAGE
    finally:
        if bars:
            bars[0].close()
    if args.json:
        print(json.dumps(run.as_dict(), indent=1))
    else:
        _print_mirror(run)
    return EXIT_FAILED if run.failed else EXIT_OK


def _print_mirror(run: Any) -> None:
    for warning in run.warnings:
        print(f"backend-packager: warning: {printable(warning)}", file=sys.stderr)
    for result in run.results:
        if result.error:
            served = "served unchanged" if result.served else "left out of the index"
            print(f"failed    {result.filename}: {result.error['code']}: {result.error['path']}: "
                  f"{result.error['message']} ({served})")
        elif result.status != "unchanged":
            backends = ", ".join(result.entry.backends) or "none"
            print(f"{result.status:<9} {result.filename} (backends: {backends}; "
                  f"{len(result.entry.plugins)} plugins; {result.seconds:.1f}s)")
    print(f"index: {run.outdir / 'simple'} (signed by {run.keyid[:16]})")
    print(f"\n{'STATUS':<10}WHEELS")
    for status, count in run.counts().items():
        print(f"{status:<10}{count}")


def cmd_verify(args: argparse.Namespace) -> int:
    from triton_backend_runtime.trust import TrustStore, parse_key_file

    from .base import read_input
    from .commands import verify_wheel

    keys = []
    for path in args.trust:
        try:
            text = read_input(path, 1 << 20).decode("utf-8")
        except UnicodeDecodeError:
            raise InputError("trust", str(path), "cannot read key file: not UTF-8 text") from None
        keys += parse_key_file(text, str(path))
    store = TrustStore.of(keys)
    results = [verify_wheel(wheel, store) for wheel in _wheels_in(args.wheels)]
    if args.json:
        print(json.dumps({"format": JSON_FORMAT, "wheels": [
            {"wheel": r.wheel, "ok": r.ok, "signers": list(r.signers), "coverage": r.coverage,
             "findings": [f.as_dict() for f in r.findings], "notes": r.notes}
            for r in results
        ]}, indent=1))
    else:
        for r in results:
            for finding in r.findings:
                print(printable(f"FAIL {r.wheel}: {finding.code}: {finding.path}: {finding.message}"))
            if r.ok:
                names = ", ".join(_key_label(store, k) for k in r.signers)
                count = len(r.manifest.artifacts) if r.manifest else 0
                print(f"OK   {r.wheel}: signed by {names}; {count} artifacts match (coverage {r.coverage})")
            for note in r.notes if not args.quiet else ():
                print(f"NOTE {r.wheel}: {note}")
    return EXIT_OK if all(r.ok for r in results) else EXIT_FAILED


def _key_label(store: Any, keyid: str) -> str:
    comment = store.keys[keyid].comment if keyid in store.keys else ""
    return f"{keyid[:16]}" + (f" ({comment})" if comment else "")


def cmd_init(args: argparse.Namespace) -> int:
    from .commands import scaffold

    project = scaffold.project_for(args.directory, args.name, args.backend, args.package)
    written = scaffold.init(args.directory, project)
    if args.json:
        print(json.dumps({"format": JSON_FORMAT, "directory": str(args.directory), "files": written,
                          **project.variables()}, indent=1))
    else:
        print(f"created {args.directory}: {project.name}, backend {project.backend!r} in package {project.package}")
        for rel in written:
            print(f"  {rel}")
        import shlex

        # A relative key path is relative to where the build starts (config.start_directory).
        print("next: backend-packager keygen -o signing-key.pem && BACKEND_PACKAGER_SIGNING_KEY=signing-key.pem "
              f"python -m build {shlex.quote(str(args.directory))} (its isolated environment installs "
              "triton-backend-packager from the index, or from PIP_FIND_LINKS: see docs/vendor/build.md)")
    return EXIT_OK


def cmd_inspect(args: argparse.Namespace) -> int:
    from .commands import as_json, inspect_wheel, render

    docs: list[dict[str, Any]] = []
    failed = False
    for number, wheel in enumerate(_wheels_in(args.wheels)):
        try:
            inspection = inspect_wheel(wheel)
        except TrustError as exc:
            # One unreadable wheel is its own line; the others are still shown.
            failed = True
            docs.append({"wheel": str(wheel), "error": exc.as_dict()})
            print(f"backend-packager: error: {exc} ({exc.code})", file=sys.stderr)
            continue
        if args.json:
            docs.append({"wheel": str(wheel), **as_json(inspection)})
        else:
            print(("\n" if number else "") + render(inspection))
    if args.json:
        print(json.dumps({"format": JSON_FORMAT, "wheels": docs}, indent=1, sort_keys=True))
    return EXIT_FAILED if failed else EXIT_OK


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="backend-packager",
        description="Scan, sign, package and verify Triton backend wheels.",
        epilog="Exit codes: 0 success; 1 the command ran and found a problem (a file that could not "
        "be scanned, a wheel that failed); 2 bad usage. `backend-packager COMMAND --help` for each command.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    _add_verbosity(parser, argparse.SUPPRESS)
    parser.set_defaults(quiet=False, verbose=0)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    scan = sub.add_parser(
        "scan",
        help="report the ELF facts of .so files, directories or wheels",
        description="Report the ELF facts a manifest records for each shared library or "
        "executable: exports, imports, needed libraries, glibc requirement, plugin API. "
        "Exit 1 if any file could not be scanned.",
    )
    scan.add_argument("paths", nargs="+", type=Path, metavar="PATH", help=".so file, directory or .whl")
    scan.add_argument("--json", action="store_true", help="print artifact records as the manifest holds them")
    scan.set_defaults(func=cmd_scan)

    keygen = sub.add_parser(
        "keygen",
        help="create an Ed25519 signing key pair",
        description="Write an Ed25519 private key (PKCS#8 PEM, mode 0600) and, beside it with the "
        "suffix .pub, the one-line public key the runtime's trust store reads. The private key is "
        "encrypted when the environment variable BACKEND_PACKAGER_KEY_PASSPHRASE is set.",
    )
    keygen.add_argument("-o", "--output", type=Path, default=Path("backend-signing-key.pem"),
                        help="private key path (default: %(default)s)")
    keygen.add_argument("--comment", default="", help="comment stored in the public key line")
    keygen.add_argument("--force", action="store_true", help="replace existing key files")
    keygen.add_argument("--json", action="store_true", help="print the result as JSON")
    keygen.set_defaults(func=cmd_keygen)

    migrate = sub.add_parser(
        "migrate",
        help="add a signed manifest and entry points to legacy wheels",
        description="For each legacy wheel (or every *.whl in a directory): find its backends "
        "(triton.backends entry points, else triton/backends/<name>/ directories, for which entry "
        "points are then added), hash every file and scan the native ones, and write OUTDIR/<same name>.whl "
        "with a signed manifest that vouches for every file. A wheel that already has one is re-scanned and "
        "re-signed (use this after auditwheel repair). The input is never modified. Exit 1 if any wheel failed.",
    )
    migrate.add_argument("inputs", nargs="+", type=Path, metavar="WHEEL_OR_DIR")
    migrate.add_argument("-o", "--output", type=Path, default=Path("wheelhouse"), metavar="OUTDIR",
                         help="output directory (default: %(default)s, as auditwheel's)")
    migrate.add_argument("--drop-signature", action="store_true",
                         help="without --key, migrate a signed wheel anyway: its output is hash-only")
    _add_key(migrate, "; without one the manifest is hash-only")
    _add_capture(migrate)
    _add_jobs(migrate, "wheels (or, for one wheel, members) processed in parallel")
    migrate.add_argument("--backend", action="append", default=[], metavar="NAME=PACKAGE",
                         help="declare a backend explicitly (repeatable); overrides discovery")
    migrate.add_argument("--triton-package", type=python_package, metavar="NAME",
                         help="the Triton package the backends plug into (entry-point group NAME.backends, "
                         "directories NAME/backends/*/), for a vendor release that renames 'triton' when the "
                         "wheel does not tell (default: read from the wheel, else triton)")
    migrate.add_argument("--rewrite-record", action="store_true",
                         help="migrate a wheel whose RECORD or file-name tags disagree with its contents, from the "
                         "contents: RECORD and the file name are rewritten, every discrepancy is listed and "
                         "recorded in the manifest's provenance")
    migrate.add_argument("--json", action="store_true", help="print a JSON summary")
    migrate.set_defaults(func=cmd_migrate)

    adopt = sub.add_parser(
        "adopt",
        help="sign an installed distribution in place (a preinstalled Triton), or write its wheel",
        description="For each DIST installed in site-packages: check every file against its RECORD (sha256 "
        "and size; paths confined to site-packages, symlinks not followed) and refuse, listing them, if any "
        "differs; then write the signed manifest into its .dist-info, entry points for triton/backends/<name>/ "
        "directories, and RECORD last, each file atomically, planned and signed as migrate does. With "
        "--wheel-out, write a signed wheel of the distribution to DIR instead and leave the installed files "
        "alone. Exit 1 if a distribution was refused or failed, 2 for an unusable key, directory or name.",
    )
    adopt.add_argument("dists", nargs="+", metavar="DIST", help="installed distribution name, e.g. triton")
    adopt.add_argument("--site-packages", type=Path, metavar="DIR",
                       help=f"where DIST is installed (default: {_searched(interpreter_sites())})")
    _add_key(adopt)
    _add_capture(adopt)
    adopt.add_argument("--wheel-out", type=Path, metavar="DIR", help="write a signed wheel here instead")
    adopt.add_argument("--against", metavar="WHEEL|INDEX",
                       help="compare every installed file with the published release, not only with RECORD on "
                       "disk (which whoever changed a file could rewrite): a wheel file or URL, or a simple index "
                       "(a directory, file:// or http(s) URL) holding the same wheel; any difference is refused "
                       "(installed.differs)")
    _add_jobs(adopt, "files checked in parallel")
    adopt.add_argument("--json", action="store_true", help="print a JSON summary (format 1)")
    adopt.set_defaults(func=cmd_adopt)

    mirror = sub.add_parser(
        "mirror",
        help="keep a signed wheel mirror (a PEP 503/691 simple index) that pip installs from",
        description="Migrate every wheel of each SRC (a directory of wheels, or a PEP 503 simple index on "
        "disk) into OUTDIR, signed with KEY, and write OUTDIR/simple, a PEP 503 index with PEP 691 JSON "
        "beside it (pip install --index-url file://OUTDIR/simple NAME). Wheels without a Triton backend or "
        "plugin are copied through unchanged. A re-run works only on new or changed wheels (all of them "
        "when the key changed), recorded in OUTDIR/.mirror-state.json. A second run on the same OUTDIR "
        "waits for the first (or exits 2 with --no-wait). Exit 1 if any wheel failed: it is left out of "
        "the index, or served unchanged with --pass-through-failures.",
    )
    mirror.add_argument("sources", nargs="+", type=Path, metavar="SRC")
    mirror.add_argument("-o", "--output", type=Path, required=True, metavar="OUTDIR", help="the mirror directory")
    _add_key(mirror)
    _add_capture(mirror)
    _add_jobs(mirror, "wheels processed in parallel")
    mirror.add_argument("--pass-through-failures", action="store_true",
                        help="serve a wheel that cannot be migrated unchanged instead of leaving it out")
    mirror.add_argument("--no-wait", action="store_true", help="exit 2 at once if another run holds OUTDIR")
    mirror.add_argument("--json", action="store_true", help="print every wheel's result as JSON (format 1)")
    mirror.set_defaults(func=cmd_mirror)

    verify = sub.add_parser(
        "verify",
        help="check a wheel's signed manifest offline",
        description="Check each wheel offline: the manifest's signature against the trusted keys; every "
        "artifact's sha256 and size; the manifest against RECORD; no file left out of the manifest (for an "
        "old manifest that covers native files only: no shared library, and a NOTE line says so); name, "
        "version and tags in the signed payload equal to the wheel's own; the "
        "triton.backends entry points equal to the signed backends. Each failure is printed on its own "
        "line. Exit 0 only when every wheel passes every check, 1 otherwise, 2 for unusable arguments.",
    )
    verify.add_argument("wheels", nargs="+", type=Path, metavar="WHEEL_OR_DIR",
                        help="wheels, or directories whose *.whl are verified")
    verify.add_argument("--trust", type=Path, action="append", required=True, metavar="KEYFILE",
                        help="public key file (lines as written by keygen); repeatable")
    verify.add_argument("--json", action="store_true", help="print the findings as JSON")
    verify.set_defaults(func=cmd_verify)

    insp = sub.add_parser(
        "inspect",
        help="print a wheel's manifest readably",
        description="Print what a wheel's manifest says: backends, plugins, artifacts, requirements and "
        "signer keyids (or that it is hash-only). The signature is NOT checked: use verify for that.",
    )
    insp.add_argument("wheels", nargs="+", type=Path, metavar="WHEEL_OR_DIR",
                      help="wheels, or directories whose *.whl are inspected")
    insp.add_argument("--json", action="store_true", help="print the manifest as JSON")
    insp.set_defaults(func=cmd_inspect)

    init = sub.add_parser(
        "init",
        help="create a new vendor backend project",
        description="Create DIR (absent or empty) holding a Triton backend project that builds as it is "
        "with `python -m build` into a wheel with a signed manifest: pyproject.toml configured for "
        "backend_packager.build, a C driver library, and compiler.py / driver.py subclassing Triton's "
        "BaseBackend / DriverBase. Names default from DIR: acme-backend -> backend 'acme', package "
        "acme_backend.",
    )
    init.add_argument("directory", type=Path, metavar="DIR")
    init.add_argument("--name", help="distribution name (default: DIR's name)")
    init.add_argument("--backend", help="backend name, the triton.backends entry point")
    init.add_argument("--package", help="Python package holding compiler.py and driver.py")
    init.add_argument("--json", action="store_true", help="print what was created as JSON")
    init.set_defaults(func=cmd_init)

    sch = sub.add_parser("schema", help="print the manifest's JSON Schema", description="Print the JSON "
                         "Schema of the manifest, generated from the runtime's definition.")
    sch.set_defaults(func=cmd_schema)
    for command in sub.choices.values():
        _add_verbosity(command, argparse.SUPPRESS)
    return parser


def _add_key(parser: argparse.ArgumentParser, note: str = "") -> None:
    # config.SIGNING_KEY_ENV, spelled out: importing config (tomllib) costs every command ~30 ms.
    parser.add_argument("--key", type=Path,
                        help=f"Ed25519 private key (PEM); default: $BACKEND_PACKAGER_SIGNING_KEY{note}")


def _add_capture(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--capture-plugins", action="store_true",
                        help="ask each Triton plugin library what it provides (tritonGetPluginInfo), in a sandbox "
                        "(user, PID, mount and network namespaces; see docs/vendor/plugin-capture.md); "
                        "where none can be made the plugin is recorded 'no-sandbox'. "
                        "Default: no plugin code runs ('not-run')")
    parser.add_argument("--capture-plugins-unsafe-no-sandbox", action="store_true",
                        help="as --capture-plugins, but where no sandbox can be made run the plugin's code anyway, "
                        "as this user: it can then read the signing key and everything else you can")


def _add_jobs(parser: argparse.ArgumentParser, what: str) -> None:
    parser.add_argument("--jobs", type=positive_int, default=os.cpu_count() or 1,
                        help=f"{what} (default: %(default)s)")


def _add_verbosity(parser: argparse.ArgumentParser, default: Any) -> None:
    """-q/-v on the main parser and on every command, so either place works."""
    parser.add_argument("-q", "--quiet", action="store_true", default=default,
                        help="print only errors: no progress, warnings or notes")
    parser.add_argument("-v", "--verbose", action="count", default=default,
                        help="say more; -v also shows the traceback of an internal error")


def python_package(text: str) -> str:
    """argparse type for --triton-package: one importable name (no dots, no slashes)."""
    if not text.isidentifier():
        raise argparse.ArgumentTypeError(f"{text!r} is not a Python package name")
    return text


def positive_int(text: str) -> int:
    """argparse type for --jobs: a whole number of at least 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text} is not a positive number")
    return value


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command. Every failure ends here as one line (and, with ``--json``, one
    object on stdout) and an exit code: never a traceback, unless ``-v`` asks for one."""
    args = build_parser().parse_args(argv)
    return run_command(PROG, args, lambda: args.func(args), _USAGE_ERRORS)


#: Classes whose errors mean the input itself is unusable (exit 2), not a checked failure.
_USAGE_ERRORS = (InputError, TrustStoreError)


def _fail(args: argparse.Namespace, exc: TrustError) -> int:
    return fail(PROG, args, exc, EXIT_USAGE if isinstance(exc, _USAGE_ERRORS) else EXIT_FAILED)
