"""The group logics of the built-in reductions, and how a logic declares what it is.

A logic is ``logic(key, group) -> [(out_val, count), ...]``. A :class:`GroupLogic` is a logic that
also declares its kind, so that an operator may evaluate it more cheaply than on groups: a
*threshold* gives a record arranged by self (the single value ``()``) the count ``f(record,
count)``, so reduce at ``Product(int, int)`` times evaluates it on the count alone; *distinct* is
the threshold whose ``f`` is "1 for a positive count", inlined. Any other callable is *general*.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Optional, Union

from .common import Group, Logic

__all__ = [
    "GroupLogic",
    "as_group_logic",
    "count_logic",
    "distinct_logic",
    "sum_logic",
    "threshold_logic",
]


@dataclass(frozen=True)
class GroupLogic:
    """A group logic with its declared kind.

    ``fn`` is the logic itself (always valid, on any group); ``threshold``, when set, says that
    on a record arranged by self ``fn`` gives the count ``threshold(record, count)`` (for a
    non-zero count); ``distinct`` says that this ``threshold`` is 1 for a positive count, else 0.
    """

    fn: Logic
    threshold: Optional[Callable[[Any, int], int]] = None
    distinct: bool = False

    @property
    def kind(self) -> str:
        """``"distinct"``, ``"threshold"`` or ``"general"``."""
        if self.distinct:
            return "distinct"
        return "general" if self.threshold is None else "threshold"

    def __call__(self, key: Any, group: Group) -> Group:
        """``fn(key, group)``."""
        return self.fn(key, group)


def as_group_logic(logic: Union[Logic, GroupLogic]) -> GroupLogic:
    """``logic`` itself if it declares its kind, else the general :class:`GroupLogic` of it."""
    return logic if isinstance(logic, GroupLogic) else GroupLogic(logic)


# Keys arranged by self have the single value ``()``.
def count_logic(key: Any, vals: Group) -> Group:
    """``[(count, 1)]``: the count of a record arranged by self."""
    return [(vals[0][1], 1)]


def sum_logic(key: Any, vals: Group) -> Group:
    """``[(total, 1)]``: the sum of ``value * count``."""
    total = 0
    for v, c in vals:
        total += v * c
    return [(total, 1)]


def _distinct_group(key: Any, vals: Group) -> Group:
    """``[((), 1)]`` when a record arranged by self has a positive count."""
    return [((), 1)] if vals[0][1] > 0 else []


def _positive(key: Any, count: int) -> int:
    return 1 if count > 0 else 0


distinct_logic = GroupLogic(_distinct_group, threshold=_positive, distinct=True)
"""``[((), 1)]`` when a record arranged by self has a positive count."""


def threshold_logic(f: Callable[[Any, int], int]) -> GroupLogic:
    """The logic giving a record arranged by self the count ``f(record, count)``."""

    def logic(key: Any, vals: Group) -> Group:
        c = f(key, vals[0][1])
        return [((), c)] if c else []

    return GroupLogic(logic, threshold=f)
