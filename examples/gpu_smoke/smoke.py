"""Run one Triton kernel and one ``torch.compile`` function, and report what the backend
registry decided (prints JSON). Both results are compared with eager PyTorch."""

from __future__ import annotations

import json
import os
from typing import Any

import torch
import triton
import triton.language as tl


@triton.jit
def add(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):  # type: ignore[no-untyped-def]
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask), mask=mask)


def gelu_mix(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Pointwise and a reduction: inductor turns this into Triton kernels on a GPU."""
    return torch.nn.functional.gelu(x) * y + x.sin().sum(dim=-1, keepdim=True)


def run_kernel(result: dict[str, Any]) -> None:
    from triton.runtime.driver import driver

    n = 1 << 20
    x, y = torch.randn(n, device="cuda"), torch.randn(n, device="cuda")
    out = torch.empty_like(x)
    add[(triton.cdiv(n, 1024),)](x, y, out, n, BLOCK=1024)
    torch.cuda.synchronize()
    result["kernel_ok"] = bool(torch.equal(out, x + y))
    result["active_driver"] = type(driver.active).__name__


def run_compiled(result: dict[str, Any]) -> None:
    from torch._inductor import metrics

    x, y = torch.randn(512, 1024, device="cuda"), torch.randn(512, 1024, device="cuda")
    compiled = torch.compile(gelu_mix)
    got = compiled(x, y)
    torch.cuda.synchronize()
    result["compile_ok"] = bool(torch.allclose(got, gelu_mix(x, y), rtol=1e-4, atol=1e-4))
    result["compile_triton_kernels"] = metrics.generated_kernel_count


def main() -> None:
    result: dict[str, Any] = {"triton": triton.__version__, "torch": torch.__version__,
                              "policy": os.environ.get("TRITON_BACKEND_POLICY", "warn")}
    for step in (run_kernel, run_compiled):
        try:
            step(result)
        except Exception as exc:  # the report below says why
            result[f"{step.__name__}_error"] = f"{type(exc).__name__}: {exc}"[:2000]
    try:
        import triton.backends as tb

        result["backends"] = sorted(tb.backends)
        from triton_backend_runtime.loading import registry

        rows = registry.get().report().to_dict()["backends"]
        result["registry"] = [{k: b.get(k) for k in ("name", "trust", "state", "reason")} for b in rows]
    except Exception as exc:
        result["registry_error"] = f"{type(exc).__name__}: {exc}"[:2000]
    print(json.dumps(result, indent=1, default=str))


if __name__ == "__main__":
    main()
