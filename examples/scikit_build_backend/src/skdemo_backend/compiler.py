"""The skdemo compiler: the one concrete BaseBackend subclass Triton looks for here."""

import hashlib
from dataclasses import dataclass, fields

from triton.backends.compiler import BaseBackend, GPUTarget, Language

from . import __version__


@dataclass(frozen=True)
class SkdemoOptions:
    num_warps: int = 4
    num_ctas: int = 1
    num_stages: int = 2
    warp_size: int = 64
    debug: bool = False
    sanitize_overflow: bool = False
    arch: int = 2
    backend_name: str = "skdemo"

    def hash(self) -> str:
        return hashlib.sha256(repr(self).encode()).hexdigest()


class SkdemoBackend(BaseBackend):
    binary_ext = "skbin"

    @staticmethod
    def supports_target(target: GPUTarget) -> bool:
        return target.backend == "skdemo"

    def hash(self) -> str:
        return f"skdemo-{__version__}-{self.target.arch}"

    def parse_options(self, options: dict) -> SkdemoOptions:
        known = {f.name for f in fields(SkdemoOptions)}
        return SkdemoOptions(**{k: v for k, v in options.items() if k in known})

    def add_stages(self, stages: dict, options: object, language: Language) -> None:
        # Lowering happens in the plugin's passes on the device side; the host keeps the IR text.
        stages["ttir"] = lambda src, metadata: src
        stages["skbin"] = lambda src, metadata: str(src).encode("utf-8")

    def load_dialects(self, context) -> None:
        pass

    def get_module_map(self) -> dict:
        return {}
