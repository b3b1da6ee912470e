"""Stand-ins for the engine's snapshot and the checkpoint store, for a branch that has neither.

Installed by ``conftest.py`` only when ``timelypy.recovery.snapshot`` / ``store`` do not exist:
the snapshot of a worker is every update its inputs took (keyed by the record's stable hash), and
a restore replays the pieces a worker owns, so the session's flow (settle, write, publish, read,
restore, rescale) is exercised end to end; the real modules restore operator state instead.
"""

from __future__ import annotations

import os
import pickle
import sys
import time as _time
import types
import weakref
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

import timelypy.errors as errors
from timelypy.dataflow.state import OperatorState
from timelypy.differential.captured import CapturedCollection
from timelypy.differential.input import InputSession
from timelypy.hashing import stable_hash
from timelypy.order import less_equal
from timelypy.workers.worker import Worker

_CAPTURES: "weakref.WeakKeyDictionary[CapturedCollection, Any]" = weakref.WeakKeyDictionary()
_BUILDING: List[Any] = []  # the worker whose dataflow is being built


def _inputs(worker: Any) -> List[Any]:
    return [i for i in worker._inputs if isinstance(i, InputSession)]


def closed_at(worker: Any, time: Any) -> bool:
    if not all(less_equal(time, i.time) for i in _inputs(worker)):
        return False
    mine = [c for c, w in list(_CAPTURES.items()) if w is worker]
    return worker.quiet() and not any(c.less_than(time) for c in mine)


def snapshot_worker(worker: Any) -> Dict[str, OperatorState]:
    return {
        f"input/{k}": OperatorState(
            keyed=[(stable_hash(u[0]), u) for u in getattr(i, "standin_log", [])]
        )
        for k, i in enumerate(_inputs(worker))
    }


def restore_worker(worker: Any, snapshots: List[Dict[str, OperatorState]], time: Any) -> None:
    for k, i in enumerate(_inputs(worker)):
        mine = [
            piece
            for snapshot in snapshots
            for h, piece in snapshot[f"input/{k}"].keyed
            if h % worker.peers == worker.index
        ]
        i.send_updates(mine)
        i.advance_to(time)
        i.flush()


def program_fingerprint(worker: Any) -> Dict[str, str]:
    return {f"input/{k}": f"InputSession {i._name}" for k, i in enumerate(_inputs(worker))}


@dataclass
class Manifest:
    checkpoint_id: str
    time: Any
    peers: int
    fingerprint: Dict[str, str]
    extra: Dict[str, Any] = field(default_factory=dict)
    created: float = 0.0
    parts: List[Dict[str, Any]] = field(default_factory=list)


class CheckpointStore:
    def __init__(self, location: str, keep: int = 3, signing_key: Optional[bytes] = None):
        self.location = location
        self.keep = keep

    def new_checkpoint_id(self) -> str:
        return f"{_time.time_ns():020d}"

    def write_part(self, checkpoint_id: str, worker_index: int, states: Any) -> Dict[str, Any]:
        os.makedirs(os.path.join(self.location, checkpoint_id), exist_ok=True)
        name = os.path.join(checkpoint_id, f"part-{worker_index}.pkl")
        with open(os.path.join(self.location, name), "wb") as f:
            pickle.dump(states, f)
        return {"worker": worker_index, "file": name}

    def publish(self, checkpoint_id, time, peers, parts, fingerprint, extra=None) -> Manifest:
        m = Manifest(checkpoint_id, time, peers, fingerprint, extra or {}, _time.time(), parts)
        path = os.path.join(self.location, checkpoint_id, "MANIFEST")
        with open(path + ".tmp", "wb") as f:
            pickle.dump(m, f)
        os.replace(path + ".tmp", path)
        ids = self._ids()
        for old in ids[: -self.keep]:
            for name in os.listdir(os.path.join(self.location, old)):
                os.remove(os.path.join(self.location, old, name))
            os.rmdir(os.path.join(self.location, old))
        return m

    def _ids(self) -> List[str]:
        if not os.path.isdir(self.location):
            return []
        return sorted(
            d
            for d in os.listdir(self.location)
            if os.path.exists(os.path.join(self.location, d, "MANIFEST"))
        )

    def latest(self) -> Optional[Manifest]:
        ids = self._ids()
        if not ids:
            return None
        with open(os.path.join(self.location, ids[-1], "MANIFEST"), "rb") as f:
            return pickle.load(f)

    def read_states(self, manifest: Manifest) -> List[Dict[str, OperatorState]]:
        out = []
        for part in sorted(manifest.parts, key=lambda p: p["worker"]):
            with open(os.path.join(self.location, part["file"]), "rb") as f:
                out.append(pickle.load(f))
        return out


def install(monkeypatch: Any) -> None:
    """Put the stand-ins where the session looks for the real modules."""

    class CheckpointError(errors.TimelyError):
        pass

    class RecoveryError(errors.TimelyError):
        pass

    if not hasattr(errors, "CheckpointError"):
        monkeypatch.setattr(errors, "CheckpointError", CheckpointError, raising=False)
    if not hasattr(errors, "RecoveryError"):
        monkeypatch.setattr(errors, "RecoveryError", RecoveryError, raising=False)
    snapshot = types.ModuleType("timelypy.recovery.snapshot")
    store = types.ModuleType("timelypy.recovery.store")
    for f in (closed_at, snapshot_worker, restore_worker, program_fingerprint):
        setattr(snapshot, f.__name__, f)
    Manifest.__module__ = CheckpointStore.__module__ = "timelypy.recovery.store"
    store.Manifest = Manifest  # type: ignore[attr-defined]
    store.CheckpointStore = CheckpointStore  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "timelypy.recovery.snapshot", snapshot)
    monkeypatch.setitem(sys.modules, "timelypy.recovery.store", store)

    def logged(original):
        def send(self, *args):
            if len(args) == 1:
                updates = list(args[0])
                args = (updates,)
            else:
                updates = list(zip(*args))
            if not hasattr(self, "standin_log"):
                self.standin_log = []
            self.standin_log.extend(updates)
            return original(self, *args)

        return send

    original_init = CapturedCollection.__init__

    def init(self, *args, **kwargs):
        original_init(self, *args, **kwargs)
        _CAPTURES[self] = _BUILDING[-1] if _BUILDING else None

    original_dataflow = Worker.dataflow

    def dataflow(self, *args, **kwargs):
        _BUILDING.append(self)
        try:
            return original_dataflow(self, *args, **kwargs)
        finally:
            _BUILDING.pop()

    monkeypatch.setattr(Worker, "dataflow", dataflow)

    monkeypatch.setattr(CapturedCollection, "__init__", init)
    monkeypatch.setattr(InputSession, "send_updates", logged(InputSession.send_updates))
    monkeypatch.setattr(InputSession, "send_columns", logged(InputSession.send_columns))
