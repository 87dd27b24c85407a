"""What a written wheel holds, checked with zipfile and hashlib, independently of the
packager: strict-installer ZIP rules, the files a manifest must vouch for, entry points."""

from __future__ import annotations

import hashlib
import json
import struct
import zipfile
from pathlib import Path
from typing import Any

from helpers.cli import run_cli
from helpers.projects import Keypair


def entry_points_of(wheel: Path) -> str:
    with zipfile.ZipFile(wheel) as archive:
        name = next(n for n in archive.namelist() if n.endswith(".dist-info/entry_points.txt"))
        return archive.read(name).decode()


def assert_strict_zip(wheel: Path) -> None:
    """What strict installers check: local headers agree with the central directory (CRC,
    sizes, name), no data descriptors, no extra fields in local headers, no duplicate names,
    and nothing after the end-of-central-directory record."""
    data = wheel.read_bytes()
    assert data.rfind(b"PK\x05\x06") == len(data) - 22  # EOCD last, no comment, no trailing bytes
    with zipfile.ZipFile(wheel) as archive:
        infos = archive.infolist()
        assert len({i.filename for i in infos}) == len(infos)
        for info in infos:
            fields = struct.unpack_from("<IHHHHHIIIHH", data, info.header_offset)
            sig, _, flags, method, _, _, crc, csize, usize, nlen, xlen = fields
            assert sig == 0x04034B50 and not flags & 0x8 and xlen == 0, info.filename
            assert (method, crc, csize, usize) == (info.compress_type, info.CRC, info.compress_size, info.file_size)
            name = data[info.header_offset + 30 : info.header_offset + 30 + nlen].decode()
            assert name == info.filename


#: Files installers write or rewrite, and the manifest itself: nothing can vouch for them.
INSTALLER_WRITTEN = {"RECORD", "INSTALLER", "REQUESTED", "direct_url.json", "triton_backend.dsse.json"}


def vouched_members(wheel: Path) -> dict[str, tuple[str, int, bool]]:
    """Every file a coverage-"all" manifest must list, read with zipfile and hashlib (an
    oracle independent of the packager): path -> (sha256, size, starts with the ELF magic)."""
    out = {}
    with zipfile.ZipFile(wheel) as archive:
        for info in archive.infolist():
            top, _, leaf = info.filename.partition("/")
            if info.is_dir() or (top.endswith(".dist-info") and leaf in INSTALLER_WRITTEN):
                continue
            digest = hashlib.sha256()
            with archive.open(info) as stream:
                head = stream.read(4)
                digest.update(head)
                while chunk := stream.read(1 << 20):
                    digest.update(chunk)
            out[info.filename] = (digest.hexdigest(), info.file_size, head == b"\x7fELF")
    return out


def assert_vouches_for_every_file(wheel: Path) -> dict[str, Any]:
    """The manifest (schema 1.1, coverage "all") lists exactly the wheel's files, each with
    its sha256 and size, and ELF facts on native files only. Returns the manifest."""
    inspected = json.loads(run_cli("inspect", "--json", str(wheel)).stdout)["wheels"][0]
    manifest: dict[str, Any] = inspected["manifest"]
    assert (manifest["schema_version"], manifest["coverage"], inspected["coverage"]) == ("1.6", "all", "all")
    listed = {a["path"]: a for a in manifest["artifacts"]}
    members = vouched_members(wheel)
    assert sorted(listed) == sorted(members)
    for path, (digest, size, is_elf) in members.items():
        assert (listed[path]["sha256"], listed[path]["size"]) == (digest, size), path
        if listed[path]["elf"] is not None:
            assert is_elf, path
    return manifest


def manifest_of(wheel: Path) -> dict[str, Any]:
    """The manifest of ``wheel`` as ``backend-packager inspect --json`` shows it."""
    doc = json.loads(run_cli("inspect", "--json", str(wheel)).stdout)
    manifest: dict[str, Any] = doc["wheels"][0]["manifest"]
    return manifest


def verified(wheel: Path, key: Keypair) -> bool:
    """``backend-packager verify`` accepts ``wheel`` against ``key`` alone."""
    proc = run_cli("verify", str(wheel), "--trust", str(key.public))
    return proc.returncode == 0 and proc.stdout.startswith("OK")
