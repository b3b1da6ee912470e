"""``timelypy.stable_hash``: the key hash that routes records between workers.

Exchange sends a record to worker ``stable_hash(key) % peers``. Python's own ``hash()`` of
``str``/``bytes`` is salted per process (``PYTHONHASHSEED``), so a hash that depended on it would
send the same key to different workers in different processes and split its group. These tests
check that the hash is the same in every interpreter whatever its seed, that ``==`` values hash
alike, that unsupported keys fail loudly, and - end to end - that a string-keyed word count on
worker processes with *different* hash seeds agrees with one worker.
"""

from __future__ import annotations

import dataclasses
import enum
import json
import os
import pickle
import subprocess
import sys
import textwrap
import uuid
from collections import Counter
from datetime import date, datetime, time, timedelta, timezone
from decimal import Decimal
from fractions import Fraction
from typing import Any, Dict, List

import cloudpickle
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import timelypy as tp
from timelypy import Product, stable_hash
from timelypy.errors import UnhashableDataError

# Builds shipped to worker processes reference functions of this module: send them by value.
cloudpickle.register_pickle_by_value(sys.modules[__name__])

# No test may hang the suite; tests that start processes set their own (tighter) limit.
pytestmark = pytest.mark.timeout(120)

# ------------------------------------------------------------------------------------------
# the same values, built in this process and in fresh interpreters

VALUES_SOURCE = textwrap.dedent(
    """
    from timelypy import Product
    VALUES = [
        "", "a", "abc", "timely dataflow", "differential",
        "caf\\u00e9", "\\u65e5\\u672c\\u8a9e", "\\U0001F600 emoji", "\\x00nul\\x00", "\\ud800",
        b"", b"a", b"abc", bytes(range(256)),
        0, 1, -1, 7, 2**31, 2**63 - 1, 2**63, 2**64 - 1, 2**64, 2**64 + 5, 2**200 + 3,
        -(2**64) - 1, -(2**100),
        0.0, -0.0, 1.5, -2.25, 3.14159, 1e300, -1e-300, float("inf"), float("-inf"),
        2.0**70,
        None, True, False,
        (), (1,), ("a", 1), ("a", ("b", (b"c", None, 2.5))), ((1, 2), (3, (4, (5,)))),
        Product(1, 2), Product(Product(0, 3), 7), Product("x", ("y", 1)),
        frozenset(), frozenset({1, 2, 3}), frozenset({"alpha", "beta", "gamma", "delta"}),
        frozenset({("k", 1), ("k", 2), b"raw"}), ("nested", frozenset({"p", "q", "r"})),
    ]
    """
)

CHILD_SOURCE = VALUES_SOURCE + textwrap.dedent(
    """
    import json, sys
    from timelypy import stable_hash
    print(json.dumps({
        "hashes": [stable_hash(v) for v in VALUES],
        "builtin": hash("a string whose builtin hash is salted"),
        "randomized": sys.flags.hash_randomization,
    }))
    """
)


def _values() -> List[Any]:
    namespace: Dict[str, Any] = {}
    exec(VALUES_SOURCE, namespace)
    return namespace["VALUES"]


def _hash_in_child(seed: str) -> Dict[str, Any]:
    env = dict(os.environ)
    env["PYTHONHASHSEED"] = seed
    proc = subprocess.run(
        [sys.executable, "-c", CHILD_SOURCE], env=env, capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


# ------------------------------------------------------------------------------------------
# across processes


@pytest.mark.timeout(120)
def test_identical_in_every_process_whatever_the_hash_seed():
    values = _values()
    here = [stable_hash(v) for v in values]
    seeds = ["0", "1", "12345", "random"]
    children = {seed: _hash_in_child(seed) for seed in seeds}
    for seed, child in children.items():
        assert child["hashes"] == here, f"stable_hash differs under PYTHONHASHSEED={seed}"
    # The check means something: the interpreters really had differently salted str hashes.
    builtins = {child["builtin"] for child in children.values()}
    assert len(builtins) >= 3, f"PYTHONHASHSEED had no effect on hash(): {builtins}"
    assert children["0"]["randomized"] == 0 and children["random"]["randomized"] == 1


def _spread(keys, peers):
    counts = Counter(stable_hash(k) % peers for k in keys)
    return [counts.get(i, 0) / len(keys) for i in range(peers)]


@pytest.mark.parametrize("peers", [2, 3, 4])
def test_string_and_tuple_keys_spread_over_workers(peers):
    # Not part of the contract, but routing relies on it: no worker gets much more than its share.
    for keys in (
        [f"key{i}" for i in range(2000)],
        [("user", i, f"item{i % 37}") for i in range(2000)],
        [(i // 7, i % 7) for i in range(2000)],
    ):
        assert all(0.6 / peers < share < 1.4 / peers for share in _spread(keys, peers)), keys[:3]


@pytest.mark.parametrize(
    "keys",
    [
        [(i, i) for i in range(1000)],
        [(f"n{i}", f"n{i}") for i in range(1000)],
    ],
    ids=["int-pairs", "str-pairs"],
)
def test_pairs_of_equal_items_spread_over_two_workers(keys):
    assert all(0.3 < share < 0.7 for share in _spread(keys, 2))


# ------------------------------------------------------------------------------------------
# equal values hash equal; range


@pytest.mark.parametrize(
    "group",
    [
        (1, 1.0, True),
        (0, 0.0, -0.0, False),
        (-1, -1.0),
        (2**70, 2.0**70),
        (2**64, 2.0**64),
        ((1, "a"), (1.0, "a"), (True, "a")),
        (Product(1, 2), (1, 2), Product(1.0, True + 1)),
        (frozenset({1, 2}), frozenset({2.0, 1.0}), frozenset({True, 2})),
        (("k", frozenset({0})), ("k", frozenset({False}))),
    ],
    ids=repr,
)
def test_equal_values_hash_equal(group):
    assert all(v == group[0] for v in group)
    assert len({stable_hash(v) for v in group}) == 1, [stable_hash(v) for v in group]


def test_int_subclasses_and_str_subclasses_hash_like_their_base():
    import enum

    class Color(enum.IntEnum):
        RED = 5

    class Name(str):
        pass

    assert stable_hash(Color.RED) == stable_hash(5)
    assert stable_hash(Name("alice")) == stable_hash("alice")


@pytest.mark.parametrize(
    "value, shown",
    [
        ([1, 2, 3], "[1, 2, 3]"),
        ({"a": 1}, "{'a': 1}"),
        ({1, 2}, "{1, 2}"),
        (("key", [9, 8]), "[9, 8]"),
        (Product(0, [7]), "[7]"),
        (object, "object"),
    ],
    ids=["list", "dict", "set", "tuple-with-list", "product-with-list", "type"],
)
def test_unhashable_keys_raise_naming_the_value(value, shown):
    with pytest.raises(UnhashableDataError) as info:
        stable_hash(value)
    assert shown in str(info.value)
    assert isinstance(info.value, TypeError)  # also catchable as the usual Python error


# ------------------------------------------------------------------------------------------
# property tests


class Shade(enum.Enum):
    LIGHT = "light"
    DARK = ("dark", 2)


@dataclasses.dataclass(frozen=True)
class Rec:
    """A frozen dataclass record for the property tests."""

    a: Any
    b: Any


_zones = st.sampled_from(
    [timezone.utc, timezone(timedelta(hours=5, minutes=30)), timezone(timedelta(hours=-8), "PST")]
)
_standard = st.one_of(
    st.dates(),
    st.datetimes(min_value=datetime(1900, 1, 1), max_value=datetime(2100, 1, 1)),
    st.datetimes(min_value=datetime(1900, 1, 1), max_value=datetime(2100, 1, 1), timezones=_zones),
    st.times(),
    st.times(timezones=_zones),
    st.timedeltas(),
    st.decimals(min_value=-(10**6), max_value=10**6, allow_nan=False, places=4),
    st.fractions(max_denominator=1000),
    st.uuids(),
    st.sampled_from(list(Shade)),
)
_scalars = st.one_of(
    st.integers(),
    st.integers(min_value=-(2**200), max_value=2**200),
    st.floats(allow_nan=False),
    st.text(max_size=20),
    st.binary(max_size=20),
    st.none(),
    st.booleans(),
    _standard,
)
_keys = st.recursive(
    _scalars,
    lambda children: st.one_of(
        st.lists(children, max_size=4).map(tuple),
        st.tuples(children, children).map(lambda p: Product(*p)),
        st.frozensets(children, max_size=4),
        st.builds(Rec, children, children),
    ),
    max_leaves=12,
)


def _rebuild(value: Any) -> Any:
    """An equal copy built from fresh objects (strings re-created, containers re-made)."""
    if isinstance(value, Rec):
        return Rec(_rebuild(value.a), _rebuild(value.b))
    if isinstance(value, (date, time, timedelta, Decimal, Fraction, uuid.UUID)):
        return pickle.loads(pickle.dumps(value))
    if isinstance(value, Product):
        return Product(_rebuild(value[0]), _rebuild(value[1]))
    if isinstance(value, tuple):
        return tuple(_rebuild(v) for v in value)
    if isinstance(value, frozenset):
        return frozenset(_rebuild(v) for v in reversed(sorted(value, key=repr)))
    if isinstance(value, str):
        return "".join(list(value))
    if isinstance(value, bytes):
        return bytes(bytearray(value))
    return value


def _twin(value: Any) -> Any:
    """An equal value of (partly) different types: ints as floats where exact, bools as ints,
    integral Decimals and Fractions as ints, aware datetimes in another zone."""
    if isinstance(value, Rec):
        return Rec(_twin(value.a), _twin(value.b))
    if isinstance(value, (Decimal, Fraction)):
        return int(value) if value == int(value) else Fraction(value)
    if isinstance(value, datetime) and value.utcoffset() is not None:
        return value.astimezone(timezone(timedelta(hours=-3)))
    if isinstance(value, Product):
        return Product(_twin(value[0]), _twin(value[1]))
    if isinstance(value, tuple):
        return tuple(_twin(v) for v in value)
    if isinstance(value, frozenset):
        return frozenset(_twin(v) for v in value)
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int):
        try:
            f = float(value)
        except OverflowError:
            return value
        return f if f == value else value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


@pytest.mark.filterwarnings("ignore:Generating overly large repr")
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_keys)
def test_deterministic_and_in_range(value):
    h = stable_hash(value)
    assert isinstance(h, int)
    assert 0 <= h < 2**64
    assert stable_hash(value) == h
    assert stable_hash(_rebuild(value)) == h


@pytest.mark.filterwarnings("ignore:Generating overly large repr")
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_keys)
def test_equal_values_of_other_types_hash_equal(value):
    twin = _twin(value)
    assert twin == value
    assert stable_hash(twin) == stable_hash(value)


# ------------------------------------------------------------------------------------------
# end to end: string keys on processes with different hash seeds

WORDS = (
    "differential dataflow timely collection arrangement trace batch frontier lattice "
    "since upper join reduce iterate count the a of and to caf\u00e9 \u65e5\u672c"
).split()


def _lines(rounds: int) -> List[List[str]]:
    import random

    rng = random.Random(7)
    return [
        [" ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 6))) for _ in range(12)]
        for _ in range(rounds)
    ]


def wordcount_build(rounds: int = 4):
    script = _lines(rounds)

    def build(worker):
        def dataflow(scope):
            session, lines = scope.new_collection(name="lines")
            counts = lines.flat_map(str.split).count()
            return session, counts.capture(), counts.probe()

        session, captured, probe = worker.dataflow(dataflow)
        k = 0
        for r, lines in enumerate(script):
            session.advance_to(r)
            for line in lines:
                if k % worker.peers == worker.index:
                    session.insert(line)
                    if r > 0 and k % 3 == 0:
                        session.remove(script[r - 1][k % len(script[r - 1])])
                k += 1
            session.advance_to(r + 1)
            session.flush()
            worker.step_until(probe, session.time, timeout=60)
        session.close()
        worker.step_until_done(timeout=60)
        return {
            "updates": captured.updates(),
            "builtin_hash": hash("a string whose builtin hash is salted"),
            "randomized": sys.flags.hash_randomization,
            "pid": os.getpid(),
        }

    return build


def _consolidate(results) -> Dict[Any, int]:
    acc: Counter = Counter()
    for res in results:
        for d, t, r in res["updates"]:
            acc[(d, t)] += r
    return {k: v for k, v in acc.items() if v}


@pytest.mark.processes
@pytest.mark.timeout(120)
def test_string_keyed_wordcount_on_processes_with_different_hash_seeds(monkeypatch):
    """``spawn`` starts every worker as a fresh interpreter; with ``PYTHONHASHSEED`` unset each
    gets its own random salt, so a routing hash built on ``hash()`` would split word groups.

    (With the default ``forkserver`` every worker is forked from the one server process and so
    shares *its* salt - different from the launcher's, but the same among workers - which would
    hide such a bug. Hence ``spawn`` here.)"""
    monkeypatch.delenv("PYTHONHASHSEED", raising=False)
    expected = _consolidate(tp.execute(wordcount_build(), workers=1))
    assert expected

    results = tp.execute(
        wordcount_build(), workers=3, backend="processes", start_method="spawn", timeout=90
    )
    salts = {res["builtin_hash"] for res in results}
    assert all(res["randomized"] for res in results)
    assert len({res["pid"] for res in results}) == 3
    assert len(salts) == 3, "the workers did not get different hash seeds; the test is moot"
    assert _consolidate(results) == expected
    # Every word's count lives on exactly the worker stable_hash routes it to.
    for index, res in enumerate(results):
        for (word, _count), _t, _r in res["updates"]:
            assert stable_hash(word) % 3 == index


@pytest.mark.processes
@pytest.mark.timeout(120)
def test_string_keyed_wordcount_on_forkserver_processes():
    """The default start method: same answer; and (documented above) the workers share a salt."""
    expected = _consolidate(tp.execute(wordcount_build(), workers=1))
    results = tp.execute(wordcount_build(), workers=2, backend="processes", timeout=90)
    assert _consolidate(results) == expected
    assert all(res["pid"] != os.getpid() for res in results)


MIXED_KEYS = [
    1,
    1.0,
    True,
    "k",
    ("t", 1),
    ("t", 1.0),
    Product(2, 3),
    (2, 3),
    frozenset({"a", "b", "c"}),
    frozenset({"c", "b", "a"}),
    None,
    b"by",
    2**70,
    float(2**70),
    -5,
    -5.0,
    "caf\u00e9",
    ("caf\u00e9", frozenset({None})),
]


def mixed_keys_build(worker):
    def dataflow(scope):
        session, keys = scope.new_collection(name="keys")
        counts = keys.count()
        return session, counts.capture()

    session, captured = worker.dataflow(dataflow)
    for k, key in enumerate(MIXED_KEYS):
        if k % worker.peers == worker.index:  # equal keys enter on different workers
            session.insert(key)
    session.close()
    worker.step_until_done(timeout=60)
    return {"updates": captured.updates()}


@pytest.mark.parametrize(
    "workers, backend",
    [
        (2, "inline"),
        (3, "inline"),
        pytest.param(3, "processes", marks=pytest.mark.processes),
    ],
)
@pytest.mark.timeout(60)
def test_equal_keys_of_different_types_meet_on_one_worker(workers, backend):
    expected = Counter(MIXED_KEYS)  # groups by ==, so 1, 1.0 and True are one key
    assert expected[1] == 3 and expected[(2, 3)] == 2 and expected[-5] == 2
    single = _consolidate(tp.execute(mixed_keys_build, workers=1))
    assert single == {((key, n), 0): 1 for key, n in expected.items()}
    results = tp.execute(mixed_keys_build, workers=workers, backend=backend, timeout=60)
    assert _consolidate(results) == single


def test_column_wise_hashes_of_empty_tuples_equal_stable_hash():
    """The column-wise path of :func:`stable_hashes` (64 values or more) has no item column to
    count empty tuples by."""
    from timelypy.hashing import stable_hashes

    assert stable_hashes([()] * 100) == [stable_hash(())] * 100
