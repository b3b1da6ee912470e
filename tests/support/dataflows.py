"""Dataflows several test files run: written once, so each file states only what it checks."""

from __future__ import annotations

from typing import Any


def _destination(edge: Any) -> Any:
    return edge[1]


def reachability(edges: Any, roots: Any) -> Any:
    """The nodes reachable from ``roots`` along ``edges`` (a collection of ``(src, dst)``):
    ``roots.iterate(edges.enter(loop).semijoin(loop).map(dst).concat(roots).distinct())``,
    the iterative reachability of the differential dataflow book (distinct at
    ``Product(int, int)`` times inside the loop)."""
    return roots.iterate(
        lambda inner: (
            edges.enter(inner.scope)
            .semijoin(inner)
            .map(_destination)
            .concat(roots.enter(inner.scope))
            .distinct()
        )
    )
