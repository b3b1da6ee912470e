"""DatalogSession.load_dataframe: facts from a Spark DataFrame, checked, all or nothing."""

from __future__ import annotations

from typing import Any, Iterator

import pytest
from support.spark import local_spark_for_module

from timelypy import datalog
from timelypy.errors import DatalogError

pytestmark = [pytest.mark.spark, pytest.mark.timeout(600)]

TC = """
.decl edge(x: number, y: number)
.input edge
.decl path(x: number, y: number)
path(x, y) :- edge(x, y).
path(x, z) :- path(x, y), edge(y, z).
.output path
"""


@pytest.fixture(scope="module")
def spark(tmp_path_factory) -> Iterator[Any]:
    """One local Spark for this module."""
    yield from local_spark_for_module(tmp_path_factory, "timelypy-datalog", cores=1)


def test_load_dataframe(spark):
    df = spark.createDataFrame([(1, 2, "a"), (2, 3, "b"), (1, 2, "c")], ["src", "dst", "tag"])
    with datalog.Program.from_text(TC).session(workers=2) as s:
        assert s.load_dataframe("edge", df, columns=["src", "dst"]) == 2
        s.advance()
        assert s.contents("path") == {(1, 2), (1, 3), (2, 3)}
        with pytest.raises(DatalogError, match="edge has 2 field"):
            s.load_dataframe("edge", df)
        bad = spark.createDataFrame([(3, 4), (4, None)], "src long, dst long")
        with pytest.raises(DatalogError, match=r"field 2 \(y\) expects a number"):
            s.load_dataframe("edge", bad)
        s.advance()
        assert s.facts("edge") == {(1, 2), (2, 3)}
