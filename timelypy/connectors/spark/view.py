"""A session capture's changes accumulated on the driver, and handed back to Spark as DataFrames.

:class:`CollectionView` reads a captured collection of a driver session (the name of a
``collection.capture()`` handle), keeps its changes consolidated per record and time, answers
``contents(at)`` for any closed time and turns contents or changes into Spark DataFrames with a
declared schema (through pandas and Arrow), ready for Spark SQL.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Dict, List, Optional, Sequence, Tuple, Union

from ...errors import short_repr
from ...order import less_equal
from ...workers.sessions.session import DataflowSession
from .columns import INTEGER_TYPES, Columns, SparkOutputError, require_pyspark

if TYPE_CHECKING:  # pragma: no cover - types only
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType

__all__ = ["CollectionView"]

Schema = Union[str, "StructType"]

_PYTHON_TYPES: Dict[str, Tuple[type, ...]] = {
    **{t: (int,) for t in INTEGER_TYPES},
    "float": (float, int),
    "double": (float, int),
    "string": (str,),
    "boolean": (bool,),
    "binary": (bytes, bytearray),
}


class CollectionView:
    """The changes of the session's capture ``capture``, accumulated on the driver.

    :meth:`refresh` waits (at most ``timeout`` seconds, default the session's) until the
    capture has passed the session's time, then reads its new changes: every time before the
    session's time is then *closed* (:attr:`closed`: complete, it will not change).
    :meth:`contents` is the collection at a closed time, :meth:`changes` the consolidated
    changes; :meth:`to_spark` and :meth:`changes_to_spark` return them as Spark DataFrames.
    The view keeps every change (consolidated per record and time); :meth:`compact` folds the
    closed history into one snapshot when only the latest contents matter. On a restored
    session the view starts from what the capture held at the checkpoint's time
    (``session.restored(capture)``), closed before it.
    """

    def __init__(
        self, session: DataflowSession, capture: str, timeout: Optional[float] = None
    ) -> None:
        self.session = session
        self.capture = capture
        self.timeout = timeout
        self.closed: Any = None
        """Every time before this one is complete in the view (None: nothing read yet)."""
        self._changes: Dict[Tuple[Any, Any], int] = {}
        self._base: Dict[Any, int] = {}
        self._compacted: Optional[int] = None
        if session.restored_at is not None:  # start from the capture's restored state
            self._add(session.restored(capture))
            self.closed = session.restored_at

    def refresh(self, timeout: Optional[float] = None) -> int:
        """Wait until the capture passed the session's time, then read its new changes;
        returns how many were read."""
        target = self.session.time
        self.session.wait(self.capture, target, timeout=timeout or self.timeout)
        new = self.session.changes(self.capture)
        self._add(new)
        self.closed = target
        return len(new)

    def _add(self, changes: List[Tuple[Any, Any, int]]) -> None:
        for data, t, diff in changes:
            key = (data, t)
            total = self._changes.get(key, 0) + diff
            if total:
                self._changes[key] = total
            else:
                self._changes.pop(key, None)

    def _included(self, at: Any) -> Any:
        """A test for the times counted in the contents at ``at`` (None: the latest closed)."""
        if self.closed is None:
            return lambda t: False
        if at is None:
            return lambda t: not less_equal(self.closed, t)
        if less_equal(self.closed, at):
            raise SparkOutputError(
                f"view of {self.capture!r}: time {at!r} is not closed yet "
                f"(the view is complete before {self.closed!r}; refresh() "
                f"after advancing the session)"
            )
        if self._compacted is not None and not less_equal(self._compacted - 1, at):
            raise SparkOutputError(
                f"view of {self.capture!r}: time {at!r} was compacted away "
                f"(the view keeps times from {self._compacted - 1} on)"
            )
        return lambda t: less_equal(t, at)

    def contents(self, at: Any = None) -> Dict[Any, int]:
        """The collection at closed time ``at`` (default: the latest closed time) as
        ``{record: count}`` (non-zero counts)."""
        included = self._included(at)
        out = dict(self._base)
        for (data, t), diff in self._changes.items():
            if included(t):
                total = out.get(data, 0) + diff
                if total:
                    out[data] = total
                else:
                    del out[data]
        return out

    def changes(self) -> List[Tuple[Any, Any, int]]:
        """The consolidated changes read so far, ``(record, time, diff)``, sorted by time
        (after :meth:`compact`, the snapshot appears at the last compacted time)."""
        base_time = (self._compacted or 0) - 1  # (no base before a compaction)
        out = [(d, base_time, r) for d, r in self._base.items()]
        out += [(d, t, r) for (d, t), r in self._changes.items()]
        try:
            out.sort(key=lambda u: (u[1], u[0]))
        except TypeError:
            out.sort(key=lambda u: (repr(u[1]), repr(u[0])))
        return out

    def compact(self) -> None:
        """Fold every change before the closed time into one snapshot (integer times only):
        later :meth:`contents` calls cannot ask for earlier times."""
        if self.closed is None:
            return
        if not isinstance(self.closed, int):
            raise SparkOutputError(
                f"view of {self.capture!r}: compact() needs integer times, "
                f"the view is closed at {self.closed!r}"
            )
        self._base = self.contents()
        self._changes = {k: r for k, r in self._changes.items() if k[1] >= self.closed}
        self._compacted = self.closed

    def to_spark(
        self,
        spark: "SparkSession",
        schema: Schema,
        columns: Optional[Columns] = None,
        *,
        at: Any = None,
        count: Optional[str] = None,
    ) -> "DataFrame":
        """The contents at ``at`` (default: the latest closed time) as a DataFrame of
        ``schema`` (a ``StructType`` or a DDL string such as ``"src long, dst long"``).

        Records are flattened into columns by ``columns`` (default: every schema column but
        ``count``, in order, as ``Columns([...])``). ``count=None``: a record with count n is n
        identical rows (a multiset: compare with ``exceptAll``; a negative count is an error);
        ``count="n"``: one row per record and its count in column ``n``.
        """
        struct = _struct(spark, schema)
        names = [f.name for f in struct.fields]
        columns = columns or Columns([n for n in names if n != count])
        rows: List[Tuple[Any, ...]] = []
        for record, n in self.contents(at).items():
            values = columns.flatten(record)
            if count is not None:
                rows.append(values + (n,))
            elif n < 0:
                raise SparkOutputError(
                    f"view of {self.capture!r}: record {short_repr(record)} has "
                    f"count {n}: use count='...' for negative counts"
                )
            else:
                rows.extend([values] * n)
        return _frame(spark, struct, list(columns.names) + ([count] if count else []), rows)

    def changes_to_spark(
        self,
        spark: "SparkSession",
        schema: Schema,
        columns: Optional[Columns] = None,
        *,
        time: str = "time",
        diff: str = "diff",
    ) -> "DataFrame":
        """The consolidated changes as a DataFrame of ``schema``: the record's columns (by
        ``columns``; default every schema column but ``time`` and ``diff``), the time and the
        diff."""
        struct = _struct(spark, schema)
        names = [f.name for f in struct.fields]
        columns = columns or Columns([n for n in names if n not in (time, diff)])
        rows = [columns.flatten(d) + (t, r) for d, t, r in self.changes()]
        return _frame(spark, struct, list(columns.names) + [time, diff], rows)


def _struct(spark: "SparkSession", schema: Schema) -> "StructType":
    """``schema`` as a ``StructType`` (a DDL string is parsed by Spark)."""
    require_pyspark()
    from pyspark.sql.types import StructType

    if isinstance(schema, StructType):
        return schema
    if not isinstance(schema, str):
        raise TypeError(f"schema must be a StructType or a DDL string, got {type(schema).__name__}")
    return spark.createDataFrame([], schema).schema


def _frame(
    spark: "SparkSession", struct: "StructType", order: Sequence[str], rows: List[Tuple[Any, ...]]
) -> "DataFrame":
    """A DataFrame of ``struct`` from ``rows`` whose values are in ``order``: every value is
    checked against its field's type first, then the rows go through pandas (and Arrow)."""
    import pandas as pd  # type: ignore[import-untyped]  # pandas ships no type information

    fields = {f.name: f for f in struct.fields}
    missing = [n for n in order if n not in fields] + [n for n in fields if n not in order]
    if missing or len(order) != len(fields):
        raise SparkOutputError(
            f"the schema's columns {list(fields)} do not match the view's "
            f"columns {list(order)} (unmatched: {missing})"
        )
    positions = {name: i for i, name in enumerate(order)}
    for name, field in fields.items():
        _check_values(field, positions[name], rows)
    if not rows:
        return spark.createDataFrame([], struct)
    data = {name: pd.Series([r[positions[name]] for r in rows], dtype=object) for name in fields}
    return spark.createDataFrame(pd.DataFrame(data), schema=struct)


def _check_values(field: Any, i: int, rows: List[Tuple[Any, ...]]) -> None:
    """:class:`SparkOutputError` naming the first value of column ``i`` that ``field``'s type
    cannot hold (checked for the simple types)."""
    kind = field.dataType.simpleString()
    allowed = _PYTHON_TYPES.get(kind)
    if allowed is None:
        return
    for row in rows:
        v = row[i]
        if v is None:
            if not field.nullable:
                raise SparkOutputError(
                    f"column {field.name!r} is not nullable but row {short_repr(row)} "
                    "has null there"
                )
            continue
        bad = not isinstance(v, allowed) or (kind != "boolean" and isinstance(v, bool))
        if bad:
            raise SparkOutputError(
                f"column {field.name!r} has type {kind}, but row {short_repr(row)} "
                f"has {short_repr(v)} of type {type(v).__name__} there"
            )
