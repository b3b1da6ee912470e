"""The Spark sink's input journal: what journaling a micro-batch costs.

usage: python benchmarks/spark_journal.py [--rows N] [--repeat R] [--location DIR] [--spark]

(a) The journal alone: an entry of ``--rows`` records ``(k, v)`` (two ints, the shape of an
    edge) with diffs, written (encoded, checksummed, ``fsync``-ed, renamed into place) and read
    back (verified, decoded) ``--repeat`` times in ``--location`` (a fresh temporary directory
    by default): median seconds, bytes, bytes per record; the same for records that are not
    tuples of one width (stored row by row).
(b) ``--spark``: a micro-batch of ``--rows`` rows through ``ForeachBatchSink`` on a local Spark
    and an inline session, with the journal and without (a session without checkpoints):
    median seconds per micro-batch, so the journal's share of a micro-batch is seen.

Prints one JSON object.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
from typing import Any, Dict, List

from common import emit, environment, now

from timelypy.recovery.journal import InputJournal, JournalEntry


def journal_costs(
    rows: int, repeat: int, location: str, name: str, records: List[Any]
) -> Dict[str, Any]:
    journal = InputJournal(location, name)
    diffs = [1] * rows
    writes, reads = [], []
    size = 0
    for batch_id in range(repeat):
        entry = JournalEntry(batch_id, "edges", batch_id, batch_id + 1, records, diffs)
        start = now()
        size = journal.write(entry)
        writes.append(now() - start)
        start = now()
        journal.read(batch_id)
        reads.append(now() - start)
    journal.prune(repeat)
    return {
        "write_s": round(statistics.median(writes), 4),
        "read_s": round(statistics.median(reads), 4),
        "bytes": size,
        "bytes_per_record": round(size / rows, 2),
    }


def sink_costs(rows: int, repeat: int, location: str) -> Dict[str, Any]:
    import timelypy as tp
    from timelypy.connectors.spark import Columns, ForeachBatchSink, local_spark

    spark = local_spark("journal-benchmark", cores=2, log_level="ERROR")
    df = spark.range(rows).selectExpr("id % 1000 AS k", "id AS v").cache()
    df.count()
    columns = Columns(["k", "v"])

    def dataflow(scope: Any) -> Dict[str, Any]:
        edges_in, edges = scope.new_collection()
        return {"edges": edges_in, "probe": edges.probe()}

    out: Dict[str, Any] = {}
    for name, checkpoint in (
        ("without_journal", None),
        ("with_journal", tp.Checkpoints(location, every_times=10**9)),
    ):
        with tp.open_session(dataflow, checkpoint=checkpoint) as session:
            sink = ForeachBatchSink(session, "edges", columns, "probe")
            sink(df, 0)  # Spark's Python workers start: not timed
            for batch_id in range(1, repeat + 1):
                sink(df, batch_id)
            times = [sink.latencies[b] for b in range(1, repeat + 1)]
            out[name] = {"micro_batch_s": round(statistics.median(times), 4)}
            if sink.journal_bytes:
                out[name]["journal_bytes"] = sink.journal_bytes[repeat]
    spark.stop()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=50_000)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--location", default=None)
    parser.add_argument("--spark", action="store_true")
    args = parser.parse_args()
    location = args.location or tempfile.mkdtemp(prefix="timelypy-journal-")
    result: Dict[str, Any] = {
        "benchmark": "spark_journal",
        "environment": environment(),
        "rows": args.rows,
        "repeat": args.repeat,
        "tuples": journal_costs(
            args.rows, args.repeat, location, "tuples", [(i % 1000, i) for i in range(args.rows)]
        ),
        "scalars": journal_costs(
            args.rows, args.repeat, location, "scalars", list(range(args.rows))
        ),
    }
    if args.spark:
        result["sink"] = sink_costs(args.rows, args.repeat, location)
    emit(result)


if __name__ == "__main__":
    main()
