"""Names fixed by where things live in a wheel and an installed distribution.

Kept in a module of their own, importing only ``re``, so that discovery (on every
``import triton``) and the manifest schema (build side, cold path) share one definition
without the hot path importing the schema.
"""

import re

__all__ = ["BACKENDS_GROUP", "MANIFEST_FILENAME", "SIGSTORE_BUNDLE_FILENAME", "is_shared_library"]

#: The entry-point group Triton reads backends from (``entry_points.txt``).
BACKENDS_GROUP = "triton.backends"
#: The signed manifest's file name: a DSSE envelope, a top-level file in ``.dist-info/``
#: (subdirectories there are reserved; RECORD.jws / RECORD.p7s are withdrawn names).
MANIFEST_FILENAME = "triton_backend.dsse.json"
#: The keyless signature of the manifest's statement: a Sigstore bundle (JSON, v0.3) whose DSSE
#: payload is the manifest's payload byte for byte; beside the manifest, listed in RECORD.
SIGSTORE_BUNDLE_FILENAME = "triton_backend.sigstore.json"

#: Shared-library file names: libfoo.so, libfoo.so.1, libMLIR.so.24.0git. A pattern, compiled (and
#: cached by ``re``) on first use: a warm ``import triton`` never asks, and compiling costs 0.2 ms.
_SHARED_LIBRARY = r"\.so(\.[0-9A-Za-z_]+)*$"


def is_shared_library(name: str) -> bool:
    """Whether a file name (or path) is named like a shared library; the manifest must list those."""
    return re.search(_SHARED_LIBRARY, name) is not None
