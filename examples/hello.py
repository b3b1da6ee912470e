"""Hello, timely: an input, an exchange, an inspect and a probe, driven for 10 epochs.

This is timely dataflow's first example. Each epoch sends a few records into the input, advances
the input to the next epoch (a promise that no more records at the old epoch will come) and steps
the worker until the probe reports that the epoch is complete: every record of it has passed the
inspect operator. The probe's frontier moves forward by exactly one epoch per round.

Run it::

    python examples/hello.py
"""

from __future__ import annotations

from typing import List, Optional, Tuple

import timelypy as tp

EPOCHS = 10


Line = Tuple[int, int, int, int, str]
"""``(epoch, 0 for records / 1 for the epoch's end, worker, sequence, text)``: sorts the lines of
all workers into one listing."""


def main(workers: Optional[int] = None, backend: Optional[str] = None) -> str:
    """Run the dataflow; return (and, as a script, print) the lines it produced. Worker 0
    sends the records; the exchange spreads them over the workers (``timelypy run --workers``
    sets how many when ``workers`` is None)."""

    def build(worker: tp.Worker) -> List[Line]:
        lines: List[Line] = []

        def seen(epoch, records):
            lines.extend(
                (epoch, 0, worker.index, len(lines), f"worker {worker.index}:\thello {x}")
                for x in records
            )

        def dataflow(scope):
            handle, stream = scope.new_input()
            probe = stream.exchange(lambda x: x).inspect_batch(seen).probe()
            return handle, probe

        handle, probe = worker.dataflow(dataflow)
        for epoch in range(EPOCHS):
            # One record per epoch, and a second one every third epoch.
            if worker.index == 0:
                handle.send(epoch)
                if epoch % 3 == 0:
                    handle.send(100 + epoch)
            handle.advance_to(epoch + 1)
            worker.step_until(probe, handle.time, timeout=10)
            if worker.index == 0:
                lines.append(
                    (epoch, 1, 0, 0, f"epoch {epoch} complete: probe frontier {probe.frontier}")
                )
        handle.close()
        worker.step_until_done(timeout=10)
        if worker.index == 0:
            lines.append((EPOCHS, 1, 0, 0, f"done: {probe.done()}"))
        return lines

    results = tp.execute(build, workers=workers, backend=backend)
    return "\n".join(line[-1] for line in sorted(line for part in results for line in part))


if __name__ == "__main__":
    print(main())
