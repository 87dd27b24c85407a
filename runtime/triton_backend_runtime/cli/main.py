"""``python -m triton_backend_runtime``: doctor, list, hook and trust commands.

Exit codes: 0 all is well; 1 a checked failure (doctor, list: something excluded, failed or
rejected; trust list: a bad trust file; trust remove: no such key; trust remove-identity: no
such identity; trust unpin: no such pin; trust root --remove: none pinned; a file that cannot
be written); 2 usage or unusable input (a bad option, a key file that
cannot be read or holds no public key). ``--json`` documents carry ``"format": JSON_FORMAT``. A closed pipe
(``| head``) ends the command quietly (141).

Every error is one line, ``PROG: error: PATH: DETAIL (CODE)``, the packager's form: unusable
input as ``input.*`` (its codes where they mean the same), an OSError as ``file.<errno>``, a
bug of ours as ``error.internal`` (exit 1, as the packager; ``-v`` shows the traceback).
With ``--json`` the error is also ``{"format": 1, "error": {"code", "path", "message"}}``.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import warnings
from collections.abc import Iterator
from typing import Any

from ..base import TrustError, from_os_error
from ..site import DEFAULT_PACKAGE
from .doctor import cmd_list, doctor_entry, hook_lines
from .grammar import (
    EXIT_FAILED,
    EXIT_OK,
    EXIT_USAGE,
    JSON_FORMAT,
    Report,
    add_verbosity,
    fail,
    parse,
    pipe_closed,
    run_command,
)
from .inputs import PACKAGE_HELP, PROG, UnusableInput
from .trustcmd import cmd_trust

__all__ = ["build_parser", "cmd_hook", "main"]


def cmd_hook(args: argparse.Namespace) -> int:
    from ..autohook import OLD_PTH_NAMES, PTH_LINE, pth_path

    if args.site is not None and not os.path.isdir(args.site):
        raise UnusableInput("site-packages", args.site, "not a directory")
    out = Report(args.json)
    path = pth_path(args.site)
    olds = [p for n in OLD_PTH_NAMES if os.path.lexists(p := os.path.join(os.path.dirname(path), n))]
    removed: list[str] = []
    if args.action == "install":
        from ..base import write_atomic

        write_atomic(path, PTH_LINE.encode("utf-8"))
        for old in olds:  # the old name sorts after other .pth files: it must not run as well
            os.unlink(old)
            removed.append(old)
            out.say(f"removed {old} (the hook's old name)")
        out.say(f"installed {path}: import triton now goes through the backend registry")
    elif args.action == "uninstall":
        for old in [*olds, path] if os.path.lexists(path) else olds:
            os.unlink(old)
            removed.append(old)
            out.say(f"removed {old}")
        if not olds and not os.path.lexists(path):
            out.say(f"not installed ({path} does not exist)")
    else:
        out.say(f"{'installed' if os.path.exists(path) else 'not installed'}: {path}")
        for line in hook_lines(path):
            out.say(f"  {line}")
    out.facts = {"path": path, "installed": os.path.exists(path), "removed": removed}
    return out.end(EXIT_OK)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG, description="Discover, verify and report the Triton backends and plugins this Python would load.",
        epilog="Exit codes: 0 all is well; 1 a checked failure (something excluded, failed or rejected); 2 bad "
        f"usage or unusable input (input.*). `{PROG} COMMAND --help` for each command.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    doctor = _command(sub, "doctor", "explain every backend and plugin: distribution, state, signer, reason",
                      "Explain every backend and plugin this Python would load: its distribution, state, signer "
                      "and the exact reason, with the import hook, the core and the trust store. Exit 1 if "
                      "anything is excluded, failed or rejected.")
    doctor.add_argument("--rehash", action="store_true", help="ignore the verification cache; hash every file")
    doctor.add_argument("--package", default=DEFAULT_PACKAGE, metavar="NAME", help=PACKAGE_HELP)
    doctor.set_defaults(func=doctor_entry)
    listing = _command(sub, "list", "list backends and plugins with their state",
                       "List every backend and plugin with its state, one line each (-v adds the reason code). "
                       "Exit 1 if anything is excluded, failed or rejected.")
    listing.add_argument("--rehash", action="store_true", help="ignore the verification cache; hash every file")
    listing.add_argument("--package", default=DEFAULT_PACKAGE, metavar="NAME", help=PACKAGE_HELP)
    listing.set_defaults(func=cmd_list)
    hook = _command(sub, "hook", "install or remove the .pth hook for an unmodified Triton",
                    "Install, remove or show the .pth file that makes `import triton` go through the backend "
                    "registry, for a Triton that does not call it itself.")
    hook.add_argument("action", choices=["install", "uninstall", "status"])
    hook.add_argument("--site-packages", dest="site", metavar="DIR",
                      help="site-packages directory (default: this interpreter's)")
    hook.add_argument("--site", dest="site", help=argparse.SUPPRESS)  # the old spelling, for old scripts
    hook.set_defaults(func=cmd_hook)
    trust = _command(sub, "trust", "the trust store: signing keys and identities, their scopes, version floors",
                     "Change or list the trust store: the signing keys and keyless signing identities this Python "
                     "trusts, their scopes, version floors, pins, revocations and the pinned Sigstore root (this "
                     "environment's trust directory, or the user's with --user).")
    trust_actions = trust.add_subparsers(dest="action", metavar="ACTION", required=True)
    user_help = "the user's trust directory, not this environment's"
    trust_add = _command(trust_actions, "add", "trust a signing key (copy its .pub line into a trust directory)")
    trust_add.add_argument("key", help="public key file written by backend-packager keygen")
    trust_add.add_argument(
        "--scope", metavar="ITEM[,ITEM...]",
        help="the only distributions this key may sign (DIST) and names it may declare (backend:NAME, "
             "pass:NAME, dialect:NAME, op:NAME; KIND:* for any): replaces its scope in that directory",
    )
    trust_add.add_argument("--user", action="store_true", help=user_help)
    floor = _command(trust_actions, "min-version", "refuse releases of a distribution below a version (rollback)")
    floor.add_argument("dist", help="distribution name")
    floor.add_argument("version", help="lowest admitted version (PEP 440)")
    floor.add_argument("--user", action="store_true", help=user_help)
    _command(trust_actions, "list", "trusted keys with their scopes, version floors, pins, revocations")
    pin = _command(trust_actions, "pin", "let a distribution keep a contested name (the core's included)")
    pin.add_argument("name", metavar="[KIND:]NAME", help="a backend name, or pass:, dialect:, op:, target:NAME")
    pin.add_argument("dist", help="the distribution that owns it")
    pin.add_argument("--user", action="store_true", help=user_help)
    unpin = _command(trust_actions, "unpin", "drop a pin from a trust directory")
    unpin.add_argument("name", metavar="[KIND:]NAME", help="the pinned name")
    unpin.add_argument("--user", action="store_true", help=user_help)
    remove = _command(trust_actions, "remove",
                      "stop trusting a key: its lines leave the trust directory's .pub files (atomically)")
    remove.add_argument("key", metavar="KEYID_OR_FILE",
                        help="a keyid (or a prefix of at least 8 hex digits) or a public key file")
    remove.add_argument("--user", action="store_true", help=user_help)
    keyid_help = ("the keyid: its first 16 hex digits as the tools print it, or all 64, any case, 'keyid:' allowed; "
                  "16 to 63 digits revoke every key whose keyid starts with them")
    revoke = _command(trust_actions, "revoke",
                      "refuse a key's signatures, even where the key is trusted (a line in the revoked file)")
    revoke.add_argument("keyid", metavar="KEYID", help=keyid_help)
    revoke.add_argument("--user", action="store_true", help=user_help)
    unrevoke = _command(trust_actions, "unrevoke", "take back the revocations of a key in a trust directory")
    unrevoke.add_argument("keyid", metavar="KEYID", help=keyid_help)
    unrevoke.add_argument("--user", action="store_true", help=user_help)
    _identity_commands(trust_actions, user_help)
    trust.set_defaults(func=cmd_trust)
    _grammar(parser, sub)
    return parser


def _command(sub: Any, name: str, summary: str, description: str | None = None) -> argparse.ArgumentParser:
    """A (sub)command whose ``-h`` describes it: ``summary`` in its parent's list, ``description``
    (else the summary) atop its own help."""
    command: argparse.ArgumentParser = sub.add_parser(name, help=summary, description=description or summary)
    return command


def main(argv: list[str] | None = None) -> int:
    """Run one command. Every failure ends here as one line, ``PROG: error: PATH: DETAIL
    (CODE)`` on stderr (with ``--json`` also ``{"format": 1, "error": {...}}`` on stdout),
    and an exit code: never a traceback, unless ``-v`` asks for the one of an internal error."""
    try:
        try:
            code = _main(argv)
        except SystemExit as exc:  # argparse: --help, --version, usage errors
            code = exc.code if isinstance(exc.code, int) else EXIT_OK if exc.code is None else EXIT_USAGE
        sys.stdout.flush()  # here, so that a closed pipe is met inside the handlers below
        return code
    except BrokenPipeError:
        return pipe_closed()
    except OSError as exc:  # the flush above: stdout on a full disk (`> /dev/full`)
        pipe_closed()  # what stdout still holds is lost either way; the exit flush must not raise
        return _fail(argparse.Namespace(), from_os_error(exc, "<stdout>"), EXIT_FAILED)


def _main(argv: list[str] | None) -> int:
    args = parse(build_parser(), argv)

    def command() -> int:
        with _quiet(args.quiet and not getattr(args, "json", False)):
            return int(args.func(args))

    return run_command(PROG, args, command, (UnusableInput,))


# -- one grammar: --version, -q/-v, exit codes, pipes -------------------------------------


def _identity_commands(actions: Any, user_help: str) -> None:
    """``trust add-identity``, ``remove-identity`` and ``root`` (keyless signing, Sigstore)."""
    add = _command(actions, "add-identity", "trust a keyless signing identity (a Sigstore certificate's issuer "
                                            "and subject)")
    add.add_argument("--issuer", required=True, metavar="URL",
                     help="the OIDC issuer, exactly (GitHub Actions: https://token.actions.githubusercontent.com)")
    add.add_argument("--identity", required=True, metavar="PATTERN",
                     help="the certificate's SAN exactly, or ending in one '*' that matches within the last path "
                          "segment (...release.yml@refs/tags/*); docs/platform/identities.md")
    add.add_argument("--scope", metavar="ITEM[,ITEM...]",
                     help="the only distributions this identity may sign (DIST) and names it may declare, as for "
                          "trust add --scope")
    add.add_argument("--comment", default="", help="a note kept on the identity's line")
    add.add_argument("--user", action="store_true", help=user_help)
    remove = _command(actions, "remove-identity", "stop trusting a keyless signing identity")
    remove.add_argument("id", nargs="?", metavar="ID", help="the identity's id (trust list), 8 to 64 hex digits")
    remove.add_argument("--issuer", metavar="URL", help="with --identity: the identity as it was added")
    remove.add_argument("--identity", metavar="PATTERN", help="with --issuer: the identity as it was added")
    remove.add_argument("--user", action="store_true", help=user_help)
    root = _command(actions, "root", "pin the Sigstore trusted root keyless signatures are verified against")
    root.add_argument("file", nargs="?", metavar="FILE", help="a trusted_root.json (sigstore's format); copied")
    root.add_argument("--remove", action="store_true", help="unpin: sigstore-python's own production root again")
    root.add_argument("--user", action="store_true", help=user_help)


def _grammar(parser: argparse.ArgumentParser, sub: Any) -> None:
    """``--version`` on the main parser; ``-q``/``-v`` and ``--json`` on every command, the
    former before or after the command."""
    from .. import __version__

    parser.add_argument("--version", action="version", version=f"{PROG} {__version__}")
    for command, default in [(parser, False), *((p, argparse.SUPPRESS) for p in _commands(sub))]:
        add_verbosity(command, default, quiet="print nothing but errors; the exit code tells the rest",
                      verbose="print more detail (doctor: the core and discovery; list: reason codes)")
    for command in _commands(sub):
        if not any(isinstance(action, argparse._SubParsersAction) for action in command._actions):
            command.add_argument("--json", action="store_true",
                                 help=f"one JSON document on stdout (\"format\": {JSON_FORMAT})")


def _commands(sub: Any) -> list[argparse.ArgumentParser]:
    found: list[argparse.ArgumentParser] = []
    for command in dict.fromkeys(sub.choices.values()):
        found.append(command)
        for action in command._actions:
            if isinstance(action, argparse._SubParsersAction):
                found += _commands(action)
    return found


@contextlib.contextmanager
def _quiet(enabled: bool) -> Iterator[None]:
    if not enabled:
        yield
        return
    from ..loading import BackendWarning

    with open(os.devnull, "w") as devnull, contextlib.redirect_stdout(devnull), warnings.catch_warnings():
        warnings.simplefilter("ignore", BackendWarning)
        yield


def _fail(args: argparse.Namespace, error: TrustError, code: int) -> int:
    return fail(PROG, args, error, code)


