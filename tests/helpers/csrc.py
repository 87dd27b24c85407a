"""Shared libraries compiled with gcc from the small C sources in ``tests/csrc``, and copies
of them patched at one offset (32-bit, big-endian, foreign files)."""

from __future__ import annotations

import shutil
import subprocess
import sysconfig
from dataclasses import dataclass
from pathlib import Path

CSRC = Path(__file__).resolve().parents[1] / "csrc"


@dataclass
class ElfFixtures:
    dir: Path
    exports: Path
    plugin_v2: Path
    plugin_v1: Path
    plugin_shared: Path  # a v2 plugin Triton 3.9 accepts, exporting a strong symbol
    pyext: Path
    runpath: Path
    rpath: Path
    versioned: Path
    truncated: Path
    not_elf: Path


def gcc(out: Path, *args: str) -> Path:
    cmd = ["gcc", "-shared", "-fPIC", "-O1", "-Wl,--build-id", "-o", str(out), *args]
    subprocess.run(cmd, check=True, capture_output=True)
    return out


def compile_all(d: Path) -> ElfFixtures:
    """Every library of :class:`ElfFixtures`, built into ``d``."""
    exports = gcc(d / "libexports.so", str(CSRC / "exports.c"), "-lm", "-lpthread")
    plugin_v2 = gcc(d / "libdemo_plugin.so", str(CSRC / "plugin_v2.c"))
    plugin_v1 = gcc(d / "libold_plugin.so", str(CSRC / "plugin_v1.c"))
    plugin_shared = gcc(d / "libshared_plugin.so", str(CSRC / "plugin_shared.c"))
    include = sysconfig.get_paths()["include"]
    pyext = gcc(d / "fastmod.cpython-ext.so", str(CSRC / "pyext.c"), f"-I{include}")
    runpath = gcc(
        d / "librunpath.so.1", str(CSRC / "runpath.c"), f"-L{d}", "-lexports",
        "-Wl,-soname,librunpath.so.1", "-Wl,--enable-new-dtags", "-Wl,-rpath,$ORIGIN/../lib:/opt/demo/lib",
    )
    rpath = gcc(
        d / "librpath.so", str(CSRC / "runpath.c"), f"-L{d}", "-lexports",
        "-Wl,--disable-new-dtags", "-Wl,-rpath,$ORIGIN",
    )
    versioned = gcc(
        d / "libversioned.so", str(CSRC / "versioned.c"), f"-Wl,--version-script={CSRC / 'versioned.map'}"
    )
    truncated = d / "libtruncated.so"
    truncated.write_bytes(exports.read_bytes()[: exports.stat().st_size // 2])
    not_elf = d / "libnotelf.so"
    not_elf.write_text("this is a text file, not a shared library\n")
    return ElfFixtures(
        d, exports, plugin_v2, plugin_v1, plugin_shared, pyext, runpath, rpath, versioned, truncated, not_elf
    )


def patched_copy(src: Path, dst: Path, offset: int, value: bytes) -> Path:
    """A copy of ``src`` with ``value`` written at ``offset``: 32-bit, big-endian, foreign files."""
    shutil.copyfile(src, dst)
    with dst.open("r+b") as stream:
        stream.seek(offset)
        stream.write(value)
    return dst


class Libs:
    """Plugins compiled on demand, one directory each, all linked against one stub libtriton."""

    def __init__(self, root: Path) -> None:
        self.root = root
        (root / "stub").mkdir(parents=True)
        self.stub = gcc(root / "stub" / "libtriton.so", str(CSRC / "stub_libtriton.c"), "-Wl,-soname,libtriton.so")

    def plugin(self, name: str, *defines: str, libtriton: bool = True) -> Path:
        out = self.root / name / "libcontract.so"
        if not out.exists():
            out.parent.mkdir(parents=True)
            link = [f"-L{self.stub.parent}", "-ltriton"] if libtriton else ["-DNO_LIBTRITON"]
            gcc(out, str(CSRC / "contract_plugin.c"), *[f"-D{d}" for d in defines], *link)
        return out
