"""Records per second moved between two worker processes over the SocketMesh, printed as JSON.

Worker 0 sends ``--records`` records in batches of ``--batch`` to worker 1 (one direction); worker 1
counts them and answers with an ack; the clock runs from the first send to the ack. For scale,
the same batches are also moved within one process (appended to and popped from a deque, no
encoding), and pushed through the codec alone (encode + decode, no sockets).

    python benchmarks/exchange_throughput.py --records 1000000 --batch 10000
    python benchmarks/exchange_throughput.py --shape triple --start-method spawn
    python benchmarks/exchange_throughput.py --codec-only --batch 10000    # the codec alone
    python benchmarks/exchange_throughput.py --message data    # as an exchange channel sends

``--message raw`` (the default) sends each batch as it is (msgpack, :func:`wire.encode`);
``--message data`` wraps it as a worker's exchange does, ``("d", channel, time, batch)``, which
the mesh pickles when the time is an ``int`` (:func:`wire.pickle_records`; the ``product``
and ``iterate`` shapes have ``Product`` times and stay with msgpack).

Columns against objects: every record here is fixed-width, so it may travel as numpy columns
(:mod:`timelypy.communication.wire_columns`). ``--columns`` sets the mesh's mode for the run
(``auto``: columns where msgpack would encode, ``always``: root-scope data messages too,
``off``: never), or ``compare`` (the default) runs ``off`` and ``always`` alternately and
reports both; ``--codec-only`` reports the codec alone both ways for each shape.

    python benchmarks/exchange_throughput.py --message data --shape triple --records 300000

``--routing`` times only the exchange's routing of one message (``ExchangePusher.push`` with
a fabric that drops what it is given): record by record against column-wise (keys hashed with
numpy, parts split in C), alternately, for 2, 4 and 8 workers.

    python benchmarks/exchange_throughput.py --routing --batch 4096

``--arrange-trip`` times one batch's whole trip into another process's arrangement (routing,
pickling, unpickling, what the arrangement does to hold it as columns): sent as tuples (the
receiver encodes them) against sent as a column message (the sender encodes, the receiver
keeps the columns), alternately, in CPU seconds.

    python benchmarks/exchange_throughput.py --arrange-trip --batch 65536
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import platform
import sys
import time
from collections import deque
from typing import Any, Dict, List

try:
    import timelypy  # noqa: F401
except ImportError:  # running from a checkout without installing
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from timelypy.communication import wire_columns
from timelypy.communication.wire import (
    decode,
    encode,
    fixed_records,
    pickle_records,
    unpickle_records,
)
from timelypy.order import Product
from timelypy.workers.launch.launcher import run_in_processes

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import _profile, add_profile_argument, profile_workers, profiled  # noqa: E402


def make_batches(records: int, batch: int, shape: str) -> List[list]:
    """``records`` records split into lists of ``batch``."""
    if shape == "pair":

        def record(k: int) -> Any:
            return (k, k * 7)
    elif shape == "triple":

        def record(k: int) -> Any:
            return ((k, k * 3), k & 15, 1)
    elif shape == "product":

        def record(k: int) -> Any:
            return ((k, k * 3), Product(k & 15, 2), 1)
    elif shape == "iterate":  # as in a nested scope: one time per batch

        def record(k: int) -> Any:
            return ((k, k * 3), Product(0, 2), 1)
    else:
        raise ValueError(f"unknown shape {shape!r}")
    return [
        [record(k) for k in range(start, min(start + batch, records))]
        for start in range(0, records, batch)
    ]


def in_process(batches: List[list]) -> float:
    """Seconds to hand every batch over through a deque (what the inline backend pays)."""
    queue: deque = deque()
    received = 0
    start = time.perf_counter()
    for b in batches:
        queue.append(b)
        while queue:
            received += len(queue.popleft())
    return time.perf_counter() - start


def data_message(batch: list, shape: str) -> tuple:
    """``batch`` as the data message an exchange channel sends (``Product`` time for the
    product shape, else an ``int``)."""
    return ("d", 1, Product(0, 0) if shape in ("product", "iterate") else 0, batch)


def message_codec(message: Any, mode: str = "off") -> Any:
    """Encode and decode ``message`` as the mesh does in ``mode`` (see ``--columns``)."""
    fixed = fixed_records(message) if mode == "always" else None
    if fixed is None:
        pickled = pickle_records(message)
        if pickled is not None:
            return unpickle_records(pickled)
        fixed = fixed_records(message) if mode == "auto" else None
    return decode(encode(message) if fixed is None else fixed)


class columns_mode:
    """Within the block, :func:`encode` takes columns as ``mode`` says."""

    def __init__(self, mode: str) -> None:
        self.mode = mode

    def __enter__(self) -> None:
        self.saved = wire_columns.mode
        wire_columns.mode = self.mode

    def __exit__(self, *exc: Any) -> None:
        wire_columns.mode = self.saved


def codec_only(
    batches: List[list], message: str = "raw", shape: str = "pair", mode: str = "off"
) -> float:
    """Seconds to encode and decode every batch in one process (as a data message with
    ``message="data"``), columns as ``mode`` says."""
    with columns_mode(mode):
        start = time.perf_counter()
        for b in batches:
            if message == "data":
                message_codec(data_message(b, shape), mode)
            else:
                decode(encode(b))
        return time.perf_counter() - start


def _encoders(message: Any, mode: str) -> Any:
    """``(encode, decode)`` of ``message`` as the mesh in ``mode`` takes it."""
    fixed = fixed_records(message) if mode == "always" else None
    if fixed is not None:
        return functools.partial(fixed_records, message), decode
    if pickle_records(message) is not None:
        return functools.partial(pickle_records, message), unpickle_records
    return functools.partial(encode, message), decode


def _one_way(records: list, message: Any, mode: str) -> Dict[str, Any]:
    """Seconds (one run) to encode and decode ``records`` raw and as the data ``message``."""
    with columns_mode(mode):
        out: Dict[str, Any] = {}
        for name, enc, dec in (
            ("", functools.partial(encode, records), decode),
            ("data_message_", *_encoders(message, mode)),
        ):
            start = time.perf_counter()
            data = enc()
            middle = time.perf_counter()
            dec(data)
            end = time.perf_counter()
            out[name + "encode_ms"] = (middle - start) * 1e3
            out[name + "decode_ms"] = (end - middle) * 1e3
            out[name + "bytes"] = len(data)
        return out


def codec_report(batch: int, repeat: int) -> Dict[str, Any]:
    """Encode+decode of one batch of each shape, objects (``off``) against columns (``always``)
    run alternately, best of ``repeat`` each; with references (best of repeat).

    The references are not alternatives with the same semantics: non-strict msgpack loses Product
    (and every tuple subclass); pickle is what multiprocessing would use.
    """
    import pickle

    import msgpack

    def best(fn: Any, *args: Any) -> float:
        times = []
        for _ in range(repeat):
            start = time.perf_counter()
            fn(*args)
            times.append(time.perf_counter() - start)
        return min(times)

    plain = msgpack.Packer(use_bin_type=True)
    report: Dict[str, Any] = {}
    for shape in ("pair", "triple", "product", "iterate"):
        (records,) = make_batches(batch, batch, shape)
        message = data_message(records, shape)
        paths: Dict[str, Dict[str, Any]] = {"objects": {}, "columns": {}}
        for _ in range(repeat):
            for path, mode in (("objects", "off"), ("columns", "always")):
                for key, value in _one_way(records, message, mode).items():
                    seen = paths[path].get(key)
                    paths[path][key] = value if seen is None else min(seen, value)
        for numbers in paths.values():
            for prefix in ("", "data_message_"):
                seconds = (numbers[prefix + "encode_ms"] + numbers[prefix + "decode_ms"]) / 1e3
                numbers[prefix + "records_per_s"] = round(batch / seconds)
            for key in list(numbers):
                if key.endswith("_ms"):
                    numbers[key] = round(numbers[key], 3)
        plain_data = plain.pack(records)
        pickled = pickle.dumps(records, 5)
        ref_msgpack = best(plain.pack, records) + best(
            functools.partial(msgpack.unpackb, plain_data, use_list=False)
        )
        ref_pickle = best(pickle.dumps, records, 5) + best(pickle.loads, pickled)
        report[shape] = {
            **paths,
            "columns_vs_objects_data_message": round(
                paths["columns"]["data_message_records_per_s"]
                / paths["objects"]["data_message_records_per_s"],
                2,
            ),
            "nonstrict_msgpack_records_per_s": round(batch / ref_msgpack),
            "pickle5_records_per_s": round(batch / ref_pickle),
        }
    return report


class _Drop:
    """A target and a fabric that drop what they are given."""

    def push(self, time: Any, data: Any) -> None:
        pass

    def send(self, dest: int, message: Any) -> None:
        pass


def routing_report(batch: int, repeat: int) -> Dict[str, Any]:
    """Nanoseconds per record to route one message of ``batch`` ``((k, v), t, 1)`` updates by
    ``k`` (an arrangement's exchange), record by record and column-wise, alternately, best of
    ``repeat`` runs of 20 pushes each."""
    from timelypy.dataflow import channels

    (records,) = make_batches(batch, batch, "triple")
    report: Dict[str, Any] = {}
    threshold = channels.COLUMNWISE_MIN
    for peers in (2, 4, 8):
        pusher = channels.ExchangePusher(_Drop(), lambda u: u[0][0], peers, 0, _Drop(), 1)  # type: ignore[arg-type]
        best = {"record_by_record": float("inf"), "column_wise": float("inf")}
        for _ in range(repeat):
            for path, minimum in (("record_by_record", batch + 1), ("column_wise", threshold)):
                channels.COLUMNWISE_MIN = minimum
                try:
                    start = time.perf_counter()
                    for _ in range(20):
                        pusher.push(0, records)
                    best[path] = min(best[path], time.perf_counter() - start)
                finally:
                    channels.COLUMNWISE_MIN = threshold
        report[f"{peers}_workers_ns_per_record"] = {
            path: round(seconds / 20 / batch * 1e9, 1) for path, seconds in best.items()
        }
    return report


class _Keep:
    """A target and a fabric that keep the last thing they are given."""

    def __init__(self) -> None:
        self.last: Any = None
        self.columns = True
        self.encode: Any = None

    def push(self, time: Any, data: Any) -> None:
        self.last = data

    def send(self, dest: int, message: Any) -> None:
        self.last = message


def arrange_trip_report(batch: int, repeat: int) -> Dict[str, Any]:
    """CPU nanoseconds per update for one message of ``batch`` ``((k, v), t, 1)`` updates to
    reach another process's arrangement as columns: routed by ``k`` for 2 workers, the other
    worker's part pickled (:func:`wire.pickle_records`) and unpickled, then held by the
    receiving arrangement (``ColumnChoice``): as tuples the receiver encodes them; as a
    column message (the sender's ``MessageEncoder``) it keeps the columns. Alternated, best
    of ``repeat``; bytes of the part on the wire."""
    from timelypy.communication.wire import pickle_records, unpickle_records
    from timelypy.dataflow import channels
    from timelypy.differential.arrange import Batcher
    from timelypy.differential.arrange_columns import ColumnChoice
    from timelypy.differential.column_message import ColumnMessage, MessageEncoder, key_of_update
    from timelypy.order import INT_ORDER

    records = [((k % 1000, k), 7, 1) for k in range(batch)]
    report: Dict[str, Any] = {}
    best = {"tuples": float("inf"), "columns": float("inf")}
    sizes: Dict[str, int] = {}
    for _ in range(repeat):
        for path in best:
            target, fabric = _Keep(), _Keep()
            target.encode = MessageEncoder() if path == "columns" else None
            pusher = channels.ExchangePusher(target, key_of_update, 2, 0, fabric, 1)  # type: ignore[arg-type]
            choice, batcher = ColumnChoice(enabled=True), Batcher(INT_ORDER)
            start = time.process_time()
            pusher.push(7, records)
            wire = pickle_records(fabric.last)
            data = unpickle_records(wire)[3]
            if type(data) is ColumnMessage:
                choice.take_message(batcher, data)
            else:
                batcher.push(data)
                choice.absorb(batcher)
            best[path] = min(best[path], time.process_time() - start)
            sizes[path] = len(wire)
            assert choice.held == len(data) and not batcher.pending, path
    for path, seconds in best.items():
        report[path] = {
            "cpu_ns_per_update": round(seconds / batch * 1e9, 1),
            "wire_bytes_per_crossing_update": round(sizes[path] / (batch / 2), 1),
        }
    return report


def mesh_worker(records: int, batch: int, shape: str, message: str = "raw", mode: str = "auto"):
    """The worker function shipped to both processes (columns as ``mode`` says)."""

    def main(index: int, peers: int, mesh: Any) -> Dict[str, Any]:
        mesh.wire_columns = mode
        wire_columns.mode = mode
        if index == 0:
            batches = make_batches(records, batch, shape)  # built before the clock starts
            if message == "data":
                batches = [data_message(b, shape) for b in batches]
            mesh.wait(60.0)  # worker 1's "ready"
            assert mesh.recv_nowait() == [(1, "ready")]
            start = time.perf_counter()
            for b in batches:
                mesh.send(1, b)
            while not mesh.wait(60.0):
                pass
            ack = mesh.recv_nowait()
            elapsed = time.perf_counter() - start
            assert ack == [(1, ("ack", records))], ack
            return {
                "seconds": elapsed,
                "bytes": mesh.bytes_sent,
                "messages": mesh.messages_sent,
                "column_messages": mesh.fixed_sent,
            }
        mesh.send(0, "ready")
        received = 0
        deadline = time.monotonic() + 600
        while received < records and time.monotonic() < deadline:
            mesh.wait(1.0)
            for _, b in mesh.recv_nowait():
                received += len(b[3] if message == "data" else b)
        mesh.send(0, ("ack", received))
        return {"received": received}

    return main


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--batch", type=int, default=10_000)
    parser.add_argument(
        "--shape",
        choices=["pair", "triple", "product", "iterate"],
        default="pair",
        help="pair: (k, v); triple: ((k, v), t, 1); product: t is Product; iterate: "
        "t is one Product",
    )
    parser.add_argument(
        "--message",
        choices=["raw", "data"],
        default="raw",
        help="raw: each batch as is (msgpack); data: as an exchange channel's "
        "data message (pickled at int times)",
    )
    parser.add_argument(
        "--columns",
        choices=["compare", "auto", "always", "off"],
        default="compare",
        help="the mesh's column mode; compare: off and always, alternately",
    )
    parser.add_argument("--start-method", default=None)
    parser.add_argument("--repeat", type=int, default=3, help="report the best of this many runs")
    parser.add_argument(
        "--codec-only",
        action="store_true",
        help="only time encode+decode of one batch of each shape",
    )
    parser.add_argument(
        "--routing",
        action="store_true",
        help="only time the exchange's routing of one batch, record by record and column-wise",
    )
    parser.add_argument(
        "--arrange-trip",
        action="store_true",
        help="only time one batch's trip into another process's arrangement, tuples vs columns",
    )
    add_profile_argument(parser)
    args = parser.parse_args()
    if args.arrange_trip:
        print(
            json.dumps(
                {
                    "benchmark": "exchange_arrange_trip",
                    "batch": args.batch,
                    "repeat": max(args.repeat, 7),
                    "trip": arrange_trip_report(args.batch, max(args.repeat, 7)),
                },
                indent=2,
            )
        )
        return
    if args.routing:
        print(
            json.dumps(
                {
                    "benchmark": "exchange_routing",
                    "batch": args.batch,
                    "repeat": max(args.repeat, 7),
                    "routing": routing_report(args.batch, max(args.repeat, 7)),
                },
                indent=2,
            )
        )
        return
    if args.codec_only:
        print(
            json.dumps(
                {
                    "benchmark": "wire_codec",
                    "batch": args.batch,
                    "repeat": max(args.repeat, 20),
                    "shapes": codec_report(args.batch, max(args.repeat, 20)),
                    **({"profile": _profile.describe()} if _profile.path else {}),
                },
                indent=2,
            )
        )
        return

    modes = ["off", "always"] if args.columns == "compare" else [args.columns]
    batches = make_batches(args.records, args.batch, args.shape)
    local = min(in_process(batches) for _ in range(args.repeat))
    codec = {mode: float("inf") for mode in modes}
    for _ in range(args.repeat):  # alternated
        for mode in modes:
            seconds = codec_only(batches, args.message, args.shape, mode)
            codec[mode] = min(codec[mode], seconds)
    del batches

    runs: Dict[str, List[Dict[str, Any]]] = {mode: [] for mode in modes}
    for _ in range(args.repeat):
        for mode in modes:
            runs[mode].append(mesh_run(args, mode))
    mesh = {}
    for mode in modes:
        best = min(runs[mode], key=lambda r: r["seconds"])
        mesh[mode] = {
            "seconds": round(best["seconds"], 4),
            "records_per_s": round(args.records / best["seconds"]),
            "bytes_sent": best["bytes"],
            "column_messages": best["column_messages"],
            "MB_per_s": round(best["bytes"] / best["seconds"] / 1e6, 1),
            "job_seconds_incl_startup": round(best["job_seconds"], 3),
            "codec_only_one_process_records_per_s": round(args.records / codec[mode]),
        }

    print(
        json.dumps(
            {
                "benchmark": "exchange_throughput",
                "records": args.records,
                "batch": args.batch,
                "shape": args.shape,
                "message": args.message,
                "python": platform.python_version(),
                "cpus": os.cpu_count(),
                "mesh_two_processes_by_column_mode": mesh,
                "in_process_deque": {
                    "seconds": round(local, 6),
                    "records_per_s": round(args.records / local),
                },
                **({"profile": _profile.describe()} if _profile.path else {}),
            },
            indent=2,
        )
    )


def mesh_run(args: Any, mode: str) -> Dict[str, Any]:
    """One two-process run in column ``mode``: the sender's figures."""
    started = time.perf_counter()
    sender, receiver = run_in_processes(
        profile_mesh_worker(mesh_worker(args.records, args.batch, args.shape, args.message, mode)),
        2,
        timeout=600,
        start_method=args.start_method,
    )
    assert receiver["received"] == args.records
    sender["job_seconds"] = time.perf_counter() - started
    return sender


def profile_mesh_worker(fn: Any) -> Any:
    """``fn(index, peers, mesh)`` profiled in each process under ``--profile``."""
    if _profile.path is None:
        return fn
    build = profile_workers(lambda worker: fn(worker.index, worker.peers, worker.mesh), 2)

    def main(index: int, peers: int, mesh: Any) -> Dict[str, Any]:
        class _Worker:
            pass

        worker = _Worker()
        worker.index, worker.peers, worker.mesh = index, peers, mesh
        return build(worker)

    return main


if __name__ == "__main__":
    with profiled():
        main()
