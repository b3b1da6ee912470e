"""Timely layer throughput and latency: a chain of maps against a bare Python loop.

(a) Throughput: ``--records`` records in ``--batches`` batches through a chain of ``--maps``
    ``map`` operators (``lambda x: x + c`` with distinct constants ``c``): each batch is sent,
    the input advanced and the worker stepped once; then the worker steps to completion. The same
    functions are applied to the same records by a bare Python loop, two ways (per record through
    all functions; per function over the whole list with ``list(map(f, data))``); the faster one
    is the baseline, and ``ratio`` is dataflow time / baseline time.
(b) Closed-loop latency: ``--epochs`` epochs of one record each through the same chain, each
    followed by a probe wait (``send; advance_to(e + 1); worker.step_until(probe, e + 1)``):
    median and p99 microseconds per epoch.

Prints one JSON object. ``--profile [PATH]`` profiles both workloads (see benchmarks/README.md).

    python benchmarks/timely_throughput.py --records 1000000 --batches 1000 --epochs 10000
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import time
from typing import Callable, List, Optional

from common import add_profile_argument, emit, profiled

import timelypy as tp  # noqa: E402


def make_functions(n: int) -> List[Callable[[int], int]]:
    def adder(c: int) -> Callable[[int], int]:
        return lambda x: x + c

    return [adder(c) for c in range(1, n + 1)]


# ---------------------------------------------------------------------------------- baselines


def bare_per_record(data: List[int], fs: List[Callable[[int], int]]) -> List[int]:
    """``for x in data: x = f1(x); x = f2(x); ...`` (the chain unrolled per record)."""
    out = []
    append = out.append
    if len(fs) == 10:
        f1, f2, f3, f4, f5, f6, f7, f8, f9, f10 = fs
        for x in data:
            x = f1(x)
            x = f2(x)
            x = f3(x)
            x = f4(x)
            x = f5(x)  # noqa: E702
            x = f6(x)
            x = f7(x)
            x = f8(x)
            x = f9(x)
            x = f10(x)  # noqa: E702
            append(x)
    else:
        for x in data:
            for f in fs:
                x = f(x)
            append(x)
    return out


def bare_per_function(data: List[int], fs: List[Callable[[int], int]]) -> List[int]:
    """``data = list(map(f, data))`` for each function (what the map operator does per batch)."""
    for f in fs:
        data = list(map(f, data))
    return data


# ---------------------------------------------------------------------------------- dataflow


def build_chain(worker: tp.Worker, fs: List[Callable[[int], int]], capture: bool = False):
    def dataflow(scope):
        inp, stream = scope.new_input()
        for i, f in enumerate(fs):
            stream = stream.map(f, name=f"map{i}")
        return inp, stream.probe(), (stream.capture() if capture else None)

    return worker.dataflow(dataflow)


def run_throughput(batches: List[List[int]], fs: List[Callable[[int], int]]) -> float:
    worker = tp.Worker()
    inp, probe, _ = build_chain(worker, fs)
    start = time.perf_counter()
    for epoch, batch in enumerate(batches):
        inp.send_batch(batch)
        inp.advance_to(epoch + 1)
        worker.step()
    inp.close()
    worker.step_until_done()
    elapsed = time.perf_counter() - start
    assert probe.done()
    return elapsed


def run_latency(epochs: int, fs: List[Callable[[int], int]]):
    """Per-epoch wall-clock and thread-CPU seconds. On a shared machine the wall-clock tail
    includes preemption by other processes (a slow epoch with small CPU time); the CPU time
    is what the library itself costs."""
    worker = tp.Worker()
    inp, probe, _ = build_chain(worker, fs)
    wall: List[float] = []
    cpu: List[float] = []
    clock = time.perf_counter
    cpu_clock = time.thread_time
    for e in range(epochs):
        t0 = clock()
        c0 = cpu_clock()
        inp.send(e)
        inp.advance_to(e + 1)
        worker.step_until(probe, e + 1)
        cpu.append(cpu_clock() - c0)
        wall.append(clock() - t0)
    inp.close()
    worker.step_until_done()
    return wall, cpu


def check_correctness(fs: List[Callable[[int], int]]) -> None:
    """A small un-timed run: the dataflow computes what the bare loop computes."""
    data = list(range(5000))
    expected = bare_per_record(data, fs)
    assert expected == bare_per_function(data, fs)
    worker = tp.Worker()
    inp, _, cap = build_chain(worker, fs, capture=True)
    for epoch in range(5):
        inp.send_batch(data[epoch * 1000 : (epoch + 1) * 1000])
        inp.advance_to(epoch + 1)
        worker.step()
    inp.close()
    worker.step_until_done()
    got = [r for _, r in cap.records()]
    assert got == expected, "dataflow output differs from the bare loop"
    assert [t for t, _ in cap.records()] == [i // 1000 for i in range(5000)]


def percentile(sorted_samples: List[float], q: float) -> float:
    if not sorted_samples:
        return float("nan")
    k = min(len(sorted_samples) - 1, max(0, int(round(q * (len(sorted_samples) - 1)))))
    return sorted_samples[k]


def main(argv: Optional[List[str]] = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--batches", type=int, default=1000)
    parser.add_argument("--epochs", type=int, default=10_000)
    parser.add_argument("--maps", type=int, default=10)
    parser.add_argument(
        "--repeats",
        type=int,
        default=3,
        help="best of this many runs for the throughput measurements",
    )
    add_profile_argument(parser)
    args = parser.parse_args(argv)
    with profiled(args, "timely_throughput"):
        result = measure(args)
    emit(result)
    return result


def measure(args: argparse.Namespace) -> dict:
    """Both workloads (map-chain throughput, closed-loop latency) as the result dict."""

    fs = make_functions(args.maps)
    check_correctness(fs)

    data = list(range(args.records))
    size = max(1, args.records // args.batches)
    batches = [data[i : i + size] for i in range(0, args.records, size)]

    dataflow_s = min(run_throughput(batches, fs) for _ in range(args.repeats))
    per_record_s = per_function_s = float("inf")
    for _ in range(args.repeats):
        t0 = time.perf_counter()
        bare_per_record(data, fs)
        per_record_s = min(per_record_s, time.perf_counter() - t0)
        t0 = time.perf_counter()
        bare_per_function(data, fs)
        per_function_s = min(per_function_s, time.perf_counter() - t0)
    bare_s = min(per_record_s, per_function_s)

    wall, cpu = run_latency(args.epochs, fs)
    us = sorted(s * 1e6 for s in wall)
    cpu_us = sorted(s * 1e6 for s in cpu)
    preempted = sum(1 for w, c in zip(wall, cpu) if w - c > 1e-3)

    result = {
        "benchmark": "timely_throughput",
        "python": platform.python_version(),
        "records": args.records,
        "batches": len(batches),
        "maps": args.maps,
        "repeats": args.repeats,
        "cpus": os.cpu_count(),
        "load_average_1m": round(os.getloadavg()[0], 2),
        "map_chain": {
            "dataflow_s": round(dataflow_s, 4),
            "dataflow_records_per_s": round(args.records / dataflow_s),
            "bare_loop_s": round(bare_s, 4),
            "bare_loop_records_per_s": round(args.records / bare_s),
            "bare_loop_kind": "per_record" if per_record_s <= per_function_s else "per_function",
            "bare_per_record_s": round(per_record_s, 4),
            "bare_per_function_s": round(per_function_s, 4),
            "ratio_dataflow_over_bare": round(dataflow_s / bare_s, 3),
        },
        "latency": {
            "epochs": args.epochs,
            "dataflow": f"input -> {args.maps} maps -> probe, one record per epoch",
            "median_us": round(statistics.median(us), 2),
            "p99_us": round(percentile(us, 0.99), 2),
            "mean_us": round(statistics.fmean(us), 2),
            "max_us": round(us[-1], 2),
            "cpu_median_us": round(statistics.median(cpu_us), 2),
            "cpu_p99_us": round(percentile(cpu_us, 0.99), 2),
            "epochs_preempted_over_1ms": preempted,
        },
    }
    return result


if __name__ == "__main__":
    main()
