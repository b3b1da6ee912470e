"""The Spark connector's column mapping: columns -> records, checked on the schema and per row.

A :class:`Columns` says which columns of a DataFrame make a record (and which of them are the
key), and for change DataFrames which column carries the diff (an integer) or the operation
(``"insert"`` / ``"delete"``), and optionally the time. :meth:`Columns.reader` checks it against
a schema up front and returns a :class:`RowReader`, which finds bad rows with one Spark query
(:meth:`RowReader.bad_rows`) and turns rows into ``(record, diff, time)`` on the driver
(:meth:`RowReader.convert`). Every problem is a :class:`SparkInputError` naming the input, the
column, the row and the reason.
"""

from __future__ import annotations

from typing import (
    TYPE_CHECKING,
    Any,
    Callable,
    Dict,
    List,
    Mapping,
    Optional,
    Sequence,
    Tuple,
    Union,
)

from ...errors import TimelyError, short_repr

if TYPE_CHECKING:  # pragma: no cover - types only
    from pyspark.sql import DataFrame
    from pyspark.sql.types import StructType

__all__ = [
    "Columns",
    "RowReader",
    "SparkConnectorError",
    "SparkInputError",
    "SparkOutputError",
    "SparkUnavailableError",
    "BadRow",
    "require_pyspark",
    "INSTALL_HINT",
    "RECORD_TYPES",
    "INTEGER_TYPES",
]

INSTALL_HINT = (
    "install the spark extra: pip install 'timelypy[spark]' (pyspark 3.5, pyarrow, "
    "pandas), and a Java 17 runtime (java on PATH or JAVA_HOME)"
)
"""What to install for the Spark connector."""

INTEGER_TYPES = frozenset({"tinyint", "smallint", "int", "bigint"})
"""Spark types (``simpleString``) that hold diffs and times."""
FLOAT_TYPES = frozenset({"float", "double"})
RECORD_TYPES = INTEGER_TYPES | FLOAT_TYPES | {"string", "boolean", "binary"}
"""Spark types a record column may have: their values are keys every worker hashes alike."""
_ALIASES = {
    "long": "bigint",
    "integer": "int",
    "short": "smallint",
    "byte": "tinyint",
    "bool": "boolean",
    "str": "string",
}
PROBLEM = "__timelypy_problem"
"""The column the validation query adds (the index of the check a bad row fails)."""

Names = Union[str, Sequence[str]]


class SparkConnectorError(TimelyError):
    """Base class of the Spark connector's errors."""


class SparkInputError(SparkConnectorError, ValueError):
    """A DataFrame (or a row of it) does not match its :class:`Columns`, or the session refused
    it. ``input``, ``column``, ``row`` (a dict of the row's mapped columns, or None for a
    problem of the schema), ``value`` and ``reason`` say what; ``rows`` lists up to five bad
    rows as ``(row, column, reason)``. Nothing of the refused DataFrame was applied (except
    by :func:`~timelypy.connectors.spark.load`, which says how many rows it applied).
    ``batch_id`` is the refused micro-batch's id when a
    :class:`~timelypy.connectors.spark.ForeachBatchSink` raised it, else None."""

    def __init__(
        self,
        message: str,
        input: Optional[str] = None,
        column: Optional[str] = None,
        row: Optional[Dict[str, Any]] = None,
        value: Any = None,
        reason: str = "",
        rows: Sequence[Tuple[Dict[str, Any], str, str]] = (),
    ) -> None:
        super().__init__(message)
        self.input = input
        self.column = column
        self.row = row
        self.value = value
        self.reason = reason
        self.rows = list(rows)
        self.batch_id: Optional[int] = None


class SparkOutputError(SparkConnectorError, ValueError):
    """A view's records do not fit the declared schema or column mapping (the message names the
    record, the column and the value)."""


class SparkUnavailableError(SparkConnectorError, ImportError):
    """pyspark (or Java) is missing; the message says what to install."""


def require_pyspark() -> Any:
    """The ``pyspark`` module, or :class:`SparkUnavailableError` saying what to install."""
    try:
        import pyspark
        import pyspark.sql  # noqa: F401 - the DataFrame API
    except ImportError as exc:
        raise SparkUnavailableError(
            f"the Spark connector needs pyspark ({exc}): {INSTALL_HINT}"
        ) from exc
    return pyspark


def _names(value: Names, what: str) -> Tuple[str, ...]:
    names = (value,) if isinstance(value, str) else tuple(value)
    for name in names:
        if not isinstance(name, str) or not name:
            raise TypeError(
                f"Columns: {what} must be column names (non-empty strings), got {short_repr(value)}"
            )
    return names


class Columns:
    """An explicit column -> record mapping.

    ``Columns(["a", "b"])``: records ``(a, b)``; one column: the value itself.
    ``Columns(key=["src"], value=["dst"])``: records ``(key, value)``, each the column's value
    when it is one column, a tuple when several. For change DataFrames, ``diff="diff"`` (an
    integer column) or ``op="op"`` (``ops[0]`` inserts one copy, ``ops[1]`` deletes one);
    without either every row inserts one copy. ``time="t"``: an integer column with each row's
    time (default: the input's time). ``null_keys``: ``"error"`` (default) refuses a row with a
    null in a key column (the record columns when no key is declared), ``"drop"`` skips such
    rows. ``types``: optional expected Spark types per column (``{"src": "bigint"}``; ``long``,
    ``int``, ``string``, ... are accepted), checked on the schema.
    """

    def __init__(
        self,
        record: Names = (),
        *,
        key: Names = (),
        value: Names = (),
        diff: Optional[str] = None,
        op: Optional[str] = None,
        time: Optional[str] = None,
        null_keys: str = "error",
        ops: Tuple[str, str] = ("insert", "delete"),
        types: Optional[Mapping[str, str]] = None,
    ) -> None:
        self.record = _names(record, "record")
        self.key = _names(key, "key")
        self.value = _names(value, "value")
        if self.record and (self.key or self.value):
            raise ValueError("Columns: give the record columns, or key= and value=, not both")
        if not self.record and not (self.key and self.value):
            raise ValueError(
                "Columns: give the record columns (Columns(['a', 'b'])) or both "
                "key= and value= (Columns(key=['src'], value=['dst']))"
            )
        if diff is not None and op is not None:
            raise ValueError(f"Columns: give diff= or op=, not both (got diff={diff!r}, op={op!r})")
        if null_keys not in ("error", "drop"):
            raise ValueError(f"Columns: null_keys must be 'error' or 'drop', got {null_keys!r}")
        if len(ops) != 2 or ops[0] == ops[1] or not all(isinstance(o, str) for o in ops):
            raise ValueError(
                f"Columns: ops must be two different strings (insert, delete), got {ops!r}"
            )
        self.diff, self.op, self.time = diff, op, time
        self.null_keys = null_keys
        self.ops = (ops[0], ops[1])
        self.types = {name: _ALIASES.get(t.lower(), t.lower()) for name, t in (types or {}).items()}
        extra = [c for c in (diff, op, time) if c is not None]
        _names(extra, "diff, op and time")
        used = self.names + tuple(extra)
        if len(set(used)) != len(used):
            raise ValueError(f"Columns: a column is used twice in {used!r}")

    @property
    def names(self) -> Tuple[str, ...]:
        """The record's columns, in record order (key columns first)."""
        return self.record or self.key + self.value

    @property
    def shape(self) -> Tuple[int, ...]:
        """The record's parts, each the number of columns it takes: ``(1,)`` the value itself,
        ``(2,)`` a pair of values, ``(1, 2)`` a key and a pair of values."""
        return (len(self.record),) if self.record else (len(self.key), len(self.value))

    @property
    def null_checked(self) -> Tuple[str, ...]:
        """The columns ``null_keys`` applies to: the key, or the record when there is no key."""
        return self.key or self.record

    @property
    def selected(self) -> Tuple[str, ...]:
        """Every column read: the record's, then diff or op, then time."""
        return self.names + tuple(c for c in (self.diff, self.op, self.time) if c is not None)

    def __repr__(self) -> str:
        shape = (
            f"{list(self.record)!r}"
            if self.record
            else f"key={list(self.key)!r}, value={list(self.value)!r}"
        )
        extra = "".join(
            f", {k}={v!r}"
            for k, v in (("diff", self.diff), ("op", self.op), ("time", self.time))
            if v is not None
        )
        return f"Columns({shape}{extra}, null_keys={self.null_keys!r})"

    def make_record(self, values: Sequence[Any]) -> Any:
        """The record of the record columns' ``values`` (in :attr:`names` order)."""
        if self.record:
            return values[0] if len(self.record) == 1 else tuple(values[: len(self.record)])
        k = len(self.key)
        key = values[0] if k == 1 else tuple(values[:k])
        value = values[k] if len(self.value) == 1 else tuple(values[k : k + len(self.value)])
        return (key, value)

    def flatten(self, record: Any) -> Tuple[Any, ...]:
        """The column values of ``record`` (the inverse of :meth:`make_record`);
        :class:`SparkOutputError` if its shape does not match."""
        if self.record:
            return (record,) if len(self.record) == 1 else self._part(record, self.record)
        if not (isinstance(record, tuple) and len(record) == 2):
            raise SparkOutputError(
                f"record {short_repr(record)} is not a (key, value) pair, as {self!r} expects"
            )
        key = (record[0],) if len(self.key) == 1 else self._part(record[0], self.key)
        value = (record[1],) if len(self.value) == 1 else self._part(record[1], self.value)
        return key + value

    def _part(self, part: Any, names: Tuple[str, ...]) -> Tuple[Any, ...]:
        if isinstance(part, tuple) and len(part) == len(names):
            return part
        raise SparkOutputError(
            f"{short_repr(part)} does not fill the {len(names)} columns {names!r} "
            f"of {self!r} (a tuple of {len(names)} values is expected)"
        )

    def reader(
        self,
        schema: "StructType",
        input: str,
        example: Optional[Callable[[], Optional[Dict[str, Any]]]] = None,
    ) -> "RowReader":
        """Check the mapping against ``schema`` (every column present, supported and integer
        where it must be); ``example()`` gives a row to name in an error. Returns the reader."""
        types = {f.name: f.dataType.simpleString() for f in schema.fields}
        listing = ", ".join(f"{n} {t}" for n, t in types.items()) or "none"

        def refuse(column: str, reason: str) -> SparkInputError:
            row = example() if example is not None else None
            shown = f"; first row: {short_repr(row)}" if row else ""
            return SparkInputError(
                f"input {input!r}: column {column!r} {reason} (the "
                f"DataFrame's columns: {listing}){shown}",
                input=input,
                column=column,
                row=row,
                reason=reason,
                value=None if not row else row.get(column),
            )

        for name in self.selected + tuple(self.types):
            if name not in types:
                raise refuse(name, "is not in the DataFrame")
        for name, expected in self.types.items():
            if types[name] != expected:
                raise refuse(name, f"has type {types[name]}, but {expected} is declared")
        for name in self.names:
            if types[name] not in RECORD_TYPES:
                raise refuse(
                    name,
                    f"has type {types[name]}, which is not a record type "
                    f"({', '.join(sorted(RECORD_TYPES))}): cast it first",
                )
        for column, what in ((self.diff, "diff"), (self.time, "time")):
            if column is not None and types[column] not in INTEGER_TYPES:
                raise refuse(
                    column,
                    f"is the {what} column but has type {types[column]}, not an "
                    f"integer type ({', '.join(sorted(INTEGER_TYPES))})",
                )
        if self.op is not None and types[self.op] != "string":
            raise refuse(self.op, f"is the op column but has type {types[self.op]}, not string")
        return RowReader(self, input, types)


class RowReader:
    """Rows of the columns :attr:`Columns.selected` -> ``(record, diff, time)``, with checks."""

    def __init__(self, columns: Columns, input: str, types: Mapping[str, str]) -> None:
        self.columns = columns
        self.input = input
        selected = columns.selected
        self.width = len(columns.names)
        self._nulls = [selected.index(c) for c in columns.null_checked]
        self._floats = [i for i, c in enumerate(columns.names) if types[c] in FLOAT_TYPES]
        self._binary = [i for i, c in enumerate(columns.names) if types[c] == "binary"]
        self._diff = selected.index(columns.diff) if columns.diff else None
        self._op = selected.index(columns.op) if columns.op else None
        self._time = selected.index(columns.time) if columns.time else None
        self._signs = {columns.ops[0]: 1, columns.ops[1]: -1}
        self.drops = columns.null_keys == "drop"

    def select(self, df: "DataFrame") -> "DataFrame":
        """``df`` reduced to the mapped columns (rows with null keys filtered out when
        ``null_keys="drop"``)."""
        out = df.select(*[df[c] for c in self.columns.selected])
        if self.drops:
            for c in self.columns.null_checked:
                out = out.where(out[c].isNotNull())
        return out

    def checks(self, df: "DataFrame", now: int) -> List[Tuple[Any, str, str]]:
        """``(condition, column, reason)`` for every check a row of ``select(df)`` must pass."""
        from pyspark.sql import functions as F

        cols, out = self.columns, []
        if not self.drops:
            out += [
                (df[c].isNull(), c, "null key (use null_keys='drop' to skip such rows)")
                for c in cols.null_checked
            ]
        out += [
            (
                F.isnan(df[cols.names[i]]),
                cols.names[i],
                "NaN in a record column (NaN never equals itself: it could never be deleted)",
            )
            for i in self._floats
        ]
        if cols.diff is not None:
            out.append((df[cols.diff].isNull(), cols.diff, "null diff"))
        if cols.op is not None:
            out.append(
                (
                    df[cols.op].isNull() | ~df[cols.op].isin(*cols.ops),
                    cols.op,
                    f"op is neither {cols.ops[0]!r} nor {cols.ops[1]!r}",
                )
            )
        if cols.time is not None:
            out.append((df[cols.time].isNull(), cols.time, "null time"))
            out.append(
                (
                    df[cols.time] < now,
                    cols.time,
                    f"time is behind the session's time {now} (before its frontier)",
                )
            )
        return out

    def bad_rows(
        self, df: "DataFrame", now: int, limit: int = 5
    ) -> List[Tuple[Dict[str, Any], str, str]]:
        """Up to ``limit`` rows of ``df`` (already :meth:`select`-ed) that fail a check, as
        ``(row, column, reason)``: one Spark query, nothing collected but those rows."""
        from pyspark.sql import functions as F

        checks = self.checks(df, now)
        if not checks:
            return []
        problem = None
        for i, (condition, _, _) in enumerate(checks):
            problem = (
                F.when(condition, F.lit(i))
                if problem is None
                else problem.when(condition, F.lit(i))
            )
        assert problem is not None  # one condition per check, and there is a check
        found = (
            df.select(*[df[c] for c in self.columns.selected], problem.alias(PROBLEM))
            .where(F.col(PROBLEM).isNotNull())
            .limit(limit)
            .collect()
        )
        return [(self.row_dict(r), checks[r[-1]][1], checks[r[-1]][2]) for r in found]

    def row_dict(self, row: Sequence[Any]) -> Dict[str, Any]:
        """The row as ``{column: value}`` (for messages)."""
        return dict(zip(self.columns.selected, row))

    def refused(
        self,
        bad: Sequence[Tuple[Dict[str, Any], str, str]],
        outcome: str = "The whole DataFrame was refused: nothing of it was applied.",
    ) -> SparkInputError:
        """The error for ``bad`` rows (the first is named; ``outcome`` says what was applied)."""
        row, column, reason = bad[0]
        more = f" ({len(bad) - 1} more bad rows in .rows)" if len(bad) > 1 else ""
        return SparkInputError(
            f"input {self.input!r}: column {column!r} of row {short_repr(row)}: {reason}{more}. "
            f"{outcome}",
            input=self.input,
            column=column,
            row=row,
            value=row.get(column),
            reason=reason,
            rows=bad,
        )

    def convert(
        self, row: Sequence[Any], now: Optional[int] = None
    ) -> Optional[Tuple[Any, int, Optional[int]]]:
        """``(record, diff, time)`` of a row (time None: the input's time); None for a row that
        ``null_keys="drop"`` skips; :class:`BadRow` for a bad row (with ``now``, a time before
        it is one)."""
        for i in self._nulls:
            if row[i] is None:
                if self.drops:
                    return None
                return self._bad(row, i, "null key (use null_keys='drop' to skip such rows)")
        for i in self._floats:
            v = row[i]
            if v is not None and v != v:
                return self._bad(row, i, "NaN in a record column")
        values = row
        if self._binary:
            values = list(row)
            for i in self._binary:
                values[i] = bytes(values[i]) if values[i] is not None else None
        diff = 1
        if self._diff is not None:
            diff = row[self._diff]
            if diff is None:
                return self._bad(row, self._diff, "null diff")
        elif self._op is not None:
            diff = self._signs.get(row[self._op], 0)
            if not diff:
                return self._bad(
                    row,
                    self._op,
                    f"op is neither {self.columns.ops[0]!r} nor {self.columns.ops[1]!r}",
                )
        time = None
        if self._time is not None:
            time = row[self._time]
            if time is None:
                return self._bad(row, self._time, "null time")
            if now is not None and time < now:
                return self._bad(
                    row,
                    self._time,
                    f"time is behind the session's time {now} (before its frontier)",
                )
        return self.columns.make_record(values), diff, time

    def convert_rows(
        self, rows: Sequence[Sequence[Any]], now: Optional[int], max_errors: int
    ) -> List[Tuple[Tuple[Any, int, Optional[int]], Sequence[Any]]]:
        """``((record, diff, time), row)`` of every row :meth:`convert` keeps; all rows are
        checked first, and the bad ones (up to ``max_errors``) are refused together
        (:meth:`refused`), so nothing of a bad batch is used."""
        items = []
        bad = []
        for row in rows:
            try:
                item = self.convert(row, now)
            except BadRow as exc:
                bad.append(exc.bad)
                if len(bad) >= max_errors:
                    break
                continue
            if item is not None:
                items.append((item, row))
        if bad:
            raise self.refused(bad)
        return items

    def convert_table(
        self, table: Any, now: Optional[int] = None
    ) -> Tuple[List[Any], List[int], Optional[List[Optional[int]]]]:
        """Columnar :meth:`convert` of an Arrow table or batch of the :attr:`Columns.selected`
        columns: ``(records, diffs, times)`` (times None: the input's time). Checks run on whole
        columns (nulls, NaN, ops, times); a batch that fails one is converted row by row, so
        the error (:class:`BadRow`) and ``null_keys="drop"`` act exactly as :meth:`convert`."""
        records, diffs, times = self.convert_columns(table, now)
        return records, ([diffs] * len(records) if isinstance(diffs, int) else diffs), times

    def convert_columns(
        self, table: Any, now: Optional[int] = None
    ) -> Tuple[List[Any], Union[int, List[int]], Optional[List[Optional[int]]]]:
        """:meth:`convert_table` with one int for the diffs when every row has the same
        (no diff or op column): what a session checks once instead of per record. Fixed-width
        columns without nulls (ints, floats, bools) become Python values through numpy,
        a column at a time; the records are tuples zipped from those lists."""
        import pyarrow.compute as pc

        columns = table.columns
        if not self._columns_clean(columns, now, pc):
            return self._convert_rows(columns, now)
        lists = [_values(c) for c in columns[: self.width]]
        cols = self.columns
        if cols.record:
            records = lists[0] if len(lists) == 1 else list(zip(*lists))
        else:
            k = len(cols.key)
            keys = lists[0] if k == 1 else zip(*lists[:k])
            values = lists[k] if len(lists) == k + 1 else zip(*lists[k:])
            records = list(zip(keys, values))
        diffs: Union[int, List[int]] = 1
        if self._diff is not None:
            diffs = _values(columns[self._diff])
        elif self._op is not None:
            signs = self._signs
            diffs = [signs[o] for o in columns[self._op].to_pylist()]
        times = _values(columns[self._time]) if self._time is not None else None
        return records, diffs, times

    def column_parts(self, table: Any, now: Optional[int] = None) -> Optional[Tuple[Any, Any, Any]]:
        """``(keys, values, diffs)`` of an Arrow slice (a part of several columns: a list),
        for a session's ``update_columns``, when the records are ``(key, value)`` pairs of
        ints, floats, bools or strings (coded by the session: no string per row), without a
        time column, and all checks pass; else None."""
        import pyarrow.compute as pc

        cols = self.columns
        if cols.record or self._time is not None or not cols.value:
            return None
        columns = table.columns
        for column in columns[: self.width]:
            if not _columnar(column.type) or column.null_count:
                return None
        if not self._columns_clean(columns, now, pc):
            return None
        k = len(cols.key)
        parts = columns[: self.width]
        keys = parts[0] if k == 1 else list(parts[:k])
        values = parts[k] if self.width == k + 1 else list(parts[k:])
        diffs: Any = 1
        if self._diff is not None:
            diffs = columns[self._diff]
        elif self._op is not None:
            ops = columns[self._op]
            diffs = pc.if_else(pc.equal(ops, cols.ops[0]), 1, -1).cast("int64")
        return keys, values, diffs

    def _columns_clean(self, columns: Sequence[Any], now: Optional[int], pc: Any) -> bool:
        """No value of ``columns`` fails a check (so no row needs looking at)."""
        if any(columns[i].null_count for i in self._nulls):
            return False
        if any(pc.any(pc.is_nan(columns[i])).as_py() for i in self._floats):
            return False
        if self._diff is not None and columns[self._diff].null_count:
            return False
        if self._op is not None:
            ops = columns[self._op]
            if (
                ops.null_count
                or not pc.all(pc.is_in(ops, value_set=_arrow_strings(self.columns.ops))).as_py()
            ):
                return False
        if self._time is not None:
            times = columns[self._time]
            if times.null_count or (now is not None and len(times) and pc.min(times).as_py() < now):
                return False
        return True

    def _convert_rows(
        self, columns: Sequence[Any], now: Optional[int]
    ) -> Tuple[List[Any], List[int], Optional[List[Optional[int]]]]:
        records: List[Any] = []
        diffs: List[int] = []
        times: List[Optional[int]] = []
        for row in zip(*[c.to_pylist() for c in columns]):
            item = self.convert(row, now)
            if item is not None:
                records.append(item[0])
                diffs.append(item[1])
                times.append(item[2])
        return records, diffs, (times if self._time is not None else None)

    def _bad(self, row: Sequence[Any], index: int, reason: str) -> Any:
        raise BadRow((self.row_dict(row), self.columns.selected[index], reason))


def _values(column: Any) -> List[Any]:
    """The Python values of an Arrow column: through numpy (several times faster than
    ``to_pylist``, the same values) when it holds ints, floats or bools and no null, else
    ``to_pylist``."""
    import pyarrow.types as pt

    kind = column.type
    if not column.null_count and (
        pt.is_integer(kind) or pt.is_boolean(kind) or pt.is_float32(kind) or pt.is_float64(kind)
    ):
        return column.to_numpy(zero_copy_only=False).tolist()
    return column.to_pylist()


def _columnar(kind: Any) -> bool:
    """Whether an Arrow column of type ``kind`` goes to a session as a column."""
    import pyarrow.types as pt

    strings = (pt.is_string, pt.is_large_string, pt.is_binary, pt.is_large_binary)
    if pt.is_dictionary(kind):
        return any(check(kind.value_type) for check in strings)
    scalars = (pt.is_boolean, pt.is_float32, pt.is_float64, *strings)  # (or ints, not uint64)
    return (pt.is_integer(kind) and not pt.is_uint64(kind)) or any(c(kind) for c in scalars)


def _arrow_strings(values: Sequence[str]) -> Any:
    import pyarrow as pa

    return pa.array(list(values), type=pa.string())


class BadRow(Exception):
    """A row :meth:`RowReader.convert` refused; ``bad`` is ``(row, column, reason)``. Internal:
    the connector turns it into a :class:`SparkInputError` that says what was applied."""

    def __init__(self, bad: Tuple[Dict[str, Any], str, str]) -> None:
        super().__init__(bad[2])
        self.bad = bad
