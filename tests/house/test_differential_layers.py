"""The differential package is layered as DD: kernel, trace, agent, operator, facade.

Built from the source with :mod:`ast`, counting function-local imports too (but not those under
``if TYPE_CHECKING:``): the import graph of ``timelypy.differential`` has no cycle, and every
module imports only from its own layer or the layers below it.
"""

from __future__ import annotations

from typing import Dict, List, Set

from support import source

PREFIX = "timelypy.differential"

# Bottom up; a module may import its own layer and the layers before it.
LAYERS = {
    "kernel": {
        "kernel",
        "kernel.columns",
        "kernel.consolidation",
        "kernel.distinct",
        "kernel.grouping",
        "kernel.histories",
        "kernel.join",
        "kernel.join_columns",
        "kernel.merge",
        "kernel.reduce_counts",
        "consolidation",
        "fusion",
        "temporal",
    },
    "trace": {
        "trace",
        "trace.batch",
        "trace.builder",
        "trace.column_batch",
        "trace.holds",
        "trace.layout",
        "trace.marshal_columns",
        "trace.segments",
        "trace.cursor",
        "trace.lifecycle",
        "trace.spine",
        "trace.view",
        "column_message",
    },
    "agent": {"agent"},
    "operator": {
        "arrange",
        "arrange_columns",
        "join",
        "reduce",
        "reduce.common",
        "reduce.logic",
        "reduce.product",
        "reduce.distinct_product",
        "reduce.general",
        "reduce.total",
        "reduce.column_sum",
        "reduce.column_count",
        "consolidate",
        "iterate",
    },
    "facade": {"", "collection", "captured", "input", "input_columns"},
}
RANK = {name: i for i, name in enumerate(LAYERS)}


MODULES = {
    name[len(PREFIX) + 1 :] if name != PREFIX else "": path
    for name, path in source.MODULES.items()
    if name == PREFIX or name.startswith(PREFIX + ".")
}


def _layer(module: str) -> str:
    for name, members in LAYERS.items():
        if module in members:
            return name
    raise AssertionError(f"timelypy.differential.{module} is in no layer: add it to LAYERS")


def _internal(name: str) -> str | None:
    """The differential module ``name`` is (relative to the package), or None."""
    if name != PREFIX and not name.startswith(PREFIX + "."):
        return None
    rel = name[len(PREFIX) + 1 :] if name != PREFIX else ""
    return rel if rel in MODULES else None


def _graph() -> Dict[str, Set[str]]:
    graph: Dict[str, Set[str]] = {}
    for module in MODULES:
        name = f"{PREFIX}.{module}".rstrip(".")
        targets = {_internal(t) for t in source.imports(name, with_packages=True)}
        graph[module] = {t for t in targets if t is not None and t != module}
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
