"""Brute-force reachability oracles over a scope's location graph (a ``GraphSpec``).

Walks are enumerated hop by hop and reachability is found by search; the progress tracker's
summaries and cycle checks are compared with these.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Dict, Optional, Set, Tuple

from oracle.order import PS, minimal_summaries, ps_key

from timelypy.order import ProductSummary
from timelypy.progress.reachability import Location

if TYPE_CHECKING:
    from support.progress_strategies import GraphSpec


def identity_graph(spec: GraphSpec) -> Dict[Location, Set[Location]]:
    """Location graph with only identity links (every edge, internal links containing identity)."""
    g: Dict[Location, Set[Location]] = {loc: set() for loc in spec.locations()}
    for a, hops in spec.hops().items():
        for b, s in hops:
            if s.is_identity():
                g[a].add(b)
    return g


def reachable_sets(g: Dict[Location, Set[Location]]) -> Dict[Location, Set[Location]]:
    """``reach[a]`` = locations reachable from ``a`` by one or more steps."""
    out = {}
    for a in g:
        seen: Set[Location] = set()
        stack = list(g[a])
        while stack:
            x = stack.pop()
            if x in seen:
                continue
            seen.add(x)
            stack.extend(g[x])
        out[a] = seen
    return out


def identity_cycle_nodes(spec: GraphSpec) -> Set[int]:
    """Operators with a port on some identity cycle (empty iff there is no identity cycle)."""
    reach = reachable_sets(identity_graph(spec))
    return {loc.node for loc, r in reach.items() if loc in r}


def brute_force_summaries(
    spec: GraphSpec, start: Location, bound: Optional[int] = None
) -> Dict[Location, Set[ProductSummary]]:
    """Minimal summaries of every walk of at most ``bound`` hops from ``start`` to each target.

    The default bound is the number of locations: a longer walk repeats a location, and cutting
    out the repeated part gives a walk whose summary is ``<=`` (all deltas are >= 0), so longer
    walks never add a minimal summary. Walks do not pass through node 0 (its connectivity is
    empty). Summaries are tracked as (outer, inner) delta pairs.
    """
    hops = spec.hops()
    if bound is None:
        bound = len(hops)
    layer: Dict[Location, Set[Tuple[int, int]]] = {start: {(0, 0)}}
    seen: Dict[Location, Set[Tuple[int, int]]] = {start: {(0, 0)}}
    for _ in range(bound):
        nxt: Dict[Location, Set[Tuple[int, int]]] = {}
        for loc, ss in layer.items():
            for loc2, s in hops[loc]:
                d = ps_key(s)
                bucket = nxt.setdefault(loc2, set())
                for a, b in ss:
                    bucket.add((a + d[0], b + d[1]))
        layer = nxt
        for loc, ss in nxt.items():
            seen.setdefault(loc, set()).update(ss)
    out: Dict[Location, Set[ProductSummary]] = {}
    for loc, ss in seen.items():
        if loc.is_source:
            continue
        out[loc] = minimal_summaries(PS(a, b) for a, b in ss)
    return out
