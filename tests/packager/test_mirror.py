"""``backend-packager mirror``: wheels built here with ``python -m build``. A mirror of real
wheels from the index that pip installs from: ``tests/real/test_mirror_real.py``."""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import pytest
from helpers import index
from helpers.cli import run_cli
from helpers.index import index_files, mtimes, pip_from_mirror, run_mirror, sha, statuses
from helpers.projects import fresh_venv, rezip
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from triton_backend_runtime.base.layout import MANIFEST_FILENAME

from backend_packager.commands import mirror, mirrorindex
from backend_packager.formats import simpleindex

#: The mirror's source wheels (a legacy backend, a pure-Python wheel, a broken one), its keys, its source.
wheels, keys, src = index.wheels, index.keys, index.src


def renamed(wheel: Path, version: str, out: Path) -> Path:
    """The same wheel as release ``version`` (dist-info, METADATA and RECORD rewritten)."""
    name, old = wheel.name.split("-")[:2]
    target = out / wheel.name.replace(f"-{old}-", f"-{version}-")

    def edit(members: dict[str, bytes]) -> None:
        for member in list(members):
            data = members.pop(member)
            if member.endswith(".dist-info/METADATA"):
                data = data.replace(f"Version: {old}\n".encode(), f"Version: {version}\n".encode())
            members[member.replace(f"{name}-{old}.dist-info", f"{name}-{version}.dist-info")] = data

    return rezip(wheel, target, edit)


def test_first_run_migrates_copies_and_fails_per_wheel(src: Path, wheels: dict[str, Path], keys: tuple,
                                                        tmp_path: Path) -> None:
    out = tmp_path / "out"
    code, doc, _ = run_mirror(src, out, keys[0])
    assert code == 1
    assert doc["format"] == 1
    backend, pure, broken = (wheels[k].name for k in ("backend", "pure", "broken"))
    assert statuses(doc) == {backend: "migrated", pure: "copied", broken: "failed"}
    assert doc["summary"] == {"migrated": 1, "unchanged": 0, "copied": 1, "failed": 1}
    (failed,) = [w for w in doc["wheels"] if w["status"] == "failed"]
    assert failed["error"]["code"] == "wheel.not-zip" and failed["served"] is False
    (migrated,) = [w for w in doc["wheels"] if w["status"] == "migrated"]
    assert migrated["backends"] == ["legacyep"] and migrated["plugins"] == ["legacy_ep_backend/lib/libdemo_plugin.so"]
    # the migrated wheel is signed; the copied one is the input, byte for byte; the broken one is absent
    assert run_cli("verify", str(out / backend), "--trust", str(keys[0].public)).returncode == 0
    assert sha(out / pure) == sha(wheels["pure"])
    assert not (out / broken).exists()
    root = json.loads((out / "simple" / "index.json").read_text())
    assert root["projects"] == [{"name": "legacy-ep-backend"}, {"name": "plain-helper"}]
    assert '<a href="plain-helper/">plain-helper</a>' in (out / "simple" / "index.html").read_text()
    assert index_files(out, "legacy-ep-backend") == {backend: sha(out / backend)}
    assert index_files(out, "plain-helper") == {pure: sha(wheels["pure"])}
    assert not (out / "simple" / "broken-backend").exists()
    assert not list(out.glob(".*.tmp")) and not (out / mirror.STAGING_DIR).exists()


def test_plain_output_ends_with_the_summary_table(src: Path, keys: tuple, tmp_path: Path) -> None:
    proc = run_cli("mirror", str(src), "-o", str(tmp_path / "out"), "--key", str(keys[0].private))
    assert proc.returncode == 1
    lines = proc.stdout.splitlines()
    assert lines[-5:] == ["STATUS    WHEELS", "migrated  1", "unchanged 0", "copied    1", "failed    1"]
    assert any(line.startswith("failed    broken_backend-0.1-py3-none-any.whl: wheel.not-zip: ") for line in lines)


def test_rerun_changes_nothing(src: Path, keys: tuple, tmp_path: Path) -> None:
    out = tmp_path / "out"
    run_mirror(src, out, keys[0])
    before = mtimes(out)
    code, doc, _ = run_mirror(src, out, keys[0])
    assert code == 1  # the broken wheel still fails: the run says so every time
    assert sorted(statuses(doc).values()) == ["failed", "unchanged", "unchanged"]
    assert mtimes(out) == before
    # touched inputs (new mtime, same bytes) are hashed again, not migrated again
    for wheel in src.iterdir():
        os.utime(wheel, ns=(1, 1))
    _, doc, _ = run_mirror(src, out, keys[0])
    assert sorted(statuses(doc).values()) == ["failed", "unchanged", "unchanged"]
    assert {k: v for k, v in mtimes(out).items() if k != mirror.STATE_FILE} == {
        k: v for k, v in before.items() if k != mirror.STATE_FILE}


def test_adding_one_wheel_migrates_only_that_one(src: Path, wheels: dict[str, Path], keys: tuple,
                                                 tmp_path: Path) -> None:
    out = tmp_path / "out"
    run_mirror(src, out, keys[0])
    before = mtimes(out)
    added = renamed(wheels["backend"], "2.0", src)
    code, doc, _ = run_mirror(src, out, keys[0])
    assert {k: v for k, v in statuses(doc).items() if v != "unchanged"} == {
        added.name: "migrated", wheels["broken"].name: "failed"}
    after = mtimes(out)
    assert after.pop(added.name) and {k: after[k] for k in before if k.endswith(".whl")} == {
        k: v for k, v in before.items() if k.endswith(".whl")}
    assert set(index_files(out, "legacy-ep-backend")) == {wheels["backend"].name, added.name}
    assert mtimes(out)["simple/plain-helper/index.html"] == before["simple/plain-helper/index.html"]
    assert run_cli("verify", str(out / added.name), "--trust", str(keys[0].public)).returncode == 0
    # the new index linked every served wheel again (a new ctime each): still recognised as written
    _, doc, _ = run_mirror(src, out, keys[0])
    assert sorted(statuses(doc).values()) == ["failed", "unchanged", "unchanged", "unchanged"]


def test_outputs_made_before_sboms_are_made_again(src: Path, wheels: dict[str, Path], keys: tuple,
                                                  tmp_path: Path) -> None:
    """A mirror written by this packager version before it wrote SBOMs (the state's tool names
    no SBOM) serves wheels without one: the next run makes them again."""
    out = tmp_path / "out"
    run_mirror(src, out, keys[0])
    state_file = out / mirror.STATE_FILE
    state = json.loads(state_file.read_bytes())
    assert "; sbom=" in state["tool"]
    state["tool"] = state["tool"].split("; sbom=")[0]
    state_file.write_text(json.dumps(state))
    _, doc, _ = run_mirror(src, out, keys[0])
    assert statuses(doc)[wheels["backend"].name] == "migrated"
    with zipfile.ZipFile(out / wheels["backend"].name) as archive:
        assert any(name.endswith(".dist-info/sboms/triton-backend.cdx.json") for name in archive.namelist())


def test_key_change_resigns_migrated_wheels_only(src: Path, wheels: dict[str, Path], keys: tuple,
                                                tmp_path: Path) -> None:
    out = tmp_path / "out"
    run_mirror(src, out, keys[0])
    pure_mtime = (out / wheels["pure"].name).stat().st_mtime_ns
    code, doc, _ = run_mirror(src, out, keys[1])
    assert statuses(doc)[wheels["backend"].name] == "migrated"
    assert statuses(doc)[wheels["pure"].name] == "unchanged"
    assert (out / wheels["pure"].name).stat().st_mtime_ns == pure_mtime
    backend = out / wheels["backend"].name
    assert run_cli("verify", str(backend), "--trust", str(keys[1].public)).returncode == 0
    assert run_cli("verify", str(backend), "--trust", str(keys[0].public)).returncode == 1
    assert index_files(out, "legacy-ep-backend") == {backend.name: sha(backend)}


def test_pass_through_failures_serves_the_original(src: Path, wheels: dict[str, Path], keys: tuple,
                                                   tmp_path: Path) -> None:
    out = tmp_path / "out"
    broken = wheels["broken"].name
    code, doc, _ = run_mirror(src, out, keys[0], "--pass-through-failures")
    assert code == 1
    (failed,) = [w for w in doc["wheels"] if w["status"] == "failed"]
    assert failed["served"] is True and failed["error"]["code"] == "wheel.not-zip"
    assert sha(out / broken) == sha(wheels["broken"])
    assert index_files(out, "broken-backend") == {broken: sha(wheels["broken"])}
    # without the flag again: the original is taken out of the index and the directory
    code, doc, _ = run_mirror(src, out, keys[0])
    assert code == 1 and not (out / broken).exists() and not (out / "simple" / "broken-backend").exists()
    assert "broken-backend" not in (out / "simple" / "index.html").read_text()


def test_removed_source_leaves_the_mirror(src: Path, wheels: dict[str, Path], keys: tuple, tmp_path: Path) -> None:
    out = tmp_path / "out"
    run_mirror(src, out, keys[0])
    (src / wheels["pure"].name).unlink()
    _, doc, _ = run_mirror(src, out, keys[0])
    assert wheels["pure"].name not in statuses(doc)
    assert not (out / wheels["pure"].name).exists() and not (out / "simple" / "plain-helper").exists()


def test_second_run_waits_for_the_lock_or_exits_2(src: Path, keys: tuple, tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    exe = Path(sys.executable).parent / "backend-packager"
    held = os.open(out, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(held, fcntl.LOCK_EX)
        busy = run_cli("mirror", str(src), "-o", str(out), "--key", str(keys[0].private), "--no-wait")
        assert busy.returncode == 2 and "(mirror.busy)" in busy.stderr and "Traceback" not in busy.stderr
        waiter = subprocess.Popen([str(exe), "mirror", str(src), "-o", str(out), "--key", str(keys[0].private),
                                   "--json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        assert waiter.stderr is not None
        assert "waiting for another mirror run" in waiter.stderr.readline()  # blocks until it waits
        assert not (out / mirror.STATE_FILE).exists()  # nothing written while the lock is held
    finally:
        os.close(held)
    stdout, _ = waiter.communicate(timeout=120)
    assert waiter.returncode == 1 and json.loads(stdout)["summary"]["migrated"] == 1


def test_concurrent_runs_leave_one_consistent_mirror(src: Path, keys: tuple, tmp_path: Path) -> None:
    out = tmp_path / "out"
    exe = Path(sys.executable).parent / "backend-packager"
    cmd = [str(exe), "mirror", str(src), "-o", str(out), "--key", str(keys[0].private), "--json"]
    runs = [subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(2)]
    docs = [json.loads(run.communicate(timeout=120)[0]) for run in runs]
    assert sorted(d["summary"]["migrated"] for d in docs) == [0, 1]  # one did the work, the other found it done
    code, doc, _ = run_mirror(src, out, keys[0])
    assert doc["summary"] == {"migrated": 0, "unchanged": 2, "copied": 0, "failed": 1}
    for name, digest in index_files(out, "legacy-ep-backend").items():
        assert sha(out / name) == digest


BAD_STATES: dict[str, bytes] = {
    "not-json": b"{\"format\": 1, ",
    "deep": b"[" * 100_000 + b"]" * 100_000,
    "huge-number": b"{\"format\": 1" + b"0" * 5000 + b"}",
    "wrong-format": b"{\"format\": 99, \"tool\": \"x\", \"keyid\": null, \"entries\": {}}",
    "not-utf8": b"\xff\xfe{}",
    "entry-wrong-type": b"{\"format\": 1, \"tool\": \"x\", \"keyid\": null, \"entries\": {\"a\": []}}",
}


def _escaping_state(victim: str) -> bytes:
    """A well-formed state whose entry names a file outside OUTDIR as a served output."""
    entry = {"filename": victim, "source": "x", "project": "victim", "stat": [0, 0, 0, 0, 0], "sha256": "0" * 64,
             "kind": "copied", "served": True, "output_sha256": "0" * 64, "output_stat": [1, 1, 1, 1, 1], "keyid": None,
             "backends": [], "plugins": [], "error": None, "core": None}
    return json.dumps({"format": mirror.STATE_FORMAT, "tool": "0", "keyid": None, "entries": {victim: entry}}).encode()


@pytest.mark.parametrize("kind", [*BAD_STATES, "escaping", "fifo", "symlink", "too-big"])
def test_hostile_state_is_ignored_and_rebuilt(kind: str, src: Path, keys: tuple, tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    state = out / mirror.STATE_FILE
    victim = tmp_path / "victim-1.0-py3-none-any.whl"
    victim.write_bytes(b"keep me")
    if kind in BAD_STATES:
        state.write_bytes(BAD_STATES[kind])
    elif kind == "escaping":
        state.write_bytes(_escaping_state(f"../{victim.name}"))
    elif kind == "fifo":
        os.mkfifo(state)
    elif kind == "symlink":
        state.symlink_to(victim)
    else:
        with state.open("wb") as stream:
            stream.truncate(mirror.MAX_STATE_BYTES + 1)
    code, doc, _ = run_mirror(src, out, keys[0])
    assert code == 1
    assert any("(mirror.state)" in w for w in doc["warnings"]), doc["warnings"]
    assert doc["summary"] == {"migrated": 1, "unchanged": 0, "copied": 1, "failed": 1}
    assert victim.read_bytes() == b"keep me"
    _, again, _ = run_mirror(src, out, keys[0])
    assert again["summary"]["unchanged"] == 2 and again["warnings"] == []


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-2, 2**40) | st.text(max_size=80),
    lambda inner: st.lists(inner, max_size=6) | st.dictionaries(st.text(max_size=20), inner, max_size=6),
    max_leaves=40,
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(doc=st.fixed_dictionaries({"format": st.just(mirror.STATE_FORMAT), "tool": st.text(max_size=5),
                                  "keyid": st.none(),
                                  "entries": st.dictionaries(st.text(max_size=60), json_values, max_size=3)}),
       extra=json_values)
def test_state_decoding_never_raises(doc: dict[str, Any], extra: Any, tmp_path: Path) -> None:
    """Any JSON in the state file is a usable state or a warning, never an exception, and a
    decoded entry always names a plain wheel file in OUTDIR."""
    for candidate in (doc, extra):
        (tmp_path / mirror.STATE_FILE).write_text(json.dumps(candidate))
        state, warnings = mirror.load_state(tmp_path)
        assert (state is None) == bool(warnings)
        for name in state.entries if state else []:
            assert "/" not in name and not name.startswith(".") and name.endswith(".whl")


def test_simple_index_source_is_confined_and_hash_checked(src: Path, wheels: dict[str, Path], keys: tuple,
                                                          tmp_path: Path) -> None:
    first = tmp_path / "first"
    run_mirror(src, first, keys[0], "--pass-through-failures")
    # the first mirror is a source: a PEP 503 tree on disk; add a page whose links leave the
    # tree or the disk, and one that names another project's file with another sha256 (a page
    # links its own project's files only: that link fails, the project's own page is mirrored)
    outside = tmp_path / wheels["pure"].name
    shutil.copy(wheels["pure"], outside)
    (first / "simple" / "evil").mkdir()
    (first / "simple" / "evil" / "index.html").write_text(
        f'<a href="../../../{outside.name}">x</a>\n<a href="https://example.org/x-1.0-py3-none-any.whl">y</a>\n'
        f'<a href="../../{wheels["pure"].name}#sha256={"0" * 64}">z</a>\n')
    second = tmp_path / "second"
    code, doc, _ = run_mirror(first, second, keys[1])
    codes = sorted(w["error"]["code"] for w in doc["wheels"] if w["error"])
    assert codes == ["mirror.source", "mirror.source", "mirror.source", "wheel.not-zip"], doc["wheels"]
    assert statuses(doc)[wheels["pure"].name] == "copied"
    assert statuses(doc)[wheels["backend"].name] == "migrated"  # re-signed with the second key
    assert run_cli("verify", str(second / wheels["backend"].name), "--trust", str(keys[1].public)).returncode == 0
    # the sha256 a page names is checked: a file that does not match fails
    shutil.rmtree(first / "simple" / "evil")
    project = first / "simple" / "plain-helper"
    (project / "index.json").unlink()
    (project / "index.html").write_text(f'<a href="{wheels["pure"].name}#sha256={"0" * 64}">z</a>\n')
    code, doc, _ = run_mirror(first, tmp_path / "third", keys[1])
    (bad,) = [w for w in doc["wheels"] if w["filename"] == wheels["pure"].name]
    assert bad["error"]["code"] == "mirror.source-hash"


def test_leftovers_of_a_killed_run_are_removed(src: Path, keys: tuple, tmp_path: Path) -> None:
    out = tmp_path / "out"
    run_mirror(src, out, keys[0])
    leftovers = [out / ".legacy_ep_backend-1.0.whl.x1y2.tmp", out / mirror.STAGING_DIR / "half.whl",
                 out / mirrorindex.GENERATIONS / "0123-half" / "index.html"]
    for path in leftovers:
        path.parent.mkdir(exist_ok=True)
        path.write_bytes(b"half")
    os.symlink(".mirror-index/0123-half", out / mirrorindex.NEXT_LINK)
    run_mirror(src, out, keys[0])
    assert not any(p.exists() for p in leftovers) and not os.path.lexists(out / mirrorindex.NEXT_LINK)
    assert [p.name for p in (out / mirrorindex.GENERATIONS).iterdir()] == [(out / "simple").resolve().name]


def assert_index_consistent(out: Path) -> dict[str, str]:
    """Every file every page names is served (beside its page) with the sha256 the page
    gives, every project of the root page has its pages; returns filename -> sha256."""
    served: dict[str, str] = {}
    root = json.loads((out / "simple" / "index.json").read_text())
    for project in (p["name"] for p in root["projects"]):
        for name, digest in index_files(out, project).items():
            assert sha(out / "simple" / project / name) == digest, name
            served[name] = digest
    return served


def test_killed_while_replacing_a_served_wheel(src: Path, wheels: dict[str, Path], keys: tuple,
                                               tmp_path: Path) -> None:
    """kill -9 after a changed wheel (same file name, new bytes) is migrated: the index still
    names the old file with its own sha256, and the next run finishes the job."""
    out = tmp_path / "out"
    run_mirror(src, out, keys[0])
    name = wheels["backend"].name
    rezip(wheels["backend"], src / name, lambda m: m.update({"legacy_ep_backend/extra.py": b"X = 2\n"}))
    code = (
        "import os, signal, sys\nfrom pathlib import Path\n"
        "from backend_packager.commands import mirror\nfrom backend_packager.manifest import signing\n"
        "def done(path, result):\n"
        f"    if result.filename == {name!r}:\n"
        "        os.kill(os.getpid(), signal.SIGKILL)\n"
        f"mirror.mirror([Path({str(src)!r})], Path({str(out)!r}), signing.load(Path({str(keys[0].private)!r})), "
        "hooks=mirror.Hooks(done=done))\n"
    )
    killed = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert killed.returncode == -9, killed.stderr
    assert_index_consistent(out)
    _, doc, _ = run_mirror(src, out, keys[0])
    assert statuses(doc)[name] == "migrated"
    assert_index_consistent(out)
    with zipfile.ZipFile(out / name) as archive:
        assert "legacy_ep_backend/extra.py" in archive.namelist()
    assert not (out / mirror.STAGING_DIR).exists()


def test_progress_covers_every_wheel_of_the_run(src: Path, keys: tuple, tmp_path: Path) -> None:
    """The hooks the CLI's progress bar draws from: every input announced, every one finished
    (unchanged and failed ones too), bytes reported for the migrated ones."""
    from backend_packager.manifest import signing

    seen: dict[str, list[str]] = {"start": [], "done": [], "bytes": []}
    hooks = mirror.Hooks(
        start=lambda paths: seen["start"].extend(p.name for p in paths),
        done=lambda path, result: seen["done"].append(f"{path.name}:{result.status}"),
        progress=lambda path, member, nbytes: seen["bytes"].append(path.name),
    )
    key = signing.load(keys[0].private)
    for expected in ({"migrated", "copied", "failed"}, {"unchanged", "failed"}):
        for events in seen.values():
            events.clear()
        run = mirror.mirror([src], tmp_path / "out", key, jobs=2, hooks=hooks)
        assert sorted(seen["start"]) == sorted(p.name for p in src.iterdir())
        assert sorted(d.split(":")[0] for d in seen["done"]) == sorted(seen["start"])
        assert {d.split(":")[1] for d in seen["done"]} == expected == {r.status for r in run.results}
        assert bool(seen["bytes"]) == ("migrated" in expected)


def test_usage_errors_exit_2(src: Path, keys: tuple, tmp_path: Path) -> None:
    out = tmp_path / "out"
    missing = run_cli("mirror", str(tmp_path / "nope"), "-o", str(out), "--key", str(keys[0].private))
    assert missing.returncode == 2 and "(input.missing)" in missing.stderr
    inside = run_cli("mirror", str(src), "-o", str(src), "--key", str(keys[0].private))
    assert inside.returncode == 2 and "(input.output)" in inside.stderr
    env_free = {k: v for k, v in os.environ.items() if k != "BACKEND_PACKAGER_SIGNING_KEY"}
    exe = Path(sys.executable).parent / "backend-packager"
    nokey = subprocess.run([str(exe), "mirror", str(src), "-o", str(out)], capture_output=True, text=True,
                           env=env_free)
    assert nokey.returncode == 2 and "needs --key" in nokey.stderr


def test_pip_installs_from_the_mirror(src: Path, wheels: dict[str, Path], keys: tuple, tmp_path: Path) -> None:
    out = tmp_path / "out"
    run_mirror(src, out, keys[0])
    python = fresh_venv(tmp_path / "venv")
    pip_from_mirror(python, out, "legacy-ep-backend", "plain-helper", "--no-deps")
    code = "import legacy_ep_backend, plain_helper; print(plain_helper.VALUE)"
    assert subprocess.run([str(python), "-c", code], capture_output=True, text=True).stdout == "1\n"
    site = next((tmp_path / "venv" / "lib").glob("python*/site-packages"))
    installed = site / "legacy_ep_backend-1.0.dist-info"
    assert (installed / MANIFEST_FILENAME).exists()  # the signed copy, not the input
    assert not (site / "plain_helper-1.0.dist-info" / MANIFEST_FILENAME).exists()  # copied through


# --- the simple index as data ---------------------------------------------------------------

index_files_st = st.lists(st.builds(
    simpleindex.IndexFile,
    project=st.from_regex(r"[a-z0-9]([a-z0-9-]{0,20}[a-z0-9])?", fullmatch=True),
    filename=st.from_regex(r"[A-Za-z0-9_.+]{1,30}-[0-9.]{1,8}-py3-none-any\.whl", fullmatch=True),
    sha256=st.from_regex(r"[0-9a-f]{64}", fullmatch=True),
), max_size=8, unique_by=lambda f: f.filename)


@settings(max_examples=100, deadline=None)
@given(files=index_files_st)
def test_pages_read_back_as_written(files: list[simpleindex.IndexFile]) -> None:
    """What pip reads from a project page (PEP 503 anchors) and what a PEP 691 client reads
    are the files written, each with its sha256; the bytes do not depend on the order given."""
    pages = simpleindex.pages(files)
    assert pages == simpleindex.pages(list(reversed(files)))
    for project in {f.project for f in files}:
        mine = {f.filename: f.sha256 for f in files if f.project == project}
        links = simpleindex.links(pages[f"{project}/index.html"].decode())
        assert {unquote(link.href.removeprefix("../../")): link.sha256 for link in links} == mine
        doc = json.loads(pages[f"{project}/index.json"])
        assert {f["filename"]: f["hashes"]["sha256"] for f in doc["files"]} == mine
    root = [link.href for link in simpleindex.links(pages["index.html"].decode())]
    assert root == [f"{p}/" for p in sorted({f.project for f in files})]


@settings(max_examples=200, deadline=None)
@given(page=st.text(max_size=300) | st.builds(lambda h, f: f'<a href="{h}#{f}">x</a>', st.text(max_size=40),
                                              st.text(max_size=80)))
def test_links_of_any_page_never_raise(page: str) -> None:
    for link in simpleindex.links(page):
        assert link.sha256 is None or len(link.sha256) == 64
