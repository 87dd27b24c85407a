"""``doctor`` says what ``import triton`` did, in the same process shape, both ways.

A real interpreter start-up (:mod:`helpers.hookvenv`) with a signed Triton core in its site.
Each state is made, then ``import triton`` is run and ``doctor`` is run, and what doctor
prints (text and ``--json``) must agree with what the import did.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from helpers.csrc import ElfFixtures, gcc
from helpers.disttree import Dist, TrustEnv, write_dist, write_record
from helpers.hookvenv import HookVenv as Venv
from helpers.hookvenv import make_hook_venv
from helpers.renamed import BASE_COMPILER, BASE_DRIVER, backends_init
from triton_backend_runtime.manifest import model as m

IMPORT = "import triton\nprint('imported')\n"
ISSUER = "https://token.actions.githubusercontent.com"
REPO = "https://github.com/vendor/backend/.github/workflows/release.yml@refs/tags/v1"
#: A Triton of the 2.x era: a core with no ``triton.backends``.
CORE_2X = {"triton/__init__.py": b"__version__ = '2.3.1'\nfrom . import compiler\n", "triton/compiler.py": b"x = 1\n"}


def installed(dist: Dist, env: TrustEnv) -> Dist:
    """Signed, with the RECORD an installer writes."""
    dist.sign(env.key)
    write_record(dist)
    return dist


@pytest.fixture()
def venv(tmp_path: Path) -> Venv:
    return make_hook_venv(tmp_path / "venv")


def test_a_refused_core_is_enforcement_not_an_unenforced_policy(venv: Venv, env: TrustEnv) -> None:
    installed(write_dist(venv.site, "triton", "2.3.1", backends={}, files=CORE_2X), env)
    (venv.site / "triton" / "compiler.py").write_bytes(b"1/0  \n")  # the size it had: caught by its hash
    imported = venv.run("-c", IMPORT)
    assert imported.returncode == 1 and "ZeroDivisionError" not in imported.stderr
    assert "(verify.sha256)" in imported.stderr.strip().splitlines()[-1]
    text, doc = venv.doctor()
    assert text.returncode == 1
    assert "strict refused import triton: verify.sha256 " in text.stdout
    assert "not enforced" not in text.stdout and "hook install`" not in text.stdout
    assert doc["enforced"] is True and doc["healthy"] is False
    assert doc["import"]["refused"]["code"] == "verify.sha256" and doc["import"]["core_checked"] is True


def test_a_triton_without_a_backend_registry_is_verified_by_the_hook(venv: Venv, env: TrustEnv) -> None:
    """The 2.x era: no triton.backends. The core is what is verified; exit 0 when it is."""
    installed(write_dist(venv.site, "triton", "2.3.1", backends={}, files=CORE_2X), env)
    assert venv.run("-c", IMPORT).stdout == "imported\n"
    text, doc = venv.doctor()
    assert text.returncode == 0, text.stdout
    assert "no backend registry in this Triton (before 3.0): the core is verified by the .pth hook" in text.stdout
    assert "not enforced" not in text.stdout
    assert (doc["healthy"], doc["enforced"], doc["import"]["no_registry"]) == (True, True, True)
    # without the hook nothing checks the core: that is not enforced, and doctor says so
    assert venv.run("-m", "triton_backend_runtime", "hook", "uninstall").returncode == 0
    text, doc = venv.doctor()
    assert text.returncode == 1 and "policy strict is not enforced" in text.stdout
    assert "the core is not checked (no .pth hook)" in text.stdout
    assert (doc["healthy"], doc["enforced"]) == (False, False)


def test_a_bundled_plugin_its_own_libtriton_cannot_serve_is_a_note(
    venv: Venv, env: TrustEnv, elf_files: ElfFixtures, tmp_path: Path
) -> None:
    """Safe and beyond the user's reach: never loaded, never handed over; exit 0, no warning."""
    source = tmp_path / "libtriton.c"
    source.write_text("int triton_version_major(void) { return 3; }\n")  # not the plugin's symbol
    libtriton = gcc(tmp_path / "libtriton.so", str(source))
    files: dict[str, bytes | Path] = {
        "triton/__init__.py": b"__version__ = '3.9.0'\n", "triton/_C/libtriton.so": libtriton,
        "triton/plugins/libdemo_plugin.so": elf_files.plugin_v2,
        "triton/backends/__init__.py": backends_init("triton.backends").encode(),
        "triton/backends/compiler.py": BASE_COMPILER.encode(), "triton/backends/driver.py": BASE_DRIVER.encode(),
    }
    installed(write_dist(venv.site, "triton", "3.9.0", backends={}, files=files), env)
    imported = venv.run("-c", "import triton.backends\nprint('imported')\n")
    assert imported.stdout == "imported\n" and "BackendWarning" not in imported.stderr, imported.stderr
    text, doc = venv.doctor()
    (row,) = doc["plugins"]
    assert row["reason"]["code"] == "verify.symbols" and row["trust"] == "rejected"
    assert "whose own libtriton.so cannot serve it: it is never loaded, and nothing needs doing" in text.stdout
    assert "ATTENTION" not in text.stdout


def test_upstream_identities_are_shown_as_checked_only_under_a_trusted_signature(venv: Venv, env: TrustEnv) -> None:
    """``provenance.upstream`` is what the manifest's signer says it checked: as good as that
    signature. A hash-only manifest's is anyone's claim, never shown (nor listed) as checked."""
    def upstream(identity: str) -> Callable[[m.Manifest], None]:
        def edit(manifest: m.Manifest) -> None:
            manifest.provenance.upstream = [m.UpstreamIdentity(ISSUER, identity)]
        return edit

    signed = write_dist(venv.site, "good-backend", backends={"good": "good_backend"})
    signed.sign(env.key, edit=upstream(f"{REPO}/good"))
    write_record(signed)
    unsigned = write_dist(venv.site, "bad-backend", backends={"bad": "bad_backend"})
    unsigned.sign(edit=upstream(f"{REPO}/bad"))
    write_record(unsigned)
    text, doc = venv.doctor(policy="warn")
    rows = {row["name"]: row for row in doc["backends"]}
    assert (rows["good"]["trust"], rows["bad"]["trust"]) == ("verified", "unverified")
    assert f"upstream: {REPO}/good (issuer {ISSUER}, pep740: checked before the mirror re-signed it)" in text.stdout
    assert f"{REPO}/bad" not in text.stdout and rows["bad"]["upstream"] == []
