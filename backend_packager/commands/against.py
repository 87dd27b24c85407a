"""``adopt --against``: the checked files compared with the published wheel's members
(:mod:`.published`), not only with RECORD on disk."""

from __future__ import annotations

import tempfile
from pathlib import Path

from triton_backend_runtime.manifest import is_installer_file

from ..manifest import SigningKey, sbom_member
from . import published
from .installed import Adoption, Installed
from .recordcheck import Checked, own_manifest

__all__ = ["check_against"]


def check_against(installed: Installed, checked: list[Checked], key: SigningKey | None, against: str,
                  outcome: Adoption) -> None:
    """The checked files must be those of the published release ``against`` names (a wheel,
    or the same wheel in a simple index: :mod:`.published`), not only RECORD's: every
    difference is listed in ``outcome`` and the adoption refused (``installed.differs``).
    Not compared: RECORD, the files installers write, the manifest (this adoption replaces
    it), and an ``entry_points.txt`` or SBOM an adopt with this key wrote (its manifest vouches
    for them)."""
    wanted = published.Wanted(installed.metadata["Name"], installed.metadata["Version"],
                              installed.wheel.get("Build"), frozenset(installed.wheel.get_all("Tag") or []))
    with tempfile.TemporaryDirectory(prefix="backend-packager-against.") as work:
        release = published.load(against, wanted, Path(work))
    files = {c.path: (c.artifact.sha256, c.artifact.size) for c in checked if not is_installer_file(c.path)}
    skip = {f"{installed.dist_info}/RECORD", installed.manifest_path}
    for written in (f"{installed.dist_info}/entry_points.txt", sbom_member(installed.dist_info)):
        mine = files.get(written)
        if mine is not None and release.files.get(written) != mine:
            vouched = own_manifest(installed, key) or {}
            if vouched.get(written) == mine:  # written by an adopt with this key
                skip.add(written)
    found = published.compare(release, files, {c.path: c.full for c in checked}, skip)
    if found:
        outcome.mismatches = found
        raise published.summary(found, release.source)

