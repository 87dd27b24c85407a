"""The demo backend's driver: Triton takes the one concrete DriverBase subclass here.

Importing it never touches the device; ``is_active`` asks the driver library whether a
demo device is present, so the backend stays out of the way on machines without one.
"""

import time

from triton.backends.compiler import GPUTarget
from triton.backends.driver import DriverBase

from . import _native

_CPP_TYPES = {
    "i1": "int8_t", "i8": "int8_t", "i16": "int16_t", "i32": "int32_t", "i64": "int64_t",
    "u1": "uint8_t", "u8": "uint8_t", "u16": "uint16_t", "u32": "uint32_t", "u64": "uint64_t",
    "fp16": "double", "bf16": "double", "fp32": "double", "f32": "double", "fp64": "double",
}


def _benchmark(kernel_call, *, quantiles=None, warmup=1, rep=10, **kwargs):
    kernel_call()
    times = []
    for _ in range(max(warmup, 0) + rep):
        start = time.perf_counter()
        kernel_call()
        times.append((time.perf_counter() - start) * 1e3)
    times = sorted(times[warmup:])
    if quantiles:
        return [times[min(int(q * len(times)), len(times) - 1)] for q in quantiles]
    return sum(times) / len(times)


class DemoDriver(DriverBase):

    @classmethod
    def is_active(cls) -> bool:
        try:
            return _native.device_count() > 0
        except OSError:
            return False  # the library itself is missing or unloadable: not our device

    def map_python_to_cpp_type(self, ty: str) -> str:
        if ty.startswith("*"):
            return "void*"
        return _CPP_TYPES[ty]

    def get_current_target(self) -> GPUTarget:
        return GPUTarget("demo", _native.device_arch(0), 32)

    def get_active_torch_device(self):
        import torch

        return torch.device("cpu")

    def get_benchmarker(self):
        return _benchmark
