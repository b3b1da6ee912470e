"""Word count over a changing set of lines.

The input collection holds lines of text. ``flat_map`` splits each line into words and
``count`` maintains, for every word, how many times it occurs across all current lines::

    lines.flat_map(str.split).count()       # (word, count)

Each round inserts some new lines and removes some old ones (a line inserted twice counts
twice). The output is the stream of count changes: a word whose count goes from 3 to 4 shows
as ``((word, 3), t, -1)`` and ``((word, 4), t, +1)``. After every round the counts are checked
against a ``collections.Counter`` over the current lines.

Run it::

    python examples/wordcount.py             # 20 lines, 5 rounds
    python examples/wordcount.py 1000 20
"""

from __future__ import annotations

import random
import sys
from collections import Counter
from typing import Any, Dict, Iterable, List, Optional, Tuple

import timelypy as tp

WORDS = (
    "differential dataflow timely collection arrangement trace batch frontier "
    "lattice since upper join reduce iterate count the a of and to"
).split()


def word_counts(lines: Any) -> Any:
    """``(word, count)`` for every word of the current lines."""
    return lines.flat_map(str.split).count()


def from_scratch(lines: Counter) -> Dict[Tuple[str, int], int]:
    """The expected output content: ``{(word, count): 1}``."""
    words: Counter = Counter()
    for line, n in lines.items():
        for w in line.split():
            words[w] += n
    return {(w, c): 1 for w, c in words.items() if c}


def merged(parts: Iterable[Dict[Any, int]]) -> Dict[Any, int]:
    """The sum of the workers' contents at one time (each worker holds its share)."""
    out: Dict[Any, int] = {}
    for part in parts:
        for record, count in part.items():
            out[record] = out.get(record, 0) + count
    return {record: count for record, count in out.items() if count}


def main(
    lines: int = 20,
    rounds: int = 5,
    seed: int = 3,
    workers: Optional[int] = None,
    backend: Optional[str] = None,
) -> List[Dict[str, Any]]:
    """Run ``rounds`` rounds of line changes; return after each round ``{"counts": {word:
    count}, "lines": Counter of the current lines}``. Raises ``AssertionError`` if the counts
    ever differ from counting from scratch. Every worker draws the same changes and worker 0
    makes them; each worker reads its share of the counts (``timelypy run --workers`` sets the
    workers when None)."""

    def build(worker: tp.Worker):
        rng = random.Random(seed)
        return rounds_of_changes(worker, rng)

    def new_line(rng: random.Random) -> str:
        return " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 8)))

    def rounds_of_changes(worker: tp.Worker, rng: random.Random):
        mine = worker.index == 0

        def dataflow(scope):
            session, text = scope.new_collection(name="lines")
            counts = word_counts(text)
            return session, counts.capture(), counts.probe()

        session, captured, probe = worker.dataflow(dataflow)
        current: Counter = Counter()
        history: List[Dict[str, Any]] = []
        for r in range(rounds + 1):
            session.advance_to(r)
            adds = lines if r == 0 else max(1, lines // 4)
            for _ in range(adds):
                line = (
                    new_line(rng) if r == 0 or rng.random() < 0.8 else rng.choice(sorted(current))
                )
                current[line] += 1
                if mine:
                    session.insert(line)
            if r > 0:
                for _ in range(max(1, lines // 5)):
                    line = rng.choice(sorted(current))
                    current[line] -= 1
                    if not current[line]:
                        del current[line]
                    if mine:
                        session.remove(line)
            session.advance_to(r + 1)
            session.flush()
            worker.step_until(probe, session.time, timeout=60)
            history.append((captured.at(r), Counter(current)))
        session.close()
        return history

    parts = tp.execute(build, workers=workers, backend=backend)
    history: List[Dict[str, Any]] = []
    for r, (_, current) in enumerate(parts[0]):
        got = merged(part[r][0] for part in parts)
        assert got == from_scratch(current), f"round {r}: counts differ"
        history.append({"counts": dict(sorted(got)), "lines": current})
    return history


if __name__ == "__main__":
    args = [int(a) for a in sys.argv[1:3]]
    for r, state in enumerate(main(*args)):
        counts = state["counts"]
        top = sorted(counts.items(), key=lambda wc: (-wc[1], wc[0]))[:6]
        print(f"time {r}: {len(counts)} distinct words; most frequent {top}")
