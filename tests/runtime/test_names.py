"""One PEP 503 normaliser and one version comparison for both distributions (``names``)."""

from __future__ import annotations

import re

import packaging.utils
from hypothesis import given
from hypothesis import strategies as st
from triton_backend_runtime.base.names import canonicalize_name, same_version

NAMEISH = st.text(alphabet=st.sampled_from("aZ_-.9İß\u212a "), max_size=30) | st.text(max_size=30)


@given(NAMEISH)
def test_canonicalize_name_is_packagings_and_pep_503s(name: str) -> None:
    assert canonicalize_name(name) == packaging.utils.canonicalize_name(name)
    assert canonicalize_name(name) == re.sub(r"[-_.]+", "-", name).lower()


def test_canonicalize_name_examples() -> None:
    assert canonicalize_name("Demo_Triton.Backend") == "demo-triton-backend"
    assert canonicalize_name("a-_.-b") == "a-b"
    assert canonicalize_name("-" * 10_000) == "-"


def test_same_version_compares_pep_440_versions() -> None:
    assert same_version("1.0", "1.0.0")
    assert not same_version("1.0", "1.0.1")
    assert same_version("not a version", "not a version")
    assert not same_version("not a version", "1.0")


def test_same_version_takes_a_release_number_too_long_for_int() -> None:
    """``Version`` raises ``ValueError``, not ``InvalidVersion``, for a number past the
    interpreter's int-string limit: such a version is compared as text, not a crash."""
    huge = "1" + "0" * 5000
    assert same_version(huge, huge)
    assert not same_version(huge, "1.0")
