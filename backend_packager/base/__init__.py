"""Layer 0: the packager's errors, ``SOURCE_DATE_EPOCH``, input files opened without
blocking, and progress on long work.
"""

# A name is imported from its module when first asked for (PEP 562): importing one module of
# this layer must not import the others, since ``import triton`` pays for every module loaded.
# Not typing.TYPE_CHECKING: importing typing costs milliseconds at start-up.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from . import epoch, errors, fsutil, interrupt, progress
    from .epoch import source_date_epoch
    from .errors import (
        ConfigError,
        ElfError,
        InputError,
        InstalledError,
        KeylessError,
        ManifestError,
        TrustError,
        WheelError,
        from_os_error,
    )
    from .fsutil import atomic_output, atomic_write, read_input, remove_orphan_dirs, sha256_pread
    from .interrupt import checkpoint, worker_pool
    from .progress import WheelProgress

__all__ = [
    "ConfigError",
    "ElfError",
    "InputError",
    "InstalledError",
    "KeylessError",
    "ManifestError",
    "TrustError",
    "WheelError",
    "WheelProgress",
    "atomic_output",
    "atomic_write",
    "checkpoint",
    "epoch",
    "errors",
    "from_os_error",
    "fsutil",
    "interrupt",
    "progress",
    "read_input",
    "remove_orphan_dirs",
    "sha256_pread",
    "source_date_epoch",
    "worker_pool",
]

_WHERE = {
    "ConfigError": "errors",
    "ElfError": "errors",
    "InputError": "errors",
    "InstalledError": "errors",
    "KeylessError": "errors",
    "ManifestError": "errors",
    "TrustError": "errors",
    "WheelError": "errors",
    "WheelProgress": "progress",
    "atomic_output": "fsutil",
    "atomic_write": "fsutil",
    "checkpoint": "interrupt",
    "from_os_error": "errors",
    "read_input": "fsutil",
    "remove_orphan_dirs": "fsutil",
    "sha256_pread": "fsutil",
    "source_date_epoch": "epoch",
    "worker_pool": "interrupt",
}


def __getattr__(name: str) -> object:
    where = _WHERE.get(name)
    if where is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(__import__(f"{__name__}.{where}", fromlist=[name]), name)
    globals()[name] = value  # the next import of this name finds it without this call
    return value
