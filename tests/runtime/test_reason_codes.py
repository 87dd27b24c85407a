"""Every reason code the runtime can give has a test that asserts it.

The codes are read from the runtime's sources and the assertions from the tests' sources, both
with :mod:`ast` (:mod:`helpers.reasoncodes`): a code with digits (``verify.sha256``) is a
code, and a code mentioned in a comment, a docstring or a string outside an ``assert`` is not
an assertion. A code counts as asserted when an ``assert`` statement of some test module
holds it, when a ``@case("code", ...)`` table entry names it (the table's test asserts each
entry's code), or when a ``parametrize`` value holds it and the test asserts on that parameter.
"""

from __future__ import annotations

import ast

from helpers import reasoncodes


def test_every_code_the_runtime_raises_is_asserted_by_a_test() -> None:
    """A new code without a test that asserts it fails here."""
    asserted = reasoncodes.asserted_codes()
    missing = sorted(c for c in reasoncodes.raised_codes() if c not in asserted)
    assert missing == [], f"reason codes no test asserts: {missing}"


def test_the_collector_reads_codes_with_digits_and_every_family() -> None:
    raised = reasoncodes.raised_codes()
    assert {"verify.sha256", "signature.too-large", "cache.too-large", "conflict.files", "trust.scope"} <= raised
    assert {c.split(".")[0] for c in raised} >= {"manifest", "signature", "trust", "verify", "conflict", "load",
                                                  "policy", "select", "cache"}


SAMPLE = '''
import pytest

# "verify.comment" only in a comment
MENTIONED = "verify.mentioned"
TABLE = [("x", "verify.tabled")]


def helper() -> str:
    """Says "verify.docstring"."""
    return "verify.returned"


@case("verify.cased", "a-case")
def setup(tree):
    return None


def test_asserts() -> None:
    assert reason.code == "verify.asserted"
    assert (code, path) == ("verify.in-a-tuple", "p")


@pytest.mark.parametrize("code", ["verify.parametrized"])
def test_parametrized(code: str) -> None:
    assert verdict.code == code


@pytest.mark.parametrize(("name", "code"), TABLE)
def test_by_table(name: str, code: str) -> None:
    assert run(name).code == code


@pytest.mark.parametrize("code", ["verify.never-compared"])
def test_not_asserting(code: str) -> None:
    run(code)
'''


def test_an_assertion_counts_a_mention_does_not() -> None:
    found = {c for c in reasoncodes.asserted_in(ast.parse(SAMPLE)) if c.startswith("verify.")}
    assert found == {"verify.cased", "verify.asserted", "verify.in-a-tuple", "verify.parametrized", "verify.tabled"}
