"""`backend-packager verify` compares the signed name and version with the wheel's own."""

from __future__ import annotations

from pathlib import Path

from helpers.cli import run_cli
from helpers.projects import Keypair, rezip

HUGE = "1" + "0" * 5000


def test_a_version_too_long_for_int_is_a_finding_not_a_crash(
        example_wheels: dict[str, Path], signing_key: Keypair, tmp_path: Path) -> None:
    """``packaging``'s ``Version`` raises ``ValueError`` (not ``InvalidVersion``) for a release
    number past the int-string limit; METADATA saying so is an identity.version finding."""
    wheel = example_wheels["setuptools_backend"]

    def edit(members: dict[str, bytes]) -> None:
        name = next(n for n in members if n.endswith(".dist-info/METADATA"))
        members[name] = members[name].replace(b"Version: 0.1.0", b"Version: " + HUGE.encode())

    tampered = rezip(wheel, tmp_path / wheel.name, edit)
    result = run_cli("verify", str(tampered), "--trust", str(signing_key.public))
    assert result.returncode == 1, result.stderr
    assert "Traceback" not in result.stderr
    assert "identity.version" in result.stdout
