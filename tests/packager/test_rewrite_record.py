"""``migrate --rewrite-record``: a legacy wheel whose RECORD or file-name
tags disagree with its contents. pip installs such wheels; ``migrate`` refuses them, naming
the flag, and with the flag migrates them from their contents: every discrepancy listed (plain
and ``--json``), recorded in the manifest's provenance, RECORD and the file name rewritten, and
``backend-packager verify`` passes on the output.
"""

from __future__ import annotations

import base64
import hashlib
import json
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from helpers.cli import migrate, run_cli
from helpers.projects import Keypair, keygen
from helpers.wheels import backend_files, write_wheel
from triton_backend_runtime.manifest import model as m

from backend_packager.base.errors import WheelError
from backend_packager.manifest import contents as assemble
from backend_packager.rewrite import rewrite_wheel
from backend_packager.wheel.reader import WheelContents

PACKAGE = "recdemo_backend"
Edit = Callable[[list[str]], list[str]]


def record_hash(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


@pytest.fixture(scope="module")
def key(tmp_path_factory: pytest.TempPathFactory) -> Keypair:
    return keygen(tmp_path_factory.mktemp("keys"), "rewrite-record")


@pytest.fixture(scope="module")
def good(tmp_path_factory: pytest.TempPathFactory) -> Path:
    files = {**backend_files(PACKAGE, "RecDemo", "recdemo"), f"{PACKAGE}/data.txt": b"kept as it is\n"}
    return write_wheel(tmp_path_factory.mktemp("good"), "recdemo-backend", "1.0", files, {"recdemo": PACKAGE})


def with_record(src: Path, dst: Path, edit: Edit) -> Path:
    """A copy of ``src`` with its RECORD rows edited, every member otherwise the same."""
    with zipfile.ZipFile(src) as archive:
        members = {name: archive.read(name) for name in archive.namelist()}
    record = next(n for n in members if n.endswith(".dist-info/RECORD"))
    members[record] = "".join(f"{row}\n" for row in edit(members[record].decode().splitlines())).encode()
    dst.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(dst, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return dst


def wrong_hash(rows: list[str]) -> list[str]:
    return [f"{PACKAGE}/compiler.py,{record_hash(b'not this')},{r.rsplit(',', 1)[1]}"
            if r.startswith(f"{PACKAGE}/compiler.py,") else r for r in rows]


def missing_row(rows: list[str]) -> list[str]:
    return [r for r in rows if not r.startswith(f"{PACKAGE}/driver.py,")]


def extra_row(rows: list[str]) -> list[str]:
    return [*rows, f"{PACKAGE}/gone.py,{record_hash(b'x = 1')},5"]


def other_tags(src: Path, dst_dir: Path) -> Path:
    """The same bytes under a file name whose tags are not WHEEL's."""
    dst_dir.mkdir(parents=True, exist_ok=True)
    stem, version = src.name.split("-")[:2]
    dst = dst_dir / f"{stem}-{version}-py3-none-any.whl"
    dst.write_bytes(src.read_bytes())
    return dst


def make_case(label: str, good: Path, tmp: Path) -> tuple[Path, list[tuple[str, str]]]:
    """(wheel, [(code, path)] expected) for one kind of disagreement, or all of them."""
    d = tmp / label
    if label == "hash":
        return with_record(good, d / good.name, wrong_hash), [("record.mismatch", f"{PACKAGE}/compiler.py")]
    if label == "missing":
        return with_record(good, d / good.name, missing_row), [("record.unlisted", f"{PACKAGE}/driver.py")]
    if label == "extra":
        return with_record(good, d / good.name, extra_row), [("record.absent", f"{PACKAGE}/gone.py")]
    if label == "tags":
        wheel = other_tags(good, d)
        return wheel, [("wheel.tags", wheel.name)]
    every = with_record(good, tmp / "all-record" / good.name, lambda rows: extra_row(missing_row(wrong_hash(rows))))
    wheel = other_tags(every, d)
    return wheel, [("record.mismatch", f"{PACKAGE}/compiler.py"), ("record.unlisted", f"{PACKAGE}/driver.py"),
                   ("record.absent", f"{PACKAGE}/gone.py"), ("wheel.tags", wheel.name)]


def manifest_of(wheel: Path) -> dict[str, Any]:
    doc = json.loads(run_cli("inspect", "--json", str(wheel)).stdout)
    manifest: dict[str, Any] = doc["wheels"][0]["manifest"]
    return manifest


CASES = ["hash", "missing", "extra", "tags", "all"]


@pytest.mark.parametrize("label", CASES)
def test_refused_without_the_flag_naming_it(label: str, good: Path, key: Keypair, tmp_path: Path) -> None:
    wheel, expected = make_case(label, good, tmp_path)
    run = migrate(wheel, tmp_path / "out", key, "--json")
    code, outcome = run.returncode, run.outcome
    assert code == 1
    assert outcome["error"]["code"] == "wheel.record"
    assert "--rewrite-record" in outcome["error"]["message"]
    assert [(d["code"], d["path"]) for d in outcome["discrepancies"]] == expected
    assert outcome["repaired"] is False
    assert list((tmp_path / "out").iterdir()) == []
    run = migrate(wheel, tmp_path / "plain", key)
    code, stderr = run.returncode, run.stderr
    (line,) = stderr.splitlines()
    assert code == 1 and "--rewrite-record" in line and all(path in line for _, path in expected)


@pytest.mark.parametrize("label", CASES)
def test_migrated_with_the_flag_from_the_contents(label: str, good: Path, key: Keypair, tmp_path: Path) -> None:
    wheel, expected = make_case(label, good, tmp_path)
    run = migrate(wheel, tmp_path / "out", key, "--json", "--rewrite-record")
    code, outcome = run.returncode, run.outcome
    assert code == 0, outcome
    assert outcome["repaired"] is True and outcome["backends"] == ["recdemo"]
    assert [(d["code"], d["path"]) for d in outcome["discrepancies"]] == expected
    out = Path(outcome["output"])
    assert out.name == good.name  # the file name's tags are WHEEL's again
    provenance = manifest_of(out)["provenance"]
    repairs = provenance["repairs"]
    assert [(r["code"], r["path"]) for r in repairs] == expected
    assert provenance["source_sha256"] == hashlib.sha256(wheel.read_bytes()).hexdigest()
    assert all(r["detail"] for r in repairs)
    proc = run_cli("verify", str(out), "--trust", str(key.public))
    assert proc.returncode == 0 and proc.stdout.startswith("OK"), proc.stdout
    with zipfile.ZipFile(out) as archive:
        record = archive.read("recdemo_backend-1.0.dist-info/RECORD").decode()
        assert f"{PACKAGE}/gone.py" not in record and f"{PACKAGE}/driver.py," in record
        assert archive.read(f"{PACKAGE}/data.txt") == b"kept as it is\n"
    run = migrate(wheel, tmp_path / "plain", key, "--rewrite-record")
    code, stderr = run.returncode, run.stderr
    repaired = [line for line in stderr.splitlines() if line.startswith("backend-packager: repaired:")]
    assert code == 0 and len(repaired) == len(expected)
    assert all(c in line and p in line for (c, p), line in zip(expected, repaired, strict=True))


def test_hash_only_without_a_key_too(good: Path, tmp_path: Path) -> None:
    wheel, expected = make_case("all", good, tmp_path)
    proc = run_cli("migrate", str(wheel), "-o", str(tmp_path / "out"), "--rewrite-record", "--json")
    outcome = json.loads(proc.stdout)["wheels"][0]
    assert proc.returncode == 0 and outcome["signed_by"] is None, proc.stdout
    assert [(r["code"], r["path"]) for r in manifest_of(tmp_path / "out" / good.name)["provenance"]["repairs"]] \
        == expected


def test_a_clean_wheel_records_no_repairs(good: Path, key: Keypair, tmp_path: Path) -> None:
    run = migrate(good, tmp_path, key, "--json", "--rewrite-record")
    code, outcome = run.returncode, run.outcome
    assert code == 0 and outcome["discrepancies"] == [] and outcome["repaired"] is False
    provenance = manifest_of(tmp_path / good.name)["provenance"]
    assert (provenance["repairs"], provenance["source_sha256"]) == ([], None)


def test_the_flag_does_not_cover_a_wrong_name_or_version(good: Path, key: Keypair, tmp_path: Path) -> None:
    wheel = with_record(good, tmp_path / "bad" / good.name.replace("-1.0-", "-2.0-"), wrong_hash)
    run = migrate(wheel, tmp_path / "out", key, "--json", "--rewrite-record")
    code, outcome = run.returncode, run.outcome
    assert code == 1 and outcome["error"]["code"] == "wheel.name-mismatch"


def test_wheel_tags_no_file_name_can_carry(good: Path, key: Keypair, tmp_path: Path) -> None:
    """WHEEL's tags must be one compressed tag set (py x abi x platform) to name the output."""
    def two_tags(src: Path, dst: Path) -> Path:
        with zipfile.ZipFile(src) as archive:
            members = {name: archive.read(name) for name in archive.namelist()}
        meta = next(n for n in members if n.endswith(".dist-info/WHEEL"))
        members[meta] = members[meta].replace(b"Tag: ", b"Tag: cp399-cp399-linux_x86_64\nTag: ", 1)
        record = next(n for n in members if n.endswith(".dist-info/RECORD"))
        rows = [f"{n},{record_hash(d)},{len(d)}" for n, d in members.items() if n != record]
        members[record] = ("\n".join([*rows, f"{record},,"]) + "\n").encode()
        dst.parent.mkdir(parents=True, exist_ok=True)
        with zipfile.ZipFile(dst, "w", zipfile.ZIP_DEFLATED) as archive:
            for name, data in members.items():
                archive.writestr(name, data)
        return dst

    wheel = two_tags(good, tmp_path / "two" / good.name)
    run = migrate(wheel, tmp_path / "out", key, "--json", "--rewrite-record")
    code, outcome = run.returncode, run.outcome
    assert code == 1 and outcome["error"]["code"] == "wheel.tags", outcome
    assert list((tmp_path / "out").iterdir()) == []


def _plan(repairs: list[m.Repair]) -> Callable[[WheelContents], assemble.Injection]:
    def plan(contents: WheelContents) -> assemble.Injection:
        found = assemble.find_backends(contents)
        return assemble.describe(contents, found.backends, found.entry_points,
                                 requirements=m.Requirements(triton=""),
                                 provenance=m.Provenance("migrate", None, repairs=repairs), epoch=None)
    return plan


def test_the_rewrite_signs_only_what_the_plan_records(good: Path, tmp_path: Path) -> None:
    """Whatever the plan (the build hook's records nothing), a disagreeing input is not signed
    unless its provenance lists exactly the discrepancies."""
    wheel, _ = make_case("hash", good, tmp_path)
    for label, repairs in (("silent", []), ("other", [m.Repair("record.absent", f"{PACKAGE}/x.py", "made up")])):
        with pytest.raises(WheelError) as err:
            rewrite_wheel(wheel, tmp_path / label, _plan(repairs), None)
        assert err.value.code == "wheel.record" and err.value.path.endswith(f"!{PACKAGE}/compiler.py")
        assert list((tmp_path / label).iterdir()) == []


def test_resigning_keeps_the_recorded_repairs(good: Path, key: Keypair, tmp_path: Path) -> None:
    """A repaired wheel re-signed later (after auditwheel repair, say) keeps its provenance:
    the repairs and the sha256 of the input they were made to."""
    wheel, expected = make_case("all", good, tmp_path)
    assert migrate(wheel, tmp_path / "first", key, "--rewrite-record").returncode == 0
    first = manifest_of(tmp_path / "first" / good.name)["provenance"]
    run = migrate(tmp_path / "first" / good.name, tmp_path / "again", key, "--json")
    code, outcome = run.returncode, run.outcome
    assert code == 0 and outcome["status"] == "re-signed" and outcome["discrepancies"] == []
    again = manifest_of(tmp_path / "again" / good.name)["provenance"]
    assert again == first and [(r["code"], r["path"]) for r in again["repairs"]] == expected


def test_discrepancies_are_exactly_the_edits() -> None:
    """records.discrepancies, over any wheel and any edits to its RECORD: each edited row
    is reported once, with its code, and nothing else is."""
    from hypothesis import given, settings
    from hypothesis import strategies as st

    from backend_packager.formats import records

    names = st.lists(st.from_regex(r"[a-z]{1,6}/[a-z]{1,6}\.py", fullmatch=True), min_size=1, max_size=12, unique=True)

    @settings(max_examples=200, deadline=None)
    @given(names, st.data())
    def check(paths: list[str], data: st.DataObject) -> None:
        seen = {p: (hashlib.sha256(p.encode()).hexdigest(), len(p)) for p in paths}
        record = {p: records.RecordRow(p, sha, size) for p, (sha, size) in seen.items()}
        expected: dict[str, str] = {}
        for path in paths:
            edit = data.draw(st.sampled_from(["none", "hash", "size", "drop"]))
            if edit == "hash":
                record[path] = records.RecordRow(path, "0" * 64, seen[path][1])
            elif edit == "size":
                record[path] = records.RecordRow(path, seen[path][0], seen[path][1] + 1)
            elif edit == "drop":
                del record[path]
            if edit != "none":
                expected[path] = "record.unlisted" if edit == "drop" else "record.mismatch"
        for extra in data.draw(st.lists(st.sampled_from(["x/gone.py", "y/gone.py"]), unique=True)):
            record[extra] = records.RecordRow(extra, "1" * 64, 1)
            expected[extra] = "record.absent"
        found = records.discrepancies(record, seen, set(paths))
        assert {d.path: d.code for d in found} == expected and len(found) == len(expected)

    check()
