"""String columns of a Spark load take the column road: an Arrow slice of string (or binary,
or dictionary-encoded) columns goes to the session's ``update_columns``, which codes each
column into a dictionary; the records loaded are exactly those of the row road.

The first tests need only pyarrow; the last one a local Spark (marked ``spark``).
"""

from __future__ import annotations

from typing import Any, Dict, Iterator, Tuple

import pytest
from support.spark import local_spark_for_module

import timelypy as tp
from timelypy.connectors.spark import Columns, load
from timelypy.connectors.spark.columns import RowReader

pa = pytest.importorskip("pyarrow")

TYPES = {"k": "bigint", "s": "string", "y": "binary", "d": "string"}


def _table(n: int) -> Any:
    words = ["", "a", "é", "zz", "a\x00b"]
    return pa.table(
        {
            "k": pa.array([i % 11 for i in range(n)], pa.int64()),
            "s": pa.array([words[i % 5] for i in range(n)], pa.string()),
            "y": pa.array([bytes([i % 7]) * (i % 3) for i in range(n)], pa.binary()),
            "d": pa.array([words[i % 3] for i in range(n)], pa.string()).dictionary_encode(),
        }
    )


@pytest.mark.parametrize(
    "columns",
    [
        Columns(key=["s"], value=["k"]),
        Columns(key=["k"], value=["s", "y"]),
        Columns(key=["d"], value=["s"]),
    ],
    ids=repr,
)
def test_string_columns_go_to_the_session_as_columns(columns: Columns) -> None:
    reader = RowReader(columns, "records", TYPES)
    table = _table(300).select(list(columns.selected))
    parts = reader.column_parts(table)
    assert parts is not None
    keys, values, diffs = parts

    def flow(scope: Any) -> Dict[str, Any]:
        records_in, records = scope.new_collection()
        return {"records": records_in, "out": records.capture(), "probe": records.probe()}

    with tp.open_session(flow, workers=2) as session:
        session.update_columns("records", keys, values, diffs)
        session.advance_to(1)
        session.wait("probe")
        loaded = _summed(session.changes("out"))
    rows = [reader.convert(row) for row in zip(*[c.to_pylist() for c in table.columns])]
    counts: Dict[Any, int] = {}
    for record, diff, _ in (r for r in rows if r is not None):
        counts[record] = counts.get(record, 0) + diff
    assert loaded == sorted((record, 0, c) for record, c in counts.items())
    nulls = table.set_column(0, table.column_names[0], pa.nulls(300, table.schema.field(0).type))
    assert reader.column_parts(nulls) is None  # a null: the row road names the row


@pytest.mark.parametrize("workers", [2, 3])
def test_owners_of_string_records_are_stable_hash_of_the_records(workers: int) -> None:
    from timelypy.connectors.spark.hashes import column_owners
    from timelypy.hashing import stable_hash

    table = _table(500)
    columns = [table["s"], table["k"], table["y"], table["d"]]
    owners = column_owners(columns, [1, 2, 1], workers)
    rows = zip(*[c.to_pylist() for c in columns])
    assert owners.tolist() == [stable_hash((s, (k, y), d)) % workers for s, k, y, d in rows]


def _summed(changes: Any) -> Any:
    """``(record, time, diff)`` changes summed per record and time (zeros dropped), sorted."""
    sums: Dict[Tuple[Any, Any], int] = {}
    for record, time, diff in changes:
        sums[(record, time)] = sums.get((record, time), 0) + diff
    return sorted((record, time, diff) for (record, time), diff in sums.items() if diff)


# ----------------------------------------------------------------------------- through Spark
@pytest.fixture(scope="module")
def spark(tmp_path_factory: Any) -> Iterator[Any]:
    """One local Spark for this module."""
    yield from local_spark_for_module(tmp_path_factory, "timelypy-strings", cores=2)


def _counted(scope: Any) -> Dict[str, Any]:
    records_in, records = scope.new_collection()
    return {"records": records_in, "out": records.count().capture(), "probe": records.probe()}


@pytest.mark.spark
@pytest.mark.timeout(300)
@pytest.mark.parametrize(
    "backend,workers", [("inline", 1), pytest.param("processes", 2, marks=pytest.mark.processes)]
)
def test_a_dataframe_with_string_keys_loads_as_columns(spark: Any, backend: str, workers: int):
    df = spark.range(20_000).selectExpr(
        "concat('w', CAST(id % 97 AS STRING)) AS s", "id % 5 AS k", "CAST(id % 3 AS BINARY) AS y"
    )
    columns = Columns(key=["s"], value=["k", "y"])
    with tp.open_session(_counted, workers=workers, backend=backend, timeout=120) as s:
        assert load(s, "records", df, columns, batch_rows=3_000) == 20_000
        s.advance_to(1)
        s.wait("probe")
        counted = _summed(s.changes("out"))
    expected: Dict[Tuple[Any, ...], int] = {}
    for i in range(20_000):
        record = (f"w{i % 97}", (i % 5, (i % 3).to_bytes(8, "big")))
        expected[record] = expected.get(record, 0) + 1
    assert counted == sorted(((r, c), 0, 1) for r, c in expected.items())
