"""``backend-packager mirror``: a signed wheel mirror that pip installs from (PEP 503/691).

One run, under an exclusive ``flock`` on the output directory's own descriptor (no lock
file that a cleanup could delete):

1. find the input wheels: every ``*.whl`` of a directory, or every wheel a PEP 503 simple
   index on disk links to (hrefs resolved as URLs, confined to the source tree, a
   ``#sha256=`` checked). Each input is opened once, inside its source tree, not through a
   symlink, and checked by ``fstat`` to be a regular file; every read is of that
   descriptor. A symlink (``input.symlink``), a non-file, or a link that cannot be used
   (a NUL byte, bad percent-encoding, an overlong or escaping href) is that input's
   failure, never served, with ``pass_through`` too;
2. for each, decide from the state file (``OUTDIR/.mirror-state.json``) whether its last
   result still holds: same input (device, inode, size, mtime and ctime; else same sha256),
   same signing key for a migrated wheel, same packager version, and the output still the
   file written (device, inode, size, mtime and ctime: a wheel rewritten in place with its
   mtime set back is redone). Only the others are worked on: migrated by
   :func:`backend_packager.commands.migrate.migrate_wheel` into a staging directory; a wheel without
   a Triton backend or plugin is copied through byte for byte; a wheel that fails is left
   out of the index, or served unchanged with ``pass_through``;
3. serve the new index (:mod:`backend_packager.commands.mirrorindex`): a complete tree of pages and
   hard links of every wheel they name, swapped in by one rename; then rename the staged
   outputs into ``OUTDIR``, remove outputs whose inputs are gone, write the state last.

Killed at any point, ``OUTDIR/simple`` is the previous index or the new one, complete:
every file it names is there with the sha256 it gives. The next run redoes whatever the
state does not record. The state file is input like any other: read bounded, every field
checked, and a bad one ignored with a warning (everything is then redone).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
from pathlib import Path
from typing import TYPE_CHECKING

from ..base import atomic_write
from ..formats import simpleindex
from . import mirrorindex
from .confined import read_bounded
from .mirrorlock import locked
from .mirrorrecords import Entry, Hooks, MirrorError, Result, Run
from .mirrorsources import discover, unique
from .mirrorstate import MAX_STATE_BYTES, STATE_FILE, STATE_FORMAT, State, encode_state, load_state
from .mirrorwork import Context, output_stat, tool, work
from .upstream import UpstreamRoot, load_root, parse_upstream

if TYPE_CHECKING:
    from triton_backend_runtime.trust import Identity

    from ..manifest import Keyless, Policy, SigningKey

__all__ = [
    "MAX_STATE_BYTES",
    "STAGING_DIR",
    "STATE_FILE",
    "STATE_FORMAT",
    "Hooks",
    "MirrorError",
    "Result",
    "Run",
    "discover",
    "load_state",
    "locked",
    "load_root",
    "mirror",
    "parse_upstream",
]

STAGING_DIR = ".mirror-staging"


def mirror(
    roots: list[Path],
    outdir: Path,
    key: SigningKey | None,
    *,
    jobs: int = 1,
    pass_through: bool = False,
    wait: bool = True,
    hooks: Hooks | None = None,
    capture: Policy = "off",
    keyless: Keyless | None = None,
    upstream: tuple[Identity, ...] = (),
    upstream_root: UpstreamRoot | None = None,
    sigstore_bundles: Path | None = None,
) -> Run:
    """Bring ``outdir`` up to date with the wheels of ``roots``; see the module docstring.
    ``capture``: whether and where plugins' code runs (:data:`.plugininfo.Policy`); the
    state records it with the tool, so a change redoes every wheel. ``keyless``: each migrated
    wheel's statement signed by Sigstore too (recorded with the tool likewise). ``upstream``:
    the identities each wheel's PEP 740 provenance must be signed by (:mod:`.upstream`), checked
    before it is re-signed; recorded with the tool too, as is ``upstream_root``, the Sigstore
    trust root they are verified against (:func:`.upstream.load_root`; None: Sigstore's production root).
    ``sigstore_bundles``: a directory of ``<wheel>.sigstore.json`` bundles, each attached to
    that migrated wheel instead of signing it now (a byte-identical rebuild)."""
    hooks = hooks or Hooks()
    outdir.mkdir(parents=True, exist_ok=True)
    with locked(outdir, wait, hooks.waiting):
        sources, failures, warnings = discover(roots, outdir)
        previous, state_warnings = load_state(outdir)
        staging = _fresh_staging(outdir)
        try:
            mirrorindex.prune(outdir)  # what a killed run left
            ctx = Context(outdir, staging, key,
                          tool(capture, keyless is not None or sigstore_bundles is not None)
                          + _upstream_tag(upstream, upstream_root),
                          pass_through, hooks, previous, capture, keyless, upstream, upstream_root, sigstore_bundles)
            sources, duplicates = unique(sources)
            if hooks.start:
                hooks.start([s.path for s in sources])
            results = work(sources, ctx, jobs) + duplicates + failures
        except BaseException:  # Ctrl-C, or a failure: nothing is served from it yet
            shutil.rmtree(staging, ignore_errors=True)
            raise
        entries = {r.entry.filename: r.entry for r in results if r.entry is not None}
        _step(hooks, "worked")
        served = {name: (staging if name in ctx.staged else outdir) / name for name, e in entries.items() if e.served}
        mirrorindex.publish(outdir, _index_files(entries), served, lambda: _step(hooks, "generation"))
        _step(hooks, "swapped")
        for name in ctx.staged:
            os.replace(staging / name, outdir / name)
        _step(hooks, "placed")
        _remove_orphans(outdir, previous, entries)
        mirrorindex.prune(outdir)  # before the outputs' identities: unlinking a hard link sets its ctime
        _record_outputs(outdir, entries, previous, ctx.staged)
        state = State(ctx.tool, ctx.keyid, entries)
        _write_if_changed(outdir / STATE_FILE, encode_state(state))
        _step(hooks, "state")
        shutil.rmtree(staging, ignore_errors=True)
    results.sort(key=lambda r: (r.filename, r.source))
    return Run(outdir, ctx.keyid, results, state_warnings + warnings)


def _upstream_tag(upstream: tuple[Identity, ...], root: UpstreamRoot | None) -> str:
    """The listed upstream identities and the root they are checked against, for the state's
    tool: another list, or another root, redoes every wheel."""
    if not upstream:
        return ""
    listed = "\n".join(sorted(f"{i.issuer}={i.pattern}" for i in upstream))
    pinned = f"; upstream-root={root.sha256[:16]}" if root is not None else ""
    return f"; upstream={hashlib.sha256(listed.encode()).hexdigest()[:16]}{pinned}"


def _step(hooks: Hooks, name: str) -> None:
    if hooks.step:
        hooks.step(name)


def _fresh_staging(outdir: Path) -> Path:
    """An empty staging directory; what a killed run left there, or beside the outputs, goes."""
    staging = outdir / STAGING_DIR
    if staging.is_symlink() or staging.is_file():
        staging.unlink()
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir()
    for leftover in outdir.glob(".*.tmp"):
        with contextlib.suppress(OSError):
            leftover.unlink()
    return staging


# --- publishing ------------------------------------------------------------------------


def _index_files(entries: dict[str, Entry]) -> list[simpleindex.IndexFile]:
    return [simpleindex.IndexFile(e.project, e.filename, e.output_sha256 or "") for e in entries.values() if e.served]


def _record_outputs(outdir: Path, entries: dict[str, Entry], previous: State | None, staged: list[str]) -> None:
    """Each served output's identity, taken now that the index links it and the generations
    no longer served are gone (a link made or removed sets its ctime). An output reused from
    the last run keeps its place only when the file is still the one checked at the start
    (device, inode, size, mtime); else the next run redoes it."""
    fresh = set(staged)
    for name, entry in entries.items():
        if not entry.served:
            entry.output_stat = []
            continue
        now = output_stat(outdir / name)
        if name in fresh or (now and now[:4] == entry.output_stat[:4]):
            entry.output_stat = now
        else:
            entry.output_stat = [0, 0, 0, 0, 0]  # no file has inode 0: never reused


def _write_if_changed(path: Path, data: bytes) -> None:
    """Atomically, and only when the bytes differ: an unchanged mirror keeps its mtimes."""
    try:
        if read_bounded(path, len(data)) == data:
            return
    except MirrorError:
        pass
    atomic_write(path, data)


def _remove_orphans(outdir: Path, previous: State | None, entries: dict[str, Entry]) -> None:
    """Outputs the last run served and this one does not (their input is gone or failed)."""
    if previous is None:
        return
    for name, old in previous.entries.items():
        new = entries.get(name)
        if old.served and (new is None or not new.served):
            with contextlib.suppress(FileNotFoundError):
                (outdir / name).unlink()
