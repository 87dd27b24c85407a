"""What the tests share, one module per job, imported as ``helpers.<job>`` (``tests/`` is on
``sys.path``: pytest puts ``conftest.py``'s directory there).

- :mod:`helpers.cli`: the packager's console script, run as a user runs it.
- :mod:`helpers.venv`: a venv with the real triton, and the runtime's CLI in it.
- :mod:`helpers.wheels`: small real wheels written here, real ones fetched from the index.
- :mod:`helpers.projects`: example projects built with ``python -m build``, wheels edited.
- :mod:`helpers.csrc`: shared libraries compiled with gcc from ``tests/csrc``.
- :mod:`helpers.disttree`: installed distributions with signed manifests, without pip.
- :mod:`helpers.elfgen`, :mod:`helpers.zipgen`: ELF files and wheels written byte by byte.
- :mod:`helpers.binutils`: what readelf and nm say, the scanner's reference.
- :mod:`helpers.index`: a mirror's simple index, read back.
- :mod:`helpers.reasoncodes`: the reason codes the runtime can give, read from its sources.
- :mod:`helpers.scratch`: session-scoped scratch directories.
- :mod:`helpers.alarm`: a bound on how long one fuzz example may run.
"""
