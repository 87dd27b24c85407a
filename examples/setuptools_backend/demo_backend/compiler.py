"""The demo backend's compiler: Triton takes the one concrete BaseBackend subclass here."""

import hashlib
from dataclasses import dataclass, fields

from triton.backends.compiler import BaseBackend, GPUTarget, Language

from . import __version__


@dataclass(frozen=True)
class DemoOptions:
    num_warps: int = 4
    num_ctas: int = 1
    num_stages: int = 1
    warp_size: int = 32
    debug: bool = False
    sanitize_overflow: bool = False
    arch: int = 1
    backend_name: str = "demo"

    def hash(self) -> str:
        text = "_".join(f"{f.name}-{getattr(self, f.name)}" for f in fields(self))
        return hashlib.sha256(text.encode()).hexdigest()


class DemoBackend(BaseBackend):
    binary_ext = "demobin"

    @staticmethod
    def supports_target(target: GPUTarget) -> bool:
        return target.backend == "demo"

    def hash(self) -> str:
        return f"demo-{__version__}-{self.target.arch}"

    def parse_options(self, options: dict) -> DemoOptions:
        known = {f.name for f in fields(DemoOptions)}
        values = {k: v for k, v in options.items() if k in known}
        values.setdefault("arch", self.target.arch)
        return DemoOptions(**values)

    def add_stages(self, stages: dict, options: object, language: Language) -> None:
        # The demo device runs Triton IR as text; a real backend lowers it to its own ISA.
        stages["ttir"] = lambda src, metadata: self.make_ttir(src, metadata, options)
        stages["demobin"] = lambda src, metadata: self.make_binary(src, metadata, options)

    @staticmethod
    def make_ttir(module, metadata: dict, options: object):
        return module

    @staticmethod
    def make_binary(src, metadata: dict, options: object) -> bytes:
        metadata.setdefault("shared", 0)
        return str(src).encode("utf-8")

    def load_dialects(self, context) -> None:
        pass  # the demo device needs no dialects beyond Triton's own

    def get_module_map(self) -> dict:
        return {}
