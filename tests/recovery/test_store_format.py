"""The chunk format, property-tested: any plain state reads back equal, with its exact types,
and the manifest's tagged JSON keeps what plain JSON would lose."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from timelypy.order import Product
from timelypy.recovery.format import decode_chunk, encode_chunk, pack
from timelypy.recovery.manifest import from_json, to_json

SETTINGS = settings(max_examples=150, deadline=None)

scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False)
    | st.text(max_size=8)
    | st.binary(max_size=8)
)
hashables = st.recursive(
    scalars.filter(lambda v: not isinstance(v, float)),
    lambda inner: (
        st.tuples(inner, inner)
        | st.builds(Product, inner, inner)
        | st.frozensets(inner, max_size=3)
    ),
    max_leaves=8,
)
values = st.recursive(
    scalars | hashables,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.lists(inner, max_size=4).map(tuple)
        | st.dictionaries(hashables, inner, max_size=3)
        | st.sets(hashables, max_size=3)
    ),
    max_leaves=20,
)


def _shape(value: Any) -> Any:
    """The exact type at every level, order-free for sets and dicts."""
    if isinstance(value, (set, frozenset)):
        return (type(value), sorted(repr(_shape(v)) for v in value))
    if isinstance(value, dict):
        return (dict, sorted(repr((_shape(k), _shape(v))) for k, v in value.items()))
    if isinstance(value, (list, tuple)):
        return (type(value), [_shape(v) for v in value])
    return type(value)


@SETTINGS
@given(values)
def test_plain_values_round_trip_with_their_types(value):
    data, encoding = encode_chunk({"p": [value]}, None, "operator 'x'")
    assert encoding == 0
    back = decode_chunk(data, "chunks/x", None)["p"][0]
    assert back == value and _shape(back) == _shape(value)


@SETTINGS
@given(st.sets(hashables, max_size=6))
def test_equal_sets_give_equal_bytes(items):
    # a set built in another order (another process's string hashes) writes the same chunk,
    # whether or not its elements compare (frozensets compare only as subsets)
    forward, backward = set(), set()
    for v in sorted(items, key=repr):
        forward.add(v)
    for v in sorted(items, key=repr, reverse=True):
        backward.add(v)
    assert pack(forward) == pack(backward)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=6) | st.binary(max_size=6),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.lists(inner, max_size=3).map(tuple)
        | st.builds(Product, inner, inner)
        | st.dictionaries(st.text(max_size=4), inner, max_size=3)
        | st.dictionaries(st.integers() | st.tuples(st.integers()), inner, max_size=3)
    ),
    max_leaves=12,
)


@SETTINGS
@given(json_values)
def test_tagged_json_round_trips(value):
    back = from_json(to_json(value))
    assert back == value and _shape(back) == _shape(value)
