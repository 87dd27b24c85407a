"""Cache isolation: the manifests in use become part of Triton's compile cache key.

Triton 3.9 keys its kernel caches on the source, the backend's ``hash()``, options and
environment; an upgraded backend wheel whose ``hash()`` did not change would be served
kernels compiled by the old one. ``knobs.runtime.add_stages_inspection_hook`` is the one
hook Triton folds into both keys: called with no arguments it returns ``(key, hash)``;
``triton.compiler.compile`` appends ``key`` to the on-disk cache key and
``JITFunction.run`` adds ``hash`` to the in-memory specialisation key. Called with
arguments ``(backend, stages, options, language, capability)`` it may edit the pipeline;
this hook leaves the pipeline alone and defers to a hook installed before it.

The digest covers, sorted, every loaded backend's and plugin's distribution name, version
and envelope sha256: stable across processes, different after any backend upgrade. It is
installed only when at least one manifest is in use, so a purely legacy setup keeps
Triton's cache keys unchanged.
"""

from __future__ import annotations

import hashlib
from typing import Any


def manifest_digest(items: list[tuple[str, str, str]]) -> str:
    """sha256 over sorted (distribution, version, envelope sha256) triples."""
    digest = hashlib.sha256()
    for name, version, envelope in sorted(set(items)):
        digest.update(f"{name}\0{version}\0{envelope}\n".encode())
    return digest.hexdigest()


class StagesHook:
    """The value for ``knobs.runtime.add_stages_inspection_hook``; state: the digest and the
    hook it replaced."""

    def __init__(self, digest: str, previous: Any = None) -> None:
        self.digest = digest
        self.previous = previous

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if args or kwargs:
            return self.previous(*args, **kwargs) if self.previous is not None else None
        key, value = f"-backend-manifests-{self.digest}", self.digest
        if self.previous is not None:
            prev_key, prev_hash = self.previous()
            key, value = f"{prev_key}{key}", hashlib.sha256(f"{prev_hash}{value}".encode()).hexdigest()
        return key, value


def install(knobs: Any, digest: str) -> StagesHook:
    """Put the hook in front of whatever hook ``knobs.runtime`` holds (idempotent)."""
    current = knobs.runtime.add_stages_inspection_hook
    if isinstance(current, StagesHook):
        current.digest = digest
        return current
    hook = StagesHook(digest, current)
    knobs.runtime.add_stages_inspection_hook = hook
    return hook
