"""One member deflated in chunks on several threads (``wheel.deflate``), and the wheel
``adopt --wheel-out`` writes from files on disk with it (``wheel.filewriter``).

Each runs with every engine (ISA-L, the ``fast`` extra, which the test extra installs; zlib);
an engine that is not installed is skipped. The large file is generated here: 3.6 MiB, four
chunks and part of a fifth, of random bytes, runs of text and 20 KiB blocks repeated at
distances that cross every chunk edge, so that the chunks' priming matters. The wheels are
read back with the standard library's zipfile.
"""

from __future__ import annotations

import hashlib
import os
import random
import zipfile
import zlib
from pathlib import Path

import pytest
from helpers import zipgen
from triton_backend_runtime.site import identity

from backend_packager.base import InstalledError, WheelError
from backend_packager.formats import records
from backend_packager.wheel.deflate import CHUNK, WINDOW, Engine, deflate_chunk, engines
from backend_packager.wheel.filewriter import FileWheelWriter, SourceFile

DIST_INFO = "big-1.0.dist-info"


def _engine(name: str) -> Engine:
    found = [e for e in engines() if e.name == name]
    if not found:
        pytest.skip(f"deflate engine {name} not installed")
    return found[0]


ENGINES = pytest.mark.parametrize("using", ["isal", "zlib"], indirect=True)


@pytest.fixture
def using(request: pytest.FixtureRequest) -> Engine:
    return _engine(request.param)


def _generated(size: int) -> bytes:
    """Random, textual and repeated parts, deterministic."""
    rng = random.Random(20)
    block = rng.randbytes(20 << 10)
    parts: list[bytes] = []
    while sum(map(len, parts)) < size:
        kind = rng.randrange(3)
        parts.append(rng.randbytes(7000) if kind == 0 else b"def f(x): return x + 1\n" * 300 if kind == 1 else block)
    return b"".join(parts)[:size]


def _deflated(data: bytes, using: Engine) -> bytes:
    edges = range(0, max(len(data), 1), CHUNK)
    return b"".join(deflate_chunk(data[at:at + CHUNK], data[max(0, at - WINDOW):at], at + CHUNK >= len(data), using)
                    for at in edges)


@ENGINES
@pytest.mark.parametrize("size", [0, 1, CHUNK, 3 * CHUNK + 12345])
def test_chunks_joined_are_one_deflate_stream(size: int, using: Engine) -> None:
    data = _generated(size)
    inflater = zlib.decompressobj(-15)
    assert inflater.decompress(_deflated(data, using)) == data
    assert inflater.eof and inflater.unused_data == b""  # the last chunk, and only it, is final


@ENGINES
def test_priming_with_the_window_before_makes_the_stream_smaller(using: Engine) -> None:
    """A chunk reaches back into the bytes before it: random bytes repeated right across a
    chunk edge are matched only by a primed compressor."""
    rng = random.Random(1951)
    repeated = rng.randbytes(16 << 10)
    data = rng.randbytes(CHUNK - len(repeated)) + repeated + repeated + rng.randbytes(1000)
    unprimed = b"".join(deflate_chunk(data[at:at + CHUNK], b"", at + CHUNK >= len(data), using)
                        for at in range(0, len(data), CHUNK))
    assert len(_deflated(data, using)) < len(unprimed) - len(repeated) // 2


def test_isal_inflates_a_stream_zlib_refuses() -> None:
    """Why only deflating uses ISA-L: its inflater accepts what zlib, the installer's, refuses
    (zipgen's ``deflate-only-isal-accepts`` case, which migrate must refuse as wheel.corrupt)."""
    isal_zlib = pytest.importorskip("isal.isal_zlib")
    with pytest.raises(zlib.error, match="invalid literal/lengths set"):
        zlib.decompressobj(-15).decompress(zipgen.LENIENT_DEFLATE)
    inflater = isal_zlib.decompressobj(-15)
    assert inflater.decompress(zipgen.LENIENT_DEFLATE) == b"" and inflater.eof and not inflater.unused_data


def test_the_preferred_engine_is_isal_where_installed() -> None:
    """``adopt -o`` deflates with ISA-L where the ``fast`` extra is installed: the first of
    :func:`engines`, and zlib is always among them."""
    names = [e.name for e in engines()]
    assert names[-1] == "zlib"
    try:
        import isal  # noqa: F401
    except ImportError:
        assert names == ["zlib"]
    else:
        assert names == ["isal", "zlib"]


def _source(path: Path, name: str) -> SourceFile:
    st = path.stat()
    data = path.read_bytes()
    return SourceFile(name, hashlib.sha256(data).hexdigest(), len(data), st.st_mode, st.st_mtime, str(path),
                      lambda: os.open(path, os.O_RDONLY), tuple(identity(st)))


@pytest.fixture
def tree(tmp_path: Path) -> dict[str, Path]:
    """Member name -> file: the large file, small ones, an empty one, the metadata."""
    files = {
        "big/lib/libbig.so": _generated(3 * CHUNK + 12345) + _generated(600 << 10),
        "big/__init__.py": b"from .core import *\n",
        "big/core.py": b"VALUE = 1\n" * 50,
        "big/empty.txt": b"",
        f"{DIST_INFO}/METADATA": b"Metadata-Version: 2.1\nName: big\nVersion: 1.0\n",
        f"{DIST_INFO}/WHEEL": b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: false\nTag: py3-none-any\n",
    }
    paths = {}
    for name, data in files.items():
        path = tmp_path / "site" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        paths[name] = path
    return paths


def _write(tree: dict[str, Path], out: Path, jobs: int, using: Engine) -> Path:
    sources = [_source(path, name) for name, path in tree.items()]
    added = {f"{DIST_INFO}/entry_points.txt": b"[console_scripts]\nbig = big:main\n"}
    writer = FileWheelWriter(DIST_INFO, sources, added, jobs=jobs, epoch=1700000000, progress=None, using=using)
    with out.open("wb") as stream:
        writer.write(stream.fileno())
    return out


@ENGINES
def test_every_member_reads_back_and_the_bytes_do_not_depend_on_jobs(tree: dict[str, Path], tmp_path: Path,
                                                                      using: Engine) -> None:
    one = _write(tree, tmp_path / "jobs1.whl", 1, using)
    eight = _write(tree, tmp_path / "jobs8.whl", 8, using)
    assert one.read_bytes() == eight.read_bytes()
    with zipfile.ZipFile(one) as archive:
        assert archive.testzip() is None  # every member's CRC-32 over its inflated bytes
        big = archive.getinfo("big/lib/libbig.so")
        assert big.compress_type == zipfile.ZIP_DEFLATED and big.file_size > 3 * CHUNK
        for name, path in tree.items():
            assert archive.read(name) == path.read_bytes()
        rows = records.parse(archive.read(f"{DIST_INFO}/RECORD").decode(), "RECORD")
        assert archive.namelist()[-1] == f"{DIST_INFO}/RECORD"
    for name, path in tree.items():
        assert rows[name].sha256 == hashlib.sha256(path.read_bytes()).hexdigest()


def test_a_file_changed_after_its_check_is_refused_naming_the_member(tree: dict[str, Path], tmp_path: Path) -> None:
    sources = [_source(path, name) for name, path in tree.items()]
    big = tree["big/lib/libbig.so"]
    with big.open("r+b") as stream:  # same size, other bytes
        stream.write(b"\0" * 16)
    writer = FileWheelWriter(DIST_INFO, sources, {}, jobs=2, epoch=None, progress=None)
    with (tmp_path / "out.whl").open("wb") as stream, pytest.raises(InstalledError) as caught:
        writer.write(stream.fileno())
    assert caught.value.code == "installed.changed" and caught.value.path == str(big)
    assert "member big/lib/libbig.so:" in str(caught.value)


def test_refusals_come_before_anything_is_read(tree: dict[str, Path]) -> None:
    """A member named twice, or an added file outside .dist-info: refused when the writer is
    made, before any file is opened."""
    opened: list[str] = []

    def unopenable(name: str) -> SourceFile:
        source = _source(tree[name], name)

        def opener() -> int:
            opened.append(name)
            return source.opener()

        return SourceFile(source.name, source.sha256, source.size, source.mode, source.mtime, source.where, opener,
                          source.identity)

    twice = [unopenable("big/core.py"), unopenable("big/core.py")]
    with pytest.raises(WheelError) as caught:
        FileWheelWriter(DIST_INFO, twice, {}, jobs=1, epoch=None, progress=None)
    assert caught.value.code == "wheel.duplicate"
    with pytest.raises(WheelError) as caught:
        FileWheelWriter(DIST_INFO, [unopenable("big/core.py")], {"big/extra.py": b""}, jobs=1, epoch=None,
                        progress=None)
    assert caught.value.code == "wheel.injection"
    assert opened == []
