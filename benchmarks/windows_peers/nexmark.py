"""A deterministic Nexmark-style event stream, the three windowed queries from scratch, digests.

The Nexmark benchmark (Tucker et al., "NEXMark - A Benchmark for Queries over Data Streams")
models an online auction: people register, open auctions and bid. This generator keeps its
shape and proportions, persons : auctions : bids = 1 : 3 : 46 (in every block of 50 events:
one person, three auctions, 46 bids), as plain tuples so that every system reads the same
stream (no dependency: the peers' interpreter imports this module too):

* person ``(0, person_id, state, 0, event_time)``
* auction ``(1, auction_id, seller, category, event_time)``: the seller is one of the 20
  newest persons (so that new persons often open auctions in the window they registered in)
* bid ``(2, auction_id, bidder, price, event_time)``: half the bids go to the 10 newest
  auctions (hot items), the others to one of the 1,000 newest

Event times are integers (milliseconds): event ``i`` happens at ``ORIGIN + i * 1000 // rate``
minus a seeded disorder of at most ``disorder`` ms. With the watermark ``max(event times seen) -
disorder`` no event is ever behind the watermark, so every system computes the same exact
windows (nothing is late) and the digests of the final results must agree.

The queries (window sizes in ms, windows ``[start, end)``, results once a window closed):

* ``q5`` hot items: bids per auction in sliding windows (``size``, ``hop``):
  ``(start, auction, count)``;
* ``q7`` highest bid: the highest price per tumbling window (``size``): ``(start, price)``;
* ``q8`` new sellers: persons who registered and opened an auction in the same tumbling window
  (``size``): ``(start, person)``, distinct.
"""

from __future__ import annotations

import hashlib
import random
from typing import Any, Dict, Iterable, Iterator, List, Sequence, Tuple

PERSON, AUCTION, BID = 0, 1, 2
BLOCK = 50
"""Events per block: one person, three auctions, 46 bids (Nexmark's 1:3:46)."""
QUERIES = ("q5", "q7", "q8")

ORIGIN = 1_000_000
"""The first event's time (ms): later than any window size, so that every window holding an
event starts at or after 0 (systems differ in whether they make windows before their origin)."""

Event = Tuple[int, int, int, int, int]


def events(n: int, seed: int = 1, rate: int = 1000, disorder: int = 500) -> Iterator[Event]:
    """The first ``n`` events of the stream (``rate`` events per event-time second, event times
    in ms, each at most ``disorder`` ms before its place), lazily: a stream of any length in
    constant memory."""
    rng = random.Random(seed)
    randrange, rand = rng.randrange, rng.random
    persons = auctions = 0
    for i in range(n):
        base = ORIGIN + i * 1000 // rate
        et = base - randrange(disorder + 1) if disorder else base
        slot = i % BLOCK
        if slot == 0:
            yield (PERSON, persons, randrange(50), 0, et)
            persons += 1
        elif slot <= 3:
            seller = persons - 1 - randrange(min(persons, 20)) if persons else 0
            yield (AUCTION, auctions, seller, randrange(10), et)
            auctions += 1
        else:
            recent = 10 if rand() < 0.5 else 1000
            auction = auctions - 1 - randrange(min(auctions, recent)) if auctions else 0
            bidder = persons - 1 - randrange(min(persons, 1000)) if persons else 0
            yield (BID, auction, bidder, randrange(1, 10**7), et)


def batches(stream: Iterable[Event], size: int, disorder: int) -> Iterator[Tuple[List[Event], int]]:
    """``(batch, watermark)`` for consecutive batches of ``size`` events: the watermark after
    the batch is ``max(event times so far) - disorder`` (never decreasing; every event of a
    later batch is at or after it)."""
    top = 0
    batch: List[Event] = []
    for e in stream:
        batch.append(e)
        if e[4] > top:
            top = e[4]
        if len(batch) >= size:
            yield batch, top - disorder
            batch = []
    if batch:
        yield batch, top - disorder


def tumbling(et: int, size: int) -> int:
    """The start of the tumbling window holding ``et``."""
    return et // size * size


def sliding(et: int, size: int, hop: int) -> range:
    """The starts of the sliding windows (length ``size``, one every ``hop``) holding ``et``."""
    first = (et - size) // hop + 1
    last = et // hop
    return range(first * hop, last * hop + 1, hop)


def reference(query: str, stream: Iterable[Event], params: Dict[str, int]) -> List[Tuple[int, ...]]:
    """The query's final results computed from scratch in plain Python (sorted tuples)."""
    size, hop = params["size"], params["hop"]
    if query == "q5":
        counts: Dict[Tuple[int, int], int] = {}
        for e in stream:
            if e[0] == BID:
                for s in sliding(e[4], size, hop):
                    counts[(s, e[1])] = counts.get((s, e[1]), 0) + 1
        return sorted((s, a, n) for (s, a), n in counts.items())
    if query == "q7":
        best: Dict[int, int] = {}
        for e in stream:
            if e[0] == BID:
                s = tumbling(e[4], size)
                if e[3] > best.get(s, -1):
                    best[s] = e[3]
        return sorted(best.items())
    if query == "q8":
        persons, sellers = set(), set()
        for e in stream:
            if e[0] == PERSON:
                persons.add((tumbling(e[4], size), e[1]))
            elif e[0] == AUCTION:
                sellers.add((tumbling(e[4], size), e[2]))
        return sorted(persons & sellers)
    raise ValueError(f"nexmark: unknown query {query!r} (known: {QUERIES})")


def digest(rows: Iterable[Sequence[int]]) -> str:
    """SHA-256 (first 16 hex digits) of the sorted result rows: equal for equal results."""
    h = hashlib.sha256()
    for row in sorted(tuple(r) for r in rows):
        h.update(repr(row).encode())
        h.update(b"\n")
    return h.hexdigest()[:16]


def close_latencies(
    seen: Dict[int, float], emitted: Sequence[Tuple[int, float]], final_at: float
) -> List[float]:
    """Seconds from the moment each window could close to the moment its result was seen.

    ``seen``: window end -> wall time its first result row was seen; ``emitted``: per batch, in
    order, ``(watermark after it, wall time it was handed to the system)``; a window closes with
    the first batch whose watermark passed its end, or at ``final_at`` (the end of the input)."""
    marks = [w for w, _ in emitted]
    import bisect

    out = []
    for end, at in seen.items():
        k = bisect.bisect_right(marks, end)  # the first batch with watermark > end
        pushed = emitted[k][1] if k < len(emitted) else final_at
        out.append(max(0.0, at - pushed))
    return out


def summary(stream_params: Dict[str, Any]) -> Dict[str, Any]:
    """The counts of each kind in the first ``events`` events (without generating them)."""
    n = int(stream_params["events"])
    full, rest = divmod(n, BLOCK)
    persons = full + (1 if rest > 0 else 0)
    auctions = full * 3 + max(0, min(rest - 1, 3))
    return {"persons": persons, "auctions": auctions, "bids": n - persons - auctions}
