"""Names fixed by where things live in a wheel and an installed distribution.

Kept in a module of their own, with no imports, so that discovery (on every
``import triton``) and the manifest schema (build side, cold path) share one definition
without the hot path importing the schema.
"""

#: The entry-point group Triton reads backends from (``entry_points.txt``).
BACKENDS_GROUP = "triton.backends"
#: The signed manifest's file name: a DSSE envelope, a top-level file in ``.dist-info/``
#: (subdirectories there are reserved; RECORD.jws / RECORD.p7s are withdrawn names).
MANIFEST_FILENAME = "triton_backend.dsse.json"
