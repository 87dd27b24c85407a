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
        signing,
    )
    from .config import SIGNING_KEY_ENV
    from .contents import Injection
    from .keyless import Keyless, keyless_files
    from .pluginanswer import reported_where
    from .plugininfo import Policy
    from .signing import SigningKey, seal

__all__ = [
    "Injection",
    "Keyless",
    "Policy",
    "SIGNING_KEY_ENV",
    "SigningKey",
    "backendcode",
    "config",
    "contents",
    "keyless",
    "keyless_files",
    "pluginanswer",
    "plugincall",
    "plugincontract",
    "plugininfo",
    "reported_where",
    "sbom",
    "seal",
    "signing",
]

_WHERE = {
    "Injection": "contents",
    "Keyless": "keyless",
    "Policy": "plugininfo",
    "SIGNING_KEY_ENV": "config",
    "SigningKey": "signing",
    "keyless_files": "keyless",
    "reported_where": "pluginanswer",
    "seal": "signing",
}


def __getattr__(name: str) -> object:
    where = _WHERE.get(name)
    if where is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(__import__(f"{__name__}.{where}", fromlist=[name]), name)
