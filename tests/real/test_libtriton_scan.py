"""The ELF scanner on the real libtriton.so of triton 3.9.0: its limits cost nothing there, its
counts equal nm's, and the streamed scan equals the scan of the extracted file.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import binutils

from backend_packager.scanning import elf
from backend_packager.scanning.elf import scan_elf


@pytest.mark.triton_wheel
def test_libtriton_scans_the_same_from_file_and_from_the_wheel(triton_wheel: Path, tmp_path: Path) -> None:
    """The limits cost nothing on the real library: counts equal nm's, and the streamed
    scan (planned ranges, spool bounded) equals the scan of the extracted file."""
    import zipfile

    from backend_packager.scanning.artifacts import ArtifactSink, read_into

    member = "triton/_C/libtriton.so"
    with zipfile.ZipFile(triton_wheel) as archive:
        lib = Path(archive.extract(member, tmp_path))
        sink = ArtifactSink(member, member)
        with archive.open(member) as stream:
            read_into(sink, stream)  # type: ignore[arg-type]
    kept = sink.kept
    streamed = sink.finish()
    with lib.open("rb") as opened:
        info = scan_elf(opened, str(lib))
    assert info.exports.count == len(binutils.nm_defined(lib)) == 137_294
    assert len(info.imports) == sum(1 for _ in binutils.nm_undefined(lib))
    assert info.python_extension == ["libtriton"]
    assert streamed.elf == info
    assert kept <= elf.SCAN_BYTES_LIMIT
