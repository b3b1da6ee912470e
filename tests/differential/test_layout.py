"""Layouts: fixed-width records round-trip through numpy columns; every misfit is refused.

A record takes the column path only if decoding its columns gives back an equal value of the
same Python types; everything else (subclasses of ``str``, ints outside int64, NaN, -0.0,
tuple subclasses, lists, a column of mixed types, tuples of different lengths) must make
detection or encoding return None, so that the batch stays on the object path.
"""

from __future__ import annotations

import collections
import math
from typing import Any, List

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from timelypy.differential.kernel.columns import DIFF_LIMIT
from timelypy.differential.trace.column_batch import encode_updates
from timelypy.differential.trace.layout import COLUMNS_VARIABLE, Layout, columns_enabled
from timelypy.order import Product

INT64 = (-(2**63), 2**63 - 1)

SETTINGS = settings(max_examples=150, deadline=None)


def _floats() -> st.SearchStrategy[float]:
    """Floats that round-trip exactly: no NaN, no -0.0 (infinities are fine)."""
    return st.floats(allow_nan=False).filter(lambda x: not (x == 0 and math.copysign(1, x) < 0))


def _shapes(max_leaves: int = 6) -> st.SearchStrategy[Any]:
    """Layout shapes: ``'i'``, ``'f'``, ``'b'`` and nested tuples of them (the empty one too)."""
    return st.recursive(
        st.sampled_from(["i", "f", "b"]),
        lambda inner: st.lists(inner, max_size=3).map(tuple),
        max_leaves=max_leaves,
    )


def values_of(shape: Any) -> st.SearchStrategy[Any]:
    """Values of ``shape``, the int64 bounds and infinities included."""
    if shape == "i":
        return st.one_of(st.integers(*INT64), st.sampled_from(INT64))
    if shape == "f":
        return _floats()
    if shape == "b":
        return st.booleans()
    return st.tuples(*(values_of(part) for part in shape))


@st.composite
def shaped_values(draw: Any, min_size: int = 0) -> tuple:
    """``(shape, values)``: a shape and a list of values of it."""
    shape = draw(_shapes())
    return shape, draw(st.lists(values_of(shape), min_size=min_size, max_size=20))


def _same_types(a: Any, b: Any) -> bool:
    """``a == b`` with the same Python types all the way down."""
    if type(a) is not type(b):
        return False
    if type(a) is tuple:
        return len(a) == len(b) and all(_same_types(x, y) for x, y in zip(a, b))
    return bool(a == b)


@SETTINGS
@given(shaped_values())
def test_round_trip_gives_equal_values_of_the_same_types(case: tuple) -> None:
    shape, values = case
    layout = Layout(shape)
    columns = layout.encode(values)
    assert columns is not None
    assert len(columns) == layout.width
    assert [c.dtype for c in columns] == [np.dtype(d) for d in layout.dtypes]
    assert all(len(c) == len(values) for c in columns)
    decoded = layout.decode(columns, len(values))
    assert len(decoded) == len(values)
    assert all(_same_types(a, b) for a, b in zip(decoded, values)), (decoded, values)


@SETTINGS
@given(shaped_values(min_size=1))
def test_detection_finds_the_shape_of_every_value(case: tuple) -> None:
    shape, values = case
    for value in values:
        detected = Layout.of(value)
        assert detected is not None and detected == Layout(shape)
        assert hash(detected) == hash(Layout(shape))


Point = collections.namedtuple("Point", "x y")


# Values that are not fixed-width whatever the layout: detection refuses them.
class _Word(str):
    """A ``str`` subclass: equal to the ``str``, not the same type."""


UNDETECTABLE = [
    _Word("a"),
    bytearray(b"a"),
    (1, _Word("a")),
    None,
    [1, 2],
    {1: 2},
    {1},
    Point(1, 2),
    Product(1, 2),
    (1, [2]),
    ((1, 2), (3, None)),
    1 + 2j,
    np.int64(3),
    np.float64(0.5),
]


@pytest.mark.parametrize("value", UNDETECTABLE, ids=repr)
def test_detection_refuses_what_is_not_fixed_width(value: Any) -> None:
    assert Layout.of(value) is None


# (shape, a value of that shape's *types* that cannot be stored exactly)
UNENCODABLE = [
    ("i", 2**63),
    ("i", -(2**63) - 1),
    ("i", 10**30),
    ("f", math.nan),
    ("f", -0.0),
    (("i", "f"), (1, math.nan)),
    (("i", ("f", "b")), (1, (-0.0, True))),
    (("i", "i"), (1, 2**64)),
]


@pytest.mark.parametrize(("shape", "value"), UNENCODABLE, ids=repr)
def test_values_that_do_not_round_trip_are_refused(shape: Any, value: Any) -> None:
    layout = Layout(shape)
    assert layout.encode([value]) is None


def _misfits(shape: Any) -> List[Any]:
    """Values that do not fit ``shape``: other types, other lengths, subclasses, strings."""
    out: List[Any] = ["s", [0], None, Point(0, 0), Product(0, 0)]
    if shape == "i":
        return out + [0.0, True, 2**63, -(2**63) - 1]
    if shape == "f":
        return out + [0, False, math.nan, -0.0]
    if shape == "b":
        return out + [0, 1.0]
    longer = shape_value(shape) + (0,)
    return out + [longer, 0, 0.0] + ([(), shape_value(shape)[:-1]] if shape else [])


def shape_value(shape: Any) -> Any:
    """The plainest value of ``shape``."""
    if shape == "i":
        return 0
    if shape == "f":
        return 0.5
    if shape == "b":
        return False
    return tuple(shape_value(part) for part in shape)


@SETTINGS
@given(shaped_values(), st.data())
def test_one_misfit_anywhere_makes_the_column_refused(case: tuple, data: Any) -> None:
    """A column of one layout with one value of another type, length or range in it (mixed
    types in a column, tuples of different lengths, ...) is refused, wherever the misfit is,
    also inside a nested tuple."""
    shape, values = case
    layout = Layout(shape)
    path = data.draw(_paths(shape), label="path")
    misfit = data.draw(st.sampled_from(_misfits(_at(shape, path))), label="misfit")
    bad = _replace(shape_value(shape), path, misfit)
    position = data.draw(st.integers(0, len(values)), label="position")
    column = values[:position] + [bad] + values[position:]
    assert layout.encode(column) is None, (shape, bad)


def _paths(shape: Any) -> st.SearchStrategy[tuple]:
    """Index paths into a shape's nested tuples (the empty path: the whole value)."""
    if isinstance(shape, str) or not shape:
        return st.just(())
    return st.one_of(
        st.just(()),
        st.integers(0, len(shape) - 1).flatmap(
            lambda i: _paths(shape[i]).map(lambda rest: (i,) + rest)
        ),
    )


def _at(shape: Any, path: tuple) -> Any:
    for i in path:
        shape = shape[i]
    return shape


def _replace(value: Any, path: tuple, new: Any) -> Any:
    if not path:
        return new
    i = path[0]
    return value[:i] + (_replace(value[i], path[1:], new),) + value[i + 1 :]


@SETTINGS
@given(
    st.lists(
        st.tuples(
            st.tuples(st.integers(-5, 5), st.integers(-5, 5)), st.integers(0, 9), st.integers(-3, 3)
        ),
        min_size=2,
        max_size=10,
    ),
    st.sampled_from(["key", "val", "time", "diff", "pair"]),
    st.data(),
)
def test_updates_with_one_misfit_are_refused(updates: list, where: str, data: Any) -> None:
    """``encode_updates`` refuses a batch with one misfit key, value, time (a ``Product``, a
    float), diff (beyond what int64 arithmetic allows) or a record that is not a pair, after
    the first update (whose layouts it detects)."""
    assert encode_updates(updates) is not None
    i = data.draw(st.integers(1, len(updates) - 1), label="index")  # the first is detected
    (k, v), t, r = updates[i]
    if where == "key":
        bad = ((data.draw(st.sampled_from(["k", 0.5, 2**63, (k,)])), v), t, r)
    elif where == "val":
        bad = ((k, data.draw(st.sampled_from(["v", None, -(2**63) - 1, True]))), t, r)
    elif where == "time":
        bad = ((k, v), data.draw(st.sampled_from([Product(t, 0), float(t), 2**64])), r)
    elif where == "diff":
        bad = ((k, v), t, data.draw(st.sampled_from([DIFF_LIMIT, -DIFF_LIMIT, 2**70])))
    else:
        bad = (data.draw(st.sampled_from([(k, v, 0), (k,), k, [k, v]])), t, r)
    updates = updates[:i] + [bad] + updates[i + 1 :]
    assert encode_updates(updates) is None, bad


def test_diffs_just_inside_the_limit_fit() -> None:
    updates = [((1, 2), 0, DIFF_LIMIT - 1), ((1, 2), 0, -(DIFF_LIMIT - 1))]
    assert encode_updates(updates) is not None


def test_the_empty_tuple_has_no_column_and_keeps_its_count() -> None:
    layout = Layout(())
    assert layout.width == 0
    assert layout.encode([(), (), ()]) == []
    assert layout.decode([], 3) == [(), (), ()]
    assert layout.encode([(), (1,)]) is None
    for shape, value in [(((),), ((),)), (("i", ()), (7, ())), ((("b", ()), ()), ((True, ()), ()))]:
        nested = Layout(shape)
        columns = nested.encode([value, value])
        assert columns is not None
        assert nested.decode(columns, 2) == [value, value]


def test_columns_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(COLUMNS_VARIABLE, raising=False)
    assert columns_enabled()
    for value, enabled in [("auto", True), ("AUTO ", True), ("", True), ("off", False)]:
        monkeypatch.setenv(COLUMNS_VARIABLE, value)
        assert columns_enabled() is enabled
    monkeypatch.setenv(COLUMNS_VARIABLE, "on")
    with pytest.raises(ValueError, match=COLUMNS_VARIABLE):
        columns_enabled()
