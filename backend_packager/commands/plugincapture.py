"""What an installed distribution's plugins say about themselves, captured in the sandbox from
the installed files in place, each held to the file as hashed (:class:`InstalledFiles`)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from triton_backend_runtime.base import VerifyError
from triton_backend_runtime.manifest import Artifact, Plugin
from triton_backend_runtime.site import Confinement, open_installed

from ..base import InstalledError
from ..manifest import plugininfo
from .installed import Installed
from .recordcheck import Checked, file_identity, open_recorded

__all__ = ["InstalledFiles", "capture_plugins"]


@dataclass
class InstalledFiles:
    """The checked files as :mod:`.plugininfo` hands them to the child, in place: a copy of
    ``libtriton.so`` (500 MB) would cost most of what checking the whole install costs. Each
    is opened again as it was checked (confined, regular, no final symlink) and must be the
    file as hashed (device, inode, size, mtime and ctime); an empty placeholder stands for it
    in the plugin's private directory, onto which the sandbox's own code bind-mounts the file
    read-only, refusing any other inode than the one held (the plugin gets no descriptor into
    the real tree). After the calls each must still be as hashed: a write in between sets its ctime,
    which no unprivileged process can set back."""

    installed: Installed
    checked: dict[str, Checked]
    placed: list[tuple[int, Checked, Path]] = field(default_factory=list)

    def place(self, artifact: Artifact, into: Path, name: str) -> Path:
        item = self.checked.get(artifact.path)
        if item is None:
            raise InstalledError("changed", self.installed.full(artifact.path), "not among the files checked")
        if not plugininfo.plain_name(name):
            raise InstalledError("changed", item.full, f"{name[:80]!r} is not a plain file name to place it under")
        fd, st = open_recorded(item.full, Confinement(self.installed.site))
        if file_identity(st) != item.identity:
            os.close(fd)
            raise InstalledError("changed", item.full, "changed since it was checked against RECORD; not calling it")
        into.mkdir(mode=0o700, exist_ok=True)
        placeholder = into / name
        placeholder.touch(mode=0o600, exist_ok=False)
        self.placed.append((fd, item, placeholder))
        return placeholder

    def held(self) -> tuple[tuple[int, Path, Path], ...]:
        return tuple((fd, placeholder, Path(item.full)) for fd, item, placeholder in self.placed)

    def confirm(self) -> None:
        for fd, item, _ in self.placed:
            if file_identity(os.fstat(fd)) != item.identity:
                raise InstalledError("changed", item.full, "changed while its plugin was being asked; not signing it")

    def close(self) -> None:
        for fd, _, _ in self.placed:
            os.close(fd)
        self.placed.clear()


def capture_plugins(installed: Installed, checked: list[Checked], artifacts: list[Artifact],
                    plugins: list[Plugin], policy: plugininfo.Policy = "off") -> list[Plugin]:
    """What each plugin says about itself (``tritonGetPluginInfo``), as ``migrate`` captures
    it from a wheel, in the same isolated child, from the installed files held to what was
    hashed (:class:`InstalledFiles`). A plugin that needs ``libtriton.so`` and ships none is
    called against the Triton installed beside it (the same site-packages), else the Triton
    importable here; it is ``captured: false``, with the reason, when it cannot be, and
    ``not-run`` unless ``policy`` asks for it."""
    if not plugins or policy == "off":
        return plugininfo.not_run(plugins)
    beside = _libtriton_beside(installed, [c.path for c in checked])
    files = InstalledFiles(installed, {c.path: c for c in checked})
    try:
        return plugininfo.capture_from(files, artifacts, plugins, libtriton=beside, policy=policy,
                                       label="installed beside it" if beside else plugininfo.BUILD_ENVIRONMENT)
    finally:
        files.close()


def _libtriton_beside(installed: Installed, paths: list[str]) -> Path | None:
    """The core's library in the same site-packages: the distribution's own (whatever the
    package is called), else ``triton``'s."""
    member = plugininfo.libtriton_member(paths) or plugininfo.LIBTRITON_MEMBER
    full = os.path.join(installed.site, *member.split("/"))
    try:
        Confinement(installed.site).check(full)
        fd, _ = open_installed(full)
    except VerifyError:
        return None
    os.close(fd)
    return Path(full)

