"""One rule for "what is an export": the packager's scan records what the runtime's
``dynsym`` later checks, so the two read one library alike."""

from __future__ import annotations

from helpers.csrc import ElfFixtures
from triton_backend_runtime.verification import dynsym

from backend_packager.scanning.elf import scan_elf


def test_the_scan_and_the_runtime_agree_on_a_librarys_exports(elf_files: ElfFixtures) -> None:
    library = elf_files.exports
    with library.open("rb") as stream:
        info = scan_elf(stream, str(library))
    exported = {s.name for s in info.exports.symbols}
    assert {"exported_function", "exported_counter", "exported_tls", "weak_function"} <= exported
    assert {s.binding for s in info.exports.symbols} <= set(dynsym.EXPORT_BINDINGS.values())
    assert dynsym.missing_exports(str(library), exported) == []
    imported_or_hidden = ["sqrt", "memcpy", "hidden_global", "hidden_helper", "optional_hook"]
    assert dynsym.missing_exports(str(library), imported_or_hidden) == sorted(imported_or_hidden)
    assert not exported & set(imported_or_hidden)
