"""The admission core depends on the standard library and `cryptography`, and of the rest of
the core only on its error type."""

from __future__ import annotations

import sys
from pathlib import Path

from tests.test_layering import imported_top_levels

ADMISSION = Path(__file__).resolve().parents[2] / "ldpcollect" / "admission"
ALLOWED = set(sys.stdlib_module_names) | {"cryptography", "ldpcollect"}


def test_admission_imports_only_the_standard_library_and_cryptography() -> None:
    offenders = {
        str(path.name): sorted(imported_top_levels(path) - ALLOWED)
        for path in sorted(ADMISSION.glob("*.py"))
        if imported_top_levels(path) - ALLOWED
    }
    assert not offenders


def test_admission_uses_no_other_part_of_the_core_but_its_errors() -> None:
    allowed = ("from ldpcollect.admission", "from ldpcollect.errors import")
    for path in sorted(ADMISSION.glob("*.py")):
        for line in path.read_text().splitlines():
            if line.startswith(("from ldpcollect", "import ldpcollect")):
                assert line.startswith(allowed), f"{path.name}: {line}"
