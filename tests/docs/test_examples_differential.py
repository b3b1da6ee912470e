"""The differential examples run, and print exactly what the Differential Dataflow book (or a
from-scratch computation) says they should.

* ``skip_level``: the book's listing for size 10, exactly, and a from-scratch join at
  every time for a larger size;
* ``geometric_series``: its final listing, version by version;
* ``transitive_closure``, ``connectivity``, ``friends_of_friends``, ``wordcount``: their outputs
  at every round against closures / components / joins / counts computed here from scratch.
"""

from __future__ import annotations

import ast
import importlib.util
import subprocess
import sys
import textwrap
from collections import Counter
from typing import Any, Dict, Iterable, List, Set, Tuple

import pytest
from support.paths import ROOT

import timelypy as tp

pytestmark = pytest.mark.timeout(120)

EXAMPLES = ROOT / "examples"


def load(name: str):
    spec = importlib.util.spec_from_file_location(f"examples_{name}", EXAMPLES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def parse_listing(text: str) -> List[Tuple[Any, int, int]]:
    return [
        ast.literal_eval(line.strip())
        for line in textwrap.dedent(text).splitlines()
        if line.strip()
    ]


def accumulate(updates: Iterable[Tuple[Any, int, int]], t: int) -> Dict[Any, int]:
    acc: Dict[Any, int] = {}
    for d, t1, r in updates:
        if t1 <= t:
            acc[d] = acc.get(d, 0) + r
    return {d: r for d, r in acc.items() if r}


def by_time(updates: Iterable[Tuple[Any, int, int]]) -> Dict[int, Set[Tuple[Any, int]]]:
    out: Dict[int, Set[Tuple[Any, int]]] = {}
    for d, t, r in updates:
        out.setdefault(t, set()).add((d, r))
    return out


# --------------------------------------------------------------------------- skip level
#: The book's "Step 2: Change its input": `cargo run -- 10`, verbatim.
BOOK_LISTING = parse_listing("""
    ((0, (0, 0)), 0, 1)
    ((0, (0, 1)), 0, 1)
    ((0, (0, 2)), 2, 1)
    ((1, (0, 2)), 0, 1)
    ((1, (0, 2)), 2, -1)
    ((1, (0, 3)), 0, 1)
    ((1, (0, 4)), 4, 1)
    ((1, (0, 5)), 5, 1)
    ((2, (0, 4)), 2, 1)
    ((2, (0, 4)), 4, -1)
    ((2, (0, 5)), 2, 1)
    ((2, (0, 5)), 5, -1)
    ((2, (0, 6)), 6, 1)
    ((2, (0, 7)), 7, 1)
    ((2, (0, 8)), 8, 1)
    ((2, (1, 4)), 0, 1)
    ((2, (1, 4)), 2, -1)
    ((2, (1, 5)), 0, 1)
    ((2, (1, 5)), 2, -1)
    ((3, (1, 6)), 0, 1)
    ((3, (1, 6)), 6, -1)
    ((3, (1, 7)), 0, 1)
    ((3, (1, 7)), 7, -1)
    ((3, (1, 9)), 9, 1)
    ((4, (1, 8)), 4, 1)
    ((4, (1, 8)), 8, -1)
    ((4, (1, 9)), 4, 1)
    ((4, (1, 9)), 9, -1)
    ((4, (2, 8)), 0, 1)
    ((4, (2, 8)), 4, -1)
    ((4, (2, 9)), 0, 1)
    ((4, (2, 9)), 4, -1)
""")

#: The book, the first run (no changes): the time-0 part of the listing.
BOOK_LOAD_ONLY = parse_listing("""
    ((0, (0, 0)), 0, 1)
    ((0, (0, 1)), 0, 1)
    ((1, (0, 2)), 0, 1)
    ((1, (0, 3)), 0, 1)
    ((2, (1, 4)), 0, 1)
    ((2, (1, 5)), 0, 1)
    ((3, (1, 6)), 0, 1)
    ((3, (1, 7)), 0, 1)
    ((4, (2, 8)), 0, 1)
    ((4, (2, 9)), 0, 1)
""")

#: The book's walk-through of time 4 and time 9.
BOOK_TIME_4 = {
    ((1, (0, 4)), 1),
    ((2, (0, 4)), -1),
    ((4, (1, 8)), 1),
    ((4, (1, 9)), 1),
    ((4, (2, 8)), -1),
    ((4, (2, 9)), -1),
}
BOOK_TIME_9 = {((3, (1, 9)), 1), ((4, (1, 9)), -1)}


def test_book_listing_is_self_consistent():
    assert len(BOOK_LISTING) == 32 == len(set(BOOK_LISTING))
    assert by_time(BOOK_LISTING)[0] == {(d, r) for d, _, r in BOOK_LOAD_ONLY}
    assert by_time(BOOK_LISTING)[4] == BOOK_TIME_4
    assert by_time(BOOK_LISTING)[9] == BOOK_TIME_9
    assert 1 not in by_time(BOOK_LISTING)  # "There aren't any entries at time 1 (go check)."


def test_skip_level_is_the_books_listing():
    skip_level = load("skip_level")
    out = skip_level.main(10)
    assert out == BOOK_LISTING  # same updates, same (book) order
    assert set(out) == set(BOOK_LISTING)
    assert by_time(out) == by_time(BOOK_LISTING)


def test_skip_level_interactive_gives_the_same_listing():
    skip_level = load("skip_level")
    assert skip_level.main(10, interactive=True) == BOOK_LISTING


def skip_level_from_scratch(size: int, t: int) -> Dict[Any, int]:
    manages = {(p // 2 if p > t or p == 0 else p // 3, p) for p in range(size)}
    out: Counter = Counter()
    for m2, m1 in manages:
        for m1b, p in manages:
            if m1 == m1b:
                out[(m1, (m2, p))] += 1
    return dict(out)


def test_skip_level_larger_matches_from_scratch_at_every_time():
    skip_level = load("skip_level")
    size = 60
    out = skip_level.main(size)
    assert len({(d, t) for d, t, _ in out}) == len(out)  # consolidated
    for t in range(size + 1):
        assert accumulate(out, t) == skip_level_from_scratch(size, t), f"time {t}"


def _multiworker_available() -> None:
    try:
        tp.execute(lambda worker: worker.index, workers=2)
    except (NotImplementedError, ImportError) as exc:
        pytest.skip(f"multi-worker execution not available yet: {exc!r}")


@pytest.mark.parametrize("workers", [2, 3])
def test_skip_level_on_several_workers_is_the_same_listing(workers):
    _multiworker_available()
    skip_level = load("skip_level")
    assert skip_level.main(10, workers=workers) == BOOK_LISTING
    assert skip_level.main(40, workers=workers) == skip_level.main(40)
    assert skip_level.main(10, workers=workers, interactive=True) == BOOK_LISTING


def test_book_program_without_explicit_flush_or_close():
    """The book's first program: load the data and let the worker finish (no flush/close)."""

    def build(worker):
        def dataflow(scope):
            session, manages = scope.new_collection()
            out = manages.map(lambda mp: (mp[1], mp[0])).join(manages).capture()
            return session, out

        session, out = worker.dataflow(dataflow)
        for person in range(10):
            session.insert((person // 2, person))
        return out

    (out,) = tp.execute(build)
    assert out.consolidated() == sorted(BOOK_LOAD_ONLY, key=lambda u: (u[1], u[0]))


# --------------------------------------------------------------------------- geometric series
def test_geometric_series_final_listing():
    geometric = load("geometric_series")
    out = geometric.main()
    assert out == {
        0: [(1, 1), (2, 1), (4, 1), (8, 1), (16, 1), (32, 1)],
        1: [(3, 1), (6, 1), (12, 1), (24, 1), (48, 1)],  # 16 and 32: net zero
        2: [(3, -1), (6, -1), (12, -1), (24, -1), (48, -1)],
    }


def test_geometric_series_other_limits_match_from_scratch():
    geometric = load("geometric_series")
    changes = [(0, 5, 1), (0, 7, 1), (1, 5, -1), (1, 3, 1), (2, 6, 1), (3, 3, -1), (3, 7, -1)]
    for limit in (1, 20, 100):
        out = geometric.main(changes, limit=limit)
        updates = [(x, t, d) for t, xs in out.items() for x, d in xs]
        for t in range(5):
            inputs: Dict[int, int] = {}
            for v, x, d in changes:
                if v <= t:
                    inputs[x] = inputs.get(x, 0) + d
            assert accumulate(updates, t) == geometric.from_scratch(inputs, limit), (limit, t)


# --------------------------------------------------------------------------- transitive closure
def closure(edges: Set[Tuple[int, int]]) -> Set[Tuple[int, int]]:
    """Naive fixed point of one-hop extension (independent of the example's BFS)."""
    result = set(edges)
    while True:
        step = {(a, d) for a, b in result for c, d in edges if b == c} | result
        if step == result:
            return result
        result = step


@pytest.mark.parametrize("size,rounds,seed", [(12, 8, 0), (30, 10, 1)])
def test_transitive_closure_matches_from_scratch(size, rounds, seed):
    tc = load("transitive_closure")
    results = tc.main(size, rounds, seed)
    changes = tc.schedule(size, rounds, seed)
    assert sorted(results) == list(range(rounds + 1))
    for t, res in results.items():
        expected = closure(tc.edges_at(changes, t))
        assert res["transitive"] == expected, f"time {t}"
        assert res["manages"] == expected, f"time {t}"


def test_transitive_closure_schedule_really_changes_edges():
    tc = load("transitive_closure")
    changes = tc.schedule(12, 8, 0)
    sets = [frozenset(tc.edges_at(changes, t)) for t in range(9)]
    assert all(a != b for a, b in zip(sets, sets[1:]))
    assert all(len(s) == 11 for s in sets)


# --------------------------------------------------------------------------- connectivity
def component_minimum(edges: Set[Tuple[int, int]]) -> Dict[int, int]:
    """By search (independent of the example's union-find)."""
    adj: Dict[int, Set[int]] = {}
    for a, b in edges:
        adj.setdefault(a, set()).add(b)
        adj.setdefault(b, set()).add(a)
    out: Dict[int, int] = {}
    for start in adj:
        if start in out:
            continue
        seen, todo = {start}, [start]
        while todo:
            n = todo.pop()
            for m in adj[n]:
                if m not in seen:
                    seen.add(m)
                    todo.append(m)
        low = min(seen)
        for n in seen:
            out[n] = low
    return out


@pytest.mark.parametrize("nodes,edges,rounds,seed", [(60, 40, 8, 1), (40, 35, 12, 7)])
def test_connectivity_queries_match_from_scratch(nodes, edges, rounds, seed):
    conn = load("connectivity")
    results = conn.main(nodes, edges, rounds, seed)
    assert [r["time"] for r in results] == list(range(rounds + 1))
    changed_labels = False
    previous = None
    for res in results:
        labels = component_minimum(set(res["graph"]))
        expected = {q: labels[q] for q in res["asked"] if q in labels}
        assert res["queries"] == expected, f"time {res['time']}"
        assert res["components"] == len(set(labels.values()))
        if previous is not None and any(
            previous.get(q, label) != label for q, label in expected.items()
        ):
            changed_labels = True
        previous = expected
    assert changed_labels, "the rounds should change some standing query's answer"


# --------------------------------------------------------------------------- friends of friends
@pytest.mark.parametrize("people,pairs,rounds,seed", [(12, 40, 6, 2), (8, 30, 8, 5)])
def test_friends_of_friends_matches_from_scratch(people, pairs, rounds, seed):
    fof = load("friends_of_friends")
    result = fof.main(people, pairs, rounds, seed)  # asserts every round internally
    assert len(result["shared"]) == rounds + 1
    assert sorted(result["imports"]) == list(range(rounds + 1))
    assert any(sizes["triangles"] for sizes in result["shared"])
    assert all(sizes["friends"] == sizes["naive"] for sizes in result["shared"])
    for r0, records in result["imports"].items():
        assert all(r0 <= x < r0 + 3 for x, _ in records)


def test_friends_of_friends_from_scratch_helpers():
    fof = load("friends_of_friends")
    knows = {(1, 2), (2, 3), (1, 3), (3, 1), (2, 1), (3, 3)}
    query = {(1, "q")}
    assert fof.scratch_friends(knows, query) == {
        ("q", (1, 2, 3)),
        ("q", (1, 2, 1)),
        ("q", (1, 3, 1)),
        ("q", (1, 3, 3)),
    }
    # (1, 2, 1) and (1, 3, 1) need "1 knows 1"; (1, 3, 3) needs only pairs that exist.
    assert fof.scratch_triangles(knows, query) == {("q", (1, 2, 3)), ("q", (1, 3, 3))}
    assert fof.scratch_friends(knows, query, loops_only=True) == {("q", (1, 3, 3))}


# --------------------------------------------------------------------------- wordcount
@pytest.mark.parametrize("lines,rounds,seed", [(20, 5, 3), (60, 10, 4)])
def test_wordcount_matches_counter(lines, rounds, seed):
    wc = load("wordcount")
    history = wc.main(lines, rounds, seed)
    assert len(history) == rounds + 1
    for state in history:
        expected: Counter = Counter()
        for line, n in state["lines"].items():
            expected.update({w: n * c for w, c in Counter(line.split()).items()})
        assert state["counts"] == {w: c for w, c in expected.items() if c}


# --------------------------------------------------------------------------- as scripts
@pytest.mark.parametrize(
    "name,expect",
    [
        ("skip_level", "((4, (2, 9)), 4, -1)"),
        ("geometric_series", "version 2: -3 -6 -12 -24 -48"),
        ("transitive_closure", "time 10:"),
        ("connectivity", "time 8:"),
        ("friends_of_friends", "dataflow importing the trace at round 6"),
        ("wordcount", "time 5:"),
    ],
)
def test_examples_run_as_scripts(name, expect):
    proc = subprocess.run(
        [sys.executable, str(EXAMPLES / f"{name}.py")],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stderr
    assert expect in proc.stdout
    if name == "skip_level":
        assert [ast.literal_eval(line) for line in proc.stdout.splitlines()] == BOOK_LISTING
