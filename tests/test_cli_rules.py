"""One grammar for both command lines, ``backend-packager`` and ``python -m triton_backend_runtime``.

Every subcommand's argparse parser is walked and checked against the rules: a summary and a
description for ``-h``, ``-q``/``-v`` excluding each other, ``--json``, an output spelled
``-o/--output``, a site directory spelled ``--site-packages``. Then every command that takes
input runs, through the real CLI, with a bad one (a missing file, a directory for a file, a
public key for a private one and the reverse): exit 2 and an ``input.*`` code, every time.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers.projects import Keypair
from triton_backend_runtime.cli import main as runtime_main

from backend_packager import cliparser

BIN = Path(sys.executable).parent
PARSERS = {"backend-packager": cliparser.build_parser, "runtime": runtime_main.build_parser}
#: The commands that write one output file or directory, and so take -o/--output.
WRITE_ONE_OUTPUT = {("keygen",), ("migrate",), ("adopt",), ("mirror",), ("sbom",)}


def commands(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()) -> Iterator[
        tuple[tuple[str, ...], argparse.ArgumentParser, str | None]]:
    """Every (sub)command below ``parser``: its words, its parser, its summary in the parent's list."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            summaries = {choice.dest: choice.help for choice in action._choices_actions}
            for name, command in action.choices.items():
                yield (*path, name), command, summaries.get(name)
                yield from commands(command, (*path, name))


def is_group(parser: argparse.ArgumentParser) -> bool:
    return any(isinstance(action, argparse._SubParsersAction) for action in parser._actions)


def options(parser: argparse.ArgumentParser) -> dict[str, argparse.Action]:
    return {flag: action for action in parser._actions for flag in action.option_strings}


def all_commands() -> list[tuple[str, tuple[str, ...], argparse.ArgumentParser, str | None]]:
    return [(cli, words, command, summary) for cli, build in PARSERS.items()
            for words, command, summary in commands(build())]


@pytest.mark.parametrize(("cli", "words", "command", "summary"), all_commands(),
                         ids=[f"{cli}:{' '.join(words)}" for cli, words, *_ in all_commands()])
def test_every_subcommand_follows_the_grammar(cli: str, words: tuple[str, ...], command: argparse.ArgumentParser,
                                              summary: str | None) -> None:
    assert summary and command.description, "-h describes every subcommand, and its parent's list names it"
    flags = options(command)
    assert flags["-q"] is flags["--quiet"] and flags["-v"] is flags["--verbose"]
    assert any({flags["-q"], flags["-v"]} <= set(group._group_actions) for group in command._mutually_exclusive_groups)
    if not is_group(command):
        assert "--json" in flags, "--json on every command"
    shown = [action for action in command._actions if action.help != argparse.SUPPRESS]
    for action in shown:
        if any("out" in flag for flag in action.option_strings):
            assert action.option_strings == ["-o", "--output"], action.option_strings
        if any("site" in flag for flag in action.option_strings):
            assert action.option_strings == ["--site-packages"], action.option_strings
    if cli == "backend-packager" and words in WRITE_ONE_OUTPUT:
        assert flags["-o"] is flags["--output"]


@pytest.mark.parametrize("build", PARSERS.values(), ids=PARSERS.keys())
def test_quiet_and_verbose_exclude_each_other_before_and_after_the_command(build: object) -> None:
    parser = build()  # type: ignore[operator]
    main_flags = options(parser)
    assert any({main_flags["-q"], main_flags["-v"]} <= set(group._group_actions)
               for group in parser._mutually_exclusive_groups)


def test_old_spellings_still_parse() -> None:
    adopt = cliparser.build_parser().parse_args(["adopt", "triton", "--wheel-out", "out"])
    assert adopt.wheel_out == Path("out")
    hook = runtime_main.build_parser().parse_args(["hook", "status", "--site", "somewhere"])
    assert hook.site == "somewhere"


# -- every command with a bad input, through the real CLI ------------------------------------------


def packager(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("BACKEND_PACKAGER_")}
    return subprocess.run([str(BIN / "backend-packager"), *args], capture_output=True, text=True, cwd=cwd, env=env)


def runtime(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TRITON_", "XDG_"))}
    env |= {"XDG_CONFIG_HOME": str(cwd / "config"), "HOME": str(cwd / "home"),
            "TRITON_BACKEND_CACHE_DIR": str(cwd / "cache")}
    return subprocess.run([sys.executable, "-m", "triton_backend_runtime", *args], capture_output=True, text=True,
                          cwd=cwd, env=env)


#: (CLI, arguments, the input.* code). In the arguments, pem and pub are the key pair, dir a
#: directory, file a plain file, absent a path where nothing is.
BAD_INPUTS = [
    ("backend-packager", "scan absent.so", "input.missing"),
    ("backend-packager", "keygen -o dir", "input.key-path"),
    ("backend-packager", "init file", "input.exists"),
    ("backend-packager", "verify absent.whl --trust pub", "input.missing"),
    ("backend-packager", "verify dir --trust pub", "input.no-wheels"),
    ("backend-packager", "verify file --trust pem", "input.key"),
    ("backend-packager", "verify file --trust dir", "input.not-a-file"),
    ("backend-packager", "inspect absent.whl", "input.missing"),
    ("backend-packager", "sbom absent.whl", "input.missing"),
    ("backend-packager", "sbom dir", "input.not-a-file"),
    ("backend-packager", "sbom triton --site-packages file", "input.site-packages"),
    ("backend-packager", "migrate absent.whl -o out", "input.missing"),
    ("backend-packager", "migrate dir -o out --key pub", "input.key"),
    ("backend-packager", "migrate dir -o out --key dir", "input.not-a-file"),
    ("backend-packager", "adopt triton --key pub", "input.key"),
    ("backend-packager", "adopt triton --key pem --site-packages file", "input.site-packages"),
    ("backend-packager", "mirror dir -o out --key pub", "input.key"),
    ("backend-packager", "mirror absent -o out --key pem", "input.missing"),
    ("backend-packager", "mirror dir -o out --key absent.pem", "input.missing"),
    ("runtime", "trust add absent.pub --user", "input.missing"),
    ("runtime", "trust add dir --user", "input.not-a-file"),
    ("runtime", "trust add pem --user", "input.key"),
    ("runtime", "trust remove pem --user", "input.key"),
    ("runtime", "trust min-version triton 1.x --user", "input.version"),
    ("runtime", "trust pin backend:Bad! triton --user", "input.name"),
    ("runtime", "trust unpin backend:Bad! --user", "input.name"),
    ("runtime", "trust revoke xyz --user", "input.keyid"),
    ("runtime", "trust unrevoke xyz --user", "input.keyid"),
    ("runtime", "trust add-identity --issuer notaurl --identity x --user", "input.identity"),
    ("runtime", "trust remove-identity xyz --user", "input.identity"),
    ("runtime", "trust root file --user", "input.root"),
    ("runtime", "hook install --site-packages file", "input.site-packages"),
    ("runtime", "doctor --package 1x", "input.name"),
    ("runtime", "list --package 1x", "input.name"),
]
#: The commands that read no input a user names: nothing to get wrong.
NO_INPUT = {("backend-packager", "schema"), ("runtime", "trust list")}


def test_every_command_with_input_is_tried() -> None:
    leaves = {(cli, " ".join(words)) for cli, words, command, _ in all_commands() if not is_group(command)}
    tried = {(cli, name) for cli, name in leaves
             for bad_cli, args, _ in BAD_INPUTS if bad_cli == cli and args.startswith(f"{name} ")}
    assert leaves - tried == NO_INPUT


@pytest.mark.parametrize(("cli", "args", "code"), BAD_INPUTS, ids=[f"{cli}:{args}" for cli, args, _ in BAD_INPUTS])
def test_a_bad_input_exits_2_with_an_input_code(cli: str, args: str, code: str, tmp_path: Path,
                                                 signing_key: Keypair) -> None:
    (tmp_path / "dir").mkdir()
    (tmp_path / "file").write_text("not a wheel\n")
    names = {"pem": str(signing_key.private), "pub": str(signing_key.public)}
    argv = [names.get(word, word) for word in args.split()]
    result = (runtime if cli == "runtime" else packager)(*argv, cwd=tmp_path)
    assert result.returncode == 2, result
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].endswith(f" ({code})"), result.stderr
    assert "Traceback" not in result.stderr


PUBLIC_FOR_PRIVATE = "is a public key; pass the private key (.pem)"
PRIVATE_FOR_PUBLIC = "is a private key; pass the public key (.pub)"


@pytest.mark.parametrize(("cli", "args", "named"), [
    ("backend-packager", ["migrate", "dir", "-o", "out", "--key", "pub"], PUBLIC_FOR_PRIVATE),
    ("backend-packager", ["verify", "file", "--trust", "pem"], PRIVATE_FOR_PUBLIC),
    ("runtime", ["trust", "add", "pem", "--user"], PRIVATE_FOR_PUBLIC),
])
def test_the_wrong_half_of_a_key_pair_is_named(cli: str, args: list[str], named: str, tmp_path: Path,
                                               signing_key: Keypair) -> None:
    (tmp_path / "dir").mkdir()
    (tmp_path / "file").write_text("")
    names = {"pem": str(signing_key.private), "pub": str(signing_key.public)}
    result = (runtime if cli == "runtime" else packager)(*[names.get(a, a) for a in args], cwd=tmp_path)
    assert f": {named} (input.key)" in result.stderr


def test_quiet_mirror_prints_no_status_table(tmp_path: Path, signing_key: Keypair) -> None:
    (tmp_path / "wheels").mkdir()
    loud = packager("mirror", "wheels", "-o", "loud", "--key", str(signing_key.private), cwd=tmp_path)
    assert loud.returncode == 0 and "STATUS" in loud.stdout, loud
    quiet = packager("-q", "mirror", "wheels", "-o", "quiet", "--key", str(signing_key.private), cwd=tmp_path)
    assert (quiet.returncode, quiet.stdout, quiet.stderr) == (0, "", "")


@pytest.mark.parametrize("args", [["-q", "scan", "-v", "x.so"], ["scan", "-q", "-v", "x.so"]])
def test_quiet_with_verbose_is_a_usage_error(args: list[str], tmp_path: Path) -> None:
    result = packager(*args, cwd=tmp_path)
    assert result.returncode == 2 and "not allowed with argument" in result.stderr
    result = runtime(*["list" if a == "scan" else a for a in args if a != "x.so"], cwd=tmp_path)
    assert result.returncode == 2 and "not allowed with argument" in result.stderr
