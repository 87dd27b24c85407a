"""What the registry keeps per backend and per plugin, and the plan it hands the Triton layer.

An entry carries the verdict of its distribution (:attr:`Entry.verdict`, the one typed shape
from verification) and what became of it since: ``trust`` (the verification outcome, or
``legacy``/``rejected`` for this one entry) and ``state`` (see :mod:`..base.vocab`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import field
from typing import TYPE_CHECKING, Any

from ..base import record

if TYPE_CHECKING:
    from ..base import Reason, State, Trust
    from ..site import Distribution
    from ..verification import PluginClaim, PluginTerms, Verdict

__all__ = ["NEVER_SERVED", "BackendWarning", "Entry", "Loader", "Plan", "PluginEntry"]

#: Why a plugin bundled with the Triton core is refused when that core's own libtriton cannot
#: serve it (missing symbols): it can never load, and never does.
NEVER_SERVED = ("verify.symbols",)

#: Triton's loader: ``load(name, package)`` -> its ``Backend``.
Loader = Callable[[str, str], Any]


class BackendWarning(UserWarning):
    """A backend or plugin was excluded or failed; the message says which and why."""


@record(eq=False, repr=False)  # compared by identity
class Entry:
    """One backend: where it came from, what verification said, where it is now."""

    name: str
    package: str
    source: str
    dist: Distribution | None
    order: int
    #: Its distribution's verdict; None for a distribution without a manifest (legacy).
    verdict: Verdict | None = None
    trust: Trust = "discovered"
    state: State = "discovered"
    reason: Reason | None = None
    note: str = ""
    targets: list[str] = field(default_factory=list)
    backend: Any = None
    active: bool | None = None
    inactive_reason: str = ""

    @property
    def signers(self) -> list[str]:
        return list(self.verdict.signers) if self.verdict else []

    def where(self) -> str:
        return self.dist.dist_info if self.dist else self.package

    def label(self) -> str:
        return self.dist.label() if self.dist else "(no distribution)"


@record(eq=False, repr=False)  # compared by identity
class PluginEntry:
    """One plugin library of a distribution with a manifest: the manifest's claim and its verdict."""

    dist: Distribution
    claim: PluginClaim
    verdict: Verdict
    trust: Trust
    state: State = "discovered"
    reason: Reason | None = None
    handed_over: str = ""
    note: str = ""

    @property
    def path(self) -> str:
        return self.claim.path

    @property
    def file(self) -> str:
        return self.claim.file

    @property
    def api(self) -> str:
        return self.claim.api

    @property
    def name(self) -> str | None:
        return self.claim.name

    @property
    def exports(self) -> list[str]:
        return self.claim.exports

    @property
    def terms(self) -> PluginTerms | None:
        """The contract (schema 1.2): captured at build time, declared by the vendor; None before."""
        return self.claim.terms

    @property
    def signers(self) -> list[str]:
        return list(self.verdict.signers)

    def where(self) -> str:
        return self.file

    def required(self) -> bool:
        """Whether compiling must stop when this plugin is not loaded (``on-failure = "fail"``)."""
        return self.terms is not None and self.terms.on_failure == "fail"

    def label(self) -> str:
        return self.dist.label()


@record(eq=False, repr=False)
class Plan:
    """What the registry decided, for the Triton layer to act on (``triton.integration``)."""

    #: Triton's backend table: name -> the ``Backend`` its loader returned.
    backends: dict[str, Any]
    #: Admitted plugins, to be handed over.
    plugins: list[PluginEntry]
    #: The installed Triton's version as Triton reports it, and its core distribution.
    triton_version: str | None
    core: Distribution | None
    #: Set by the Triton layer once it has acted on the plan (a reimport must not act twice).
    acted: bool = False
