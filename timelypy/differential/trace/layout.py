"""Layouts: which records are fixed-width, and how they become numpy columns and back.

A :class:`Layout` is the shape of one part of a record (a key or a value): a scalar ``int``
(stored as ``int64``), ``float`` (``float64``) or ``bool``, or a plain ``tuple`` of layouts
(nested, possibly empty). A layout is *detected* from one value (:meth:`Layout.of`) and then
checked against every value it encodes (:meth:`Layout.encode` returns None as soon as one does
not fit: another type, a tuple of another length, an ``int`` outside ``int64``, a float NaN or
``-0.0``). Decoding gives back equal values of the same Python types, so an operator reading
columns answers exactly as one reading the objects.

Only values that round-trip exactly are taken: NaN (not equal to itself, so a dictionary keeps
each NaN apart where a sort would merge them) and ``-0.0`` (equal to ``0.0``, so which of the
two survives a consolidation would depend on the path) stay on the object path, as do
subclasses of ``int``, ``float`` and ``tuple`` (named tuples, :class:`~timelypy.order.Product`).

Strings. A ``str`` (kind ``"s"``) or ``bytes`` (``"y"``) is a scalar too, exactly of that type
(a subclass of ``str``, or a column mixing ``str`` with anything else, does not fit); a schema
may declare them (:meth:`Layout.from_types`).
:meth:`Layout.encode` gives such a column as an object array of the strings; a column batch
then *codes* it: an ``int32`` code per row into a sorted dictionary of the batch's distinct
strings (see :func:`~timelypy.differential.kernel.columns.dictionary_encode`), held by the
batch's layouts (:attr:`Layout.dicts`, set by :meth:`Layout.with_dicts`), so that codes order
as the strings do and :meth:`Layout.decode` gives the strings back. Layouts are equal when
their shapes are, whatever their dictionaries: code columns of different dictionaries are
made comparable by the kernels that read several batches.

Example:

>>> layout = Layout.of((1, (2.5, True)))
>>> layout.shape
('i', ('f', 'b'))
>>> columns = layout.encode([(1, (2.5, True)), (2, (0.5, False))])
>>> [column.dtype.name for column in columns]
['int64', 'float64', 'bool']
>>> layout.decode(columns, 2)
[(1, (2.5, True)), (2, (0.5, False))]
>>> layout.encode([(1, (2.5, "x"))]) is None
True
>>> words = Layout.of(("a", 1))
>>> words.shape, words.encode([("b", 1), ("a", 2)])[0].tolist()
(('s', 'i'), ['b', 'a'])
"""

from __future__ import annotations

import os
import sys
from operator import itemgetter
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

from ...fixed_width import (
    DTYPE_OF_KIND,
    KIND_OF_TYPE,
    TYPE_OF_KIND,
    TYPE_OF_STRING_KIND,
    Shape,
    shape_of,
)
from ..kernel.columns import dictionary_encode, prune_dictionary, unify_dictionaries

__all__ = [
    "COLUMNS_VARIABLE",
    "DISTINCT_STRINGS_LIMIT",
    "STRINGS_CHECKED_FROM",
    "Layout",
    "Shape",
    "code_strings",
    "columns_enabled",
    "prune_strings",
    "strings_pay",
    "unify_strings",
]

COLUMNS_VARIABLE = "TIMELYPY_COLUMNS"
"""The environment variable choosing the path of fixed-width records: ``auto`` (the default:
columns where records allow) or ``off`` (every batch on the object path)."""


def columns_enabled() -> bool:
    """Whether arrangements built now keep fixed-width updates as columns (see
    :data:`COLUMNS_VARIABLE`; read when an arrangement is built, so a test may set it per run).

    >>> import os; os.environ.pop(COLUMNS_VARIABLE, None) and None; columns_enabled()
    True
    """
    mode = os.environ.get(COLUMNS_VARIABLE, "auto").strip().lower() or "auto"
    if mode not in ("auto", "off"):
        raise ValueError(f"{COLUMNS_VARIABLE}={mode!r}: expected 'auto' or 'off'")
    return mode == "auto"


_TYPES = {**TYPE_OF_KIND, **TYPE_OF_STRING_KIND}
"""The type of every scalar kind a layout takes."""
_KIND_OF_SCHEMA_TYPE: Dict[type, str] = {**KIND_OF_TYPE, str: "s", bytes: "y"}
"""The kind of every type a schema may name."""
_BATCH_DTYPES: Dict[str, Any] = {**DTYPE_OF_KIND, "s": np.int32, "y": np.int32}
"""The numpy type of each kind's column in a batch (strings: codes into the dictionary)."""


def _shape_of_types(spec: Any, whole: Any) -> Shape:
    for python_type, kind in _KIND_OF_SCHEMA_TYPE.items():
        if spec is python_type:
            return kind
    if type(spec) is tuple:
        return tuple(_shape_of_types(part, whole) for part in spec)
    raise ValueError(
        f"schema {whole!r}: {spec!r} is not int, float, bool, str, bytes or a tuple of them "
        "(records of other types need no schema: they take the object path)"
    )


def _describe(shape: Shape) -> str:
    if isinstance(shape, str):
        return _TYPES[shape].__name__
    inner = ", ".join(_describe(part) for part in shape)
    return f"({inner},)" if len(shape) == 1 else f"({inner})"


def _kinds(shape: Shape) -> Tuple[str, ...]:
    if isinstance(shape, str):
        return (shape,)
    out: Tuple[str, ...] = ()
    for part in shape:
        out += _kinds(part)
    return out


class Layout:
    """The fixed-width shape of a key or a value, and its conversion to and from columns.

    ``shape`` is the nested shape, ``kinds`` its scalars in order (one column each) and
    ``width`` their number (0 for the empty tuple ``()``, the value of an arrangement by self).
    ``dtypes`` are the columns' types in a batch, ``strings`` the indexes of the string
    columns, and ``dicts`` (None until :meth:`with_dicts`) the dictionary of each string column
    (None for the others). Layouts are equal when their shapes are.
    """

    __slots__ = ("shape", "kinds", "width", "dtypes", "strings", "dicts")

    def __init__(self, shape: Shape, dicts: Optional[Tuple[Optional[np.ndarray], ...]] = None):
        self.shape = shape
        self.kinds = _kinds(shape)
        self.width = len(self.kinds)
        self.dtypes = tuple(_BATCH_DTYPES[k] for k in self.kinds)
        self.strings = tuple(i for i, k in enumerate(self.kinds) if k in TYPE_OF_STRING_KIND)
        self.dicts = dicts

    @classmethod
    def of(cls, value: Any) -> "Optional[Layout]":
        """The layout of ``value``, or None when it is not fixed-width (strings included)."""
        shape = shape_of(value, strings=True)
        return None if shape is None else cls(shape)

    def with_dicts(self, dicts: Sequence[Optional[np.ndarray]]) -> "Layout":
        """This layout with the dictionaries of its string columns (one entry per column)."""
        return Layout(self.shape, tuple(dicts))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Layout) and other.shape == self.shape

    def __hash__(self) -> int:
        return hash(self.shape)

    def __repr__(self) -> str:
        return f"Layout({self.shape!r})"

    def dictionary_bytes(self) -> int:
        """The bytes of the dictionaries: their arrays and their strings."""
        total = 0
        for d in self.dicts or ():
            if d is not None:
                total += d.nbytes + sum(map(sys.getsizeof, d.tolist()))
        return total

    @classmethod
    def from_types(cls, spec: Any) -> "Layout":
        """The layout a schema declares: ``int``, ``float``, ``bool``, ``str`` or ``bytes``,
        or a tuple of schemas (``(int, (int, float))``); ValueError for anything else.

        >>> Layout.from_types((int, (float, bool))).shape, Layout.from_types((str, bytes)).shape
        (('i', ('f', 'b')), ('s', 'y'))
        """
        return cls(_shape_of_types(spec, spec))

    def describe(self) -> str:
        """The layout as the schema that declares it, e.g. ``(int, (int, float))``."""
        return _describe(self.shape)

    def first_misfit(self, values: Sequence[Any]) -> Optional[int]:
        """The index of the first value that does not fit the layout, or None."""
        for index, value in enumerate(values):
            if self.flatten(value) is None:
                return index
        return None

    def flatten(self, value: Any) -> Optional[List[Any]]:
        """The scalars of ``value`` in column order, or None if it does not fit the layout."""
        out: List[Any] = []
        return out if _flatten(self.shape, value, out) else None

    def encode(self, values: Sequence[Any]) -> Optional[List[np.ndarray]]:
        """One column per scalar of the layout, or None if a value does not fit it."""
        return _encode(self.shape, values, len(values))

    def decode(self, columns: Sequence[np.ndarray], count: int) -> List[Any]:
        """The ``count`` values the columns hold (``len(columns) == width``), as Python
        objects (``count`` is needed for the empty tuple, which has no column). String columns
        are either the strings (as :meth:`encode` gives them) or codes into :attr:`dicts`."""
        columns = list(columns)
        if self.strings:
            for i in self.strings:
                if columns[i].dtype != object:
                    columns[i] = _dictionary(self, i)[columns[i]]
        values, _ = _decode(self.shape, columns, count)
        return values


def _flatten(shape: Shape, value: Any, out: List[Any]) -> bool:
    if isinstance(shape, str):
        if type(value) is not _TYPES[shape]:
            return False
        if shape == "f" and (value != value or (value == 0.0 and str(value)[0] == "-")):
            return False  # NaN and -0.0 are never in columns
        out.append(value)
        return True
    if type(value) is not tuple or len(value) != len(shape):
        return False
    return all(_flatten(part, item, out) for part, item in zip(shape, value))


def _encode(shape: Shape, values: Sequence[Any], n: int) -> Optional[List[np.ndarray]]:
    if isinstance(shape, str):
        if set(map(type, values)) - {_TYPES[shape]}:
            return None
        if shape in TYPE_OF_STRING_KIND:
            return [np.fromiter(values, object, n)]
        try:
            column: np.ndarray = np.fromiter(values, DTYPE_OF_KIND[shape], n)
        except OverflowError:
            return None
        if shape == "f" and n and (np.isnan(column).any() or np.signbit(column[column == 0]).any()):
            return None
        return [column]
    if set(map(type, values)) - {tuple}:
        return None
    width = len(shape)
    if set(map(len, values)) - {width}:
        return None
    if width == 0:
        return []
    out: List[np.ndarray] = []
    for index, part in enumerate(shape):
        encoded = _encode(part, list(map(itemgetter(index), values)), n)
        if encoded is None:
            return None
        out += encoded
    return out


def _decode(
    shape: Shape, columns: List[np.ndarray], count: int
) -> Tuple[List[Any], List[np.ndarray]]:
    """The ``count`` values of ``shape`` from the first columns, and the columns left (an
    empty tuple, at any depth, has no column: ``count`` says how many there are)."""
    if isinstance(shape, str):
        return columns[0].tolist(), columns[1:]
    parts = []
    for part in shape:
        values, columns = _decode(part, columns, count)
        parts.append(values)
    if not parts:
        return [()] * count, columns
    return list(zip(*parts)), columns


STRINGS_CHECKED_FROM = 1024
"""Updates from which a string column is checked for :data:`DISTINCT_STRINGS_LIMIT` (smaller
batches are coded whatever their strings: a spine merging them into a column batch must not
decode it instead)."""

DISTINCT_STRINGS_LIMIT = 0.5
"""The most distinct strings per update a string column may hold to be coded: beyond it (ids,
every string new) the dictionary saves little besides memory, and coding, the dictionaries'
unions in merges and the join's translations cost about what the object path does (figures in
the performance notes), so such updates stay on the object path."""


def strings_pay(layout: Layout, cols: Sequence[np.ndarray]) -> bool:
    """Whether coding the string columns of ``layout`` among ``cols`` (given as strings) pays:
    none of :data:`STRINGS_CHECKED_FROM` rows or more holds more than
    :data:`DISTINCT_STRINGS_LIMIT` distinct strings per row.

    >>> words = Layout.of("a")
    >>> strings_pay(words, words.encode(["a", "b"] * 600)), strings_pay(words, words.encode(
    ...     [str(i) for i in range(1200)]))
    (True, False)
    """
    for i in layout.strings:
        n = len(cols[i])
        if n >= STRINGS_CHECKED_FROM and len(set(cols[i].tolist())) > DISTINCT_STRINGS_LIMIT * n:
            return False
    return True


def _dictionary(layout: Layout, i: int) -> np.ndarray:
    """The dictionary of the string column ``i`` of a batch's ``layout``."""
    dictionary = layout.dicts[i] if layout.dicts is not None else None
    assert dictionary is not None, f"{layout!r}: column {i} holds no codes"
    return dictionary


def code_strings(layout: Layout, cols: List[np.ndarray]) -> Tuple[Layout, List[np.ndarray]]:
    """``layout`` with a dictionary for each string column given as strings, and the columns
    with those strings coded (the layout and columns themselves when there are none).

    >>> layout, cols = code_strings(Layout(("s", "i")), Layout(("s", "i")).encode([("b", 1)]))
    >>> cols[0].tolist(), layout.dicts[0].tolist(), layout.decode(cols, 1)
    ([0], ['b'], [('b', 1)])
    """
    if not any(cols[i].dtype == object for i in layout.strings):
        return layout, cols
    cols = list(cols)
    dicts: List[Optional[np.ndarray]] = list(layout.dicts or [None] * layout.width)
    for i in layout.strings:
        if cols[i].dtype == object:
            cols[i], dicts[i] = dictionary_encode(cols[i])
    return layout.with_dicts(dicts), cols


def prune_strings(
    key_layout: Layout, val_layout: Layout, cols: List[np.ndarray]
) -> Tuple[Layout, Layout, List[np.ndarray]]:
    """The layouts and coded columns (the key's, then the value's) without the strings no row
    uses (after a consolidation)."""
    out = list(cols)
    layouts = []
    offset = 0
    for layout in (key_layout, val_layout):
        if layout.strings:
            dicts = list(layout.dicts or ())
            for i in layout.strings:
                at = offset + i
                out[at], dicts[i] = prune_dictionary(out[at], _dictionary(layout, i))
            if any(d is not o for d, o in zip(dicts, layout.dicts or ())):
                layout = layout.with_dicts(dicts)
        layouts.append(layout)
        offset += layout.width
    return layouts[0], layouts[1], out


def unify_strings(layouts: Sequence[Layout], cols: Sequence[List[np.ndarray]], at: int) -> Layout:
    """The layout (of several batches, one shape) whose dictionaries are the unions of
    theirs; each batch's code columns (``cols[b][at + i]`` for the layout's column ``i``) are
    replaced, in place, by codes into the unions."""
    layout = layouts[0]
    if not layout.strings:
        return layout
    dicts: List[Optional[np.ndarray]] = [None] * layout.width
    for i in layout.strings:
        union, maps = unify_dictionaries([_dictionary(each, i) for each in layouts])
        dicts[i] = union
        for columns, mapping in zip(cols, maps):
            if mapping is not None:
                columns[at + i] = mapping[columns[at + i]]
    return layout.with_dicts(dicts)
