"""Installed backend distributions in a temporary directory, with real signed manifests.

The load side's test bed, without pip and without Triton: a site directory as an installer
leaves it (``<package>/`` files and ``<name>-<version>.dist-info/`` with METADATA and
``entry_points.txt``), and a manifest that is a real DSSE envelope over a real in-toto
statement, described from the files as they are on disk (real sha256 and size; ELF facts
scanned by the packager's own ``artifact_from_file``) and signed with real Ed25519 keys
made by ``backend_packager.manifest.signing``. :class:`TrustEnv` points the runtime's trust store,
cache and policy at the temporary directory, so nothing touches this machine.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import pytest
from packaging.tags import sys_tags
from triton_backend_runtime.base.layout import MANIFEST_FILENAME
from triton_backend_runtime.loading.registry import Entry, Registry
from triton_backend_runtime.manifest import model as m
from triton_backend_runtime.site import discovery
from triton_backend_runtime.site.installed import HashCache
from triton_backend_runtime.triton.integration import admit
from triton_backend_runtime.trust import dsse
from triton_backend_runtime.trust.keys import load_trust_store
from triton_backend_runtime.trust.statement import statement_bytes
from triton_backend_runtime.verification.distribution import Context, verify_distribution
from triton_backend_runtime.verification.verdict import Verdict

from backend_packager.manifest import signing
from backend_packager.scanning.artifacts import artifact_from_file

#: The most specific wheel tag of this interpreter: what a wheel built here would carry.
TAG = str(next(iter(sys_tags())))

COMPILER = "class DemoBackend:\n    name = {name!r}\n"
DRIVER = "class DemoDriver:\n    @staticmethod\n    def is_active():\n        return False\n"


@dataclass(frozen=True)
class Key:
    """A vendor key: the private key for signing and the ``.pub`` line the trust store reads."""

    signing: signing.SigningKey
    pub: Path

    @property
    def keyid(self) -> str:
        return self.signing.public.keyid


def make_key(directory: Path, name: str) -> Key:
    directory.mkdir(parents=True, exist_ok=True)
    signing.generate(directory / f"{name}.pem", directory / f"{name}.pub", name, None)
    return Key(signing.load(directory / f"{name}.pem"), directory / f"{name}.pub")


@dataclass
class Dist:
    """One installed distribution under ``site``; its wheel paths are ``/``-separated."""

    site: Path
    name: str
    version: str
    backends: dict[str, str]
    #: Top-level directories the distribution installs (its import packages).
    tops: list[str] = field(default_factory=list)

    @property
    def dist_info(self) -> Path:
        return self.site / f"{self.name.replace('-', '_')}-{self.version}.dist-info"

    @property
    def manifest_path(self) -> Path:
        return self.dist_info / MANIFEST_FILENAME

    def file(self, wheel_path: str) -> Path:
        return self.site.joinpath(*wheel_path.split("/"))

    def packages(self) -> list[str]:
        return sorted({*self.tops, *(p.split(".")[0] for p in self.backends.values())})

    def wheel_paths(self) -> list[str]:
        """Every regular file the wheel would hold: the packages and the ``.dist-info``
        (without the files installers write and the manifest); symlinks are not followed."""
        paths: list[str] = []
        for top in [*self.packages(), self.dist_info.name]:
            for here, dirs, files in os.walk(self.site / top):
                dirs[:] = sorted(d for d in dirs if d != "__pycache__")
                for name in sorted(files):
                    full = Path(here) / name
                    if not full.is_symlink() and full.is_file():
                        paths.append(full.relative_to(self.site).as_posix())
        return [p for p in sorted(paths) if not m.is_installer_file(p)]

    def describe(self, paths: Sequence[str] | None = None) -> m.Manifest:
        """The manifest a 1.1 build of these files would carry (coverage ``all``)."""
        artifacts = [artifact_from_file(self.file(p), p) for p in (self.wheel_paths() if paths is None else paths)]
        plugins = [m.Plugin(path=a.path, api=a.elf.plugin.api) for a in artifacts if a.elf and a.elf.plugin]
        backends = [
            m.Backend(name=n, package=p, compiler=f"{p}.compiler:DemoBackend", driver=f"{p}.driver:DemoDriver",
                      targets=[n])
            for n, p in self.backends.items()
        ]
        return m.Manifest(
            schema_version=m.SCHEMA_VERSION, name=self.name, version=self.version, tags=[TAG],
            protocol_version="1.0", requirements=m.Requirements(triton=""), backends=backends, plugins=plugins,
            artifacts=artifacts, build=m.Build(tool="tests", tool_version="0"),
            provenance=m.Provenance(kind="build", source=None), coverage=m.COVERAGE_ALL,
        )

    def seal(self, manifest: m.Manifest, *keys: Key) -> bytes:
        """Write ``manifest`` signed by ``keys`` (hash-only without any); returns the envelope."""
        return self.write_envelope(signing.seal_with(manifest, [k.signing for k in keys]))

    def sign(self, *keys: Key, edit: Callable[[m.Manifest], Any] | None = None) -> m.Manifest:
        """Describe the files as they are now, ``edit`` the manifest, seal it with ``keys``."""
        manifest = self.describe()
        if edit is not None:
            edit(manifest)
        self.seal(manifest, *keys)
        return manifest

    def seal_statement(self, statement: dict[str, Any] | bytes, *keys: Key,
                       payload_type: str = dsse.PAYLOAD_TYPE) -> bytes:
        """Sign any statement (a hand-edited one) exactly as the packager signs a real one."""
        body = statement if isinstance(statement, bytes) else json.dumps(statement, sort_keys=True).encode()
        return self.write_envelope(seal_payload(body, keys, payload_type))

    def write_envelope(self, data: bytes) -> bytes:
        self.manifest_path.write_bytes(data)
        return data

    def distribution(self) -> discovery.Distribution:
        """This distribution, as discovery finds it on its site."""
        found = discovery.discover([str(self.site)], in_tree=False)
        return next(d for d in found.distributions if d.dist_info == str(self.dist_info))


def write_record(dist: Dist) -> None:
    """The RECORD an installer writes (PEP 376 rows), from the files as they are now."""
    from backend_packager.formats.records import hash_field

    rows = []
    for path in dist.wheel_paths():
        data = dist.file(path).read_bytes()
        rows.append(f"{path},{hash_field(hashlib.sha256(data).hexdigest())},{len(data)}\n")
    (dist.dist_info / "RECORD").write_text("".join(rows) + f"{dist.dist_info.name}/RECORD,,\n")


def seal_payload(body: bytes, keys: Sequence[Key], payload_type: str = dsse.PAYLOAD_TYPE) -> bytes:
    message = dsse.pae(payload_type, body)
    signatures = tuple(dsse.Signature(k.keyid, k.signing.private.sign(message)) for k in keys)
    return dsse.encode(dsse.Envelope(body, payload_type, signatures))


def statement_of(manifest: m.Manifest) -> dict[str, Any]:
    """The statement the packager signs, as JSON data to edit."""
    doc: dict[str, Any] = json.loads(statement_bytes(manifest))
    return doc


def write_dist(
    site: Path,
    name: str = "demo-backend",
    version: str = "1.0",
    backends: dict[str, str] | None = None,
    files: Mapping[str, bytes | Path] | None = None,
    *,
    entry_points: bool = True,
) -> Dist:
    """A distribution as pip installs it: each backend package (``__init__``, ``compiler``,
    ``driver``), ``files`` (bytes, or a file to copy, by wheel path), METADATA and
    ``entry_points.txt``."""
    backends = {"demo": "demo_backend"} if backends is None else backends
    dist = Dist(site, name, version, backends)
    members: dict[str, bytes | Path] = {}
    for backend, package in backends.items():
        base = package.replace(".", "/")
        members[f"{base}/__init__.py"] = b""
        members[f"{base}/compiler.py"] = COMPILER.format(name=backend).encode()
        members[f"{base}/driver.py"] = DRIVER.encode()
    members.update(files or {})
    dist.tops = sorted({p.split("/")[0] for p in members if "/" in p})
    info = dist.dist_info.name
    members[f"{info}/METADATA"] = f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n\n".encode()
    if entry_points and backends:
        lines = "".join(f"{k} = {v}\n" for k, v in backends.items())
        members[f"{info}/entry_points.txt"] = f"[triton.backends]\n{lines}".encode()
    for path, content in members.items():
        target = dist.file(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(content.read_bytes() if isinstance(content, Path) else content)
    return dist


@dataclass
class TrustEnv:
    """Trust store, verdict cache and policy of the runtime, all under ``root``."""

    root: Path
    monkeypatch: pytest.MonkeyPatch
    key: Key

    @classmethod
    def make(cls, root: Path, monkeypatch: pytest.MonkeyPatch) -> TrustEnv:
        key = make_key(root / "keys", "vendor")
        env = cls(root, monkeypatch, key)
        env.trust.mkdir(parents=True)
        (env.trust / "vendor.pub").write_bytes(key.pub.read_bytes())
        env.cache.mkdir(mode=0o700)
        os.chmod(env.cache, 0o700)
        for name in ("TRITON_BACKEND_POLICY", "TRITON_BACKEND_REHASH", "TRITON_BACKENDS_IN_TREE", "XDG_CACHE_HOME"):
            monkeypatch.delenv(name, raising=False)
        # the system trust directory is <sys.prefix>/etc/triton-backend/trusted: this machine's is not read
        monkeypatch.setattr(sys, "prefix", str(root / "prefix"))
        monkeypatch.setenv("XDG_CONFIG_HOME", str(root / "config"))
        monkeypatch.setenv("TRITON_BACKEND_TRUSTED_KEYS", str(env.trust))
        monkeypatch.setenv("TRITON_BACKEND_CACHE_DIR", str(env.cache))
        # a plugin handed over without Triton lands in this variable: set it, so it is restored
        monkeypatch.setenv("TRITON_PLUGIN_PATHS", "")
        return env

    @property
    def trust(self) -> Path:
        return self.root / "trust"

    @property
    def cache(self) -> Path:
        return self.root / "cache"

    def cache_file(self) -> Path:
        from triton_backend_runtime.verification.cache import cache_file

        return Path(cache_file())

    def context(self, triton_version: str | None = None, libtriton: str | None = None,
                hashes: HashCache | None = None) -> Context:
        store, problems = load_trust_store()
        assert not problems, problems
        return Context(store, triton_version, libtriton, hashes or HashCache(), 2)

    def verify(self, dist: Dist, ctx: Context | None = None) -> Verdict:
        return verify_distribution(dist.distribution(), ctx or self.context())

    def registry(self, *sites: Path, policy: str | None = None, loader: Callable[[str, str], Any] | None = None,
                 rehash: bool = False) -> Registry:
        """A new registry over ``sites`` (first on ``sys.path``), loaded under ``policy``."""
        self.monkeypatch.setattr(sys, "path", [*map(str, sites), *sys.path])
        if policy is None:
            self.monkeypatch.delenv("TRITON_BACKEND_POLICY", raising=False)
        else:
            self.monkeypatch.setenv("TRITON_BACKEND_POLICY", policy)
        self.monkeypatch.setenv("TRITON_BACKEND_REHASH", "1" if rehash else "0")
        reg = Registry()
        admit(reg, loader or stub_loader)  # the registry's plan, acted on as Triton's import does
        return reg


class StubDriver:
    """A driver that is never active (what Triton's selection asks of a backend)."""

    @staticmethod
    def is_active() -> bool:
        return False


@dataclass(frozen=True)
class Loaded:
    """What :func:`stub_loader` hands back instead of importing anything (Triton's
    ``Backend(compiler, driver)`` shape, as far as the registry and selection look)."""

    name: str
    package: str
    driver: ClassVar[type] = StubDriver


def stub_loader(name: str, package: str) -> Loaded:
    return Loaded(name, package)


def import_loader(name: str, package: str) -> Any:
    """Import the backend's compiler module, as Triton does."""
    import importlib

    return importlib.import_module(f"{package}.compiler")


@pytest.fixture(autouse=True)
def no_triton_imported(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Trees found by the finders, not through a ``triton`` already imported; what a test
    imports from its tree is forgotten after it. A module takes it by assignment
    (``_no_triton_imported = disttree.no_triton_imported``): autouse there."""
    for name in [n for n in sys.modules if n == "triton" or n.startswith("triton.")]:
        monkeypatch.delitem(sys.modules, name)
    before = set(sys.modules)
    yield
    for name in set(sys.modules) - before:
        if name == "triton" or name.startswith("triton."):
            sys.modules.pop(name, None)


def entry(reg: Registry, name: str, distribution: str | None = None) -> Entry:
    """The one entry of the registry named ``name`` (of ``distribution``, when given)."""
    found = [e for e in reg.entries
             if e.name == name and (distribution is None or (e.dist is not None and e.dist.name == distribution))]
    assert len(found) == 1, [(e.name, e.label()) for e in reg.entries]
    return found[0]


def code_of(item: Entry) -> str | None:
    return item.reason.code if item.reason else None


def codes(reasons: Sequence[Any]) -> list[str]:
    """The reason codes of ``reasons`` (a registry's problems or notes), in order."""
    return [r.code for r in reasons]
