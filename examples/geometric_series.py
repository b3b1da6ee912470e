"""The geometric series: iteration that both grows and retracts.

The example of the "differential dataflow from scratch" walk-throughs (iterate with enter,
feedback and leave; subtract the input at the first iteration).

For each input record ``x`` the loop produces ``{x, 2x, 4x, ...}`` up to a limit (50)::

    def geometric_series(collection):
        return (collection.map(lambda x: x * 2)
                .concat(collection)
                .filter(lambda x: x <= 50)
                .map(lambda x: (x, ()))
                .distinct()
                .map(lambda x: x[0])
                .consolidate())

The driver inserts 1 at version 0, inserts 16 and 3 at version 1 and retracts 3 at version 2.
The iterate's output, consolidated per version, is the walk-through's final listing:

    version 0: +1 +2 +4 +8 +16 +32
    version 1: +3 +6 +12 +24 +48            (16 and 32 were already there: no change)
    version 2: -3 -6 -12 -24 -48            (the retraction removes every multiple of 3)

Run it::

    python examples/geometric_series.py
"""

from __future__ import annotations

import sys
from typing import Any, Dict, List, Optional, Sequence, Tuple

import timelypy as tp

#: (version, record, diff) input changes of the walk-through.
CHANGES: Tuple[Tuple[int, int, int], ...] = ((0, 1, +1), (1, 16, +1), (1, 3, +1), (2, 3, -1))


def geometric_series(collection: Any, limit: int = 50) -> Any:
    """One step of the loop: double everything, keep the old values, cap at ``limit``."""
    return (
        collection.map(lambda x: x * 2)
        .concat(collection)
        .filter(lambda x: x <= limit)
        .map(lambda x: (x, ()))
        .distinct()
        .map(lambda x: x[0])
        .consolidate()
    )


def from_scratch(inputs: Dict[int, int], limit: int = 50) -> Dict[int, int]:
    """The loop's fixed point computed directly: ``{x * 2**k <= limit}`` as a set."""
    out: Dict[int, int] = {}
    for x, count in inputs.items():
        if count <= 0:
            continue
        while x <= limit:
            out[x] = 1
            x *= 2
    return out


def main(
    changes: Sequence[Tuple[int, int, int]] = CHANGES,
    limit: int = 50,
    workers: Optional[int] = None,
    backend: Optional[str] = None,
) -> Dict[int, List[Tuple[int, int]]]:
    """Run the loop over ``changes``; return its output consolidated and grouped by version:
    ``{version: [(record, diff), ...]}`` sorted by record. Worker 0 makes the changes
    (``timelypy run --workers`` sets the workers when None)."""

    def build(worker: tp.Worker):
        def dataflow(scope):
            session, numbers = scope.new_collection(name="numbers")
            out = numbers.iterate(lambda c: geometric_series(c, limit))
            return session, out.capture(), out.probe()

        session, captured, probe = worker.dataflow(dataflow)
        for version, record, diff in sorted(changes, key=lambda c: c[0]):
            if version != session.time:
                # Finish the previous version before starting the next (as the walk-through does).
                session.advance_to(version)
                session.flush()
                worker.step_until(probe, session.time, timeout=60)
            if worker.index == 0:
                session.update(record, diff)
        session.close()
        return captured

    acc: Dict[Tuple[int, int], int] = {}
    for captured in tp.execute(build, workers=workers, backend=backend):
        for x, t, d in captured.updates():
            acc[(t, x)] = acc.get((t, x), 0) + d
    out: Dict[int, List[Tuple[int, int]]] = {}
    for (t, x), d in sorted(acc.items()):
        if d:
            out.setdefault(t, []).append((x, d))
    return out


if __name__ == "__main__":
    limit = int(sys.argv[1]) if len(sys.argv) > 1 else 50
    for version, updates in main(limit=limit).items():
        print(
            f"version {version}: "
            + " ".join(
                f"{'+' if d > 0 else '-'}{x}" if abs(d) == 1 else f"{x}x{d}" for x, d in updates
            )
        )
