"""The README's quick starts: the fenced ``sh`` block after ``<!-- quickstart: NAME -->``."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"


def quickstart(name: str) -> list[str]:
    """The lines of the ``sh`` block that follows ``<!-- quickstart: NAME -->``."""
    text = README.read_text(encoding="utf-8")
    match = re.search(rf"<!-- quickstart: {re.escape(name)} -->\n```sh\n(.*?)\n```", text, re.DOTALL)
    assert match, f"no quickstart block {name!r} in the README"
    return match.group(1).splitlines()
