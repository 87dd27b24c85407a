"""The skdemo driver: the one concrete DriverBase subclass Triton looks for here.

Import is free of side effects; ``is_active`` asks the driver library for devices.
"""

import ctypes
import functools

from triton.backends.compiler import GPUTarget
from triton.backends.driver import DriverBase

from . import LIB


@functools.lru_cache(maxsize=None)
def _library() -> ctypes.CDLL:
    lib = ctypes.CDLL(str(LIB / "libskdemo_driver.so"))
    lib.skdemo_device_arch.argtypes = [ctypes.c_int]
    return lib


class SkdemoDriver(DriverBase):

    @classmethod
    def is_active(cls) -> bool:
        try:
            return _library().skdemo_device_count() > 0
        except OSError:
            return False

    def map_python_to_cpp_type(self, ty: str) -> str:
        if ty.startswith("*"):
            return "void*"
        return {"i1": "bool", "i32": "int32_t", "i64": "int64_t", "fp32": "float", "fp64": "double"}.get(ty, "int64_t")

    def get_current_target(self) -> GPUTarget:
        return GPUTarget("skdemo", _library().skdemo_device_arch(0), 64)

    def get_active_torch_device(self):
        import torch

        return torch.device("cpu")

    def get_benchmarker(self):
        from triton.testing import do_bench

        return do_bench
