"""The secure core depends only on the standard library, `cryptography` and the VDAF, so
both roles and devices can use it without pulling in gRPC, numpy or the mechanisms."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import ldpcollect.secure

PACKAGE = Path(ldpcollect.secure.__file__).parent
ALLOWED = ("cryptography", "ldpcollect.vdaf", "ldpcollect.secure", "__future__")


def imported_modules(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found.add(node.module)
    return found


def test_the_secure_core_imports_only_the_stdlib_cryptography_and_the_vdaf() -> None:
    outside = {
        f"{path.name}: {module}"
        for path in sorted(PACKAGE.glob("*.py"))
        for module in imported_modules(path)
        if module.split(".")[0] not in sys.stdlib_module_names
        and not any(module == a or module.startswith(a + ".") for a in ALLOWED)
    }
    assert outside == set()
