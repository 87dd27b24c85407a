"""``adopt --wheel-out``: the checked files planned and sealed as ``migrate`` does, then
streamed once into the output wheel, each held to the file as it was checked."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from triton_backend_runtime.base import atomic_output
from triton_backend_runtime.manifest import is_installer_file
from triton_backend_runtime.site import Confinement

from ..base import InstalledError, WheelError, WheelProgress, source_date_epoch
from ..formats import Discrepancy
from ..manifest import Injection, Keyless, SigningKey, keyless_files, plugininfo, regenerated_members, seal
from ..rewrite import check_coverage, check_repairs
from ..wheel import (
    FileWheelWriter,
    SourceFile,
    WheelContents,
    WheelName,
    bundle_member,
    escape_name,
    manifest_member,
)
from .inplace import contents_of
from .installed import Adoption, Installed
from .migrate import add_sbom, plan_migration
from .plugincapture import capture_plugins
from .recordcheck import Checked, open_recorded

__all__ = ["adopt_into_wheel", "wheel_filename"]


def adopt_into_wheel(installed: Installed, checked: list[Checked], out_dir: Path, key: SigningKey | None, jobs: int,
                      outcome: Adoption, capture: plugininfo.Policy = "off",
                      progress: WheelProgress | None = None, keyless: Keyless | None = None) -> None:
    """``out_dir/<name>-<version>-<tags>.whl``: the wheel the distribution was installed from,
    less what the installer generated, signed. Planned and sealed from the checked files
    first, so that every refusal comes before any deflate work; then each file is streamed
    once into the wheel. Written unnamed (the one atomic writer) and named only when whole: a
    failed or killed run leaves no wheel."""
    name = wheel_filename(installed)
    found = _tag_discrepancies(installed, name)
    members = [c for c in checked if not is_installer_file(c.path) and c.path != f"{installed.dist_info}/RECORD"]
    _refuse_other_dist_info(installed, members)
    contents = dataclasses.replace(contents_of(installed, checked), discrepancies=found,
                                   names=[*(c.path for c in members), f"{installed.dist_info}/RECORD"])
    injection = _plan(installed, checked, contents, outcome, capture)
    bundle = bundle_member(installed.dist_info)
    added = {**injection.files, manifest_member(installed.dist_info): seal(injection.manifest, key),
             **keyless_files(injection.manifest, keyless, bundle, installed.full(bundle))}
    confine = Confinement(installed.site)
    replaced = regenerated_members(installed.dist_info)  # planned anew, regenerated or dropped
    files = [_source(c, confine) for c in members if c.path not in replaced]
    source = outcome.source

    def on_bytes(member: str, nbytes: int) -> None:
        if progress is not None:
            progress.on_bytes(source, member, nbytes)

    writer = FileWheelWriter(installed.dist_info, files, added, jobs=jobs, epoch=source_date_epoch(),
                             progress=on_bytes)
    out_dir.mkdir(parents=True, exist_ok=True)
    dst = out_dir / name
    if progress is not None:
        progress.expect(source, writer.total_bytes)
    try:
        with atomic_output(str(dst)) as out:
            writer.write(out.fileno())
    finally:
        if progress is not None:
            progress.on_wheel(source)
    outcome.output, outcome.signed_by, outcome.sigstore = dst, key.public.keyid if key else None, keyless is not None
    outcome.deflate = writer.engine.name


def _plan(installed: Installed, checked: list[Checked], contents: WheelContents, outcome: Adoption,
          capture: plugininfo.Policy) -> Injection:
    """``migrate``'s plan and checks; the plugins asked (if at all) from the installed files in place;
    the SBOM of the complete plan."""
    injection = plan_migration(contents, None, source_date_epoch(), outcome)
    injection.manifest.plugins = capture_plugins(installed, checked, contents.artifacts, injection.manifest.plugins,
                                                 capture)
    outcome.warnings.extend(plugininfo.warnings(injection.manifest.plugins, str(outcome.source)))
    injection = add_sbom(injection, installed.dist_info, outcome)
    check_repairs(contents, injection, installed.full)
    check_coverage(contents, injection, installed.full)
    return injection


def _source(item: Checked, confine: Confinement) -> SourceFile:
    def opener() -> int:
        return open_recorded(item.full, confine)[0]  # confined, regular, no final symlink, as when checked

    return SourceFile(item.path, item.artifact.sha256, item.artifact.size, item.mode, item.mtime, item.full, opener,
                      item.identity)


def wheel_filename(installed: Installed) -> str:
    """``name-version[-build]-py-abi-plat.whl`` (the binary distribution format), the tags of
    WHEEL compressed into one set; refused when they are not one."""
    tags = sorted(set(installed.wheel.get_all("Tag") or []))
    where = installed.full(f"{installed.dist_info}/WHEEL")
    triples = [t.split("-") for t in tags]
    if any(len(t) != 3 or not all(t) for t in triples):
        raise InstalledError("tags", where, f"malformed Tag in {tags}")
    parts = [sorted({t[i] for t in triples}) for i in range(3)]
    if len(parts[0]) * len(parts[1]) * len(parts[2]) != len(tags):
        raise InstalledError("tags", where, f"the tags {tags} are not one compressed tag set; cannot name a wheel")
    build = installed.wheel.get("Build")
    name = escape_name(installed.metadata["Name"])
    fields = [name, installed.metadata["Version"], *([build] if build else []), *(".".join(p) for p in parts)]
    filename = "-".join(fields) + ".whl"
    _check_names(installed, filename)
    return filename


def _check_names(installed: Installed, filename: str) -> None:
    """What reading the wheel back would refuse: a file name that is not a wheel's, a
    ``.dist-info`` named for another name or version."""
    WheelName.parse(filename)
    name, version = installed.metadata["Name"], installed.metadata["Version"]
    if escape_name(installed.dist_info) != escape_name(f"{escape_name(name)}-{version}.dist-info"):
        raise WheelError("name-mismatch", installed.full(installed.dist_info),
                         f"dist-info directory {installed.dist_info!r} does not match {name} {version}")


def _tag_discrepancies(installed: Installed, filename: str) -> list[Discrepancy]:
    """WHEEL's tags against the file name's (repeated or unnormalised tags differ): for the
    plan, which refuses them as ``migrate`` does."""
    tags = sorted(installed.wheel.get_all("Tag") or [])
    named = sorted(WheelName.parse(filename).tags)
    if named == tags:
        return []
    return [Discrepancy("wheel.tags", filename, f"file name tags {named} differ from WHEEL tags {tags}")]


def _refuse_other_dist_info(installed: Installed, members: list[Checked]) -> None:
    """A wheel holds one ``.dist-info``: a RECORD that lists files of another is not one wheel's."""
    for item in members:
        top = item.path.split("/")[0]
        if top.endswith(".dist-info") and top != installed.dist_info:
            raise WheelError("dist-info", item.full, f"RECORD lists a file of another .dist-info than "
                             f"{installed.dist_info}: not one wheel")
