"""The state file of a mirror (``OUTDIR/.mirror-state.json``): one entry per input wheel, read
back as untrusted input (bounded, every field checked) and written as stable JSON."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from .confined import read_bounded
from .mirrorrecords import COPIED, FAILED, MIGRATED, Entry, MirrorError

__all__ = ["MAX_STATE_BYTES", "STATE_FILE", "STATE_FORMAT", "State", "encode_state", "load_state", "plain_wheel_name"]

STATE_FILE = ".mirror-state.json"
#: 2: ``output_stat`` is the served file's identity (device, inode, size, mtime, ctime).
#: 3: each entry records the Triton core the wheel carries (``core``).
#: 4: each entry records the upstream identities checked and its provenance's sha256.
#: 5: each entry records the sha256 of the ``--sigstore-bundle`` bundle it was signed with.
STATE_FORMAT = 5
#: Bounds on what is read back: the state (~1 kB a wheel).
MAX_STATE_BYTES = 64 << 20


@dataclass
class State:
    tool: str
    keyid: str | None
    entries: dict[str, Entry]


def load_state(outdir: Path) -> tuple[State | None, list[str]]:
    """The state of the last run, or None with a warning when it is missing or unusable."""
    path = outdir / STATE_FILE
    if not path.exists() and not path.is_symlink():
        return None, []
    try:
        doc = json.loads(read_bounded(path, MAX_STATE_BYTES))
        return _decode_state(doc, str(path)), []
    except (MirrorError, ValueError, RecursionError, UnicodeDecodeError) as exc:
        return None, [f"{path}: state ignored and rebuilt ({exc}) (mirror.state)"]


def _decode_state(doc: Any, where: str) -> State:
    if not isinstance(doc, dict) or doc.get("format") != STATE_FORMAT:
        raise MirrorError("state", where, f"not a format {STATE_FORMAT} mirror state")
    tool, keyid, entries = doc.get("tool"), doc.get("keyid"), doc.get("entries")
    if not isinstance(tool, str) or not _opt_str(keyid) or not isinstance(entries, dict):
        raise MirrorError("state", where, "tool, keyid or entries of the wrong type")
    decoded = {name: _decode_entry(name, value, where) for name, value in entries.items()}
    return State(tool, keyid, decoded)


_ENTRY_TYPES: dict[str, Callable[[Any], bool]] = {
    "filename": lambda v: isinstance(v, str),
    "source": lambda v: isinstance(v, str),
    "project": lambda v: isinstance(v, str),
    "stat": lambda v: _ints(v, 5),
    "sha256": lambda v: isinstance(v, str) and len(v) == 64,
    "kind": lambda v: v in (MIGRATED, COPIED, FAILED),
    "served": lambda v: isinstance(v, bool),
    "output_sha256": lambda v: v is None or (isinstance(v, str) and len(v) == 64),
    "output_stat": lambda v: v == [] or _ints(v, 5),
    "keyid": lambda v: _opt_str(v),
    "backends": lambda v: _strs(v),
    "plugins": lambda v: _strs(v),
    "core": lambda v: v is None or (isinstance(v, str) and v.isidentifier()),
    "error": lambda v: v is None or (isinstance(v, dict) and all(isinstance(x, str) for x in v.values())
                                     and set(v) == {"code", "path", "message"}),
    "upstream": lambda v: isinstance(v, list) and all(
        isinstance(x, dict) and set(x) == {"issuer", "identity", "kind"} and all(isinstance(y, str) for y in x.values())
        for x in v),
    "provenance_sha256": lambda v: v is None or (isinstance(v, str) and len(v) == 64),
    "bundle_sha256": lambda v: v is None or (isinstance(v, str) and len(v) == 64),
}


def _decode_entry(name: str, value: Any, where: str) -> Entry:
    if not isinstance(value, dict) or set(value) != set(_ENTRY_TYPES):
        raise MirrorError("state", f"{where}: {name[:100]}", "an entry with missing or unknown fields")
    for key, check in _ENTRY_TYPES.items():
        if not check(value[key]):
            raise MirrorError("state", f"{where}: {name[:100]}", f"field {key!r} of the wrong type or form")
    entry = Entry(**value)
    if entry.filename != name or not plain_wheel_name(name) or (entry.served and not entry.output_stat):
        raise MirrorError("state", f"{where}: {name[:100]}", "not a plain wheel file name, or inconsistent")
    return entry


def plain_wheel_name(name: str) -> bool:
    """A name that can only mean a file directly in OUTDIR (the state names files to delete)."""
    return (0 < len(name) <= 255 and name.endswith(".whl") and not name.startswith(".")
            and not any(c in name for c in "/\\\0"))


def _ints(value: Any, n: int) -> bool:
    return isinstance(value, list) and len(value) == n and all(type(x) is int and x >= 0 for x in value)


def _strs(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(x, str) for x in value)


def _opt_str(value: Any) -> bool:
    return value is None or isinstance(value, str)


def encode_state(state: State) -> bytes:
    doc = {"format": STATE_FORMAT, "tool": state.tool, "keyid": state.keyid,
           "entries": {name: asdict(e) for name, e in sorted(state.entries.items())}}
    return (json.dumps(doc, indent=1, sort_keys=True) + "\n").encode()
