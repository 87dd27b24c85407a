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

Triton before 3.7 never asks the hook for a key: 3.4-3.6 have the knob, but only the
backends call it (with arguments, to edit stages), and 3.0-3.3 have no knobs at all. Every
release since 3.0 forms the on-disk key in ``compile()`` as ``triton_key()-src.hash()-
backend.hash()-options.hash()-env`` (3.5+ through ``runtime.cache.get_cache_key``, which
the autotuner's cache also uses), with ``backend = make_backend(target)``, an instance of
``backends[name].compiler``. So where the ``compiler/compiler.py`` that this Triton imports
has no call of the hook without arguments, :func:`salt_backends` wraps ``hash`` of each
loaded backend's compiler class in place: the original value, then the digest; the required
plugins are checked there too. The in-memory kernel cache of ``JITFunction`` lives per
process, where the digest is constant; only the on-disk key needs it.
"""

from __future__ import annotations

import functools
import hashlib
import os
import re
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from ..base import LoadError, record

if TYPE_CHECKING:
    from ..loading import PluginEntry
    from ..verification import Verdict

__all__ = [
    "HOOK_KEY_CALL", "PluginKey", "PluginRequiredError", "SALT_ATTR", "SOURCE_LIMIT", "Salt", "StagesHook",
    "compile_reads_hook", "install", "isolate", "manifest_digest", "package_dir", "plugin_keys", "require",
    "salt_backends", "salt_compiler"
]


class PluginRequiredError(LoadError, RuntimeError):
    """A plugin whose vendor declared ``on-failure = "fail"`` is not loaded (a RuntimeError,
    as Triton's own compilation errors are)."""


@record(frozen=True)
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


def require(missing: Callable[[], list[str]] | None) -> None:
    """Raise :class:`PluginRequiredError` when a required plugin is not loaded."""
    if missing is not None:
        problems = missing()
        if problems:
            raise PluginRequiredError("plugin-required", "triton.compiler.compile", "; ".join(problems))


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
        require(self.missing)
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


#: How a ``compile()`` that folds the hook's key into the on-disk key asks for it (3.7-3.9 and
#: the forks seen: ``knobs.runtime.add_stages_inspection_hook()``); 3.4-3.6 only pass arguments.
HOOK_KEY_CALL = "add_stages_inspection_hook()"
#: Triton's compiler.py is ~20-35 kB; a larger one is not read (the hash() wrap then applies).
SOURCE_LIMIT = 1 << 20
SALT_ATTR = "__backend_manifests_salt__"
_RAW_ATTR = "__backend_manifests_unsalted__"


@record(eq=False)  # compared by identity; shared by every class salted in this process
class Salt:
    """What a salted ``hash()`` appends, and what says which required plugins are missing;
    updated in place when the registry folds the key again (a plugin loaded with libtriton)."""

    digest: str
    missing: Callable[[], list[str]] | None = None


def compile_reads_hook(package_dir: str | None) -> bool:
    """Whether ``<package_dir>/compiler/compiler.py`` asks the stages-inspection hook for a
    key. Read as text, not imported: it is imported only after ``triton.backends``, which is
    where the registry runs. Not a regular file (a FIFO is not waited on), unreadable or too
    large counts as no: salting ``hash()`` as well costs nothing but a longer key, missing it
    costs the isolation."""
    from ..base import RegularFileError, read_regular

    if package_dir is None:
        return False
    try:
        text = read_regular(os.path.join(package_dir, "compiler", "compiler.py"), SOURCE_LIMIT)
    except RegularFileError:
        return False
    return _HOOK_KEY_LINE.search(text) is not None


#: A line that calls the hook without arguments before any ``#``: a mention in a comment (a
#: fork's note, a 3.6 file documenting 3.7) is no call, and skipping the salting on it would
#: leave the on-disk key without the manifests.
_HOOK_KEY_LINE = re.compile(rb"^[^#\n]*" + re.escape(HOOK_KEY_CALL.encode()), re.MULTILINE)


def package_dir(package: str) -> str | None:
    """The directory of the imported (perhaps still importing) Triton package."""
    file = getattr(sys.modules.get(package), "__file__", None)
    return os.path.dirname(file) if isinstance(file, str) else None


def _salted(raw: Any, salt: Salt) -> Callable[[Any], str]:
    """``hash`` for a compiler class: the original's value, then the digest. ``raw`` is the
    class attribute as found in the MRO, bound per call, so a static ``hash`` works too."""

    def hash(self: Any) -> str:  # the name Triton calls
        require(salt.missing)
        bound = raw.__get__(self, type(self)) if hasattr(raw, "__get__") else raw
        return f"{bound()}-backend-manifests-{salt.digest}"

    if callable(raw):
        functools.update_wrapper(hash, raw)
    setattr(hash, SALT_ATTR, salt)
    setattr(hash, _RAW_ATTR, raw)
    return hash


def salt_compiler(cls: type, digest: str, missing: Callable[[], list[str]] | None = None) -> bool:
    """Make ``cls.hash()`` end with ``digest`` (idempotent: a second call updates the digest).

    In place rather than through a subclass: ``make_backend`` instantiates the class in the
    table, and the class keeps its identity (``isinstance``, pickling by name, what
    ``doctor`` and Triton print). False when the class has no ``hash`` or refuses the new one.
    """
    salt = getattr(cls.__dict__.get("hash"), SALT_ATTR, None)
    if isinstance(salt, Salt):
        salt.digest, salt.missing = digest, missing
        return True
    raw = next((klass.__dict__["hash"] for klass in cls.__mro__ if "hash" in klass.__dict__), None)
    if raw is None:
        return False
    # a base salted first: wrap its original, or a subclass's key would hold the digest twice
    # (and the key would depend on the order of Triton's backend table)
    raw = getattr(raw, _RAW_ATTR, raw)
    salted = _salted(raw, Salt(digest, missing))
    try:
        setattr(cls, "hash", salted)  # noqa: B010 (a wrap, not a typo)
    except (AttributeError, TypeError):  # a class that is immutable (a C type, a frozen metaclass)
        return False
    # a metaclass's __setattr__ may drop or alter it without raising: what Triton calls counts
    return getattr(cls, "hash", None) is salted


def salt_backends(table: dict[str, Any], digest: str, missing: Callable[[], list[str]] | None = None) -> list[str]:
    """Salt the compiler class of each backend in Triton's table; the names that could not be."""
    return [
        name for name, backend in table.items()
        if not (isinstance(compiler := getattr(backend, "compiler", None), type)
                and salt_compiler(compiler, digest, missing))
    ]


def isolate(package: str, table: dict[str, Any], digest: str,
            missing: Callable[[], list[str]] | None = None) -> list[str]:
    """Fold ``digest`` into the key of the Triton imported as ``package``: the hook, where
    its ``knobs`` exist; each backend's ``hash()`` too where its ``compile()`` does not ask
    the hook (before 3.7). The backends whose key it could not reach."""
    knobs = sys.modules.get(f"{package}.knobs")
    if knobs is not None and hasattr(getattr(knobs, "runtime", None), "add_stages_inspection_hook"):
        install(knobs, digest, missing)
        if compile_reads_hook(package_dir(package)):
            return []
    return salt_backends(table, digest, missing)
