"""Why something is not admitted, as data: the one shape every layer reports in.

The annotations are evaluated when the class is made (no ``from __future__ import
annotations``): the verdict cache's decoder reads them with ``typing.get_type_hints``.
"""


from .errors import TrustError
from .records import record

__all__ = ["Reason", "reason_of"]


@record()
class Reason:
    """Why something is not admitted: a stable code, the file it is about, the cause."""

    code: str
    path: str
    message: str


def reason_of(exc: TrustError) -> Reason:
    """The reason an error gives: its code, its path, its detail."""
    return Reason(exc.code, exc.path, exc.detail)
