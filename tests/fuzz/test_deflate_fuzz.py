"""What ``adopt -o`` deflates, every installed engine's pieces joined, is read back by zlib
(the installer's inflater) as the bytes that went in, wherever the pieces begin and end and
whatever they hold. ISA-L's inflater is laxer than zlib's, so only zlib judges here.
``FUZZ_EXAMPLES`` sets the number of examples (``make fuzz``)."""

from __future__ import annotations

import os
import zlib

from hypothesis import given, settings
from hypothesis import strategies as st

from backend_packager.wheel.deflate import WINDOW, deflate_chunk, engines

EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES", "100"))

#: Random bytes, runs and repeats at distances within and beyond the window: what makes a
#: back-reference reach across a piece's edge into its history.
parts = st.one_of(
    st.binary(max_size=3000),
    st.builds(lambda b, n: b * n, st.binary(min_size=1, max_size=40), st.integers(1, 400)),
    st.builds(lambda n: bytes(n), st.integers(0, 70_000)),
)


@settings(max_examples=EXAMPLES, deadline=None)
@given(data=st.lists(parts, max_size=12).map(b"".join), cuts=st.lists(st.floats(0, 1), max_size=6))
def test_pieces_joined_inflate_to_the_input(data: bytes, cuts: list[float]) -> None:
    edges = sorted({0, *(int(c * len(data)) for c in cuts)})
    bounds = list(zip(edges, [*edges[1:], len(data)], strict=True))
    for using in engines():
        stream = b"".join(deflate_chunk(data[a:b], data[max(0, a - WINDOW):a], i == len(bounds) - 1, using)
                          for i, (a, b) in enumerate(bounds))
        inflater = zlib.decompressobj(-15)
        assert inflater.decompress(stream) == data, using.name
        assert inflater.eof and inflater.unused_data == b"", using.name
