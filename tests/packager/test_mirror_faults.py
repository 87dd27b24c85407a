"""``backend-packager mirror`` under faults and attacks: symlinked inputs, kills at every
stage of a run that replaces wheels, a deleted lock file, bad links in a source index, and
a served wheel rewritten in place."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from helpers import index
from helpers.cli import run_cli
from helpers.index import index_files, run_mirror, sha, statuses
from helpers.projects import Keypair, rezip

from backend_packager.commands import mirror, mirrorindex

#: The mirror's source wheels (a legacy backend, a pure-Python wheel, a broken one), its keys, its source.
wheels, keys, src = index.wheels, index.keys, index.src

def served(out: Path) -> dict[str, str]:
    """filename -> sha256 of the index being served, checked complete: every project of the
    root page has both pages, and every file they name is served beside them with that sha256."""
    root = json.loads((out / "simple" / "index.json").read_text())
    found: dict[str, str] = {}
    for project in (p["name"] for p in root["projects"]):
        for name, digest in index_files(out, project).items():
            assert sha(out / "simple" / project / name) == digest, name
            found[name] = digest
    return found


def tree_bytes(root: Path) -> bytes:
    """Every byte of every file under ``root`` (links followed), concatenated."""
    return b"".join(p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file())


# --- sources are regular files -------------------------------------------------------------


def test_symlink_to_the_key_is_never_served(src: Path, keys: tuple[Keypair, Keypair], tmp_path: Path) -> None:
    """A ``*.whl`` symlink in the incoming directory that points to the mirror's private
    key: with --pass-through-failures it is that input's failure (input.symlink), never
    copied to the output, never linked from the index."""
    secret = keys[0].private.read_bytes()
    evil = src / "evil-1.0-py3-none-any.whl"
    evil.symlink_to(keys[0].private)
    out = tmp_path / "out"
    code, doc, _ = run_mirror(src, out, keys[0], "--pass-through-failures")
    assert code == 2  # an input.* failure: unusable input, as on every command
    (result,) = [w for w in doc["wheels"] if w["filename"] == evil.name]
    assert result["error"]["code"] == "input.symlink" and result["served"] is False
    assert not os.path.lexists(out / evil.name) and "evil" not in served(out)
    assert "evil" not in (out / "simple" / "index.html").read_text()
    assert secret not in tree_bytes(out)
    # the link retargeted at a real wheel of the tree is refused the same way: a link is no source
    evil.unlink()
    evil.symlink_to(next(p for p in src.iterdir() if p.name.startswith("plain_helper")))
    code, doc, _ = run_mirror(src, out, keys[0], "--pass-through-failures")
    assert {w["filename"]: w["error"]["code"] for w in doc["wheels"] if w["error"]}[evil.name] == "input.symlink"


def test_simple_index_link_to_a_symlink_is_refused(src: Path, keys: tuple[Keypair, Keypair], tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    (tree / "simple" / "evil").mkdir(parents=True)
    (tree / "evil-1.0-py3-none-any.whl").symlink_to(keys[0].private)
    (tree / "simple" / "evil" / "index.html").write_text('<a href="../../evil-1.0-py3-none-any.whl">e</a>\n')
    code, doc, _ = run_mirror(tree, tmp_path / "out", keys[0], "--pass-through-failures")
    assert code == 2
    (result,) = doc["wheels"]
    assert result["error"]["code"] == "input.symlink" and not result["served"]
    assert keys[0].private.read_bytes() not in tree_bytes(tmp_path / "out")


def test_migrate_refuses_a_symlinked_wheel(wheels: dict[str, Path], keys: tuple[Keypair, Keypair],
                                          tmp_path: Path) -> None:
    link = tmp_path / "in" / wheels["backend"].name
    link.parent.mkdir()
    link.symlink_to(wheels["backend"])
    for given in (link, link.parent):
        proc = run_cli("migrate", str(given), "-o", str(tmp_path / "o"), "--key", str(keys[0].private), "--json")
        assert proc.returncode == 2 and "Traceback" not in proc.stderr
        assert [w["error"]["code"] for w in json.loads(proc.stdout)["wheels"]] == ["input.symlink"]
    assert not (tmp_path / "o" / link.name).exists()


# --- kills ----------------------------------------------------------------------------------

KILL = """
import os, signal, sys
from pathlib import Path
from backend_packager.commands import mirror
from backend_packager.manifest import signing
at = sys.argv[4]
def step(name):
    if name == at:
        os.kill(os.getpid(), signal.SIGKILL)
def done(path, result):
    if at == "wheel" and result.status == "migrated":
        os.kill(os.getpid(), signal.SIGKILL)
mirror.mirror([Path(sys.argv[1])], Path(sys.argv[2]), signing.load(Path(sys.argv[3])), jobs=2,
              hooks=mirror.Hooks(step=step, done=done))
"""


@pytest.fixture(scope="module")
def replaced(wheels: dict[str, Path], keys: tuple[Keypair, Keypair],
             tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str], dict[str, str]]:
    """A mirror signed with the first key, its index (before) and, made once in a copy, the
    index a complete run with the second key and one changed input serves (after): every
    migrated wheel is replaced under its own name."""
    base = tmp_path_factory.mktemp("replaced")
    source = base / "src"
    source.mkdir()
    for wheel in wheels.values():
        shutil.copy2(wheel, source / wheel.name)
    out = base / "out"
    run_mirror(source, out, keys[0])
    before = served(out)
    rezip(wheels["pure"], source / wheels["pure"].name, lambda m: m.update({"plain_helper/extra.py": b"X = 2\n"}))
    reference = base / "reference"
    shutil.copytree(out, reference, symlinks=True)
    run_mirror(source, reference, keys[1])
    after = served(reference)
    assert set(after) == set(before) and all(after[name] != before[name] for name in after)
    return out, before, after


@pytest.mark.parametrize("at", ["wheel", "worked", "generation", "swapped", "placed", "state"])
def test_killed_at_each_stage_serves_the_old_index_or_the_new(
        at: str, replaced: tuple[Path, dict[str, str], dict[str, str]], keys: tuple[Keypair, Keypair],
        tmp_path: Path) -> None:
    """SIGKILL at each stage of a run that replaces every served wheel (a new key, a changed
    input): the index served is the previous one or the new one, complete, never one that
    names fewer wheels; the next run finishes the job."""
    pristine, before, after = replaced
    out = tmp_path / "out"
    shutil.copytree(pristine, out, symlinks=True)
    source = pristine.parent / "src"
    killed = subprocess.run([sys.executable, "-c", KILL, str(source), str(out), str(keys[1].private), at],
                            capture_output=True, text=True)
    assert killed.returncode == -9, killed.stderr
    now = served(out)
    expected = after if at in ("swapped", "placed", "state") else before
    assert now == expected
    code, doc, _ = run_mirror(source, out, keys[1])
    assert code == 1 and served(out) == after  # the broken wheel fails on every run
    assert {name: sha(out / name) for name in after} == after  # the outputs are the served files
    assert len(list((out / mirrorindex.GENERATIONS).iterdir())) == 1
    assert not (out / mirror.STAGING_DIR).exists()


# --- the lock --------------------------------------------------------------------------------

HOLD = """
import sys
from pathlib import Path
from backend_packager.commands import mirror
from backend_packager.manifest import signing
def step(name):
    if name == "worked":
        print("holding", flush=True)
        sys.stdin.readline()
run = mirror.mirror([Path(sys.argv[1])], Path(sys.argv[2]), signing.load(Path(sys.argv[3])),
                    hooks=mirror.Hooks(step=step))
print(run.counts()["migrated"], flush=True)
"""


def test_deleting_files_does_not_release_the_lock(src: Path, keys: tuple[Keypair, Keypair], tmp_path: Path) -> None:
    """A run holds the lock on the output directory itself: deleting every dot file of the
    output directory (an old lock file, the staging) lets no second run in."""
    out = tmp_path / "out"
    out.mkdir()
    (out / ".mirror.lock").write_text("")  # what an earlier version locked
    first = subprocess.Popen([sys.executable, "-c", HOLD, str(src), str(out), str(keys[0].private)],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert first.stdout is not None and first.stdin is not None
    try:
        assert first.stdout.readline() == "holding\n"  # handshake: the first run is inside its lock
        for entry in out.iterdir():
            if entry.name.startswith(".") and not entry.is_dir():
                entry.unlink()
        busy = run_cli("mirror", str(src), "-o", str(out), "--key", str(keys[0].private), "--no-wait")
        assert busy.returncode == 2 and "(mirror.busy)" in busy.stderr
        first.stdin.write("go\n")
        first.stdin.flush()
        assert first.stdout.readline() == "1\n"
    finally:
        first.communicate(timeout=120)
    assert first.returncode == 0
    _, doc, _ = run_mirror(src, out, keys[0])
    assert doc["summary"] == {"migrated": 0, "unchanged": 2, "copied": 0, "failed": 1}
    assert len(served(out)) == 2


# --- bad links ------------------------------------------------------------------------------


def test_bad_links_fail_alone(src: Path, wheels: dict[str, Path], keys: tuple[Keypair, Keypair],
                              tmp_path: Path) -> None:
    """A NUL byte (raw and percent-encoded), bad percent-encoding, an overlong href, a control
    character, a backslash, an escape and a directory symlink out of the tree each fail that
    link; the good links of the index are mirrored."""
    tree = tmp_path / "tree"
    (tree / "simple" / "plain-helper").mkdir(parents=True)
    (tree / "simple" / "bad").mkdir()
    good = wheels["pure"].name
    shutil.copy2(wheels["pure"], tree / good)
    (tree / "simple" / "plain-helper" / "index.html").write_text(f'<a href="../../{good}">g</a>\n')
    hrefs = ["../../a\0-1.0-py3-none-any.whl", "../../b%00-1.0-py3-none-any.whl", "../../c%ff-1.0-py3-none-any.whl",
             "../../" + "d" * 10_000 + "-1.0-py3-none-any.whl", "../../e\x01-1.0-py3-none-any.whl",
             "..\\..\\f-1.0-py3-none-any.whl", "../../%2e%2e/g-1.0-py3-none-any.whl", "/etc/h-1.0-py3-none-any.whl",
             "../../missing-1.0-py3-none-any.whl", "out/" + good.replace("-1.0-", "-9.9-")]
    elsewhere = tmp_path / "elsewhere"  # a directory link out of the tree, to a wheel
    elsewhere.mkdir()
    shutil.copy2(wheels["pure"], elsewhere / good.replace("-1.0-", "-9.9-"))
    (tree / "simple" / "bad" / "out").symlink_to(elsewhere, target_is_directory=True)
    (tree / "simple" / "bad" / "index.html").write_text("".join(f'<a href="{h}">x</a>\n' for h in hrefs))
    code, doc, stderr = run_mirror(tree, tmp_path / "out", keys[0])
    assert code == 1 and "error.internal" not in stderr
    codes = [w["error"]["code"] for w in doc["wheels"] if w["error"]]
    assert len(codes) == len(hrefs) and all(c.startswith("mirror.") for c in codes), codes
    assert statuses(doc)[good] == "copied" and set(served(tmp_path / "out")) == {good}


@pytest.mark.parametrize("page", ["index.json", "index.html"])
def test_a_page_cannot_take_another_projects_wheel(page: str, wheels: dict[str, Path], keys: tuple[Keypair, Keypair],
                                                   tmp_path: Path) -> None:
    """A tenant's project page (sorting first) links a file of its own named like another
    project's wheel: that link fails (``mirror.source``) and takes no part in choosing which
    file serves the name; the real project's wheel is mirrored, its own bytes."""
    name = wheels["pure"].name
    simple = tmp_path / "tree" / "simple"
    for project, wheel in (("plain-helper", wheels["pure"]), ("aaa-tenant", wheels["backend"])):
        (simple / project).mkdir(parents=True)
        shutil.copy2(wheel, simple / project / name)
        files = [{"filename": name, "url": name, "hashes": {"sha256": sha(wheel)}}]
        (simple / project / page).write_text(json.dumps({"meta": {"api-version": "1.1"}, "files": files})
                                             if page == "index.json" else f'<a href="{name}">{name}</a>\n')
    code, doc, _ = run_mirror(tmp_path / "tree", tmp_path / "out", keys[0])
    assert code == 1
    rows = sorted((w["status"], (w["error"] or {}).get("code"), "aaa-tenant" in w["source"]) for w in doc["wheels"])
    assert rows == [("copied", None, False), ("failed", "mirror.source", True)], doc["wheels"]
    assert "plain-helper" in str(doc["wheels"]) and served(tmp_path / "out") == {name: sha(wheels["pure"])}
    assert (tmp_path / "out" / name).read_bytes() == wheels["pure"].read_bytes()


# --- a served wheel rewritten in place --------------------------------------------------------


@pytest.mark.parametrize("which", ["backend", "pure"])
def test_rewritten_in_place_is_redone(which: str, src: Path, wheels: dict[str, Path], keys: tuple[Keypair, Keypair],
                                      tmp_path: Path) -> None:
    """A served wheel rewritten in place, keeping its size, its mtime set back: the next run
    sees a new ctime, redoes it, and the index gives the sha256 of what is served."""
    out = tmp_path / "out"
    run_mirror(src, out, keys[0])
    name = wheels[which].name
    target = out / name
    info = target.stat()
    with target.open("r+b") as stream:
        stream.seek(info.st_size // 2)
        byte = stream.read(1)
        stream.seek(info.st_size // 2)
        stream.write(bytes([byte[0] ^ 0xFF]))
    os.utime(target, ns=(info.st_atime_ns, info.st_mtime_ns))
    assert target.stat().st_size == info.st_size and target.stat().st_mtime_ns == info.st_mtime_ns
    _, doc, _ = run_mirror(src, out, keys[0])
    assert statuses(doc)[name] == ("migrated" if which == "backend" else "copied")
    assert served(out)[name] == sha(target) == sha(out / "simple" / doc_project(doc, name) / name)
    _, doc, _ = run_mirror(src, out, keys[0])
    assert statuses(doc)[name] == "unchanged"


def doc_project(doc: dict[str, Any], name: str) -> str:
    return str(next(w["project"] for w in doc["wheels"] if w["filename"] == name))


# --- the layout before generations ------------------------------------------------------------


def test_an_index_directory_is_replaced_by_the_served_link(src: Path, keys: tuple[Keypair, Keypair],
                                                          tmp_path: Path) -> None:
    """A mirror whose ``simple`` is a plain directory (as written before generations) is
    served by a generation after the next run (exchanged in one rename where the kernel can)."""
    out = tmp_path / "out"
    run_mirror(src, out, keys[0])
    generation = (out / "simple").resolve()
    (out / "simple").unlink()
    shutil.copytree(generation, out / "simple")
    shutil.rmtree(out / mirrorindex.GENERATIONS)
    old = served(out)
    _, doc, _ = run_mirror(src, out, keys[0])
    assert (out / "simple").is_symlink() and served(out) == old
    assert not (out / mirrorindex.NEXT_LINK).exists() and not (out / mirrorindex.OLD_DIR).exists()


def test_a_run_that_fails_leaves_no_staging(src: Path, keys: tuple[Keypair, Keypair], tmp_path: Path) -> None:
    """Whatever ends a run before it publishes (here a hook that raises) removes what it staged."""
    from backend_packager.commands import mirror
    from backend_packager.manifest import signing

    def start(paths: list[Path]) -> None:
        raise OSError(28, "No space left on device")

    out = tmp_path / "out"
    with pytest.raises(OSError):
        mirror.mirror([src], out, signing.load(keys[0].private), hooks=mirror.Hooks(start=start))
    assert not (out / mirror.STAGING_DIR).exists()
