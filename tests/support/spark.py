"""One local Spark for a test module: skipped (with the reason) where pyspark or Java is missing."""

from __future__ import annotations

import os
import shutil
from typing import Any, Iterator

import pytest


def local_spark_for_module(tmp_path_factory: Any, name: str, cores: int = 2) -> Iterator[Any]:
    """Yield a local Spark session named ``name`` whose files live under pytest's temp dir,
    and stop it afterwards (the body of a module-scoped fixture)."""
    pytest.importorskip("pyspark", reason="pyspark is not installed: pip install -e '.[spark]'")
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        pytest.skip("Spark needs Java 17 (no java on PATH, no JAVA_HOME)")
    from timelypy.connectors.spark import local_spark

    base = tmp_path_factory.mktemp("spark")
    session = local_spark(name, cores=cores, local_dir=str(base), log_level="ERROR")
    try:
        yield session
    finally:
        session.stop()
