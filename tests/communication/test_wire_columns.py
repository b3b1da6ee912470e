"""Fixed-width records on the wire as numpy columns (``wire_columns``, ``EXT_FIXED``).

What fits travels as columns and comes back exactly (equal values of the same types, a list as
a list where a data message's records are concerned); what does not fit - big ints, NaN,
``-0.0``, strings, subclasses, ragged lists - keeps the record encoding; and a processes run
whose exchanges carry columns answers as the inline run does.
"""

from __future__ import annotations

import math
import pickle
from collections import Counter
from typing import Any, Dict, List, NamedTuple

import msgpack
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import timelypy as tp
from timelypy.communication import wire, wire_columns
from timelypy.communication.wire import (
    EXT_FIXED,
    decode,
    encode,
    fixed_records,
    pickle_records,
    unpickle_records,
)
from timelypy.communication.wire_columns import (
    FIXED_MIN_ROWS,
    WIRE_COLUMNS_VARIABLE,
    pack_fixed,
    shape_of,
    unpack_fixed,
    wire_columns_mode,
)
from timelypy.order import Product

INT64 = (-(2**63), 2**63 - 1)


class Pair(NamedTuple):
    a: int
    b: int


@pytest.fixture(autouse=True)
def _default_mode(monkeypatch):
    """Every test starts in the default mode and leaves it so."""
    monkeypatch.delenv(WIRE_COLUMNS_VARIABLE, raising=False)
    wire_columns_mode()
    yield
    monkeypatch.delenv(WIRE_COLUMNS_VARIABLE, raising=False)
    wire_columns_mode()


@pytest.fixture
def always(monkeypatch):
    """Columns for every fixed-width list (the ``always`` mode)."""
    monkeypatch.setenv(WIRE_COLUMNS_VARIABLE, "always")
    assert wire_columns_mode() == "always"


def same(a: Any, b: Any) -> bool:
    """Equal and of the same types all the way down (NaN equals NaN, -0.0 is not 0.0)."""
    if type(a) is not type(b):
        return False
    if type(a) is float:
        if math.isnan(a):
            return math.isnan(b)
        return a == b and math.copysign(1.0, a) == math.copysign(1.0, b)
    if isinstance(a, (tuple, list)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    return bool(a == b)


def ext_codes(data: bytes) -> List[int]:
    """The msgpack extension codes at the outer level of ``data`` (and inside arrays)."""
    codes: List[int] = []

    def hook(code: int, payload: bytes) -> None:
        codes.append(code)

    msgpack.unpackb(data, ext_hook=hook, strict_map_key=False)
    return codes


# --------------------------------------------------------------------------------------
# Strategies: a fixed-width shape, then records of it


def _scalar_of(kind: str) -> st.SearchStrategy:
    if kind == "i":
        return st.integers(*INT64)
    if kind == "f":
        return st.floats(allow_nan=False).filter(lambda x: not (x == 0 and math.copysign(1, x) < 0))
    if kind == "b":
        return st.booleans()
    return st.builds(Product, st.integers(*INT64), st.integers(*INT64))


SHAPES = st.recursive(
    st.sampled_from(["i", "f", "b", "P"]),
    lambda inner: st.lists(inner, min_size=0, max_size=3).map(tuple),
    max_leaves=6,
)


def _value_of(shape: Any) -> st.SearchStrategy:
    if isinstance(shape, str):
        return _scalar_of(shape)
    return st.tuples(*[_value_of(part) for part in shape])


@st.composite
def fixed_lists(draw: Any, min_size: int = 0) -> List[Any]:
    """A list of records of one fixed-width shape (a tuple at the top, as updates are); values
    drawn small or extreme, and often repeated (constant columns)."""
    shape = draw(SHAPES.filter(lambda s: isinstance(s, tuple) and s != ()))
    one = _value_of(shape)
    pool = draw(st.lists(one, min_size=1, max_size=4))
    return draw(st.lists(st.one_of(one, st.sampled_from(pool)), min_size=min_size, max_size=150))


SPOILERS = [
    2**63,  # beyond int64
    -(2**63) - 1,
    2**100,
    float("nan"),
    -0.0,
    "text",
    b"bytes",
    None,
    Pair(1, 2),  # a tuple subclass
    Product(1.5, 2),  # a Product of another leaf type
    Product(2**64, 0),
]


def _spoil(value: Any, spoiler: Any, where: int) -> Any:
    """``value`` with one of its scalars (the ``where``-th, cyclically) replaced by ``spoiler``."""
    if not isinstance(value, tuple) or type(value) is Product or not value:
        return spoiler
    index = where % len(value)
    return (*value[:index], _spoil(value[index], spoiler, where // 2), *value[index + 1 :])


# --------------------------------------------------------------------------------------
# Round trips


def _holds_products(records: List[Any]) -> bool:
    return "P" in wire_columns._shape_text(shape_of(records[0]))


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(fixed_lists())
def test_fixed_width_lists_round_trip_exactly(records):
    for mode in ("always", "auto"):
        wire_columns.mode = mode
        back = decode(encode(records))
        assert same(back, tuple(records))
        as_tuple = tuple(records)
        assert same(decode(encode(as_tuple)), as_tuple)
        if len(records) >= FIXED_MIN_ROWS:
            expected = mode == "always" or _holds_products(records)
            assert (EXT_FIXED in ext_codes(encode(records))) == expected, mode
    assert same(unpack_fixed(pack_fixed(records, as_list=True)), records) if records else True


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(fixed_lists(min_size=1), st.sampled_from(SPOILERS), st.integers(0, 1000), st.data())
def test_a_value_that_does_not_fit_keeps_the_record_encoding(records, spoiler, where, data):
    wire_columns.mode = "always"  # (the autouse fixture puts the default back)
    at = data.draw(st.integers(0, len(records) - 1))
    mixed = list(records)
    mixed[at] = _spoil(mixed[at], spoiler, where)
    assert pack_fixed(mixed, as_list=True) is None
    assert EXT_FIXED not in ext_codes(encode(mixed))
    assert same(decode(encode(mixed)), tuple(mixed))
    message = ("d", 4, 9, mixed)
    assert fixed_records(message) is None
    assert same(unpickle_records(pickle_records(message)), message)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(fixed_lists(min_size=FIXED_MIN_ROWS), st.one_of(st.integers(0, 10), st.just(Product(3, 1))))
def test_a_data_message_with_columns_decodes_as_the_pickled_one(records, time):
    wire_columns.mode = "always"
    message = ("d", 7, time, records)
    fixed = fixed_records(message)
    assert fixed is not None
    back = decode(fixed)
    assert same(back, message)  # the records a list, as unpickle_records gives them
    if type(time) is int:
        assert same(back, unpickle_records(pickle_records(message)))


def test_shapes_are_detected_exactly():
    assert shape_of(((1, 2), 0, 1)) == (("i", "i"), "i", "i")
    assert shape_of((1.5, True, Product(1, 2), ())) == ("f", "b", "P", ())
    assert shape_of((1, "a")) is None
    assert shape_of(Pair(1, 2)) is None
    assert shape_of((Product(1, 2.0),)) is None
    assert shape_of(((((((((((1,),),),),),),),),),)) is None  # deeper than the wire nests


def test_ragged_and_mixed_lists_keep_the_record_encoding(always):
    for records in (
        [(k, k) for k in range(70)] + [(1, 2, 3)],
        [(k, k) for k in range(70)] + [(1, 2.0)],
        [(k, k) for k in range(70)] + [(1, True)],
        [((k, k), 0, 1) for k in range(70)] + [((1, (2,)), 0, 1)],
        [(k, Product(1, 2)) for k in range(70)] + [(1, (1, 2))],
    ):
        assert pack_fixed(records, as_list=True) is None
        assert same(decode(encode(records)), tuple(records))


def test_empty_tuples_and_short_lists(always):
    assert pack_fixed([], as_list=True) is None
    assert pack_fixed([()] * 20, as_list=True) is None  # no column to count by
    records = [((), k, 1) for k in range(20)]
    assert same(unpack_fixed(pack_fixed(records, as_list=True)), records)
    short = [((1, 2), 0, 1)] * (FIXED_MIN_ROWS - 1)
    assert EXT_FIXED not in ext_codes(encode(short))
    assert fixed_records(("d", 1, 0, short)) is None


def test_columns_are_narrowed_and_constants_sent_once():
    records = [((k, -k), 5, 1) for k in range(100)]  # int8 keys and values, time and diff once
    payload = pack_fixed(records, as_list=True)
    assert len(payload) < 100 * 2 + 64
    wide = [((k << 40, k), Product(2, 3), True) for k in range(100)]
    payload = pack_fixed(wide, as_list=False)
    assert 100 * 9 <= len(payload) < 100 * 9 + 64
    back = unpack_fixed(payload)
    assert same(back, tuple(wide)) and type(back[0][1]) is Product


def test_a_corrupt_payload_is_an_error_not_wrong_records():
    payload = pack_fixed([(k, k * 1000) for k in range(40)], as_list=True)
    with pytest.raises(ValueError):
        unpack_fixed(payload[:-3])
    with pytest.raises(ValueError):
        unpack_fixed(payload + b"\0")
    header = msgpack.packb(["(ii)", 40, True, ["<i1"]])  # one column short
    with pytest.raises(ValueError, match="does not fit"):
        unpack_fixed(len(header).to_bytes(4, "little") + header + bytes(40))
    header = msgpack.packb(["(i)", 40, True, ["|O"]])
    with pytest.raises(ValueError, match="unknown column type"):
        unpack_fixed(len(header).to_bytes(4, "little") + header + bytes(320))
    for text in ("(i", "(ix)", "i)", "(i)(i)", "", ["i"]):
        header = msgpack.packb([text, 1, True, ["<i8"]])
        with pytest.raises(ValueError, match="not a column shape"):
            unpack_fixed(len(header).to_bytes(4, "little") + header + bytes(8))


def test_message_size_of_ten_thousand_int_pairs_against_the_old_encodings(always):
    records = [((k, (k * 7919) % 1_000_000), 0, 1) for k in range(10_000)]
    message = ("d", 3, 0, records)
    columns = fixed_records(message)
    pickled = pickle_records(message)
    wire_columns.mode = "off"
    try:
        old = encode(message)
    finally:
        wire_columns.mode = "always"
    assert len(columns) < 10_000 * 6 + 100  # an int16 and an int32 column
    assert len(columns) < 0.7 * len(old), (len(columns), len(old))
    assert len(columns) < 0.5 * len(pickled), (len(columns), len(pickled))
    assert decode(columns)[3] == records == list(decode(old)[3]) == unpickle_records(pickled)[3]


def test_the_mode_is_read_from_the_environment(monkeypatch):
    records = [((k, k), 0, 1) for k in range(FIXED_MIN_ROWS)]
    nested = [((k, k), Product(0, 3), 1) for k in range(FIXED_MIN_ROWS)]
    monkeypatch.setenv(WIRE_COLUMNS_VARIABLE, "off")
    assert wire_columns_mode() == "off"
    assert EXT_FIXED not in ext_codes(encode(records)) + ext_codes(encode(nested))
    assert fixed_records(("d", 1, 0, records)) is None
    monkeypatch.setenv(WIRE_COLUMNS_VARIABLE, "")
    assert wire_columns_mode() == "auto"  # columns where they cost less CPU: Product times
    assert EXT_FIXED not in ext_codes(encode(records))
    assert EXT_FIXED in ext_codes(encode(nested))
    assert fixed_records(("d", 1, 0, records)) is None
    assert fixed_records(("d", 1, Product(0, 3), nested)) is not None
    monkeypatch.setenv(WIRE_COLUMNS_VARIABLE, " Always ")
    assert wire_columns_mode() == "always"
    assert EXT_FIXED in ext_codes(encode(records))
    monkeypatch.setenv(WIRE_COLUMNS_VARIABLE, "sometimes")
    with pytest.raises(ValueError, match="TIMELYPY_WIRE_COLUMNS='sometimes'"):
        wire_columns_mode()


def test_pickle_and_msgpack_are_still_what_small_or_odd_messages_take():
    assert pickle_records(("d", 1, 0, [((1, 2), 0, 1)])) is not None
    assert wire.decode(wire.encode([(1, "a")] * 20)) == ((1, "a"),) * 20
    assert pickle.loads(pickle.dumps(Product(1, 2))) == Product(1, 2)


# --------------------------------------------------------------------------------------
# End to end: two processes whose exchanges carry columns answer as one worker


def fixed_width_program(size: int):
    """join, count and an iterate (``Product`` times) over ``(int, int)`` records and
    ``(int, float)`` values, loaded in bulk (messages of many records) and then changed."""

    def build(worker):
        def dataflow(scope):
            edges_in, edges = scope.new_collection(name="edges")  # (src, dst)
            weights_in, weights = scope.new_collection(name="weights")  # (node, (w, flag))
            roots = edges.filter(lambda e: e[0] == 0).map(lambda e: e[0]).distinct()
            reach = roots.iterate(
                lambda r: (
                    r.map(lambda n: (n, ()))
                    .join_map(edges.enter(r.scope), lambda n, _, m: m)
                    .concat(roots.enter(r.scope))
                    .distinct()
                )
            )
            outputs = {
                "join": edges.join(weights),
                "count": edges.map(lambda e: e[1] % 17).count(),
                "reach": reach,
            }
            captures = {name: c.capture() for name, c in outputs.items()}
            return edges_in, weights_in, captures

        edges_in, weights_in, captures = worker.dataflow(dataflow)
        for k in range(worker.index, size, worker.peers):
            edges_in.insert((k // 3, k))
            weights_in.insert((k, (k * 0.5 + 1, k % 3 == 0)))
        for t in (1, 2):
            edges_in.advance_to(t)
            weights_in.advance_to(t)
            for k in range(worker.index, size // 4, worker.peers):
                edges_in.remove((k // 3, k) if t == 1 else (k // 2, k))
                edges_in.insert((k // 2, k) if t == 1 else (k // 3, k))
        edges_in.close()
        weights_in.close()
        worker.step_until_done(timeout=120)
        mesh = getattr(worker.fabric, "mesh", None)
        sent = mesh.fixed_sent if mesh is not None else 0
        return {"updates": {n: c.updates() for n, c in captures.items()}, "fixed_sent": sent}

    return build


def _consolidate(results: List[Dict[str, Any]]) -> Dict[str, Counter]:
    out: Dict[str, Counter] = {}
    for result in results:
        for name, updates in result["updates"].items():
            acc = out.setdefault(name, Counter())
            for data, t, r in updates:
                acc[(data, t)] += r
    return {name: Counter({k: r for k, r in acc.items() if r}) for name, acc in out.items()}


@pytest.mark.processes
@pytest.mark.timeout(400)
def test_two_processes_with_columns_answer_as_one_worker(monkeypatch):
    size = 600
    expected = _consolidate(tp.execute(fixed_width_program(size), workers=1))
    assert all(expected.values())
    assert any(t == 2 for (_d, t) in expected["join"])
    sent = {}
    for mode in ("always", "auto", "off"):
        # spawn: a worker reads the variable when its mesh is made, and a forkserver started
        # earlier would hand it the environment of that time
        monkeypatch.setenv(WIRE_COLUMNS_VARIABLE, mode)
        results = tp.execute(
            fixed_width_program(size),
            workers=2,
            backend="processes",
            start_method="spawn",
            timeout=240,
        )
        assert _consolidate(results) == expected, mode
        sent[mode] = sum(r["fixed_sent"] for r in results)
    # Columns crossed: bulk loads and changes in "always"; the iterate's messages (Product
    # times, which msgpack would encode) in "auto"; none in "off".
    assert sent["always"] > sent["auto"] > 0 == sent["off"], sent


@pytest.mark.ray
@pytest.mark.timeout(300)
def test_two_ray_workers_with_columns_answer_as_one_worker(ray_session):
    """Ray actors meet over the same mesh: the iterate's messages cross as columns there too."""
    size = 300
    expected = _consolidate(tp.execute(fixed_width_program(size), workers=1))
    results = tp.execute(fixed_width_program(size), workers=2, backend="ray", timeout=240)
    assert _consolidate(results) == expected
    assert sum(r["fixed_sent"] for r in results) > 0
