"""The runtime's command line (``python -m triton_backend_runtime``) and the grammar both
distributions' CLIs speak (``grammar``: exit codes, ``--json`` format, one-line failures).
"""

# A name is imported from its module when first asked for (PEP 562): importing one module of
# this layer must not import the others, since ``import triton`` pays for every module loaded.
# Not typing.TYPE_CHECKING: importing typing costs milliseconds at start-up.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from . import doctor, grammar, identitycmd, inputs, main, trustcmd
    from .grammar import (
        EXIT_FAILED,
        EXIT_OK,
        EXIT_USAGE,
        JSON_FORMAT,
        add_verbosity,
        exit_code,
        fail,
        parse,
        run_command,
    )
    from .inputs import public_key_file

__all__ = [
    "EXIT_FAILED",
    "EXIT_OK",
    "EXIT_USAGE",
    "JSON_FORMAT",
    "add_verbosity",
    "doctor",
    "exit_code",
    "fail",
    "grammar",
    "identitycmd",
    "inputs",
    "main",
    "parse",
    "public_key_file",
    "run_command",
    "trustcmd",
]

_WHERE = {
    "EXIT_FAILED": "grammar",
    "EXIT_OK": "grammar",
    "EXIT_USAGE": "grammar",
    "JSON_FORMAT": "grammar",
    "add_verbosity": "grammar",
    "exit_code": "grammar",
    "fail": "grammar",
    "parse": "grammar",
    "public_key_file": "inputs",
    "run_command": "grammar",
}


def __getattr__(name: str) -> object:
    where = _WHERE.get(name)
    if where is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(__import__(f"{__name__}.{where}", fromlist=[name]), name)
    globals()[name] = value  # the next import of this name finds it without this call
    return value
