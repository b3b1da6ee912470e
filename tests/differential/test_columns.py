"""Column batches and the column kernel against the object path they replace.

The same random updates go both ways: as a :class:`ColumnBatch` (numpy columns, sorted and
consolidated by the column kernel) and as an object :class:`Batch` (the dictionary the arrange
operator builds with ``group_before`` and ``consolidate_groups``). Every reader's view must be
equal; the column kernel's merges must equal ``advance_and_consolidate`` key by key; its key
matching must equal a nested loop; and a spine fed column batches (with object batches mixed in,
as the arrange operator seals them when a batch does not fit) must answer every accumulation a
reader may ask for exactly as a spine fed object batches, through merges, reader holds and
compactions.
"""

from __future__ import annotations

import random
from typing import Any, Dict, List, Optional, Tuple

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.cases import over_seeds

from timelypy.differential.agent import TraceAgent
from timelypy.differential.kernel import columns as column_kernel
from timelypy.differential.kernel.columns import match_pairs, merge_advance, sort_consolidate
from timelypy.differential.kernel.consolidation import advance_and_consolidate, consolidate
from timelypy.differential.kernel.grouping import consolidate_groups, group_before
from timelypy.differential.trace import Batch, Spine
from timelypy.differential.trace.column_batch import ColumnBatch, encode_updates
from timelypy.differential.trace.layout import Layout
from timelypy.order import INT_ORDER

SETTINGS = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])

Update = Tuple[Tuple[Any, Any], int, int]

# Small domains, so that keys, values and times collide and consolidation has work to do.
_SCALARS = {
    "i": st.integers(-3, 3),
    "f": st.sampled_from([-1.5, 0.0, 0.25, 2.5, float("inf"), float("-inf")]),
    "b": st.booleans(),
}
KEY_SHAPES = ["i", "f", "b", ("i", "i"), ("i", "f"), ("b", "i"), (("i", "b"), "i")]
VAL_SHAPES = ["i", (), ("i", "i"), "f", ("f", ("b",))]


def _values(shape: Any) -> st.SearchStrategy[Any]:
    if isinstance(shape, str):
        return _SCALARS[shape]
    return st.tuples(*(_values(part) for part in shape))


def _updates(key_shape: Any, val_shape: Any, max_time: int = 6, max_size: int = 25):
    return st.lists(
        st.tuples(
            st.tuples(_values(key_shape), _values(val_shape)),
            st.integers(0, max_time),
            st.sampled_from([-2, -1, 1, 1, 2, 3]),
        ),
        min_size=1,
        max_size=max_size,
    )


@st.composite
def shaped_updates(draw: Any, parts: int = 1) -> Tuple[Any, Any, List[List[Update]]]:
    """``(key_shape, val_shape, [updates, ...])``: ``parts`` lists of updates of one layout."""
    key_shape = draw(st.sampled_from(KEY_SHAPES))
    val_shape = draw(st.sampled_from(VAL_SHAPES))
    lists = [draw(_updates(key_shape, val_shape)) for _ in range(parts)]
    return key_shape, val_shape, lists


def object_batch(updates: List[Update], lower: List[Any], upper: List[Any]) -> Batch:
    """The batch the arrange operator seals on the object path."""
    data, keep = group_before(list(updates), None)
    assert not keep
    count = consolidate_groups(data)
    return Batch(data, lower, upper, 1, count)


def column_batch(
    updates: List[Update], key_shape: Any, val_shape: Any, lower: List[Any], upper: List[Any]
) -> ColumnBatch:
    """The batch the arrange operator seals on the column path."""
    encoded = encode_updates(updates, Layout(key_shape), Layout(val_shape))
    assert encoded is not None
    return ColumnBatch.sorted_from(*encoded, lower, upper, 1)


def _as_dict(items: Any) -> Dict[Any, Dict[Tuple[Any, int], int]]:
    out: Dict[Any, Dict[Tuple[Any, int], int]] = {}
    for key, vals in items:
        per = out.setdefault(key, {})
        for v, t, r in vals:
            assert (v, t) not in per, ("not consolidated", key, v, t)
            per[(v, t)] = r
    return out


# ---------------------------------------------------------------------------------------------
# ColumnBatch: every reader's view equals the object batch's


@SETTINGS
@given(shaped_updates())
def test_column_batch_reads_as_the_object_batch(case: tuple) -> None:
    key_shape, val_shape, (updates,) = case
    objects = object_batch(updates, [0], [7])
    columns = column_batch(updates, key_shape, val_shape, [0], [7])
    # Read before anything decodes the batch: these use the columns themselves.
    assert columns.count == objects.count == len(columns.times)
    assert columns.key_count() == objects.key_count()
    assert columns.sorted_keys() == objects.sorted_keys()
    assert columns.nbytes() == 8 * columns.count * (
        2 + Layout(key_shape).width + Layout(val_shape).width
    ) - 7 * columns.count * sum(k == "b" for k in Layout(key_shape).kinds + Layout(val_shape).kinds)
    # The dictionary view.
    for key in objects.keys():
        got = columns.get(key)
        assert got is not None and key in columns
        assert got == sorted(got, key=lambda u: (u[0], u[1])), "a key's updates are sorted"
        assert sorted(got) == sorted(objects.get(key) or [])
    assert columns.get(("absent",)) is None and ("absent",) not in columns
    assert set(columns.keys()) == set(objects.keys())
    assert _as_dict(columns.items()) == _as_dict(objects.items())
    assert sorted(columns.updates()) == sorted(objects.updates())
    assert all(r != 0 for _, _, _, r in columns.updates())


PROBES = [
    0,
    1,
    1.0,
    True,
    -0.0,
    float("nan"),
    2**64,
    "x",
    None,
    (),
    (0, 0),
    (1, 1.0),
    (True, 0),
    ((0, True), 0),
    (0, 0, 0),
]


@SETTINGS
@given(shaped_updates())
def test_column_batch_decodes_lazily_in_any_order(case: tuple) -> None:
    """``get`` first (answered before or by decoding), then the column readers: still the same
    answers."""
    key_shape, val_shape, (updates,) = case
    objects = object_batch(updates, [0], [7])
    columns = column_batch(updates, key_shape, val_shape, [0], [7])
    # Keys of other types or absent, as a reader of another arrangement may ask: the answer
    # is the dictionary's (equal numbers are the same key: 1, 1.0 and True).
    for probe in PROBES:
        assert sorted(columns.get(probe) or []) == sorted(objects.get(probe) or []), probe
    first = next(iter(objects.keys()), None)
    if first is not None:
        assert sorted(columns.get(first) or []) == sorted(objects.get(first) or [])
    assert columns.sorted_keys() == objects.sorted_keys()
    assert columns.key_count() == len(columns.keys()) == objects.key_count()


# ---------------------------------------------------------------------------------------------
# The column kernel against the object kernel, key by key


def _decoded(
    key_layout: Layout, val_layout: Layout, cols: List[np.ndarray], n: int
) -> Tuple[List[Any], List[Any]]:
    width = key_layout.width
    return key_layout.decode(cols[:width], n), val_layout.decode(cols[width:], n)


def _by_key(updates: List[Update]) -> Dict[Any, List[Tuple[Any, int, int]]]:
    out: Dict[Any, List[Tuple[Any, int, int]]] = {}
    for (k, v), t, r in updates:
        out.setdefault(k, []).append((v, t, r))
    return out


def _check_against_objects(
    key_layout: Layout,
    val_layout: Layout,
    result: Tuple[List[np.ndarray], np.ndarray, np.ndarray],
    updates: List[Update],
    since: Optional[int],
) -> None:
    cols, times, diffs = result
    n = len(times)
    keys, vals = _decoded(key_layout, val_layout, cols, n)
    rows = list(zip(keys, vals, times.tolist()))
    assert all(a < b for a, b in zip(rows, rows[1:])), "sorted by (key, val, time), distinct"
    assert all(r != 0 for r in diffs.tolist())
    got: Dict[Any, Dict[Tuple[Any, int], int]] = {}
    for (k, v, t), r in zip(rows, diffs.tolist()):
        got.setdefault(k, {})[(v, t)] = r
    expected: Dict[Any, Dict[Tuple[Any, int], int]] = {}
    for k, kvals in _by_key(updates).items():
        done = (
            consolidate(kvals)
            if since is None
            else advance_and_consolidate(kvals, [since], INT_ORDER)
        )
        if done:
            expected[k] = {(v, t): r for v, t, r in done}
    assert got == expected


@SETTINGS
@given(shaped_updates())
def test_sort_consolidate_equals_consolidate_per_key(case: tuple) -> None:
    key_shape, val_shape, (updates,) = case
    key_layout, val_layout = Layout(key_shape), Layout(val_shape)
    encoded = encode_updates(updates, key_layout, val_layout)
    assert encoded is not None
    _, _, key_cols, val_cols, times, diffs = encoded
    inputs = [c.copy() for c in key_cols + val_cols], times.copy(), diffs.copy()
    result = sort_consolidate(key_cols + val_cols, times, diffs)
    # Inputs are never changed.
    assert all(np.array_equal(a, b) for a, b in zip(inputs[0], key_cols + val_cols))
    assert np.array_equal(inputs[1], times) and np.array_equal(inputs[2], diffs)
    _check_against_objects(key_layout, val_layout, result, updates, None)


@SETTINGS
@given(
    st.integers(1, 4).flatmap(shaped_updates),
    st.one_of(st.none(), st.integers(0, 8)),
)
def test_merge_advance_equals_advance_and_consolidate_per_key(
    case: tuple, since: Optional[int]
) -> None:
    key_shape, val_shape, parts = case
    batches = [column_batch(p, key_shape, val_shape, [0], [7]) for p in parts]
    before = [(b.times.copy(), b.diffs.copy()) for b in batches]
    result = merge_advance([b.columns() for b in batches], since)
    assert all(
        np.array_equal(b.times, t) and np.array_equal(b.diffs, r)
        for b, (t, r) in zip(batches, before)
    ), "the merged batches are not changed"
    everything = [u for p in parts for u in p]
    _check_against_objects(Layout(key_shape), Layout(val_shape), result, everything, since)


@SETTINGS
@given(
    st.integers(2, 4).flatmap(shaped_updates),
    st.one_of(st.none(), st.integers(0, 8)),
    st.integers(1, 5),
)
def test_merge_advance_range_by_range_equals_the_merge_at_once(
    case: tuple, since: Optional[int], rows: int
) -> None:
    """A merge of more than ``MERGE_RANGE_ROWS`` updates runs range by range of its first
    column, into output columns shrunk in place at the end (made tiny here, so that ranges cut
    between equal values, at the ends, and where a part has nothing): the same updates, in the
    same order and dtypes, as the merge at once."""
    key_shape, val_shape, parts = case
    batches = [column_batch(p, key_shape, val_shape, [0], [7]) for p in parts]
    whole = merge_advance([b.columns() for b in batches], since)
    limit = column_kernel.MERGE_RANGE_ROWS
    column_kernel.MERGE_RANGE_ROWS = rows
    try:
        ranged = merge_advance([b.columns() for b in batches], since)
    finally:
        column_kernel.MERGE_RANGE_ROWS = limit
    got, expected = [*ranged[0], ranged[1], ranged[2]], [*whole[0], whole[1], whole[2]]
    assert [a.dtype for a in got] == [a.dtype for a in expected]
    assert all(np.array_equal(a, b) for a, b in zip(got, expected))
    everything = [u for p in parts for u in p]
    _check_against_objects(Layout(key_shape), Layout(val_shape), ranged, everything, since)


# ---------------------------------------------------------------------------------------------
# Key matching (the join's) against a nested loop


@SETTINGS
@given(st.sampled_from(KEY_SHAPES), st.data())
def test_match_pairs_equals_a_nested_loop(key_shape: Any, data: Any) -> None:
    mine = data.draw(_updates(key_shape, "i"), label="mine")
    theirs = data.draw(_updates(key_shape, "i"), label="theirs")
    a = column_batch(mine, key_shape, "i", [0], [7])
    b = column_batch(theirs, key_shape, "i", [0], [7])
    starts = a.starts()
    i, j = match_pairs(a.search_keys()[starts], starts, a.count, b.search_keys())
    a_keys = a.decode_keys(np.arange(a.count))
    b_keys = b.decode_keys(np.arange(b.count))
    expected = [(x, y) for x in range(a.count) for y in range(b.count) if a_keys[x] == b_keys[y]]
    assert list(zip(i.tolist(), j.tolist())) == expected


def test_match_pairs_of_multi_column_keys_compares_every_column() -> None:
    """Structured keys: equal first columns are not enough."""
    a = ColumnBatch.from_updates([(((1, 2), 0), 0, 1), (((1, 3), 0), 0, 1)], [0], [1])
    b = ColumnBatch.from_updates([(((1, 3), 5), 0, 1), (((2, 2), 6), 0, 1)], [0], [1])
    i, j = match_pairs(a.search_keys()[a.starts()], a.starts(), a.count, b.search_keys())
    assert list(zip(i.tolist(), j.tolist())) == [(1, 0)]


# ---------------------------------------------------------------------------------------------
# Spines: column batches (mixed with object batches) against object batches

_BIG = 2**64  # an int key beyond int64: that batch is sealed on the object path


def _records() -> st.SearchStrategy[Tuple[Any, Any]]:
    return st.one_of(
        st.tuples(st.integers(0, 4), st.integers(0, 2)),
        st.tuples(st.integers(0, 4).map(lambda k: (k % 2, k)), st.integers(0, 2)),
    )


def _operation() -> st.SearchStrategy[tuple]:
    batch = st.tuples(
        st.just("batch"),
        st.lists(
            st.tuples(
                st.integers(0, 4),
                st.integers(0, 2),
                st.integers(0, 2),
                st.sampled_from([-2, -1, 1, 1, 2]),
            ),
            min_size=1,
            max_size=14,
        ),
        st.sampled_from(["fits", "fits", "fits", "fits", "mixed"]),
    )
    return st.one_of(
        batch,
        batch,
        batch,
        batch,
        batch,
        st.tuples(st.just("seal"), st.integers(1, 3)),
        st.tuples(st.just("reader"), st.integers(0, 6)),
        st.tuples(st.just("ack"), st.integers(0, 5)),
        st.tuples(st.just("hold"), st.integers(0, 5), st.integers(0, 40)),
        st.tuples(st.just("close"), st.integers(0, 5)),
        st.tuples(
            st.just("writer"),
        ),
        st.tuples(
            st.just("compact"),
        ),
    )


def _key(shape: str, batch: str, k: int, index: int) -> Any:
    """Key ``k`` of ``shape`` (``int`` or ``tuple``); beyond int64 for the first update of a
    ``mixed`` batch (which then does not fit columns)."""
    if batch == "mixed" and index == 0:
        return _BIG + k
    return (k % 2, k) if shape == "tuple" else k


class _Pair:
    """A spine fed column batches (where they fit, as the arrange operator does) and a spine
    fed object batches, driven alike."""

    def __init__(self, shape: str = "int") -> None:
        self.shape = shape
        self.columns = Spine(INT_ORDER, "columns")
        self.objects = Spine(INT_ORDER, "objects")
        self.agents: List[Tuple[TraceAgent, TraceAgent]] = []
        self.history: List[Tuple[Any, Any, int, int]] = []
        self.round = 0
        self.column_batches = 0

    @property
    def spines(self) -> Tuple[Spine, Spine]:
        return self.columns, self.objects

    def insert(self, updates: List[Update], upper: int, as_objects: bool = False) -> None:
        """``updates`` as a batch up to ``upper`` in both spines: columns where they fit
        (unless ``as_objects``, as the arrange operator seals a small batch) in ``columns``."""
        self.history += [(k, v, t, r) for (k, v), t, r in updates]
        encoded = encode_updates(updates) if updates and not as_objects else None
        if encoded is not None:
            batch = ColumnBatch.sorted_from(*encoded, [], [])
            self.columns.new_column_batch(batch, [upper])
            self.column_batches += 1
        else:
            data, _ = group_before(list(updates), None)
            self.columns.new_batch(data, [upper], consolidate_groups(data))
        data, _ = group_before(list(updates), None)
        self.objects.new_batch(data, [upper], consolidate_groups(data))
        for spine in self.spines:
            spine.advance_writer([upper])

    def apply(self, op: tuple) -> None:
        kind = op[0]
        if kind == "batch":
            _, raw, batch = op
            updates = [
                ((_key(self.shape, batch, k, n), v), self.round + dt, r)
                for n, (k, v, dt, r) in enumerate(raw)
            ]
            self.round += 3
            if updates:  # (a batch of one or two: objects, as the arrange operator seals it)
                self.insert(updates, self.round, as_objects=len(updates) <= 2)
            else:  # the arrange operator seals no batch without updates
                for spine in self.spines:
                    spine.seal([self.round])
                    spine.advance_writer([self.round])
        elif kind == "seal":
            self.round += op[1]
            for spine in self.spines:
                spine.seal([self.round])
                spine.advance_writer([self.round])
        elif kind == "reader":
            self.agents.append(
                tuple(TraceAgent(s, through_seq=min(op[1], s.seq)) for s in self.spines)  # type: ignore[misc]
            )
        elif kind in ("ack", "hold", "close") and self.agents:
            index = op[1] % len(self.agents)
            for agent in self.agents[index]:
                if kind == "ack":
                    agent.acknowledge(agent.spine.seq)
                    agent.spine.maintain()
                elif kind == "hold":
                    agent.set_logical_compaction([min(op[2], self.round)])
                else:
                    agent.close()
            if kind == "close":
                self.agents.pop(index)
        elif kind == "writer":
            for spine in self.spines:
                spine.advance_writer([self.round])
        elif kind == "compact":
            for spine in self.spines:
                spine.compact()

    def check(self) -> None:
        """Both spines are well formed, equally held, and accumulate alike (and as the history)
        at every time at or beyond since that a reader may ask for."""
        for spine in self.spines:
            spine._check()
        assert self.columns.since == self.objects.since
        since = self.columns.since
        if not since:
            return
        keys = {k for k, _, _, _ in self.history}
        low, high = since[0], self.round + 1
        for s in sorted({low, low + 1, (low + high) // 2, high - 1, high}):
            expected: Dict[Any, Dict[Any, int]] = {}
            for k, v, t, r in self.history:
                if t <= s:
                    per = expected.setdefault(k, {})
                    per[v] = per.get(v, 0) + r
            for key in keys:
                want = {v: r for v, r in expected.get(key, {}).items() if r}
                assert self.objects.accumulate(key, s) == want, ("objects", key, s)
                assert self.columns.accumulate(key, s) == want, ("columns", key, s)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(["int", "tuple"]), st.lists(_operation(), min_size=1, max_size=40))
def test_spine_of_columns_accumulates_as_the_spine_of_objects(shape: str, ops: List[tuple]) -> None:
    pair = _Pair(shape)
    for op in ops:
        pair.apply(op)
        pair.check()
    for agents in pair.agents:
        for agent in agents:
            agent.close()
    for spine in pair.spines:
        spine.compact()
    pair.check()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(_records(), min_size=1, max_size=40),
    st.lists(st.integers(1, 6), min_size=1, max_size=6),
    st.lists(st.integers(1, 6), min_size=1, max_size=6),
    st.booleans(),
)
def test_full_compaction_of_a_live_empty_collection_stores_nothing(
    records: List[Tuple[Any, Any]], cuts_in: List[int], cuts_out: List[int], mixed: bool
) -> None:
    """Every record inserted, later retracted, in batches cut at random (one object batch
    among the column ones when ``mixed``): once since passes every time, a full compaction
    leaves no update stored, on both paths."""
    pair = _Pair()
    for sign, cuts in ((1, cuts_in), (-1, cuts_out)):
        rest = list(records)
        for size in cuts + [len(rest)]:
            chunk, rest = rest[:size], rest[size:]
            if not chunk:
                continue
            updates = [((k, v), pair.round, sign) for k, v in chunk]
            if mixed and sign == 1 and pair.round == 0:
                updates.append((("text", 0), pair.round, 1))
                updates.append((("text", 0), pair.round, -1))
            pair.round += 1
            pair.insert(updates, pair.round)
    pair.check()
    for spine in pair.spines:
        spine.advance_writer([pair.round + 1])
        spine.compact()
    pair.check()
    assert pair.objects.stored_updates() == 0
    assert pair.columns.stored_updates() == 0


@pytest.mark.parametrize("key_shape", ["int", "tuple"])
def test_compaction_merges_small_object_batches_into_the_column_batch_before_them(
    key_shape: str,
) -> None:
    """A large column batch, then small object batches of its layout (as the arrange operator
    seals fewer than ``COLUMNS_MIN_UPDATES``) that retract some of its records and insert
    others: a compaction pass merges them into the column batch, so each retracted record and
    its insertion cancel there (one column batch left, holding the live records only); the
    object spine's pass merges its batches likewise."""

    def key(k: int) -> Any:
        return k if key_shape == "int" else (k, -k)

    pair = _Pair()
    pair.round = 1
    pair.insert([((key(k), k % 5), 0, 1) for k in range(300)], 1)
    for r in range(2, 9):
        pair.round = r
        pair.insert([((key(r), r % 5), r - 1, -1), ((key(r), 9), r - 1, 1)], r, as_objects=True)
    assert [type(b) for b in pair.columns.batches][0] is ColumnBatch
    assert any(type(b) is not ColumnBatch for b in pair.columns.batches)
    pair.check()
    pair.round += 1
    for spine in pair.spines:
        spine.advance_writer([pair.round])
        spine.compact()
    pair.check()
    assert [type(b) for b in pair.columns.batches] == [ColumnBatch]
    assert len(pair.objects.batches) == 1
    assert pair.columns.stored_updates() == pair.objects.stored_updates() == 300


def test_spine_keeps_merged_column_batches_as_columns() -> None:
    """Fitting batches stay columns through the spine's merges and compaction."""
    pair = _Pair()
    for r in range(40):
        pair.round = r + 1
        pair.insert([((k, r % 3), r, 1) for k in range(r % 7 + 1)], pair.round)
    assert pair.columns.column_batches() == len(pair.columns.batches) > 0
    for spine in pair.spines:
        spine.compact()
    pair.check()
    assert pair.columns.column_batches() == len(pair.columns.batches) > 0
    assert pair.objects.column_batches() == 0


def _random_operation(rng: random.Random, mixed: float) -> tuple:
    """One operation of :func:`_operation`'s kinds, drawn with ``rng``; a batch is ``mixed``
    (does not fit columns) with probability ``mixed``."""
    op = rng.random()
    if op < 0.5:
        size = rng.randrange(1, 2 + rng.randrange(40))
        raw = [
            (rng.randrange(8), rng.randrange(3), rng.randrange(3), rng.choice((-2, -1, 1, 1, 2)))
            for _ in range(size)
        ]
        return ("batch", raw, "mixed" if rng.random() < mixed else "fits")
    if op < 0.58:
        return ("reader", rng.randrange(20))
    if op < 0.72:
        return ("ack", rng.randrange(6))
    if op < 0.82:
        return ("hold", rng.randrange(6), rng.randrange(400))
    if op < 0.87:
        return ("close", rng.randrange(6))
    if op < 0.95:
        return ("seal", rng.randrange(1, 3))
    return ("compact",)


@over_seeds(range(4))
def test_spine_stress_of_columns_against_objects(seed: int) -> None:
    """Long runs (the hypothesis test's runs are short): many geometric merges and compaction
    passes of column batches, among small object batches of their layout; seeds 0-1 all fit
    (the spine keeps columns to the end: a compaction pass merges every batch the readers have
    seen into one column batch), 2-3 mix in object batches that do not fit."""
    rng = random.Random(seed)
    pair = _Pair("tuple" if seed % 2 else "int")
    for _ in range(200):
        pair.apply(_random_operation(rng, 0.0 if seed < 2 else 0.1))
        pair.check()
    if seed < 2:
        for agents in pair.agents:
            for agent in agents:
                agent.acknowledge(agent.spine.seq)
        for spine in pair.spines:
            spine.compact()
        pair.check()
        assert [type(b) for b in pair.columns.batches] == [ColumnBatch]


@over_seeds([0, 2])
def test_spine_stress_of_columns_merging_range_by_range(monkeypatch: Any, seed: int) -> None:
    """The stress above with every merge of more than 16 updates run range by range."""
    monkeypatch.setattr(column_kernel, "MERGE_RANGE_ROWS", 16)
    test_spine_stress_of_columns_against_objects(seed)


_MISFITS = [True, 2**31, -(2**31) - 1, 2**40, 1.5, "x", None, np.int64(1), float("nan"), -0.0]


@SETTINGS
@given(case=shaped_updates(), misfit=st.sampled_from([None, *_MISFITS]), where=st.integers(0, 3))
def test_marshal_encoding_equals_the_general_encoding(case: tuple, misfit: Any, where: int) -> None:
    """The one-pass encoding through marshal bytes gives the columns of the general encoding;
    it refuses (None) whatever the general encoding refuses (one scalar of one update of
    another type, a bool among ints, a numpy int, a NaN or -0.0), and ints beyond 32 bits,
    which the general encoding takes (up to 64 bits)."""
    from timelypy.differential.trace.marshal_columns import marshal_encode

    key_shape, val_shape, (updates,) = case
    key_layout, val_layout = Layout(key_shape), Layout(val_shape)
    if misfit is not None:
        (key, val), t, d = updates[-1]
        at = where % 3
        if at == 0:
            updates[-1] = ((key, val), t, misfit)
        elif at == 1:
            updates[-1] = ((key, val), misfit, d)
        else:
            updates[-1] = ((misfit, val), t, d)
    fast = marshal_encode(updates, key_layout, val_layout)
    general = encode_updates(updates, key_layout, val_layout)
    if general is None:
        assert fast is None
        return
    beyond_32_bits = type(misfit) is int and not -(2**31) <= misfit < 2**31
    assert (fast is None) == beyond_32_bits, (fast, general)
    if fast is None:
        return
    key_cols, val_cols, times, diffs = fast
    assert [c.tolist() for c in key_cols] == [c.tolist() for c in general[2]]
    assert [c.dtype for c in key_cols] == [c.dtype for c in general[2]]
    assert [c.tolist() for c in val_cols] == [c.tolist() for c in general[3]]
    assert times.tolist() == general[4].tolist() and diffs.tolist() == general[5].tolist()
    assert key_layout.decode(key_cols, len(times)) == [u[0][0] for u in updates]


@SETTINGS
@given(
    per_key=st.integers(1, 3),
    keys=st.integers(1, 3000),
    probes=st.lists(
        st.one_of(st.integers(-5, 3100), st.sampled_from(["a", 1.0, True, None, (1,), 2**70, 0.5])),
        min_size=1,
        max_size=40,
    ),
)
def test_lookups_by_decoded_segments_equal_the_whole_decoding(
    per_key: int, keys: int, probes: List[Any]
) -> None:
    """Past the look-ups it answers by bisection, a column batch answers from the segment of
    keys it decodes when first asked: the same updates as the dictionary of the whole batch,
    for keys present, absent, before the first and after the last, equal keys of other
    types (1.0, True) and keys not comparable with ints (found as objects)."""
    n = keys * per_key
    key_col = np.repeat(np.arange(keys, dtype=np.int64), per_key)
    val_col = np.arange(n, dtype=np.int64) % 7
    times = np.arange(n, dtype=np.int64) % 3
    diffs = np.ones(n, dtype=np.int64)
    layout = Layout("i")
    probed = ColumnBatch.sorted_from(layout, layout, [key_col], [val_col], times, diffs, [0], [3])
    whole = ColumnBatch.sorted_from(layout, layout, [key_col], [val_col], times, diffs, [0], [3])
    expected = whole._decoded()
    probed._lookups = 10**9  # past the bisection look-ups
    for key in probes:
        assert probed.get(key) == expected.get(key), key
        assert probed.getter()(key) == expected.get(key), key  # the join's (a C-level hit)
    assert probed._data is None
    assert probed._decoded() == expected  # the segments left decoded into it


@SETTINGS
@given(
    width=st.integers(1, 3),
    keys=st.lists(st.tuples(st.integers(-3, 40), st.floats(-2, 2), st.booleans()), max_size=60),
    probes=st.lists(
        st.one_of(
            st.tuples(st.integers(-4, 41), st.sampled_from([0.5, -1.0, 2.0]), st.booleans()),
            st.sampled_from([2**70, -(2**70), (2**70, 0.5, True), 1.0, True, "a", None]),
        ),
        min_size=1,
        max_size=30,
    ),
)
def test_first_lookups_search_the_key_columns_without_decoding(
    width: int, keys: List[Tuple[Any, ...]], probes: List[Any]
) -> None:
    """The first look-ups by key (before any segment is decoded) search the key columns with
    numpy: the same updates as the dictionary of the whole batch for single-column and
    multi-column keys, present, absent, beyond ``int64`` and of other types, and nothing of
    the batch decoded for keys of its layout (a batch of fewer than 8 updates decodes its
    segment at once)."""

    def key_of(parts: Tuple[Any, ...]) -> Any:
        return parts[0] if width == 1 else parts[:width]

    updates = [((key_of(k), i % 5), i % 3, 1) for i, k in enumerate(keys)]
    encoded = encode_updates(updates)
    if encoded is None:  # (no updates: nothing to search)
        return
    key_layout, val_layout, key_cols, val_cols, times, diffs = encoded

    def batch() -> ColumnBatch:
        return ColumnBatch.sorted_from(
            key_layout, val_layout, key_cols, val_cols, times, diffs, [0], [3]
        )

    expected = batch()._decoded()
    for probe in probes:
        key = key_of(probe) if type(probe) is tuple else probe
        probed = batch()  # (a key of another type decodes the whole batch)
        found = probed.get(key)
        want = expected.get(key)
        assert (sorted(found) if found else found) == (sorted(want) if want else want), key
        if key_layout.flatten(key) is not None and probed.count >= 8:  # (else: segments)
            assert probed._data is None and probed._segments is None and probed._index is None
        assert probed.get(key) == found  # (again: from the search array kept, or segments)


def test_an_arrangement_stops_trying_the_encoding_it_keeps_refusing(monkeypatch) -> None:
    """Updates at times beyond 32 bits (milliseconds since the epoch) are refused by the
    one-pass marshal encoding: the arrange operator's column choice tries it twice, then only
    the general encoding (which takes them), and the batches hold the same updates."""
    from timelypy.differential import arrange_columns
    from timelypy.differential.arrange import Batcher

    tried: List[int] = []
    real = arrange_columns.marshal_encode

    def counted(*args: Any) -> Any:
        tried.append(1)
        return real(*args)

    monkeypatch.setattr(arrange_columns, "marshal_encode", counted)
    choice = arrange_columns.ColumnChoice(enabled=True)
    batcher = Batcher(INT_ORDER)
    base = 1_700_000_000_000
    for step in range(4):
        batcher.pending = [((k, -k), base + step, 1) for k in range(300)]
        sealed = choice.seal(batcher, None)
        assert sealed is not None
        batch, waiting = sealed
        assert waiting is None and batcher.pending == []
        assert batch.count == 300 and set(batch.times.tolist()) == {base + step}
        assert batch.get(7) == [(-7, base + step, 1)]
    assert len(tried) == 2 and choice.marshal_misses == 2
