"""Fused vs materialised linear chains: records per second through map > filter > map > flat_map.

The chain (on ints)::

    c.map(x * 3).filter(x % 4 != 0).map(x + 1).flat_map((x, -x))

runs three ways, each in a fresh dataflow fed ``--records`` records at time 0 (inserted with
``InputSession.insert_many``, then advance, flush, step until the probe passes):

* ``fused``: the default -- the four stages are one ``Linear[map>filter>map>flat_map]`` operator;
* ``materialised``: each stage is forced into its own operator by wrapping its stream,
  ``Collection(scope, c.map(f).inner)``, so every stage builds and pushes its own batches;
* ``input_only``: the input probed directly, to separate ingestion from the chain's cost.

For scale, with no dataflow: ``python_loop`` applies the stages to the same ``(data, time,
diff)`` list one list comprehension per stage (intermediate lists, as unfused stages do), and
``python_composed`` runs all four stages in ONE comprehension per record (the floor a fused
operator compiling the chain into one comprehension can reach). Best of ``--repeat`` runs.

    python benchmarks/linear_fusion.py --records 1000000

``--temporal`` puts a temporal filter after the second map (``lower = x % 7``, ``upper = x % 7
+ 5``: each record enters at its lower bound and leaves at its upper one, two updates out of
one), in the dataflow and in both Python baselines (the same stage function).
"""

from __future__ import annotations

import argparse
import gc
import re
from typing import Any, Callable, Dict, List, Tuple

from common import (
    add_gc_argument,
    add_profile_argument,
    emit,
    environment,
    error_info,
    gc_mode,
    now,
    profiled,
)

import timelypy
from timelypy.differential import Collection
from timelypy.differential.temporal import presence


def f1(x):
    return x * 3


def p(x):
    return x % 4 != 0


def f2(x):
    return x + 1


def f3(x):
    return (x, -x)


def lower(x):
    return x % 7


def upper(x):
    return x % 7 + 5


STAGES: List[Tuple[str, Callable]] = [("map", f1), ("filter", p), ("map", f2), ("flat_map", f3)]
WINDOW = presence(lower, upper)


def _chain(c: Collection, materialise: bool) -> Collection:
    for kind, f in STAGES:
        c = c.temporal_filter(lower, upper) if kind == "temporal" else getattr(c, kind)(f)
        if materialise:
            c = Collection(c.scope, c.inner)
    return c


def run_once(records: List[int], mode: str, batch: int) -> Dict[str, Any]:
    def build(worker):
        def dataflow(scope):
            session, coll = scope.new_collection()
            out = coll if mode == "input_only" else _chain(coll, mode == "materialised")
            return session, out.probe(), scope.describe()

        session, probe, picture = worker.dataflow(dataflow)
        gc.collect()
        n = len(records)
        step = batch if batch > 0 else n
        t0 = now()
        for start in range(0, n, step):
            session.insert_many(records[start : start + step])
            if batch > 0:
                session.flush()
                worker.step()
        session.advance_to(1)
        session.flush()
        worker.step_until(probe, 1)
        return {"seconds": now() - t0, "operators": _linear_ops(picture)}

    return timelypy.execute(build)[0]


def _linear_ops(picture: str) -> List[str]:
    """The names of the dataflow's linear operators, from ``scope.describe()``."""
    return re.findall(r"Linear\[[^\]]*\]", picture)


def python_loop(records: List[int]) -> float:
    data = [(x, 0, 1) for x in records]
    t0 = now()
    data = [(f1(d), t, r) for d, t, r in data]
    data = [u for u in data if p(u[0])]
    data = [(f2(d), t, r) for d, t, r in data]
    if len(STAGES) > 4:
        data = [(d, t2, r * s) for d, t, r in data for t2, s in WINDOW(d, t)]
    data = [(x, t, r) for d, t, r in data for x in f3(d)]
    return now() - t0


def python_composed(records: List[int]) -> float:
    """The same chain as ONE comprehension (stages composed per record, no intermediate lists):
    what a fused operator could reach, e.g. by generating this comprehension from the stages."""
    data = [(x, 0, 1) for x in records]
    t0 = now()
    if len(STAGES) > 4:
        [
            (x, t2, r * s)
            for d, t, r in data
            for y in (f1(d),)
            if p(y)
            for z in (f2(y),)
            for t2, s in WINDOW(z, t)
            for x in f3(z)
        ]
    else:
        [(x, t, r) for d, t, r in data for y in (f1(d),) if p(y) for x in f3(f2(y))]
    return now() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument(
        "--batch",
        type=int,
        default=0,
        help="flush and step every this many records (0: one flush at the end)",
    )
    ap.add_argument(
        "--temporal", action="store_true", help="a temporal filter after the second map"
    )
    add_gc_argument(ap)
    add_profile_argument(ap)
    args = ap.parse_args()
    if args.temporal:
        STAGES.insert(3, ("temporal", WINDOW))
    records = list(range(args.records))
    result: Dict[str, Any] = {
        "benchmark": "linear_fusion",
        "parameters": {
            "gc": args.gc,
            "records": args.records,
            "repeat": args.repeat,
            "batch": args.batch,
            "chain": ">".join(k for k, _ in STAGES),
            "temporal": args.temporal,
        },
        **environment(),
    }
    times: Dict[str, float] = {}
    modes = ("input_only", "fused", "materialised")
    runs: Dict[str, List[Dict[str, Any]]] = {m: [] for m in modes}
    failed: Dict[str, Dict[str, str]] = {}
    py_runs: List[float] = []
    pc_runs: List[float] = []
    # Interleave the modes so that load from other processes hits them alike.
    for _ in range(args.repeat):
        py_runs.append(python_loop(records))
        pc_runs.append(python_composed(records))
        for mode in modes:
            if mode in failed:
                continue
            try:
                with gc_mode(args.gc):
                    runs[mode].append(run_once(records, mode, args.batch))
            except Exception as exc:
                failed[mode] = error_info(exc)
    for mode in modes:
        if mode in failed:
            result[mode] = failed[mode]
            continue
        secs = [r["seconds"] for r in runs[mode]]
        best = min(secs)
        times[mode] = best
        result[mode] = {
            "seconds": round(best, 4),
            "all_runs_s": [round(s, 4) for s in secs],
            "records_per_s": round(args.records / best),
            "linear_operators": runs[mode][0]["operators"],
        }
    py = min(py_runs)
    result["python_loop"] = {
        "seconds": round(py, 4),
        "records_per_s": round(args.records / py),
        "note": "one list comprehension per stage",
    }
    pc = min(pc_runs)
    result["python_composed"] = {
        "seconds": round(pc, 4),
        "records_per_s": round(args.records / pc),
        "note": "all stages in one comprehension per record",
    }
    if "fused" in times and "materialised" in times:
        base = times.get("input_only", 0.0)
        fused_chain = times["fused"] - base
        mat_chain = times["materialised"] - base
        result["chain_only"] = {
            "note": "seconds minus input_only (ingestion, progress, probe)",
            "fused_s": round(fused_chain, 4),
            "materialised_s": round(mat_chain, 4),
            "fused_records_per_s": round(args.records / fused_chain) if fused_chain > 0 else None,
            "materialised_records_per_s": round(args.records / mat_chain)
            if mat_chain > 0
            else None,
        }
        result["fused_speedup"] = round(times["materialised"] / times["fused"], 2)
        result["fused_chain_speedup"] = (
            round(mat_chain / fused_chain, 2) if fused_chain > 0 else None
        )
    emit(result)


if __name__ == "__main__":
    with profiled():
        main()
