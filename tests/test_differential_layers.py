"""The differential package is layered as DD: kernel, trace, agent, operator, facade.

Built from the source with :mod:`ast`, counting function-local imports too (but not those under
``if TYPE_CHECKING:``): the import graph of ``timelypy.differential`` has no cycle, and every
module imports only from its own layer or the layers below it.
"""

from __future__ import annotations

import ast
import pathlib
from typing import Dict, Iterator, List, Set

PACKAGE_DIR = pathlib.Path(__file__).resolve().parent.parent / "timelypy" / "differential"
PREFIX = "timelypy.differential"

# Bottom up; a module may import its own layer and the layers before it.
LAYERS = {
    "kernel": {
        "kernel",
        "kernel.consolidation",
        "kernel.grouping",
        "kernel.join",
        "kernel.merge",
        "consolidation",
        "fusion",
    },
    "trace": {
        "trace",
        "trace.batch",
        "trace.builder",
        "trace.cursor",
        "trace.lifecycle",
        "trace.spine",
        "trace.view",
    },
    "agent": {"agent"},
    "operator": {
        "arrange",
        "join",
        "reduce",
        "reduce_total",
        "reduce_product",
        "consolidate",
        "iterate",
    },
    "facade": {"", "collection", "captured", "input"},
}
RANK = {name: i for i, name in enumerate(LAYERS)}


def _modules() -> Dict[str, pathlib.Path]:
    out = {}
    for path in PACKAGE_DIR.rglob("*.py"):
        parts = list(path.relative_to(PACKAGE_DIR).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


MODULES = _modules()


def _layer(module: str) -> str:
    for name, members in LAYERS.items():
        if module in members:
            return name
    raise AssertionError(f"timelypy.differential.{module} is in no layer: add it to LAYERS")


def _runtime_nodes(tree: ast.AST) -> Iterator[ast.AST]:
    """Every node except those under ``if TYPE_CHECKING:``."""
    stack = [tree]
    while stack:
        node = stack.pop()
        yield node
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
                stack.extend(child.orelse)
                continue
            stack.append(child)


def _resolve(module: str, path: pathlib.Path, node: ast.ImportFrom) -> List[str]:
    """The absolute names an import refers to (``from . import x`` names the module ``x``)."""
    if node.level == 0:
        bases = [node.module or ""]
    else:
        package = f"{PREFIX}.{module}".rstrip(".").split(".")
        if path.name != "__init__.py":
            package = package[:-1]
        package = package[: len(package) - (node.level - 1)]
        bases = [".".join(package + ([node.module] if node.module else []))]
    out = []
    for base in bases:
        if node.module or node.level == 0:
            out.append(base)  # `from . import x` loads the module x, not the package's own code
        out.extend(f"{base}.{alias.name}" for alias in node.names)
    return out


def _internal(name: str) -> str | None:
    """The differential module ``name`` is (relative to the package), or None."""
    if name != PREFIX and not name.startswith(PREFIX + "."):
        return None
    rel = name[len(PREFIX) + 1 :] if name != PREFIX else ""
    return rel if rel in MODULES else None


def _graph() -> Dict[str, Set[str]]:
    graph: Dict[str, Set[str]] = {m: set() for m in MODULES}
    for module, path in MODULES.items():
        for node in _runtime_nodes(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                names = _resolve(module, path, node)
            else:
                continue
            for name in names:
                target = _internal(name)
                if target is not None and target != module:
                    graph[module].add(target)
    return graph


def _cycle(graph: Dict[str, Set[str]]) -> List[str]:
    """A cycle of ``graph`` (empty if there is none), by depth-first search."""
    state: Dict[str, int] = {}
    stack: List[str] = []

    def visit(m: str) -> List[str]:
        state[m] = 1
        stack.append(m)
        for n in sorted(graph[m]):
            if state.get(n) == 1:
                return stack[stack.index(n) :] + [n]
            if n not in state:
                found = visit(n)
                if found:
                    return found
        stack.pop()
        state[m] = 2
        return []

    for m in sorted(graph):
        if m not in state:
            found = visit(m)
            if found:
                return found
    return []


def test_the_import_graph_is_found():
    graph = _graph()
    assert "kernel.consolidation" in graph["trace.spine"]
    assert "kernel.merge" in graph["trace.spine"]
    assert "agent" in graph["join"]
    assert "join" in graph["collection"]  # `from . import join as joins`


def test_the_differential_import_graph_has_no_cycle():
    assert _cycle(_graph()) == []


def test_every_module_imports_only_its_layer_and_the_layers_below():
    offenders = []
    for module, targets in _graph().items():
        layer = _layer(module)
        for target in targets:
            other = _layer(target)
            if RANK[other] > RANK[layer]:
                offenders.append(f"{module or '__init__'} ({layer}) imports {target} ({other})")
    assert not offenders, offenders


def test_trace_modules_import_no_operator_agent_or_facade():
    graph = _graph()
    for module in LAYERS["trace"]:
        assert not {t for t in graph[module] if _layer(t) in ("agent", "operator", "facade")}


def test_operator_modules_import_no_facade():
    graph = _graph()
    for module in LAYERS["operator"]:
        assert not {t for t in graph[module] if _layer(t) == "facade"}, module


def test_the_cycle_finder_finds_cycles():
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) == []
