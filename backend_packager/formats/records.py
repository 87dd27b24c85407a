"""RECORD files (PEP 376 / the binary distribution format spec).

Each row is ``path,sha256=<urlsafe base64 without padding>,size``; the row for RECORD itself
is ``path,,``. Rows are rendered with the csv module's default dialect, as installers read them.
"""

from __future__ import annotations

import base64
import csv
import io
from dataclasses import dataclass

from triton_backend_runtime.site import RecordSyntaxError, record_lines

from ..base import WheelError

__all__ = [
    "Discrepancy", "MAX_SIZE_DIGITS", "RecordRow", "discrepancies", "hash_field", "parse", "parse_rows", "render"
]

#: Sizes are below 2**64; more digits than that is malformed, not a big file.
MAX_SIZE_DIGITS = 20


@dataclass(frozen=True)
class RecordRow:
    path: str
    sha256: str | None  # hex digest, None for RECORD's own row
    size: int | None


def hash_field(hex_digest: str) -> str:
    """``sha256=`` + urlsafe base64 (no padding) of the digest, as RECORD writes it."""
    return "sha256=" + base64.urlsafe_b64encode(bytes.fromhex(hex_digest)).rstrip(b"=").decode("ascii")


def parse(text: str, where: str) -> dict[str, RecordRow]:
    """Rows by path (a path listed twice: its last row). Malformed rows raise WheelError
    naming the RECORD line."""
    return {row.path: row for row in parse_rows(text, where)}


def parse_rows(text: str, where: str) -> list[RecordRow]:
    """Every row in order, read by the runtime's :func:`~triton_backend_runtime.site.discovery.record_lines`."""
    rows: list[RecordRow] = []
    try:
        for number, row in record_lines(text):
            if len(row) != 3:
                raise WheelError("record", f"{where}:{number}", f"expected 3 fields, found {len(row)}")
            path, hash_text, size_text = row
            rows.append(RecordRow(path, _parse_hash(hash_text, where, number), _parse_size(size_text, where, number)))
    except RecordSyntaxError as exc:
        # The csv module's own limits (a field over 128 KiB; a NUL byte before Python 3.11) end the parse.
        raise WheelError("record", f"{where}:{exc.number}", f"malformed RECORD line: {exc}") from None
    return rows


def _parse_hash(text: str, where: str, number: int) -> str | None:
    if not text:
        return None
    algorithm, _, value = text.partition("=")
    if algorithm != "sha256":
        raise WheelError("record", f"{where}:{number}", f"unsupported hash {algorithm!r} (expected sha256)")
    try:
        raw = base64.urlsafe_b64decode(value + "=" * (-len(value) % 4))
    except ValueError:
        raise WheelError("record", f"{where}:{number}", f"hash {value!r} is not urlsafe base64") from None
    if len(raw) != 32:
        raise WheelError("record", f"{where}:{number}", f"sha256 hash has {len(raw)} bytes, expected 32")
    return raw.hex()


def _parse_size(text: str, where: str, number: int) -> int | None:
    if not text:
        return None
    # ASCII digits only ("²".isdigit() is true), and few enough that int() cannot refuse them.
    if not (text.isascii() and text.isdigit()) or len(text) > MAX_SIZE_DIGITS:
        raise WheelError("record", f"{where}:{number}", f"size {text[:40]!r} is not a number of at most "
                         f"{MAX_SIZE_DIGITS} digits")
    return int(text)


def render(rows: list[RecordRow]) -> bytes:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    for row in rows:
        if row.sha256 is None:
            writer.writerow([row.path, "", ""])
        else:
            writer.writerow([row.path, hash_field(row.sha256), row.size])
    return out.getvalue().encode("utf-8")


@dataclass(frozen=True)
class Discrepancy:
    """One way a wheel's RECORD (or its file name) disagrees with its contents."""

    code: str  # record.mismatch | record.unlisted | record.absent | wheel.tags
    path: str
    detail: str


def discrepancies(
    record: dict[str, RecordRow], seen: dict[str, tuple[str, int]], present: set[str], *, strict: bool = False
) -> list[Discrepancy]:
    """Compare RECORD with the members: ``seen`` (path -> sha256, size) were hashed, ``present``
    is every member name. A row without hash or size (the spec allows none but RECORD's own)
    is compared only when ``strict``. Sorted by path, absent rows last."""
    found = []
    for path, (sha256, size) in sorted(seen.items()):
        row = record.get(path)
        if row is None:
            found.append(Discrepancy("record.unlisted", path, "member is not listed in RECORD"))
        elif _differs(row.sha256, sha256, strict) or _differs(row.size, size, strict):
            what = "sha256" if _differs(row.sha256, sha256, strict) else "size"
            found.append(Discrepancy("record.mismatch", path, f"{what} differs from RECORD (content: sha256 "
                                     f"{sha256[:16]}, {size} bytes; RECORD: sha256 {str(row.sha256)[:16]}, "
                                     f"{row.size} bytes)"))
    for path in sorted(set(record) - present):
        found.append(Discrepancy("record.absent", path, "listed in RECORD but not in the wheel"))
    return found


def _differs(recorded: str | int | None, actual: str | int, strict: bool) -> bool:
    return recorded != actual if (strict or recorded is not None) else False
