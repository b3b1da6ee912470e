"""An arrangement's snapshot is a base and a log of the batches since: a later checkpoint
references the base and encodes only the log, and a restore from it (through the store that
wrote the base, or through a new one that must rebuild the base) equals the live trace."""

from __future__ import annotations

import random
from typing import Any, Dict, List

import pytest

from timelypy.recovery.snapshot import closed_at, restore_worker, snapshot_worker
from timelypy.recovery.store import CheckpointStore
from timelypy.workers.worker import Worker


def _build(scope: Any) -> Dict[str, Any]:
    session, pairs = scope.new_collection(name="pairs")
    arranged = pairs.arrange_by_key()
    counts = pairs.map(lambda kv: kv[0]).count().arrange_by_key()
    return {"pairs": session, "arranged": arranged, "counts": counts}


def _settle(worker: Worker, time: int) -> None:
    for _ in range(100_000):
        if closed_at(worker, time):
            return
        worker.step()
    raise AssertionError(f"time {time} did not close")


def _round(handles: Dict[str, Any], worker: Worker, rng: random.Random, time: int) -> None:
    session = handles["pairs"]
    for _ in range(300):
        key, val = rng.randrange(40), rng.randrange(5)
        if rng.random() < 0.4:
            session.remove((key, val))
        else:
            session.insert((key, val))
    session.advance_to(time + 1)
    session.flush()
    _settle(worker, time + 1)


def _contents(handles: Dict[str, Any]) -> List[Any]:
    return [
        (name, key, handles[name].lookup(key))
        for name in ("arranged", "counts")
        for key in range(40)
    ]


def _checkpoint(store: CheckpointStore, worker: Worker, time: int) -> Dict[str, Any]:
    checkpoint_id = store.new_checkpoint_id()
    part = store.write_part(checkpoint_id, 0, snapshot_worker(worker))
    store.publish(checkpoint_id, time, 1, [part], {})
    return part


@pytest.mark.parametrize("fresh_store", [False, True])
def test_a_restore_from_base_and_log_equals_the_live_trace(tmp_path, fresh_store):
    rng = random.Random(3)
    worker = Worker()
    handles = worker.dataflow(_build)
    for time in range(4):
        _round(handles, worker, rng, time)
    store = CheckpointStore(str(tmp_path))
    first = _checkpoint(store, worker, 4)
    for time in range(4, 6):
        _round(handles, worker, rng, time)
    if fresh_store:  # another process: what the first checkpoint wrote is not remembered
        store = CheckpointStore(str(tmp_path))
    second = _checkpoint(store, worker, 6)
    if not fresh_store:
        assert second["sealed_reused"] >= 2  # each arrangement's base
        assert second["files_written"] < first["files_written"] + 4

    manifest = store.latest()
    assert manifest is not None and manifest.time == 6
    restored = Worker()
    again = restored.dataflow(_build)
    restore_worker(restored, store.read_states(manifest, peers=1, index=0), manifest.time)
    _settle(restored, 6)
    assert _contents(again) == _contents(handles)

    # both continue alike
    rng_a, rng_b = random.Random(9), random.Random(9)
    for time in range(6, 8):
        _round(handles, worker, rng_a, time)
        _round(again, restored, rng_b, time)
    assert _contents(again) == _contents(handles)


def test_the_log_becomes_a_new_base_once_it_holds_as_much_as_the_base(tmp_path):
    rng = random.Random(5)
    worker = Worker()
    handles = worker.dataflow(_build)
    _round(handles, worker, rng, 0)
    store = CheckpointStore(str(tmp_path))
    _checkpoint(store, worker, 1)
    for time in range(1, 40):  # far more updates than the base holds
        _round(handles, worker, rng, time)
    part = _checkpoint(store, worker, 40)
    # "arranged" logged more than its base (and the minimum): a new base, nothing logged yet;
    # "counts" (a few updates per round) still references its base
    assert part["sealed_reused"] == 1
    restored = Worker()
    again = restored.dataflow(_build)
    manifest = store.latest()
    restore_worker(restored, store.read_states(manifest), manifest.time)
    _settle(restored, 40)
    assert _contents(again) == _contents(handles)
