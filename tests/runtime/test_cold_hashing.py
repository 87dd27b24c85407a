"""Cold verification's hashing beside the rest: started before the verifier loads, large
files in large pieces, the GIL handed back promptly while verifying; none of it decides."""

from __future__ import annotations

import hashlib
import json
import os
import sys
from pathlib import Path

import pytest
from helpers.disttree import Dist, TrustEnv, entry, write_dist
from triton_backend_runtime.base.regularfile import read_chunks, read_views
from triton_backend_runtime.base.switchinterval import HASHING_SWITCH_INTERVAL
from triton_backend_runtime.site import HashCache
from triton_backend_runtime.verification.prefetch import MAX_PREFETCH_FILES


@pytest.mark.parametrize("interval", [0.003, 0.0001])
def test_verification_leaves_the_switch_interval_as_it_was(env: TrustEnv, site: Path, interval: float) -> None:
    """Shortened while verifying (a cold one, every file hashed), restored after; one set
    shorter than the registry's is never lengthened."""
    dist = write_dist(site)
    dist.sign(env.key)
    before = sys.getswitchinterval()
    sys.setswitchinterval(interval)
    try:
        reg = env.registry(site, policy="strict", rehash=True)
        after = sys.getswitchinterval()
    finally:
        sys.setswitchinterval(before)
    assert (entry(reg, "demo").trust, entry(reg, "demo").reason) == ("verified", None)
    assert after == pytest.approx(interval, abs=1e-5)  # kept in microseconds
    assert HASHING_SWITCH_INTERVAL < 0.005


def test_a_changed_file_is_refused_though_its_hashing_started_first(env: TrustEnv, site: Path) -> None:
    """The registry starts the core's hashing from RECORD before anything is checked: a
    file changed after the manifest was signed is still ``verify.sha256``."""
    dist = write_dist(site)
    dist.sign(env.key)
    changed = dist.file("demo_backend/compiler.py")
    data = changed.read_bytes()
    changed.write_bytes(data[:-1] + bytes([data[-1] ^ 1]))  # the same size
    reg = env.registry(site, policy="strict", rehash=True)
    demo = entry(reg, "demo")
    assert demo.trust == "rejected" and demo.reason is not None and demo.reason.code == "verify.sha256"


@pytest.mark.parametrize("reader", ["chunks", "views"])
def test_pieces_never_exceed_their_size_nor_the_count(tmp_path: Path, reader: str) -> None:
    data = os.urandom(5 * 4096 + 17)
    path = tmp_path / "blob"
    path.write_bytes(data)
    fd = os.open(path, os.O_RDONLY)
    try:
        if reader == "chunks":
            pieces = list(read_chunks(fd, len(data) - 5, 4096))
        else:  # one buffer reused: each view copied before the next is read
            pieces = [bytes(view) for view in read_views(fd, len(data) - 5, 4096)]
    finally:
        os.close(fd)
    assert [len(p) for p in pieces] == [4096] * 5 + [12]
    assert hashlib.sha256(b"".join(pieces)).digest() == hashlib.sha256(data[:-5]).digest()


def _hostile_record(dist: Dist, other: Path) -> None:
    """A RECORD as pip copies it from a hostile wheel: 120,000 rows of missing files, and
    another distribution's large file, each with a size that makes it first in line."""
    rows = [f"demo_backend/missing{i}.so,sha256=x,{10_000_000 + i}\n" for i in range(120_000)]
    rows.append(f"{other.relative_to(dist.site).as_posix()},sha256=x,{other.stat().st_size}\n")
    (dist.dist_info / "RECORD").write_text("".join(rows))


@pytest.mark.parametrize("signed", [False, True])
def test_a_hostile_record_costs_a_bounded_number_of_files(env: TrustEnv, site: Path, signed: bool) -> None:
    """The prefetch is a hint: none for a hash-only manifest (its own budget bounds it), at
    most MAX_PREFETCH_FILES for a signed one, however many rows RECORD has; another
    distribution's large file is never hashed for a hash-only one."""
    other = write_dist(site, "other-backend", backends={"other": "other_backend"},
                       files={"other_backend/big.bin": os.urandom(3 * 1024 * 1024)})
    other.sign(env.key)
    dist = write_dist(site)
    manifest = dist.sign(*([env.key] if signed else []))
    _hostile_record(dist, other.file("other_backend/big.bin"))
    hashes = HashCache()
    verdict = env.verify(dist, env.context(hashes=hashes))
    hashes.close()
    assert verdict.status == ("verified" if signed else "unverified")
    listed = len(manifest.artifacts)
    assert hashes.submitted <= listed + (MAX_PREFETCH_FILES if signed else 0)
    if not signed:
        assert str(other.file("other_backend/big.bin")) not in hashes.entries


def test_the_signature_hint_is_a_member_not_a_quoted_phrase(env: TrustEnv, site: Path) -> None:
    """A hash-only envelope quoting ``"signatures": [{`` in a string is not hinted; one with a
    signature, whatever its spacing, is."""
    from triton_backend_runtime.verification.prefetch import _signed

    dist = write_dist(site)
    dist.sign()
    envelope = json.loads(dist.manifest_path.read_bytes())
    assert envelope["signatures"] == [] and not _signed(str(dist.manifest_path))
    envelope["payloadType"] = envelope["payloadType"] + ' ,"signatures": [{"keyid": "x"}]'
    dist.write_envelope(json.dumps(envelope).encode())
    assert not _signed(str(dist.manifest_path))
    dist.sign(env.key)
    spaced = json.dumps(json.loads(dist.manifest_path.read_bytes()), indent=3).encode()
    dist.write_envelope(spaced)
    assert _signed(str(dist.manifest_path))
