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
shape has ``Product`` times and stays with msgpack).
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

from timelypy.communication.wire import decode, encode, pickle_records, unpickle_records
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
    return ("d", 1, Product(0, 0) if shape == "product" else 0, batch)


def message_codec(message: Any) -> Any:
    """Encode and decode ``message`` as the mesh does (pickled when it can be)."""
    pickled = pickle_records(message)
    return decode(encode(message)) if pickled is None else unpickle_records(pickled)


def codec_only(batches: List[list], message: str = "raw", shape: str = "pair") -> float:
    """Seconds to encode and decode every batch in one process (as a data message with
    ``message="data"``)."""
    start = time.perf_counter()
    for b in batches:
        if message == "data":
            message_codec(data_message(b, shape))
        else:
            decode(encode(b))
    return time.perf_counter() - start


def codec_report(batch: int, repeat: int) -> Dict[str, Any]:
    """Encode+decode of one batch of each shape: timelypy.wire vs. references (best of repeat).

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
    for shape in ("pair", "triple", "product"):
        (records,) = make_batches(batch, batch, shape)
        data = encode(records)
        enc, dec = best(encode, records), best(decode, data)
        plain_data = plain.pack(records)
        pickled = pickle.dumps(records, 5)
        ref_msgpack = best(plain.pack, records) + best(
            functools.partial(msgpack.unpackb, plain_data, use_list=False)
        )
        ref_pickle = best(pickle.dumps, records, 5) + best(pickle.loads, pickled)
        message = data_message(records, shape)
        as_data = pickle_records(message)
        if as_data is None:
            data_enc = best(encode, message)
            data_dec = best(decode, encode(message))
            as_data = encode(message)
        else:
            data_enc = best(pickle_records, message)
            data_dec = best(unpickle_records, as_data)
        report[shape] = {
            "encode_ms": round(enc * 1e3, 3),
            "decode_ms": round(dec * 1e3, 3),
            "records_per_s": round(batch / (enc + dec)),
            "bytes": len(data),
            "data_message_encode_ms": round(data_enc * 1e3, 3),
            "data_message_decode_ms": round(data_dec * 1e3, 3),
            "data_message_records_per_s": round(batch / (data_enc + data_dec)),
            "data_message_bytes": len(as_data),
            "nonstrict_msgpack_records_per_s": round(batch / ref_msgpack),
            "pickle5_records_per_s": round(batch / ref_pickle),
        }
    return report


def mesh_worker(records: int, batch: int, shape: str, message: str = "raw"):
    """The worker function shipped to both processes."""

    def main(index: int, peers: int, mesh: Any) -> Dict[str, Any]:
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
            return {"seconds": elapsed, "bytes": mesh.bytes_sent, "messages": mesh.messages_sent}
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
        choices=["pair", "triple", "product"],
        default="pair",
        help="pair: (k, v); triple: ((k, v), t, 1); product: t is Product",
    )
    parser.add_argument(
        "--message",
        choices=["raw", "data"],
        default="raw",
        help="raw: each batch as is (msgpack); data: as an exchange channel's "
        "data message (pickled at int times)",
    )
    parser.add_argument("--start-method", default=None)
    parser.add_argument("--repeat", type=int, default=3, help="report the best of this many runs")
    parser.add_argument(
        "--codec-only",
        action="store_true",
        help="only time encode+decode of one batch of each shape",
    )
    add_profile_argument(parser)
    args = parser.parse_args()
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

    batches = make_batches(args.records, args.batch, args.shape)
    local = min(in_process(batches) for _ in range(args.repeat))
    codec = min(codec_only(batches, args.message, args.shape) for _ in range(args.repeat))
    del batches

    runs = []
    for _ in range(args.repeat):
        started = time.perf_counter()
        sender, receiver = run_in_processes(
            profile_mesh_worker(mesh_worker(args.records, args.batch, args.shape, args.message)),
            2,
            timeout=600,
            start_method=args.start_method,
        )
        assert receiver["received"] == args.records
        sender["job_seconds"] = time.perf_counter() - started
        runs.append(sender)
    best = min(runs, key=lambda r: r["seconds"])

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
                "mesh_two_processes": {
                    "seconds": round(best["seconds"], 4),
                    "records_per_s": round(args.records / best["seconds"]),
                    "bytes_sent": best["bytes"],
                    "MB_per_s": round(best["bytes"] / best["seconds"] / 1e6, 1),
                    "job_seconds_incl_startup": round(best["job_seconds"], 3),
                },
                "codec_only_one_process": {
                    "seconds": round(codec, 4),
                    "records_per_s": round(args.records / codec),
                },
                "in_process_deque": {
                    "seconds": round(local, 6),
                    "records_per_s": round(args.records / local),
                },
                **({"profile": _profile.describe()} if _profile.path else {}),
            },
            indent=2,
        )
    )


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
