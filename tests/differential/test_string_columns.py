"""Strings in column batches: codes into per-batch dictionaries answer exactly as objects do.

A ``str`` or ``bytes`` field of a record is an ``int32`` code into the sorted dictionary of its
batch's strings. These tests check the dictionary kernels against plain Python, column batches
of string records (merged across batches of different dictionaries, compacted, looked up by
keys present in one batch only or in none) against the consolidation of their updates, and the
join and ``sum`` with ``TIMELYPY_COLUMNS=auto`` against ``off`` on random streams of strings
(unicode, empty strings, NUL characters, equal strings in different batches). What would change
answers stays on the object path: subclasses of ``str``, and columns mixing ``str`` with
anything else.
"""

from __future__ import annotations

from collections import Counter
from typing import Any, Dict, List, Tuple

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from timelypy.differential.join import JoinOperator
from timelypy.differential.kernel.columns import (
    dictionary_encode,
    prune_dictionary,
    translate_codes,
    unify_dictionaries,
)
from timelypy.differential.trace.column_batch import (
    ColumnBatch,
    compact_columns,
    distinct_keys,
    encode_updates,
    merge_columns,
)
from timelypy.differential.trace.layout import DISTINCT_STRINGS_LIMIT, STRINGS_CHECKED_FROM, Layout

from .test_join_columns import _check_both_paths
from .test_reduce_columns import _same_answers, _small_batches

SETTINGS = settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)

WORDS = ["", "a", "b", "ab", "a\x00", "é", "e\u0301", "日本", "𝄞", "Z", " "]
"""Strings that sort in interesting ways (empty, NUL, combining marks, astral characters)."""
words = st.one_of(st.sampled_from(WORDS), st.text(max_size=3))
small_words = st.sampled_from(WORDS[:6])


class _Word(str):
    """A subclass of ``str``: equal to its ``str``, but decoding would change its type."""


def _objects(values: List[Any]) -> np.ndarray:
    return np.fromiter(values, object, len(values))


# ---------------------------------------------------------------- the dictionary kernels
@SETTINGS
@given(st.lists(words, max_size=30))
def test_dictionary_encode_gives_sorted_distinct_strings_and_their_codes(values) -> None:
    codes, dictionary = dictionary_encode(_objects(values))
    assert dictionary.tolist() == sorted(set(values))
    assert codes.dtype == np.int32
    assert dictionary[codes].tolist() == values


@SETTINGS
@given(st.lists(st.lists(words, max_size=12), min_size=1, max_size=4))
def test_unified_dictionaries_keep_every_string_and_its_order(columns) -> None:
    encoded = [dictionary_encode(_objects(column)) for column in columns]
    union, maps = unify_dictionaries([d for _, d in encoded])
    assert union.tolist() == sorted(set().union(*map(set, columns)))
    for (codes, _), mapping, column in zip(encoded, maps, columns):
        unified = codes if mapping is None else mapping[codes]
        assert union[unified].tolist() == column


@SETTINGS
@given(st.lists(words, max_size=12), st.lists(words, max_size=12))
def test_translated_codes_find_equal_strings_and_only_them(a, b) -> None:
    source, target = sorted(set(a)), sorted(set(b))
    codes = translate_codes(_objects(source), _objects(target))
    for string, code in zip(source, codes.tolist()):
        assert (code == -1) == (string not in target)
        if code != -1:
            assert target[code] == string


@SETTINGS
@given(st.lists(words, min_size=1, max_size=20), st.data())
def test_pruned_dictionaries_keep_the_strings_in_use(values, data) -> None:
    codes, dictionary = dictionary_encode(_objects(values))
    kept = data.draw(st.lists(st.integers(0, len(values) - 1), max_size=len(values)))
    pruned_codes, pruned = prune_dictionary(codes[kept], dictionary)
    assert pruned.tolist() == sorted({values[i] for i in kept})
    assert pruned[pruned_codes].tolist() == [values[i] for i in kept]


# ---------------------------------------------------------------- column batches
SHAPES = {
    "(str, int)": (words, st.integers(-3, 3)),
    "(int, str)": (st.integers(0, 4), words),
    "((str, int), float)": (st.tuples(small_words, st.integers(0, 2)), st.sampled_from([0.5, 2.0])),
    "(bytes, (str, bool))": (st.binary(max_size=2), st.tuples(small_words, st.booleans())),
}


@st.composite
def batches_of(draw, shape: str) -> List[List[Any]]:
    """Consecutive batches of ``((key, val), time, diff)`` updates of one shape."""
    keys, vals = SHAPES[shape]
    update = st.tuples(st.tuples(keys, vals), st.integers(0, 3), st.sampled_from([1, -1, 2]))
    return draw(st.lists(st.lists(update, min_size=1, max_size=12), min_size=1, max_size=4))


def _consolidated(updates: List[Any], since: int = 0) -> Dict[Tuple[Any, Any, int], int]:
    acc: Counter = Counter()
    for (k, v), t, r in updates:
        acc[(k, v, max(t, since))] += r
    return {u: r for u, r in acc.items() if r}


def _held(batch: ColumnBatch) -> Dict[Tuple[Any, Any, int], int]:
    return {(k, v, t): r for k, v, t, r in batch.updates()}


def _batches(parts: List[List[Any]]) -> List[ColumnBatch]:
    return [ColumnBatch.from_updates(u, [i], [i + 1], i + 1) for i, u in enumerate(parts)]


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_batches_of_strings_merge_and_compact_as_objects_consolidate(shape: str) -> None:
    @SETTINGS
    @given(batches_of(shape), st.integers(0, 4))
    def check(parts, since):
        batches = _batches(parts)
        for batch, updates in zip(batches, parts):
            assert batch.key_layout.strings or batch.val_layout.strings
            assert _held(batch) == _consolidated(updates)
            assert batch.sorted_keys() == sorted({k for k, _, _ in _held(batch)})
        everything = [u for part in parts for u in part]
        merged = merge_columns(batches, [since])
        assert _held(merged) == _consolidated(everything, since)
        held_keys = {k for batch in batches for k, _, _ in _held(batch)}
        assert distinct_keys(batches) == len(held_keys)
        compacted = compact_columns(batches[0], [since])
        assert _held(compacted) == _consolidated(parts[0], since)
        for layout, cols in (
            (merged.key_layout, merged.key_cols),
            (merged.val_layout, merged.val_cols),
        ):
            for i in layout.strings:  # no string left unused
                assert layout.dicts is not None
                assert len(np.unique(cols[i])) == len(layout.dicts[i])

    check()


@pytest.mark.parametrize("lookups", [1, 40])
@SETTINGS
@given(parts=batches_of("(str, int)"), probes=st.lists(words, max_size=6))
def test_look_ups_by_key_find_keys_of_one_batch_only(lookups, parts, probes) -> None:
    """Every batch answers ``get`` for its keys, another batch's keys and keys of none, by
    bisection (the first look-ups) and from decoded segments (after many)."""
    batches = _batches(parts)
    every_key = {k for part in parts for (k, _), _, _ in part} | set(probes)
    for batch, updates in zip(batches, parts):
        expected: Dict[Any, Counter] = {}
        for (k, v, t), r in _consolidated(updates).items():
            expected.setdefault(k, Counter())[(v, t)] += r
        for _ in range(lookups):
            for key in sorted(every_key):
                found = batch.get(key)
                want = expected.get(key)
                assert (found is None) == (want is None), key
                if found is not None:
                    assert Counter({(v, t): r for v, t, r in found}) == want


def test_what_would_change_answers_is_refused() -> None:
    layout = Layout.of(("a", 1))
    assert layout is not None and layout.shape == ("s", "i")
    assert layout.encode([("a", 1), (_Word("a"), 1)]) is None  # a subclass
    assert layout.encode([("a", 1), (1, 1)]) is None  # str and int in one column
    assert layout.encode([("a", 1), (b"a", 1)]) is None  # str and bytes in one column
    assert Layout.of((_Word("a"), 1)) is None
    assert encode_updates([((_Word("a"), 1), 0, 1)]) is None
    mixed = [(("a", 1), 0, 1), ((1, 1), 0, 1)]
    assert encode_updates(mixed) is None


# ---------------------------------------------------------------- join and sum, both paths
JOIN_SHAPES = {
    "str_key": (words, st.integers(-2, 2), small_words),
    "tuple_key": (st.tuples(small_words, st.integers(0, 1)), small_words, st.booleans()),
    "bytes_key": (st.binary(max_size=1), st.tuples(small_words, st.integers(0, 1)), words),
}


@st.composite
def string_streams(draw, kind: str) -> List[List[Any]]:
    """Rounds of updates of both inputs with string keys (and some string values)."""
    keys, va, vb = JOIN_SHAPES[draw(st.sampled_from(sorted(JOIN_SHAPES)))]
    diffs = st.sampled_from([1, 1, -1, 2])

    def update(side: int) -> Any:
        key = draw(keys)
        if side == 1 and kind == "semijoin":
            return (1, key, draw(diffs))
        return (side, (key, draw(va if side == 0 else vb)), draw(diffs))

    return [
        [update(draw(st.sampled_from([0, 1]))) for _ in range(draw(st.integers(0, 10)))]
        for _ in range(draw(st.integers(1, 4)))
    ]


@pytest.mark.parametrize("kind", ["join", "semijoin", "join_map"])
@pytest.mark.parametrize("small", [(0, 0), (16, 0)])
def test_joins_on_string_keys_answer_as_the_object_path(kind, small, monkeypatch) -> None:
    """``small``: ``(0, 0)`` matches every batch on its codes (through the other batch's
    dictionary); ``(16, 0)`` reads the other batches at a small batch's keys."""
    monkeypatch.setattr(JoinOperator, "small_batch", small[0])
    monkeypatch.setattr(JoinOperator, "small_other", small[1])

    @settings(SETTINGS, max_examples=20)
    @given(string_streams(kind), st.sampled_from([1, 2]))
    def check(rounds, workers):
        _check_both_paths(kind, rounds, workers, monkeypatch)

    check()


def test_the_join_takes_the_column_path_on_string_keys(monkeypatch) -> None:
    monkeypatch.setattr(JoinOperator, "small_batch", 0)
    names = [f"person {p}" for p in range(40)]
    rounds = [
        [(side, (names[p // 2], names[p]), 1) for p in range(1, 40) for side in (0, 1)],
        [(0, (names[3], names[7]), -1), (0, (names[2], names[7]), 1), (1, ("nobody", ""), 1)],
    ]
    columns, objects = _check_both_paths("join", rounds, 1, monkeypatch)
    assert columns > 0 and objects == 0, (columns, objects)


def test_a_str_subclass_keeps_the_join_on_the_object_path(monkeypatch) -> None:
    rounds = [[(0, ("a", 1), 1), (1, ("a", 2), 1)], [(0, (_Word("a"), 3), 1), (1, ("b", 1), 1)]]
    _check_both_paths("join", rounds, 1, monkeypatch)


string_rounds = st.lists(
    st.lists(
        st.tuples(
            st.tuples(words, st.integers(-4, 4)),
            st.integers(0, 2),
            st.sampled_from([-2, -1, 1, 1, 2]),
        ),
        max_size=25,
    ),
    min_size=1,
    max_size=5,
)


@SETTINGS
@given(rounds=string_rounds, workers=st.sampled_from([1, 2]))
def test_sum_count_distinct_on_string_keys_answer_as_the_object_path(
    monkeypatch: pytest.MonkeyPatch, rounds, workers
) -> None:
    _small_batches(monkeypatch, 2)
    _same_answers(monkeypatch, rounds, workers)


def test_sum_on_string_keys_takes_the_column_path(monkeypatch: pytest.MonkeyPatch) -> None:
    _small_batches(monkeypatch, 2)
    rounds = [[((w, i % 5), 0, 1) for i, w in enumerate(WORDS * 3)], [(("", 4), 0, -1)]]
    columns, _ = _same_answers(monkeypatch, rounds)
    assert columns["column_batches"] > 0


def test_mostly_distinct_strings_stay_on_the_object_path() -> None:
    """Beyond ``DISTINCT_STRINGS_LIMIT`` distinct strings per update (in batches of at least
    ``STRINGS_CHECKED_FROM``) coding does not pay: the updates are refused; fewer are coded,
    and small batches are coded whatever their strings."""
    n = STRINGS_CHECKED_FROM
    distinct = int(n * DISTINCT_STRINGS_LIMIT)
    assert encode_updates([((f"id {i}", i), 0, 1) for i in range(n)]) is None
    assert encode_updates([((1, (f"id {i}", i)), 0, 1) for i in range(n)]) is None
    assert encode_updates([((f"w{i % distinct}", i), 0, 1) for i in range(n)]) is not None
    assert encode_updates([((f"id {i}", i), 0, 1) for i in range(n - 1)]) is not None
    by_self = encode_updates([((f"w{i % 3}", ()), 0, 1) for i in range(n)])  # no value column
    assert by_self is not None and by_self[3] == []


def test_the_arrange_operator_holds_strings_as_columns_and_gives_them_back() -> None:
    """Waiting updates with strings are absorbed as object columns, given back as the same
    tuples (a checkpoint), and sealed into a batch coded at the frontier (the later times
    wait on)."""
    from timelypy.differential import arrange_columns
    from timelypy.differential.arrange import Batcher
    from timelypy.order import INT_ORDER

    updates = [((WORDS[k % len(WORDS)], (k, "v" * (k % 3))), k % 2, 1) for k in range(300)]
    choice = arrange_columns.ColumnChoice(enabled=True)
    batcher = Batcher(INT_ORDER)
    batcher.pending = list(updates)
    choice.absorb(batcher)
    assert batcher.pending == [] and choice.held == len(updates)
    choice.release(batcher)
    assert batcher.pending == updates
    choice.absorb(batcher)
    sealed = choice.seal(batcher, 1)
    assert sealed is not None
    batch, waiting = sealed
    assert waiting == 1 and choice.held == 150
    assert batch.key_layout.dicts is not None and batch.val_layout.dicts is not None
    assert _held(batch) == _consolidated([u for u in updates if u[1] < 1])
