"""The ``backend-packager`` commands: each takes the parsed arguments, calls into
:mod:`.commands`, prints through :mod:`.clioutput` and returns the exit code."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from triton_backend_runtime.base import printable
from triton_backend_runtime.cli import EXIT_FAILED, EXIT_OK, EXIT_USAGE, JSON_FORMAT
from triton_backend_runtime.manifest import model as manifest_mod
from triton_backend_runtime.manifest import schema

from .base import InputError, TrustError
from .clikeys import key_paths, keyless_signing, signing_key
from .clioutput import (
    end_progress,
    exit_for,
    fail_line,
    key_label,
    print_adoption,
    print_mirror,
    print_outcome,
    print_scan_table,
    progress,
)

__all__ = [
    "INIT_KEY", "build_command", "cmd_adopt", "cmd_init", "cmd_inspect", "cmd_keygen", "cmd_migrate", "cmd_mirror",
    "cmd_sbom", "cmd_scan", "cmd_schema", "cmd_verify", "interpreter_sites"
]


def cmd_scan(args: argparse.Namespace) -> int:
    from .commands import scan_paths

    live = sys.stderr.isatty() and not args.json
    result = scan_paths(args.paths, progress=progress(live))
    end_progress(live)
    if args.json:
        doc = {
            "format": JSON_FORMAT,
            "artifacts": [schema.encode(a) for a in result.artifacts],
            "errors": [e.as_dict() for e in result.errors],
            "warnings": [w.as_dict() for w in result.warnings],
        }
        print(json.dumps(doc, indent=1, sort_keys=True))
    else:
        print_scan_table(result.artifacts, result.kinds)
    for warning in result.warnings:
        print(f"backend-packager: warning: {warning}", file=sys.stderr)
    for error in result.errors:
        print(f"backend-packager: error: {error} ({error.code})", file=sys.stderr)
    return exit_for(result.errors)


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
    key = signing_key(args.key)
    keyless = keyless_signing(args)
    wheels = _wheels_in(args.inputs)
    bar = WheelProgress(wheels, enabled=False if args.json or args.quiet else None)
    plain = not bar.enabled and not args.json

    def done(outcome: Any) -> None:
        bar.on_wheel(outcome.source)
        if plain:
            print_outcome(outcome, args.quiet)

    options = Options(triton_package=args.triton_package, rewrite_record=args.rewrite_record,
                      capture=_capture_policy(args), keyless=keyless)
    outcomes = migrate_many(wheels, args.output, key, overrides=overrides, jobs=args.jobs,
                            progress=bar.on_bytes, done=done, drop_signature=args.drop_signature, options=options)
    bar.close()
    if args.json:
        print(json.dumps({"format": JSON_FORMAT, "wheels": [o.as_dict() for o in outcomes],
                          "failed": sum(o.error is not None for o in outcomes)}, indent=1))
    elif bar.enabled:
        for outcome in outcomes:
            print_outcome(outcome, args.quiet)
    return exit_for(o.error for o in outcomes)


def _wheels_in(paths: list[Path]) -> list[Path]:
    """Wheel files as given and every ``*.whl`` of a directory; none at all is a usage error."""
    from .commands import expand_inputs

    wheels = expand_inputs(paths)
    if not wheels:
        raise InputError("no-wheels", " ".join(map(str, paths)), "no wheels found in the given paths")
    return wheels


def cmd_adopt(args: argparse.Namespace) -> int:
    """Exit 0 when every distribution is adopted, 1 when one was refused (files that differ from
    RECORD) or failed, 2 for an unusable key, site-packages directory or distribution name."""
    from .base import WheelProgress
    from .commands.adopt import adopt

    key = signing_key(args.key)
    keyless = keyless_signing(args)
    if key is None and keyless is None:
        raise InputError("key", "--key", "adopt signs: give --key KEY or set BACKEND_PACKAGER_SIGNING_KEY "
                         "(or --sigstore)")
    if args.site_packages is not None and not args.site_packages.is_dir():
        raise InputError("site-packages", str(args.site_packages), "not a directory")
    sites = [args.site_packages] if args.site_packages is not None else interpreter_sites()
    capture = _capture_policy(args)
    bar = WheelProgress([], enabled=False if args.json or args.quiet or args.wheel_out is None else None)
    outcomes = [adopt(sites, name, key, wheel_out=args.wheel_out,
                      against=args.against, jobs=args.jobs, capture=capture, progress=bar, keyless=keyless)
                for name in args.dists]
    bar.close()
    if args.json:
        print(json.dumps({"format": JSON_FORMAT, "distributions": [o.as_dict() for o in outcomes],
                          "failed": sum(o.error is not None for o in outcomes)}, indent=1))
    for outcome in outcomes:
        print_adoption(outcome, args.quiet or args.json)
    return exit_for(o.error for o in outcomes)


def interpreter_sites() -> list[Path]:
    """Where ``adopt`` looks without ``--site-packages``: this interpreter's purelib, then its
    platlib (sysconfig's default scheme), once each; they differ where ``sys.platlibdir`` is
    lib64 or the exec_prefix is not the prefix, and pip installs Triton into platlib."""
    import sysconfig

    paths = sysconfig.get_paths()
    return list(dict.fromkeys(Path(paths[key]) for key in ("purelib", "platlib")))


def cmd_mirror(args: argparse.Namespace) -> int:
    """Exit 0 when every wheel is served, 1 when any failed, 2 for usage, an unusable source
    or key, or (with --no-wait) an output directory another run holds."""
    from .base import WheelProgress
    from .commands import mirror

    bars: list[WheelProgress] = []

    def start(paths: list[Path]) -> None:
        bars.append(WheelProgress([p for p in paths if p.exists()], enabled=False if args.json or args.quiet else None))

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
        key = signing_key(args.key)
        keyless = keyless_signing(args, attach=False)
        bundles: Path | None = args.sigstore_bundle
        if bundles is not None and not bundles.is_dir():
            raise InputError("missing", str(bundles), "--sigstore-bundle: not a directory of WHEEL.sigstore.json "
                             "bundles")
        if key is None and keyless is None and bundles is None:
            raise InputError("key", "--key", "mirror needs --key KEY (or BACKEND_PACKAGER_SIGNING_KEY) or --sigstore: "
                             "it signs")
        upstream = tuple(mirror.parse_upstream(text) for text in args.upstream_identity)
        if args.upstream_root is not None and not upstream:
            raise InputError("upstream-root", "--upstream-root", "needs --upstream-identity: the root verifies "
                             "the upstream attestations those identities must sign")
        root = mirror.load_root(args.upstream_root) if args.upstream_root is not None else None
        run = mirror.mirror(args.sources, args.output, key, jobs=max(args.jobs, 1),
                            pass_through=args.pass_through_failures, wait=not args.no_wait, hooks=hooks,
                            capture=_capture_policy(args), keyless=keyless,
                            upstream=upstream, upstream_root=root, sigstore_bundles=bundles)
    except TrustError as exc:  # a source, the key or the lock: the run could not start
        fail_line(args, exc)
        return EXIT_USAGE
    finally:
        if bars:
            bars[0].close()
    if args.json:
        print(json.dumps(run.as_dict(), indent=1))
    else:
        print_mirror(run, args.quiet)
    if any(r.error and str(r.error["code"]).startswith("input.") for r in run.results):
        return EXIT_USAGE
    return EXIT_FAILED if run.failed else EXIT_OK


def cmd_verify(args: argparse.Namespace) -> int:
    from triton_backend_runtime.cli import public_key_file
    from triton_backend_runtime.trust import TrustStore

    from .commands import verify_wheel

    if not args.trust and not args.trust_identity:
        raise InputError("usage", "--trust", "give --trust KEYFILE or --trust-identity ISSUER=PATTERN (or both)")
    keys = [key for path in args.trust for key in public_key_file(str(path))[1]]
    store = TrustStore.of(keys)
    store.identities = {i.id: i for i in map(_identity, args.trust_identity)}
    store.sigstore_roots = [str(args.sigstore_root)] if args.sigstore_root else []
    results = [verify_wheel(wheel, store) for wheel in _wheels_in(args.wheels)]
    if args.json:
        print(json.dumps({"format": JSON_FORMAT, "wheels": [
            {"wheel": r.wheel, "ok": r.ok, "signers": list(r.signers), "coverage": r.coverage, "sigstore": r.sigstore,
             "findings": [f.as_dict() for f in r.findings], "notes": r.notes}
            for r in results
        ]}, indent=1))
    else:
        for r in results:
            for finding in r.findings:
                print(printable(f"FAIL {r.wheel}: {finding.code}: {finding.path}: {finding.message}"))
            if r.ok:
                names = ", ".join(store.identities[k].describe() if k in store.identities else key_label(store, k)
                                  for k in r.signers)
                count = len(r.manifest.artifacts) if r.manifest else 0
                print(f"OK   {r.wheel}: signed by {names}; {count} artifacts match (coverage {r.coverage})")
            for note in r.notes if not args.quiet else ():
                print(f"NOTE {r.wheel}: {note}")
    return EXIT_OK if all(r.ok for r in results) else EXIT_FAILED


def _identity(text: str) -> Any:
    """``--trust-identity ISSUER=PATTERN`` as the runtime's trust store holds an identity."""
    from triton_backend_runtime.trust import parse_identity

    issuer, sep, pattern = text.partition("=")
    if not sep:
        raise InputError("usage", "--trust-identity", f"{text!r}: expected ISSUER=PATTERN")
    return parse_identity(issuer, pattern, "--trust-identity")


def cmd_init(args: argparse.Namespace) -> int:
    from .commands import scaffold

    project = scaffold.project_for(args.directory, args.name, args.backend, args.package)
    written = scaffold.init(args.directory, project)
    command = build_command(args.directory)
    if args.json:
        print(json.dumps({"format": JSON_FORMAT, "directory": str(args.directory), "files": written,
                          "next": command, **project.variables()}, indent=1))
    elif not args.quiet:
        print(f"created {args.directory}: {project.name}, backend {project.backend!r} in package {project.package}")
        for rel in written:
            print(f"  {rel}")
        print(f"next: {command}")
        print("  (built with the packager installed here; an isolated build finds it on the index or in "
              "PIP_FIND_LINKS: see docs/vendor/build.md)")
    return EXIT_OK


#: Where ``init``'s next command writes the key pair, relative to where it is run.
INIT_KEY = "signing-key.pem"


def build_command(directory: Path) -> str:
    """The shell line that builds ``directory`` into a signed wheel from here, as printed by
    ``init``: without build isolation, so that the packager running now is the one that builds
    (an isolated build would look for it on the index, where it may not be), with the key made
    first unless one is already there, and what the build itself needs installed first if it is
    missing. The interpreter is named by its path where ``python`` on PATH is another one."""
    import shlex
    import shutil

    here = Path(sys.executable).parent
    found = shutil.which("python")
    python = "python" if found and Path(found).parent == here else shlex.quote(sys.executable)
    found = shutil.which("backend-packager")
    packager = "backend-packager" if found and Path(found).parent == here else f"{python} -m backend_packager"
    steps = []
    missing = _missing_build_requirements()
    if missing:
        steps.append(f"{python} -m pip install {' '.join(shlex.quote(r) for r in missing)}")
    if not Path(INIT_KEY).exists():
        steps.append(f"{packager} keygen -o {INIT_KEY}")
    # A relative key path is relative to where the build starts (config.start_directory).
    steps.append(f"BACKEND_PACKAGER_SIGNING_KEY={INIT_KEY} {python} -m build --no-isolation "
                 f"{shlex.quote(str(directory))}")
    return " && ".join(steps)


def _missing_build_requirements() -> list[str]:
    """What ``python -m build --no-isolation`` of an ``init`` project needs beside the
    packager and is not installed here: ``build`` itself, and setuptools (not in a new venv
    from Python 3.12 on)."""
    from importlib.metadata import PackageNotFoundError, version

    from packaging.version import InvalidVersion, Version

    missing = []
    for name, lowest in (("build", None), ("setuptools", "61")):
        try:
            ok = lowest is None or Version(version(name)) >= Version(lowest)
        except (PackageNotFoundError, InvalidVersion):
            ok = False
        if not ok:
            missing.append(f"{name}>={lowest}" if lowest else name)
    return missing


def cmd_sbom(args: argparse.Namespace) -> int:
    """Print (or with -o write) the SBOM; exit 2 for an unusable wheel, directory or name."""
    from .base import atomic_write, source_date_epoch
    from .commands import sbom_for

    if args.site_packages is not None and not args.site_packages.is_dir():
        raise InputError("site-packages", str(args.site_packages), "not a directory")
    sites = [args.site_packages] if args.site_packages is not None else interpreter_sites()
    made = sbom_for(args.target, sites, epoch=source_date_epoch(), jobs=args.jobs,
                    site_given=args.site_packages is not None)
    for warning in made.warnings if not args.quiet else ():
        print(printable(f"backend-packager: warning: {warning}"), file=sys.stderr)
    if args.output is None:
        sys.stdout.buffer.write(made.data)
        sys.stdout.flush()
        return EXIT_OK
    atomic_write(args.output, made.data)
    if args.json:
        print(json.dumps({"format": JSON_FORMAT, "source": made.source, "name": made.name, "version": made.version,
                          "output": str(args.output), "files": made.files, "warnings": made.warnings}, indent=1))
    elif not args.quiet:
        print(f"wrote {args.output}: {made.name} {made.version}, {made.files} native files described")
    return EXIT_OK


def cmd_inspect(args: argparse.Namespace) -> int:
    from .commands import as_json, inspect_wheel, render

    docs: list[dict[str, Any]] = []
    errors: list[TrustError] = []
    for number, wheel in enumerate(_wheels_in(args.wheels)):
        try:
            inspection = inspect_wheel(wheel)
        except TrustError as exc:
            # One unreadable wheel is its own line; the others are still shown.
            docs.append({"wheel": str(wheel), "error": exc.as_dict()})
            print(f"backend-packager: error: {exc} ({exc.code})", file=sys.stderr)
            errors.append(exc)
            continue
        if args.json:
            docs.append({"wheel": str(wheel), **as_json(inspection)})
        else:
            print(("\n" if number else "") + render(inspection))
    if args.json:
        print(json.dumps({"format": JSON_FORMAT, "wheels": docs}, indent=1, sort_keys=True))
    return exit_for(errors)
