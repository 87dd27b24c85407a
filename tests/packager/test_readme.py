"""The README and the reference pages, held to what they say.

- The two quick starts (the fenced ``sh`` block after ``<!-- quickstart: NAME -->``) run as
  written, line by line in one ``bash -e`` session, in a fresh copy of the repository, as a
  newcomer would paste them. They install from the package index and the platform one uses
  the real triton 3.9.0: marked ``triton_wheel``. Only the environment differs: the cached
  triton wheel is offered to pip first (PIP_FIND_LINKS), the user's trust store and caches
  are moved under tmp_path.
- The reason-code table (docs/reference/reason-codes.md) lists every code the runtime can
  give (collected from its sources as the guard test in test_runtime_load.py collects them,
  plus the codes it names in quotes or backticks), each with what to do.
- The CLI grammar table (docs/reference/cli.md) covers both CLIs' exit codes, -q/-v, --json
  and --version.
"""

from __future__ import annotations

import ast
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
REFERENCE = ROOT / "docs" / "reference"
RUNTIME = ROOT / "runtime" / "triton_backend_runtime"


def quickstart(name: str) -> list[str]:
    """The lines of the ``sh`` block that follows ``<!-- quickstart: NAME -->``."""
    text = README.read_text(encoding="utf-8")
    match = re.search(rf"<!-- quickstart: {re.escape(name)} -->\n```sh\n(.*?)\n```", text, re.DOTALL)
    assert match, f"no quickstart block {name!r} in the README"
    return match.group(1).splitlines()


def test_quickstarts_are_short() -> None:
    for name in ("vendor", "platform"):
        lines = quickstart(name)
        assert 1 <= len(lines) <= 5, (name, lines)
        assert all(line.strip() and not line.startswith("#") for line in lines)


def fresh_clone(dest: Path) -> Path:
    ignore = shutil.ignore_patterns(".venv", ".git", "build", "dist", "wheelhouse", "wheels", "*.egg-info",
                                    "__pycache__", ".*_cache")
    shutil.copytree(ROOT, dest, ignore=ignore)
    return dest


def run_quickstart(name: str, tmp_path: Path, **extra: str) -> subprocess.CompletedProcess[str]:
    clone = fresh_clone(tmp_path / "clone")
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("TRITON_", "BACKEND_PACKAGER_", "PYTHON", "VIRTUAL_ENV", "XDG_"))}
    env |= {"HOME": str(tmp_path / "home"), "XDG_CONFIG_HOME": str(tmp_path / "config"),
            "XDG_CACHE_HOME": str(tmp_path / "cache"), **extra}
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep) if ".venv" not in p)
    script = "set -e\n" + "\n".join(quickstart(name)) + "\n"
    return subprocess.run(["bash", "-c", script], cwd=clone, env=env, capture_output=True, text=True)


@pytest.mark.triton_wheel
def test_vendor_quickstart_runs_as_written(tmp_path: Path) -> None:
    result = run_quickstart("vendor", tmp_path)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    (wheel,) = (tmp_path / "clone" / "my-backend" / "dist").glob("*.whl")
    assert f"OK   my-backend/dist/{wheel.name}: signed by" in result.stdout


@pytest.mark.triton_wheel
def test_platform_quickstart_runs_as_written(tmp_path: Path, triton_wheel: Path) -> None:
    found = " ".join(filter(None, [str(triton_wheel.parent), os.environ.get("PIP_FIND_LINKS", "")]))
    result = run_quickstart("platform", tmp_path, PIP_FIND_LINKS=found)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "policy:      strict" in result.stdout
    assert re.search(r"nvidia\s+triton 3\.9\.0\s+\[verified, loaded", result.stdout), result.stdout[-3000:]


# -- the reason-code table ------------------------------------------------------------------


def error_prefixes() -> dict[str, str]:
    """Each TrustError subclass of the runtime and its code prefix, read from the sources."""
    prefixes = {"TrustError": "error"}
    changed = True
    sources = [ast.parse(p.read_text(encoding="utf-8")) for p in sorted(RUNTIME.rglob("*.py"))]
    while changed:
        changed = False
        for tree in sources:
            for node in (n for n in tree.body if isinstance(n, ast.ClassDef) and n.name not in prefixes):
                bases = [b.id for b in node.bases if isinstance(b, ast.Name) and b.id in prefixes]
                if not bases:
                    continue
                own = [s.value.value for s in node.body if isinstance(s, ast.Assign)
                       and any(isinstance(t, ast.Name) and t.id == "code_prefix" for t in s.targets)
                       and isinstance(s.value, ast.Constant)]
                prefixes[node.name] = own[0] if own else prefixes[bases[0]]
                changed = True
    return prefixes


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
