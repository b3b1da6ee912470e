"""The operator interface seen by a scope, in the style of timely dataflow's ``Operate`` trait.

An operator presents itself to its scope through two calls:

* ``get_internal_summary()`` -> (``summary[input][output]``: antichains of path summaries,
  ``initial[output]``: ChangeBatch of initial capabilities);
* ``schedule()``: run; returns True while the operator has work that does not show up in its
  capabilities.

Timely's other two, pushing input-frontier changes to the operator and pulling its consumed,
capability and produced counts, are not calls here: both sides share a :class:`SharedProgress`
whose buffers the scope writes (``frontiers``) and reads in place (``consumeds``,
``internals``, ``produceds``), nested scopes included, which saves a call per child and step.
"""

from __future__ import annotations

from typing import Any, List, Tuple

from .change_batch import ChangeBatch
from .frontier import MutableAntichain

__all__ = ["SharedProgress", "Operate"]


class SharedProgress:
    """Buffers shared by a scope and one child operator.

    ``frontiers[i]``: input frontier changes written by the scope, drained by the child.
    ``consumeds[i]``, ``internals[o]``, ``produceds[o]``: written by the child, drained by the
    scope.
    """

    __slots__ = ("frontiers", "consumeds", "internals", "produceds")

    def __init__(self, inputs: int, outputs: int) -> None:
        self.frontiers = [ChangeBatch() for _ in range(inputs)]
        self.consumeds = [ChangeBatch() for _ in range(inputs)]
        self.internals = [ChangeBatch() for _ in range(outputs)]
        self.produceds = [ChangeBatch() for _ in range(outputs)]

    def grow(self, inputs: int, outputs: int) -> None:
        """Add empty buffers up to ``inputs`` inputs and ``outputs`` outputs (a nested scope
        gains ports while it is being built)."""
        while len(self.frontiers) < inputs:
            self.frontiers.append(ChangeBatch())
            self.consumeds.append(ChangeBatch())
        while len(self.internals) < outputs:
            self.internals.append(ChangeBatch())
            self.produceds.append(ChangeBatch())


class Operate:
    """Base class of everything a scope schedules: operators and nested scopes.

    Subclasses set ``name``, ``inputs``, ``outputs``, override :meth:`get_internal_summary`
    and :meth:`schedule`, and write their reports into ``self.shared``.
    ``local`` is False for nested scopes, whose reports already cover every worker.
    """

    name: str = "operator"
    local: bool = True
    frontier_interest: bool = True
    """False for operators that never look at their input frontiers (map, concat, feedback):
    the tracker then does not maintain implications at their inputs (timely's
    ``FrontierInterest::Never``)."""
    adopt_frontiers: bool = False
    """True for operators whose ``input_frontiers`` (MutableAntichains) the scope may maintain
    in place as the tracker's implications; it then sets ``frontier_moved`` instead of
    writing changes into ``shared.frontiers``."""
    frontier_moved: bool = False
    wake_on_frontier: bool = True
    """False for operators whose frontier changes are consumed without running them (probes and
    captures write them straight into their handles)."""

    def __init__(self, name: str, inputs: int, outputs: int) -> None:
        self.name = name
        self.inputs = inputs
        self.outputs = outputs
        self.shared = SharedProgress(inputs, outputs)
        self.index = -1  # position in the parent scope, set when added
        self.input_frontiers: List[MutableAntichain] = []

    # -- Scope trait -----------------------------------------------------------------
    def get_internal_summary(self) -> Tuple[List[List[List[Any]]], List[ChangeBatch]]:
        """``(summary, initial)``: ``summary[i][o]`` is the antichain of path summaries from
        input ``i`` to output ``o`` (empty: not connected), ``initial[o]`` the capabilities the
        operator holds at output ``o`` at start. Called once, when the scope is built."""
        raise NotImplementedError

    def schedule(self) -> bool:
        """Run the operator once; True while it has work that its capabilities do not show."""
        raise NotImplementedError

    def waiting_messages(self) -> int:
        """How many messages wait at this operator's inputs (0 for an operator without input
        queues); read around a schedule for its :class:`~timelypy.instrument.OperatorFinished`
        event."""
        return 0

    def retire(self) -> None:
        """The dataflow completed: drop state nothing will read again (the default keeps
        everything; operators with large state override it)."""

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name!r} #{self.index}>"
