"""Layer 4: the manifest made and signed. ``contents`` builds a manifest from a wheel's
contents, ``plugininfo`` asks plugins about themselves (in the sandbox), ``signing`` holds
keys and DSSE, ``config`` the vendor's ``[tool.backend-packager]`` table.
"""

# A name is imported from its module when first asked for (PEP 562): importing one module of
# this layer must not import the others, since ``import triton`` pays for every module loaded.
# Not typing.TYPE_CHECKING: importing typing costs milliseconds at start-up.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from . import (
        backendcode,
        config,
        contents,
        keyless,
        pluginanswer,
        plugincall,
        plugincontract,
        plugininfo,
        sbom,
        sbomfile,
        signing,
    )
    from .config import SIGNING_KEY_ENV
    from .contents import Injection, find_backends, triton_packages
    from .keyless import Keyless, keyless_files
    from .pluginanswer import reported_where
    from .plugininfo import Policy
    from .sbom import NATIVE_SUFFIXES, SBOM_DIR, SBOM_PATH, described_files, sbom_bytes
    from .sbomfile import regenerated_members, sbom_member
    from .signing import SigningKey, seal

__all__ = [
    "Injection",
    "Keyless",
    "NATIVE_SUFFIXES",
    "Policy",
    "SBOM_DIR",
    "SBOM_PATH",
    "SIGNING_KEY_ENV",
    "SigningKey",
    "backendcode",
    "config",
    "contents",
    "described_files",
    "find_backends",
    "keyless",
    "keyless_files",
    "pluginanswer",
    "plugincall",
    "plugincontract",
    "plugininfo",
    "regenerated_members",
    "reported_where",
    "sbom",
    "sbom_bytes",
    "sbom_member",
    "sbomfile",
    "seal",
    "signing",
    "triton_packages",
]

_WHERE = {
    "Injection": "contents",
    "Keyless": "keyless",
    "NATIVE_SUFFIXES": "sbom",
    "Policy": "plugininfo",
    "SBOM_DIR": "sbom",
    "SBOM_PATH": "sbom",
    "SIGNING_KEY_ENV": "config",
    "SigningKey": "signing",
    "described_files": "sbom",
    "find_backends": "contents",
    "keyless_files": "keyless",
    "regenerated_members": "sbomfile",
    "reported_where": "pluginanswer",
    "sbom_bytes": "sbom",
    "sbom_member": "sbomfile",
    "seal": "signing",
    "triton_packages": "contents",
}


def __getattr__(name: str) -> object:
    where = _WHERE.get(name)
    if where is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(__import__(f"{__name__}.{where}", fromlist=[name]), name)
    globals()[name] = value  # the next import of this name finds it without this call
    return value
