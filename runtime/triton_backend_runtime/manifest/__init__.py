"""Layer 1: the signed manifest. ``model`` holds its dataclasses (the one definition, which
the packager writes and the runtime reads); ``schema`` is the dataclass <-> JSON codec.
"""

# A name is imported from its module when first asked for (PEP 562): importing one module of
# this layer must not import the others, since ``import triton`` pays for every module loaded.
# Not typing.TYPE_CHECKING: importing typing costs milliseconds at start-up.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from . import model, schema
    from .model import (
        COVERAGE_ALL,
        COVERAGE_NATIVE,
        EXPORT_LIST_LIMIT,
        MANIFEST_FILENAME,
        PLUGIN_V1_SYMBOLS,
        PLUGIN_V2_SYMBOL,
        PROTOCOL_VERSION,
        Artifact,
        ElfInfo,
        ExportTable,
        Import,
        Manifest,
        PassPlacement,
        Plugin,
        PluginApi,
        PluginContract,
        Symbol,
        UpstreamIdentity,
        VersionNeed,
        file_kind,
        is_installer_file,
    )

__all__ = [
    "Artifact",
    "COVERAGE_ALL",
    "COVERAGE_NATIVE",
    "EXPORT_LIST_LIMIT",
    "ElfInfo",
    "ExportTable",
    "Import",
    "MANIFEST_FILENAME",
    "Manifest",
    "PLUGIN_V1_SYMBOLS",
    "PLUGIN_V2_SYMBOL",
    "PROTOCOL_VERSION",
    "PassPlacement",
    "Plugin",
    "PluginApi",
    "PluginContract",
    "Symbol",
    "UpstreamIdentity",
    "VersionNeed",
    "file_kind",
    "is_installer_file",
    "model",
    "schema",
]

_WHERE = {
    "Artifact": "model",
    "COVERAGE_ALL": "model",
    "COVERAGE_NATIVE": "model",
    "EXPORT_LIST_LIMIT": "model",
    "ElfInfo": "model",
    "ExportTable": "model",
    "Import": "model",
    "MANIFEST_FILENAME": "model",
    "Manifest": "model",
    "PLUGIN_V1_SYMBOLS": "model",
    "PLUGIN_V2_SYMBOL": "model",
    "PROTOCOL_VERSION": "model",
    "PassPlacement": "model",
    "Plugin": "model",
    "PluginApi": "model",
    "PluginContract": "model",
    "Symbol": "model",
    "UpstreamIdentity": "model",
    "VersionNeed": "model",
    "file_kind": "model",
    "is_installer_file": "model",
}


def __getattr__(name: str) -> object:
    where = _WHERE.get(name)
    if where is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(__import__(f"{__name__}.{where}", fromlist=[name]), name)
    globals()[name] = value  # the next import of this name finds it without this call
    return value
