"""A spine's lifecycle: one state, and the transitions between states that are legal.

::

    LIVE ──retire, readers left──> RETIRED ──last reader closes──> DROPPED
      │ └──retire, no reader─────────────────────────────────────> DROPPED
      └──last reader of a private spine closes──> ABANDONED ──drop_abandoned or retire──>
                                                                   ABANDONED_DROPPED

``LIVE``: written by its dataflow, merged and compacted. ``RETIRED``: its dataflow completed;
the batches stay for the readers (exported or imported handles) left. ``ABANDONED``: a
private spine (an operator's own arrangement) whose last reader closed while its dataflow
runs: nothing reads it again, so it is no longer maintained nor extended (new batches are only
numbered and sent on). ``DROPPED`` and ``ABANDONED_DROPPED``: the batches are gone (the second
after being abandoned). Every other move raises.
"""

from __future__ import annotations

import enum
from typing import Dict, FrozenSet, Tuple

__all__ = ["MAINTAINED", "SpineState", "TRANSITIONS", "check_transition"]


class SpineState(enum.Enum):
    """Where a spine is in its life (see the module's diagram)."""

    LIVE = "live"
    RETIRED = "retired"
    ABANDONED = "abandoned"
    DROPPED = "dropped"
    ABANDONED_DROPPED = "abandoned, dropped"

    @property
    def abandoned(self) -> bool:
        """Let go while its dataflow ran (then or since, its batches dropped)."""
        return self is SpineState.ABANDONED or self is SpineState.ABANDONED_DROPPED

    @property
    def dropped(self) -> bool:
        """The batches are gone."""
        return self is SpineState.DROPPED or self is SpineState.ABANDONED_DROPPED


MAINTAINED: Tuple[SpineState, ...] = (SpineState.LIVE, SpineState.RETIRED)
"""The states in which new batches are stored, merged and compacted (``state in MAINTAINED``:
identity tests, as cheap as a test can be on the spine's per-batch path)."""

TRANSITIONS: Dict[SpineState, FrozenSet[SpineState]] = {
    SpineState.LIVE: frozenset({SpineState.RETIRED, SpineState.ABANDONED, SpineState.DROPPED}),
    SpineState.RETIRED: frozenset({SpineState.DROPPED}),
    SpineState.ABANDONED: frozenset({SpineState.ABANDONED_DROPPED}),
    SpineState.DROPPED: frozenset(),
    SpineState.ABANDONED_DROPPED: frozenset(),
}
"""The legal moves from each state."""


def check_transition(name: str, current: SpineState, new: SpineState) -> SpineState:
    """``new`` if the move from ``current`` is legal, else an error naming the trace."""
    if new not in TRANSITIONS[current]:
        raise RuntimeError(
            f"trace {name!r}: illegal lifecycle move {current.value!r} -> {new.value!r}"
        )
    return new
