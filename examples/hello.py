"""Hello, timely: an input, an exchange, an inspect and a probe, driven for 10 epochs.

This is timely dataflow's first example. Each epoch sends a few records into the input, advances
the input to the next epoch (a promise that no more records at the old epoch will come) and steps
the worker until the probe reports that the epoch is complete: every record of it has passed the
inspect operator. The probe's frontier moves forward by exactly one epoch per round.

Run it::

    python examples/hello.py
"""

from __future__ import annotations

from typing import List

import timelypy as tp

EPOCHS = 10


def main() -> str:
    """Run the dataflow; return (and, as a script, print) the lines it produced."""

    def build(worker: tp.Worker) -> List[str]:
        lines: List[str] = []

        def dataflow(scope):
            handle, stream = scope.new_input()
            probe = (stream
                     .exchange(lambda x: x)
                     .inspect(lambda x: lines.append(f"worker {worker.index}:\thello {x}"))
                     .probe())
            return handle, probe

        handle, probe = worker.dataflow(dataflow)
        for epoch in range(EPOCHS):
            # One record per epoch, and a second one every third epoch.
            handle.send(epoch)
            if epoch % 3 == 0:
                handle.send(100 + epoch)
            handle.advance_to(epoch + 1)
            worker.step_until(probe, handle.time, timeout=10)
            lines.append(f"epoch {epoch} complete: probe frontier {probe.frontier}")
        handle.close()
        worker.step_until_done(timeout=10)
        lines.append(f"done: {probe.done()}")
        return lines

    (lines,) = tp.execute(build)
    return "\n".join(lines)


if __name__ == "__main__":
    print(main())
