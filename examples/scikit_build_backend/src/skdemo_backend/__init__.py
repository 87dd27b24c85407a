"""The skdemo Triton backend: a compiler, a driver, and a Triton plugin library in ``lib/``."""

from pathlib import Path

__version__ = "0.1.0"

LIB = Path(__file__).resolve().parent / "lib"


def plugin_path() -> Path:
    """The plugin library, for TRITON_PLUGIN_PATHS or ``passes.plugin.extend_with``."""
    return LIB / "libskdemo_plugin.so"
