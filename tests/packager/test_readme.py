"""The README and the reference pages, held to what they say.

- The two quick starts (the fenced ``sh`` block after ``<!-- quickstart: NAME -->``) are
  short; they run as written in ``tests/real/test_quickstarts.py``.
- The reason-code table (docs/reference/reason-codes.md) lists every code the runtime can
  give (collected from its sources with the prefixes :mod:`helpers.reasoncodes` reads, plus
  the codes it names in quotes or backticks), each with what to do.
- The CLI grammar table (docs/reference/cli.md) covers both CLIs' exit codes, -q/-v, --json
  and --version.
"""

from __future__ import annotations

import re
from pathlib import Path

from helpers.readme import quickstart
from helpers.reasoncodes import error_prefixes

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
REFERENCE = ROOT / "docs" / "reference"
RUNTIME = ROOT / "runtime" / "triton_backend_runtime"


def test_quickstarts_are_short() -> None:
    for name in ("vendor", "platform"):
        lines = quickstart(name)
        assert 1 <= len(lines) <= 5, (name, lines)
        assert all(line.strip() and not line.startswith("#") for line in lines)


# -- the reason-code table ------------------------------------------------------------------


def runtime_codes() -> set[str]:
    prefixes = error_prefixes()
    families = "|".join(sorted(set(prefixes.values()) - {"error"}))
    codes: set[str] = set()
    for source in RUNTIME.rglob("*.py"):
        if source.name == "__main__.py":
            continue  # the CLI's own usage errors, not reasons
        text = source.read_text(encoding="utf-8")
        for cls, code in re.findall(r"\b(\w+Error)\(\s*\"([a-z0-9-]+)\"", text):
            if cls in prefixes and prefixes[cls] != "error":
                codes.add(f"{prefixes[cls]}.{code}")
        codes |= set(re.findall(rf"[\"`(]((?:{families})\.[a-z0-9][a-z0-9-]*)[\"`)]", text))
        # jsonlimits.loads(data, where, SomeError, ...) raises SomeError("too-large" | "json").
        for cls in re.findall(r"jsonlimits\.loads\([^)]*?\b(\w+Error)\b", text):
            codes |= {f"{prefixes[cls]}.too-large", f"{prefixes[cls]}.json"} if cls in prefixes else set()
    return {c for c in codes if not c.endswith((".py", ".pth"))}


def table_rows(page: Path, heading: str) -> list[list[str]]:
    """The table rows under ``## HEADING`` of a page, the header row left out."""
    text = page.read_text(encoding="utf-8")
    section = text.split(f"\n## {heading}\n", 1)[1].split("\n## ", 1)[0]
    return [[cell.strip() for cell in re.split(r"(?<!\\)\|", line.strip().strip("|"))]
            for line in section.splitlines() if line.startswith("|") and not line.startswith("|---")][1:]


def test_the_collector_finds_codes_of_every_kind() -> None:
    codes = runtime_codes()
    assert {"verify.sha256", "signature.signature", "trust.scope", "conflict.name", "cache.unsafe"} <= codes
    assert all(re.fullmatch(r"[a-z]+\.[a-z0-9-]+", c) for c in codes), sorted(codes)


def test_every_runtime_code_is_in_the_table_with_what_to_do() -> None:
    rows = table_rows(REFERENCE / "reason-codes.md", "The runtime's codes")
    listed = {}
    for row in rows:
        assert len(row) == 3 and row[2], row
        for code in re.findall(r"`([a-z]+\.[a-z0-9-]+)`", row[0]):
            listed[code] = row[2]
    missing = sorted(runtime_codes() - set(listed))
    assert missing == [], f"reason codes missing from docs/reference/reason-codes.md: {missing}"


def test_cli_grammar_table_covers_both_clis() -> None:
    rows = table_rows(REFERENCE / "cli.md", "CLI grammar")
    text = "\n".join(" | ".join(row) for row in rows)
    for needle in ("0", "1", "2", "141", "-q", "-v", "--version", '"format": 1'):
        assert needle in text, needle
    assert all(len(row) == 3 for row in rows), rows
