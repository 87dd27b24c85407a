"""``doctor`` and ``list``: what Triton would load, rendered from the registry's typed report
(:class:`..loading.Report`); ``--json`` prints its ``to_dict()``."""

from __future__ import annotations

import argparse
import json
import os
import sys
from dataclasses import asdict
from typing import TYPE_CHECKING, Any

from ..base import BAD_STATES, STRICT, Reason, describe, printable, record
from ..loading import NEVER_SERVED, BackendRow, PluginRow, Report
from ..loading import registry as reg
from ..site import DEFAULT_PACKAGE
from .grammar import EXIT_FAILED, EXIT_OK, JSON_FORMAT

if TYPE_CHECKING:
    from ..loading import CoreRow
    from ..verification import PluginTerms
from .inputs import PROG, package_arg

__all__ = ["ImportOutcome", "cmd_doctor", "cmd_list", "doctor_entry", "hook_lines"]


@record()
class ImportOutcome:
    """What the doctor's own ``import <package>.backends`` did, in this process as in a user's."""

    #: The core check ran before ``<package>/__init__.py`` (the ``.pth`` hook watches it).
    core_checked: bool = False
    #: Why strict refused the import (the core, a plugin path, a discovery it cannot wrap).
    refused: Reason | None = None
    #: A Triton without ``<package>.backends`` (2.x): no backend registry to wrap.
    no_registry: bool = False


_OUTCOME = ImportOutcome()


def _exercise(rehash: bool, package: str = DEFAULT_PACKAGE) -> reg.Registry:
    """Import Triton the way a user does (``<package>.backends``, ``triton.backends`` unless a
    vendor release renamed it), so the registry sees what Triton loads; what the import did is
    kept in :data:`_OUTCOME`."""
    import importlib

    from ..triton import importwatch

    registry = reg.get()
    registry.verify(rehash=rehash, package=package)
    try:
        tb = importlib.import_module(f"{package}.backends")  # through the hook or the patch, when installed
    except ModuleNotFoundError as exc:
        _OUTCOME.core_checked = importwatch.watching(package)  # a renamed one is watched once found
        if exc.name != f"{package}.backends" or package not in sys.modules:
            registry.problems.append(Reason("load.triton", package, describe(exc)))
        else:
            _OUTCOME.no_registry = True  # the core imported; it has no backends to discover
        return registry
    except Exception as exc:
        _OUTCOME.core_checked = importwatch.watching(package)
        refused = getattr(exc, "reason", None)
        if isinstance(exc, ImportError) and isinstance(refused, Reason) and registry.policy == STRICT:
            _OUTCOME.refused = refused
        else:
            registry.problems.append(Reason("load.triton", package, describe(exc)))
        return registry
    _OUTCOME.core_checked = importwatch.watching(package)
    if not registry.used_by_triton and registry.policy != "off":
        # Triton loaded its backends itself (no hook): show what the registry would admit.
        registry.load(lambda name, package: _triton_load(tb, package))
    from ..triton import probe_active

    probe_active(registry)
    return registry


def _triton_load(tb: Any, package: str) -> Any:
    import importlib

    compiler = importlib.import_module(f"{package}.compiler")
    driver = importlib.import_module(f"{package}.driver")
    return tb.Backend(
        tb._find_concrete_subclasses(compiler, tb.BaseBackend), tb._find_concrete_subclasses(driver, tb.DriverBase)
    )


def _healthy(doc: Report) -> bool:
    rows: list[BackendRow | PluginRow] = [*doc.backends, *doc.plugins]
    return (not doc.problems and _OUTCOME.refused is None and not (_OUTCOME.no_registry and doc.core)
            and all(r.state not in BAD_STATES or _never_loads(r, doc) for r in rows) and not _unenforced(doc))


def _unenforced(doc: Report) -> bool:
    """strict was asked for, but ``import triton`` goes through neither the registry nor the
    core check. A refusal is enforcement; so is a verified core of a Triton with no backend
    registry (2.x), checked by the hook."""
    if doc.policy != STRICT or doc.used_by_triton or _OUTCOME.refused is not None:
        return False
    return not (_OUTCOME.no_registry and _OUTCOME.core_checked)


def _never_loads(row: BackendRow | PluginRow, doc: Report) -> bool:
    """A plugin bundled with the Triton core that this core's own libtriton cannot serve: it
    is never handed over (the core's plugins stay Triton's) and nothing the user can change
    makes it load. A note, not a failure."""
    core = doc.triton_core
    return (isinstance(row, PluginRow) is True and core is not None and row.dist_info == core.dist_info
            and row.reason is not None and row.reason.code in NEVER_SERVED)


def cmd_list(args: argparse.Namespace) -> int:
    doc = _exercise(args.rehash, package_arg(args)).report()
    if args.json:
        print(json.dumps({"format": JSON_FORMAT, **doc.to_dict()}, indent=1, sort_keys=True))
    else:
        for row in doc.backends:
            reason = f"\t{row.reason.code}" if args.verbose and row.reason else ""
            print(f"{row.name}\t{row.distribution} {row.version}\t{row.trust}\t{row.state}{reason}")
        for plugin in doc.plugins:
            print(f"plugin {plugin.path}\t{plugin.distribution} {plugin.version}\t{plugin.trust}\t{plugin.state}")
    return 0 if _healthy(doc) else 1


def cmd_doctor(args: argparse.Namespace) -> int:
    from ..autohook import pth_path

    registry = _exercise(args.rehash, package_arg(args))
    doc = registry.report()
    hook = "installed" if os.path.exists(pth_path()) else "not installed"
    print("Triton backend doctor")
    print(f"  {doc.package + ':':<12} {_core_line(doc.triton_core, doc.package)}")
    print(f"  policy:      {doc.policy} (TRITON_BACKEND_POLICY = strict | warn | off)")
    print(f"  registry:    used by import {doc.package}: {_used(doc)}; .pth hook {hook}")
    if _OUTCOME.refused is not None:
        why = _OUTCOME.refused
        print(f"  import:      strict refused import {doc.package}: {why.code} {why.path}")
        print(f"               {why.message}")
    for line in hook_lines(pth_path()):
        print(f"               hook: {line}")
    print(f"  trust files: {', '.join(doc.trust_sources) or 'none (no key is trusted)'}")
    print(f"  cache:       {doc.cache}")
    for note in doc.notes:
        print(f"               note: {note.path}: {note.message} ({note.code})")
    for renamed in doc.renamed_cores:
        print(f"               note: a Triton is installed as {renamed.package} ({renamed.distribution}): "
              f"{PROG} doctor --package {renamed.package}")
    if doc.manifest_digest:
        print(f"  cache key:   manifests {doc.manifest_digest[:16]} folded into Triton's compile cache key")
    print("\nBackends:")
    if not doc.backends:
        print("  none discovered")
    for row in doc.backends:
        active = {True: "active", False: "inactive", None: "-"}[row.active]
        print(f"  {row.name:<10} {row.distribution} {row.version}  [{row.trust}, {row.state}, "
              f"{active}] via {row.source} {row.package}")
        _details(row)
    print("\nPlugins:")
    if not doc.plugins:
        print("  none")
    for plugin in doc.plugins:
        how = f", {plugin.handed_over}" if plugin.handed_over else ""
        print(f"  {plugin.path} ({plugin.api}) {plugin.distribution} {plugin.version}  [{plugin.trust}, "
              f"{plugin.state}{how}]")
        _details(plugin)
        if _never_loads(plugin, doc):
            print(f"      note: bundled with {doc.package}, whose own libtriton.so cannot serve it: it is never "
                  "loaded, and nothing needs doing")
        for line in _contract_lines(plugin.contract):
            print(f"      {line}")
    if doc.problems:
        print("\nProblems:")
        for problem in doc.problems:
            print(f"  {problem.path}: {problem.message} ({problem.code})")
    if _unenforced(doc):
        if not doc.problems:
            print("\nProblems:")
        print(f"  policy strict is not enforced: import {doc.package} does not go through the registry "
              f"(run `{PROG} hook install`, or apply the patch in hooks/)")
    healthy = _healthy(doc)
    print(f"\n{'OK' if healthy else 'ATTENTION: see the reasons above'}")
    return 0 if healthy else 1


def _used(doc: Report) -> str:
    if doc.used_by_triton:
        return "yes"
    if _OUTCOME.refused is not None:
        return "no: strict refused the import (enforced; see import below)"
    if _OUTCOME.no_registry:
        checked = "verified by the .pth hook" if _OUTCOME.core_checked else "not checked (no .pth hook)"
        return f"no backend registry in this Triton (before 3.0): the core is {checked}"
    return "no (Triton discovered its backends itself)"


def _import_row() -> dict[str, Any]:
    refused = _OUTCOME.refused
    return {"core_checked": _OUTCOME.core_checked, "refused": asdict(refused) if refused else None,
            "no_registry": _OUTCOME.no_registry}


def _contract_lines(terms: PluginTerms | None) -> list[str]:
    """A plugin's contract: what was captured from the library at build time, what its
    vendor declared (schema 1.2; nothing before)."""
    if terms is None:
        return ["contract:  none recorded (manifest before schema 1.2)"]
    if terms.captured:
        lines = [f"captured:  {terms.name} {terms.version}, built for Triton {terms.built_for}; "
                 f"passes {', '.join(terms.passes) or 'none'}; dialects {', '.join(terms.dialects) or 'none'}; "
                 f"ops {len(terms.ops)}",
                 "  (as the plugin's own code reported it when it was signed: nothing the signer checked)"]
    else:
        lines = [f"captured:  no ({terms.capture_note or 'not recorded'})"]
    if not terms.declared:
        return [*lines, "declared:  nothing (defaults: any Triton, phase import, on-failure fallback)"]
    return [*lines, f"declared:  triton {terms.triton or '(any)'}, phase {terms.phase}, "
                    f"on-failure {terms.on_failure}; placement {'; '.join(terms.placement) or 'none'}"]


def _core_line(core: CoreRow | None, package: str = DEFAULT_PACKAGE) -> str:
    """What ``import <package>`` imports: its distribution (found by the file, not the name)."""
    if core is None:
        return f"not installed (no installed distribution's RECORD lists the {package}/__init__.py on sys.path)"
    version = core.version_attr or "unknown"
    line = f"{core.distribution} {core.version} ({package}.__version__ {version}; {core.init})"
    also = core.also_claimed_by or []
    line += f"; its files are also claimed by {', '.join(also)}" if also else ""
    if core.libtriton is None:
        return line + f"; no {package}/_C/libtriton.so beside it"
    if core.libtriton_bytes == 0:
        return (line + f"; its {package}/_C/libtriton.so is empty (0 bytes): this Triton fetches its native "
                "code at import, from outside the verified files (strict refuses a libtriton mapped from "
                "elsewhere: verify.outside)")
    return line


#: How a row's signatures were judged, apart from why it was rejected (verdict.signature).
_SIGNATURE_LABELS = {"trusted": ("signed by", " (a trusted key)"), "untrusted": ("signatures", " (not a trusted key)")}


def _details(row: BackendRow | PluginRow) -> None:
    if row.signers:
        label, trust = _SIGNATURE_LABELS.get(row.signature or "", ("signatures", ""))
        print(f"      {label}: {', '.join(row.signers)}{trust}")
    if row.identity:
        print(f"      keyless signer: {row.identity['san']} (issuer {row.identity['issuer']}; trusted identity "
              f"{row.identity['id'][:16]}: {row.identity['pattern']})")
    if row.note:
        print(f"      note: {row.note}")
    if row.coverage:
        covers = "every file" if row.coverage == "all" else "native files only"
        print(f"      manifest covers: {covers}")
    # what its signer says it checked: as trusted as the row's signature, so only a claim
    # where no trusted signature verified
    checked = "checked before the mirror re-signed it" if row.signature == "trusted" else "an unverified claim"
    for upstream in row.upstream:
        print(f"      upstream: {printable(upstream['identity'])} (issuer {printable(upstream['issuer'])}, "
              f"{upstream['kind']}: {checked})")
    if row.reason:
        reason = row.reason
        print(f"      reason: {reason.path}: {reason.message} ({reason.code})")


def hook_lines(path: str) -> list[str]:
    """Where the hook's .pth stands among the .pth files site runs, and what this process saw."""
    from ..autohook import OLD_PTH_NAMES
    from ..base import printable
    from ..loading import CODE, position

    where = position(path, OLD_PTH_NAMES)
    lines = []
    if where["installed"]:
        before = where["before"]
        lines.append("runs first of the .pth files" if not before else
                     f"runs after {len(before)} .pth file(s): {', '.join(before[:5])}")
        lines += [f"note: {p} runs before the hook and imports triton: strict stops every process "
                  f"({CODE})" for p in where["before_importing"]]
    lines += [f"note: {p} is the hook's old name, run after other .pth files: `{PROG} hook install` "
              "replaces it" for p in where["old_names"]]
    seen = where["imported_before_hook"]
    if seen is not None:
        by = ", ".join(seen["by"]) or "code that ran before the hook"
        lines.append(f"triton was imported before the hook in this process, by {by} ({CODE})")
    return [printable(line) for line in lines]  # .pth names are anyone's: one line each


def doctor_entry(args: argparse.Namespace) -> int:
    if not args.json:
        code = int(cmd_doctor(args))
        if args.verbose:
            _doctor_details(reg.get().report())
        return code
    from ..autohook import pth_path

    doc = _exercise(args.rehash, package_arg(args)).report()
    from ..autohook import OLD_PTH_NAMES
    from ..loading import position

    healthy = _healthy(doc)
    out = {"format": JSON_FORMAT, "healthy": healthy, "enforced": not _unenforced(doc), "import": _import_row(),
           "hook": position(pth_path(), OLD_PTH_NAMES), **doc.to_dict()}
    print(json.dumps(out, indent=1, sort_keys=True))
    return EXIT_OK if healthy else EXIT_FAILED


def _doctor_details(doc: Report) -> None:
    print("\nDetails:")
    print(f"  discovery:   {doc.discovery}")
    print(f"  cache file:  {doc.cache}")
    print(f"  manifests:   {doc.manifest_digest or 'none'}")
    core = doc.triton_core.to_dict() if doc.triton_core else {}
    for key in sorted(core):
        print(f"  core {key}: {core[key]}")
