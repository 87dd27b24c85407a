"""Write the seed corpus of crafted wheels into DIR, one sub-directory per case.

    python tests/data/make_wheel_corpus.py DIR

Each case of ``tests/helpers/zipgen.py`` (leading and trailing data, local headers that lie,
overlapping members, special-file modes, corrupt deflate, bad names, RECORD limits...)
becomes ``DIR/<case>/demo-1.0-py3-none-any.whl``. The files are built, never committed: the
tests and ``make fuzz`` call this script into a temporary directory.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from helpers import zipgen  # noqa: E402


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    root = Path(argv[0])
    for case in zipgen.CASES:
        target = root / case.name / "demo-1.0-py3-none-any.whl"
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(case.build())
    print(f"{len(zipgen.CASES)} crafted wheels in {root}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
