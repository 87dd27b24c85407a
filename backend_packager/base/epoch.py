"""``SOURCE_DATE_EPOCH``: the one rule for every wheel this package writes (build, migrate, adopt).

The specification (reproducible-builds.org/specs/source-date-epoch) defines the value as an
integer count of seconds since 1970-01-01 00:00:00 UTC and says a build SHOULD fail on a
malformed one rather than fall back to the clock, since a silent fallback makes an
irreproducible wheel look reproducible. The value is recorded as given; the ZIP writer
clips member timestamps to 1980-01-01, the earliest a DOS timestamp holds
(:func:`backend_packager.formats.zipformat.dos_datetime`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from .errors import ConfigError

__all__ = ["SOURCE_DATE_EPOCH", "source_date_epoch"]

SOURCE_DATE_EPOCH = "SOURCE_DATE_EPOCH"


def source_date_epoch(environ: Mapping[str, str] | None = None) -> int | None:
    """The variable's value; None when unset or empty; ConfigError ``config.epoch`` otherwise."""
    text = (os.environ if environ is None else environ).get(SOURCE_DATE_EPOCH, "")
    if not text:
        return None
    if not (text.isascii() and text.isdigit() and len(text) <= 20):
        raise ConfigError("epoch", SOURCE_DATE_EPOCH,
                          f"expected seconds since 1970 as a non-negative integer, found {text[:40]!r}")
    return int(text)
