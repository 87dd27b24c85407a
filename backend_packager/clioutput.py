"""What the ``backend-packager`` commands print: the scan table, one line per migrated,
adopted or mirrored wheel, progress on a terminal, and a failure as one error line."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable
from typing import Any

from triton_backend_runtime.base import TrustStoreError, printable
from triton_backend_runtime.cli import EXIT_OK, exit_code, fail

from .base import InputError, TrustError

__all__ = [
    "PROG", "USAGE_ERRORS", "end_progress", "exit_for", "fail_line", "key_label", "print_adoption", "print_mirror",
    "print_outcome", "print_scan_table", "progress"
]

PROG = "backend-packager"

#: Classes whose errors mean the input itself is unusable (exit 2), not a checked failure; an
#: ``input.*`` code of any class means the same.
USAGE_ERRORS = (InputError, TrustStoreError)


def exit_for(errors: Iterable[TrustError | None]) -> int:
    """The exit code of a command that went on past its errors: 0 without one, 2 where one
    is unusable input, else 1."""
    return max((exit_code(error, USAGE_ERRORS) for error in errors if error is not None), default=EXIT_OK)


def progress(enabled: bool) -> Any:
    if not enabled:
        return None

    def show(item: str) -> None:
        sys.stderr.write(f"\r\x1b[Kscanning {item[-100:]}")
        sys.stderr.flush()

    return show


def end_progress(enabled: bool) -> None:
    if enabled:
        sys.stderr.write("\r\x1b[K")


def print_scan_table(artifacts: list[Any], kinds: list[str]) -> None:
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


def print_outcome(outcome: Any, quiet: bool = False) -> None:
    if outcome.error:
        print(f"backend-packager: error: {outcome.error} ({outcome.error.code})", file=sys.stderr)
        return
    for found in outcome.discrepancies:  # each rewritten from the contents (--rewrite-record)
        print(f"backend-packager: repaired: {outcome.source}: {found.code}: {found.path}: {found.detail}",
              file=sys.stderr)
    if quiet:
        return
    signer = _signers(outcome)
    backends = ", ".join(outcome.backends) or "none"
    print(f"{outcome.status} {outcome.source.name} -> {outcome.output} "
          f"(backends: {backends}; {outcome.artifacts} artifacts, {outcome.native} native; "
          f"{len(outcome.plugins)} plugins; {signer}; "
          f"{outcome.seconds:.1f}s)")
    for warning in outcome.warnings:
        print(f"backend-packager: warning: {printable(warning)}", file=sys.stderr)


def _signers(outcome: Any) -> str:
    """``signed by KEYID``, ``+ sigstore`` where a bundle signs it too; ``hash-only`` with neither."""
    names = [f"signed by {outcome.signed_by[:16]}"] if outcome.signed_by else []
    if outcome.sigstore:
        names.append("sigstore bundle" if names else "signed by a sigstore bundle")
    return " + ".join(names) or "hash-only"


def print_adoption(outcome: Any, quiet: bool) -> None:
    if outcome.error:
        print(f"backend-packager: error: {outcome.error} ({outcome.error.code})", file=sys.stderr)
        for mismatch in outcome.mismatches:
            print(f"backend-packager: error:   {mismatch} ({mismatch.code})", file=sys.stderr)
        return
    if quiet:
        return
    backends = ", ".join(outcome.backends) or "none"
    print(f"{outcome.status} {outcome.source} -> {outcome.output} (backends: {backends}; {outcome.artifacts} "
          f"artifacts, {outcome.native} native; {_signers(outcome)}; wrote "
          f"{', '.join(outcome.written) or 'a wheel'}; {outcome.seconds:.1f}s)")
    for warning in outcome.warnings:
        print(f"backend-packager: warning: {printable(warning)}", file=sys.stderr)


def print_mirror(run: Any, quiet: bool) -> None:
    """Each wheel's line and the STATUS table; with ``quiet`` only the failed wheels' lines."""
    for warning in run.warnings if not quiet else ():
        print(f"backend-packager: warning: {printable(warning)}", file=sys.stderr)
    for result in run.results:
        if result.error:
            served = "served unchanged" if result.served else "left out of the index"
            print(f"failed    {result.filename}: {result.error['code']}: {result.error['path']}: "
                  f"{result.error['message']} ({served})")
        elif result.status != "unchanged" and not quiet:
            print(f"{result.status:<9} {result.filename} ({result.entry.found()}; {result.seconds:.1f}s)")
    if quiet:
        return
    print(f"index: {run.outdir / 'simple'} (signed by {run.keyid[:16] if run.keyid else 'Sigstore bundles'})")
    print(f"\n{'STATUS':<10}WHEELS")
    for status, count in run.counts().items():
        print(f"{status:<10}{count}")


def key_label(store: Any, keyid: str) -> str:
    comment = store.keys[keyid].comment if keyid in store.keys else ""
    return f"{keyid[:16]}" + (f" ({comment})" if comment else "")


def fail_line(args: argparse.Namespace, exc: TrustError) -> int:
    return fail(PROG, args, exc, exit_code(exc, USAGE_ERRORS))
