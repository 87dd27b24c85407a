"""The grammar both CLIs share (``cligrammar``) and the one exception-to-line (``errors.describe``)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from triton_backend_runtime.base.errors import describe
from triton_backend_runtime.cli.grammar import EXIT_BROKEN_PIPE, internal_error

BIN = Path(sys.executable).parent


def test_describe_is_one_bounded_line_with_the_cause() -> None:
    try:
        try:
            {}["a\nb"]
        except KeyError as inner:
            raise ValueError("x" * 500) from inner
    except ValueError as exc:
        line = describe(exc)
    assert "\n" not in line
    assert line == f"ValueError: {'x' * 200} (caused by KeyError: 'a\\nb')"


def test_describe_leaves_out_a_suppressed_context_and_survives_a_hostile_str() -> None:
    class Hostile(Exception):
        def __str__(self) -> str:
            raise RuntimeError("no")

    try:
        try:
            raise OSError("hidden")
        except OSError:
            raise Hostile() from None
    except Hostile as exc:
        assert describe(exc) == "Hostile: (unprintable)"
    assert describe(KeyError()) == "KeyError"


def test_an_internal_error_names_the_command_and_the_bug() -> None:
    error = internal_error("", KeyError("a bug"))
    assert (error.code, error.path) == ("error.internal", "-")
    assert error.detail == "KeyError: 'a bug' (a bug: -v shows the traceback)"


@pytest.mark.parametrize("command", [
    [str(BIN / "backend-packager"), "verify", "/nonexistent.whl", "--json", "--trust", "/nonexistent.pub"],
    [sys.executable, "-m", "triton_backend_runtime", "doctor", "--json", "--package", "no such!"],
], ids=["backend-packager", "runtime"])
def test_an_error_printed_to_a_closed_pipe_ends_quietly(command: list[str]) -> None:
    """``--json`` writes the error object to stdout; a reader gone (``| head -0``) is the
    broken-pipe exit, never a traceback (the packager's copy raised one from its handler)."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    read, write = os.pipe()
    os.close(read)
    try:
        result = subprocess.run(command, stdout=write, stderr=subprocess.PIPE, text=True, env=env, timeout=120)
    finally:
        os.close(write)
    assert "Traceback" not in result.stderr
    assert result.returncode == EXIT_BROKEN_PIPE, result.stderr
