"""The owners of a batch of records hashed from their Arrow columns, not record by record.

A session with several workers sends each record to ``stable_hash(record) % workers``
(:func:`timelypy.hashing.stable_hash`). For records made of int, bool and float columns
without nulls, :func:`column_owners` computes the same numbers with numpy a column at a time:
ints are themselves, bools 0 and 1, a float equal to an int that int (others, and ints past 64
bits, one value at a time), strings and bytes (plain or dictionary-encoded) each distinct one
hashed once, and a tuple combines its items as :func:`stable_hash` does. Anything else (nulls,
other types) returns None: the session hashes the records itself.
"""

from __future__ import annotations

from typing import Any, Optional, Sequence

from ...hashing import float_hashes, stable_hash, tuple_hashes

__all__ = ["column_hashes", "column_owners"]


def column_hashes(column: Any) -> Optional[Any]:
    """:func:`~timelypy.hashing.stable_hash` of every value of an Arrow int, bool, float,
    string or binary column without nulls, as a numpy ``uint64`` array; None for any other
    column.

    Example: ``column_hashes(pa.array([1, 2]))`` is ``array([1, 2], dtype=uint64)``."""
    import numpy as np
    import pyarrow.types as pt

    kind = column.type
    if column.null_count:
        return None
    if pt.is_integer(kind) or pt.is_boolean(kind):
        values = column.to_numpy(zero_copy_only=False)
        if values.dtype == np.uint64:  # past int64: Python's ints, as stable_hash takes them
            return np.array([stable_hash(v) for v in values.tolist()], dtype=np.uint64)
        return values.astype(np.int64).view(np.uint64)
    if pt.is_float32(kind) or pt.is_float64(kind):
        return float_hashes(column.to_numpy(zero_copy_only=False).astype(np.float64))
    if pt.is_dictionary(kind):
        kind = kind.value_type
    if any(f(kind) for f in (pt.is_string, pt.is_large_string, pt.is_binary, pt.is_large_binary)):
        # each distinct string hashed once, the rows through their codes
        from ...differential.input_columns import arrow_strings

        coded = arrow_strings("", "", column)
        if coded is None:
            return None
        distinct = coded[2].tolist()
        codes = coded[1]
        return np.fromiter(map(stable_hash, distinct), np.uint64, len(distinct))[codes]
    return None


def column_owners(columns: Sequence[Any], shape: Sequence[int], workers: int) -> Optional[Any]:
    """The worker of each record made of the Arrow ``columns``: ``shape`` gives the record's
    parts in order, each the number of columns it takes (``[2]``: records ``(a, b)``; ``[1]``:
    the value itself; ``[1, 2]``: ``(a, (b, c))``), as a numpy array; None if a column cannot
    be hashed here.

    Example: ``column_owners([pa.array([1, 2])], [1], 2)`` is ``array([1, 0])``."""
    import numpy as np

    hashes = []
    for column in columns:
        one = column_hashes(column)
        if one is None:
            return None
        hashes.append(one)
    if not hashes:
        return None
    parts, start = [], 0
    for width in shape:
        chunk = hashes[start : start + width]
        parts.append(chunk[0] if width == 1 else tuple_hashes(chunk))
        start += width
    record = parts[0] if len(parts) == 1 else tuple_hashes(parts)
    return (record % np.uint64(workers)).astype(np.intp)
