"""What every variant of reduce shares: types, the output check, the frontier test.

Also where new interesting times are placed (evaluated now or kept pending) and the test for
``Product(int, int)`` times.
"""

from __future__ import annotations

from bisect import bisect_right
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Optional, Protocol, Set, Tuple

from ...errors import ReduceOutputError, TimelyError
from ...order import Product

if TYPE_CHECKING:
    from ...dataflow.scope import Scope

__all__ = [
    "Group",
    "History",
    "Logic",
    "Output",
    "Time",
    "beyond_test",
    "check_output",
    "check_product",
    "is_product_order",
    "place_new_times",
    "sorted_group",
]

Group = List[Tuple[Any, int]]
"""``[(value, count), ...]``: a key's values with non-zero counts, sorted by value."""
Logic = Callable[[Any, Group], Group]
"""``logic(key, group)``: the output values of ``key`` with their counts."""
Time = Tuple[int, int]
"""A ``Product(int, int)`` time as a plain pair ``(outer, inner)``."""
History = List[Tuple[Any, int, int, int]]
"""A key's flat history at ``Product(int, int)`` times: ``[(val, outer, inner, diff), ...]``."""
Output = Dict[Time, Tuple[Product, List[Any]]]
"""Per time: its Product and the output updates at it."""


class Named(Protocol):
    """What an error message names: an operator (or a fused stage) and its worker."""

    name: str
    worker_index: int


class PendingTimes(Protocol):
    """An operator's pending times, as :func:`place_new_times` registers them."""

    pending: Dict[Any, Set[Time]]

    def add_pending_time(self, t: Time, key: Any) -> None: ...


def sorted_group(accumulated: Dict[Any, int]) -> Group:
    """A key's group for a logic: the values of ``accumulated`` with non-zero counts, sorted by
    value (by ``repr`` where values do not compare)."""
    group = [(v, r) for v, r in accumulated.items() if r]
    if len(group) > 1:
        try:
            group.sort()
        except TypeError:
            group.sort(key=repr)
    return group


def is_product_order(order: Any) -> bool:
    """True for the order of ``Product(int, int)`` times (an iterative scope in a root scope)."""
    return bool(order.depth == 1 and order.outer.is_total)


def check_product(scope: "Scope", name: str) -> None:
    """:class:`~timelypy.errors.TimelyError` unless ``scope`` has ``Product(int, int)`` times."""
    if not is_product_order(scope.order):
        raise TimelyError(
            f"{name}: needs Product(int, int) times (an iterative scope in a root scope)"
        )


def check_output(op: Named, key: Any, desired: Any) -> Dict[Any, int]:
    """``logic``'s result for ``key`` as ``{value: count}`` (counts summed, zeros dropped);
    :class:`~timelypy.errors.ReduceOutputError` unless it is ``(value, int)`` pairs."""
    out: Dict[Any, int] = {}
    try:
        for item in desired:
            v, r = item
            if type(r) is not int:
                raise TypeError
            if r:
                out[v] = out.get(v, 0) + r
    except (TypeError, ValueError):
        raise ReduceOutputError(
            f"reduce {op.name!r} on worker {op.worker_index}: logic for key {key!r} "
            f"must return a list of (value, count) pairs with int counts, got {desired!r}"
        ) from None
    return out


def beyond_test(frontier: List[Time]) -> Callable[[int, int], bool]:
    """``beyond(outer, inner)``: is the time at or beyond the (sorted) antichain?"""
    if not frontier:
        return lambda a, b: False
    if len(frontier) == 1:
        f0, f1 = frontier[0]
        return lambda a, b: f0 <= a and f1 <= b
    f0s = [f[0] for f in frontier]
    f1s = [f[1] for f in frontier]

    def beyond(a: int, b: int) -> bool:
        k = bisect_right(f0s, a)
        return k > 0 and f1s[k - 1] <= b

    return beyond


def place_new_times(
    op: PendingTimes,
    key: Any,
    candidates: Set[Time],
    known: Set[Time],
    times: List[Time],
    rest: Optional[Set[Time]],
    beyond: Callable[[int, int], bool],
) -> None:
    """Each of ``candidates`` not in ``known``: appended to ``times`` (``key``'s times to
    evaluate now) if not ``beyond`` the frontier, else kept pending for ``key`` in ``op``
    (``op.pending[key]``, whose set is ``rest``, and ``op.pending_times``)."""
    for t in candidates:
        if t in known:
            continue
        if not beyond(t[0], t[1]):
            times.append(t)
            continue
        if rest is None:
            op.pending[key] = rest = {t}
        else:
            rest.add(t)
        op.add_pending_time(t, key)
