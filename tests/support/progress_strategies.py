"""Hypothesis strategies for the order and progress tests: times by shape, summaries, scopes.

Shared by ``tests/progress/test_order.py`` and ``tests/progress/test_progress_tracking.py``; the
brute-force oracles they are checked against are ``oracle.order`` and ``oracle.reachability``.

Times
-----
Times come in *shapes*, so that two times drawn for the same test are comparable:

* ``"int"``          plain ints (root scope)
* ``"p"``            ``Product(int, int)`` (one loop deep)
* ``"pp"``           ``Product(Product(int, int), int)`` (two loops deep, what ``TimeOrder.nested``
                     builds)
* ``"p_inner"``      ``Product(int, Product(int, int))`` (nesting on the inner side; the generic
                     functions must handle it too)

Graphs
------
:func:`graphs` draws a random scope: nodes ``1..n`` (names ``op1``, ``op2``...), optionally the
scope boundary node 0 (empty connectivity), each node with random antichains of
``ProductSummary(IntSummary(outer in {0,1}), IntSummary(inner in {0,1,2}))`` between its ports, and
random edges (each target at most one incoming edge, sources fan out, loops allowed).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence, Tuple

from hypothesis import strategies as st
from oracle.order import PS, minimal_summaries, ps_key

from timelypy.order import IntSummary, Product, ProductSummary
from timelypy.progress.reachability import Location, ReachabilityBuilder, Source, Target

# --------------------------------------------------------------------------------------
# Times

SHAPES = ("int", "p", "pp", "p_inner")


def times_of_shape(shape: str, lo: int = 0, hi: int = 4) -> st.SearchStrategy:
    """Times of one shape with every int coordinate in ``[lo, hi]``."""
    i = st.integers(lo, hi)
    if shape == "int":
        return i
    if shape == "p":
        return st.builds(Product, i, i)
    if shape == "pp":
        return st.builds(Product, st.builds(Product, i, i), i)
    if shape == "p_inner":
        return st.builds(Product, i, st.builds(Product, i, i))
    raise ValueError(shape)


@st.composite
def shaped_times(draw, n: int = 3, lo: int = 0, hi: int = 4, shapes: Sequence[str] = SHAPES):
    """``(shape, [t1, ..., tn])``: ``n`` times of one randomly chosen shape."""
    shape = draw(st.sampled_from(list(shapes)))
    ts = [draw(times_of_shape(shape, lo, hi)) for _ in range(n)]
    return shape, ts


def product_times(hi: int = 4) -> st.SearchStrategy:
    return times_of_shape("p", 0, hi)


# --------------------------------------------------------------------------------------
# Summaries


def int_summaries(max_delta: int = 5) -> st.SearchStrategy:
    return st.builds(IntSummary, st.integers(0, max_delta))


def summary_for_shape(shape: str, max_delta: int = 3) -> st.SearchStrategy:
    """Summaries acting on times of ``shape``."""
    i = int_summaries(max_delta)
    if shape == "int":
        return i
    if shape == "p":
        return st.builds(ProductSummary, i, i)
    if shape == "pp":
        return st.builds(ProductSummary, st.builds(ProductSummary, i, i), i)
    if shape == "p_inner":
        return st.builds(ProductSummary, i, st.builds(ProductSummary, i, i))
    raise ValueError(shape)


# A summary antichain for one (input, output) cell: a few Product summaries, minimised.
# Identity summaries are deliberately common so that identity cycles occur often.
_summary_atoms = st.one_of(
    st.just(PS(0, 0)),
    st.just(PS(0, 1)),
    st.builds(PS, st.integers(0, 1), st.integers(0, 2)),
)


# Fewer identities: more strictly advancing loops and more multi-element antichains.
_advancing_atoms = st.builds(PS, st.integers(0, 1), st.integers(0, 2))


@st.composite
def summary_cells(draw, identity_heavy: bool = True) -> List[ProductSummary]:
    atoms = _summary_atoms if identity_heavy else _advancing_atoms
    raw = draw(st.lists(atoms, min_size=0, max_size=3))
    return sorted(minimal_summaries(raw), key=ps_key)


# --------------------------------------------------------------------------------------
# Graphs


@dataclass
class GraphSpec:
    """A scope: ``nodes[index] = (n_inputs, n_outputs, summary)``, ``edges = [(src, tgt)]``."""

    nodes: Dict[int, Tuple[int, int, List[List[List[ProductSummary]]]]]
    edges: List[Tuple[Location, Location]]
    names: Dict[int, str] = field(default_factory=dict)

    def builder(self) -> ReachabilityBuilder:
        b = ReachabilityBuilder(PS(0, 0))
        for idx, (ni, no, summ) in sorted(self.nodes.items()):
            b.add_node(idx, ni, no, summ, name=self.names.get(idx, ""))
        for s, t in self.edges:
            b.add_edge(s, t)
        return b

    def sources(self) -> List[Location]:
        return [Source(n, o) for n, (_, no, _) in sorted(self.nodes.items()) for o in range(no)]

    def targets(self) -> List[Location]:
        return [Target(n, i) for n, (ni, _, _) in sorted(self.nodes.items()) for i in range(ni)]

    def locations(self) -> List[Location]:
        return self.targets() + self.sources()

    def hops(self) -> Dict[Location, List[Tuple[Location, ProductSummary]]]:
        """One step of the location graph: edges (identity) and internal links (each summary)."""
        out: Dict[Location, List[Tuple[Location, ProductSummary]]] = {
            loc: [] for loc in self.locations()
        }
        for s, t in self.edges:
            out[s].append((t, PS(0, 0)))
        for n, (ni, no, summ) in self.nodes.items():
            for i in range(ni):
                for o in range(no):
                    for s in summ[i][o]:
                        out[Target(n, i)].append((Source(n, o), s))
        return out

    def __repr__(self) -> str:  # readable falsifying examples
        lines = ["GraphSpec("]
        for idx, (ni, no, summ) in sorted(self.nodes.items()):
            cells = [[[ps_key(s) for s in cell] for cell in row] for row in summ]
            lines.append(f"  node {idx} ({self.names.get(idx, '')}): in={ni} out={no} {cells}")
        for s, t in self.edges:
            lines.append(f"  edge {s!r} -> {t!r}")
        lines.append(")")
        return "\n".join(lines)


@st.composite
def graphs(
    draw, max_nodes: int = 5, allow_boundary: bool = True, identity_heavy: Optional[bool] = None
) -> GraphSpec:
    """A random scope. ``identity_heavy`` (default: random) makes identity summaries common, so
    that identity cycles are frequent; otherwise most loops strictly advance time."""
    if identity_heavy is None:
        identity_heavy = draw(st.booleans())
    n = draw(st.integers(1, max_nodes))
    nodes: Dict[int, Tuple[int, int, list]] = {}
    names: Dict[int, str] = {}
    if allow_boundary and draw(st.booleans()):
        scope_out = draw(st.integers(0, 2))  # inputs of node 0 = scope outputs
        scope_in = draw(st.integers(0, 2))  # outputs of node 0 = scope inputs
        nodes[0] = (scope_out, scope_in, [[[] for _ in range(scope_in)] for _ in range(scope_out)])
    for idx in range(1, n + 1):
        ni = draw(st.integers(0, 3) if draw(st.integers(0, 4)) == 0 else st.integers(1, 3))
        no = draw(st.integers(1, 3))
        summ = [[draw(summary_cells(identity_heavy)) for _ in range(no)] for _ in range(ni)]
        nodes[idx] = (ni, no, summ)
        names[idx] = f"op{idx}"
    spec = GraphSpec(nodes, [], names)
    sources = spec.sources()
    edges = []
    for tgt in spec.targets():
        if sources and draw(st.integers(0, 4)) > 0:  # most targets are connected
            edges.append((draw(st.sampled_from(sources)), tgt))
    spec.edges = edges
    return spec
