"""The package's shape, as docs/architecture.md draws it: imports point down the layers, no module imports another
that imports it back (deferred imports inside functions included: they hide cycles, they do not remove them), and
no source file grows past 600 lines.

Read from the source with ``ast``, nothing is imported. Imports under ``if TYPE_CHECKING:`` are left out: they are
annotations, never executed.
"""

from __future__ import annotations

import ast
import graphlib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("broker", "protocol")
MAX_LINES = 600

# Lower ranks are imported by higher ones, never the other way round; two areas of one rank do not import each
# other. A new package must be placed here (the test says so), which is the moment to decide where it belongs.
RANKS: dict[str, int] = {
    "broker": 0,  # broker/__init__.py: the version, nothing else
    "protocol": 0,
    "broker.log": 0,  # loggers that import structlog at their first call (serve's start-up path)
    # Settings are declared by their owners (issue 25): the declaration type is a stdlib-only leaf every owner
    # imports.
    "broker.setting": 0,
    "broker.timing": 1,
    "broker.re2_pattern": 1,  # RE2 loaded on first use, for KIP-848 subscriptions and ListTransactions v2
    "broker.changes": 1,  # the durable-change contract (issue 27): coordinator/, storage/, transactions/ put to it
    # Several nodes (issue 29): Kafka's partitionFor, the layout of leaders and epochs, one node's routing; pure,
    # imported by transactions/ (the transactional id hash), the coordinator (which groups a moved partition holds),
    # api/, server/, control/ and cli/.
    "broker.cluster": 1,
    # Issue 30: Kafka's ssl.principal.mapping.rules, stdlib only, parsed by the TLS settings when they are built.
    "broker.security.principal_mapping": 1,
    "broker.events": 2,
    "broker.coordinator": 3,
    "broker.storage": 3,
    "broker.transactions": 3,
    # The server's setting declarations and the listener syntax they parse: a leaf (it imports only
    # broker.setting) ranked below config/, which collects them into Settings; the rest of the server stays above.
    "broker.server.settings": 3,
    "broker.config": 4,
    # Issue 30: TLS, SASL and ACLs (the bindings, the ACL file, the StandardAuthorizer's decisions, the SASL
    # mechanisms, the authenticator and the users; their settings are declared in broker/server/settings.py), below
    # the server that wraps its listeners (server/acl_gate.py checks a whole request) and the API that checks ACLs
    # and serves the SCRAM credential APIs.
    "broker.security": 4,
    "broker.api": 5,
    "broker.server": 6,
    "broker.control": 7,
    "broker.testing": 8,
    "broker.chaos": 8,
    "broker.analytics": 8,
    "broker.cli": 9,
    "broker.__main__": 10,
}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


SOURCES: dict[str, Path] = {
    module_name(path): path for package in PACKAGES for path in sorted((ROOT / package).rglob("*.py"))
}


def area(module: str) -> str:
    """The layer a module belongs to: its entry in RANKS with the longest matching prefix."""
    parts = module.split(".")
    while parts:
        name = ".".join(parts)
        if name in RANKS and (name != "broker" or module == "broker"):
            return name
        parts.pop()
    raise LookupError(module)


def type_checking_nodes(tree: ast.AST) -> set[ast.AST]:
    skipped: set[ast.AST] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for child in node.body:
                skipped.update(ast.walk(child))
    return skipped


def project_module(target: str) -> str | None:
    """The project module an import statement loads: the longest prefix of ``target`` that is one."""
    parts = target.split(".")
    while parts:
        name = ".".join(parts)
        if name in SOURCES:
            return name
        parts.pop()
    return None


def imports_of(module: str) -> set[str]:
    path = SOURCES[module]
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    skipped = type_checking_nodes(tree)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    targets: list[str] = []
    for node in ast.walk(tree):
        if node in skipped:
            continue
        if isinstance(node, ast.Import):
            targets += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            targets += [base, *(f"{base}.{alias.name}" for alias in node.names)]
        elif (
            isinstance(node, ast.Call)
            and ast.unparse(node.func) in ("importlib.import_module", "import_module")
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            targets.append(node.args[0].value)
    found = {project_module(target) for target in targets}
    # A package's own __init__ runs before any of its modules: importing it from inside is not an edge.
    return {name for name in found if name is not None and name != module and not module.startswith(name + ".")}


GRAPH: dict[str, set[str]] = {module: imports_of(module) for module in SOURCES}


def test_every_module_has_a_layer() -> None:
    unplaced = []
    for module in SOURCES:
        try:
            area(module)
        except LookupError:
            unplaced.append(module)
    assert not unplaced, f"place these in RANKS (tests/test_layout.py) and docs/architecture.md: {unplaced}"


def test_imports_point_down_the_layers() -> None:
    upward = sorted(
        f"{module} -> {target}"
        for module, targets in GRAPH.items()
        for target in targets
        if area(module) != area(target) and RANKS[area(module)] <= RANKS[area(target)]
    )
    assert not upward, "imports that point up or sideways between layers:\n" + "\n".join(upward)


def test_no_import_cycles_deferred_imports_included() -> None:
    try:
        graphlib.TopologicalSorter(GRAPH).prepare()
    except graphlib.CycleError as cycle:
        pytest.fail(f"import cycle: {' -> '.join(cycle.args[1])}")


def test_no_source_file_passes_the_line_limit() -> None:
    long = {
        str(path.relative_to(ROOT)): lines
        for path in [*SOURCES.values(), *sorted((ROOT / "benchmarks").glob("*.py"))]
        if (lines := len(path.read_text(encoding="utf-8").splitlines())) > MAX_LINES
    }
    assert not long, f"over {MAX_LINES} lines: {long}"


def test_the_checks_see_what_they_check() -> None:
    """The graph is not empty by accident: known edges, a deferred one among them, are in it."""
    assert "broker.timing.clock" in GRAPH["broker.timing.purgatory"]
    assert "broker.server.broker" in GRAPH["broker.cli.main"]  # imported inside serve's function
    assert "broker.chaos.runner" in GRAPH["broker.cli.main"]  # importlib.import_module with a constant
    assert area("broker.coordinator.classic.join") == "broker.coordinator"
    assert area("broker") == "broker" and area("broker.__main__") == "broker.__main__"
