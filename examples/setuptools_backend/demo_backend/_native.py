"""The driver library shipped in ``lib/``, loaded on first use (never at import)."""

import ctypes
import functools
from pathlib import Path

LIBRARY = Path(__file__).resolve().parent / "lib" / "libdemo_driver.so"


@functools.lru_cache(maxsize=None)
def library() -> ctypes.CDLL:
    lib = ctypes.CDLL(str(LIBRARY))
    lib.demo_device_count.restype = ctypes.c_int
    lib.demo_device_arch.argtypes = [ctypes.c_int]
    lib.demo_device_arch.restype = ctypes.c_int
    lib.demo_driver_version.restype = ctypes.c_char_p
    return lib


def device_count() -> int:
    return int(library().demo_device_count())


def device_arch(device: int) -> int:
    return int(library().demo_device_arch(device))
