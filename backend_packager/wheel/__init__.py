"""Layer 3: wheels. ``reader`` is the one wheel reader (what a pass over a wheel found);
``writer`` writes one from raw copies and finished bytes.
"""

# A name is imported from its module when first asked for (PEP 562): importing one module of
# this layer must not import the others, since ``import triton`` pays for every module loaded.
# Not typing.TYPE_CHECKING: importing typing costs milliseconds at start-up.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from . import deflate, filewriter, reader, writer
    from .filewriter import FileWheelWriter, SourceFile
    from .reader import (
        MAX_MEMBER_SIZE,
        ZIP_ERRORS,
        Member,
        WheelArchive,
        WheelContents,
        WheelName,
        bundle_member,
        escape_name,
        manifest_member,
        open_wheel,
        open_zip,
    )
    from .writer import FOREIGN_BINARY, Progress, WheelWriter, replaced_members

__all__ = [
    "FOREIGN_BINARY",
    "FileWheelWriter",
    "MAX_MEMBER_SIZE",
    "Member",
    "Progress",
    "SourceFile",
    "WheelArchive",
    "WheelContents",
    "WheelName",
    "WheelWriter",
    "ZIP_ERRORS",
    "bundle_member",
    "deflate",
    "escape_name",
    "filewriter",
    "manifest_member",
    "open_wheel",
    "open_zip",
    "reader",
    "replaced_members",
    "writer",
]

_WHERE = {
    "FOREIGN_BINARY": "writer",
    "FileWheelWriter": "filewriter",
    "MAX_MEMBER_SIZE": "reader",
    "Member": "reader",
    "Progress": "writer",
    "SourceFile": "filewriter",
    "WheelArchive": "reader",
    "WheelContents": "reader",
    "WheelName": "reader",
    "WheelWriter": "writer",
    "ZIP_ERRORS": "reader",
    "bundle_member": "reader",
    "escape_name": "reader",
    "manifest_member": "reader",
    "open_wheel": "reader",
    "open_zip": "reader",
    "replaced_members": "writer",
}


def __getattr__(name: str) -> object:
    where = _WHERE.get(name)
    if where is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(__import__(f"{__name__}.{where}", fromlist=[name]), name)
    globals()[name] = value  # the next import of this name finds it without this call
    return value
