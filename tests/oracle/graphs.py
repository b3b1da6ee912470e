"""Graph oracles from scratch: reachability by depth-first search."""

from __future__ import annotations

from collections import defaultdict
from typing import Any, Dict, Hashable, Iterable, List, Set, Tuple


def reachable(edges: Iterable[Tuple[Hashable, Hashable]], roots: Iterable[Hashable]) -> Set[Any]:
    """The nodes reachable from ``roots`` (the roots included) along the directed ``edges``."""
    adj: Dict[Hashable, List[Hashable]] = defaultdict(list)
    for s, d in edges:
        adj[s].append(d)
    seen, stack = set(roots), list(roots)
    while stack:
        for y in adj.get(stack.pop(), ()):
            if y not in seen:
                seen.add(y)
                stack.append(y)
    return seen
