"""Build-time half of the Triton backend trust layer: scan, manifest, sign, write."""

__version__ = "0.1.0"
