"""Capturing triton 3.9.0's bundled plugins in the sandbox, against the unsandboxed child.

What is timed: :func:`backend_packager.manifest.plugininfo.capture_all` over the triton 3.9.0 wheel's
plugin libraries (``triton/plugins/*.so``, which need the wheel's own ``libtriton.so``):
each library, and ``libtriton.so`` (~500 MB) once, extracted from the wheel and checked
against its sha256, then one child per plugin that ``dlopen``\\ s it and calls
``tritonGetPluginInfo``.

The reference, measured in the same run: the same capture with the ``unsafe`` policy, the
child a plain ``python -I -S`` of the same user (what every capture was before the sandbox,
and what ``--capture-plugins-unsafe-no-sandbox`` still does where no sandbox can be made).
The sandboxed run adds, per plugin, the namespaces, the tmpfs root and its read-only bind
mounts, and a fork for init and one for the worker. The sandbox probe (once per process)
is timed apart, and so is the call alone (the libraries extracted once, then one child per
call, sandboxed or not), which is what the sandbox changes. Best of three runs each (the
call alone: of ten), the page cache warm. Run:
``python bench/bench_capture.py``.
"""

from __future__ import annotations

import sys
import tempfile
import time
import zipfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _wheels import best, fetch_wheel  # noqa: E402
from triton_backend_runtime.manifest import model as m  # noqa: E402

from backend_packager.manifest import contents as assemble
from backend_packager.manifest import pluginanswer, plugincall, plugininfo
from backend_packager.scanning import sandbox  # noqa: E402
from backend_packager.scanning.artifacts import artifact_from_file  # noqa: E402

RUNS = 3
LIBTRITON = "triton/_C/libtriton.so"


def artifacts_of(wheel: Path, out: Path) -> list[m.Artifact]:
    """``libtriton.so`` and the plugin libraries, scanned as the wheel's pass scans them."""
    with zipfile.ZipFile(wheel) as archive:
        names = [LIBTRITON, *(n for n in archive.namelist() if n.startswith("triton/plugins/") and n.endswith(".so"))]
        for name in names:
            archive.extract(name, out)
    return [artifact_from_file(out / n, n) for n in names]


def capture(wheel: Path, artifacts: list[m.Artifact], policy: plugininfo.Policy) -> list[m.Plugin]:
    plugins = plugininfo.capture_all(wheel, artifacts, assemble.find_plugins(artifacts), policy=policy)
    for plugin in plugins:
        if plugin.info is None or not plugin.info.captured:
            raise SystemExit(f"{plugin.path}: not captured ({policy}): {plugin.info}")
    return plugins


def call_alone(wheel: Path, artifacts: list[m.Artifact], root: Path) -> tuple[float, float]:
    """Seconds of one call of the first plugin (libtriton.so already extracted beside it):
    unsandboxed, sandboxed."""
    members = {a.path: a for a in artifacts}
    lib = root / "lib"
    plugin = next(a for a in artifacts if a.elf is not None and a.elf.plugin is not None)
    plugininfo.WheelMembers(wheel).place(members[LIBTRITON], lib, "libtriton.so")
    source = plugininfo.WheelMembers(wheel).place(plugin, root / "source", Path(plugin.path).name)
    limits = pluginanswer.Limits()
    runs = iter(range(1 << 30))

    def fresh() -> Path:
        here = root / f"call-{next(runs)}"
        here.mkdir()
        (here / source.name).hardlink_to(source)
        return here / source.name

    def plain() -> None:
        target = fresh()
        assert plugincall.call_unsandboxed(target, [lib], target.parent, limits).captured

    def boxed() -> None:
        target = fresh()
        assert plugincall.call_sandboxed(target, [lib], target.parent, limits, ()).captured

    return min(best(plain, RUNS) for _ in range(3)), min(best(boxed, RUNS) for _ in range(3))


def main() -> None:
    wheel = fetch_wheel("triton==3.9.0")
    start = time.perf_counter()
    why = sandbox.available()
    t_probe = time.perf_counter() - start
    if why is not None:
        raise SystemExit(f"no sandbox can be made here: {why}")
    with tempfile.TemporaryDirectory() as tmp:
        artifacts = artifacts_of(wheel, Path(tmp))
    with tempfile.TemporaryDirectory() as tmp:
        c_ref, c_box = call_alone(wheel, artifacts, Path(tmp))
    plugins = [p.path for p in assemble.find_plugins(artifacts)]
    capture(wheel, artifacts, "unsafe")  # warms the page cache for both
    t_ref = best(lambda: capture(wheel, artifacts, "unsafe"), RUNS)
    t_box = best(lambda: capture(wheel, artifacts, "sandbox"), RUNS)
    print(f"wheel: {wheel.name}; plugins: {', '.join(plugins)}")
    print(f"sandbox probe (once per process)          {t_probe * 1e3:7.1f} ms")
    print(f"unsandboxed child (reference)             {t_ref:7.3f} s")
    print(f"sandboxed (namespaces, tmpfs root)        {t_box:7.3f} s   ratio {t_box / t_ref:.2f}")
    print(f"per plugin: {t_ref / len(plugins) * 1e3:.0f} ms unsandboxed, {t_box / len(plugins) * 1e3:.0f} ms "
          "sandboxed (extracting and hashing libtriton.so included)")
    print(f"one call alone, unsandboxed (reference)   {c_ref * 1e3:7.1f} ms")
    print(f"one call alone, sandboxed                 {c_box * 1e3:7.1f} ms   ratio {c_box / c_ref:.2f}")


if __name__ == "__main__":
    main()
