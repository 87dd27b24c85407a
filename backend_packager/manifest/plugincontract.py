"""A plugin's declared contract (``[tool.backend-packager.plugins]``) checked at build time
against what the library said about itself."""

from __future__ import annotations

from triton_backend_runtime.manifest import model as m

from ..base import ConfigError

__all__ = ["check_contract"]


def check_contract(plugin: m.Plugin, where: str) -> list[str]:
    """The vendor's declaration against what the library said about itself (build time).

    A declared pass the library does not register, or a captured Triton version outside the
    declared range, is a :class:`ConfigError` naming both. Returns warnings: a range that
    could not be checked because nothing was captured.
    """
    contract, info = plugin.contract, plugin.info
    if contract is None:
        return []
    key = f"tool.backend-packager.plugins[{plugin.path}]"
    if info is None or not info.captured:
        why = f"{info.reason_code}: {info.reason}" if info else "not captured"
        if contract.passes:
            raise ConfigError("plugin-uncaptured", where, f"{key}.passes: cannot check the declared passes of "
                              f"{plugin.path} against the library, which could not be asked ({why})")
        return [f"{plugin.path}: the declared Triton range {contract.triton!r} is recorded unchecked ({why})"] \
            if contract.triton else []
    registered = [p.name for p in info.passes]
    for placement in contract.passes:
        if placement.name not in registered:
            have = ", ".join(registered) or "no passes"
            raise ConfigError("plugin-pass", where, f"{key}.passes: declares pass {placement.name!r}, but "
                              f"{plugin.path} ({info.name} {info.version}) registers {have}")
    _check_range(contract.triton, info, plugin.path, where, key)
    return []


def _check_range(spec: str, info: m.PluginInfo, path: str, where: str, key: str) -> None:
    from packaging.specifiers import SpecifierSet
    from packaging.version import InvalidVersion, Version

    if not spec:
        return
    try:
        built_for = Version(info.triton_version or "")
    except InvalidVersion:
        raise ConfigError("plugin-triton", where, f"{key}.triton: {path} says it was built for Triton "
                          f"{info.triton_version!r}, not a PEP 440 version: the range {spec!r} cannot hold") from None
    if not SpecifierSet(spec).contains(built_for, prereleases=True):
        raise ConfigError("plugin-triton", where, f"{key}.triton: {path} ({info.name} {info.version}) was built for "
                          f"Triton {info.triton_version}, outside the declared range {spec!r}")
