"""A loop in an iterative scope: every record counts up by one until it reaches 100.

Records enter a nested scope (``scope.iterative``), whose times are ``Product(epoch, iteration)``.
A feedback operator (``child.feedback()``, summary: +1 iteration) closes the loop: each round,
records still below 100 are incremented and fed back one iteration later; records at 100 leave
the scope (``leave()``), back at their plain epoch time. A record starting at ``s`` therefore
leaves at iteration ``100 - s``: the inner coordinate of its time *is* the number of rounds it
took, and a counter carried with the record agrees.

Records start at various values, over two epochs. Run it::

    python examples/loop_to_100.py
"""

from __future__ import annotations

from typing import List, Optional, Tuple

import timelypy as tp

TARGET = 100
STARTS = {0: [0, 37, 90, 100], 1: [99, 50, 1]}  # epoch -> start values


def main(workers: Optional[int] = None, backend: Optional[str] = None) -> str:
    """Run the loop; return (and, as a script, print) one line per record, then a summary.
    Worker 0 sends the records (``timelypy run --workers`` sets the workers when None)."""

    def build(worker: tp.Worker):
        exits: List[Tuple[tp.Product, Tuple[int, int, int]]] = []

        def dataflow(scope):
            handle, stream = scope.new_input()
            # Records are (start, value, rounds).
            records = stream.map(lambda s: (s, s, 0), name="start")

            def loop(child):
                feedback, cycle = child.feedback(max_iterations=TARGET + 1)
                current = records.enter(child).concat(cycle, name="loop-head")
                (
                    current.filter(lambda r: r[1] < TARGET, name="below-100")
                    .map(lambda r: (r[0], r[1] + 1, r[2] + 1), name="plus-one")
                    .connect_loop(feedback)
                )
                finished = current.filter(lambda r: r[1] >= TARGET, name="reached-100")
                finished = finished.inspect_batch(
                    lambda t, rs: exits.extend((t, r) for r in rs), name="exit-times"
                )
                return finished.leave()

            return handle, scope.iterative(loop, name="count-to-100").capture()

        handle, captured = worker.dataflow(dataflow)
        for epoch, starts in sorted(STARTS.items()):
            handle.advance_to(epoch)
            if worker.index == 0:
                handle.send_batch(starts)
        return exits, captured

    results = tp.execute(build, workers=workers, backend=backend)
    exits = [e for part, _ in results for e in part]
    records = [r for _, captured in results for r in captured.records()]
    done = all(captured.done() for _, captured in results)

    lines: List[str] = []
    for inner_time, (start, value, rounds) in sorted(exits, key=lambda e: (e[0][0], e[1][0])):
        lines.append(
            f"epoch {inner_time[0]}: start {start:3d} reached {value} after {rounds:3d} "
            f"iterations (left the loop at {inner_time!r})"
        )
    outside = sorted((t, r[0]) for t, r in records)
    lines.append(
        f"outside the loop: {len(outside)} records at epochs "
        f"{sorted({t for t, _ in outside})}; complete: {done}"
    )
    return "\n".join(lines)


if __name__ == "__main__":
    print(main())
