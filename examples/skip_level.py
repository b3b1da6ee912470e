"""Skip-level management: the first program of the Differential Dataflow book.

A collection ``manages`` holds pairs ``(manager, person)``. Joining it with itself, once with
its fields swapped, gives for every person their manager's manager, together with the middle
manager as evidence: ``(m1, (m2, p))`` whenever ``(m2, m1)`` and ``(m1, p)``.

The organisation starts as a binary tree (``person // 2`` manages ``person``, time 0) and then,
one person per day (``advance_to(person)``), moves to a ternary tree (``person // 3``). The
output is the stream of changes ``((m1, (m2, p)), time, diff)``; for ``size = 10`` it is
exactly the book's listing::

    ((0, (0, 0)), 0, 1)
    ((0, (0, 1)), 0, 1)
    ((0, (0, 2)), 2, 1)
    ((1, (0, 2)), 0, 1)
    ((1, (0, 2)), 2, -1)
    ...
    ((4, (2, 9)), 4, -1)

With several workers each loads its share of the people (``person % peers == index``), as in
the book's "Increase the parallelism" section, and the output is the same. With
``interactive=True`` every change is awaited with a probe before the next one is made (the
book's "Increase the interaction").

Run it::

    python examples/skip_level.py            # size 10, the book's listing
    python examples/skip_level.py 1000 2     # size 1000 on two workers (prints a summary)
"""

from __future__ import annotations

import sys
from typing import Any, List, Optional, Tuple

import timelypy as tp

Update = Tuple[Tuple[int, Tuple[int, int]], int, int]


def skip_level(manages: Any) -> Any:
    """If ``(m2, m1)`` and ``(m1, p)`` then ``(m1, (m2, p))``: the book's program."""
    return manages.map(lambda mp: (mp[1], mp[0])).join(manages)


def _sort_key(update: Update):
    data, time, diff = update
    return (data, time, diff)


def main(
    size: int = 10,
    workers: Optional[int] = None,
    interactive: bool = False,
    backend: Optional[str] = None,
) -> List[Update]:
    """Run the program on ``workers`` workers; return its consolidated output updates,
    sorted as in the book (by record, then time). ``workers`` / ``backend`` left None come
    from ``timelypy run --workers N --backend B`` (else 1 worker, inline)."""

    def build(worker: tp.Worker):
        def dataflow(scope):
            session, manages = scope.new_collection(name="manages")
            out = skip_level(manages)
            return session, out.capture(), out.probe()

        session, captured, probe = worker.dataflow(dataflow)
        index, peers = worker.index, worker.peers

        # Load the initial org chart (a binary tree) at time 0: each worker its own share.
        for person in range(index, size, peers):
            session.insert((person // 2, person))
        if interactive:
            session.advance_to(1)
            session.flush()
            worker.step_until(probe, session.time, timeout=60)

        # One person per day moves to their new manager.
        for person in range(1, size):
            if person % peers != index:
                continue
            session.advance_to(person)
            session.remove((person // 2, person))
            session.insert((person // 3, person))
            if interactive:
                session.advance_to(person + 1)
                session.flush()
                worker.step_until(probe, session.time, timeout=60)
        # The session buffers changes; closing it sends them (and lets the dataflow finish).
        session.close()
        return captured

    results = tp.execute(build, workers=workers, backend=backend)
    acc: dict = {}
    for captured in results:
        for data, time, diff in captured.updates():
            acc[(data, time)] = acc.get((data, time), 0) + diff
    return sorted(((d, t, r) for (d, t), r in acc.items() if r), key=_sort_key)


if __name__ == "__main__":
    size = int(sys.argv[1]) if len(sys.argv) > 1 else 10
    workers = int(sys.argv[2]) if len(sys.argv) > 2 else None
    updates = main(size, workers)
    if size <= 100:
        for update in updates:
            print(update)
    else:
        times = {t for _, t, _ in updates}
        print(f"{len(updates)} output updates at {len(times)} distinct times")
