"""Run one Triton kernel and report what the backend registry decided (prints JSON)."""

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


def main() -> None:
    result: dict[str, Any] = {"triton": triton.__version__, "policy": os.environ.get("TRITON_BACKEND_POLICY", "warn")}
    try:
        import triton.backends as tb
        from triton.runtime.driver import driver

        result["backends"] = sorted(tb.backends)
        n = 1 << 20
        x, y = torch.randn(n, device="cuda"), torch.randn(n, device="cuda")
        out = torch.empty_like(x)
        add[(triton.cdiv(n, 1024),)](x, y, out, n, BLOCK=1024)
        torch.cuda.synchronize()
        result["kernel_ok"] = bool(torch.allclose(out, x + y))
        result["active_driver"] = type(driver.active).__name__
    except Exception as exc:  # the report below says why
        result["error"] = f"{type(exc).__name__}: {exc}"[:2000]
    try:
        from triton_backend_runtime import registry

        rows = registry.get().report()["backends"]
        result["registry"] = [{k: b.get(k) for k in ("name", "trust", "state", "reason")} for b in rows]
    except Exception as exc:
        result["registry_error"] = f"{type(exc).__name__}: {exc}"
    print(json.dumps(result, indent=1, default=str))


if __name__ == "__main__":
    main()
