"""The packager under hostile wheels and faults: one line with a reason code, never a
traceback, nothing left behind.

Each crafted wheel of the seed corpus (``tests/helpers/zipgen.py``) goes through
``migrate``, ``verify``, ``inspect`` and ``scan`` in process; the disk faults (ENOSPC,
EROFS, EFBIG), ``kill -9`` and a closed pipe run the real command line in a child.
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from helpers import zipgen

from backend_packager.cli import main  # noqa: E402

CLI = [sys.executable, "-m", "backend_packager"]


def run_main(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def assert_clean(code: int, err: str) -> None:
    """Exit codes mean something, and stderr is lines of ours: no traceback, no internal error."""
    assert code in (0, 1, 2)
    assert "Traceback" not in err and "error.internal" not in err
    for line in err.splitlines():
        assert line.startswith(("backend-packager: error: ", "backend-packager: warning: ", "\r")), line


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The seed corpus as files: built by the script the fuzz target shares, not committed."""
    directory = tmp_path_factory.mktemp("corpus")
    script = Path(__file__).resolve().parents[1] / "data" / "make_wheel_corpus.py"
    subprocess.run([sys.executable, str(script), str(directory)], check=True, capture_output=True)
    return {c.name: directory / c.name / "demo-1.0-py3-none-any.whl" for c in zipgen.CASES}


@pytest.fixture(scope="module")
def key(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("key")
    assert main(["keygen", "-q", "-o", str(directory / "vendor.pem")]) == 0
    return directory / "vendor.pem"


@pytest.mark.parametrize("case", zipgen.CASES, ids=lambda c: c.name)
def test_migrate_gives_each_crafted_wheel_its_reason(case: zipgen.Case, corpus: dict[str, Path], key: Path,
                                                      tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_main(capsys, "migrate", str(corpus[case.name]), "-o", str(tmp_path / "out"),
                              "--key", str(key), "--json")
    assert_clean(code, err)
    outcome = json.loads(out)["wheels"][0]
    if case.code is None:
        assert code == 0 and outcome["error"] is None
    else:
        assert code == 1 and outcome["error"]["code"] == case.code, outcome["error"]
        assert outcome["error"]["path"].startswith(str(corpus[case.name]))
        assert not (tmp_path / "out").exists() or os.listdir(tmp_path / "out") == []


#: Only migrate (and verify, once there is a manifest) reads a payload member's data.
PAYLOAD_ONLY = {"corrupt-deflate-payload", "deflate-only-isal-accepts"}
#: verify checks entry points against a manifest, so without one it stops at that.
NEEDS_MANIFEST = {"non-utf8-entry-points"}


@pytest.mark.parametrize("case", [c for c in zipgen.CASES if c.code and c.name not in PAYLOAD_ONLY],
                         ids=lambda c: c.name)
def test_verify_and_inspect_give_the_same_reason(case: zipgen.Case, corpus: dict[str, Path], key: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    wheel = str(corpus[case.name])
    code, out, err = run_main(capsys, "verify", wheel, "--trust", str(key.with_suffix(".pub")), "--json")
    assert_clean(code, err)
    findings = [f["code"] for f in json.loads(out)["wheels"][0]["findings"]]
    allowed = [[case.code], ["manifest.missing"]] if case.name in NEEDS_MANIFEST else [[case.code]]
    assert code == 1 and findings in allowed
    code, out, err = run_main(capsys, "inspect", wheel, "--json")
    assert_clean(code, err)
    assert code == 1 and [json.loads(out)["wheels"][0]["error"]["code"]] in allowed


@pytest.mark.parametrize("case", zipgen.CASES, ids=lambda c: c.name)
def test_scan_never_raises(case: zipgen.Case, corpus: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_main(capsys, "scan", str(corpus[case.name]), "--json")
    assert_clean(code, err)
    assert json.loads(out)["format"] == 1


def test_trailing_data_is_dropped_and_said(corpus: dict[str, Path], key: Path, tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_main(capsys, "migrate", str(corpus["trailing-data"]), "-o", str(tmp_path), "--key", str(key))
    assert code == 0 and "512 bytes of trailing data after the end of the archive: not copied" in err
    output = tmp_path / "demo-1.0-py3-none-any.whl"
    assert output.read_bytes()[-22:-18] == b"PK\x05\x06"  # ends with its end record, comment-less
    code, _, err = run_main(capsys, "verify", str(output), "--trust", str(key.with_suffix(".pub")))
    assert code == 0, err


def test_a_valid_member_of_zeros_is_not_refused(corpus: dict[str, Path], tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    """64 bytes then 8 MiB of zeros: zlib holds most of the output after taking all input."""
    code, _, err = run_main(capsys, "migrate", str(corpus["zeros-after-64-bytes"]), "-o", str(tmp_path))
    assert code == 0, err
    with zipfile.ZipFile(tmp_path / "demo-1.0-py3-none-any.whl") as out:
        assert out.read("demo/zeros.bin") == b"x" * 64 + bytes(8 << 20)


def test_output_modes_are_normalised(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    members = zipgen.base_members(payload={"demo/__init__.py": b"", "demo/tool": b"#!/bin/sh\n",
                                           "demo/secret.txt": b"x"})
    members[1].mode, members[2].mode = 0o100775, 0o100600
    src = tmp_path / "in" / "demo-1.0-py3-none-any.whl"
    src.parent.mkdir()
    src.write_bytes(zipgen.wheel_bytes(zipgen.Archive(members)))
    code, _, err = run_main(capsys, "migrate", str(src), "-o", str(tmp_path / "out"))
    assert code == 0, err
    with zipfile.ZipFile(tmp_path / "out" / src.name) as out:
        modes = {i.filename: i.external_attr >> 16 for i in out.infolist()}
    assert modes["demo/tool"] == 0o100755 and modes["demo/secret.txt"] == 0o100644
    assert all(mode in (0o100644, 0o100755) for mode in modes.values())


# --- keys --------------------------------------------------------------------------------


@pytest.mark.parametrize("target", ["vendor.pub", "adir", "same"])
def test_keygen_refuses_paths_that_would_lose_the_private_key(target: str, tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "adir").mkdir()
    if target == "same":  # the private key's path is a link to its public twin
        (tmp_path / "same.pub").write_text("x\n")
        (tmp_path / "same.pem").symlink_to(tmp_path / "same.pub")
        target = "same.pem"
    before = sorted(os.listdir(tmp_path))
    code, out, err = run_main(capsys, "keygen", "-o", str(tmp_path / target), "--force", "--json")
    assert code == 2 and json.loads(out)["error"]["code"] == "input.key-path"
    assert err.count("\n") == 1 and "(input.key-path)" in err
    assert sorted(os.listdir(tmp_path)) == before


def test_keygen_on_an_existing_key_is_a_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["keygen", "-q", "-o", str(tmp_path / "k.pem")]) == 0
    code, _, err = run_main(capsys, "keygen", "-o", str(tmp_path / "k.pem"))
    assert code == 2 and "(input.exists)" in err


# --- disk faults, kill -9, closed pipes: the real command line in a child ------------------


def _unshare_available() -> bool:
    if shutil.which("unshare") is None:
        return False
    probe = subprocess.run(["unshare", "-rm", "sh", "-c", "mount -t tmpfs -o size=64k tmpfs /mnt"],
                           capture_output=True)
    return probe.returncode == 0


needs_mounts = pytest.mark.skipif(not _unshare_available(), reason="needs unshare -rm and tmpfs mounts")


@needs_mounts
@pytest.mark.parametrize(("options", "code"), [("size=4k", "file.enospc"), ("ro", "file.erofs")])
def test_disk_full_or_read_only_output_is_one_line(options: str, code: str, corpus: dict[str, Path],
                                                   tmp_path: Path) -> None:
    """migrate into a tmpfs that is full (a zero-filled 8 MiB member) or read-only."""
    out = tmp_path / "out"
    out.mkdir()
    script = (f'mount -t tmpfs -o {options} tmpfs "$1" && {" ".join(CLI)} migrate "$2" -o "$1" --json; '
              'rc=$?; ls -A "$1"; exit $rc')
    done = subprocess.run(["unshare", "-rm", "sh", "-c", script, "sh", str(out), str(corpus["zeros-after-64-bytes"])],
                          capture_output=True, text=True, env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert done.returncode == 1, done.stderr
    document, _, listing = done.stdout.partition("\n}\n")
    assert json.loads(document + "}")["wheels"][0]["error"]["code"] == code
    assert listing.strip() == ""  # nothing left in the output directory
    assert "Traceback" not in done.stderr


def test_file_too_big_is_one_line_and_leaves_nothing(corpus: dict[str, Path], tmp_path: Path) -> None:
    def limit() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))  # the output is ~9 KiB

    out = tmp_path / "out"
    done = subprocess.run([*CLI, "migrate", str(corpus["zeros-after-64-bytes"]), "-o", str(out)],
                          capture_output=True, text=True, preexec_fn=limit)
    assert done.returncode == 1 and "(file.efbig)" in done.stderr and "Traceback" not in done.stderr
    assert os.listdir(out) == []


def test_kill_9_while_writing_leaves_no_file(corpus: dict[str, Path], tmp_path: Path) -> None:
    """The child dies after the payload is written, before the output has a name: OUTDIR stays empty."""
    out = tmp_path / "out"
    child = (
        "import os, signal, sys\n"
        "from backend_packager.wheel import writer\n"
        "writer.WheelWriter.finish = lambda *a: os.kill(os.getpid(), signal.SIGKILL)\n"
        "from backend_packager.cli import main\n"
        "main(sys.argv[1:])\n"
    )
    done = subprocess.run([sys.executable, "-c", child, "migrate", str(corpus["zeros-after-64-bytes"]), "-o",
                           str(out)], capture_output=True)
    assert done.returncode == -signal.SIGKILL
    assert os.listdir(out) == []


def test_a_closed_pipe_exits_quietly(tmp_path: Path) -> None:
    read, write = os.pipe()
    os.close(read)
    try:
        done = subprocess.run([*CLI, "schema"], stdout=write, stderr=subprocess.PIPE, text=True)
    finally:
        os.close(write)
    assert done.returncode == 141 and done.stderr == ""


def test_unreadable_input_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A FIFO named like a wheel or given as a key file is refused at once, never read (it
    would block); a directory with no wheel in it is a usage error."""
    empty = tmp_path / "empty"
    empty.mkdir()
    code, _, err = run_main(capsys, "inspect", str(empty))
    assert code == 2 and "(input.no-wheels)" in err
    fifo = tmp_path / "demo-1.0-py3-none-any.whl"
    os.mkfifo(fifo)
    code, out, err = run_main(capsys, "inspect", str(fifo), "--json")
    assert code == 1 and json.loads(out)["wheels"][0]["error"]["code"] == "wheel.not-a-file"
    code, _, err = run_main(capsys, "verify", str(fifo), "--trust", str(fifo))
    assert code == 2 and "(input.not-a-file)" in err and err.count("\n") == 1
    code, _, err = run_main(capsys, "migrate", str(fifo), "--key", str(fifo), "-o", str(tmp_path / "o"))
    assert code == 2 and "(input.not-a-file)" in err
