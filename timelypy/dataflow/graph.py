"""Pictures of dataflows: a plain graph model of built scopes, as Graphviz DOT, Mermaid or PNG/SVG.

A built :class:`~timelypy.dataflow.scope.Scope` knows its operators (``scope.subgraph.children``),
its edges with their pact (``scope.edges``) and its nested scopes (``scope.nested``).
:func:`graph_of` turns one or several scopes into a :class:`DataflowGraph`: nodes (operators,
and the inputs / outputs of nested scopes), edges with their pact (``"Pipeline"`` or
``"Exchange"``; an edge out of a feedback operator is marked ``loop``) and clusters (every
dataflow and every nested scope). :func:`to_dot` and :func:`to_mermaid` render it as text (pure
Python); :func:`render_image` runs Graphviz's ``dot`` for PNG or SVG bytes.

``annotations`` add a line of text to operators, keyed by ``(scope name, operator index)`` as in
the instrument events (:mod:`timelypy.instrument`) and :mod:`timelypy.stats` (for example
records in and out).

>>> import timelypy as tp
>>> from timelypy.dataflow.graph import to_dot, to_mermaid
>>> def build(worker):
...     def dataflow(scope):
...         edges_in, edges = scope.new_collection(name="edges")
...         edges.map(lambda e: (e[1], e[0])).join(edges).probe()
...         return to_mermaid(scope)
...     return worker.dataflow(dataflow)
>>> text = tp.execute(build)[0]
>>> text.splitlines()[0]
'flowchart TB'
>>> "==>|Exchange|" in text
True
"""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union

from ..progress.reachability import Location
from .feedback import FeedbackOperator

if TYPE_CHECKING:
    from .scope import Scope

__all__ = [
    "GraphNode",
    "GraphEdge",
    "GraphCluster",
    "DataflowGraph",
    "GraphvizNotFound",
    "Annotations",
    "graph_of",
    "to_dot",
    "to_mermaid",
    "render_image",
    "render_png",
]

Annotations = Mapping[Tuple[str, int], str]
"""Extra text per operator, by ``(scope name, operator index)``."""


@dataclass(frozen=True)
class GraphNode:
    """An operator (``kind="operator"`` or ``"feedback"``) or a nested scope's input / output
    (``kind="scope-input"`` / ``"scope-output"``, ``index`` is then the port)."""

    id: str
    scope: str
    index: int
    name: str
    kind: str = "operator"
    note: Optional[str] = None


@dataclass(frozen=True)
class GraphEdge:
    """A channel from ``source`` to ``target`` (node ids) under ``pact``; ``loop``: it leaves a
    feedback operator (the back edge of a cycle)."""

    source: str
    target: str
    pact: str = "Pipeline"
    loop: bool = False


@dataclass
class GraphCluster:
    """A scope: a dataflow or a nested (iterative) scope, with its nodes and nested clusters."""

    id: str
    name: str
    index: int
    nodes: List[str] = field(default_factory=list)
    clusters: List["GraphCluster"] = field(default_factory=list)
    note: Optional[str] = None


@dataclass
class DataflowGraph:
    """Nodes by id, edges in construction order and one top cluster per dataflow."""

    nodes: Dict[str, GraphNode] = field(default_factory=dict)
    edges: List[GraphEdge] = field(default_factory=list)
    clusters: List[GraphCluster] = field(default_factory=list)

    def operators(self) -> List[GraphNode]:
        """The operator nodes (no scope inputs / outputs), in construction order."""
        return [n for n in self.nodes.values() if n.kind in ("operator", "feedback")]


class GraphvizNotFound(RuntimeError):
    """Graphviz's ``dot`` program is needed for PNG / SVG pictures and is not installed."""


def _endpoint(prefix: str, loc: Location, scope: "Scope") -> str:
    """The node id of an edge's end in ``scope`` (ids below ``prefix``)."""
    if loc.node == 0:  # this scope's boundary: its input i (a source inside) or output j
        return f"{prefix}_{'in' if loc.is_source else 'out'}{loc.port}"
    if loc.node in scope.nested:  # a nested scope: its output (source here) or input
        return f"{prefix}_{loc.node}_{'out' if loc.is_source else 'in'}{loc.port}"
    return f"{prefix}_{loc.node}"


def _add_scope(
    graph: DataflowGraph, scope: "Scope", prefix: str, index: int, annotations: Annotations
) -> GraphCluster:
    subgraph = scope.subgraph
    name = subgraph.name
    cluster = GraphCluster(prefix, name, index)
    if scope.parent is not None:
        cluster.note = annotations.get((scope.parent.subgraph.name, index))
        for kind, count, tag in (
            ("scope-input", subgraph.inputs, "in"),
            ("scope-output", subgraph.outputs, "out"),
        ):
            for port in range(count):
                node = GraphNode(
                    f"{prefix}_{tag}{port}",
                    name,
                    port,
                    f"{'enter' if tag == 'in' else 'leave'} {port}",
                    kind,
                )
                graph.nodes[node.id] = node
                cluster.nodes.append(node.id)
    for op in subgraph.children[1:]:
        if op.index in scope.nested:
            cluster.clusters.append(
                _add_scope(
                    graph, scope.nested[op.index], f"{prefix}_{op.index}", op.index, annotations
                )
            )
            continue
        kind = "feedback" if isinstance(op, FeedbackOperator) else "operator"
        node = GraphNode(
            f"{prefix}_{op.index}", name, op.index, op.name, kind, annotations.get((name, op.index))
        )
        graph.nodes[node.id] = node
        cluster.nodes.append(node.id)
    feedback = {op.index for op in subgraph.children[1:] if isinstance(op, FeedbackOperator)}
    for source, target, pact in scope.edges:
        graph.edges.append(
            GraphEdge(
                _endpoint(prefix, source, scope),
                _endpoint(prefix, target, scope),
                pact,
                source.node in feedback,
            )
        )
    return cluster


def graph_of(
    scopes: Union[Any, Sequence[Any]], annotations: Optional[Annotations] = None
) -> DataflowGraph:
    """The :class:`DataflowGraph` of one built root scope or of several (one cluster each).

    Node ids are ``d<k>_<index>[_<index>...]``: the dataflow's position in ``scopes``, then the
    operator index in each enclosing scope; a nested scope's ports are ``..._in<i>`` and
    ``..._out<j>``.
    """
    if isinstance(scopes, DataflowGraph):
        return scopes
    if not isinstance(scopes, (list, tuple)):
        scopes = [scopes]
    graph = DataflowGraph()
    for k, scope in enumerate(scopes):
        graph.clusters.append(_add_scope(graph, scope, f"d{k}", k, annotations or {}))
    return graph


def _dot_quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def _label(node: GraphNode) -> str:
    if node.kind in ("scope-input", "scope-output"):
        return node.name
    text = f"[{node.index}] {node.name}"
    return f"{text}\n{node.note}" if node.note else text


_DOT_NODE = {
    "operator": 'shape=box, style="rounded,filled", fillcolor="#e8f0fe"',
    "feedback": 'shape=box, style="rounded,filled,dashed", fillcolor="#fff4e0"',
    "scope-input": 'shape=cds, style=filled, fillcolor="#f1f1f1", fontsize=9',
    "scope-output": 'shape=cds, style=filled, fillcolor="#f1f1f1", fontsize=9',
}


def _dot_cluster(graph: DataflowGraph, cluster: GraphCluster, depth: int) -> List[str]:
    pad = "  " * depth
    label = cluster.name if cluster.note is None else f"{cluster.name}\n{cluster.note}"
    lines = [
        f"{pad}subgraph {_dot_quote('cluster_' + cluster.id)} {{",
        f'{pad}  label={_dot_quote(label)}; style=rounded; color="#7a869a";',
    ]
    for node_id in cluster.nodes:
        node = graph.nodes[node_id]
        lines.append(
            f"{pad}  {_dot_quote(node_id)} [label={_dot_quote(_label(node))}, "
            f"{_DOT_NODE[node.kind]}];"
        )
    for child in cluster.clusters:
        lines.extend(_dot_cluster(graph, child, depth + 1))
    lines.append(f"{pad}}}")
    return lines


def to_dot(
    scopes: Union[Any, Sequence[Any]],
    annotations: Optional[Annotations] = None,
    title: Optional[str] = None,
) -> str:
    """Graphviz DOT text of ``scopes`` (a built scope, several, or a :class:`DataflowGraph`).

    Every scope is a ``cluster_<id>`` subgraph; exchange edges are bold, red and labelled
    ``Exchange``; pipeline edges are plain; loop edges (out of a feedback operator) are dashed
    and labelled ``loop``.
    """
    graph = graph_of(scopes, annotations)
    lines = [
        "digraph timelypy {",
        "  rankdir=TB; compound=true;",
        '  node [fontname="Helvetica", fontsize=11];',
        '  edge [fontname="Helvetica", fontsize=9];',
    ]
    if title:
        lines.append(f"  label={_dot_quote(title)}; labelloc=t;")
    for cluster in graph.clusters:
        lines.extend(_dot_cluster(graph, cluster, 1))
    for e in graph.edges:
        attrs = (
            ['label="Exchange"', 'color="#c0392b"', "penwidth=2"] if e.pact == "Exchange" else []
        )
        if e.loop:
            attrs += ['label="loop"', "style=dashed", "constraint=false"]
        suffix = f" [{', '.join(attrs)}]" if attrs else ""
        lines.append(f"  {_dot_quote(e.source)} -> {_dot_quote(e.target)}{suffix};")
    lines.append("}")
    return "\n".join(lines) + "\n"


def _mermaid_text(text: str) -> str:
    return '"' + text.replace('"', "#quot;").replace("\n", "<br/>") + '"'


def _mermaid_cluster(graph: DataflowGraph, cluster: GraphCluster, depth: int) -> List[str]:
    pad = "  " * depth
    label = cluster.name if cluster.note is None else f"{cluster.name}\n{cluster.note}"
    lines = [f"{pad}subgraph {cluster.id}[{_mermaid_text(label)}]"]
    for node_id in cluster.nodes:
        node = graph.nodes[node_id]
        text = _mermaid_text(_label(node))
        shape = f"([{text}])" if node.kind.startswith("scope-") else f"[{text}]"
        lines.append(f"{pad}  {node_id}{shape}")
    for child in cluster.clusters:
        lines.extend(_mermaid_cluster(graph, child, depth + 1))
    lines.append(f"{pad}end")
    return lines


def to_mermaid(scopes: Union[Any, Sequence[Any]], annotations: Optional[Annotations] = None) -> str:
    """Mermaid ``flowchart`` text of ``scopes``: scopes as subgraphs, exchange edges thick and
    labelled (``==>|Exchange|``), pipeline edges plain (``-->``), loop edges dotted
    (``-.->|loop|``)."""
    graph = graph_of(scopes, annotations)
    lines = ["flowchart TB"]
    for cluster in graph.clusters:
        lines.extend(_mermaid_cluster(graph, cluster, 1))
    for e in graph.edges:
        if e.loop:
            arrow = "-.->|loop|"
        elif e.pact == "Exchange":
            arrow = "==>|Exchange|"
        else:
            arrow = "-->"
        lines.append(f"  {e.source} {arrow} {e.target}")
    return "\n".join(lines) + "\n"


def render_image(
    dot_text: str, fmt: str = "png", dot: Optional[str] = None, timeout: float = 60.0
) -> bytes:
    """Run Graphviz's ``dot`` on ``dot_text``; returns the picture's bytes (``fmt``: ``png``,
    ``svg``, ``pdf``, ...). Raises :class:`GraphvizNotFound` when ``dot`` is not installed."""
    program = dot or shutil.which("dot")
    if program is None:
        raise GraphvizNotFound(
            "drawing a PNG or SVG picture needs the `dot` program of Graphviz, which is not on "
            "PATH: install graphviz (apt-get install graphviz, brew install graphviz or conda "
            "install graphviz), or ask for DOT or Mermaid text, which need nothing"
        )
    done = subprocess.run(
        [program, f"-T{fmt}"],
        input=dot_text.encode(),
        capture_output=True,
        timeout=timeout,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(
            f"dot -T{fmt} failed ({done.returncode}): "
            f"{done.stderr.decode(errors='replace').strip()}"
        )
    return done.stdout


def render_png(
    scopes: Union[Any, Sequence[Any]],
    annotations: Optional[Annotations] = None,
    dot: Optional[str] = None,
) -> bytes:
    """PNG bytes of ``scopes`` (:func:`to_dot`, then Graphviz's ``dot``)."""
    return render_image(to_dot(scopes, annotations), "png", dot=dot)
