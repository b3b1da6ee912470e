"""Files in and out: a watched directory of CSV orders, revenue per product, JSON Lines out.

A producer drops order files into an inbox while the program runs, as a shop's exporter
would: each file written under a temporary name and renamed into place, one file with a bad
row among them. ``timelypy.io.watch_directory`` takes each complete file once, as one atomic
epoch (the bad file is refused whole, and remembered as refused); the dataflow maintains
revenue per product::

    orders.map(lambda o: (o[1], o[2] * o[3])).reduce(sum of the amounts)

and after every file the revenue's changes are appended to ``revenue.jsonl`` with a
``ChangeWriter``. At the end the revenue is checked against a sum over the files taken, and
the watch state (which files were taken) is saved as JSON, so that a restart would not take
them again.

Run it (any backend, through the command line too)::

    python examples/file_pipeline.py
    python -m timelypy run examples/file_pipeline.py --workers 2 --backend processes
"""

from __future__ import annotations

import os
import pathlib
import tempfile
import threading
import time
from typing import Any, Dict, List, Tuple

import timelypy as tp
import timelypy.io as tio

ORDERS = tio.Csv(
    columns=("order", "product", "units", "price"),
    schema={"order": int, "units": int, "price": float},
)

FILES: List[Tuple[str, List[str]]] = [
    ("0001.csv", ["1,tea,2,3.5", "2,cake,1,4.0"]),
    ("0002.csv", ["3,tea,1,3.5", "4,coffee,2,2.5"]),
    ("0003.csv", ["5,tea,1,3.5", "6,cake,lots,4.0"]),  # a bad row: refused whole
    ("0004.csv", ["7,cake,3,4.0"]),
]


def revenue(amounts: List[Tuple[float, int]]) -> List[Tuple[float, int]]:
    total = round(sum(a * n for a, n in amounts), 2)
    return [(total, 1)] if total else []


def dataflow(scope: Any) -> Dict[str, Any]:
    """Orders in; revenue per product out, with a probe."""
    orders_in, orders = scope.new_collection()
    by_product = orders.map(lambda o: (o[1], o[2] * o[3])).reduce(lambda k, v: revenue(v))
    return {"orders": orders_in, "probe": by_product.probe(), "revenue": by_product.capture()}


def produce(inbox: pathlib.Path, pause: float) -> None:
    """Write each file under a hidden name, then rename it into place."""
    for name, rows in FILES:
        time.sleep(pause)
        scratch = inbox / f".{name}"
        scratch.write_text("order,product,units,price\n" + "\n".join(rows) + "\n")
        os.replace(scratch, inbox / name)


def main(directory: str, pause: float = 0.1) -> Dict[str, Any]:
    """Run the pipeline in ``directory``; returns the revenue per product, the watch state and
    the rows written."""
    root = pathlib.Path(directory)
    inbox = root / "inbox"
    inbox.mkdir()
    producer = threading.Thread(target=produce, args=(inbox, pause))
    state = tio.WatchState()
    content: Dict[Tuple[str, float], int] = {}
    with (
        tp.open_session(dataflow) as session,
        tio.ChangeWriter(root / "revenue.jsonl", columns=("product", "revenue")) as out,
    ):

        def each_file(path: pathlib.Path, at: int) -> None:
            session.wait("probe", timeout=60)
            changes = session.changes("revenue")
            out.write(changes)
            for record, _, diff in changes:
                content[record] = content.get(record, 0) + diff
            print(f"time {at}: {path.name} loaded, {len(changes)} changes")

        producer.start()
        tio.watch_directory(
            session,
            "orders",
            inbox,
            ORDERS,
            state=state,
            settle=0,
            poll=0.02,
            timeout=60,
            on_error="skip",
            on_file=each_file,
            stop=lambda: (
                not producer.is_alive() and len(state.taken) + len(state.refused) == len(FILES)
            ),
        )
        producer.join(10)
    state.save(root / "watch-state.json")
    return {
        "revenue": dict(record for record, n in content.items() if n),
        "state": state,
        "rows": (root / "revenue.jsonl").read_text().splitlines(),
    }


def expected(state: tio.WatchState, inbox: pathlib.Path) -> Dict[str, float]:
    """Revenue per product from scratch, over the files the watch took."""
    totals: Dict[str, float] = {}
    for name in state.taken:
        for _, product, units, price in ORDERS.read(inbox / name).records:
            totals[product] = round(totals.get(product, 0.0) + units * price, 2)
    return totals


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as work:
        result = main(work)
        state = result["state"]
        print(f"taken: {sorted(state.taken)}")
        for name, reason in sorted(state.refused.items()):
            print(f"refused: {name}: {reason.split(', ', 1)[1]}")
        print(f"revenue: {sorted(result['revenue'].items())}")
        assert result["revenue"] == expected(state, pathlib.Path(work) / "inbox")
        print(f"{len(result['rows'])} rows in revenue.jsonl, the same as from scratch")
