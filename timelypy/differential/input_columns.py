"""Updates given as columns to an input session: numpy arrays or Arrow arrays, checked.

:func:`column_updates` turns the keys, values and diffs a program hands to
:meth:`~.input.InputSession.update_columns` into a :class:`~.column_message.ColumnMessage`:
each part (the key, the value) is one array (a scalar) or a list or tuple of parts (a tuple,
nested), of ints (``int64``; unsigned ints up to 2^63 - 1), floats (``float64``), bools or
strings, with no nulls; the layout is read from the arrays' types, and checked against the
input's schema where one is declared. Every error names the input and the offending column or
value.

Strings: a numpy ``U`` array (``str``) or ``S`` array (``bytes``), an object array holding
exactly ``str`` or exactly ``bytes``, or an Arrow ``string``, ``large_string``, ``binary`` or
``large_binary`` column, plain or dictionary-encoded. Each becomes ``int32`` codes into a
sorted dictionary of the column's distinct strings (the message's, see
:mod:`.column_message`); an Arrow column is coded by Arrow (its own dictionary where it has
one), and only the distinct strings are sorted in Python.

>>> import numpy as np
>>> message = column_updates("pairs", np.array([1, 2]), (np.array([3, 4]), np.array([.5, 1.])),
...                          None, 7, None)
>>> message.records()
[((1, (3, 0.5)), 7, 1), ((2, (4, 1.0)), 7, 1)]
"""

from __future__ import annotations

from typing import Any, List, Optional, Tuple

import numpy as np

from ..errors import DiffTypeError, SchemaError
from ..fixed_width import TYPE_OF_STRING_KIND
from .column_message import ColumnMessage
from .kernel.columns import ARROW_CODING_FROM, dictionary_encode, sorted_codes
from .trace.layout import Layout, Shape

__all__ = ["arrow_parts", "arrow_strings", "column_updates"]

_INT64_MAX = (1 << 63) - 1


class Unfit(Exception):
    """Columns the object path takes instead (a NaN or ``-0.0`` where no schema was declared):
    ``records`` are their tuples."""

    def __init__(self, records: List[Any]) -> None:
        super().__init__("columns that stay on the object path")
        self.records = records


def column_updates(
    input: str,
    keys: Any,
    values: Any,
    diffs: Any,
    time: int,
    schema: Optional[Layout],
) -> ColumnMessage:
    """The updates ``((key, value), time, diff)`` of the columns as one message; raises
    :class:`~timelypy.errors.SchemaError` (a column that does not fit, or a schema it does
    not match), :class:`ValueError` (columns of different lengths),
    :class:`~timelypy.errors.DiffTypeError` (diffs that are not ints), or :class:`Unfit` (NaN
    or ``-0.0`` without a schema: the caller sends the tuples). Zero diffs are dropped."""
    key_shape, key_cols, key_dicts = _part(input, "key", keys)
    val_shape, val_cols, val_dicts = _part(input, "value", values)
    n = len(key_cols[0]) if key_cols else len(val_cols[0]) if val_cols else 0
    for i, column in enumerate(key_cols + val_cols):
        if len(column) != n:
            raise ValueError(
                f"input session {input!r}: column {i} holds {len(column)} values, the first "
                f"{n} (every column of keys and values must be of one length)"
            )
    if not key_cols and not val_cols:
        raise ValueError(f"input session {input!r}: no columns (give at least one array)")
    key_layout, val_layout = _layout(key_shape, key_dicts), _layout(val_shape, val_dicts)
    if schema is not None:
        _match_schema(input, schema, key_layout, val_layout)
    diff_col = _diffs(input, diffs, n)
    odd = np.union1d(_odd_floats(key_layout, key_cols), _odd_floats(val_layout, val_cols))
    message = ColumnMessage(
        key_layout, val_layout, key_cols, val_cols, np.full(n, time, dtype=np.int64), diff_col
    )
    if len(odd):
        row = int(odd[0])
        if schema is not None:
            key, value = message.take(np.array([row])).records()[0][0]
            raise SchemaError(
                f"input session {input!r}: record {(key, value)!r} (row {row}) does not fit the "
                f"declared schema {schema.describe()} (NaN and -0.0 are not taken as columns; "
                f"nothing of the {n} updates was sent)"
            )
        raise Unfit(message.records())
    nonzero = diff_col != 0
    return message if nonzero.all() else message.take(nonzero)


Dicts = List[Optional[np.ndarray]]
"""Per column, the dictionary of a string column's codes (None for the other columns)."""


def _part(input: str, what: str, spec: Any) -> Tuple[Shape, List[np.ndarray], Dicts]:
    """The shape, columns and dictionaries of a key or a value given as an array or a
    list/tuple of them."""
    if isinstance(spec, (list, tuple)):
        shapes: List[Shape] = []
        columns: List[np.ndarray] = []
        dicts: Dicts = []
        for i, item in enumerate(spec):
            shape, cols, ds = _part(input, f"{what}[{i}]", item)
            shapes.append(shape)
            columns += cols
            dicts += ds
        return tuple(shapes), columns, dicts
    coded = arrow_strings(input, what, spec)
    if coded is not None:
        return coded[0], [coded[1]], [coded[2]]
    column = _numpy(input, what, spec)
    kind = column.dtype.kind
    if kind in "USO":
        shape, codes, dictionary = _numpy_strings(input, what, column)
        return shape, [codes], [dictionary]
    if kind == "b":
        return "b", [column], [None]
    if kind == "f":
        return "f", [column.astype(np.float64, copy=False)], [None]
    if kind == "u":
        if len(column) and column.max() > _INT64_MAX:
            bad = column[column > _INT64_MAX][0]
            raise SchemaError(
                f"input session {input!r}: {what} column holds {int(bad)}, beyond int64 (a "
                f"fixed-width int); send such records with update()"
            )
        return "i", [column.astype(np.int64)], [None]
    if kind == "i":
        return "i", [column.astype(np.int64, copy=False)], [None]
    raise SchemaError(
        f"input session {input!r}: {what} column of type {column.dtype} is not fixed-width "
        f"(ints, floats, bools, str or bytes); send such records with update()"
    )


def _numpy_strings(input: str, what: str, column: np.ndarray) -> Tuple[str, np.ndarray, Any]:
    """The kind, codes and sorted dictionary of a numpy column of strings: ``U`` (``str``),
    ``S`` (``bytes``) or ``object`` holding exactly ``str`` or exactly ``bytes``. A bulk load
    imports pyarrow where it is installed, so that Arrow hashes the strings (see
    :func:`~.kernel.columns.dictionary_encode`)."""
    if len(column) >= ARROW_CODING_FROM:
        try:
            import pyarrow  # noqa: F401
        except ImportError:  # pragma: no cover - pyarrow comes with the spark and parquet extras
            pass
    if column.dtype.kind != "O":
        kind = "s" if column.dtype.kind == "U" else "y"
        column = column.astype(object)  # (numpy keeps a NUL inside a string; Arrow would not)
        codes, dictionary = dictionary_encode(column)
        return kind, codes, dictionary
    values = column.tolist()
    types = set(map(type, values))
    kind = "y" if types == {bytes} else "s"
    if types - {TYPE_OF_STRING_KIND[kind]}:
        wanted = TYPE_OF_STRING_KIND[kind]
        row = next(i for i, v in enumerate(values) if type(v) is not wanted)
        raise SchemaError(
            f"input session {input!r}: {what} column (an object array) holds "
            f"{values[row]!r} of type {type(values[row]).__name__} (row {row}); a string "
            f"column holds exactly str or exactly bytes (no subclass, no None)"
        )
    codes, dictionary = dictionary_encode(column)
    return kind, codes, dictionary


def arrow_strings(input: str, what: str, spec: Any) -> Optional[Tuple[str, np.ndarray, Any]]:
    """The kind (``"s"`` or ``"y"``), ``int32`` codes and sorted dictionary of an Arrow
    string or binary column (an array or a chunked array, plain or dictionary-encoded), or
    None for any other column. The codes are Arrow's own dictionary encoding (in C), its
    dictionary sorted once; nulls raise :class:`~timelypy.errors.SchemaError`.

    Example: the codes of ``pa.array(["b", "a", "b"])`` are ``[1, 0, 1]``, its dictionary
    ``["a", "b"]``."""
    arrow_type = getattr(spec, "type", None)
    if arrow_type is None or not hasattr(spec, "null_count") or isinstance(spec, np.ndarray):
        return None
    import pyarrow as pa
    import pyarrow.compute as pc

    types = pa.types
    value_type = arrow_type.value_type if types.is_dictionary(arrow_type) else arrow_type
    if types.is_string(value_type) or types.is_large_string(value_type):
        kind = "s"
    elif types.is_binary(value_type) or types.is_large_binary(value_type):
        kind = "y"
    else:
        return None
    _no_nulls(input, what, spec)
    if isinstance(spec, pa.ChunkedArray):
        spec = spec.unify_dictionaries() if types.is_dictionary(arrow_type) else spec
        chunks = spec.chunks
        if not types.is_dictionary(arrow_type):
            spec = spec.combine_chunks() if len(chunks) != 1 else chunks[0]
        elif len(chunks) == 1:
            spec = chunks[0]
        elif not chunks:
            spec = pa.array([], value_type).dictionary_encode()
        else:
            indices = pa.concat_arrays([c.indices for c in chunks])
            spec = pa.DictionaryArray.from_arrays(indices, chunks[0].dictionary)
    encoded = spec if types.is_dictionary(arrow_type) else pc.dictionary_encode(spec)
    indices = encoded.indices.to_numpy(zero_copy_only=False)
    words = encoded.dictionary.to_pylist()
    if None in words and len(indices) and pc.any(pc.is_null(encoded.dictionary)).as_py():
        _no_nulls(input, what, encoded.dictionary.take(pa.array(indices)))
    return (kind, *sorted_codes(words, indices))


def _objects(values: List[Any]) -> np.ndarray:
    return np.fromiter(values, object, len(values))


def _no_nulls(input: str, what: str, spec: Any) -> None:
    if spec.null_count:
        nulls = spec.is_null()
        row = next(i for i, v in enumerate(nulls.to_pylist()) if v)
        raise SchemaError(
            f"input session {input!r}: {what} column holds a null (row {row}); columns "
            f"take no nulls"
        )


def _numpy(input: str, what: str, spec: Any) -> np.ndarray:
    """``spec`` (a numpy array, an Arrow array or chunked array) as a 1-d numpy array."""
    if isinstance(spec, np.ndarray):
        if spec.ndim != 1:
            raise SchemaError(
                f"input session {input!r}: {what} array of {spec.ndim} dimensions (give one "
                f"1-d array per scalar: a list of arrays for a tuple)"
            )
        return spec
    if hasattr(spec, "null_count") and hasattr(spec, "to_numpy"):  # pyarrow (chunked) array
        _no_nulls(input, what, spec)
        return np.asarray(spec.to_numpy(zero_copy_only=False))
    raise SchemaError(
        f"input session {input!r}: {what} given as {type(spec).__name__}, not a numpy or "
        f"Arrow array (or a list or tuple of them)"
    )


def _layout(shape: Shape, dicts: Dicts) -> Layout:
    layout = Layout(shape)
    return layout.with_dicts(dicts) if layout.strings else layout


def _match_schema(input: str, schema: Layout, key: Layout, value: Layout) -> None:
    shape = schema.shape
    if not (isinstance(shape, tuple) and len(shape) == 2 and (key.shape, value.shape) == shape):
        given = f"({key.describe()}, {value.describe()})"
        raise SchemaError(
            f"input session {input!r}: columns of the layout {given} do not match the declared "
            f"schema {schema.describe()} (records are (key, value) pairs)"
        )


def _diffs(input: str, diffs: Any, n: int) -> np.ndarray:
    if diffs is None:
        return np.ones(n, dtype=np.int64)
    if type(diffs) is int:
        return np.full(n, diffs, dtype=np.int64)
    column = _numpy(input, "diff", diffs)
    if column.dtype.kind not in "iu":
        raise DiffTypeError(
            f"input session {input!r}: diffs of type {column.dtype}; diffs must be integers"
        )
    if len(column) != n:
        raise ValueError(f"input session {input!r}: {len(column)} diffs for {n} updates")
    if column.dtype.kind == "u" and len(column) and column.max() > _INT64_MAX:
        raise DiffTypeError(f"input session {input!r}: a diff beyond int64: {int(column.max())}")
    return column.astype(np.int64, copy=False)


def _odd_floats(layout: Layout, columns: List[np.ndarray]) -> Any:
    """The rows holding a NaN or a ``-0.0`` in a float column (sorted indexes)."""
    rows: Any = np.empty(0, dtype=np.intp)
    for kind, column in zip(layout.kinds, columns):
        if kind == "f":
            odd = np.isnan(column) | ((column == 0) & np.signbit(column))
            if odd.any():
                rows = np.union1d(rows, np.flatnonzero(odd))
    return rows


def arrow_parts(table: Any, key: List[str], value: List[str]) -> Tuple[Any, Any]:
    """The key and value parts of an Arrow table or record batch: one named column is a
    scalar, several a tuple.

    Example: ``arrow_parts(table, ["k"], ["v", "w"])`` is ``(table["k"], [table["v"],
    table["w"]])``."""

    def part(names: List[str]) -> Any:
        columns = [table.column(name) for name in names]
        return columns[0] if len(columns) == 1 else columns

    return part(key), part(value)
