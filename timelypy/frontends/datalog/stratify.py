"""Stratification: the strongly connected components of the dependency graph, in order.

A derived relation depends on every relation of its rules' bodies; through a negated atom or an
aggregate the dependency is *negative*. The strata are the components of that graph (Tarjan's
algorithm), listed so that a stratum comes after every stratum it depends on; a negative
dependency inside one component is recursion through negation or aggregation, which has no
stratified meaning and is refused with an error naming the rules of the cycle (the Soufflé
manual, "Negation": "the program must be stratifiable").
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, Iterable, List, Set, Tuple

from ...errors import DatalogError
from . import syntax as s
from .normal import AggregateBinding, NormalLiteral, NormalRule

__all__ = ["Stratum", "dependencies", "stratify"]


@dataclass(frozen=True)
class Stratum:
    """Derived relations evaluated together; ``recursive`` when they depend on themselves."""

    relations: Tuple[str, ...]
    recursive: bool


def dependencies(rule: NormalRule) -> List[Tuple[str, bool]]:
    """``(relation, negative)`` for every atom of the rule's body (inside aggregates too)."""
    return list(_deps(rule.body, False))


def _deps(body: Iterable[NormalLiteral], negative: bool) -> Iterable[Tuple[str, bool]]:
    for lit in body:
        if isinstance(lit, s.Atom):
            yield (lit.relation, negative)
        elif isinstance(lit, s.Negation):
            yield (lit.atom.relation, True)
        elif isinstance(lit, AggregateBinding):
            yield from _deps(lit.body, True)


def stratify(rules: List[NormalRule], order: List[str], source: str = "<program>") -> List[Stratum]:
    """The strata of the derived relations of ``rules``, dependencies first (``order``, the
    declaration order, makes the result deterministic)."""
    derived = [name for name in order if any(r.relation == name for r in rules)]
    edges: Dict[str, Set[str]] = {name: set() for name in derived}
    for r in rules:
        edges[r.relation] |= {dep for dep, _ in dependencies(r) if dep in edges}
    out = []
    for component in _tarjan(derived, edges):
        members = set(component)
        _refuse_negative_cycle(rules, members, source)
        recursive = len(component) > 1 or component[0] in edges[component[0]]
        ordered = tuple(name for name in derived if name in members)
        out.append(Stratum(ordered, recursive))
    return out


def _tarjan(nodes: List[str], edges: Dict[str, Set[str]]) -> List[List[str]]:
    """Strongly connected components, each after every component it reaches (iterative)."""
    index: Dict[str, int] = {}
    low: Dict[str, int] = {}
    stack: List[str] = []
    on_stack: Set[str] = set()
    out: List[List[str]] = []
    for root in nodes:
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root], key=nodes.index)))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(edges[w], key=nodes.index))))
                elif w in on_stack:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                component = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    component.append(w)
                    if w == v:
                        break
                out.append(component)
    return out


def _refuse_negative_cycle(rules: List[NormalRule], members: Set[str], source: str) -> None:
    bad = [
        r
        for r in rules
        if r.relation in members and any(neg and d in members for d, neg in dependencies(r))
    ]
    if not bad:
        return
    cycle = [
        r for r in rules if r.relation in members and any(d in members for d, _ in dependencies(r))
    ]
    first = bad[0]
    negated = sorted({d for d, neg in dependencies(first) if neg and d in members})
    through = "aggregation" if _aggregates_over(first, set(negated)) else "negation"
    listed = "; ".join(f"line {r.rule.line}: {r.rule.text}" for r in cycle)
    raise DatalogError(
        f"recursion through {through}: {first.relation} depends on {', '.join(negated)} "
        f"{'inside an aggregate' if through == 'aggregation' else 'negatively'}, which depends "
        f"on {first.relation}; the rules of the cycle: {listed}",
        source=source,
        line=first.rule.line,
        column=first.rule.column,
        rule=first.rule.text,
        relation=first.relation,
    )


def _aggregates_over(rule: NormalRule, names: Set[str]) -> bool:
    return any(
        isinstance(lit, AggregateBinding) and {d for d, _ in _deps(lit.body, True)} & names
        for lit in rule.body
    )
