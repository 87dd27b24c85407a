"""ELF fuzz: drawn tables and headers end in a result or an ElfError with a code, never else.

Every example is scanned through the library (``scan_elf`` on the file, and streamed
through :class:`ArtifactSink` with the second pass a miss asks for: both must agree);
a sample of them, written to one directory, through ``backend-packager scan --json``.
``FUZZ_EXAMPLES`` sets the number of examples (default small, for ``make test``); the
hypothesis deadline bounds each example's time, the limits' cost included.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from helpers import elfgen
from helpers.cli import run_cli
from hypothesis import HealthCheck, given, settings
from triton_backend_runtime.manifest.model import Artifact

from backend_packager.base.errors import ElfError
from backend_packager.scanning.artifacts import ArtifactSink, artifact_from_file
from backend_packager.scanning.elf import CaptureMiss

EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES", "150"))
#: Every how many examples one is kept for the CLI run.
SAMPLE_EVERY = 5


def _streamed(data: bytes, name: str, chunk: int) -> Artifact | ElfError:
    capture = None
    for _ in range(2):
        sink = ArtifactSink(name, name, capture=capture)
        try:
            for start in range(0, len(data), chunk):
                sink.update(data[start : start + chunk])
            return sink.finish(require_elf=True)
        except CaptureMiss as miss:
            assert capture is None, "the second pass asked for more"
            capture = miss.ranges
        except ElfError as exc:
            return exc
        finally:
            sink.close()
    raise AssertionError("unreachable")


def _scanned(path: Path) -> Artifact | ElfError:
    try:
        return artifact_from_file(path, path.name, require_elf=True)
    except ElfError as exc:
        return exc


def test_drawn_elf_files_scan_or_fail_with_a_code(tmp_path: Path) -> None:
    samples = tmp_path / "samples"
    samples.mkdir()
    seen = [0]

    @settings(max_examples=EXAMPLES, deadline=5000, database=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(data=elfgen.elf_files())
    def check(data: bytes) -> None:
        seen[0] += 1
        path = tmp_path / "drawn.so"
        path.write_bytes(data)
        whole = _scanned(path)
        if isinstance(whole, ElfError):
            assert whole.code.startswith("elf.") and whole.path == str(path), whole
        streamed = _streamed(data, str(path), chunk=1 + seen[0] % 4096)
        if isinstance(whole, Artifact):
            assert isinstance(streamed, Artifact) and streamed.elf == whole.elf, streamed
        else:
            assert isinstance(streamed, ElfError), streamed
        if seen[0] % SAMPLE_EVERY == 0:
            (samples / f"sample-{seen[0]}.so").write_bytes(data)

    check()
    proc = run_cli("scan", "--json", str(samples))
    assert proc.returncode in (0, 1), proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr
    doc = json.loads(proc.stdout)
    assert len(doc["artifacts"]) + len(doc["errors"]) == len(list(samples.iterdir()))
    assert all(e["code"].startswith("elf.") for e in doc["errors"]), doc["errors"]
