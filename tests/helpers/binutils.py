"""What readelf and nm say about a file: the reference the scanner is checked against."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path


def _run(*args: str) -> str:
    return subprocess.run(args, check=True, capture_output=True, text=True).stdout


def _bare(name: str) -> str:
    return name.split("@")[0]


def dyn_syms(path: Path) -> list[dict[str, str]]:
    """Rows of ``readelf --dyn-syms -W``: name, type, bind, ndx."""
    rows = []
    for line in _run("readelf", "--dyn-syms", "-W", str(path)).splitlines():
        parts = line.split()
        if len(parts) >= 8 and parts[0].rstrip(":").isdigit() and parts[0] != "0:":
            rows.append({"name": parts[7], "type": parts[3], "bind": parts[4], "ndx": parts[6]})
    return rows


def exports(path: Path) -> dict[str, tuple[str, str]]:
    """Defined non-local dynamic symbols: name -> (type, binding)."""
    binds = {"GLOBAL": "GLOBAL", "WEAK": "WEAK", "UNIQUE": "UNIQUE"}
    types = {"GNU_IFUNC": "IFUNC"}
    return {
        _bare(r["name"]): (types.get(r["type"], r["type"]), binds[r["bind"]])
        for r in dyn_syms(path)
        if r["ndx"] != "UND" and r["bind"] in binds
    }


def nm_defined(path: Path) -> list[str]:
    return [line.split()[-1] for line in _run("nm", "-D", "--defined-only", str(path)).splitlines() if line.strip()]


def nm_undefined(path: Path) -> dict[str, bool]:
    """Undefined dynamic symbols: name -> weak (nm letter w/v)."""
    out = {}
    for line in _run("nm", "-D", "--undefined-only", str(path)).splitlines():
        parts = line.split()
        if len(parts) >= 2:
            out[_bare(parts[-1])] = parts[-2] in ("w", "v")
    return out


def nm_import_versions(path: Path) -> dict[str, str]:
    """name -> version for undefined symbols nm prints as name@VERSION."""
    out = {}
    for line in _run("nm", "-D", "--undefined-only", str(path)).splitlines():
        name = line.split()[-1]
        if "@" in name:
            bare, _, version = name.partition("@")
            out[bare] = version.lstrip("@")
    return out


def dynamic(path: Path) -> dict[str, list[str]]:
    """NEEDED / SONAME / RPATH / RUNPATH values from ``readelf -d``."""
    out: dict[str, list[str]] = {}
    for line in _run("readelf", "-d", "-W", str(path)).splitlines():
        match = re.search(r"\((NEEDED|SONAME|RPATH|RUNPATH)\)\s+.*?\[(.*)\]", line)
        if match:
            out.setdefault(match.group(1), []).append(match.group(2))
    return out


def build_id(path: Path) -> str | None:
    match = re.search(r"Build ID: ([0-9a-f]+)", _run("readelf", "-n", str(path)))
    return match.group(1) if match else None


def version_needs(path: Path) -> dict[str, set[str]]:
    """library -> versions, from the .gnu.version_r part of ``readelf -V``."""
    out: dict[str, set[str]] = {}
    current = None
    in_needs = False
    for line in _run("readelf", "-V", "-W", str(path)).splitlines():
        if "Version needs section" in line:
            in_needs = True
        elif line.startswith("Version") and "section" in line:
            in_needs = False
        if not in_needs:
            continue
        file_match = re.search(r"File: (\S+)", line)
        name_match = re.search(r"Name: (\S+)", line)
        if file_match:
            current = file_match.group(1)
            out.setdefault(current, set())
        elif name_match and current:
            out[current].add(name_match.group(1))
    return out


def comment(path: Path) -> list[str]:
    lines = _run("readelf", "-p", ".comment", str(path)).splitlines()
    return [m.group(1).strip() for line in lines if (m := re.search(r"\]\s+(.*)$", line))]


def machine(path: Path) -> str:
    return re.search(r"Machine:\s+(.*)", _run("readelf", "-h", str(path))).group(1).strip()  # type: ignore[union-attr]
