"""The layout the design relies on (docs/design.md, "Layout and layering").

- the shared core imports neither side; client and aggregator never meet;
- gRPC stays at the aggregator's edge: its domain (rules, stores, release) refuses with
  `aggregator.errors` types, which `aggregator.status_map` alone turns into statuses;
- no import cycles among the modules of a package, counting imports inside functions.
"""

from __future__ import annotations

import ast
from collections.abc import Collection, Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("ldpcollect", "client", "aggregator", "ldpcollect_cli")

FORBIDDEN = {
    "ldpcollect": {"client", "aggregator", "ldpcollect_cli"},
    "client": {"aggregator", "ldpcollect_cli"},
    "aggregator": {"client", "ldpcollect_cli"},
}
# The aggregator's modules that speak gRPC; every other aggregator module is domain.
GRPC_EDGE = {
    "aggregator.server",  # the gRPC server and its options
    "aggregator.service",  # the servicers
    "aggregator.edge",  # every role's requests checked as bytes: credentials, size, budget
    "aggregator.rpc_handlers",  # the trusted services' registration at the edge
    "aggregator.status_map",  # refusals -> statuses, the one table
    "aggregator.metrics",  # metrics labelled by status
    "aggregator.secure.server",  # secure roles: the server
    "aggregator.secure.services",  # their servicers
    "aggregator.secure.helper_client",  # the leader's calls to the helper
    "aggregator.secure.key_service",  # each role's own HPKE config (AggregatorKeys)
    "aggregator.issuer.service",  # the token issuer's servicer (its own statuses)
    "aggregator.issuer.server",  # and its server
}


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(path: Path) -> Iterator[tuple[str, list[str]]]:
    """Every import statement of `path`, anywhere in the file (function bodies too), as
    (module, names imported from it); relative imports resolved."""
    tree = ast.parse(path.read_text(), filename=str(path))
    package = module_name(path) if path.name == "__init__.py" else module_name(path.parent)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from ((alias.name, []) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if node.level:
                parts = package.split(".")
                module = ".".join([*parts[: len(parts) - node.level + 1], *module.split(".")])
            yield module.strip("."), [alias.name for alias in node.names]


def depends_on(path: Path, known: Collection[str]) -> set[str]:
    """The known modules `path` imports: for `from a import b`, the module `a.b` when there
    is one (importing a submodule), else `a`."""
    found: set[str] = set()
    for module, names in imports(path):
        submodules = {f"{module}.{name}" for name in names} & set(known)
        found |= submodules
        if len(submodules) < len(names) or not names:
            found.add(module)
    return found & set(known)


def modules() -> dict[str, Path]:
    return {
        module_name(path): path
        for package in PACKAGES
        for path in sorted((ROOT / package).rglob("*.py"))
    }


def imported_top_levels(path: Path) -> set[str]:
    return {module.split(".")[0] for module, _ in imports(path)}


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_package_respects_layering(package: str) -> None:
    offenders = []
    for path in sorted((ROOT / package).rglob("*.py")):
        bad = imported_top_levels(path) & FORBIDDEN[package]
        if bad:
            offenders.append(f"{path.relative_to(ROOT)} imports {sorted(bad)}")
    assert not offenders, "layering violated:\n" + "\n".join(offenders)


def test_the_aggregator_domain_does_not_import_grpc() -> None:
    offenders = [
        f"{path.relative_to(ROOT)} imports grpc"
        for name, path in modules().items()
        if name.startswith("aggregator.")
        and name not in GRPC_EDGE
        and "grpc" in imported_top_levels(path)
    ]
    assert not offenders, "gRPC outside the edge:\n" + "\n".join(offenders)


def import_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan), sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph[node]):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(cycles)


def test_import_cycles_are_found_including_imports_inside_functions() -> None:
    assert import_cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert import_cycles({"a": {"b"}, "b": set()}) == []
    source = "def f():\n    from pkg import other\n"
    tree = ast.parse(source)
    found = [n for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)]
    assert found and found[0].module == "pkg"  # ast.walk reaches function bodies


@pytest.mark.parametrize("package", PACKAGES)
def test_no_import_cycles_inside_a_package(package: str) -> None:
    known = modules()
    graph = {
        name: {
            imported
            for imported in depends_on(path, known)
            if imported != name and imported.split(".")[0] == package
        }
        for name, path in known.items()
        if name.split(".")[0] == package
    }
    cycles = import_cycles(graph)
    assert not cycles, "import cycles:\n" + "\n".join(" <-> ".join(c) for c in cycles)
