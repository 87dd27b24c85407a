"""Layer 3: the installed site as hostile input. What Triton would discover (``discovery``),
installed files read within bounds and confined paths (``installed``), a file's identity
(``identity``) and files two RECORDs both claim (``ownership``).
"""

# A name is imported from its module when first asked for (PEP 562): importing one module of
# this layer must not import the others, since ``import triton`` pays for every module loaded.
# Not typing.TYPE_CHECKING: importing typing costs milliseconds at start-up.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from . import directurl, discovery, fileidentity, installed, locate, ownership, recordclaims
    from .discovery import (
        DEFAULT_PACKAGE,
        Candidate,
        Discovery,
        Distribution,
        RecordSyntaxError,
        backends_group,
        core_init,
        core_version,
        discover,
        parse_entry_points,
        read_small_bytes,
        read_small_text,
        record_lines,
        record_row,
        renamed_cores,
    )
    from .fileidentity import identity, identity_text, same_file, stat_identity
    from .installed import (
        MAX_WALK_ENTRIES,
        Confinement,
        HashCache,
        check_package_name,
        hash_workers,
        installed_path,
        open_installed,
        read_bounded,
        regular_stat,
        walk_files,
        wheel_path_parts,
    )
    from .locate import locate_package
    from .ownership import Overlap, core_overlap, overlaps_of
    from .recordclaims import RecordClaims

__all__ = [
    "Candidate",
    "Confinement",
    "DEFAULT_PACKAGE",
    "Discovery",
    "Distribution",
    "HashCache",
    "MAX_WALK_ENTRIES",
    "Overlap",
    "RecordClaims",
    "RecordSyntaxError",
    "backends_group",
    "check_package_name",
    "core_init",
    "core_overlap",
    "core_version",
    "directurl",
    "discover",
    "discovery",
    "fileidentity",
    "hash_workers",
    "identity",
    "identity_text",
    "installed",
    "installed_path",
    "locate",
    "locate_package",
    "open_installed",
    "overlaps_of",
    "ownership",
    "parse_entry_points",
    "read_bounded",
    "read_small_bytes",
    "read_small_text",
    "record_lines",
    "record_row",
    "recordclaims",
    "regular_stat",
    "renamed_cores",
    "same_file",
    "stat_identity",
    "walk_files",
    "wheel_path_parts",
]

_WHERE = {
    "Candidate": "discovery",
    "Confinement": "installed",
    "DEFAULT_PACKAGE": "discovery",
    "Discovery": "discovery",
    "Distribution": "discovery",
    "HashCache": "installed",
    "MAX_WALK_ENTRIES": "installed",
    "Overlap": "ownership",
    "RecordClaims": "recordclaims",
    "RecordSyntaxError": "discovery",
    "backends_group": "discovery",
    "check_package_name": "installed",
    "core_init": "discovery",
    "core_overlap": "ownership",
    "core_version": "discovery",
    "discover": "discovery",
    "hash_workers": "installed",
    "identity": "fileidentity",
    "identity_text": "fileidentity",
    "installed_path": "installed",
    "locate_package": "locate",
    "open_installed": "installed",
    "overlaps_of": "ownership",
    "parse_entry_points": "discovery",
    "read_bounded": "installed",
    "read_small_bytes": "discovery",
    "read_small_text": "discovery",
    "record_lines": "discovery",
    "record_row": "discovery",
    "regular_stat": "installed",
    "renamed_cores": "discovery",
    "same_file": "fileidentity",
    "stat_identity": "fileidentity",
    "walk_files": "installed",
    "wheel_path_parts": "installed",
}


def __getattr__(name: str) -> object:
    where = _WHERE.get(name)
    if where is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(__import__(f"{__name__}.{where}", fromlist=[name]), name)
    globals()[name] = value  # the next import of this name finds it without this call
    return value
