"""Word count over changing lines (closed loop), against a from-scratch Counter.

``--lines`` N lines of ``--words-per-line`` (about 8) words drawn from a seeded vocabulary of
``--vocab`` words (uniform, or Zipf-distributed with ``--zipf S``). The dataflow is

    lines.flat_map(str.split).count().probe()

After loading, ``--rounds`` rounds each replace ``--changes-per-round`` random lines (remove the
old line, insert a new random one), advance, flush and step until the probe passes --
microseconds per round.

``--mode buffered`` runs the rounds as the team's comparison harness does (workload W3): every
round's changes and ``advance_to`` are buffered without stepping, then the input is closed and
the worker steps until done, so the dataflow sees many distinct times in few large
activations; it reports the update phase's microseconds per round (``us_per_round``), with the
number of collections the garbage collector ran meanwhile. ``--inspect`` adds the harness's
``inspect`` after the count (a callback per output update keeping a dict of counts), so the
dataflow is ``lines.flat_map(str.split).count().inspect(f).probe()``; ``--mode both`` runs both.

The naive baseline recomputes ``Counter(word for line in lines for word in line.split())`` after
every round; only ``--naive-samples`` rounds are timed (the JSON says so).

    python benchmarks/wordcount.py --lines 100000 --rounds 1000 --changes-per-round 10
"""

from __future__ import annotations

import argparse
import bisect
import gc
import itertools
import random
from collections import Counter
from typing import Any, Dict, List

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


def _replace_lines(session: Any, current: List[str], changes: Any, mine: bool) -> None:
    """Apply one round's line replacements to ``current``; the worker that owns the round
    (``mine``) also removes each old line from and inserts each new one into ``session``."""
    for i, new in changes:
        if mine:
            session.remove(current[i])
            session.insert(new)
        current[i] = new


def make_workload(
    n_lines: int, words: int, vocab: int, zipf: float, rounds: int, per_round: int, seed: int
):
    rng = random.Random(seed)
    vocabulary = [f"w{i}" for i in range(vocab)]
    if zipf > 0:
        cum = list(itertools.accumulate(1.0 / (r + 1) ** zipf for r in range(vocab)))
        total = cum[-1]

        def word() -> str:
            return vocabulary[min(vocab - 1, bisect.bisect_left(cum, rng.random() * total))]
    else:

        def word() -> str:
            return vocabulary[rng.randrange(vocab)]

    def line() -> str:
        return " ".join(word() for _ in range(words))

    lines = [line() for _ in range(n_lines)]
    plan = [[(rng.randrange(n_lines), line()) for _ in range(per_round)] for _ in range(rounds)]
    return lines, plan


def _program(scope, check: bool, inspect: bool):
    session, coll = scope.new_collection("Lines")
    counts = coll.flat_map(str.split).count()
    if inspect:
        seen: Dict[Any, int] = {}
        counts = counts.inspect(lambda u: seen.__setitem__(u[0], seen.get(u[0], 0) + u[2]))
    return session, counts.probe(), (counts.capture() if check else None)


def buffered_run(lines: List[str], plan, check: bool, inspect: bool):
    """The W3 harness's shape: load, then every round buffered (remove, insert, advance_to)
    without stepping, close, step until done."""

    def build(worker):
        gc.collect()
        index, peers = worker.index, worker.peers
        session, probe, cap = worker.dataflow(lambda scope: _program(scope, check, inspect))
        current = list(lines)
        t0 = now()
        for i in range(index, len(current), peers):
            session.insert(current[i])
        session.advance_to(1)
        session.flush()
        worker.step_until(probe, 1)
        load_s = now() - t0
        collections = [0]

        def on_gc(phase: str, info: Dict[str, Any]) -> None:
            if phase == "start":
                collections[0] += 1

        gc.callbacks.append(on_gc)
        t1 = now()
        t = 1
        for r, changes in enumerate(plan):
            _replace_lines(session, current, changes, r % peers == index)
            t += 1
            session.advance_to(t)
        session.close()
        while worker.step():
            pass
        update_s = now() - t1
        gc.callbacks.remove(on_gc)
        out: Dict[str, Any] = {
            "load_s": load_s,
            "update_s": update_s,
            "gc_collections": collections[0],
        }
        if check:
            out["final"] = cap.at(t)
        return out

    return build


def dataflow_run(lines: List[str], plan, check: bool, inspect: bool = False):
    def build(worker):
        gc.collect()
        index, peers = worker.index, worker.peers
        session, probe, cap = worker.dataflow(lambda scope: _program(scope, check, inspect))
        current = list(lines)
        t0 = now()
        for i in range(index, len(current), peers):
            session.insert(current[i])
        session.advance_to(1)
        session.flush()
        worker.step_until(probe, 1)
        load_s = now() - t0
        lat: List[float] = []
        t = 1
        for r, changes in enumerate(plan):
            start = now()
            _replace_lines(session, current, changes, r % peers == index)
            t += 1
            session.advance_to(t)
            session.flush()
            worker.step_until(probe, t)
            lat.append(now() - start)
        out: Dict[str, Any] = {"load_s": load_s, "latencies": lat}
        if check:
            out["final"] = cap.at(t)
        return out

    return build


def naive_count(lines: List[str]) -> Counter:
    return Counter(w for line in lines for w in line.split())


def naive_run(lines: List[str], plan, samples: int) -> Dict[str, Any]:
    current = list(lines)
    t0 = now()
    naive_count(current)
    load_s = now() - t0
    chosen = set(sample_indices(len(plan), samples))
    times: List[float] = []
    for r, changes in enumerate(plan):
        start = now()
        for i, new in changes:
            current[i] = new
        if r in chosen:
            naive_count(current)
            times.append(now() - start)
    final = naive_count(current)
    return {
        "load_s": round(load_s, 4),
        "distinct_words_final": len(final),
        "rounds_timed": len(times),
        "sampled": len(times) < len(plan),
        "per_round_latency_us": latency_stats_us(times),
        "_final": final,
    }


def _check(outs, final) -> bool:
    got: Dict[Any, int] = {}
    for o in outs:
        for d, c in o["final"].items():
            got[d] = got.get(d, 0) + c
    got = {d: c for d, c in got.items() if c}
    return got == {(w, c): 1 for w, c in final.items()}


def _closed(args, lines, plan, naive, final) -> Dict[str, Any]:
    try:
        with gc_mode(args.gc):
            outs = timelypy.execute(
                dataflow_run(lines, plan, args.check, args.inspect),
                workers=args.workers,
                backend=args.backend,
            )
        lat = [max(v) for v in zip(*(o["latencies"] for o in outs))]
        stats = latency_stats_us(lat)
        r: Dict[str, Any] = {
            "load_s": round(max(o["load_s"] for o in outs), 4),
            "load_lines_per_s": round(args.lines / max(o["load_s"] for o in outs)),
            "per_round_latency_us": stats,
            "slowest_rounds_index_us": slowest(lat),
            "speedup_vs_naive_median": speedup(
                naive["per_round_latency_us"].get("median_us"), stats.get("median_us")
            ),
        }
        if args.check:
            r["check_final_matches_naive"] = _check(outs, final)
        return r
    except Exception as exc:
        return error_info(exc)


def _buffered(args, lines, plan, final) -> Dict[str, Any]:
    try:
        with gc_mode(args.gc):
            outs = timelypy.execute(
                buffered_run(lines, plan, args.check, args.inspect),
                workers=args.workers,
                backend=args.backend,
            )
        update_s = max(o["update_s"] for o in outs)
        r: Dict[str, Any] = {
            "load_s": round(max(o["load_s"] for o in outs), 4),
            "update_s": round(update_s, 4),
            "us_per_round": round(update_s / max(1, len(plan)) * 1e6, 2),
            "gc_collections_during_updates": max(o["gc_collections"] for o in outs),
        }
        if args.check:
            r["check_final_matches_naive"] = _check(outs, final)
        return r
    except Exception as exc:
        return error_info(exc)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lines", type=int, default=10_000)
    ap.add_argument("--rounds", type=int, default=1000)
    ap.add_argument("--changes-per-round", type=int, default=10)
    ap.add_argument("--words-per-line", type=int, default=8)
    ap.add_argument("--vocab", type=int, default=10_000)
    ap.add_argument(
        "--zipf", type=float, default=0.0, help="Zipf exponent for word frequencies (0: uniform)"
    )
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--backend", default="inline")
    ap.add_argument("--naive-samples", type=int, default=50)
    ap.add_argument(
        "--mode",
        choices=["closed", "buffered", "both"],
        default="closed",
        help="closed loop per round (default), or all rounds buffered then stepped "
        "(the comparison harness's W3)",
    )
    ap.add_argument(
        "--inspect",
        action="store_true",
        help="an inspect callback per output update after the count (as W3)",
    )
    ap.add_argument(
        "--check",
        action="store_true",
        help="capture the counts and compare the final state with the naive Counter",
    )
    add_gc_argument(ap)
    add_profile_argument(ap)
    args = ap.parse_args()

    lines, plan = make_workload(
        args.lines,
        args.words_per_line,
        args.vocab,
        args.zipf,
        args.rounds,
        args.changes_per_round,
        args.seed,
    )
    result: Dict[str, Any] = {
        "benchmark": "wordcount",
        "parameters": {
            "gc": args.gc,
            "lines": args.lines,
            "rounds": args.rounds,
            "changes_per_round": args.changes_per_round,
            "words_per_line": args.words_per_line,
            "vocab": args.vocab,
            "zipf": args.zipf,
            "seed": args.seed,
            "workers": args.workers,
            "backend": args.backend,
            "naive_samples": args.naive_samples,
            "mode": args.mode,
            "inspect": args.inspect,
        },
        **environment(),
        "targets": {"per_round_us_at_1e5_lines": 150.0},
    }
    note("naive ...")
    naive = naive_run(lines, plan, args.naive_samples)
    final = naive.pop("_final")
    result["naive"] = naive
    if args.mode in ("closed", "both"):
        note("dataflow, closed loop ...")
        result["dataflow"] = _closed(args, lines, plan, naive, final)
    if args.mode in ("buffered", "both"):
        note("dataflow, buffered rounds ...")
        result["dataflow_buffered"] = _buffered(args, lines, plan, final)
    emit(result)


if __name__ == "__main__":
    with profiled():
        main()
