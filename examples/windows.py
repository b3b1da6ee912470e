"""Event-time windows over a click stream that arrives out of order.

Clicks ``(page, (user, second))`` arrive out of order. The driver follows the Differential
Dataflow book's "real-time streaming input" pattern: the session's logical time is event time
(seconds); the input advances to a low watermark, ``max(event time seen) - 10``, and a click
older than the watermark is stamped at the watermark. Three windowed queries read the stream:

* clicks per page in 1-minute tumbling windows, with 20 seconds of allowed lateness;
* clicks per page in 1-minute windows sliding every 30 seconds;
* per user, sessions of clicks less than 30 seconds apart.

Each result appears when its window's end passes the watermark; a click within the lateness
changes it (the output shows the retraction and the new count); a click later than that is
reported as late, not counted. Run it::

    python examples/windows.py
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

import timelypy as tp
from timelypy.windows import Session, Sliding, Tumbling, windowed

# (page, (user, second)) in arrival order; two arrive late: 58 after the watermark passed 70
# (within 20 s of lateness), and 12 after it passed 90 (too late for [0, 60)).
CLICKS: List[Tuple[str, Tuple[str, int]]] = [
    ("home", ("ann", 3)),
    ("cart", ("ann", 20)),
    ("home", ("bob", 15)),
    ("home", ("cid", 41)),
    ("cart", ("bob", 65)),
    ("home", ("ann", 81)),
    ("home", ("cid", 58)),
    ("cart", ("cid", 97)),
    ("home", ("bob", 104)),
    ("cart", ("ann", 12)),
    ("home", ("dan", 130)),
]
OUT_OF_ORDERNESS = 10


def second(click: Tuple[str, int]) -> int:
    """A click's event time (seconds)."""
    return click[1]


def dataflow(scope: tp.Scope) -> dict:
    clicks_in, clicks = scope.new_collection()
    per_page = windowed(clicks, Tumbling(60), second, lateness=20, name="per-page")
    by_user = clicks.map(lambda c: (c[1][0], (c[0], c[1][1])))
    outputs = {
        "tumbling": per_page.count(),
        "late": per_page.late,
        "sliding": windowed(clicks, Sliding(60, 30), second).count(),
        "sessions": windowed(by_user, Session(30), second).count(),
    }
    handles: dict = {"clicks": clicks_in, "probe": outputs["tumbling"].probe()}
    for name, collection in outputs.items():
        handles[name] = collection.capture()
        handles[f"{name}-probe"] = collection.probe()
    return handles


QUERIES = ("tumbling", "late", "sliding", "sessions")


def stamped() -> List[Tuple[Tuple[str, Tuple[str, int]], int, int]]:
    """Every click with the logical time it is stamped at (its event time, or the watermark
    if that has passed it) and the watermark after it (trailing the greatest event time)."""
    out, watermark = [], 0
    for page, (user, t) in CLICKS:
        time = max(t, watermark)
        watermark = max(watermark, t - OUT_OF_ORDERNESS)
        out.append(((page, (user, t)), time, watermark))
    return out


def run(workers: Optional[int] = None, backend: Optional[str] = None) -> dict:
    """Push the clicks, advancing the input to the watermark; close the stream; return every
    query's changes ``[(((window, key), value), time, diff), ...]``, consolidated."""
    with tp.open_session(dataflow, workers=workers, backend=backend) as s:
        for click, time, watermark in stamped():
            s.update_at("clicks", click, time, 1)
            s.advance_to(watermark)  # results of the windows ending before it appear
        s.advance_to(300)  # the stream ends: every window closes
        changes = {}
        for name in QUERIES:
            s.wait(f"{name}-probe", timeout=30)
            changes[name] = consolidated(s.changes(name))
    return changes


def consolidated(changes: List[Tuple[Any, int, int]]) -> List[Tuple[Any, int, int]]:
    sums: Dict[Tuple[Any, int], int] = {}
    for record, time, diff in changes:
        sums[(record, time)] = sums.get((record, time), 0) + diff
    return sorted(
        ((r, t, d) for (r, t), d in sums.items() if d), key=lambda u: (u[1], -u[2], repr(u[0]))
    )


def main(workers: Optional[int] = None, backend: Optional[str] = None) -> str:
    """Run the queries; return (as a script, print) every result change and the late clicks."""
    report = []
    for name, changes in run(workers, backend).items():
        report.append(f"{name}:")
        for ((window, key), value), time, diff in changes:
            sign = "+" if diff > 0 else "-"
            report.append(
                f"  t={time:>3} {sign} [{window.start:>3}, {window.end:>3}) {key}: {value}"
            )
    return "\n".join(report)


if __name__ == "__main__":
    print(main())
