"""Exactly once with Spark across driver restarts: a Structured Streaming driver killed with
SIGKILL before, during and after micro-batches and during a checkpoint, restarted with
``restore=`` and the same ``checkpointLocation`` until every file is processed; its final
contents equal a recompute from all rows."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

import pytest

pytestmark = [pytest.mark.spark, pytest.mark.slow]

FILES = 14
EVERY_TIMES = 3
KEYS = 8


def dataflow(scope):
    """The rows as a multiset, and the number of rows per key."""
    rows_in, rows = scope.new_collection()
    per_key = rows.map(lambda kv: kv[0]).count()
    return {
        "rows": rows_in,
        "out": rows.capture(),
        "per_key": per_key.capture(),
        "probe": per_key.probe(),
    }


def changes_of_file(index: int, present: Counter) -> List[Dict[str, Any]]:
    """File ``index``'s rows: inserts of new rows, and deletes of rows present before it."""
    rng = random.Random(index)
    lines = []
    for _ in range(25):
        row = (rng.randrange(KEYS), rng.randrange(1000))
        lines.append({"k": row[0], "v": row[1], "op": "+"})
    for row in rng.sample(sorted(present.elements()), min(8, sum(present.values()))):
        lines.append({"k": row[0], "v": row[1], "op": "-"})
    for line in lines:
        present[(line["k"], line["v"])] += 1 if line["op"] == "+" else -1
    return lines


def write_inputs(directory: Path) -> Counter:
    """The change files, oldest first by modification time; the recompute from all rows."""
    directory.mkdir()
    present: Counter = Counter()
    start = time.time() - 1000
    for index in range(FILES):
        path = directory / f"changes-{index:03d}.json"
        path.write_text("".join(json.dumps(x) + "\n" for x in changes_of_file(index, present)))
        os.utime(path, (start + index, start + index))
    return +present


def consolidate(changes: List[Tuple[Any, Any, int]]) -> Dict[Any, int]:
    total: Counter = Counter()
    for record, _time, diff in changes:
        total[record] += diff
    return {k: v for k, v in total.items() if v}


# ------------------------------------------------------------------------------------------
# the driver: one process per run, killed at the point its argument names


def kill_here(work: Path, point: str) -> None:
    """SIGKILL this driver's process group (Spark's JVM and the workers too) at ``point``."""
    with open(work / "kills.log", "a") as log:
        log.write(point + "\n")
        log.flush()
        os.fsync(log.fileno())
    os.killpg(os.getpgrp(), signal.SIGKILL)


def install_kill(work: Path, kill: str) -> None:
    """Arm the kill point ``kill`` ("point:n": at the n-th occasion in this run)."""
    from timelypy.recovery import journal
    from timelypy.recovery.store import CheckpointStore

    if kill in ("none", "random"):
        return
    point, nth = kill.split(":")
    seen = Counter()

    def occasion(name: str) -> bool:
        seen[name] += 1
        return name == point and seen[name] == int(nth)

    write, publish = journal.InputJournal.write, CheckpointStore.publish

    def journal_write(self, entry):
        if occasion("during_journal"):  # the temporary file half written, not renamed
            files = self.files
            data = b"TPCK" + b"\0" * 60
            files.put_atomic(f"{self.path(entry.batch_id)}.tmp-cut", data)
            kill_here(work, kill)
        size = write(self, entry)
        if occasion("after_journal"):  # written, not applied, Spark not told
            kill_here(work, kill)
        return size

    def store_publish(self, *args, **kwargs):
        if occasion("during_checkpoint"):  # every worker's part written, no manifest yet
            kill_here(work, kill)
        return publish(self, *args, **kwargs)

    journal.InputJournal.write = journal_write
    CheckpointStore.publish = store_publish
    install_kill.occasion = occasion  # for the sink's wrapper


def driver_main() -> None:
    import timelypy as tp
    from timelypy.connectors.spark import Columns, ForeachBatchSink, local_spark
    from timelypy.errors import CheckpointError

    work, backend, workers, kill = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3]), sys.argv[4]
    rng = random.Random()
    install_kill(work, kill)
    occasion = getattr(install_kill, "occasion", lambda name: False)
    every = tp.Checkpoints(str(work / "timelypy"), every_times=EVERY_TIMES, keep=2)
    options = dict(backend=backend, workers=workers, timeout=120)
    try:
        session = tp.open_session(dataflow, restore=every, **options)
    except CheckpointError:  # no checkpoint yet: a first run, or one killed before its first
        session = tp.open_session(dataflow, checkpoint=every, **options)
    restored_at = session.restored_at
    state = {n: session.restored(n) for n in ("out", "per_key")}
    sink = ForeachBatchSink(
        session, "rows", Columns(["k", "v"], op="op", ops=("+", "-")), "probe", recover=True
    )
    print(f"START restored_at={restored_at} replayed={sink.replayed}", flush=True)

    def each(df, batch_id):
        time.sleep(rng.uniform(0, 0.3))  # random moments for the random kill
        if occasion("before_batch"):
            kill_here(work, kill)
        sink(df, batch_id)
        print(f"BATCH {batch_id}", flush=True)
        if occasion("after_batch"):  # applied and journaled; Spark has not committed it
            kill_here(work, kill)

    spark = local_spark("recovery-driver", cores=1, local_dir=str(work / "spark"))
    stream = (
        spark.readStream.schema("k long, v long, op string")
        .option("maxFilesPerTrigger", 1)
        .json(str(work / "in"))
    )
    query = (
        stream.writeStream.foreachBatch(each)
        .option("checkpointLocation", str(work / "spark-checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    print("STREAMING", flush=True)
    if not query.awaitTermination(timeout=240):
        raise TimeoutError("the query did not process every file within 240 s")
    if query.exception() is not None:
        raise RuntimeError(str(query.exception()))
    session.wait("probe")
    result = {
        name: sorted(consolidate(state[name] + session.changes(name)).items())
        for name in ("out", "per_key")
    }
    result["ignored"] = sink.ignored
    result["journal"] = sink.journal.batch_ids() if sink.journal else None
    print("RESULT " + json.dumps(result), flush=True)
    session.close()
    spark.stop()


# ------------------------------------------------------------------------------------------
# the test

RUNS = [
    ("inline", 1, "during_journal:{n}"),
    ("processes", 2, "after_journal:{n}"),
    ("inline", 1, "during_checkpoint:1"),
    ("processes", 2, "after_batch:{n}"),
    ("inline", 1, "{random_or_before}"),
    ("inline", 1, "none"),
]
"""Each run's backend, workers and kill point; ``{n}``: at the first or second occasion, at
random; the fifth run is killed by the test at a random moment, or before a micro-batch."""


def run_driver(work: Path, backend: str, workers: int, kill: str, rng: random.Random) -> str:
    """One driver run until it is killed or finishes; its stdout."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(__file__).parents[2]), *sys.path])}
    driver = subprocess.Popen(
        [sys.executable, __file__, str(work), backend, str(workers), kill],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        start_new_session=True,  # its own group: a kill takes Spark's JVM and the workers
    )
    seen = ""
    if kill == "random":
        assert driver.stdout is not None
        for line in driver.stdout:  # started: kill at a random moment of the stream
            seen += line
            if line.startswith("BATCH"):
                time.sleep(rng.uniform(0, 1.5))
                break
        try:
            os.killpg(driver.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    try:
        out, err = driver.communicate(timeout=300)
    finally:
        try:
            os.killpg(driver.pid, signal.SIGKILL)  # whatever is left of the group
        except ProcessLookupError:
            pass
    if driver.returncode not in (0, -signal.SIGKILL):
        raise AssertionError(f"driver ({backend}, kill {kill}) failed:\n{err[-4000:]}")
    return seen + out


@pytest.mark.processes
@pytest.mark.timeout(420)
def test_every_micro_batch_applied_exactly_once_across_killed_drivers(tmp_path):
    pytest.importorskip("pyspark")
    expected = write_inputs(tmp_path / "in")
    seed = random.randrange(10**6)
    rng = random.Random(seed)
    result: Optional[Dict[str, Any]] = None
    outputs = []
    for backend, workers, kill in RUNS:
        kill = kill.format(
            n=rng.randint(1, 2),
            random_or_before=rng.choice(["random", f"before_batch:{rng.randint(1, 2)}"]),
        )
        out = run_driver(tmp_path, backend, workers, kill, rng)
        outputs.append(f"--- {backend} x{workers}, kill {kill}:\n{out}")
        lines = [x for x in out.splitlines() if x.startswith("RESULT ")]
        if lines:
            result = json.loads(lines[-1][len("RESULT ") :])
            break
    log = tmp_path / "kills.log"
    kills = log.read_text().split() if log.exists() else []
    report = f"seed {seed}, kills {kills}\n" + "\n".join(outputs)
    assert result is not None, f"no run finished:\n{report}"
    assert len(kills) >= 3, f"the kill points were not reached ({kills}):\n{report}"
    starts = [x for x in report.splitlines() if x.startswith("START ")]
    assert any("restored_at=None" not in x for x in starts), f"never restored:\n{report}"
    assert any("replayed=[]" not in x for x in starts), f"nothing from the journal:\n{report}"
    out = {tuple(k): v for k, v in result["out"]}
    assert out == dict(expected), f"rows lost or applied twice:\n{report}"
    per_key: Counter = Counter()
    for (k, _v), n in expected.items():
        per_key[k] += n
    counts = {tuple(record): diff for record, diff in result["per_key"]}
    assert counts == {(k, n): 1 for k, n in per_key.items() if n}, report
    # the journal keeps only what the kept checkpoints do not all cover
    assert len(result["journal"]) < FILES, report
    print(report)


if __name__ == "__main__":  # the driver; worker processes import this module
    driver_main()
