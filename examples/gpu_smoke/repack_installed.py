"""Rebuild a wheel from an installed distribution's files (what its RECORD lists under site-packages).

A GPU machine with no package index has Triton installed but not its wheel; this gives
``backend-packager migrate`` a wheel to sign. Usage: ``python repack_installed.py DIST OUTDIR``.
"""

from __future__ import annotations

import base64
import csv
import hashlib
import io
import sys
import zipfile
from importlib.metadata import distribution
from pathlib import Path

SKIPPED = ("INSTALLER", "REQUESTED", "direct_url.json", "RECORD")


def wheel_name(dist_name: str, version: str, tags: list[str]) -> str:
    parts = [".".join(sorted({t.split("-")[i] for t in tags})) for i in range(3)]
    return f"{dist_name.replace('-', '_')}-{version}-{'-'.join(parts)}.whl"


def main() -> None:
    dist = distribution(sys.argv[1])
    site = Path(str(dist.locate_file("")))
    files = [str(p) for p in dist.files or []]
    info = next(p.split("/")[0] for p in files if p.split("/")[0].endswith(".dist-info"))
    tags = [line[5:].strip() for line in (dist.read_text("WHEEL") or "").splitlines() if line.startswith("Tag: ")]
    target = Path(sys.argv[2]) / wheel_name(dist.metadata["Name"], dist.version, tags)
    rows = []
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as archive:
        for path in sorted(files):
            if path.startswith("..") or "__pycache__" in path or path.split("/")[-1] in SKIPPED:
                continue
            data = (site / path).read_bytes()
            archive.write(site / path, path)  # write(), not writestr(): keeps the mode (ptxas is executable)
            digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            rows.append([path, f"sha256={digest}", len(data)])
        record = io.StringIO()
        writer = csv.writer(record, lineterminator="\n")
        writer.writerows([*rows, [f"{info}/RECORD", "", ""]])
        archive.writestr(f"{info}/RECORD", record.getvalue())
    print(target)


if __name__ == "__main__":
    main()
