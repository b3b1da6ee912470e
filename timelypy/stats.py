"""Operator statistics: a sink that counts per operator on one worker, and their sum over workers.

A :class:`StatsSink` on a worker's instrument hub (:mod:`timelypy.instrument`) counts, per
operator (keyed by ``(scope name, operator index)``, with the operator's name): records and
batches in and out, times scheduled, time spent, and for arrange operators the size of their
trace (updates, batches, keys) and its compaction frontier (``since``). Its
:meth:`StatsSink.snapshot` is plain data (dicts, lists, strings and numbers) that travels from
worker processes and Ray actors with pickle or msgpack. A :class:`Statistics` object merges the
snapshots of every worker: per worker or summed, as a rich table, as JSON, or as short
per-operator annotations for a picture of the graph.

>>> import timelypy as tp
>>> from timelypy.stats import Statistics
>>> def build(worker):
...     def dataflow(scope):
...         nums_in, nums = scope.new_collection()
...         return nums_in, nums.filter(lambda x: x % 2 == 0).probe()
...     nums_in, probe = worker.dataflow(dataflow)
...     for x in range(10):
...         nums_in.insert(x)
>>> stats = Statistics()
>>> _ = tp.execute(build, statistics=stats)
>>> [op["records_out"] for op in stats.find("filter")]
[5]

Collecting is opt-in (``execute(..., statistics=...)``, ``open_session(..., statistics=True)``):
a worker without sinks pays one ``if`` per hook. With the sink, every operator run costs two
events. Trace sizes are read only when a snapshot is taken.

This module imports only :mod:`timelypy.instrument` (and rich, or Ray, when asked to render or
export), so every layer may use it.
"""

from __future__ import annotations

import io
import json
import sys
from typing import Any, Dict, Iterable, List, Mapping, Optional, Tuple

from .instrument import (
    ArrangementCreated,
    BatchProduced,
    OperatorFinished,
    OperatorScheduled,
    PathCounted,
)

__all__ = [
    "StatsSink",
    "Statistics",
    "OperatorKey",
    "COUNTERS",
    "export_ray_metrics",
    "in_ray_actor",
]

OperatorKey = Tuple[str, int]
"""``(scope name, operator index)``: how statistics name an operator."""

COUNTERS = ("records_in", "records_out", "batches_in", "batches_out", "scheduled", "elapsed")
"""The per-operator counters, summed over workers."""

ARRANGEMENT = ("updates", "batches", "keys")
"""The sizes of an arrange operator's trace, summed over workers."""

_NAME, _RIN, _ROUT, _BIN, _BOUT, _SCHED, _ELAPSED = range(7)


def _plain_time(t: Any) -> Any:
    """A time as plain data: ints and floats as they are, anything else as its ``repr``."""
    return t if isinstance(t, (int, float)) and not isinstance(t, bool) else repr(t)


class StatsSink:
    """An instrument sink collecting one worker's per-operator statistics.

    Register it before building dataflows (``worker.instruments.add(StatsSink(worker.index))``)
    so that it sees the arrange operators being built. Not thread-safe: one sink per worker.
    """

    def __init__(self, worker: int = 0) -> None:
        self.worker = worker
        self._ops: Dict[OperatorKey, List[Any]] = {}
        self._stack: List[OperatorKey] = []
        self._unattributed: Dict[int, int] = {}
        self._traces: Dict[OperatorKey, Tuple[str, Any]] = {}
        self._paths: Dict[OperatorKey, Any] = {}  # operators counting the path of their batches

    def _entry(self, key: OperatorKey, name: str) -> List[Any]:
        entry = self._ops.get(key)
        if entry is None:
            entry = self._ops[key] = [name, 0, 0, 0, 0, 0, 0.0]
        return entry

    def __call__(self, event: Any) -> None:
        kind = type(event)
        if kind is BatchProduced:
            stack = self._stack
            if stack and stack[-1][1] == event.operator:
                self._ops[stack[-1]][_BOUT] += 1
            else:  # an input handle flushing between runs: its operator's next run takes it
                self._unattributed[event.operator] = self._unattributed.get(event.operator, 0) + 1
        elif kind is OperatorScheduled:
            key = (event.scope, event.operator)
            self._entry(key, event.name)
            self._stack.append(key)
        elif kind is OperatorFinished:
            self._finished(event)
        elif kind is ArrangementCreated:
            self._traces[(event.scope, event.operator)] = (event.name, event.trace)
        elif kind is PathCounted:
            self._paths[(event.scope, event.operator)] = event.counters

    def _finished(self, event: Any) -> None:
        key = (event.scope, event.operator)
        if self._stack and self._stack[-1] == key:
            self._stack.pop()
        entry = self._entry(key, event.name)
        entry[_RIN] += event.records_in
        entry[_ROUT] += event.records_out
        entry[_BIN] += event.batches_in
        entry[_SCHED] += 1
        entry[_ELAPSED] += event.elapsed
        if event.records_out and self._unattributed:
            entry[_BOUT] += self._unattributed.pop(event.operator, 0)

    def snapshot(self) -> Dict[str, Any]:
        """This worker's statistics as plain data: ``{"worker": i, "operators": [...]}`` with
        one dict per operator (``scope``, ``operator``, ``name``, the :data:`COUNTERS` and
        ``arrangement``: None or ``{"updates", "batches", "keys", "since"}``). Reads the
        traces' sizes now: O(keys) per arrangement."""
        out = []
        for key in sorted(set(self._ops) | set(self._traces)):
            entry = self._ops.get(key) or [self._traces[key][0], 0, 0, 0, 0, 0, 0.0]
            row: Dict[str, Any] = {"scope": key[0], "operator": key[1], "name": entry[_NAME]}
            row.update(zip(COUNTERS, entry[1:]))
            row["arrangement"] = _trace_sizes(self._traces[key][1]) if key in self._traces else None
            counters = self._paths.get(key)
            if counters is not None:
                row["path"] = _named_path(counters.object_batches, counters.column_batches)
            out.append(row)
        return {"worker": self.worker, "operators": out}


def _trace_sizes(trace: Any) -> Dict[str, Any]:
    """Updates, batches, keys and the compaction frontier of a live trace (of a trace dropped
    when its dataflow completed: its sizes then)."""
    if trace.dropped_sizes is not None:
        return {
            **trace.dropped_sizes,
            "since": [_plain_time(t) for t in trace.since],
            "path": _path(trace),
        }
    return {
        "updates": trace.stored_updates(),
        "batches": len(trace.batches),
        "keys": trace.key_count(),
        "bytes": trace.stored_bytes(),
        "since": [_plain_time(t) for t in trace.since],
        "path": _path(trace),
    }


def _path(trace: Any) -> str:
    """Which path a trace's batches took: ``"columns"``, ``"objects"``, ``"mixed"``, or
    ``"none"`` before the first batch."""
    objects, columns = trace.sealed_paths
    return _named_path(objects, columns)


def _named_path(objects: int, columns: int) -> str:
    if columns and objects:
        return "mixed"
    return "columns" if columns else "objects" if objects else "none"


class Statistics:
    """Per-operator statistics of a run, per worker and summed over workers.

    Filled by ``execute(build, statistics=stats)`` after the run, or returned by
    ``session.stats()``; or build one from snapshots (:meth:`add`, :meth:`from_dict`). Plain
    data inside: it pickles, and :meth:`to_dict` is JSON- and msgpack-able.

    >>> from timelypy.stats import Statistics
    >>> stats = Statistics([{"worker": 0, "operators": [{"scope": "dataflow1", "operator": 1,
    ...     "name": "Map", "records_in": 3, "records_out": 3, "batches_in": 1,
    ...     "batches_out": 1, "scheduled": 2, "elapsed": 0.001, "arrangement": None}]}])
    >>> stats.operator("dataflow1", 1)["records_out"]
    3
    """

    def __init__(self, snapshots: Optional[Iterable[Mapping[str, Any]]] = None) -> None:
        self.workers: Dict[int, List[Dict[str, Any]]] = {}
        """Every worker's operators (:meth:`StatsSink.snapshot`), by worker index."""
        for snapshot in snapshots or ():
            self.add(snapshot)

    def add(self, snapshot: Mapping[str, Any]) -> None:
        """Take one worker's :meth:`StatsSink.snapshot` (replacing an earlier one of it)."""
        self.workers[int(snapshot["worker"])] = [dict(op) for op in snapshot["operators"]]

    def update(self, other: "Statistics") -> None:
        """Take every worker of ``other`` (replacing those already here)."""
        for worker, ops in other.workers.items():
            self.workers[worker] = [dict(op) for op in ops]

    def clear(self) -> None:
        """Forget every worker."""
        self.workers.clear()

    def __bool__(self) -> bool:
        return bool(self.workers)

    def per_worker(self, worker: int) -> Dict[OperatorKey, Dict[str, Any]]:
        """One worker's operators, by ``(scope, operator index)``."""
        return {(op["scope"], op["operator"]): op for op in self.workers.get(worker, [])}

    def operators(self) -> List[Dict[str, Any]]:
        """Every operator summed over the workers, ordered by scope and index. Arrangement
        sizes are summed too; ``since`` lists the distinct frontiers the workers report."""
        summed: Dict[OperatorKey, Dict[str, Any]] = {}
        for worker in sorted(self.workers):
            for op in self.workers[worker]:
                key = (op["scope"], op["operator"])
                total = summed.get(key)
                if total is None:
                    total = summed[key] = {
                        "scope": key[0],
                        "operator": key[1],
                        "name": op["name"],
                        "workers": 0,
                        **{c: 0 for c in COUNTERS},
                        "arrangement": None,
                    }
                total["workers"] += 1
                for c in COUNTERS:
                    total[c] += op.get(c, 0)
                _add_arrangement(total, op.get("arrangement"))
                path = op.get("path")
                if path is not None:
                    known = total.get("path")
                    total["path"] = path if known in (None, "none", path) else "mixed"
        return [summed[k] for k in sorted(summed)]

    def operator(self, scope: str, index: int, worker: Optional[int] = None) -> Dict[str, Any]:
        """One operator, summed over workers (or of ``worker``); KeyError if unknown."""
        if worker is not None:
            return self.per_worker(worker)[(scope, index)]
        for op in self.operators():
            if (op["scope"], op["operator"]) == (scope, index):
                return op
        raise KeyError((scope, index))

    def find(self, name: str) -> List[Dict[str, Any]]:
        """The operators (summed over workers) whose name contains ``name``, ignoring case, in
        graph order (a fused chain of maps and filters is one operator named like
        ``Linear[map, filter]``)."""
        text = name.lower()
        return [op for op in self.operators() if text in op["name"].lower()]

    def to_dict(self) -> Dict[str, Any]:
        """Plain data: ``{"workers": [snapshot, ...], "operators": [summed, ...]}``."""
        return {
            "workers": [
                {"worker": w, "operators": [dict(op) for op in self.workers[w]]}
                for w in sorted(self.workers)
            ],
            "operators": self.operators(),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "Statistics":
        """The inverse of :meth:`to_dict` (the summed part is recomputed)."""
        return cls(data.get("workers", ()))

    def to_json(self, **kwargs: Any) -> str:
        """:meth:`to_dict` as JSON (``kwargs`` go to :func:`json.dumps`)."""
        return json.dumps(self.to_dict(), **kwargs)

    def annotations(self) -> Dict[OperatorKey, str]:
        """Short text per operator for a picture of the graph, by ``(scope, index)``:
        records in and out, time spent and runs, and the trace size of an arrangement."""
        out: Dict[OperatorKey, str] = {}
        for op in self.operators():
            text = (
                f"in {_count(op['records_in'])} / out {_count(op['records_out'])}, "
                f"{_seconds(op['elapsed'])} in {op['scheduled']} runs"
            )
            if op["arrangement"]:
                a = op["arrangement"]
                text += f", trace {_count(a['updates'])} updates / {_count(a['keys'])} keys"
                if a.get("path") in ("columns", "mixed"):
                    text += f" ({a['path']})"
            out[(op["scope"], op["operator"])] = text
        return out

    def table(self, worker: Optional[int] = None, title: Optional[str] = None) -> Any:
        """A :class:`rich.table.Table` of the operators, summed over the workers (or of one
        ``worker``); print it with ``rich.print`` or render it with :meth:`render`."""
        from rich.table import Table
        from rich.text import Text

        rows = (
            self.operators()
            if worker is None
            else [dict(op) for op in self.workers.get(worker, [])]
        )
        table = Table(
            title=title
            or (
                "operator statistics"
                + (
                    f", worker {worker}"
                    if worker is not None
                    else f", {len(self.workers)} worker{'s' if len(self.workers) != 1 else ''}"
                )
            )
        )
        for column in (
            "scope",
            "#",
            "operator",
            "records in",
            "records out",
            "batches in",
            "batches out",
            "runs",
            "time",
            "trace updates",
            "batches",
            "keys",
            "since",
        ):
            table.add_column(
                column,
                justify="left" if column in ("scope", "operator", "since") else "right",
                no_wrap=column in ("scope", "operator"),
            )
        for op in rows:
            a = op.get("arrangement") or {}
            cells = [
                op["scope"],
                str(op["operator"]),
                op["name"],
                *(_count(op[c]) for c in COUNTERS[:5]),
                _seconds(op["elapsed"]),
                *(_count(a[c]) if a else "" for c in ARRANGEMENT),
                _frontier(a.get("since")) if a else "",
            ]
            # Text, not markup: rich would read the "[map]" of "Linear[map]" as a style tag
            # and drop it, and the table would name operators unlike the graph picture.
            table.add_row(*(Text(cell) for cell in cells))
        return table

    def render(self, worker: Optional[int] = None, width: int = 200) -> str:
        """:meth:`table` as plain text (at most ``width`` characters wide)."""
        from rich.console import Console

        console = Console(width=width, record=True, file=_Discard(), color_system=None)
        console.print(self.table(worker))
        return console.export_text()

    def __str__(self) -> str:
        return self.render()

    def __repr__(self) -> str:
        return f"Statistics(workers={sorted(self.workers)}, operators={len(self.operators())})"


class _Discard(io.StringIO):
    """A file that drops what is written (rich records the text instead)."""

    def write(self, text: str) -> int:
        """Drop ``text``; report it written."""
        return len(text)


def _add_arrangement(total: Dict[str, Any], arrangement: Optional[Mapping[str, Any]]) -> None:
    if not arrangement:
        return
    mine = total["arrangement"]
    if mine is None:
        mine = total["arrangement"] = {c: 0 for c in ARRANGEMENT}
        mine["since"] = []
    for c in ARRANGEMENT:
        mine[c] += arrangement.get(c, 0)
    path = arrangement.get("path")
    if path is not None:
        known = mine.get("path")
        mine["path"] = path if known in (None, "none", path) else "mixed"
    if "bytes" in arrangement:
        size = arrangement["bytes"]
        mine["bytes"] = (
            None if size is None or mine.get("bytes", 0) is None else mine.get("bytes", 0) + size
        )
    since = list(arrangement.get("since", []))
    if since not in mine["since"]:
        mine["since"].append(since)


def _count(n: Any) -> str:
    n = int(n)
    if n >= 10_000_000:
        return f"{n / 1e6:.1f}M"
    if n >= 100_000:
        return f"{n / 1e3:.0f}k"
    return str(n)


def _seconds(s: float) -> str:
    if s >= 1:
        return f"{s:.2f} s"
    if s >= 1e-3:
        return f"{s * 1e3:.1f} ms"
    return f"{s * 1e6:.0f} µs"


def _frontier(since: Any) -> str:
    """A frontier (or a list of the workers' distinct frontiers) as short text."""
    if not since:
        return "[]"
    if all(isinstance(f, list) for f in since):
        return " | ".join("[" + ", ".join(map(str, f)) + "]" for f in since)
    return "[" + ", ".join(map(str, since)) + "]"


# ----------------------------------------------------------------------------- Ray metrics
def in_ray_actor() -> bool:
    """This code runs inside a Ray actor (Ray already imported and an actor id set)."""
    ray = sys.modules.get("ray")
    if ray is None:
        return False
    try:
        return bool(ray.is_initialized()) and ray.get_runtime_context().get_actor_id() is not None
    except Exception:  # noqa: BLE001 - an old or half-initialised Ray
        return False


_RAY_METRICS: Dict[str, Any] = {}
_RAY_EXPORTED: Dict[Tuple[int, str, int], Dict[str, float]] = {}


def _ray_metric(kind: str, name: str, description: str) -> Any:
    metric = _RAY_METRICS.get(name)
    if metric is None:
        from ray.util import metrics

        cls = metrics.Counter if kind == "counter" else metrics.Gauge
        metric = _RAY_METRICS[name] = cls(
            name, description=description, tag_keys=("worker", "operator")
        )
    return metric


def export_ray_metrics(snapshot: Mapping[str, Any]) -> int:
    """Export one worker's :meth:`StatsSink.snapshot` as Ray metrics (``ray.util.metrics``):
    counters ``timelypy_operator_<counter>`` (increased by what is new since the last export)
    and gauges ``timelypy_arrangement_<size>``, tagged with ``worker`` and ``operator``
    (``scope/index name``). Call it inside a Ray actor; returns the number of values set."""
    worker = int(snapshot["worker"])
    n = 0
    for op in snapshot["operators"]:
        tags = {"worker": str(worker), "operator": f"{op['scope']}/{op['operator']} {op['name']}"}
        before = _RAY_EXPORTED.setdefault((worker, op["scope"], op["operator"]), {})
        for c in COUNTERS:
            delta = op[c] - before.get(c, 0)
            if delta > 0:
                _ray_metric(
                    "counter",
                    f"timelypy_operator_{c}",
                    f"timelypy: {c.replace('_', ' ')} per operator",
                ).inc(delta, tags=tags)
                before[c] = op[c]
                n += 1
        for c in ARRANGEMENT if op.get("arrangement") else ():
            _ray_metric(
                "gauge", f"timelypy_arrangement_{c}", f"timelypy: {c} in an arrangement's trace"
            ).set(op["arrangement"][c], tags=tags)
            n += 1
    return n
