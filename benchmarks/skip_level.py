"""Skip-level management (the Differential Dataflow book's first program) at scale.

Load, open-loop and closed-loop.

``manages`` holds ``(manager, person)`` pairs; the dataflow is the book's

    manages.map(lambda mp: (mp[1], mp[0])).join(manages).probe()

(no inspect). Phases, each timed inside the worker:

* load: N people ``(p // 2, p)`` at time 0, ``advance_to(1)``, flush, step until the probe
  passes;
* open loop: N - 1 modifications ``advance_to(p); remove((p // 2, p)); insert((p // 3, p))``,
  flushing (and stepping once, without waiting) every ``--open-loop-batch`` modifications, and
  waiting for the probe only at the end -- a throughput number, as in the book;
* closed loop (a fresh dataflow): load again, then for the first ``--latency-rounds``
  modifications: modify, advance, flush, step until the probe passes -- per-modification
  latency (median / p99).

The naive baseline keeps ``manager[person]`` in a dict and recomputes the whole skip-level
join from scratch after each modification; for large N only ``--naive-samples`` recomputes are
timed and the total is extrapolated (the JSON says so).

    python benchmarks/skip_level.py --size 100000 --workers 1 --backend inline --latency-rounds 1000
"""

from __future__ import annotations

import argparse
import gc
import sys
from typing import Any, Dict, List, Tuple

from common import (  # noqa: E402
    add_gc_argument,
    add_profile_argument,
    emit,
    environment,
    error_info,
    gc_mode,
    latency_stats_us,
    note,
    now,
    profiled,
    sample_indices,
    slowest,
    speedup,
)

import timelypy

# ----------------------------------------------------------------------------- dataflow runs


def _build_skip_level(worker: Any, capture: bool = False):
    def dataflow(scope):
        session, manages = scope.new_collection()
        skips = manages.map(lambda mp: (mp[1], mp[0])).join(manages)
        probe = skips.probe()
        cap = skips.capture() if capture else None
        return session, probe, cap

    return worker.dataflow(dataflow)


def _load(worker: Any, session: Any, probe: Any, size: int) -> float:
    index, peers = worker.index, worker.peers
    start = now()
    insert = session.insert
    for p in range(index, size, peers):
        insert((p // 2, p))
    session.advance_to(1)
    session.flush()
    worker.step_until(probe, session.time)
    return now() - start


def open_loop_run(size: int, batch: int, check: bool):
    """``build`` for load + open-loop modifications."""

    def build(worker):
        gc.collect()
        session, probe, cap = _build_skip_level(worker, capture=check)
        load_s = _load(worker, session, probe, size)
        index, peers = worker.index, worker.peers
        start = now()
        advance, remove, insert = session.advance_to, session.remove, session.insert
        mods = 0
        for p in range(1, size):
            advance(p)
            if p % peers == index:
                remove((p // 2, p))
                insert((p // 3, p))
                mods += 1
            if batch and p % batch == 0:
                session.flush()
                worker.step()
        session.advance_to(size)
        session.flush()
        worker.step_until(probe, session.time)
        open_s = now() - start
        out: Dict[str, Any] = {"load_s": load_s, "open_loop_s": open_s, "mods": mods}
        if check:
            out["final"] = cap.at(size)
        return out

    return build


def closed_loop_run(size: int, rounds: int, empty_rounds: int = 200):
    """``build`` for load + closed-loop (one modification at a time) latencies."""

    def build(worker):
        gc.collect()
        session, probe, _ = _build_skip_level(worker)
        load_s = _load(worker, session, probe, size)
        index, peers = worker.index, worker.peers
        lat: List[float] = []
        step_until = worker.step_until
        last = min(size, rounds + 1)
        for p in range(1, last):
            t0 = now()
            if p % peers == index:
                session.remove((p // 2, p))
                session.insert((p // 3, p))
            session.advance_to(p + 1)
            session.flush()
            step_until(probe, p + 1)
            lat.append(now() - t0)
        # The fixed cost of a round: advance time only, no data (progress tracking + steps).
        empty: List[float] = []
        t = session.time
        for _ in range(empty_rounds):
            t0 = now()
            t += 1
            session.advance_to(t)
            session.flush()
            step_until(probe, t)
            empty.append(now() - t0)
        return {"load_s": load_s, "latencies": lat, "empty": empty}

    return build


# ----------------------------------------------------------------------------- naive baseline


def naive_skip_level(manager: Dict[int, int]) -> List[Tuple[int, Tuple[int, int]]]:
    """From scratch: ``(m1, (m2, p))`` for every ``m2 -> m1 -> p`` chain."""
    reports: Dict[int, List[int]] = {}
    for p, m in manager.items():
        r = reports.get(m)
        if r is None:
            reports[m] = [p]
        else:
            r.append(p)
    out = []
    append = out.append
    for m1, m2 in manager.items():
        ps = reports.get(m1)
        if ps:
            for p in ps:
                append((m1, (m2, p)))
    return out


def naive_run(size: int, samples: int) -> Dict[str, Any]:
    manager = {p: p // 2 for p in range(size)}
    t0 = now()
    loaded = naive_skip_level(manager)
    load_s = now() - t0
    mods = max(0, size - 1)
    chosen = set(sample_indices(mods, samples))
    times: List[float] = []
    for i in range(mods):
        p = i + 1
        manager[p] = p // 3
        if i in chosen:
            t0 = now()
            naive_skip_level(manager)
            times.append(now() - t0)
    per = sum(times) / len(times) if times else 0.0
    return {
        "load_s": round(load_s, 4),
        "output_size_after_load": len(loaded),
        "recompute_samples": len(times),
        "sampled": len(times) < mods,
        "per_modification_us": round(per * 1e6, 1),
        "modifications_total_s_extrapolated": round(per * mods, 2),
        "load_plus_modifications_s_extrapolated": round(load_s + per * mods, 2),
        "closed_loop_latency_us": latency_stats_us(times),
        "final_manager": manager,
    }


# ----------------------------------------------------------------------------- main


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", type=int, default=100_000, help="number of people N")
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--backend", default="inline")
    ap.add_argument("--latency-rounds", type=int, default=1000)
    ap.add_argument(
        "--open-loop-batch",
        type=int,
        default=10_000,
        help="flush and step once every this many modifications (0: only at the end)",
    )
    ap.add_argument(
        "--naive-samples",
        type=int,
        default=20,
        help="recomputes timed for the naive baseline (extrapolated to N - 1)",
    )
    ap.add_argument("--skip-open-loop", action="store_true")
    ap.add_argument("--skip-closed-loop", action="store_true")
    ap.add_argument(
        "--check",
        action="store_true",
        help="capture the output and compare the final state with the naive answer",
    )
    add_gc_argument(ap)
    add_profile_argument(ap)
    args = ap.parse_args()
    N = args.size

    result: Dict[str, Any] = {
        "benchmark": "skip_level",
        "parameters": {
            "gc": args.gc,
            "size": N,
            "workers": args.workers,
            "backend": args.backend,
            "latency_rounds": args.latency_rounds,
            "open_loop_batch": args.open_loop_batch,
            "naive_samples": args.naive_samples,
        },
        **environment(),
    }
    targets = {"load_plus_modifications_s_at_1e6": 15.0, "closed_loop_median_us": 100.0}
    result["targets"] = targets

    note("naive baseline ...")
    naive = naive_run(N, args.naive_samples)
    final_manager = naive.pop("final_manager") if args.check else None
    naive.pop("final_manager", None)  # do not keep N entries alive while the dataflow runs
    result["naive"] = naive

    if not args.skip_open_loop:
        note("open loop ...")
        try:
            t0 = now()
            with gc_mode(args.gc):
                outs = timelypy.execute(
                    open_loop_run(N, args.open_loop_batch, args.check),
                    workers=args.workers,
                    backend=args.backend,
                )
            wall = now() - t0
            load_s = max(o["load_s"] for o in outs)
            open_s = max(o["open_loop_s"] for o in outs)
            mods = sum(o["mods"] for o in outs)
            ol: Dict[str, Any] = {
                "load_s": round(load_s, 4),
                "load_people_per_s": round(N / load_s) if load_s else None,
                "modifications": mods,
                "modifications_s": round(open_s, 4),
                "modifications_per_s": round(mods / open_s) if open_s else None,
                "load_plus_modifications_s": round(load_s + open_s, 4),
                "execute_wall_s": round(wall, 4),
                "speedup_vs_naive_modifications": speedup(
                    naive["modifications_total_s_extrapolated"], open_s
                ),
            }
            if args.check:
                final: Dict[Any, int] = {}
                for o in outs:
                    for d, r in o["final"].items():
                        final[d] = final.get(d, 0) + r
                final = {d: r for d, r in final.items() if r}
                expect: Dict[Any, int] = {}
                for d in naive_skip_level(final_manager):
                    expect[d] = expect.get(d, 0) + 1
                ol["check_final_matches_naive"] = final == expect
            result["open_loop"] = ol
        except Exception as exc:  # a backend that does not exist yet, or a failure
            result["open_loop"] = error_info(exc)

    if not args.skip_closed_loop:
        note("closed loop ...")
        try:
            with gc_mode(args.gc):
                outs = timelypy.execute(
                    closed_loop_run(N, args.latency_rounds),
                    workers=args.workers,
                    backend=args.backend,
                )
            # A round ends when the slowest worker sees the probe pass.
            lat = [max(vals) for vals in zip(*(o["latencies"] for o in outs))]
            stats = latency_stats_us(lat)
            result["closed_loop"] = {
                "load_s": round(max(o["load_s"] for o in outs), 4),
                "rounds": len(lat),
                "latency_us": stats,
                "slowest_rounds_index_us": slowest(lat),
                "advance_only_latency_us": latency_stats_us(
                    [max(v) for v in zip(*(o["empty"] for o in outs))]
                ),
                "speedup_vs_naive_median": speedup(
                    naive["closed_loop_latency_us"].get("median_us"), stats.get("median_us")
                ),
            }
        except Exception as exc:
            result["closed_loop"] = error_info(exc)

    emit(result)


if __name__ == "__main__":
    sys.setrecursionlimit(10_000)
    with profiled():
        main()
