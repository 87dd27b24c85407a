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
and envelope sha256: stable across processes, different after any backend upgrade. Each
admitted plugin (loaded, or pending until libtriton is imported) adds its own part: the
name and version its ``tritonGetPluginInfo`` gave, its manifest's digest and the pass
placement its vendor declared, so a new plugin version or pass configuration misses the
kernels compiled before it, while a distribution that is no backend and no plugin in use
changes nothing. It is installed only when at least one manifest is in use (or a plugin
is required), so a purely legacy setup keeps Triton's cache keys unchanged.

A plugin declared ``on-failure = "fail"`` that is not loaded makes the hook raise
:class:`PluginRequiredError` when Triton asks for the key, which is the first thing
``triton.compiler.compile`` and ``JITFunction.run`` do: compiling stops, naming the plugin
and its reason, instead of silently running the standard pipeline.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .errors import LoadError

if TYPE_CHECKING:
    from .registry import PluginEntry
    from .verdict import Verdict


class PluginRequiredError(LoadError, RuntimeError):
    """A plugin whose vendor declared ``on-failure = "fail"`` is not loaded (a RuntimeError,
    as Triton's own compilation errors are)."""


@dataclass(frozen=True)
class PluginKey:
    """What of one admitted plugin goes into the compile cache key."""

    name: str
    version: str
    manifest: str = ""
    placement: tuple[str, ...] = ()


def manifest_digest(items: list[tuple[str, str, str]], plugins: Sequence[PluginKey] = ()) -> str:
    """sha256 over sorted (distribution, version, envelope sha256) triples, then the plugins."""
    digest = hashlib.sha256()
    for name, version, envelope in sorted(set(items)):
        digest.update(f"{name}\0{version}\0{envelope}\n".encode())
    for key in sorted(set(plugins), key=lambda k: (k.name, k.version, k.manifest, k.placement)):
        digest.update(f"plugin\0{key.name}\0{key.version}\0{key.manifest}\0{';'.join(key.placement)}\n".encode())
    return digest.hexdigest()


def plugin_keys(plugins: list[PluginEntry], verdicts: dict[str, Verdict]) -> list[PluginKey]:
    """One key per admitted plugin: its own name and version where captured (else the
    library's path and its distribution's version), its manifest's digest, its placement."""
    keys = []
    for plugin in plugins:
        terms = plugin.terms
        verdict = verdicts.get(plugin.dist.dist_info)
        placement = (f"phase {terms.phase}", *terms.placement) if terms else ()
        keys.append(PluginKey(
            name=(terms.name if terms and terms.name else plugin.path),
            version=(terms.version if terms and terms.version else plugin.dist.version),
            manifest=verdict.envelope_sha256 if verdict else "",
            placement=placement,
        ))
    return keys


class StagesHook:
    """The value for ``knobs.runtime.add_stages_inspection_hook``; state: the digest, the
    hook it replaced, and (when a plugin is required) what says which required ones are missing."""

    def __init__(self, digest: str, previous: Any = None, missing: Callable[[], list[str]] | None = None) -> None:
        self.digest = digest
        self.previous = previous
        self.missing = missing

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if args or kwargs:
            return self.previous(*args, **kwargs) if self.previous is not None else None
        if self.missing is not None:
            problems = self.missing()
            if problems:
                raise PluginRequiredError("plugin-required", "triton.compiler.compile", "; ".join(problems))
        key, value = f"-backend-manifests-{self.digest}", self.digest
        if self.previous is not None:
            prev_key, prev_hash = self.previous()
            key, value = f"{prev_key}{key}", hashlib.sha256(f"{prev_hash}{value}".encode()).hexdigest()
        return key, value


def install(knobs: Any, digest: str, missing: Callable[[], list[str]] | None = None) -> StagesHook:
    """Put the hook in front of whatever hook ``knobs.runtime`` holds (idempotent)."""
    current = knobs.runtime.add_stages_inspection_hook
    if isinstance(current, StagesHook):
        current.digest, current.missing = digest, missing
        return current
    hook = StagesHook(digest, current, missing)
    knobs.runtime.add_stages_inspection_hook = hook
    return hook
