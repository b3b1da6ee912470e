"""count / distinct / sum at ``int`` times: column path against object path, alternated.

One dataflow per run, ``records.<op>().probe()`` on one worker, with ``TIMELYPY_COLUMNS=auto``
(columns where records allow) and ``off`` alternated run by run (``--repeat`` pairs, each path
first in turn). Records are ``int`` for ``count`` and ``distinct``, ``(key, value)`` pairs of
``int`` for ``sum`` (``--keys`` distinct keys). Two phases, timed separately:

* **load**: ``--load`` records inserted at time 0, then advance and step until the probe
  passes (``load_s``);
* **open loop**: ``--changes`` changes (a record removed, another inserted), each at its own
  time, all sent and advanced before stepping, then stepped until the probe passes
  (``changes_s``, and ``us_per_change``).

The JSON reports the median of each path and phase, every run, and the batches the reduce took
on each path (``column_batches`` / ``object_batches``; count and distinct run fused, without an
arrangement, so both are 0 for them). Answers are compared between the paths (``same_answers``:
the final content of both runs).

    python benchmarks/reduce_columns.py --op count --load 1000000 --changes 100000
    python benchmarks/reduce_columns.py --op sum --keys 100000 --load 1000000 --changes 100000
"""

from __future__ import annotations

import argparse
import os
import random
from typing import Any, Dict, List, Tuple

from common import add_gc_argument, emit, environment, gc_mode, median, note, now  # noqa: E402

import timelypy
from timelypy.differential.reduce import ReduceOperator
from timelypy.differential.trace.layout import COLUMNS_VARIABLE


def make_workload(op: str, keys: int, load: int, changes: int, seed: int) -> Tuple[List[Any], Any]:
    """The loaded records and the changes ``[(removed, inserted), ...]``."""
    rng = random.Random(seed)
    if op == "sum":
        records: List[Any] = [
            (rng.randrange(keys), rng.randrange(-1000, 1000)) for _ in range(load)
        ]

        def fresh() -> Any:
            return (rng.randrange(keys), rng.randrange(-1000, 1000))
    else:
        records = [rng.randrange(keys) for _ in range(load)]

        def fresh() -> Any:
            return rng.randrange(keys)

    current = list(records)
    plan = []
    for _ in range(changes):
        i = rng.randrange(load)
        new = fresh()
        plan.append((current[i], new))
        current[i] = new
    return records, plan


def one_run(op: str, records: List[Any], plan: Any) -> Dict[str, Any]:
    """Load, then the open-loop changes, on one worker; seconds and the final content."""

    def build(worker: Any) -> Dict[str, Any]:
        holder: Dict[str, Any] = {}

        def dataflow(scope: Any) -> Any:
            session, coll = scope.new_collection()
            out = getattr(coll, op)()
            holder["graph"] = scope.subgraph
            return session, out.probe(), out.capture()

        session, probe, cap = worker.dataflow(dataflow)
        t0 = now()
        session.insert_many(records)
        session.advance_to(1)
        session.flush()
        worker.step_until(probe, 1)
        load_s = now() - t0
        t1 = now()
        t = 1
        for old, new in plan:
            session.remove(old)
            session.insert(new)
            t += 1
            session.advance_to(t)
        session.flush()
        worker.step_until(probe, t)
        changes_s = now() - t1
        reducers = [c for c in holder["graph"].children if isinstance(c, ReduceOperator)]
        return {
            "load_s": round(load_s, 4),
            "changes_s": round(changes_s, 4),
            "column_batches": sum(r.column_batches for r in reducers),
            "object_batches": sum(r.object_batches for r in reducers),
            "_final": cap.at(t),
        }

    return timelypy.execute(build)[0]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--op", choices=["count", "distinct", "sum"], default="count")
    ap.add_argument("--keys", type=int, default=None, help="distinct keys (default: load / 2)")
    ap.add_argument("--load", type=int, default=100_000)
    ap.add_argument("--changes", type=int, default=10_000)
    ap.add_argument("--repeat", type=int, default=2, help="pairs of runs (auto, off)")
    ap.add_argument("--seed", type=int, default=1)
    add_gc_argument(ap)
    args = ap.parse_args()
    keys = args.keys if args.keys is not None else max(1, args.load // 2)
    records, plan = make_workload(args.op, keys, args.load, args.changes, args.seed)
    runs: Dict[str, List[Dict[str, Any]]] = {"auto": [], "off": []}
    finals: Dict[str, Any] = {}
    for i in range(args.repeat):
        for mode in ("auto", "off") if i % 2 == 0 else ("off", "auto"):
            os.environ[COLUMNS_VARIABLE] = mode
            note(f"{args.op} {mode} run {i + 1} ...")
            with gc_mode(args.gc):
                r = one_run(args.op, records, plan)
            finals[mode] = r.pop("_final")
            runs[mode].append(r)
    os.environ.pop(COLUMNS_VARIABLE, None)
    summary = {
        mode: {
            "load_s": round(median([r["load_s"] for r in rs]), 4),
            "changes_s": round(median([r["changes_s"] for r in rs]), 4),
            "us_per_change": round(
                1e6 * median([r["changes_s"] for r in rs]) / max(1, len(plan)), 2
            ),
            "column_batches": rs[-1]["column_batches"],
            "object_batches": rs[-1]["object_batches"],
        }
        for mode, rs in runs.items()
    }
    emit(
        {
            "benchmark": "reduce_columns",
            "parameters": {
                "op": args.op,
                "keys": keys,
                "load": args.load,
                "changes": args.changes,
                "repeat": args.repeat,
                "seed": args.seed,
                "gc": args.gc,
            },
            **environment(),
            "columns": summary["auto"],
            "objects": summary["off"],
            "same_answers": finals["auto"] == finals["off"],
            "runs": runs,
        }
    )


if __name__ == "__main__":
    main()
