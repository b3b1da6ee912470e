"""Output updates as the tests compare them: summed per ``(record, time)``."""

from __future__ import annotations

from collections import Counter
from typing import Any, Dict, Iterable, Tuple


def net_changes(updates: Iterable[Tuple[Any, Any, int]]) -> Dict[Tuple[Any, Any], int]:
    """``(record, time, diff)`` updates summed per ``(record, time)``, zeros dropped: what a
    stream of changes amounts to, however it was batched or split between workers."""
    acc: Counter = Counter()
    for record, time, diff in updates:
        acc[(record, time)] += diff
    return {k: d for k, d in acc.items() if d}
