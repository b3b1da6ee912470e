"""Column messages: updates ``((key, val), time, diff)`` travelling along a stream as columns.

An input that takes columns (:meth:`~.input.InputSession.update_columns`) sends its updates
as one :class:`ColumnMessage` instead of a list of tuples: the key's and the value's numpy
columns (one per scalar of their :class:`~.trace.layout.Layout`), a column of times and one of
diffs. Its length is the number of updates, which is what progress counts. The exchange into
an arrangement routes it by hashing its key columns (:meth:`ColumnMessage.route`, the owners
record by record routing gives), a part crosses processes pickled as its numpy buffers, and
the arrangement keeps its columns as they are. An operator that reads lists receives the
tuples, decoded once at its input port (:class:`~timelypy.dataflow.channels.ColumnarData`).

Strings (``str`` or ``bytes`` scalars of the layouts) travel as ``int32`` codes into a
dictionary of the message's own per string column: the sorted distinct strings, held by the
message's layouts (:attr:`~.trace.layout.Layout.dicts`). Routing hashes each distinct string
once (the owners are those of the decoded records), and a part crossing processes carries its
codes and the strings it uses, never a string per update.

>>> import numpy as np
>>> from .trace.layout import Layout
>>> message = ColumnMessage(
...     Layout("i"), Layout("f"), [np.array([1, 2])], [np.array([0.5, 1.5])],
...     np.array([0, 0]), np.array([1, -1]))
>>> len(message), message.records()
(2, [((1, 0.5), 0, 1), ((2, 1.5), 0, -1)])
"""

from __future__ import annotations

from typing import Any, Callable, Iterator, List, Optional, Sequence, Tuple

import numpy as np

from ..dataflow.channels import ColumnarData
from ..fixed_width import DTYPE_OF_KIND, TYPE_OF_STRING_KIND
from ..hashing import shape_hashes
from .kernel.columns import prune_dictionary
from .trace.column_batch import encode_updates
from .trace.layout import Layout, code_strings

__all__ = [
    "ColumnMessage",
    "MessageEncoder",
    "code_message_strings",
    "key_of_update",
    "record_of_update",
]

_CODES = np.int32
"""The dtype of a string column's codes."""

Update = Tuple[Tuple[Any, Any], Any, int]


def key_of_update(update: Update) -> Any:
    """The key of an update ``((key, val), time, diff)``: the exchange function of an
    arrangement's input, which a :class:`ColumnMessage` computes column-wise.

    >>> key_of_update((("k", 1), 0, 1))
    'k'
    """
    return update[0][0]


def record_of_update(update: Update) -> Any:
    """The record of an update ``(record, time, diff)``: the exchange function of count,
    distinct and threshold, which a :class:`ColumnMessage` computes column-wise (its record
    is the pair ``(key, val)``).

    >>> record_of_update((("k", 1), 0, 1))
    ('k', 1)
    """
    return update[0]


class ColumnMessage(ColumnarData):
    """Updates ``((key, val), time, diff)`` as columns: ``key_cols`` and ``val_cols`` (numpy
    arrays, one per scalar of ``key_layout`` and ``val_layout``, ``int64``, ``float64`` or
    ``bool``; ``int32`` codes into the layout's dictionary for a string), ``times`` and
    ``diffs`` (``int64``), all of one length. The columns are not
    copied and must not be changed once the message is sent (every consumer shares them).
    :meth:`records` decodes the tuples once and keeps them.

    Example: ``ColumnMessage(Layout("i"), Layout("i"), [keys], [vals], times, diffs)`` of
    numpy arrays ``keys``, ``vals``, ``times`` and ``diffs`` of one length.
    """

    __slots__ = ("key_layout", "val_layout", "key_cols", "val_cols", "times", "diffs", "_records")

    def __init__(
        self,
        key_layout: Layout,
        val_layout: Layout,
        key_cols: Sequence[np.ndarray],
        val_cols: Sequence[np.ndarray],
        times: np.ndarray,
        diffs: np.ndarray,
    ) -> None:
        self.key_layout = key_layout
        self.val_layout = val_layout
        self.key_cols = list(key_cols)
        self.val_cols = list(val_cols)
        self.times = times
        self.diffs = diffs
        self._records: Optional[List[Update]] = None

    def __len__(self) -> int:
        return len(self.times)

    def __iter__(self) -> Iterator[Update]:
        return iter(self.records())

    def __repr__(self) -> str:
        return (
            f"ColumnMessage({len(self)} updates, key {self.key_layout.describe()}, "
            f"value {self.val_layout.describe()})"
        )

    def __reduce__(self) -> Any:
        # the columns alone as their raw bytes (ints narrowed, a constant column as its one
        # value), never the decoded tuples
        # (strings: their codes, and the strings of each dictionary that the codes use)
        n = len(self.times)
        key_cols, key_dicts = _packed_strings(self.key_layout, self.key_cols)
        val_cols, val_dicts = _packed_strings(self.val_layout, self.val_cols)
        return (
            _rebuild,
            (
                self.key_layout.shape,
                self.val_layout.shape,
                n,
                [_narrow(c) for c in key_cols],
                [_narrow(c) for c in val_cols],
                _narrow(self.times),
                _narrow(self.diffs),
                key_dicts,
                val_dicts,
            ),
        )

    def records(self) -> List[Update]:
        """The updates as ``((key, val), time, diff)`` tuples (decoded once, then kept).

        Example: ``message.records()[0]`` is ``((1, 0.5), 0, 1)`` for the module's example."""
        decoded = self._records
        if decoded is None:
            n = len(self.times)
            keys = self.key_layout.decode(self.key_cols, n)
            vals = self.val_layout.decode(self.val_cols, n)
            decoded = self._records = list(
                zip(zip(keys, vals), self.times.tolist(), self.diffs.tolist())
            )
        return decoded

    def take(self, chosen: np.ndarray) -> "ColumnMessage":
        """The updates ``chosen`` selects (a boolean mask or indexes), as a message.

        Example: ``message.take(message.diffs > 0)``: the insertions."""
        return ColumnMessage(
            self.key_layout,
            self.val_layout,
            [c[chosen] for c in self.key_cols],
            [c[chosen] for c in self.val_cols],
            self.times[chosen],
            self.diffs[chosen],
        )

    def owners(self, peers: int, records: bool = False) -> np.ndarray:
        """The worker owning each update: ``stable_hash(key) % peers`` (``records``:
        ``stable_hash((key, val)) % peers``), hashed column-wise.

        Example: ``message.owners(2)`` is an array of 0s and 1s, one per update."""
        key, val = self.key_layout, self.val_layout
        if records:
            shape: Any = (key.shape, val.shape)
            cols = self.key_cols + self.val_cols
            dicts = list(key.dicts or [None] * key.width) + list(val.dicts or [None] * val.width)
            hashes = shape_hashes(shape, cols, len(self), dicts)
        else:
            hashes = shape_hashes(key.shape, self.key_cols, len(self), key.dicts)
        return (hashes % np.uint64(peers)).astype(np.intp)

    def route(self, key_fn: Callable[[Any], Any], peers: int) -> Optional[List[Any]]:
        """The parts owned by each worker when ``key_fn`` is :func:`key_of_update` or
        :func:`record_of_update` (None for any other function: it is computed record by
        record).

        Example: ``message.route(key_of_update, 2)`` is two messages, one per worker."""
        if key_fn is not key_of_update and key_fn is not record_of_update:
            return None
        if peers == 1:
            return [self]
        dest = self.owners(peers, records=key_fn is record_of_update)
        return [self.take(dest == d) for d in range(peers)]

    def first_time(self) -> int:
        """The least time of the updates (the message must not be empty).

        Example: ``0`` for the module's example."""
        return int(self.times.min())


_NARROW = (np.dtype(np.int8), np.dtype(np.int16), np.dtype(np.int32))


def _narrow(column: np.ndarray) -> Any:
    """A column as it travels: its one value if constant (a tuple), an int column in the
    narrowest dtype that holds it, else itself."""
    if not len(column):
        return column
    lo, hi = column.min(), column.max()
    if lo == hi:
        return (lo.item(),)
    if column.dtype.kind == "i" and column.dtype.itemsize > 1:
        for dtype in _NARROW:
            info = np.iinfo(dtype)
            if dtype.itemsize < column.dtype.itemsize and info.min <= lo and hi <= info.max:
                return column.astype(dtype)
    return column


def _packed_strings(
    layout: Layout, cols: List[np.ndarray]
) -> Tuple[List[np.ndarray], Optional[List[Optional[List[Any]]]]]:
    """The columns of ``layout`` with each string column's dictionary pruned to the strings
    its codes use (a routed part uses a share of them), and those dictionaries as lists (None
    where the layout has no strings)."""
    if not layout.strings:
        return cols, None
    out = list(cols)
    dicts: List[Optional[List[Any]]] = [None] * layout.width
    for i in layout.strings:
        out[i], dictionary = prune_dictionary(cols[i], _dictionary_of(layout, i))
        dicts[i] = dictionary.tolist()
    return out, dicts


def _dictionary_of(layout: Layout, i: int) -> np.ndarray:
    dictionary = layout.dicts[i] if layout.dicts is not None else None
    if dictionary is None:
        raise ValueError(f"a column message's string column {i} holds no codes")
    return dictionary


def _widen(packed: Any, kind: str, n: int) -> np.ndarray:
    """The column :func:`_narrow` packed, in the dtype of its ``kind`` again."""
    dtype = _CODES if kind in TYPE_OF_STRING_KIND else DTYPE_OF_KIND[kind]
    if type(packed) is tuple:
        return np.full(n, packed[0], dtype=dtype)
    return packed if packed.dtype == dtype else packed.astype(dtype)


def _rebuild(
    key_shape: Any,
    val_shape: Any,
    n: int,
    keys: Any,
    vals: Any,
    times: Any,
    diffs: Any,
    key_dicts: Any = None,
    val_dicts: Any = None,
) -> ColumnMessage:
    """The message :meth:`ColumnMessage.__reduce__` packed."""
    key_layout, val_layout = _unpacked(key_shape, key_dicts), _unpacked(val_shape, val_dicts)
    if len(keys) != key_layout.width or len(vals) != val_layout.width:
        raise ValueError(f"a column message of {len(keys)} + {len(vals)} columns for {n} rows")
    return ColumnMessage(
        key_layout,
        val_layout,
        [_widen(c, k, n) for c, k in zip(keys, key_layout.kinds)],
        [_widen(c, k, n) for c, k in zip(vals, val_layout.kinds)],
        _widen(times, "i", n),
        _widen(diffs, "i", n),
    )


def _unpacked(shape: Any, dicts: Optional[List[Optional[List[Any]]]]) -> Layout:
    """The layout of ``shape`` with the dictionaries :func:`_packed_strings` gave."""
    layout = Layout(shape)
    if dicts is None:
        return layout
    return layout.with_dicts([None if d is None else _strings_array(d) for d in dicts])


def _strings_array(strings: List[Any]) -> np.ndarray:
    return np.fromiter(strings, object, len(strings))


def code_message_strings(message: "ColumnMessage") -> "ColumnMessage":
    """``message`` with its string columns, given as object arrays of the strings, coded into
    dictionaries of their own (the message itself when it has none given so).

    >>> words = Layout("s")
    >>> coded = code_message_strings(ColumnMessage(words, Layout(()),
    ...     words.encode(["b", "a", "b"]), [], np.zeros(3, np.int64), np.ones(3, np.int64)))
    >>> coded.key_cols[0].tolist(), coded.key_layout.dicts[0].tolist(), coded.records()[0]
    ([1, 0, 1], ['a', 'b'], (('b', ()), 0, 1))
    """
    key_layout, key_cols = code_strings(message.key_layout, message.key_cols)
    val_layout, val_cols = code_strings(message.val_layout, message.val_cols)
    if key_cols is message.key_cols and val_cols is message.val_cols:
        return message
    return ColumnMessage(key_layout, val_layout, key_cols, val_cols, message.times, message.diffs)


class MessageEncoder:
    """Turns lists of updates ``((key, val), time, diff)`` into column messages, for an
    exchange that sends them to another process's arrangement: the receiver then neither
    unpickles a tuple per update nor encodes them again. The layouts are detected from the
    first update encoded; a list that does not fit them (or is not fixed-width at ``int``
    times) stays a list, and after three such misses the encoder stops trying.

    >>> message = MessageEncoder()([((k, k * 2), 0, 1) for k in range(3)])
    >>> message.records()
    [((0, 0), 0, 1), ((1, 2), 0, 1), ((2, 4), 0, 1)]
    """

    __slots__ = ("key_layout", "val_layout", "misses", "wanted")

    def __init__(self, wanted: Optional[Callable[[], bool]] = None) -> None:
        self.key_layout: Optional[Layout] = None
        self.val_layout: Optional[Layout] = None
        self.misses = 0
        self.wanted = wanted
        """Whether the receiver still keeps columns (None: always): once it gave them up,
        encoding would be wasted."""

    def __call__(self, updates: List[Any]) -> Optional[ColumnMessage]:
        """The updates as a message, or None (they travel as they are)."""
        if self.misses >= 3 or not updates:
            return None
        if self.wanted is not None and not self.wanted():
            self.misses = 3
            return None
        if self.key_layout is None:
            first = updates[0]
            if type(first) is not tuple or len(first) != 3 or type(first[0]) is not tuple:
                self.misses = 3
                return None
            if len(first[0]) != 2:
                self.misses = 3
                return None
            key_layout, val_layout = Layout.of(first[0][0]), Layout.of(first[0][1])
            if key_layout is None or val_layout is None:
                self.misses = 3
                return None
            self.key_layout, self.val_layout = key_layout, val_layout
        encoded = encode_updates(updates, self.key_layout, self.val_layout)
        if encoded is None:
            self.misses += 1
            return None
        return code_message_strings(ColumnMessage(*encoded))
