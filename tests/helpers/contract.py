"""The plugin contract's test bed: where a contract plugin and its stub libtriton go in a
wheel, and the ``[tool.backend-packager]`` table that declares it, parsed as the build does."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from backend_packager.manifest import config

PLUGIN = "contract_pkg/libcontract.so"


LIBTRITON = "triton/_C/libtriton.so"


def table(**plugin: Any) -> dict[str, Any]:
    """A ``[tool.backend-packager]`` table: one backend, one plugin at :data:`PLUGIN` with ``plugin``."""
    return {"backends": [{"name": "contract", "package": "contract_pkg", "targets": ["contract"]}],
            "plugins": [{"path": PLUGIN, **plugin}]}


def parse(doc: dict[str, Any], tmp_path: Path) -> config.Config:
    """``doc`` read as the build reads a project's table (the project in ``tmp_path``)."""
    return config.parse(doc, tmp_path, tmp_path / "pyproject.toml", {})
