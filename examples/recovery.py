"""A durable session: run, checkpoint, crash, restore onto another number of workers, check.

A session counts words over a changing set of lines (``lines.flat_map(str.split).count()``)
and arranges the counts for ``lookup``. It takes a checkpoint every ``every`` times
(``open_session(..., checkpoint=tp.Checkpoints(location, every_times=every))``). Half-way, the
session is aborted, as a crash would end it: its workers stop at once and everything since the
last checkpoint is lost. A new session restores the newest checkpoint
(``open_session(dataflow, restore=location)``), on another number of workers, continues at the
checkpoint's time (``session.time``), is fed the rounds from there on, and ends with exactly the
counts and lookups of a run that never stopped, which the example checks.

Run it::

    python examples/recovery.py                     # 2 workers, then 3, on inline
    python examples/recovery.py processes 2 1       # on worker processes, 2 then 1
    python examples/recovery.py ray 2 3             # on Ray actors (a local Ray, started)
"""

from __future__ import annotations

import random
import sys
import tempfile
from collections import Counter
from typing import Any, Dict, List

import timelypy as tp

WORDS = "checkpoint restore frontier arrangement trace batch worker time".split()
ROUNDS = 10


def dataflow(scope: tp.Scope) -> Dict[str, Any]:
    """Word counts over the current lines: captured, arranged for lookup, probed."""
    lines_in, lines = scope.new_collection()
    counts = lines.flat_map(str.split).count()
    return {
        "lines": lines_in,
        "counts": counts.capture(),
        "by_word": counts.arrange_by_key(),
        "probe": counts.probe(),
    }


def lines_of(round: int) -> List[str]:
    """The lines inserted in ``round`` (those of round ``round - 3`` are removed then)."""
    rng = random.Random(round)
    return [" ".join(rng.choice(WORDS) for _ in range(4)) for _ in range(5)]


def feed(session: tp.DataflowSession, start: int, end: int) -> None:
    """Rounds ``start`` to ``end - 1``: insert their lines, remove old ones, advance."""
    for r in range(start, end):
        for line in lines_of(r):
            session.insert("lines", line)
        if r >= 3:
            for line in lines_of(r - 3):
                session.remove("lines", line)
        session.advance_to(r + 1)
    session.wait("probe")


def from_scratch() -> Dict[str, int]:
    """The word counts after every round, computed directly."""
    current: Counter = Counter()
    for r in range(ROUNDS):
        current.update(lines_of(r))
        if r >= 3:
            current.subtract(lines_of(r - 3))
    words: Counter = Counter()
    for line, n in current.items():
        for word in line.split():
            words[word] += n
    return {w: n for w, n in words.items() if n}


def main(backend: str = "inline", before: int = 2, after: int = 3, every: int = 2) -> List[str]:
    """Run, crash half-way, restore onto ``after`` workers, finish; returns what it prints."""
    out: List[str] = []
    with tempfile.TemporaryDirectory() as location:
        every_k = tp.Checkpoints(location, every_times=every)
        first = tp.open_session(dataflow, workers=before, backend=backend, checkpoint=every_k)
        feed(first, 0, ROUNDS // 2 + 2)
        last = first.last_checkpoint
        out.append(
            f"ran to time {first.time} on {before} worker(s); last checkpoint at {last.time}"
        )
        first.abort()  # a crash: the workers stop, the state since the checkpoint is lost
        with tp.open_session(dataflow, workers=after, backend=backend, restore=every_k) as s:
            out.append(f"restored on {after} worker(s) at time {s.time}")
            state = s.restored("counts")  # the counts at the checkpoint's time, once
            feed(s, s.time, ROUNDS)
            counts: Counter = Counter()
            for (word, n), _, diff in state + s.changes("counts"):
                counts[(word, n)] += diff
            result = {word: n for (word, n), c in counts.items() if c > 0}
            looked_up = {w: next(iter(s.lookup("by_word", w)), 0) for w in WORDS}
    expected = from_scratch()
    assert result == expected, (result, expected)
    assert looked_up == {w: expected.get(w, 0) for w in WORDS}, looked_up
    out.append(f"after {ROUNDS} rounds: {len(result)} words, equal to a run that never stopped")
    return out


if __name__ == "__main__":
    backend = sys.argv[1] if len(sys.argv) > 1 else "inline"
    numbers = [int(a) for a in sys.argv[2:4]]
    for line in main(backend, *numbers):
        print(line)
