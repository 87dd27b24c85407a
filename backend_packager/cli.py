"""The ``backend-packager`` command line.

Exit codes: 0 success; 1 the command ran and found a problem (a file failed to scan, a
wheel failed to verify); 2 bad usage or unusable input (argparse's own convention).
Errors print as one line, ``backend-packager: error: PATH: DETAIL``, never a traceback.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from triton_backend_runtime import manifest as manifest_mod
from triton_backend_runtime import schema

from . import __version__
from .errors import TrustError

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


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
    from .scan import scan_paths

    live = sys.stderr.isatty() and not args.json
    result = scan_paths(args.paths, progress=_progress(live))
    _end_progress(live)
    if args.json:
        doc = {
            "artifacts": [schema.encode(a) for a in result.artifacts],
            "errors": [e.as_dict() for e in result.errors],
        }
        print(json.dumps(doc, indent=1, sort_keys=True))
    else:
        _print_scan_table(result.artifacts)
    for error in result.errors:
        print(f"backend-packager: error: {error}", file=sys.stderr)
    return EXIT_FAILED if result.errors else EXIT_OK


def _print_scan_table(artifacts: list[Any]) -> None:
    rows = [("PATH", "ARCH", "EXPORTS", "IMPORTS", "GLIBC", "MANYLINUX", "KIND", "SHA256")]
    for art in artifacts:
        elf = art.elf
        kind = "data"
        if elf is not None:
            kind = "library" if elf.file_type == "DYN" else "executable"
            if elf.plugin:
                kind = f"triton-plugin-{elf.plugin.api}"
            elif elf.python_extension:
                kind = "python-extension"
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
    import os

    from . import signing

    private = args.output
    public = private.with_suffix(".pub")
    for path in (private, public):
        if path.exists() and not args.force:
            print(f"backend-packager: error: {path}: exists (use --force to replace it)", file=sys.stderr)
            return EXIT_USAGE
    passphrase = os.environ.get(signing.PASSPHRASE_ENV)
    key = signing.generate(private, public, args.comment, passphrase.encode() if passphrase else None)
    if args.json:
        print(json.dumps({"private": str(private), "public": str(public), "keyid": key.keyid, "line": key.line()}))
    else:
        print(f"private key: {private}{' (encrypted)' if passphrase else ''}")
        print(f"public key:  {public}")
        print(f"keyid:       {key.keyid}")
    return EXIT_OK


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="backend-packager",
        description="Scan, sign, package and verify Triton backend wheels.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
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

    sch = sub.add_parser("schema", help="print the manifest's JSON Schema", description="Print the JSON "
                         "Schema of the manifest, generated from the runtime's definition.")
    sch.set_defaults(func=cmd_schema)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        code: int = args.func(args)
        return code
    except TrustError as exc:
        print(f"backend-packager: error: {exc}", file=sys.stderr)
        return EXIT_FAILED
    except KeyboardInterrupt:
        return 130
