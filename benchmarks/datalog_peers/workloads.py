"""The Datalog benchmark's workloads: programs, generated facts, fact changes, digests.

Standard library only (the pydbsp peer runs it under another interpreter). Every workload is
built from a JSON spec (``{"workload": "tc", "nodes": ..., "edges": ..., "changes": ...,
"seed": ...}``), deterministically, so that each system's process regenerates the same facts
and the same changes.

Each program is written once as rules in a small tuple form (``RULES``): a rule is ``(head,
body)``, an atom is ``(relation, terms)`` and a term is a variable (a ``str``) or a constant
(an ``int``). The Datalog text (timelypy), pydbsp's rules and the from-scratch reference
evaluator all come from it; DuckDB's SQL is written by hand beside it (``duckdb_peer.py``).

Workloads:

* ``tc``: transitive closure of a seeded random directed graph (``nodes``, ``edges``).
  A change removes a random edge or inserts a random absent edge (alternately).
* ``sg``: same generation (``sg(x, y)`` when ``x`` and ``y`` are at the same depth of a tree,
  ``x = y`` included: pydbsp's rules have no comparisons, so every system runs the variant
  without ``x != y``) on a seeded random tree of ``nodes`` nodes and ``fanout`` children per
  node at most. A change removes a ``par`` fact (a subtree leaves the tree) or puts the last
  removed node back under a random parent at the old parent's depth (alternately).
* ``andersen``: Andersen's inclusion-based points-to analysis on a generated program of
  ``statements`` statements (address-of ``p = &a``, copy ``p = q``, load ``p = *q``, store
  ``*p = q``) over ``statements // 2`` variables grouped into functions of ``function_size``
  variables (most statements stay inside a function). A change removes a random statement or
  inserts a new random one (alternately).
"""

from __future__ import annotations

import hashlib
import random
from typing import Any, Dict, List, Sequence, Set, Tuple

Fact = Tuple[int, ...]
Atom = Tuple[str, Tuple[Any, ...]]
Rule = Tuple[Atom, Tuple[Atom, ...]]
Change = Tuple[str, Fact, int]  # (relation, fact, +1 insert / -1 remove)

RULES: Dict[str, Tuple[Rule, ...]] = {
    "tc": (
        (("path", ("x", "y")), (("edge", ("x", "y")),)),
        (("path", ("x", "z")), (("path", ("x", "y")), ("edge", ("y", "z")))),
    ),
    "sg": (
        (("sg", ("x", "y")), (("par", ("x", "p")), ("par", ("y", "p")))),
        (("sg", ("x", "y")), (("par", ("x", "xp")), ("sg", ("xp", "yp")), ("par", ("y", "yp")))),
    ),
    "andersen": (
        (("pointsTo", ("p", "a")), (("addressOf", ("p", "a")),)),
        (("pointsTo", ("p", "a")), (("assign", ("p", "q")), ("pointsTo", ("q", "a")))),
        (
            ("pointsTo", ("p", "a")),
            (("load", ("p", "q")), ("pointsTo", ("q", "r")), ("pointsTo", ("r", "a"))),
        ),
        (
            ("pointsTo", ("r", "a")),
            (("store", ("p", "q")), ("pointsTo", ("p", "r")), ("pointsTo", ("q", "a"))),
        ),
    ),
}
"""Each workload's program as rules (head, body)."""

INPUTS: Dict[str, Tuple[Tuple[str, Tuple[str, ...]], ...]] = {
    "tc": (("edge", ("x", "y")),),
    "sg": (("par", ("c", "p")),),
    "andersen": (
        ("addressOf", ("p", "a")),
        ("assign", ("p", "q")),
        ("load", ("p", "q")),
        ("store", ("p", "q")),
    ),
}
"""Each workload's input relations with their attribute names."""

OUTPUT: Dict[str, Tuple[str, Tuple[str, ...]]] = {
    "tc": ("path", ("x", "y")),
    "sg": ("sg", ("x", "y")),
    "andersen": ("pointsTo", ("p", "a")),
}
"""Each workload's output relation (the one whose digest the systems must agree on)."""

WORKLOADS = tuple(RULES)

DEFAULTS: Dict[str, Dict[str, int]] = {
    "tc": {"nodes": 10_000, "edges": 10_000},
    "sg": {"nodes": 2_000, "fanout": 4},
    "andersen": {"statements": 10_000, "function_size": 20},
}
"""Default sizes per workload (overridden by the spec)."""


class Workload:
    """A generated instance: the program, the initial facts and the changes to apply."""

    def __init__(
        self,
        name: str,
        spec: Dict[str, Any],
        facts: Dict[str, List[Fact]],
        changes: List[Change],
    ) -> None:
        self.name = name
        self.spec = spec
        self.facts = facts
        self.changes = changes
        self.rules = RULES[name]
        self.output = OUTPUT[name][0]

    def datalog_text(self) -> str:
        """The program in Soufflé's syntax (declarations, directives, rules)."""
        return datalog_text(self.name)

    def sizes(self) -> Dict[str, int]:
        """Input facts per relation, and the number of changes."""
        out = {rel: len(fs) for rel, fs in self.facts.items()}
        out["changes"] = len(self.changes)
        return out


def datalog_text(name: str) -> str:
    """``name``'s program in Soufflé's syntax."""
    lines: List[str] = []
    for rel, attrs in INPUTS[name]:
        lines.append(f".decl {rel}({', '.join(a + ': number' for a in attrs)})")
        lines.append(f".input {rel}")
    rel, attrs = OUTPUT[name]
    lines.append(f".decl {rel}({', '.join(a + ': number' for a in attrs)})")
    lines.append(f".output {rel}")
    for head, body in RULES[name]:
        lines.append(f"{_atom_text(head)} :- {', '.join(_atom_text(a) for a in body)}.")
    return "\n".join(lines) + "\n"


def _atom_text(atom: Atom) -> str:
    return f"{atom[0]}({', '.join(str(t) for t in atom[1])})"


def build(spec: Dict[str, Any]) -> Workload:
    """The workload of ``spec`` (``workload`` names it; missing sizes take :data:`DEFAULTS`)."""
    name = spec["workload"]
    if name not in RULES:
        raise ValueError(f"datalog benchmark: unknown workload {name!r} (known: {WORKLOADS})")
    full = {**DEFAULTS[name], "changes": 100, "seed": 1, **spec}
    rng = random.Random(f"{name}-{full['seed']}")
    if name == "tc":
        facts, changes = _tc(rng, int(full["nodes"]), int(full["edges"]), int(full["changes"]))
    elif name == "sg":
        facts, changes = _sg(rng, int(full["nodes"]), int(full["fanout"]), int(full["changes"]))
    else:
        facts, changes = _andersen(
            rng, int(full["statements"]), int(full["function_size"]), int(full["changes"])
        )
    return Workload(name, full, facts, changes)


def _tc(
    rng: random.Random, nodes: int, edges: int, changes: int
) -> Tuple[Dict[str, List[Fact]], List[Change]]:
    if nodes < 2 or edges > nodes * (nodes - 1) // 2:
        raise ValueError(f"datalog benchmark tc: {edges} edges do not fit {nodes} nodes")
    present: Set[Fact] = set()
    while len(present) < edges:
        a, b = rng.randrange(nodes), rng.randrange(nodes)
        if a != b:
            present.add((a, b))
    initial = sorted(present)
    current = list(initial)
    out: List[Change] = []
    for i in range(changes):
        if i % 2 == 0 and current:
            k = rng.randrange(len(current))
            current[k], current[-1] = current[-1], current[k]
            edge = current.pop()
            present.discard(edge)
            out.append(("edge", edge, -1))
        else:
            while True:
                a, b = rng.randrange(nodes), rng.randrange(nodes)
                if a != b and (a, b) not in present:
                    break
            present.add((a, b))
            current.append((a, b))
            out.append(("edge", (a, b), 1))
    return {"edge": initial}, out


def _sg(
    rng: random.Random, nodes: int, fanout: int, changes: int
) -> Tuple[Dict[str, List[Fact]], List[Change]]:
    if nodes < 2 or fanout < 1:
        raise ValueError("datalog benchmark sg: needs 2 nodes or more and fanout >= 1")
    # A random tree: node i > 0 hangs under a random earlier node with room for a child.
    depth = [0] * nodes
    children = [0] * nodes
    open_parents = [0]
    par: Dict[int, int] = {}
    for c in range(1, nodes):
        k = rng.randrange(len(open_parents))
        p = open_parents[k]
        par[c] = p
        depth[c] = depth[p] + 1
        children[p] += 1
        if children[p] == fanout:
            open_parents[k] = open_parents[-1]
            open_parents.pop()
        open_parents.append(c)
    by_depth: Dict[int, List[int]] = {}
    for n in range(nodes):
        by_depth.setdefault(depth[n], []).append(n)
    initial = sorted((c, p) for c, p in par.items())
    out: List[Change] = []
    removed = None
    for _ in range(changes):
        if removed is None:
            # A uniform node: most nodes of a tree are near the leaves (small subtrees).
            c = rng.randrange(1, nodes)
            while c not in par:
                c = rng.randrange(1, nodes)
            p = par.pop(c)
            removed = (c, p)
            out.append(("par", (c, p), -1))
        else:
            c, p = removed
            # A new parent at the old one's depth that is not in c's subtree (depths differ).
            q = rng.choice(by_depth[depth[p]])
            par[c] = q
            removed = None
            out.append(("par", (c, q), 1))
    return {"par": initial}, out


def _andersen(
    rng: random.Random, statements: int, function_size: int, changes: int
) -> Tuple[Dict[str, List[Fact]], List[Change]]:
    # Pointer variables 0..V-1 in functions of ``function_size``; each function allocates
    # objects (ids from V on, a tenth as many as variables), whose contents the loads and
    # stores reach. Values mostly flow forward inside a function (q before p); one copy in
    # twenty crosses to another function (a call or a return).
    size = max(2, function_size)
    functions = max(1, statements // (2 * size))
    variables = functions * size
    objects_per_function = max(1, size // 10)
    kinds = ("addressOf", "assign", "load", "store")
    weights = (0.3, 0.5, 0.1, 0.1)

    def local_pair(f: int) -> Tuple[int, int]:
        a, b = rng.randrange(size), rng.randrange(size)
        if a == b:
            b = (b + 1) % size
        if rng.random() < 0.9 and a < b:
            a, b = b, a  # p = ... q with q earlier in the function
        return f * size + a, f * size + b

    def statement() -> Tuple[str, Fact]:
        kind = rng.choices(kinds, weights)[0]
        f = rng.randrange(functions)
        if kind == "addressOf":
            p = f * size + rng.randrange(size)
            return kind, (
                p,
                variables + f * objects_per_function + rng.randrange(objects_per_function),
            )
        if kind == "assign" and rng.random() < 0.05:
            return kind, (rng.randrange(variables), rng.randrange(variables))
        return kind, local_pair(f)

    present: Set[Tuple[str, Fact]] = set()
    while len(present) < statements:
        present.add(statement())
    facts: Dict[str, List[Fact]] = {k: [] for k in kinds}
    for kind, fact in sorted(present):
        facts[kind].append(fact)
    current = sorted(present)
    out: List[Change] = []
    for i in range(changes):
        if i % 2 == 0 and current:
            k = rng.randrange(len(current))
            current[k], current[-1] = current[-1], current[k]
            kind, fact = current.pop()
            present.discard((kind, fact))
            out.append((kind, fact, -1))
        else:
            while True:
                s = statement()
                if s not in present:
                    break
            present.add(s)
            current.append(s)
            out.append((s[0], s[1], 1))
    return facts, out


def digest(facts: Any) -> str:
    """A SHA-256 over the sorted facts (tuples of ints), the same whatever the order given."""
    h = hashlib.sha256()
    for fact in sorted(tuple(int(v) for v in f) for f in facts):
        h.update((",".join(map(str, fact)) + "\n").encode())
    return h.hexdigest()[:16]


def evaluate(rules: Sequence[Rule], facts: Dict[str, Set[Fact]]) -> Dict[str, Set[Fact]]:
    """A from-scratch semi-naive evaluation of positive ``rules`` over ``facts`` (every
    relation, inputs included), with plain dicts and sets: the check the systems' answers are
    held to. Body atoms are joined left to right from the one that reads the delta, each
    through a hash index on its columns bound so far."""
    db: Dict[str, Set[Fact]] = {rel: set(fs) for rel, fs in facts.items()}
    for (rel, _), body in rules:
        db.setdefault(rel, set())
        for atom in body:
            db.setdefault(atom[0], set())
    delta: Dict[str, Set[Fact]] = {rel: set(fs) for rel, fs in db.items()}
    while any(delta.values()):
        indexes: Dict[Tuple[str, Tuple[int, ...]], Dict[Tuple[int, ...], List[Fact]]] = {}
        new: Dict[str, Set[Fact]] = {}
        for head, body in rules:
            for i, atom in enumerate(body):
                if not delta.get(atom[0]):
                    continue
                for binding in _join(body, i, db, delta[atom[0]], indexes):
                    fact = tuple(binding[t] if isinstance(t, str) else t for t in head[1])
                    if fact not in db[head[0]]:
                        new.setdefault(head[0], set()).add(fact)
        for rel, fs in new.items():
            db[rel] |= fs
        delta = new
    return db


def _join(
    body: Sequence[Atom],
    pivot: int,
    db: Dict[str, Set[Fact]],
    pivot_facts: Set[Fact],
    indexes: Dict[Tuple[str, Tuple[int, ...]], Dict[Tuple[int, ...], List[Fact]]],
) -> List[Dict[str, int]]:
    bindings: List[Dict[str, int]] = []
    for fact in pivot_facts:
        b = _unify(body[pivot][1], fact, {})
        if b is not None:
            bindings.append(b)
    for j in range(len(body)):
        if j == pivot or not bindings:
            continue
        rel, terms = body[j]
        bound = tuple(k for k, t in enumerate(terms) if not isinstance(t, str) or t in bindings[0])
        index = indexes.get((rel, bound))
        if index is None:
            index = {}
            for fact in db[rel]:
                index.setdefault(tuple(fact[k] for k in bound), []).append(fact)
            indexes[(rel, bound)] = index
        out: List[Dict[str, int]] = []
        for b in bindings:
            key = tuple(b[terms[k]] if isinstance(terms[k], str) else terms[k] for k in bound)
            for fact in index.get(key, ()):
                nb = _unify(terms, fact, b)
                if nb is not None:
                    out.append(nb)
        bindings = out
    return bindings


def _unify(terms: Tuple[Any, ...], fact: Fact, binding: Dict[str, int]) -> Any:
    out = dict(binding)
    for t, v in zip(terms, fact):
        if isinstance(t, str):
            if out.setdefault(t, v) != v:
                return None
        elif t != v:
            return None
    return out
