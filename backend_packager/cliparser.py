"""The ``backend-packager`` grammar: the argument parser, its commands and their options."""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

from triton_backend_runtime.cli import add_verbosity

from . import __version__
from .clicommands import (
    cmd_adopt,
    cmd_init,
    cmd_inspect,
    cmd_keygen,
    cmd_migrate,
    cmd_mirror,
    cmd_sbom,
    cmd_scan,
    cmd_schema,
    cmd_verify,
    interpreter_sites,
)

__all__ = ["build_parser", "positive_int", "python_package"]


def _searched(sites: list[Path]) -> str:
    if len(sites) == 1:
        return f"this interpreter's purelib and platlib, here one directory: {sites[0]}"
    return (f"this interpreter's purelib {sites[0]}, then its platlib {sites[1]}; a distribution found in both "
            "is refused")


class _SitePackages(argparse.Action):
    """``adopt --site-packages``, stored as argparse's ``store`` stores; its help names this
    interpreter's sites, found only when the help is shown: sysconfig would cost every
    command's start-up."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        setattr(namespace, self.dest, values)

    @property
    def help(self) -> str:
        return f"where DIST is installed (default: {_searched(interpreter_sites())})"

    @help.setter
    def help(self, value: str | None) -> None:
        """argparse sets None at construction; the text is the getter's."""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="backend-packager",
        description="Scan, sign, package and verify Triton backend wheels.",
        epilog="Exit codes: 0 success; 1 the command ran and found a problem (a file that could not "
        "be scanned, a wheel that failed); 2 bad usage or unusable input (input.*). "
        "`backend-packager COMMAND --help` for each command.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    _add_verbosity(parser, False)
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
    _add_key(migrate, "; without one (and without --sigstore) the manifest is hash-only")
    _add_keyless(migrate)
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
        "-o/--output, write a signed wheel of the distribution to DIR instead and leave the installed files "
        "alone. Exit 1 if a distribution was refused or failed, 2 for an unusable key, directory or name.",
    )
    adopt.add_argument("dists", nargs="+", metavar="DIST", help="installed distribution name, e.g. triton")
    adopt.add_argument("--site-packages", type=Path, metavar="DIR", action=_SitePackages)
    _add_key(adopt)
    _add_keyless(adopt)
    _add_capture(adopt)
    adopt.add_argument("-o", "--output", dest="wheel_out", type=Path, metavar="DIR",
                       help="write a signed wheel here instead of signing in place")
    adopt.add_argument("--wheel-out", dest="wheel_out", type=Path, help=argparse.SUPPRESS)  # the old spelling
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
    _add_keyless(mirror, attach=False)
    mirror.add_argument("--sigstore-bundle", type=Path, metavar="DIR",
                        help="a directory of OUTPUT-WHEEL.sigstore.json Sigstore bundles: each attached to that "
                        "migrated wheel instead of signing it now (a byte-identical rebuild); refused unless its "
                        "payload is the manifest's statement (sigstore.statement); a migrated wheel without one "
                        "fails (sigstore.bundle) unless --sigstore signs it now")
    _add_capture(mirror)
    _add_jobs(mirror, "wheels processed in parallel")
    mirror.add_argument("--pass-through-failures", action="store_true",
                        help="serve a wheel that cannot be migrated unchanged instead of leaving it out")
    mirror.add_argument("--no-wait", action="store_true", help="exit 2 at once if another run holds OUTDIR")
    mirror.add_argument("--upstream-identity", action="append", default=[], metavar="ISSUER=PATTERN",
                        help="(repeatable) an identity upstream PEP 740 attestations may be signed by: the OIDC "
                        "issuer, and the SAN exactly or as trust add-identity's pattern (one trailing '*'). Given, "
                        "every wheel needs its provenance (WHEEL.provenance beside it, or the index's "
                        "data-provenance), verified offline against the wheel before it is re-signed and recorded "
                        "in its manifest (provenance.upstream); else that wheel fails (provenance.*)")
    mirror.add_argument("--upstream-root", type=Path, metavar="FILE",
                        help="with --upstream-identity: a Sigstore trusted root (trusted_root.json) the upstream "
                        "attestations are verified against, instead of Sigstore's production root (an air-gapped "
                        "or private Sigstore); unreadable or not a trusted root: exit 2 before any wheel")
    mirror.add_argument("--json", action="store_true", help="print every wheel's result as JSON (format 1)")
    mirror.set_defaults(func=cmd_mirror)

    verify = sub.add_parser(
        "verify",
        help="check a wheel's signed manifest offline",
        description="Check each wheel offline: the manifest's signature against the trusted keys (and a "
        "Sigstore bundle against the trusted identities); every "
        "artifact's sha256 and size; the manifest against RECORD; no file left out of the manifest (for an "
        "old manifest that covers native files only: no shared library, and a NOTE line says so); name, "
        "version and tags in the signed payload equal to the wheel's own; the "
        "triton.backends entry points equal to the signed backends. Each failure is printed on its own "
        "line. Exit 0 only when every wheel passes every check, 1 otherwise, 2 for unusable arguments.",
    )
    verify.add_argument("wheels", nargs="+", type=Path, metavar="WHEEL_OR_DIR",
                        help="wheels, or directories whose *.whl are verified")
    verify.add_argument("--trust", type=Path, action="append", default=[], metavar="KEYFILE",
                        help="public key file (lines as written by keygen); repeatable")
    verify.add_argument("--trust-identity", action="append", default=[], metavar="ISSUER=PATTERN",
                        help="a Sigstore identity whose keyless signature (the wheel's triton_backend.sigstore.json) "
                        "counts as a signer: the OIDC issuer, and the SAN exactly or as trust add-identity's "
                        "pattern; repeatable. Without one a bundle is only checked to carry the manifest's payload")
    verify.add_argument("--sigstore-root", type=Path, metavar="FILE",
                        help="the Sigstore trusted_root.json bundles are verified against (default: the one "
                        "sigstore-python ships)")
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

    sbom = sub.add_parser(
        "sbom",
        help="print the PEP 770 SBOM (CycloneDX 1.6) of a wheel or an installed distribution",
        description="Scan a wheel, or a distribution installed in site-packages (every file checked against "
        "its RECORD, as adopt checks it), and print the CycloneDX 1.6 SBOM the writers put in "
        ".dist-info/sboms/triton-backend.cdx.json: the wheel as root component, each native file with its "
        "sha256 and ELF facts, NEEDED edges, external libraries by soname, an SBOM already there referenced. "
        "For wheels written before the writers added one; nothing is written into the input. Reproducible: "
        "no timestamp unless SOURCE_DATE_EPOCH is set. Exit 2 for an unusable wheel, directory or name.",
    )
    sbom.add_argument("target", metavar="WHEEL|DIST", help="a .whl file, or an installed distribution's name")
    sbom.add_argument("--site-packages", type=Path, metavar="DIR", action=_SitePackages)
    sbom.add_argument("-o", "--output", type=Path, metavar="FILE", help="write the SBOM here (atomically) instead "
                      "of printing it")
    _add_jobs(sbom, "installed files checked in parallel")
    sbom.add_argument("--json", action="store_true", help="with -o: print what was written as JSON; without: "
                      "the same as without --json (the SBOM is a JSON document)")
    sbom.set_defaults(func=cmd_sbom)

    init = sub.add_parser(
        "init",
        help="create a new vendor backend project",
        description="Create DIR (absent or empty) holding a Triton backend project that builds as it is "
        "into a wheel with a signed manifest (the `next:` line it prints is the command that does it, from here): "
        "pyproject.toml configured for "
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
    sch.add_argument("--json", action="store_true", help="the same: the schema is a JSON document")
    sch.set_defaults(func=cmd_schema)
    for command in sub.choices.values():
        _add_verbosity(command, argparse.SUPPRESS)
    return parser


def _add_key(parser: argparse.ArgumentParser, note: str = "") -> None:
    # config.SIGNING_KEY_ENV, spelled out: importing config (tomllib) costs every command ~30 ms.
    parser.add_argument("--key", type=Path,
                        help=f"Ed25519 private key (PEM); default: $BACKEND_PACKAGER_SIGNING_KEY{note}")


def _add_keyless(parser: argparse.ArgumentParser, *, attach: bool = True) -> None:
    """--sigstore and its identity token; --sigstore-bundle where one wheel gets one bundle."""
    parser.add_argument("--sigstore", action="store_true",
                        help="sign keylessly too: a Sigstore bundle over the manifest's statement, for the OIDC "
                        "identity of --identity-token, $BACKEND_PACKAGER_IDENTITY_TOKEN or the CI's ambient "
                        "credential, written beside the manifest (needs the [sigstore] extra; docs/vendor/keyless.md)")
    parser.add_argument("--sigstore-staging", action="store_true",
                        help="with --sigstore: sign against Sigstore's staging instance, not production")
    parser.add_argument("--identity-token", type=Path, metavar="TOKEN-FILE",
                        help="with --sigstore: a file holding the OIDC identity token (never the token itself on the "
                        "command line, where ps shows it)")
    if attach:
        parser.add_argument("--sigstore-bundle", type=Path, metavar="FILE",
                            help="attach this Sigstore bundle instead of signing now (a rebuild, or signing done "
                            "elsewhere): refused unless its DSSE payload is this manifest's statement "
                            "(sigstore.statement)")


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
    add_verbosity(parser, default, quiet="print only errors: no progress, warnings or notes",
                  verbose="say more; -v also shows the traceback of an internal error")


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
