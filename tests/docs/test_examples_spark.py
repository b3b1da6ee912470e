"""The Spark pipeline example runs end to end (small sizes) and its view is exact at every
micro-batch (the example itself checks each against a from-scratch union-find)."""

from __future__ import annotations

import importlib
import os
import shutil
import sys

import pytest
from support.paths import EXAMPLES

pytestmark = pytest.mark.spark

pytest.importorskip("pyspark", reason="pyspark is not installed: pip install -e '.[spark]'")
if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
    pytest.skip("Spark needs Java", allow_module_level=True)

# the example imports as the module it is when run as a script (and so in worker processes)
sys.path.insert(0, str(EXAMPLES))
spark_pipeline = importlib.import_module("spark_pipeline")


@pytest.mark.parametrize(
    "backend,workers", [("inline", 1), pytest.param("processes", 2, marks=pytest.mark.processes)]
)
def test_the_spark_pipeline_runs_on_plain_pyspark(backend, workers):
    results = spark_pipeline.main(
        [
            "--backend",
            backend,
            "--workers",
            str(workers),
            "--nodes",
            "300",
            "--edges",
            "250",
            "--batches",
            "3",
            "--changes",
            "40",
            "--quiet",
        ]
    )
    assert [r["batch"] for r in results] == [0, 1, 2]
    for r in results:
        assert r["top"] and r["top"] == sorted(r["top"], key=lambda lt: (-lt[1], lt[0]))
        assert 0 < r["maintain_s"] <= r["with_query_s"]
