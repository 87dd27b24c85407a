"""The load side without the Triton wheel: one test per reason code, on real signed trees.

Every distribution here is a dist-info tree in ``tmp_path`` (``helpers.disttree``) whose
manifest is a real DSSE envelope over a real in-toto statement, signed with a real Ed25519
key; the production code is called directly: ``discovery.discover``, ``verify_distribution``
and ``Registry.load``. Each case changes one thing in a tree that verifies (see the
``baseline`` tests), so each can fail. Codes are asserted, not prose.
"""

from __future__ import annotations

import base64
import hashlib
import importlib.util
import json
import marshal
import os
import py_compile
import shutil
import signal
import subprocess
import sys
import types
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest
from helpers.csrc import ElfFixtures, gcc
from helpers.disttree import (
    Dist,
    Loaded,
    TrustEnv,
    codes,
    entry,
    import_loader,
    make_key,
    statement_of,
    write_dist,
)
from triton_backend_runtime.base.errors import SelectionError
from triton_backend_runtime.manifest import model as m
from triton_backend_runtime.site.installed import HashCache
from triton_backend_runtime.triton import selection
from triton_backend_runtime.trust import dsse
from triton_backend_runtime.verification import distribution as runtime_verify
from triton_backend_runtime.verification import dynsym, unlisted
from triton_backend_runtime.verification.distribution import Context, verify_distribution

from backend_packager.scanning.artifacts import artifact_from_file

pytestmark = pytest.mark.filterwarnings("ignore::triton_backend_runtime.loading.registry.BackendWarning")

# -- fixtures ------------------------------------------------------------------------------


@pytest.fixture(autouse=True)
def _forget_imported_backends(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Backends imported by a test leave ``sys.modules``: the next test's tree is elsewhere.
    (Only modules from temporary trees: others, such as cryptography's, must stay.)"""
    base = str(tmp_path_factory.getbasetemp())
    before = set(sys.modules)
    yield
    for name in set(sys.modules) - before:
        module = sys.modules.get(name)
        where = getattr(module, "__file__", None) or next(iter(getattr(module, "__path__", []) or []), "")
        if str(where).startswith(base):
            sys.modules.pop(name, None)


@contextmanager
def deadline(seconds: int) -> Iterator[None]:
    """Fail instead of hanging (a FIFO opened for reading blocks without O_NONBLOCK)."""
    def expired(signum: int, frame: Any) -> None:
        raise TimeoutError(f"still running after {seconds} s")

    previous = signal.signal(signal.SIGALRM, expired)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


# -- baselines: the trees the cases below change one thing of -------------------------------


def test_baseline_verifies(env: TrustEnv, site: Path) -> None:
    dist = write_dist(site)
    dist.sign(env.key)
    verdict = env.verify(dist)
    assert (verdict.status, verdict.problem, verdict.coverage) == ("verified", None, "all")
    assert verdict.signers == [f"{env.key.keyid} vendor"]
    assert [(b.name, b.package) for b in verdict.backends] == [("demo", "demo_backend")]


def test_baseline_loads_under_strict(env: TrustEnv, site: Path) -> None:
    dist = write_dist(site)
    dist.sign(env.key)
    reg = env.registry(site, policy="strict", loader=import_loader)
    demo = entry(reg, "demo")
    assert (demo.trust, demo.state, demo.reason) == ("verified", "loaded", None)
    assert reg.result is not None and reg.result["demo"].__name__ == "demo_backend.compiler"
    assert reg.problems == [] and reg.notes == [] and reg.healthy()
    row = reg.report().to_dict()["backends"][0]
    assert (row["distribution"], row["trust"], row["state"], row["coverage"]) == (
        "demo-backend", "verified", "loaded", "all")


def test_baseline_hash_only_is_unverified(env: TrustEnv, site: Path) -> None:
    dist = write_dist(site)
    dist.sign()
    verdict = env.verify(dist)
    assert (verdict.status, verdict.problem) == ("unverified", None)
    assert "not signed" in verdict.note


def test_baseline_plugin_with_its_symbols_verifies(env: TrustEnv, site: Path, elf_files: ElfFixtures,
                                                   tmp_path: Path) -> None:
    dist = write_dist(site, files={"demo_backend/lib/libdemo_plugin.so": elf_files.plugin_v2})
    dist.sign(env.key)
    verdict = env.verify(dist, env.context("3.9.0", str(fake_libtriton(tmp_path, True))))
    assert (verdict.status, verdict.problem) == ("verified", None)
    assert [p.path for p in verdict.plugins] == ["demo_backend/lib/libdemo_plugin.so"]


BYTECODE_PROBE = """
import json, sys
import triton_backend_runtime.autohook as hook
hook.install()
from triton_backend_runtime.loading import registry
from triton_backend_runtime.triton import importwatch, integration
registry.get().verify()
integration.guard_sources(registry.get())  # as the core check does before triton/__init__ runs
import demo_backend.compiler as compiler
print(json.dumps({"ran": getattr(compiler, "RAN", "verified source"), "guarded": sorted(importwatch._guarded)}))
"""


@pytest.mark.parametrize("stage", ["cold", "warm"])
def test_a_pyc_beside_a_verified_source_never_runs(env: TrustEnv, site: Path, stage: str) -> None:
    """Bytecode is not used: with the hook, a verified module runs its verified source's code
    (from the runtime's own store on a warm start), never the pyc Python would take."""
    dist = write_dist(site)
    dist.sign(env.key)
    source = dist.file("demo_backend/compiler.py")
    _pyc(source, compile(source.read_text() + "\nRAN = 'tampered pyc'\n", str(source), "exec"))
    run_env = {**os.environ, "PYTHONPATH": str(site),
               "TRITON_BACKEND_POLICY": "strict"}
    runs = 2 if stage == "warm" else 1
    for _ in range(runs):
        done = subprocess.run([sys.executable, "-c", BYTECODE_PROBE], env=run_env, capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result == {"ran": "verified source", "guarded": ["demo_backend"]}
    assert list((env.cache / "bytecode").glob("*.pyc")), "the verified code was not stored"


def test_a_source_changed_after_verification_is_not_imported(env: TrustEnv, site: Path) -> None:
    dist = write_dist(site)
    dist.sign(env.key)
    code = BYTECODE_PROBE.replace("registry.get().verify()\n", "registry.get().verify()\n"
                                  f"open({str(dist.file('demo_backend/compiler.py'))!r}, 'a').write('#')\n")
    run_env = {**os.environ, "PYTHONPATH": str(site),
               "TRITON_BACKEND_POLICY": "strict"}
    done = subprocess.run([sys.executable, "-c", code], env=run_env, capture_output=True, text=True)
    assert done.returncode == 1
    assert "SourceChanged" in done.stderr and "changed since it was verified" in done.stderr


def test_a_source_symlinked_after_verification_is_refused(env: TrustEnv, site: Path) -> None:
    """Replaced by a symlink to the same bytes: the import is refused, naming the file."""
    dist = write_dist(site)
    dist.sign(env.key)
    source = str(dist.file("demo_backend/compiler.py"))
    edit = f"import os; os.replace({source!r}, {source + '.away'!r}); os.symlink({source + '.away'!r}, {source!r})\n"
    code = BYTECODE_PROBE.replace("registry.get().verify()\n", "registry.get().verify()\n" + edit)
    run_env = {**os.environ, "PYTHONPATH": str(site), "TRITON_BACKEND_POLICY": "strict"}
    done = subprocess.run([sys.executable, "-c", code], env=run_env, capture_output=True, text=True)
    assert done.returncode == 1
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("triton_backend_runtime.triton.bytecode.SourceChanged: ") and source in last, done.stderr


@pytest.mark.parametrize("reader", ["code_for", "verified_source"])
def test_a_source_gone_between_finding_and_loading_is_an_import_error(tmp_path: Path, reader: str) -> None:
    """Found, then deleted before it is loaded: an ImportError naming it, not an OSError."""
    from triton_backend_runtime.site.fileidentity import identity
    from triton_backend_runtime.triton import bytecode

    source = tmp_path / "mod.py"
    source.write_text("X = 1\n")
    verified = identity(os.lstat(source))
    source.unlink()
    with pytest.raises(bytecode.SourceChanged) as err:
        getattr(bytecode, reader)(str(source), verified)
    assert isinstance(err.value, ImportError) and err.value.path == str(source)


def test_baseline_honest_bytecode_verifies(env: TrustEnv, site: Path) -> None:
    dist = write_dist(site)
    dist.sign(env.key)
    for path in ("demo_backend/compiler.py", "demo_backend/driver.py"):
        py_compile.compile(str(dist.file(path)), doraise=True)
    source = dist.file("demo_backend/__init__.py")
    _pyc(source, compile(source.read_bytes(), str(source), "exec", dont_inherit=True))
    verdict = env.verify(dist)
    assert (verdict.status, verdict.problem) == ("verified", None)


def fake_libtriton(tmp_path: Path, exports_demo_symbol: bool) -> Path:
    """A stand-in for Triton's libtriton.so, compiled here: with or without the one symbol
    the demo plugin (tests/csrc/plugin_v2.c) needs from it."""
    source = tmp_path / "libtriton.c"
    body = "void tritonDemoRegisterPass(const char *name) { (void)name; }\n" if exports_demo_symbol else ""
    source.write_text(body + "int triton_version_major(void) { return 3; }\n")
    out = tmp_path / ("with" if exports_demo_symbol else "without") / "libtriton.so"
    out.parent.mkdir(exist_ok=True)
    return gcc(out, str(source))


# -- verify_distribution: one case per code ------------------------------------------------


@dataclass
class Tree:
    """What a case gets: a distribution that verifies until the case changes it."""

    dist: Dist
    env: TrustEnv
    tmp: Path
    elf: ElfFixtures
    monkeypatch: pytest.MonkeyPatch

    @property
    def manifest(self) -> str:
        return str(self.dist.manifest_path)

    def file(self, wheel_path: str) -> str:
        return str(self.dist.file(wheel_path))

    def sign_statement(self, edit: Callable[[dict[str, Any]], Any]) -> None:
        """Sign a statement edited as JSON (what the dataclasses could not express)."""
        doc = statement_of(self.dist.describe())
        edit(doc)
        self.dist.seal_statement(doc, self.env.key)


#: A case changes the tree and returns (the path the reason names, a context or None).
Outcome = tuple[str | None, Context | None]
Setup = Callable[[Tree], Outcome]
CASES: list[Any] = []


def case(code: str, name: str) -> Callable[[Setup], Setup]:
    def register(setup: Setup) -> Setup:
        CASES.append(pytest.param(code, setup, id=f"{code}:{name}"))
        return setup
    return register


def _envelope(t: Tree, doc: Any) -> tuple[str, None]:
    t.dist.write_envelope(json.dumps(doc).encode())
    return t.manifest, None


def _signed_envelope(t: Tree) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(t.dist.seal(t.dist.describe(), t.env.key))
    return doc


@case("signature.malformed", "not-an-object")
def _(t: Tree) -> Outcome:
    return _envelope(t, ["payload"])


@case("signature.malformed", "missing-fields")
def _(t: Tree) -> Outcome:
    return _envelope(t, {"payload": "", "signatures": []})


@case("signature.malformed", "bad-base64")
def _(t: Tree) -> Outcome:
    doc = _signed_envelope(t)
    doc["payload"] = "not base64!"
    return _envelope(t, doc)


@case("signature.malformed", "signature-without-sig")
def _(t: Tree) -> Outcome:
    doc = _signed_envelope(t)
    doc["signatures"] = [{"keyid": t.env.key.keyid}]
    return _envelope(t, doc)


@case("signature.malformed", "too-many-signatures")
def _(t: Tree) -> Outcome:
    doc = _signed_envelope(t)
    doc["signatures"] = doc["signatures"] * (dsse.MAX_SIGNATURES + 1)
    return _envelope(t, doc)


@case("signature.payload-type", "foreign-type")
def _(t: Tree) -> Outcome:
    t.dist.seal_statement(statement_of(t.dist.describe()), t.env.key, payload_type="application/vnd.in-toto+json")
    return t.manifest, None


@case("signature.signature", "bad-signature-by-trusted-key")
def _(t: Tree) -> Outcome:
    doc = _signed_envelope(t)
    sig = bytearray(base64.b64decode(doc["signatures"][0]["sig"]))
    sig[0] ^= 1
    doc["signatures"][0]["sig"] = base64.b64encode(bytes(sig)).decode()
    return _envelope(t, doc)


@case("signature.signature", "payload-changed-after-signing")
def _(t: Tree) -> Outcome:
    doc = _signed_envelope(t)
    doc["payload"] = base64.b64encode(base64.b64decode(doc["payload"]) + b" ").decode()
    return _envelope(t, doc)


@case("signature.signature", "revoked-key")
def _(t: Tree) -> Outcome:
    t.dist.sign(t.env.key)
    (t.env.trust / "revoked").write_text(f"# compromised\n{t.env.key.keyid}\n")
    return t.manifest, t.env.context()


@case("signature.json", "nested-deeper-than-32")
def _(t: Tree) -> Outcome:
    t.dist.write_envelope(b'{"payload": ' + b"[" * 40 + b"]" * 40 + b"}")
    return t.manifest, None


@case("signature.json", "5000-digit-number")
def _(t: Tree) -> Outcome:
    doc = _signed_envelope(t)
    text = json.dumps(doc)[:-1] + ', "n": ' + "7" * 5000 + "}"
    t.dist.write_envelope(text.encode())
    return t.manifest, None


@case("signature.json", "not-json")
def _(t: Tree) -> Outcome:
    t.dist.write_envelope(b"\x00\xffnot json")
    return t.manifest, None


@case("verify.too-large", "envelope-over-24MiB")
def _(t: Tree) -> Outcome:
    t.dist.sign(t.env.key)
    os.truncate(t.dist.manifest_path, dsse.MAX_ENVELOPE_BYTES + 1)  # sparse: refused before it is read
    return t.manifest, None


@case("manifest.json", "signed-payload-not-json")
def _(t: Tree) -> Outcome:
    t.dist.seal_statement(b'{"_type": "https://in-toto.io/Statement/v1", ', t.env.key)
    return t.manifest, None


@case("manifest.json", "signed-payload-nested-too-deep")
def _(t: Tree) -> Outcome:
    t.sign_statement(lambda doc: doc["predicate"].update(deep=json.loads("[" * 40 + "]" * 40)))
    return t.manifest, None


@case("manifest.too-large", "payload-over-16MiB")
def _(t: Tree) -> Outcome:
    body = json.dumps(statement_of(t.dist.describe())).encode()
    t.dist.seal_statement(body + b" " * m.MAX_MANIFEST_BYTES, t.env.key)
    return t.manifest, None


@case("manifest.limit", "a-tag-over-MAX_TAGS")
def _(t: Tree) -> Outcome:
    t.sign_statement(lambda doc: doc["predicate"].update(tags=doc["predicate"]["tags"] * (m.MAX_TAGS + 1)))
    return t.manifest, None


@case("manifest.schema", "size-is-a-string")
def _(t: Tree) -> Outcome:
    t.sign_statement(lambda doc: doc["predicate"]["artifacts"][0].update(size="12"))
    return t.manifest, None


@case("manifest.schema", "missing-required-field")
def _(t: Tree) -> Outcome:
    t.sign_statement(lambda doc: doc["predicate"].pop("tags"))
    return t.manifest, None


@case("manifest.schema", "predicate-not-an-object")
def _(t: Tree) -> Outcome:
    t.sign_statement(lambda doc: doc.update(predicate=[1, 2]))
    return t.manifest, None


@case("manifest.version", "major-2")
def _(t: Tree) -> Outcome:
    t.sign_statement(lambda doc: doc["predicate"].update(schema_version="2.0"))
    return t.manifest, None


@case("manifest.version", "superscript-two")
def _(t: Tree) -> Outcome:
    t.sign_statement(lambda doc: doc["predicate"].update(schema_version="\u00b2.0"))
    return t.manifest, None


@case("manifest.version", "a-number")
def _(t: Tree) -> Outcome:
    t.sign_statement(lambda doc: doc["predicate"].update(schema_version=1.1))
    return t.manifest, None


@case("manifest.statement", "subject-digest-disagrees")
def _(t: Tree) -> Outcome:
    t.sign_statement(lambda doc: doc["subject"][0]["digest"].update(sha256="0" * 64))
    return t.manifest, None


@case("manifest.statement", "subject-missing")
def _(t: Tree) -> Outcome:
    t.sign_statement(lambda doc: doc["subject"].pop())
    return t.manifest, None


@case("manifest.statement", "wrong-statement-type")
def _(t: Tree) -> Outcome:
    t.sign_statement(lambda doc: doc.update(_type="https://in-toto.io/Statement/v0.1"))
    return t.manifest, None


@case("manifest.statement", "wrong-predicate-type")
def _(t: Tree) -> Outcome:
    t.sign_statement(lambda doc: doc.update(predicateType="https://slsa.dev/provenance/v1"))
    return t.manifest, None


@case("trust.scope", "key-scoped-to-another-name")
def _(t: Tree) -> Outcome:
    t.dist.sign(t.env.key)
    (t.env.trust / "scopes").write_text(f"{t.env.key.keyid} other-backend\n")
    return t.manifest, t.env.context()


@case("trust.rollback", "signed-below-floor")
def _(t: Tree) -> Outcome:
    t.dist.sign(t.env.key)
    (t.env.trust / "min-versions").write_text("demo_backend 2.0\n")
    return t.manifest, t.env.context()


@case("trust.rollback", "hash-only-below-floor")
def _(t: Tree) -> Outcome:
    t.dist.sign()
    (t.env.trust / "min-versions").write_text("demo-backend 1.0.post1\n")
    return t.manifest, t.env.context()


@case("verify.name", "manifest-of-another-distribution")
def _(t: Tree) -> Outcome:
    t.dist.sign(t.env.key, edit=lambda man: setattr(man, "name", "other-backend"))
    return t.manifest, None


@case("verify.version", "manifest-of-another-release")
def _(t: Tree) -> Outcome:
    t.dist.sign(t.env.key, edit=lambda man: setattr(man, "version", "1.1"))
    return t.manifest, None


@case("verify.tag", "not-a-tag")
def _(t: Tree) -> Outcome:
    t.dist.sign(t.env.key, edit=lambda man: setattr(man, "tags", ["x"]))
    return t.manifest, None


@case("verify.tag", "foreign-tag")
def _(t: Tree) -> Outcome:
    t.dist.sign(t.env.key, edit=lambda man: setattr(man, "tags", ["cp27-cp27m-win32"]))
    return t.manifest, None


@case("verify.protocol", "superscript-two")
def _(t: Tree) -> Outcome:
    t.dist.sign(t.env.key, edit=lambda man: setattr(man, "protocol_version", "\u00b2.0"))
    return t.manifest, None


@case("verify.protocol", "major-9")
def _(t: Tree) -> Outcome:
    t.dist.sign(t.env.key, edit=lambda man: setattr(man, "protocol_version", "9.0"))
    return t.manifest, None


@case("verify.python", "python-4-only")
def _(t: Tree) -> Outcome:
    t.dist.sign(t.env.key, edit=lambda man: setattr(man.requirements, "python", ">=4"))
    return t.manifest, None


@case("verify.triton", "triton-not-installed")
def _(t: Tree) -> Outcome:
    t.dist.sign(t.env.key, edit=lambda man: setattr(man.requirements, "triton", ">=3.9"))
    return t.manifest, None


@case("verify.triton", "another-triton-installed")
def _(t: Tree) -> Outcome:
    t.dist.sign(t.env.key, edit=lambda man: setattr(man.requirements, "triton", "<3.9"))
    return t.manifest, t.env.context("3.9.0")


@case("verify.triton-package", "built-for-a-renamed-triton")
def _(t: Tree) -> Outcome:
    t.dist.sign(t.env.key, edit=lambda man: setattr(man, "triton_package", "tokenspeed_triton"))
    return t.manifest, None


@case("verify.requirement", "not-a-specifier")
def _(t: Tree) -> Outcome:
    t.dist.sign(t.env.key, edit=lambda man: setattr(man.requirements, "python", "three point eleven"))
    return t.manifest, None


def _add_artifact(t: Tree, path: str, size: int = 0) -> None:
    t.dist.sign(t.env.key, edit=lambda man: man.artifacts.append(m.Artifact(path, "0" * 64, size)))


@case("verify.path", "dot-dot-to-dev-zero")
def _(t: Tree) -> Outcome:
    _add_artifact(t, "../../../dev/zero", 1 << 40)
    return t.manifest, None


@case("verify.path", "absolute")
def _(t: Tree) -> Outcome:
    _add_artifact(t, "/etc/passwd")
    return t.manifest, None


@case("verify.path", "backslash")
def _(t: Tree) -> Outcome:
    _add_artifact(t, "demo_backend\\..\\..\\x.py")
    return t.manifest, None


@case("verify.path", "symlinked-directory-escapes-the-root")
def _(t: Tree) -> Outcome:
    outside = t.tmp / "outside"
    outside.mkdir()
    (outside / "evil.py").write_text("print('outside the install root')\n")
    os.symlink(outside, t.dist.file("demo_backend/ext"))
    real = artifact_from_file(outside / "evil.py", "demo_backend/ext/evil.py")
    t.dist.sign(t.env.key, edit=lambda man: man.artifacts.append(real))
    return t.file("demo_backend/ext/evil.py"), None


@case("verify.package", "slash")
def _(t: Tree) -> Outcome:
    t.dist.sign(t.env.key, edit=lambda man: setattr(man.backends[0], "package", "/"))
    return t.manifest, None


@case("verify.package", "dot-dot")
def _(t: Tree) -> Outcome:
    t.dist.sign(t.env.key, edit=lambda man: setattr(man.backends[0], "package", ".."))
    return t.manifest, None


@case("verify.plugin", "plugin-not-an-artifact")
def _(t: Tree) -> Outcome:
    t.dist.sign(t.env.key, edit=lambda man: man.plugins.append(m.Plugin("demo_backend/libgone.so", "v2")))
    return t.manifest, None


@case("verify.missing", "deleted-after-signing")
def _(t: Tree) -> Outcome:
    t.dist.sign(t.env.key)
    t.dist.file("demo_backend/driver.py").unlink()
    return t.file("demo_backend/driver.py"), None


@case("verify.not-regular", "fifo")
def _(t: Tree) -> Outcome:
    t.dist.sign(t.env.key)
    t.dist.file("demo_backend/driver.py").unlink()
    os.mkfifo(t.dist.file("demo_backend/driver.py"))
    return t.file("demo_backend/driver.py"), None


@case("verify.not-regular", "symlink-to-the-same-bytes")
def _(t: Tree) -> Outcome:
    t.dist.sign(t.env.key)
    path = t.dist.file("demo_backend/driver.py")
    shutil.copy(path, t.tmp / "driver.py")
    path.unlink()
    os.symlink(t.tmp / "driver.py", path)
    return str(path), None


@case("verify.not-regular", "manifest-is-a-symlink")
def _(t: Tree) -> Outcome:
    t.dist.sign(t.env.key)
    t.dist.manifest_path.rename(t.tmp / "real.json")
    os.symlink(t.tmp / "real.json", t.dist.manifest_path)
    return t.manifest, None


@case("verify.read", "parent-is-a-file")
def _(t: Tree) -> Outcome:
    _add_artifact(t, "demo_backend/compiler.py/inner.py")
    return t.file("demo_backend/compiler.py/inner.py"), None


@case("verify.size", "appended-after-signing")
def _(t: Tree) -> Outcome:
    t.dist.sign(t.env.key)
    with t.dist.file("demo_backend/compiler.py").open("a") as stream:
        stream.write("import os\n")
    return t.file("demo_backend/compiler.py"), None


@case("verify.sha256", "python-edited-after-signing")
def _(t: Tree) -> Outcome:
    t.dist.sign(t.env.key)
    path = t.dist.file("demo_backend/compiler.py")
    path.write_bytes(path.read_bytes().replace(b"class", b"klass"))  # same size, other bytes
    return str(path), None


@case("verify.sha256", "metadata-edited-after-signing")
def _(t: Tree) -> Outcome:
    t.dist.sign(t.env.key)
    path = t.dist.dist_info / "entry_points.txt"
    path.write_bytes(path.read_bytes().replace(b"demo = ", b"demo  ="))  # same size, same entry point
    return str(path), None


@case("verify.unlisted", "python-module-added")
def _(t: Tree) -> Outcome:
    t.dist.sign(t.env.key)
    t.dist.file("demo_backend/extra.py").write_text("import os\n")
    return t.file("demo_backend/extra.py"), None


@case("verify.unlisted", "sourceless-bytecode-added")
def _(t: Tree) -> Outcome:
    t.dist.sign(t.env.key)
    t.dist.file("demo_backend/extra.pyc").write_bytes(b"\x00" * 16)
    return t.file("demo_backend/extra.pyc"), None


@case("verify.unlisted", "library-in-a-symlinked-subdirectory")
def _(t: Tree) -> Outcome:
    t.dist.sign(t.env.key)
    vendored = t.dist.site / "_vendored"
    vendored.mkdir()
    (vendored / "libextra.so.1").write_bytes(b"\x7fELF")
    os.symlink("../_vendored", t.dist.file("demo_backend/libs"))
    return t.file("demo_backend/libs/libextra.so.1"), None


@case("verify.unlisted", "library-beside-a-1.0-manifest")
def _(t: Tree) -> Outcome:
    shutil.copy(t.elf.exports, t.dist.file("demo_backend/libexports.so"))
    t.dist.seal_statement(statement_1_0(t.dist, ["demo_backend/libexports.so"]), t.env.key)
    t.dist.file("demo_backend/libmore.so").write_bytes(b"\x7fELF")
    return t.file("demo_backend/libmore.so"), None


def _pyc(source: Path, code: Any) -> str:
    """A timestamp pyc for ``source`` that the import system would run in its place."""
    pyc = importlib.util.cache_from_source(str(source))
    st = source.stat()
    header = importlib.util.MAGIC_NUMBER + (0).to_bytes(4, "little")
    header += (int(st.st_mtime) & 0xFFFFFFFF).to_bytes(4, "little") + (st.st_size & 0xFFFFFFFF).to_bytes(4, "little")
    os.makedirs(os.path.dirname(pyc), exist_ok=True)
    Path(pyc).write_bytes(header + marshal.dumps(code))
    return pyc


@case("verify.walk-limit", "package-bigger-than-the-walk-budget")
def _(t: Tree) -> Outcome:
    for i in range(10):
        t.dist.file(f"demo_backend/data{i}.txt").write_text("x")
    t.dist.sign(t.env.key)
    t.monkeypatch.setattr(unlisted, "MAX_WALK_ENTRIES", 5)
    return t.file("demo_backend"), None


def _plugin(t: Tree) -> str:
    shutil.copy(t.elf.plugin_v2, t.dist.file("demo_backend/libdemo_plugin.so"))
    t.dist.sign(t.env.key)
    return t.file("demo_backend/libdemo_plugin.so")


@case("verify.libtriton", "plugin-needs-libtriton-none-installed")
def _(t: Tree) -> Outcome:
    return _plugin(t), t.env.context("3.9.0", None)


@case("verify.symbols", "libtriton-lacks-the-symbol")
def _(t: Tree) -> Outcome:
    return _plugin(t), t.env.context("3.9.0", str(fake_libtriton(t.tmp, False)))


@case("verify.elf", "libtriton-not-elf")
def _(t: Tree) -> Outcome:
    plugin = _plugin(t)
    assert plugin
    return str(t.elf.not_elf), t.env.context("3.9.0", str(t.elf.not_elf))


@case("verify.error", "an-unexpected-exception-inside-the-check")
def _(t: Tree) -> Outcome:
    def boom(path: str, names: object) -> list[str]:
        raise MemoryError("injected")

    _plugin(t)
    t.monkeypatch.setattr(dynsym, "missing_exports", boom)
    return t.manifest, t.env.context("3.9.0", str(t.elf.exports))


def statement_1_0(dist: Dist, paths: list[str]) -> dict[str, Any]:
    """A schema 1.0 statement: native files only, and no ``coverage`` field at all."""
    man = dist.describe(paths)
    man.schema_version = "1.0"
    doc = statement_of(man)
    del doc["predicate"]["coverage"]
    return doc


@pytest.mark.parametrize(("code", "setup"), CASES)
def test_verify_reason(code: str, setup: Setup, env: TrustEnv, site: Path, tmp_path: Path, elf_files: ElfFixtures,
                       monkeypatch: pytest.MonkeyPatch) -> None:
    tree = Tree(write_dist(site), env, tmp_path, elf_files, monkeypatch)
    where, ctx = setup(tree)
    with deadline(30):
        verdict = env.verify(tree.dist, ctx)
    assert verdict.status == "rejected", verdict
    assert verdict.problem is not None and verdict.problem.code == code, verdict.problem
    if where is not None:
        assert verdict.problem.path == where


# -- hostile input must not cost more than hashing what is installed -------------------------


def test_an_artifact_listed_many_times_is_hashed_once(env: TrustEnv, site: Path) -> None:
    dist = write_dist(site, files={"demo_backend/blob.bin": b"\x01" * (256 << 10)})
    installed = sum(dist.file(p).stat().st_size for p in dist.wheel_paths())
    man = dist.describe()
    blob = next(a for a in man.artifacts if a.path.endswith("blob.bin"))
    man.artifacts += [blob] * 200
    dist.seal(man)  # hash-only: anyone who can write a manifest can write this one
    ctx = env.context()
    verify_distribution(dist.distribution(), ctx)
    assert ctx.hashes.hashed_bytes <= installed


def test_a_compressed_tag_set_is_matched_without_expanding_it(env: TrustEnv, site: Path) -> None:
    """A compressed tag set (PEP 425) is matched field by field: 56 dotted parts per field
    would otherwise expand to 56**3 tags before any hashing; 65 parts are refused outright."""
    from packaging.tags import sys_tags

    mine = next(iter(sys_tags()))

    def verdict_for(tag: str) -> Any:
        dist = write_dist(site / str(abs(hash(tag)))[:8])
        dist.sign(env.key, edit=lambda man: setattr(man, "tags", [tag]))
        return env.verify(dist)

    parts = [f"x{i}" for i in range(55)]
    fits = "-".join(".".join([*parts, field]) for field in (mine.interpreter, mine.abi, mine.platform))
    assert verdict_for(fits).status == "verified"
    foreign = "-".join(".".join(parts + [f"y{n}"]) for n in range(3))
    assert verdict_for(foreign).problem.code == "verify.tag"
    huge = "-".join([".".join(f"x{i}" for i in range(65))] * 3)
    refused = verdict_for(huge).problem
    assert refused.code == "verify.tag" and "at most 64 dotted parts" in refused.message


@pytest.mark.parametrize("subject", [["x"], "x", True], ids=["list", "string", "true"])
def test_a_subject_that_is_not_an_object_is_a_statement_error(env: TrustEnv, site: Path, subject: Any) -> None:
    dist = write_dist(site)
    doc = statement_of(dist.describe())
    doc["subject"].append(subject)
    dist.seal_statement(doc, env.key)
    verdict = env.verify(dist)
    assert verdict.problem is not None and verdict.problem.code == "manifest.statement", verdict.problem


def test_a_huge_version_below_a_floor_is_a_rollback(env: TrustEnv, site: Path) -> None:
    dist = write_dist(site)
    dist.sign(env.key, edit=lambda man: setattr(man, "version", "1" * 5000))
    (env.trust / "min-versions").write_text("demo-backend 2.0\n")
    verdict = env.verify(dist, env.context())
    assert verdict.problem is not None and verdict.problem.code == "trust.rollback", verdict.problem


def test_a_huge_floor_is_a_reported_line_not_a_failed_import(env: TrustEnv, site: Path) -> None:
    dist = write_dist(site)
    dist.sign(env.key)
    (env.trust / "min-versions").write_text("other-backend 1" + "0" * 5000 + "\n")
    reg = env.registry(site, policy="strict")
    assert "trust.min-version-format" in codes(reg.problems)
    assert entry(reg, "demo").state == "loaded"


# -- the 1.0 manifest and legacy distributions ---------------------------------------------


def test_manifest_1_0_native_files_only_still_verifies(env: TrustEnv, site: Path, elf_files: ElfFixtures) -> None:
    dist = write_dist(site, files={"demo_backend/libexports.so": elf_files.exports})
    dist.seal_statement(statement_1_0(dist, ["demo_backend/libexports.so"]), env.key)
    verdict = env.verify(dist)
    assert (verdict.status, verdict.problem, verdict.coverage) == ("verified", None, "native")
    assert "native files only" in verdict.note
    dist.file("demo_backend/extra.py").write_text("import os\n")  # 1.0 never listed Python files
    assert env.verify(dist).status == "verified"
    reg = env.registry(site, policy="strict")
    assert entry(reg, "demo").state == "loaded" and "native files only" in reg.report().to_dict()["backends"][0]["note"]


def test_legacy_loads_under_warn_and_is_marked(env: TrustEnv, site: Path) -> None:
    write_dist(site)
    reg = env.registry(site, policy="warn")
    demo = entry(reg, "demo")
    assert (demo.trust, demo.state, demo.reason) == ("legacy", "loaded", None)
    assert "legacy" in reg.report().to_dict()["backends"][0]["note"]


def test_legacy_and_unverified_are_excluded_under_strict(env: TrustEnv, site: Path) -> None:
    write_dist(site, "legacy-backend", backends={"old": "legacy_backend"})
    write_dist(site, "hashonly-backend", backends={"plain": "hashonly_backend"}).sign()
    write_dist(site).sign(env.key)
    reg = env.registry(site, policy="strict")
    for name, trust in (("old", "legacy"), ("plain", "unverified")):
        item = entry(reg, name)
        assert (item.trust, item.state) == (trust, "excluded")
        assert item.reason is not None and item.reason.code == "policy.not-verified"
        assert item.reason.path == item.where()
    assert entry(reg, "demo").state == "loaded"
    assert reg.result is not None and set(reg.result) == {"demo"}
    warm = env.registry(site, policy="warn")
    assert {e.name: e.state for e in warm.entries} == {"old": "loaded", "plain": "loaded", "demo": "loaded"}


def test_legacy_below_a_version_floor_is_a_rollback(env: TrustEnv, site: Path) -> None:
    dist = write_dist(site)
    (env.trust / "min-versions").write_text("demo-backend 2.0\n")
    demo = entry(env.registry(site, policy="warn"), "demo")
    assert (demo.trust, demo.state) == ("rejected", "excluded")
    assert demo.reason is not None and (demo.reason.code, demo.reason.path) == ("trust.rollback", str(dist.dist_info))


def test_fifo_manifest_does_not_hang_discovery(env: TrustEnv, site: Path) -> None:
    dist = write_dist(site)
    os.mkfifo(dist.manifest_path)
    with deadline(30):
        reg = env.registry(site, policy="strict")
    demo = entry(reg, "demo")
    assert demo.trust in ("legacy", "rejected") and demo.state == "excluded"


# -- the registry: policy, entry points, shadowing, conflicts, loading -----------------------


def test_policy_entry_point_differs_from_the_signed_package(env: TrustEnv, site: Path) -> None:
    dist = write_dist(site)
    dist.sign(env.key, edit=lambda man: setattr(man.backends[0], "package", "demo_backend.inner"))
    reg = env.registry(site, policy="warn")
    demo = entry(reg, "demo")
    assert (demo.trust, demo.state) == ("rejected", "excluded")
    assert demo.reason is not None and demo.reason.code == "policy.entry-point"
    assert demo.reason.path == str(dist.dist_info) and "demo_backend.inner" in demo.reason.message


def test_policy_entry_point_the_manifest_does_not_declare(env: TrustEnv, site: Path) -> None:
    dist = write_dist(site)
    dist.sign(env.key, edit=lambda man: setattr(man, "backends", []))
    reg = env.registry(site, policy="warn")
    demo = entry(reg, "demo")
    assert demo.reason is not None and demo.reason.code == "policy.entry-point" and demo.state == "excluded"


def test_policy_value_typo_is_strict(env: TrustEnv, site: Path) -> None:
    write_dist(site, "hashonly-backend", backends={"plain": "hashonly_backend"}).sign()
    reg = env.registry(site, policy="strcit")
    assert reg.policy == "strict"
    assert codes(reg.problems) == ["policy.value"] and reg.problems[0].path == "TRITON_BACKEND_POLICY"
    assert entry(reg, "plain").reason is not None and entry(reg, "plain").state == "excluded"
    assert reg.report().to_dict()["problems"][0]["code"] == "policy.value"


def test_policy_off_steps_aside(env: TrustEnv, site: Path) -> None:
    write_dist(site).sign(env.key)
    reg = env.registry(site, policy="off")
    assert reg.result is None and reg.entries == []


def test_verify_shadowed_by_an_earlier_sys_path_entry(env: TrustEnv, site: Path, tmp_path: Path) -> None:
    write_dist(site).sign(env.key)
    shadow = tmp_path / "shadow"
    (shadow / "demo_backend").mkdir(parents=True)
    (shadow / "demo_backend" / "__init__.py").write_text("raise SystemExit('never imported')\n")
    reg = env.registry(shadow, site, policy="warn", loader=import_loader)
    demo = entry(reg, "demo")
    assert (demo.trust, demo.state) == ("verified", "excluded")
    assert demo.reason is not None and demo.reason.code == "verify.shadowed"
    assert demo.reason.path == str(shadow / "demo_backend")
    assert str(site / "demo_backend") in demo.reason.message
    assert "demo_backend" not in sys.modules


def test_conflict_name(env: TrustEnv, site: Path, tmp_path: Path) -> None:
    write_dist(site, "zeta-backend", backends={"demo": "zeta_backend"}).sign(env.key)
    early = tmp_path / "early"
    early.mkdir()
    write_dist(early, "alpha-backend", backends={"demo": "alpha_backend"}).sign()
    write_dist(site, "beta-backend", backends={"demo": "beta_backend"}).sign(env.key)
    reg = env.registry(early, site, policy="warn")
    states = {e.dist.name if e.dist else "": (e.state, e.reason.code if e.reason else None) for e in reg.entries}
    # two verified alike, neither the core nor pinned: neither (nor the unverified one) gets it,
    # whatever the names or sys.path say
    assert states == {"beta-backend": ("excluded", "conflict.name"), "zeta-backend": ("excluded", "conflict.name"),
                      "alpha-backend": ("excluded", "conflict.name")}
    text = entry(reg, "demo", "zeta-backend").reason.message  # type: ignore[union-attr]
    assert "beta-backend 1.0, zeta-backend 1.0" in text and "trust pin demo DIST" in text
    assert reg.result == {}
    # verified before unverified (even earlier on sys.path)
    (env.trust / "pins").write_text("demo zeta-backend\n")
    reg = env.registry(early, site, policy="warn")
    states = {e.dist.name if e.dist else "": (e.state, e.reason.code if e.reason else None) for e in reg.entries}
    assert states == {"beta-backend": ("excluded", "conflict.name"), "zeta-backend": ("loaded", None),
                      "alpha-backend": ("excluded", "conflict.name")}
    assert "pinned to zeta-backend" in entry(reg, "demo", "alpha-backend").reason.message  # type: ignore[union-attr]
    assert reg.result is not None and reg.result["demo"] == Loaded("demo", "zeta_backend")
    (env.trust / "pins").unlink()
    write_dist(site, "beta-backend", backends={"other": "beta_backend"}).sign(env.key)  # beta leaves demo
    reg = env.registry(early, site, policy="warn")
    assert entry(reg, "demo", "zeta-backend").state == "loaded"
    text = entry(reg, "demo", "alpha-backend").reason.message  # type: ignore[union-attr]
    assert "zeta-backend 1.0, which wins (verified > unverified > legacy)" in text


def test_trust_name_a_backend_its_signer_is_not_granted(env: TrustEnv, site: Path) -> None:
    """A scoped key signs its distribution; its backends' names need grants too (in depth:
    tests/runtime/test_name_grants.py)."""
    scoped = make_key(env.root / "keys", "scoped")
    (env.trust / "scoped.pub").write_bytes(scoped.pub.read_bytes())
    (env.trust / "scopes").write_text(f"{scoped.keyid} demo-backend\n")
    dist = write_dist(site)
    dist.sign(scoped)
    demo = entry(env.registry(site, policy="strict"), "demo")
    assert (demo.trust, demo.state) == ("rejected", "excluded") and demo.reason is not None
    assert (demo.reason.code, demo.reason.path) == ("trust.name", str(dist.manifest_path))
    (env.trust / "scopes").write_text(f"{scoped.keyid} demo-backend,backend:demo\n")
    assert entry(env.registry(site, policy="strict"), "demo").state == "loaded"


def test_conflict_name_warm_reads_the_pins(env: TrustEnv, site: Path) -> None:
    """The verdicts come from the cache; the pins (and their bad lines) are read at each load."""
    for name in ("one", "two"):
        write_dist(site, f"{name}-backend", backends={"demo": f"{name}_backend"}).sign(env.key)
    assert {e.state for e in env.registry(site, policy="strict").entries} == {"excluded"}
    (env.trust / "pins").write_text("demo two-backend\npass:* x\n")
    reg = env.registry(site, policy="strict")
    assert entry(reg, "demo", "two-backend").state == "loaded"
    assert [(p.code, p.path) for p in reg.problems] == [("trust.pin-format", f"{env.trust / 'pins'}:2")]


def test_conflict_target(env: TrustEnv, site: Path) -> None:
    for name, keys in (("one", (env.key,)), ("two", ())):
        dist = write_dist(site, f"{name}-backend", backends={name: f"{name}_backend"})
        dist.sign(*keys, edit=lambda man: setattr(man.backends[0], "targets", ["cuda", man.backends[0].name]))
    reg = env.registry(site, policy="warn")
    assert entry(reg, "one").state == "loaded"
    two = entry(reg, "two")
    assert two.state == "excluded" and two.reason is not None and two.reason.code == "conflict.target"
    assert "'cuda'" in two.reason.message and two.reason.path == two.where()
    # both verified: neither, until the trust store pins the target
    dist = write_dist(site, "two-backend", backends={"two": "two_backend"})
    dist.sign(env.key, edit=lambda man: setattr(man.backends[0], "targets", ["cuda", "two"]))
    reg = env.registry(site, policy="strict")
    assert {entry(reg, n).reason.code for n in ("one", "two")} == {"conflict.target"}  # type: ignore[union-attr]
    assert "trust pin target:cuda DIST" in entry(reg, "one").reason.message  # type: ignore[union-attr]
    (env.trust / "pins").write_text("target:cuda two-backend\n")
    reg = env.registry(site, policy="strict")
    assert (entry(reg, "one").state, entry(reg, "two").state) == ("excluded", "loaded")


def test_conflict_symbol(env: TrustEnv, site: Path, elf_files: ElfFixtures) -> None:
    for name, keys in (("one", (env.key,)), ("two", ())):
        files = {f"{name}_backend/libshared_plugin.so": elf_files.plugin_shared}
        write_dist(site, f"{name}-backend", backends={name: f"{name}_backend"}, files=files).sign(*keys)
    reg = env.registry(site, policy="warn")
    plugins = {p.dist.name: p for p in reg.plugins}
    states = {name: (p.state, p.reason.code if p.reason else None) for name, p in plugins.items()}
    assert states == {"one-backend": ("pending", None), "two-backend": ("excluded", "conflict.symbol")}
    assert "demo_shared_helper" in plugins["two-backend"].reason.message  # type: ignore[union-attr]
    assert plugins["two-backend"].reason.path == plugins["two-backend"].file  # type: ignore[union-attr]
    assert os.environ["TRITON_PLUGIN_PATHS"] == plugins["one-backend"].file  # no Triton: the variable
    # both verified: neither loads (no pin chooses a symbol)
    write_dist(site, "two-backend", backends={"two": "two_backend"},
               files={"two_backend/libshared_plugin.so": elf_files.plugin_shared}).sign(env.key)
    reg = env.registry(site, policy="strict")
    assert {(p.state, p.reason.code if p.reason else None) for p in reg.plugins} == {("excluded", "conflict.symbol")}
    assert "uninstall the one you do not want" in reg.plugins[0].reason.message  # type: ignore[union-attr]


def test_load_import_failure_is_that_backends_alone(env: TrustEnv, site: Path) -> None:
    broken = write_dist(site, "broken-backend", backends={"broken": "broken_backend"})
    broken.file("broken_backend/compiler.py").write_text("raise ImportError('libdemo_rt.so.3 not found')\n")
    broken.sign(env.key)
    write_dist(site).sign(env.key)
    reg = env.registry(site, policy="strict", loader=import_loader)
    bad = entry(reg, "broken")
    assert (bad.trust, bad.state) == ("verified", "failed")
    assert bad.reason is not None and bad.reason.code == "load.import" and bad.reason.path == "broken_backend"
    assert "libdemo_rt.so.3" in bad.reason.message
    assert entry(reg, "demo").state == "loaded" and reg.result is not None and set(reg.result) == {"demo"}


@pytest.mark.parametrize(("libtriton", "code"), [
    (types.SimpleNamespace(), "load.plugin-api"),
    (types.SimpleNamespace(passes=types.SimpleNamespace(plugin=types.SimpleNamespace(extend_with=None))),
     "load.plugin"),
], ids=["no-extend_with", "extend_with-raises"])
def test_load_plugin_refused_by_libtriton(env: TrustEnv, site: Path, elf_files: ElfFixtures,
                                          monkeypatch: pytest.MonkeyPatch, libtriton: Any, code: str) -> None:
    write_dist(site, files={"demo_backend/libshared_plugin.so": elf_files.plugin_shared}).sign(env.key)
    monkeypatch.setitem(sys.modules, "triton._C.libtriton", libtriton)
    reg = env.registry(site, policy="strict")
    (plugin,) = reg.plugins
    assert (plugin.trust, plugin.state) == ("verified", "failed")
    assert plugin.reason is not None and plugin.reason.code == code and plugin.reason.path == plugin.file
    assert entry(reg, "demo").state == "loaded"


def test_select_driver_explains_every_backend(env: TrustEnv, site: Path) -> None:
    write_dist(site).sign(env.key)
    write_dist(site, "hashonly-backend", backends={"plain": "hashonly_backend"}).sign()
    reg = env.registry(site, policy="strict")

    def no_driver() -> Any:
        raise RuntimeError("0 active drivers ([]). There should only be one.")

    with pytest.raises(SelectionError) as err:
        selection.wrap_create_driver(no_driver, reg)()
    assert err.value.code == "select.driver" and err.value.path == "driver selection"
    assert "demo [demo-backend 1.0, verified, loaded]" in err.value.detail
    assert "plain [hashonly-backend 1.0, unverified, excluded]" in err.value.detail


@pytest.mark.parametrize(("file", "content", "code", "line"), [
    ("broken.pub", b"ed25519 not-base64 abc\n", "trust.key-format", ":1"),
    ("wrong.pub", b"ed25519 " + base64.b64encode(b"k" * 32) + b" " + b"0" * 64 + b"\n", "trust.keyid", ":1"),
    ("latin1.pub", b"\xff\xfe\xfd\n", "trust.read", ""),
    ("threshold", b"zero\n", "trust.threshold", ""),
    ("scopes", b"# comment\nnot-a-keyid demo-backend\n", "trust.scope-format", ":2"),
    ("min-versions", b"!!! 1.0\n", "trust.min-version-format", ":1"),
    ("revoked", b"0123456789abcdef-typo\n", "trust.revoked-format", ":1"),  # revokes 0123456789abcdef only
], ids=["key-format", "keyid", "read", "threshold", "scope-format", "min-version-format", "revoked-format"])
def test_trust_file_problems_are_reported_and_contained(env: TrustEnv, site: Path, file: str, content: bytes,
                                                        code: str, line: str) -> None:
    write_dist(site).sign(env.key)
    (env.trust / file).write_bytes(content)
    reg = env.registry(site, policy="strict")
    assert codes(reg.problems) == [code]
    assert reg.problems[0].path == f"{env.trust / file}{line}"
    assert entry(reg, "demo").state == "loaded"


def test_trust_scope_format_with_our_keyid_fails_closed(env: TrustEnv, site: Path) -> None:
    write_dist(site).sign(env.key)
    (env.trust / "scopes").write_text(f"{env.key.keyid} !!!\n")
    reg = env.registry(site, policy="strict")
    assert codes(reg.problems) == ["trust.scope-format"]
    demo = entry(reg, "demo")
    assert demo.state == "excluded" and demo.reason is not None and demo.reason.code == "trust.scope"


def test_warnings_as_errors_do_not_break_load(env: TrustEnv, site: Path, capsys: pytest.CaptureFixture[str]) -> None:
    dist = write_dist(site)
    dist.sign(env.key)
    dist.file("demo_backend/extra.py").write_text("import os\n")
    write_dist(site, "good-backend", backends={"good": "good_backend"}).sign(env.key)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        reg = env.registry(site, policy="strcit")
    assert entry(reg, "demo").reason.code == "verify.unlisted"  # type: ignore[union-attr]
    assert entry(reg, "good").state == "loaded"
    err = capsys.readouterr().err
    assert "BackendWarning" in err and "extra.py" in err and "TRITON_BACKEND_POLICY" in err


# -- the verdict cache -----------------------------------------------------------------------


# -- the Triton core (checked before triton/__init__ runs) ------------------------------------


def _triton(site: Path, env: TrustEnv, *keys: Any, manifest: bool = True) -> Dist:
    files: dict[str, bytes | Path] = {"triton/__init__.py": b"", "triton/compiler.py": b"x = 1\n"}
    dist = write_dist(site, "triton", "3.9.0", backends={}, files=files)
    if manifest:
        dist.sign(*keys)
    return dist


@contextmanager
def global_registry(site: Path, policy: str) -> Iterator[Any]:
    """The process-wide registry over ``site`` under ``policy``, forgotten afterwards."""
    from triton_backend_runtime.loading import registry

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(sys, "path", [str(site), *sys.path])
        mp.setenv("TRITON_BACKEND_POLICY", policy)
        registry.reset()
        try:
            yield registry.get()
        finally:
            registry.reset()
    registry.reset()


def _core_spec(init: Path) -> Any:
    import importlib.machinery

    return importlib.machinery.ModuleSpec("triton", None, origin=str(init))


def test_core_verified(env: TrustEnv, site: Path) -> None:
    from triton_backend_runtime.triton.core import core_reason

    _triton(site, env, env.key)
    reg = env.registry(site, policy="strict")
    assert core_reason(reg, str(site / "triton" / "__init__.py")) is None


@pytest.mark.parametrize("change", ["tampered", "hash-only", "legacy", "shadowed"])
def test_core_reason(env: TrustEnv, site: Path, tmp_path: Path, change: str) -> None:
    from triton_backend_runtime.triton.core import core_reason

    dist = _triton(site, env, *([] if change == "hash-only" else [env.key]), manifest=change != "legacy")
    init = site / "triton" / "__init__.py"
    sites = [site]
    if change == "tampered":
        dist.file("triton/compiler.py").write_bytes(b"x = 2\n")
    if change == "shadowed":
        init = tmp_path / "shadow" / "triton" / "__init__.py"
        init.parent.mkdir(parents=True)
        init.write_bytes(b"")
        sites.insert(0, tmp_path / "shadow")
    reason = core_reason(env.registry(*sites, policy="strict"), str(init))
    expected = {
        "tampered": ("verify.sha256", str(dist.file("triton/compiler.py"))),
        "hash-only": ("policy.not-verified", str(dist.manifest_path)),
        "legacy": ("policy.not-verified", str(init)),
        "shadowed": ("verify.shadowed", str(init)),
    }[change]
    assert reason is not None and (reason.code, reason.path) == expected


def test_core_strict_raises_import_error_warn_does_not(env: TrustEnv, site: Path) -> None:
    from triton_backend_runtime.triton.core import CoreRejected, check_core

    _triton(site, env, manifest=False)
    init = site / "triton" / "__init__.py"
    with global_registry(site, "strict"), pytest.raises(CoreRejected) as err:
        check_core(_core_spec(init))
    assert isinstance(err.value, ImportError) and err.value.reason.code == "policy.not-verified"
    with global_registry(site, "warn") as reg:
        reason = check_core(_core_spec(init))
        assert reason is not None and reason.code == "policy.not-verified" and reg.core == reason


def test_a_huge_floor_does_not_break_import_triton_under_warn(env: TrustEnv, site: Path) -> None:
    from triton_backend_runtime.triton.core import check_core

    _triton(site, env, env.key)
    (env.trust / "min-versions").write_text("other-backend 1" + "0" * 5000 + "\n")
    with global_registry(site, "warn"):
        assert check_core(_core_spec(site / "triton" / "__init__.py")) is None


def test_a_file_changed_between_its_check_and_its_hash(tmp_path: Path) -> None:
    """The size is checked on the lstat, the hash read from the file as opened: a file
    rewritten in between is refused, never hashed as if it were the file checked."""
    library = tmp_path / "lib.so"
    library.write_bytes(b"a" * 4096)
    checked = os.lstat(library)
    library.unlink()
    library.write_bytes(b"b" * 4096)  # same size, another file
    hashes = HashCache()
    with pytest.raises(runtime_verify.VerifyError) as err:
        hashes.digests([(str(library), checked)], 2)
    hashes.close()
    assert err.value.code == "verify.changed" and err.value.path == str(library)


def test_a_prefetch_is_only_a_hint(tmp_path: Path) -> None:
    """Hashing ahead from RECORD's hints never decides anything: a wrong size, a file
    replaced after the prefetch, or a FIFO named there, and the digest is still that of the
    file as checked (or the check's own refusal)."""
    import hashlib

    data = b"x" * 5000
    wrong, replaced = tmp_path / "wrong-size.py", tmp_path / "replaced.py"
    wrong.write_bytes(data)
    replaced.write_bytes(b"old" * 100)
    os.mkfifo(tmp_path / "fifo.py")
    hashes = HashCache()
    hashes.prefetch([(str(wrong), 10), (str(replaced), 300), (str(tmp_path / "fifo.py"), 0)], 2)
    hashes.settle()  # the prefetches ran (or failed) against the old state
    replaced.unlink()
    replaced.write_bytes(data)
    hashes.prefetch([(str(wrong), 10), (str(replaced), 300)], 2)
    got = hashes.digests([(str(wrong), os.lstat(wrong)), (str(replaced), os.lstat(replaced))], 2)
    hashes.close()
    assert got == {str(wrong): hashlib.sha256(data).hexdigest(), str(replaced): hashlib.sha256(data).hexdigest()}


def test_a_prefetch_skips_what_the_cache_knows(tmp_path: Path) -> None:
    """One changed file costs hashing that file: hashing ahead leaves known files alone."""
    files = [tmp_path / f"m{i}.py" for i in range(3)]
    for file in files:
        file.write_bytes(b"y" * 1000)
    first = HashCache()
    first.digests([(str(f), os.lstat(f)) for f in files], 2)
    first.close()
    files[0].write_bytes(b"z" * 1000)
    again = HashCache(first.entries)
    again.prefetch([(str(f), 1000) for f in files], 2)
    again.digests([(str(f), os.lstat(f)) for f in files], 2)
    again.settle()
    again.close()
    assert again.hashed_bytes == 1000


# -- files owned by two distributions; a discovery the registry cannot wrap ------------------


def write_record(dist: Dist) -> None:
    """The RECORD an installer writes (PEP 376 rows), from the files as they are now."""
    rows = []
    for path in dist.wheel_paths():
        data = dist.file(path).read_bytes()
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        rows.append(f"{path},sha256={digest},{len(data)}\n")
    (dist.dist_info / "RECORD").write_text("".join(rows) + f"{dist.dist_info.name}/RECORD,,\n")


def test_a_distribution_installed_over_a_signed_one_is_conflict_files(env: TrustEnv, site: Path) -> None:
    first = write_dist(site, "demo-backend", "1.0")
    first.sign(env.key)
    write_record(first)
    # a fork of it installed later, over the same package: other bytes in compiler.py and driver.py
    fork = write_dist(site, "demo-fork", "2.0", files={
        "demo_backend/compiler.py": b"class DemoBackend:\n    name = 'fork'\n",
        "demo_backend/driver.py": DRIVER_OF_FORK,
    })
    write_record(fork)
    reg = env.registry(site, policy="warn")
    (signed,) = [e for e in reg.entries if e.dist is not None and e.dist.name == "demo-backend"]
    assert signed.state == "excluded" and signed.reason is not None
    assert signed.reason.code == "conflict.files"
    message = signed.reason.message
    assert "demo-fork 2.0 and demo-backend 1.0 both own 3 file(s)" in message, message
    assert "the files on disk are demo-fork 2.0's (installed last)" in message
    # no source recorded (no direct_url.json): never a bare pin an index may answer with an unsigned build
    assert ("to keep demo-backend 1.0: `pip uninstall -y demo-fork` then reinstall demo-backend 1.0 from the "
            "wheel, index or mirror it came from (source unknown;") in message
    assert "to keep demo-fork 2.0: `pip uninstall -y demo-backend` then" in message
    assert "--no-deps demo-backend==1.0" not in message
    assert reg.hashed_bytes == 0  # decided before anything was hashed
    # the repair: the signed one reinstalled over the fork, and the verdict follows it (no stale cache)
    write_dist(site, "demo-backend", "1.0").sign(env.key)
    write_record(first)
    again = env.registry(site, policy="warn")
    assert [e.trust for e in again.entries if e.dist and e.dist.name == "demo-backend"] == ["verified"]


DRIVER_OF_FORK = b"class DemoDriver:\n    @staticmethod\n    def is_active():\n        return True\n"


def test_a_discovery_shape_the_registry_cannot_wrap_is_policy_unenforced(
    env: TrustEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    from triton_backend_runtime.loading import registry as process_registry
    from triton_backend_runtime.triton import integration, patch

    origin = "/site/triton/backends/__init__.py"
    why = patch.unwrappable(origin, "backends = discover_my_own_way()\n")
    assert why is not None and "the registry is not in use" in why and origin in why
    assert patch.unwrappable(origin, "_registered = _registry_backends()\n") is None  # the file is patched already
    monkeypatch.setenv("TRITON_BACKEND_POLICY", "strict")
    process_registry.reset()
    try:
        with pytest.raises(integration.RegistryUnavailable, match=r"\(policy\.unenforced\)$"):
            integration.refuse_unwrappable(origin, why)
        monkeypatch.setenv("TRITON_BACKEND_POLICY", "warn")
        process_registry.reset()
        integration.refuse_unwrappable(origin, why)
        assert [(p.code, p.path) for p in process_registry.get().problems] == [("policy.unenforced", origin)]
        assert not process_registry.get().healthy()
    finally:
        process_registry.reset()


# -- the plugin contract (schema 1.2; end to end in test_plugin_contract.py and real/) ---------


@pytest.mark.parametrize(("terms", "installed", "code"), [
    ({"built_for": "3.8.0+gitc01b6774"}, "3.9.0", "verify.plugin-triton"),
    ({"built_for": "3.9.0"}, None, "verify.plugin-triton"),
    ({"built_for": "3.9.0", "triton": "<3.9", "declared": True}, "3.9.0", "verify.plugin-range"),
])
def test_plugin_contract_reason(terms: dict[str, Any], installed: str | None, code: str) -> None:
    from triton_backend_runtime.base.errors import VerifyError
    from triton_backend_runtime.verification.contract import check_terms
    from triton_backend_runtime.verification.verdict import PluginTerms

    with pytest.raises(VerifyError) as caught:
        check_terms(PluginTerms(captured=True, name="p", version="1", **terms), installed, "/site/libp.so")
    assert (caught.value.code, caught.value.path) == (code, "/site/libp.so")
    check_terms(PluginTerms(captured=True, built_for="3.9.0+git1", triton=">=3.9"), "3.9.0", "/x")  # holds


@pytest.mark.parametrize(("kind", "code"), [("passes", "conflict.pass"), ("dialects", "conflict.dialect"),
                                            ("ops", "conflict.op")])
def test_plugin_registration_conflict(kind: str, code: str) -> None:
    from triton_backend_runtime.loading.conflicts import Claim, resolve

    first = Claim(0, "liba.so", "verified", 0, "a-plugin", "a-plugin 1.0", **{kind: ("shared", "a-only")})
    second = Claim(1, "libb.so", "verified", 1, "b-plugin", "b-plugin 1.0", **{kind: ("b-only", "shared")})
    # trusted alike, neither the core: neither registers it, whichever comes first
    for claims in ([second, first], [first, second]):
        assert {(e.key, f"conflict.{e.code}") for e in resolve([], claims)} == {(0, code), (1, code)}
    name_kind = code.split(".")[1]
    assert f"trust pin {name_kind}:shared DIST" in resolve([], [first, second])[0].detail
    (excluded,) = resolve([], [second, first], pins={(name_kind, "shared"): "b-plugin"})
    assert excluded.key == 0 and "pinned to b-plugin" in excluded.detail
    (excluded,) = resolve([], [second, replace(first, trust="unverified")])
    assert excluded.key == 0 and "b-plugin 1.0, which wins" in excluded.detail


def test_one_plugin_under_two_names_in_one_distribution_is_no_conflict() -> None:
    """triton 3.9.0 ships libMLIRDialectPlugin.so and .so.24.0git, one library copied (a wheel
    holds no symlinks): both stay admitted. The same claims from another distribution clash."""
    from triton_backend_runtime.loading.conflicts import Claim, resolve

    def claim(key: int, path: str, dist: str) -> Claim:
        return Claim(key, path, "verified", key, dist, f"{dist} 3.9.0", passes=("plugingpu_conversion",),
                     dialects=("plugin",))

    assert resolve([], [claim(0, "libP.so", "triton"), claim(1, "libP.so.24.0git", "triton")]) == []
    clash = [claim(0, "libP.so", "triton"), claim(1, "libQ.so", "fork")]
    assert {(e.key, e.code) for e in resolve([], clash)} == {(0, "pass"), (1, "pass")}  # neither is the core
    (excluded,) = resolve([], [replace(clash[0], core=True), clash[1]])
    assert (excluded.key, excluded.code) == (1, "pass") and "belongs to the Triton core" in excluded.detail


def test_required_plugin_stops_compilation() -> None:
    from triton_backend_runtime.triton.compilekey import PluginRequiredError, StagesHook

    with pytest.raises(PluginRequiredError) as caught:
        StagesHook("d", None, lambda: ["plugin p (p 1.0) is excluded: verify.plugin-range: ..."])()
    assert caught.value.code == "load.plugin-required"
    assert StagesHook("d", None, lambda: [])() == ("-backend-manifests-d", "d")


def test_triton_imported_before_the_hook_names_the_pth_that_did() -> None:
    """The whole case, in a real start-up, is in tests/runtime/test_hook_order.py."""
    from triton_backend_runtime.loading.hookorder import EarlyImport

    reason = EarlyImport("triton", "/site/triton/__init__.py", "/site/+hook.pth", ["/site/(early).pth"]).reason()
    assert (reason.code, reason.path) == ("policy.hook-late", "/site/(early).pth")
