"""Layer 2: what a file is. ELF facts read within limits (``elf``, ``elftables``), a file's
hashes and facts in one pass (``artifacts``), and the sandbox that runs code the packager
must run but not trust (``sandbox``).
"""

# A name is imported from its module when first asked for (PEP 562): importing one module of
# this layer must not import the others, since ``import triton`` pays for every module loaded.
# Not typing.TYPE_CHECKING: importing typing costs milliseconds at start-up.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from . import artifacts, elf, elftables, sandbox
    from .artifacts import CHUNK, ArtifactSink, artifact_from_bytes, artifact_from_file, read_into
    from .elf import ELF_MAGIC, CaptureMiss, scan_elf
    from .sandbox import available

__all__ = [
    "ArtifactSink",
    "CHUNK",
    "CaptureMiss",
    "ELF_MAGIC",
    "artifact_from_bytes",
    "artifact_from_file",
    "artifacts",
    "available",
    "elf",
    "elftables",
    "read_into",
    "sandbox",
    "scan_elf",
]

_WHERE = {
    "ArtifactSink": "artifacts",
    "CHUNK": "artifacts",
    "CaptureMiss": "elf",
    "ELF_MAGIC": "elf",
    "artifact_from_bytes": "artifacts",
    "artifact_from_file": "artifacts",
    "available": "sandbox",
    "read_into": "artifacts",
    "scan_elf": "elf",
}


def __getattr__(name: str) -> object:
    where = _WHERE.get(name)
    if where is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(__import__(f"{__name__}.{where}", fromlist=[name]), name)
    globals()[name] = value  # the next import of this name finds it without this call
    return value
