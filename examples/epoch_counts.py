"""Per-epoch counts with a generic operator and a Notificator.

A ``unary`` operator counts the records of each epoch as they arrive (in whatever order) and asks
a :class:`~timelypy.Notificator` to be told about each epoch. The notificator hands back a
capability for an epoch only once the input frontier has passed it, i.e. when no more records of
that epoch can arrive; the operator then sends ``(epoch, count)`` at that epoch and drops the
capability. Some records are sent ahead of time (``send(record, time=future)``), so epochs'
records arrive out of order, yet each count comes out exactly once, complete, and in time order.

Run it::

    python examples/epoch_counts.py
"""

from __future__ import annotations

from collections import Counter
from typing import Dict, List, Optional, Tuple

import timelypy as tp

# What the driver does at each epoch: records sent now, and records sent ahead to later epochs.
PLAN: Dict[int, Dict[str, object]] = {
    0: {"now": ["a", "b", "c"], "ahead": {3: ["x", "y"], 5: ["z"]}},
    1: {"now": ["d"], "ahead": {4: ["w"]}},
    2: {"now": [], "ahead": {}},
    3: {"now": ["e", "f"], "ahead": {5: ["v", "u"]}},
    4: {"now": ["g"], "ahead": {}},
    5: {"now": ["h"], "ahead": {}},
}


def count_per_epoch(capability: tp.Capability, info):
    """The operator: count records per time; emit each count once the frontier passes it."""
    capability.drop()  # the operator only sends at times of records it received
    notificator = tp.Notificator()
    counts: Counter = Counter()

    def logic(input, output):
        for cap, records in input:
            if cap.time not in counts:
                notificator.notify_at(cap.retain())
            counts[cap.time] += len(records)
        for cap in notificator.available([input.frontier]):
            with output.session(cap) as session:
                session.give((cap.time, counts.pop(cap.time)))
            cap.drop()

    return logic


def main(workers: Optional[int] = None, backend: Optional[str] = None) -> str:
    """Run the dataflow; return (and, as a script, print) a log of sends and emitted counts.
    Worker 0 sends and counts (the operator's pact is a pipeline); the others only advance
    (``timelypy run --workers`` sets the workers when None)."""

    def build(worker: tp.Worker):
        log: List[str] = []

        def dataflow(scope):
            handle, stream = scope.new_input()
            counts = stream.unary(count_per_epoch, name="count-per-epoch")
            counts = counts.inspect(
                lambda tc: log.append(f"  count: epoch {tc[0]} had {tc[1]} record(s)")
            )
            probe = counts.probe()
            return handle, counts.capture(), probe

        handle, captured, probe = worker.dataflow(dataflow)
        for epoch, plan in sorted(PLAN.items()):
            ahead = plan["ahead"] if worker.index == 0 else {}
            if worker.index == 0:
                log.append(
                    f"epoch {epoch}: send {plan['now']}" + (f", ahead {ahead}" if ahead else "")
                )
                for record in plan["now"]:
                    handle.send(record)
            for time, records in sorted(ahead.items()):
                for record in records:
                    handle.send(record, time=time)
            # Close the epoch and wait until its count (if it had records) has come out.
            handle.advance_to(epoch + 1)
            worker.step_until(probe, handle.time, timeout=10)
        handle.close()
        worker.step_until_done(timeout=10)
        return log, captured

    results = tp.execute(build, workers=workers, backend=backend)
    log = [line for part, _ in results for line in part]
    emitted: List[Tuple[int, int]] = [r for _, captured in results for _, r in captured.records()]
    times = [t for t, _ in emitted]
    log.append(f"emitted in order: {emitted}")
    log.append(
        f"in time order: {times == sorted(times)}; each epoch once: "
        f"{len(times) == len(set(times))}; total records: {sum(c for _, c in emitted)}"
    )
    return "\n".join(log)


if __name__ == "__main__":
    print(main())
