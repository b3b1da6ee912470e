"""The Spark load's column road (Arrow columns -> Python values a column at a time -> records,
checked as columns, into the session without per-record checks) gives exactly the records of
the row road (each row checked and converted by ``RowReader.convert``).

The first tests need only pyarrow; the last ones a local Spark (marked ``spark``).
"""

from __future__ import annotations

import math
from typing import Any, Dict, Iterator, List, Tuple

import pytest
from support.spark import local_spark_for_module

import timelypy as tp
from timelypy.connectors.spark import Columns, apply_changes, load
from timelypy.connectors.spark.columns import BadRow, RowReader
from timelypy.errors import SessionInputError

pa = pytest.importorskip("pyarrow")

TYPES = {"k": "bigint", "a": "int", "f": "double", "g": "float", "b": "boolean", "s": "string"}


def _table(n: int, nulls: bool = False) -> Any:
    """``n`` rows of every fixed-width kind (and a string), with awkward values: the int64
    extremes, -0.0, huge and tiny floats; ``nulls``: some in the value columns."""
    ks = [(i * 7919) % 101 - 50 for i in range(n)]
    ks[:2] = [2**63 - 1, -(2**63)][: min(2, n)]
    fs = [i / 3 if i % 5 else -0.0 for i in range(n)]
    fs[-1:] = [1e308]
    gs = [float(i) * 0.25 for i in range(n)]
    bs = [i % 3 == 0 for i in range(n)]
    if nulls:
        fs = [None if i % 4 == 1 else f for i, f in enumerate(fs)]
        bs = [None if i % 6 == 2 else b for i, b in enumerate(bs)]
    return pa.table(
        {
            "k": pa.array(ks, pa.int64()),
            "a": pa.array([i % 9 for i in range(n)], pa.int32()),
            "f": pa.array(fs, pa.float64()),
            "g": pa.array(gs, pa.float32()),
            "b": pa.array(bs, pa.bool_()),
            "s": pa.array([f"w{i % 13}" for i in range(n)], pa.string()),
        }
    )


def _typed(values: List[Any]) -> List[Tuple[Any, ...]]:
    """Values with their types and float signs: ``1 == 1.0 == True`` and ``-0.0 == 0.0``, but
    the column road must give what the row road gives, not only equal values."""

    def one(v: Any) -> Any:
        if isinstance(v, tuple):
            return tuple(one(x) for x in v)
        sign = math.copysign(1.0, v) if isinstance(v, float) else None
        return (type(v).__name__, v, sign)

    return [one(v) for v in values]


MAPPINGS = [
    Columns(["k", "a"]),
    Columns("f"),
    Columns(key=["k"], value=["f", "b"]),
    Columns(key=["k", "a"], value=["g"]),
    Columns(key=["b"], value=["k", "a", "f", "g", "s"]),
]


@pytest.mark.parametrize("nulls", [False, True])
@pytest.mark.parametrize("columns", MAPPINGS, ids=repr)
def test_columns_give_the_records_of_rows(columns, nulls):
    if nulls and columns.null_checked and set(columns.null_checked) & {"f", "b"}:
        pytest.skip("a null key is a bad row: covered below")
    reader = RowReader(columns, "records", TYPES)
    table = _table(300, nulls).select(list(columns.selected))
    records, diffs, times = reader.convert_columns(table)
    rows = [reader.convert(row) for row in zip(*[c.to_pylist() for c in table.columns])]
    assert _typed(records) == _typed([r[0] for r in rows if r is not None])
    assert diffs == 1 and times is None  # one diff for all: no diff or op column
    listed = reader.convert_table(table)
    assert listed[0] == records and listed[1] == [1] * len(records)


def test_diff_op_and_time_columns_as_columns_and_rows():
    table = pa.table(
        {
            "k": pa.array([3, 1, 2, 1], pa.int64()),
            "d": pa.array([2, -1, 5, 1], pa.int16()),
            "t": pa.array([7, 4, 4, 9], pa.int64()),
            "op": pa.array(["insert", "delete", "delete", "insert"]),
        }
    )
    types = {"k": "bigint", "d": "smallint", "t": "bigint", "op": "string"}
    for columns in (Columns("k", diff="d", time="t"), Columns("k", op="op", time="t")):
        reader = RowReader(columns, "records", types)
        part = table.select(list(columns.selected))
        fast = reader.convert_columns(part, now=4)
        rows = [reader.convert(row, 4) for row in zip(*[c.to_pylist() for c in part.columns])]
        assert list(zip(*fast)) == rows


def test_a_bad_column_falls_back_to_the_rows_and_names_the_row():
    table = pa.table({"k": pa.array([1, None, 3], pa.int64()), "f": [0.5, 1.5, float("nan")]})
    reader = RowReader(Columns(key=["k"], value=["f"]), "records", TYPES)
    with pytest.raises(BadRow) as err:
        reader.convert_columns(table)
    assert err.value.bad == ({"k": None, "f": 1.5}, "k", err.value.bad[2])
    assert "null key" in err.value.bad[2]
    dropping = RowReader(Columns(key=["k"], value=["f"], null_keys="drop"), "records", TYPES)
    with pytest.raises(BadRow, match="NaN in a record column"):
        dropping.convert_columns(table)
    records, _, _ = dropping.convert_columns(table.slice(0, 2))
    assert records == [(1, 0.5)]


@pytest.mark.parametrize("workers", [2, 3, 7])
@pytest.mark.parametrize("columns", MAPPINGS[:4], ids=repr)
def test_owners_hashed_from_columns_are_stable_hash_of_the_records(columns, workers):
    from timelypy.connectors.spark.hashes import column_hashes, column_owners
    from timelypy.hashing import stable_hash

    table = _table(400).select(list(columns.selected))
    floats = pa.array([0.5, -0.0, 3.0, -7.0, 2.0**63, -(2.0**63), 1e308, float("inf"), -1.25])
    assert column_hashes(floats).tolist() == [stable_hash(v) for v in floats.to_pylist()]
    records = RowReader(columns, "records", TYPES).convert_columns(table)[0]
    owners = column_owners(table.columns, columns.shape, workers)
    assert owners.tolist() == [stable_hash(r) % workers for r in records]
    words = ["a", "b", "a", "é"]
    assert column_owners([pa.array(words)], (1,), 2).tolist() == [stable_hash(w) % 2 for w in words]
    assert column_owners([pa.array([1, None])], (1,), 2) is None


def _numbers(scope: Any) -> Dict[str, Any]:
    numbers_in, numbers = scope.new_collection()
    events_in, events = scope.new_input()
    return {
        "numbers": numbers_in,
        "events": events_in,
        "out": numbers.capture(),
        "probe": numbers.probe(),
    }


def test_one_diff_and_one_time_are_still_checked():
    """The bulk road checks a diff and a time given once for all, once: the same refusals as
    per record, nothing buffered."""
    with tp.open_session(_numbers) as s:
        s.advance_to(2)
        with pytest.raises(SessionInputError, match="not an integer"):
            s.update_many("numbers", [1, 2], diffs=True)
        with pytest.raises(SessionInputError, match="before the time 2"):
            s.update_many("numbers", [1, 2], times=1, routable=True)
        with pytest.raises(SessionInputError, match="cannot retract"):
            s.update_many("events", [1, 2], diffs=-1, routable=True)
        with pytest.raises(SessionInputError, match="cannot be routed"):
            s.update_many("numbers", [[1], [2]], diffs=1)
        assert s.pending == 0
        s.update_many("numbers", [(1, 0.5), (2, True)], diffs=3, routable=True)
        s.update_many("numbers", [(5, 0)], diffs=[-1], times=[4], routable=True)
        s.advance_to(5)
        s.wait("probe")
        assert sorted(s.changes("out")) == [((1, 0.5), 2, 3), ((2, True), 2, 3), ((5, 0), 4, -1)]


# ----------------------------------------------------------------------------- through Spark
@pytest.fixture(scope="module")
def spark(tmp_path_factory) -> Iterator[Any]:
    """One local Spark for this module."""
    yield from local_spark_for_module(tmp_path_factory, "timelypy-columns", cores=2)


def _row_road(df: Any, columns: Columns, now: int = 0) -> List[Tuple[Any, int, Any]]:
    """What the row road makes of ``df``: each collected row checked and converted alone."""
    reader = RowReader(columns, "numbers", {f.name: f.dataType.simpleString() for f in df.schema})
    out = []
    for row in reader.select(df).collect():
        item = reader.convert(tuple(row), now)
        if item is not None:
            record, diff, time = item
            out.append((record, now if time is None else time, diff))
    return out


def _consolidated(updates: List[Tuple[Any, Any, int]]) -> List[Tuple[Any, ...]]:
    counts: Dict[Tuple[Any, Any], int] = {}
    for record, time, diff in updates:
        key = (tuple(_typed([record])), time)
        counts[key] = counts.get(key, 0) + diff
    return sorted((k, v) for k, v in counts.items() if v)


SPARK_ROWS = "id % 97 - 40 AS k", "cast(id AS int) % 7 AS a", "id / 8.0 - 3 AS f", "id % 3 = 0 AS b"


@pytest.mark.spark
@pytest.mark.timeout(300)
@pytest.mark.parametrize(
    "backend,workers", [("inline", 1), pytest.param("processes", 2, marks=pytest.mark.processes)]
)
def test_a_dataframe_of_ints_floats_and_bools_loads_as_through_the_rows(spark, backend, workers):
    df = spark.range(20_000).selectExpr(*SPARK_ROWS).repartition(3)
    df = df.selectExpr("k", "a", "cast(f AS double) AS f", "b")
    for columns in (Columns(key=["k"], value=["a", "f", "b"]), Columns(["f", "b", "a"])):
        with tp.open_session(_numbers, workers=workers, backend=backend, timeout=120) as s:
            assert load(s, "numbers", df, columns, batch_rows=3_000) == 20_000
            s.advance_to(1)
            s.wait("probe")
            loaded = s.changes("out")
        assert _consolidated(loaded) == _consolidated(_row_road(df, columns))


@pytest.mark.spark
@pytest.mark.timeout(300)
def test_streamed_changes_with_diffs_and_times_apply_as_through_the_rows(spark):
    df = spark.range(5_000).selectExpr(
        "id % 31 AS k", "id % 2 = 0 AS b", "cast(id % 3 + 1 AS int) AS d", "3 + id % 4 AS t"
    )
    columns = Columns(key=["k"], value=["b"], diff="d", time="t")
    with tp.open_session(_numbers, timeout=120) as s:
        s.advance_to(3)
        assert apply_changes(s, "numbers", df, columns, batch_rows=700) == 5_000
        s.wait("probe")
        applied = s.changes("out")
    assert _consolidated(applied) == _consolidated(_row_road(df, columns, now=3))
