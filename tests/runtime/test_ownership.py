"""Who owns Triton's files, without the Triton wheel: the core found by the RECORD that lists
the imported ``triton/__init__.py`` (whatever the distribution's name), and files claimed by
two RECORDs (``conflict.files``). Installed trees are written as pip leaves them, with real
RECORD rows (PEP 376: ``path,sha256=<urlsafe b64, no padding>,size``)."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import shlex
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from helpers.cli import run_cli
from helpers.disttree import TrustEnv, code_of, codes, entry
from helpers.wheels import backend_files, write_wheel
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from triton_backend_runtime.site import directurl, discovery, ownership
from triton_backend_runtime.site.discovery import core_version, discover, record_row, record_row_matches


def row(path: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{path},sha256={digest},{len(data)}"


def install(site: Path, name: str, version: str, files: dict[str, bytes], *, write: bool = True) -> Path:
    """``name``'s dist-info with a RECORD of ``files``; the files written only when ``write``
    (a distribution installed earlier, whose files were since overwritten, keeps its RECORD)."""
    info = site / f"{name.replace('-', '_')}-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n\n")
    rows = [row(path, data) for path, data in files.items()]
    (info / "RECORD").write_text("\n".join([*rows, f"{info.name}/RECORD,,"]) + "\n")
    for path, data in files.items() if write else ():
        target = site / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
    return info


UPSTREAM = {"triton/__init__.py": b"__version__ = '3.9.0'\n", "triton/language.py": b"x = 1\n"}
FORK = {"triton/__init__.py": b"__version__ = \"3.7.4+fb\"\n", "triton/language.py": b"x = 2\n",
        "triton/fork_only.py": b""}


def test_the_core_is_the_distribution_whose_record_lists_the_file(tmp_path: Path) -> None:
    install(tmp_path, "vendor-gpu-triton", "3.7.4", FORK)
    found = discover([str(tmp_path)], in_tree=False)
    assert found.triton is not None and found.triton.name == "vendor-gpu-triton"
    assert core_version(found.triton) == "3.7.4+fb"
    assert found.triton in found.distributions  # reported, though it declares no backend


def test_a_name_unlike_triton_is_found_too(tmp_path: Path) -> None:
    install(tmp_path, "acme-compiler", "1.0", UPSTREAM)
    install(tmp_path, "triton-helpers", "0.1", {"triton_helpers/__init__.py": b""})
    found = discover([str(tmp_path)], in_tree=False)
    assert found.triton is not None and found.triton.name == "acme-compiler"


def test_a_fork_installed_over_triton_owns_the_file_on_disk(tmp_path: Path) -> None:
    install(tmp_path, "triton", "3.9.0", UPSTREAM)
    install(tmp_path, "fbtriton", "3.7.4", FORK)  # installed last: its bytes are on disk
    found = discover([str(tmp_path)], in_tree=False)
    assert [d.name for d in found.core_claims] == ["fbtriton", "triton"]
    overlap = ownership.core_overlap(found.core_claims)
    assert overlap is not None and overlap.shared == ("triton/__init__.py", "triton/language.py")
    assert overlap.on_disk is found.core_claims[0]
    text = overlap.describe()
    assert text.startswith("fbtriton 3.7.4 and triton 3.9.0 both own 2 file(s) (e.g. triton/__init__.py)")
    assert "the files on disk are fbtriton 3.7.4's (installed last), so triton 3.9.0 is broken" in text
    # installed from an index (no direct_url.json): the index is named by the user, never left to pip
    assert ("to keep triton 3.9.0: `pip uninstall -y fbtriton` then reinstall triton 3.9.0 from the wheel, index "
            "or mirror it came from (source unknown; e.g. `pip install --force-reinstall --no-deps --index-url "
            "<that index> triton==3.9.0`)") in text
    assert "to keep fbtriton 3.7.4: `pip uninstall -y triton` then reinstall fbtriton 3.7.4" in text
    assert "\n" not in text and len(text) < 1000
    assert overlap.reason("x").code == "conflict.files"


def test_without_a_record_no_core_is_claimed(tmp_path: Path) -> None:
    (tmp_path / "triton").mkdir()
    (tmp_path / "triton" / "__init__.py").write_bytes(b"")
    assert discover([str(tmp_path)], in_tree=False).triton is None


def test_record_row_matches_checks_size_then_sha256(tmp_path: Path) -> None:
    file = tmp_path / "f.py"
    file.write_bytes(b"abc")
    assert record_row_matches(row("f.py", b"abc"), str(file))
    assert not record_row_matches(row("f.py", b"abd"), str(file))  # same size, other bytes
    assert not record_row_matches(row("f.py", b"abcd"), str(file))
    assert not record_row_matches("f.py,md5=abc,3", str(file))
    assert not record_row_matches("f.py,sha256=x,99999999999999999999", str(file))
    assert not record_row_matches("f.py,sha256=x," + "9" * 5000, str(file))  # no int() of 5000 digits
    assert not record_row_matches("f.py,sha256=x,\u0663", str(file))  # a digit, but not ASCII
    assert not record_row_matches(row("f.py", b"abc"), str(tmp_path / "missing.py"))


def test_a_huge_init_is_read_no_further_than_the_bound(tmp_path: Path) -> None:
    install(tmp_path, "triton", "3.9.0", {"triton/__init__.py": b"#" * (1 << 20) + b"\n__version__ = '9'\n"})
    found = discover([str(tmp_path)], in_tree=False)
    assert found.triton is not None and core_version(found.triton) is None


_PATHS = st.text(alphabet="abt/_.,\r\"", min_size=1, max_size=12)


@given(lines=st.lists(st.text(alphabet="abt/_.,=\"\r", max_size=20), max_size=12), path=_PATHS)
def test_record_row_is_the_first_row_of_that_path(lines: list[str], path: str) -> None:
    text = "\n".join(lines)
    expected = next((line.rstrip("\r") for line in text.split("\n") if line.startswith(path + ",")), None)
    assert record_row(text, path) == expected


@given(a=st.dictionaries(st.sampled_from(["p/a.py", "p/b.py", "q/c.py", "x.dist-info/M", "p/__pycache__/a.pyc"]),
                         st.binary(max_size=4), max_size=5),
       b=st.dictionaries(st.sampled_from(["p/a.py", "p/b.py", "q/c.py", "x.dist-info/M"]),
                         st.binary(max_size=4), max_size=5))
def test_overlap_is_the_shared_installed_files(a: dict[str, bytes], b: dict[str, bytes]) -> None:
    first = discovery.Distribution("a", "1", "/nowhere/a-1.dist-info", "/nowhere")
    second = discovery.Distribution("b", "1", "/nowhere/b-1.dist-info", "/nowhere")
    rows_a = {p: row(p, d).partition(",")[2] for p, d in a.items() if not p.endswith(("/M", ".pyc"))}
    rows_b = {p: row(p, d).partition(",")[2] for p, d in b.items() if not p.endswith("/M")}
    overlap = ownership.compare(first, rows_a, second, rows_b)
    shared = sorted(set(rows_a) & set(rows_b))
    assert (overlap.shared if overlap else ()) == tuple(shared)
    if overlap is not None:
        assert overlap.on_disk is None  # nothing is installed under /nowhere: neither matches


@settings(max_examples=50, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(record=st.binary(max_size=300))
def test_a_hostile_record_never_breaks_discovery(record: bytes, tmp_path_factory: pytest.TempPathFactory) -> None:
    site = tmp_path_factory.mktemp("hostile")
    (site / "triton").mkdir()
    (site / "triton" / "__init__.py").write_bytes(b"")
    info = site / "triton-9.dist-info"
    info.mkdir()
    (info / "RECORD").write_bytes(b"triton/__init__.py,sha256=x," + record)
    found = discover([str(site)], in_tree=False)
    assert found.triton is None or found.triton.dist_info == str(info)
    for dist in found.core_claims:
        ownership.overlaps_of(dist)


def test_a_file_whose_name_has_a_comma_is_shared_too(tmp_path: Path) -> None:
    """RECORD quotes such a path (``"triton/a,b.py",...``), as the csv module writes it; the
    rows are read by the one RECORD reader (``discovery.record_lines``), quotes and all."""
    files = {**UPSTREAM, "triton/a,b.py": b"y = 1\n"}
    for name, data in (("triton", files), ("fbtriton", {**files, "triton/a,b.py": b"y = 2\n"})):
        info = install(tmp_path, name, "3.9.0" if name == "triton" else "3.7.4", data)
        text = (info / "RECORD").read_text()
        (info / "RECORD").write_text(text.replace("triton/a,b.py,", '"triton/a,b.py",'))
    rows = ownership.record_rows(str(tmp_path / "triton-3.9.0.dist-info"))
    assert "triton/a,b.py" in rows
    found = discover([str(tmp_path)], in_tree=False)
    overlap = ownership.core_overlap(found.core_claims)
    assert overlap is not None and "triton/a,b.py" in overlap.shared


def test_a_record_line_csv_refuses_ends_its_rows(tmp_path: Path) -> None:
    info = install(tmp_path, "triton", "3.9.0", UPSTREAM)
    past_the_field_limit = "x" * (256 << 10)
    (info / "RECORD").write_text((info / "RECORD").read_text() + f"{past_the_field_limit},,\nlater.py,,\n")
    rows = ownership.record_rows(str(info))
    assert set(rows) == set(UPSTREAM)


# -- the advice: for each choice, the other uninstalled and the one kept reinstalled from its source ---------


def test_the_advice_reinstalls_each_from_the_archive_it_came_from(tmp_path: Path) -> None:
    install(tmp_path, "triton", "3.9.0", UPSTREAM, write=False)
    fork = install(tmp_path, "fbtriton", "3.7.4", FORK)
    (tmp_path / "triton-3.9.0.dist-info" / "direct_url.json").write_text(json.dumps(
        {"url": "https://mirror.example/t/triton-3.9.0-cp311-linux_x86_64.whl", "archive_info": {"hashes": {}}}))
    (fork / "direct_url.json").write_text(json.dumps(
        {"url": "file:///wheels/my%20forks/fbtriton-3.7.4-py3-none-any.whl", "archive_info": {}}))
    overlap = ownership.core_overlap(discover([str(tmp_path)], in_tree=False).core_claims)
    assert overlap is not None
    text = overlap.describe()
    assert ("to keep triton 3.9.0: `pip uninstall -y fbtriton` then `pip install --force-reinstall --no-deps "
            "https://mirror.example/t/triton-3.9.0-cp311-linux_x86_64.whl`") in text
    assert ("to keep fbtriton 3.7.4: `pip uninstall -y triton` then `pip install --force-reinstall --no-deps "
            "'/wheels/my forks/fbtriton-3.7.4-py3-none-any.whl'`") in text
    assert "source unknown" not in text


def _fifo(path: Path) -> None:
    os.mkfifo(path)


def _link(path: Path) -> None:
    good = path.with_name("elsewhere.json")
    good.write_text(json.dumps({"url": "file:///w/fbtriton-3.7.4-py3-none-any.whl", "archive_info": {}}))
    path.symlink_to(good)


def _record(url: object, **info: object) -> Callable[[Path], object]:
    """Writes a direct_url.json of ``url`` and ``info`` (an ``archive_info`` when none is given)."""
    return lambda p: p.write_text(json.dumps({"url": url, **(info or {"archive_info": {}})}))


HOSTILE_DIRECT_URLS: dict[str, Callable[[Path], object]] = {
    "huge": lambda p: p.write_text(json.dumps({"url": "file:///w/x.whl", "archive_info": {}}) + " " * (1 << 20)),
    "not JSON": lambda p: p.write_bytes(b"\xff{url: file:///w/x.whl"),
    "deep": lambda p: p.write_text("[" * 5000),
    "a FIFO": _fifo,
    "a symlink": _link,
    "a directory": lambda p: p.mkdir(),
    "a list": lambda p: p.write_text('["file:///w/x.whl"]'),
    "a non-string url": _record(42),
    "a url with a newline": _record("file:///w/x.whl\nrm -rf ~"),
    "an escaped newline": _record("file:///w/x%0A.whl"),
    "a bidi override": _record("https://e.example/\u202ex.whl"),
    "a long url": _record("https://e.example/" + "x" * 5000),
    "another host's file": _record("file://host/w/x.whl"),
    "a relative file": _record("file:x.whl"),
    "another scheme": _record("ftp://e.example/x.whl"),
    "a bad netloc": _record("https://[::1/x.whl"),
    "a VCS checkout": _record("https://e.example/r.git", vcs_info={"vcs": "git"}),
    "no archive_info": _record("file:///w/x.whl", dir_info={}),
}


@pytest.mark.parametrize("hostile", sorted(HOSTILE_DIRECT_URLS))
def test_a_hostile_direct_url_is_source_unknown(hostile: str, tmp_path: Path) -> None:
    install(tmp_path, "triton", "3.9.0", UPSTREAM, write=False)
    fork = install(tmp_path, "fbtriton", "3.7.4", FORK)
    HOSTILE_DIRECT_URLS[hostile](fork / "direct_url.json")
    assert directurl.install_source(str(fork)) is None
    overlap = ownership.core_overlap(discover([str(tmp_path)], in_tree=False).core_claims)
    assert overlap is not None
    text = overlap.describe()
    assert "to keep fbtriton 3.7.4: `pip uninstall -y triton` then reinstall fbtriton 3.7.4 from the wheel, index " \
           "or mirror it came from (source unknown;" in text
    assert text.isprintable() and len(text) < 1000


def test_hostile_names_stay_one_bounded_line_and_quoted(tmp_path: Path) -> None:
    install(tmp_path, "triton", "3.9.0", UPSTREAM, write=False)
    fork = install(tmp_path, "fbtriton", "3.7.4", FORK)
    hostile = "fb$(reboot)\t" + "x" * 5000
    (fork / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {hostile}\nVersion: 3.7.4\u202e\n\n")
    overlap = ownership.core_overlap(discover([str(tmp_path)], in_tree=False).core_claims)
    assert overlap is not None
    text = overlap.describe()
    assert text.isprintable() and len(text) < 3000  # every name and version cut at MAX_SHOWN
    assert "`pip uninstall -y 'fb$(reboot)\\txxx" in text  # quoted for the shell, visible
    assert "xxx... 3.7.4\\u202e" in text  # cut


def test_following_the_advice_leaves_the_signed_one_verified(env: TrustEnv, tmp_path: Path) -> None:
    """A real venv with pip: a signed backend's wheel, then a fork of it over the same package,
    each installed from a local wheel file (pip records direct_url.json). The commands printed
    for keeping the signed one, run as printed, leave it verified."""
    files = backend_files("demo_backend", "Demo", "demo")
    plain = write_wheel(tmp_path / "in", "demo-backend", "1.0", files, {"demo": "demo_backend"})
    key = str(env.key.pub.with_suffix(".pem"))
    signed = run_cli("migrate", str(plain), "-o", str(tmp_path / "signed"), "--key", key)
    assert signed.returncode == 0, signed.stderr
    forked = {**files, "demo_backend/compiler.py": files["demo_backend/compiler.py"] + b"# the fork\n"}
    fork = write_wheel(tmp_path / "fork", "demo-fork", "2.0", forked, {"demo": "demo_backend"})
    subprocess.run([sys.executable, "-m", "venv", str(tmp_path / "v")], check=True, capture_output=True)
    (site,) = (tmp_path / "v").glob("lib/python*/site-packages")
    quiet = {**os.environ, "PIP_NO_INDEX": "1", "PIP_DISABLE_PIP_VERSION_CHECK": "1", "PYTHONPATH": ""}

    def pip(*args: str) -> None:
        done = subprocess.run([str(tmp_path / "v" / "bin" / "python"), "-m", "pip", *args], env=quiet,
                              capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr

    for wheel in (tmp_path / "signed" / plain.name, fork):
        pip("install", "-q", "--no-deps", "--no-index", str(wheel))
    before = entry(env.registry(site, policy="warn"), "demo", "demo-backend")
    assert code_of(before) == "conflict.files" and before.reason is not None
    message = before.reason.message
    keep = message.split("to keep demo-backend 1.0: ", 1)[1].split("; to keep ", 1)[0]
    commands = [shlex.split(c) for c in re.findall(r"`([^`]+)`", keep)]
    assert [c[:2] for c in commands] == [["pip", "uninstall"], ["pip", "install"]], message
    assert commands[1][-1] == str(tmp_path / "signed" / plain.name)  # the signed wheel, not an index's
    for command in commands:
        pip(*command[1:])
    after = env.registry(site, policy="warn")
    assert (entry(after, "demo", "demo-backend").trust, code_of(entry(after, "demo", "demo-backend"))) \
        == ("verified", None)
    assert not list(site.glob("demo_fork-*.dist-info"))
    assert "conflict.files" not in codes([e.reason for e in after.entries if e.reason] + after.problems)
