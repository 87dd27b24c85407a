"""Load-time half of the Triton backend trust layer.

Triton imports this package on every ``import triton``; it depends on the standard library,
``packaging`` and ``cryptography`` only, and imports the latter two lazily.
"""

__version__ = "0.1.0"
