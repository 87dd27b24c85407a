"""``backend-packager adopt``: sign an installed distribution in place, or write its wheel.

A platform team whose Triton came preinstalled (a container image, a GPU machine) has no
wheel to migrate. ``adopt`` takes the distribution as it is installed, in three steps:

1. **Check** (:mod:`.recordcheck`) every row of its RECORD (PEP 376, and the "Recording installed projects"
   specification) against the file on disk, reading the installed tree as hostile input
   with the runtime's own rules (:mod:`triton_backend_runtime.site.installed`): a plain relative
   path inside the site-packages directory, whose directory does not resolve outside it
   through a symlink; a regular file, opened without following a final symlink and without
   blocking; its size compared with RECORD's before any read, and no more read than that.
   Code in the distribution's packages that RECORD does not list is refused too (the
   runtime would refuse it as ``verify.unlisted``). Any difference refuses the adoption,
   listing every file. What the installer generated is not part of the wheel and is left
   out unread: the bytecode it compiled (``__pycache__/*.pyc``, recorded without a hash) and
   the wrappers of the distribution's console and GUI scripts (``bin/NAME`` outside
   site-packages, where the entry points say).
2. **Plan and seal** (:mod:`.inplace`) exactly as ``migrate`` does: the checked files become a
   :class:`~backend_packager.wheel.reader.WheelContents`, planned by
   :func:`~backend_packager.commands.migrate.plan_migration` (backends from the ``triton.backends``
   entry points, else the ``triton/backends/<name>/`` directories, then declared as entry
   points), checked by :func:`~backend_packager.rewrite.check_coverage` and signed by
   :func:`~backend_packager.manifest.signing.seal`. ``entry_points.txt`` is rewritten only when its
   meaning changes.
3. **Write in place**, each file whole or not at all (the one atomic writer): the manifest
   first, then ``entry_points.txt``, RECORD last. An interrupted run is finished by running
   ``adopt`` again with the same key: a file adopt writes (the manifest, ``entry_points.txt``)
   that differs from RECORD is accepted when the manifest on disk is signed by that key and
   vouches for it as it is.

Plugins (:mod:`.plugininfo`): as with ``migrate``, no plugin code runs unless asked
(``--capture-plugins``); then what each says about itself is captured in the same sandbox,
from the installed files in place, each held to the file as hashed (:class:`.plugincapture.InstalledFiles`);
a plugin that ships no ``libtriton.so`` is called against the one installed beside it.

``--wheel-out DIR`` (:mod:`.wheelout`) leaves the installed files alone and writes a wheel instead:
planned and sealed as ``migrate`` does, so that every refusal comes before any deflate work,
then the checked files streamed once into it (:mod:`~backend_packager.wheel.filewriter`: each
read once, held to the file as checked by its identity, deflated in chunks on ``jobs``
threads), with a progress bar on a terminal. The wheel is written unnamed and named only when
whole: a failed or killed run leaves none.

``--against WHEEL|INDEX``: RECORD on disk is what the installer wrote, and whoever changed
an installed file could rewrite it to match; :func:`.against.check_against` also requires every
checked file to be the published wheel's member, byte for byte (:mod:`.published`).

Where to look (:mod:`.installed`): the site-packages directory given, else the interpreter's purelib and
platlib (sysconfig), searched in that order; a distribution found in both is refused.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path

from triton_backend_runtime.base import TrustError

from ..base import InstalledError, WheelProgress
from ..manifest import Keyless, SigningKey, plugininfo
from .against import check_against
from .inplace import adopt_in_place
from .installed import Adoption, find_site, read_installed
from .recordcheck import check_installed
from .wheelout import adopt_into_wheel

__all__ = ["adopt"]


def adopt(sites: Path | Sequence[Path], name: str, key: SigningKey | None, *, wheel_out: Path | None = None,
          against: str | None = None, jobs: int = 1, capture: plugininfo.Policy = "off",
          progress: WheelProgress | None = None, keyless: Keyless | None = None) -> Adoption:
    """Adopt the distribution ``name`` installed in ``sites`` (one site-packages directory, or
    several to search: :func:`find_site`); errors land in the outcome. ``capture``: whether
    and where its plugins' code runs to ask them (:data:`.plugininfo.Policy`; not by default).
    ``progress``: the bytes of the wheel ``wheel_out`` gets, as they are written. ``keyless``:
    a Sigstore bundle signs the manifest's statement too (or alone: ``key`` None)."""
    searched = [sites] if isinstance(sites, Path) else list(sites)
    outcome = Adoption(searched[0] / name)
    started = time.perf_counter()
    try:
        site = find_site(searched, name)
        outcome.source = site / name
        installed = read_installed(site, name)
        outcome.source = Path(installed.full(installed.dist_info))
        checked = check_installed(installed, key, jobs, outcome)
        if against is not None:
            check_against(installed, checked, key, against, outcome)
        if wheel_out is not None:
            adopt_into_wheel(installed, checked, wheel_out, key, jobs, outcome, capture, progress, keyless)
        else:
            adopt_in_place(installed, checked, key, outcome, capture, keyless)
    except TrustError as exc:
        outcome.error, outcome.status = exc, "failed"
    except OSError as exc:  # no space left, a read-only .dist-info: this distribution's failure
        where = exc.filename or str(outcome.source)
        outcome.error, outcome.status = InstalledError("os", str(where), exc.strerror or str(exc)), "failed"
    outcome.seconds = time.perf_counter() - started
    return outcome
