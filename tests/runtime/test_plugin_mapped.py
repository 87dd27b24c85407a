"""A plugin is ``loaded`` only when its library is mapped into the process: checked in
``/proc/self/maps`` by the file's device and inode (``triton/mapped.py``), with real ELF
plugins compiled by gcc and loaded (or not) by fake ``libtriton`` modules."""

from __future__ import annotations

import ctypes
import itertools
import os
import sys
import types
from collections.abc import Callable
from pathlib import Path

import pytest
from helpers.csrc import CSRC, gcc
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from triton_backend_runtime.loading.registry import PluginEntry
from triton_backend_runtime.site import discovery
from triton_backend_runtime.triton import mapped, plugins
from triton_backend_runtime.verification.verdict import PluginClaim, Verdict

PROOF = "mapped (/proc/self/maps)"
_names = itertools.count()

pytestmark = pytest.mark.skipif(not os.path.exists("/proc/self/maps"), reason="Linux only: /proc/self/maps")


def fresh_plugin(tmp_path: Path) -> Path:
    """A plugin library of its own (never mapped before): one file per test."""
    return gcc(tmp_path / f"libmapped{next(_names)}.so", str(CSRC / "plugin_shared.c"))


def entry(file: Path) -> PluginEntry:
    dist = discovery.Distribution("demo-plugin", "1.0", "/site/demo_plugin-1.0.dist-info", "/site")
    return PluginEntry(dist, PluginClaim("pkg/lib.so", str(file), "v2", None), Verdict("verified"), "verified")


def fake_libtriton(extend: Callable[[str], object] | None) -> types.ModuleType:
    """A ``libtriton`` whose three ``extend_with`` functions call ``extend`` (None: none, as 3.8)."""
    module = types.ModuleType(plugins.LIBTRITON)
    module.passes = types.SimpleNamespace(plugin=types.SimpleNamespace())  # type: ignore[attr-defined]
    if extend is not None:
        module.passes.plugin.extend_with = extend  # type: ignore[attr-defined]
        module.ir = types.SimpleNamespace(  # type: ignore[attr-defined]
            extend_dialects_with=extend, builder=types.SimpleNamespace(extend_with=extend))
    return module


def test_a_library_dlopened_by_extend_with_is_loaded_with_the_proof(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    so = fresh_plugin(tmp_path)
    link = tmp_path / "link.so"
    link.symlink_to(so)
    assert mapped.is_mapped(str(so)) is False and mapped.is_mapped(str(link)) is False
    monkeypatch.setitem(sys.modules, plugins.LIBTRITON, fake_libtriton(ctypes.CDLL))
    plugin = entry(so)
    plugins.hand_over([plugin], "3.9.0")
    assert (plugin.state, plugin.handed_over, plugin.reason) == ("loaded", f"extend_with; {PROOF}", None)
    # the same file under another name: by device and inode, not by the path string
    assert mapped.is_mapped(str(link)) is True
    copy = tmp_path / "copy.so"
    copy.write_bytes(so.read_bytes())
    assert mapped.is_mapped(str(copy)) is False  # same bytes, another file: not what is mapped


def test_an_extend_with_that_loads_nothing_is_failed_with_the_reason(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    so = fresh_plugin(tmp_path)
    monkeypatch.setitem(sys.modules, plugins.LIBTRITON, fake_libtriton(lambda path: None))
    plugin = entry(so)
    plugins.hand_over([plugin], "3.9.0")
    assert (plugin.state, plugin.handed_over) == ("failed", "extend_with")
    assert plugin.reason is not None and plugin.reason.code == "load.plugin" and plugin.reason.path == str(so)
    assert "extend_with returned" in plugin.reason.message and "not mapped" in plugin.reason.message


def test_a_plugin_its_own_code_loaded_is_loaded_without_extend_with(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """Triton 3.8 (no extend_with), libtriton loaded before the registry ran: the plugin's package
    loaded the library itself (triton-utlx's .pth, read as libtriton loads)."""
    monkeypatch.setitem(sys.modules, plugins.LIBTRITON, fake_libtriton(None))
    mine, absent = fresh_plugin(tmp_path), fresh_plugin(tmp_path)
    ctypes.CDLL(str(mine))
    loaded, refused = entry(mine), entry(absent)
    plugins.hand_over([loaded, refused], "3.8.0")
    assert (loaded.state, loaded.handed_over, loaded.reason) == ("loaded", f"{plugins.OWN_CODE}; {PROOF}", None)
    assert refused.state == "failed" and refused.reason is not None and refused.reason.code == "load.plugin-api"


@pytest.mark.parametrize("reads_the_variable", [True, False], ids=["mapped", "not-mapped"])
def test_plugin_paths_are_pending_until_libtriton_is_imported(reads_the_variable: bool, tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """An older Triton not imported yet: TRITON_PLUGIN_PATHS, pending; once its libtriton is
    imported (here a module that loads the variable's libraries, as 3.8 does, or does not)."""
    so = fresh_plugin(tmp_path)
    package = f"fakeold{next(_names)}"
    (tmp_path / package / "_C").mkdir(parents=True)
    (tmp_path / package / "__init__.py").write_text("")
    (tmp_path / package / "_C" / "__init__.py").write_text("")
    body = "import ctypes, os\nfor p in os.environ['TRITON_PLUGIN_PATHS'].split(':'):\n    ctypes.CDLL(p)\n"
    (tmp_path / package / "_C" / "libtriton.py").write_text(body if reads_the_variable else "")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delenv(plugins.PLUGIN_PATHS_ENV, raising=False)
    for name in (package, f"{package}._C", f"{package}._C.libtriton"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    plugin = entry(so)
    plugins.hand_over([plugin], "3.8.0", package=package)
    assert (plugin.state, plugin.handed_over) == ("pending", plugins.PATHS_PENDING)
    assert os.environ[plugins.PLUGIN_PATHS_ENV] == str(so)
    __import__(f"{package}._C.libtriton")
    try:
        if reads_the_variable:
            assert (plugin.state, plugin.handed_over) == ("loaded", f"{plugins.PLUGIN_PATHS_ENV}; {PROOF}")
        else:
            assert (plugin.state, plugin.handed_over) == ("failed", plugins.PLUGIN_PATHS_ENV)
            assert plugin.reason is not None and plugin.reason.code == "load.plugin"
            assert "not mapped" in plugin.reason.message
    finally:
        for name in (package, f"{package}._C", f"{package}._C.libtriton"):
            sys.modules.pop(name, None)


def test_without_proc_today_s_states_said_not_checked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(mapped, "MAPS", str(tmp_path / "no-proc" / "maps"))
    so = fresh_plugin(tmp_path)
    assert mapped.is_mapped(str(so)) is None
    monkeypatch.setitem(sys.modules, plugins.LIBTRITON, fake_libtriton(lambda path: None))
    plugin = entry(so)
    plugins.hand_over([plugin], "3.9.0")
    assert (plugin.state, plugin.handed_over) == ("loaded", f"extend_with; {plugins.UNCHECKED}")
    monkeypatch.setitem(sys.modules, plugins.LIBTRITON, fake_libtriton(None))
    late = entry(so)
    plugins.hand_over([late], "3.8.0")
    assert (late.state, late.handed_over) == ("failed", plugins.UNCHECKED)
    assert late.reason is not None and late.reason.code == "load.plugin-api"


def _line(inode: int, path: str) -> bytes:
    return f"7f0000000000-7f0000001000 r-xp 00000000 fe:00 {inode}    {path}\n".encode()


def test_the_maps_reader_is_bounded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    table = tmp_path / "maps"
    wanted = lambda m: m.inode == 7  # noqa: E731
    table.write_bytes(_line(5, "/lib/a.so") + b"7f0-7f1 rw-p 00000000 00:00 0\n" + _line(7, "/lib/b c.so (deleted)"))
    found = mapped.lookup(wanted, str(table))
    assert found.complete and found.found == mapped.Mapping("7f0000000000-7f0000001000", os.makedev(0xfe, 0), 7,
                                                            b"/lib/b c.so (deleted)")
    assert mapped.lookup(lambda m: False, str(table)) == mapped.Lookup(None, True)
    # past the line bound, the byte bound, a line too long, a line not the kernel's: unknown
    monkeypatch.setattr(mapped, "MAX_LINES", 2)
    assert not mapped.lookup(wanted, str(table)).known
    monkeypatch.setattr(mapped, "MAX_LINES", 10)
    monkeypatch.setattr(mapped, "MAX_BYTES", 100)
    assert not mapped.lookup(wanted, str(table)).known
    monkeypatch.setattr(mapped, "MAX_BYTES", 1 << 20)
    table.write_bytes(_line(5, "/" + "x" * mapped.MAX_LINE) + _line(7, "/lib/b.so"))
    assert not mapped.lookup(wanted, str(table)).known
    table.write_bytes(b"garbage\n" + _line(7, "/lib/b.so"))
    assert not mapped.lookup(wanted, str(table)).known
    # an endless source with no line end is read no further than one line
    assert mapped.lookup(wanted, "/dev/zero") == mapped.Lookup(None, False)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.binary(max_size=4096))
def test_any_table_is_an_answer_never_an_exception(tmp_path: Path, data: bytes) -> None:
    table = tmp_path / "maps"
    table.write_bytes(data)
    found = mapped.lookup(lambda m: True, str(table))
    assert isinstance(found, mapped.Lookup)
    assert mapped.is_mapped(str(table), str(table)) in (True, False, None)
