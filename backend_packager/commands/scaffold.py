"""``backend-packager init DIR``: a new vendor backend project that builds as it is.

The project is rendered from the jinja2 templates in ``templates/project/`` (installed as
``backend_packager/templates``). In template paths, ``__package__`` and ``__backend_id__``
stand for the Python package and the backend's identifier, and ``gitignore`` becomes
``.gitignore``. Every file is rendered in memory first, then the tree is written beside
``DIR`` and renamed into place, so a failure never leaves half a project.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path

from triton_backend_runtime.manifest import PROTOCOL_VERSION

from .. import __version__
from ..base import InputError

__all__ = ["DEFAULT_TRITON", "Project", "init", "project_for", "render", "template_root"]

_DIST_NAME = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?$")  # PEP 508 names
_BACKEND = re.compile(r"^[a-z][a-z0-9_]*$")
DEFAULT_TRITON = ">=3.9,<3.10"


@dataclass(frozen=True)
class Project:
    """The values the templates see."""

    name: str
    backend: str
    package: str
    triton: str = DEFAULT_TRITON
    protocol_version: str = PROTOCOL_VERSION
    packager_version: str = __version__

    @property
    def backend_id(self) -> str:
        return self.backend

    @property
    def class_prefix(self) -> str:
        return "".join(part.capitalize() for part in self.backend.split("_"))

    @property
    def device_env(self) -> str:
        return f"{self.backend.upper()}_BACKEND_DEVICES"

    def variables(self) -> dict[str, str]:
        return {**asdict(self), "backend_id": self.backend_id, "class_prefix": self.class_prefix,
                "device_env": self.device_env}


def project_for(directory: Path, name: str | None, backend: str | None, package: str | None) -> Project:
    """Defaults from the directory name: ``acme-backend`` -> backend ``acme``, package ``acme_backend``."""
    dist = name or directory.resolve().name
    if not _DIST_NAME.match(dist):
        raise InputError("name", dist, "not a valid distribution name (letters, digits, '.', '_', '-')")
    stem = re.sub(r"[-_.]?(triton[-_.]?)?backend$", "", dist.lower()) or dist.lower()
    chosen = backend or re.sub(r"[^a-z0-9_]", "_", stem).lstrip("_0123456789") or "mybackend"
    if not _BACKEND.match(chosen):
        raise InputError("backend", chosen, "a backend name must be lowercase letters, digits and '_'")
    pkg = package or f"{chosen}_backend"
    if not pkg.isidentifier():
        raise InputError("package", pkg, "not a valid Python package name")
    return Project(dist, chosen, pkg)


def template_root() -> Path:
    """The project templates: package data beside this module in an installed wheel
    (``backend_packager/templates``), ``templates/`` at the top of a source checkout.

    Looked up by path, not ``importlib.resources.files``: the template directories hold
    no ``__init__.py``, and for such a namespace package ``files`` gives a MultiplexedPath
    whose ``str`` is not a path, so an installed ``init`` would render nothing."""
    here = Path(__file__).resolve().parent.parent  # the package: commands/ is one below it
    for root in (here / "templates" / "project", here.parent / "templates" / "project"):
        if root.is_dir():
            return root
    raise InputError("templates", str(here / "templates"), "the project templates are not installed with the "
                     "packager; reinstall triton-backend-packager")


def render(project: Project, root: Path | None = None) -> dict[str, str]:
    """Every output file's relative path and text, rendered before anything is written."""
    try:
        import jinja2
    except ImportError:
        # Only init needs jinja2, so a vendor's isolated build environment goes without it.
        raise InputError("dependency", "jinja2", "backend-packager init renders its templates with jinja2: "
                         "pip install 'triton-backend-packager[init]'") from None

    root = root or template_root()
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(root)), undefined=jinja2.StrictUndefined, keep_trailing_newline=True,
        autoescape=False,
    )
    values = project.variables()
    files = {}
    for template in sorted(p.relative_to(root).as_posix() for p in root.rglob("*.j2")):
        out = template[: -len(".j2")].replace("__package__", project.package.replace(".", "/"))
        out = out.replace("__backend_id__", project.backend_id)
        out = re.sub(r"(^|/)gitignore$", r"\1.gitignore", out)
        files[out] = env.get_template(template).render(**values)
    return files


def init(directory: Path, project: Project) -> list[str]:
    """Write the project into ``directory`` (absent or empty); return the files written."""
    if directory.exists() and (not directory.is_dir() or any(directory.iterdir())):
        raise InputError("exists", str(directory), "exists and is not an empty directory")
    files = render(project)
    if "pyproject.toml" not in files:
        raise InputError("templates", str(template_root()), "no project template found (pyproject.toml.j2)")
    directory.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{directory.name}.", dir=directory.parent))
    try:
        for rel, text in files.items():
            path = staging / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
        os.chmod(staging, 0o755)
        if directory.exists():
            directory.rmdir()
        staging.rename(directory)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return sorted(files)
