"""Capabilities: the right to send at a time on one output, tracked by the progress layer.

Python has no destructors to rely on: :meth:`Capability.drop` is explicit and idempotent.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator, List, Optional

from ..errors import TimeOrderError
from ..progress.change_batch import ChangeBatch

if TYPE_CHECKING:
    from .operator import OperatorCore

__all__ = ["Capability", "InputCapability", "CapabilitySet"]


class Capability:
    """Permission to send data at ``time`` (or later) on one output of one operator.

    Creating or cloning a capability records ``+1`` at its time, dropping it ``-1``.
    ``output`` is the output port index; ``valid`` turns False once dropped.

    Example: in an operator's logic, ``with output.session(cap) as session: session.give(x)``
    sends at ``cap.time``; ``cap.downgrade(t + 1)`` moves on.
    """

    __slots__ = ("time", "_internal", "_le", "output", "_operator", "valid")

    def __init__(
        self,
        time: Any,
        internal: ChangeBatch,
        le: Callable[[Any, Any], bool],
        output: int = 0,
        operator: str = "",
        record: bool = True,
    ) -> None:
        self.time = time
        self._internal = internal
        self._le = le
        self.output = output
        self._operator = operator
        self.valid = True
        if record:
            internal.update(time, 1)

    def _check(self, t: Any, what: str) -> None:
        if not self.valid:
            raise TimeOrderError(
                f"operator {self._operator!r}: {what} of a dropped capability (time {self.time!r})"
            )
        if not self._le(self.time, t):
            raise TimeOrderError(
                f"operator {self._operator!r}: cannot {what} capability at {self.time!r} to "
                f"{t!r}: the new time must be at or after the held one"
            )

    def delayed(self, t: Any) -> "Capability":
        """A new capability at ``t >= self.time`` on the same output; TimeOrderError if
        ``t`` is not at or after it or this one was dropped.

        Example: ``later = cap.delayed(cap.time + 1)``."""
        self._check(t, "delay")
        return Capability(t, self._internal, self._le, self.output, self._operator)

    def downgrade(self, t: Any) -> None:
        """Move this capability forward to ``t >= self.time`` (atomically: +1@t, -1@old).

        Example: ``cap.downgrade(5)``: nothing more at times before 5."""
        self._check(t, "downgrade")
        if t != self.time:
            self._internal.update(t, 1)
            self._internal.update(self.time, -1)
            self.time = t

    def drop(self) -> None:
        """Release the capability. Idempotent.

        Example: ``cap.drop()``: the output can complete."""
        if self.valid:
            self.valid = False
            self._internal.update(self.time, -1)

    def __repr__(self) -> str:
        state = "" if self.valid else ", dropped"
        return f"Capability({self.time!r}{state})"


class InputCapability:
    """The time of a received message, usable to send at that time during this activation or
    to :meth:`retain` a real capability.

    Example: ``for cap, data in input: ...``; ``cap.retain()`` keeps the message's time."""

    __slots__ = ("time", "_op")

    def __init__(self, time: Any, op: "OperatorCore") -> None:
        self.time = time
        self._op = op

    def retain(self, output: int = 0) -> Capability:
        """A capability at this message's time for ``output``.

        Example: ``notificator.notify_at(cap.retain())``."""
        op = self._op
        return Capability(self.time, op.shared.internals[output], op.order.le, output, op.name)

    def delayed(self, t: Any, output: int = 0) -> Capability:
        """A capability at ``t >= self.time`` for ``output``.

        Example: ``cap.delayed(cap.time + 1)`` to send one time later."""
        op = self._op
        if not op.order.le(self.time, t):
            raise TimeOrderError(
                f"operator {op.name!r}: cannot delay message time {self.time!r} to {t!r}"
            )
        return Capability(t, op.shared.internals[output], op.order.le, output, op.name)

    def __repr__(self) -> str:
        return f"InputCapability({self.time!r})"


class CapabilitySet:
    """An antichain of capabilities: send at any time at or after one of them.

    Example: ``caps = tp.CapabilitySet(scope.order.le)``; ``caps.insert(cap.retain())``; later
    ``caps.downgrade(frontier)``."""

    __slots__ = ("caps", "_le")

    def __init__(self, le: Callable[[Any, Any], bool], caps: Iterable[Capability] = ()) -> None:
        self._le = le
        self.caps: List[Capability] = []
        for c in caps:
            self.insert(c)

    def insert(self, cap: Capability) -> None:
        """Take ownership of ``cap``, keeping an antichain: drop ``cap`` if a held capability is
        at or before it, else drop the held ones at or after it. O(len).

        Example: ``caps.insert(cap.retain())``."""
        le = self._le
        for c in self.caps:
            if le(c.time, cap.time):
                cap.drop()
                return
        keep = []
        for c in self.caps:
            if le(cap.time, c.time):
                c.drop()
            else:
                keep.append(c)
        keep.append(cap)
        self.caps = keep

    def retain(self, time: Any, internal: ChangeBatch, output: int = 0, operator: str = "") -> None:
        """Hold a capability at ``time`` (the time of a message just consumed, which justifies
        it) unless one at or before ``time`` is already held. O(len).

        Example: operators built with ``scope.operator`` call ``caps.retain(time, internal)`` for a
        message just consumed."""
        if self.find(time) is None:
            self.insert(Capability(time, internal, self._le, output, operator))

    def find(self, t: Any) -> Optional[Capability]:
        """A held capability at or before ``t``, or None. O(len).

        Example: ``caps.find(t)`` to send at ``t``, or ``None``."""
        le = self._le
        for c in self.caps:
            if le(c.time, t):
                return c
        return None

    def delayed(self, t: Any) -> Capability:
        """A new capability at ``t`` derived from a held one at or before ``t``; TimeOrderError
        if none is held. O(len).

        Example: ``caps.delayed(5)``."""
        c = self.find(t)
        if c is None:
            raise TimeOrderError(f"no held capability at or before {t!r} (held: {self.times()})")
        return c.delayed(t)

    def downgrade(self, frontier: Iterable[Any]) -> None:
        """Hold exactly one capability per element of ``frontier`` (each derived from a held one).

        Example: ``caps.downgrade(input.frontier)`` keeps only what pending work needs."""
        new: List[Capability] = []
        for t in frontier:
            new.append(self.delayed(t))
        for c in self.caps:
            c.drop()
        self.caps = new

    def times(self) -> List[Any]:
        """The times of the held capabilities, sorted.

        Example: ``[2, 5]``."""
        return sorted(c.time for c in self.caps)

    def drop_all(self) -> None:
        """Drop every held capability and empty the set.

        Example: ``caps.drop_all()`` once the input is done."""
        for c in self.caps:
            c.drop()
        self.caps = []

    def __bool__(self) -> bool:
        return bool(self.caps)

    def __len__(self) -> int:
        return len(self.caps)

    def __iter__(self) -> Iterator[Capability]:
        return iter(self.caps)
