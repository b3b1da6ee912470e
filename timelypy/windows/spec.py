"""Window specifications: which windows an event time belongs to.

A :class:`Window` is a half-open interval ``[start, end)`` of event time. :class:`Tumbling`
and :class:`Sliding` assign every event time to a fixed set of windows
(:meth:`Tumbling.windows_of`); :class:`Session` windows are data-driven (per key, events
closer than ``gap`` merge) and are computed by :mod:`timelypy.windows.session`.

Event times are ints in the user's unit (seconds, milliseconds ...): the same unit as the
logical time of the dataflow that runs the windows (the input is stamped with event times and
advanced to the low watermark, the Differential Dataflow book's "real-time streaming input").
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, List, NamedTuple, Union

__all__ = ["Window", "Tumbling", "Sliding", "Session", "Spec", "check_lateness"]


class Window(NamedTuple):
    """A half-open interval ``[start, end)`` of event time; hashable and sortable.

    A window *closes* at logical time ``end``: its result appears then.

    Example: ``Window(0, 300)`` holds the event times ``0 .. 299``;
    ``Window(0, 300).end`` is ``300``.
    """

    start: int
    end: int


def _positive(spec: str, field: str, value: Any) -> None:
    if type(value) is not int or value <= 0:
        raise ValueError(f"{spec}: {field} must be a positive int, got {value!r}")


def _integer(spec: str, field: str, value: Any) -> None:
    if type(value) is not int:
        raise ValueError(f"{spec}: {field} must be an int, got {value!r}")


@dataclass(frozen=True)
class Tumbling:
    """Windows ``[offset + k*size, offset + (k+1)*size)`` for every integer ``k``: each event
    time is in exactly one.

    Example: ``Tumbling(300).windows_of(299)`` is ``[Window(0, 300)]``;
    ``Tumbling(300, offset=60).windows_of(0)`` is ``[Window(-240, 60)]``.
    """

    size: int
    offset: int = 0

    def __post_init__(self) -> None:
        _positive("Tumbling", "size", self.size)
        _integer("Tumbling", "offset", self.offset)

    def windows_of(self, event_time: int) -> List[Window]:
        """The one window holding ``event_time``."""
        start = self.offset + (event_time - self.offset) // self.size * self.size
        return [Window(start, start + self.size)]


@dataclass(frozen=True)
class Sliding:
    """Windows of length ``size`` starting every ``hop`` (at ``offset + k*hop``): each event
    time is in ``size // hop`` or ``size // hop + 1`` of them (``size % hop`` need not be 0;
    ``hop > size`` leaves gaps that hold no window).

    Example: ``Sliding(10, 5).windows_of(7)`` is ``[Window(0, 10), Window(5, 15)]``.
    """

    size: int
    hop: int
    offset: int = 0

    def __post_init__(self) -> None:
        _positive("Sliding", "size", self.size)
        _positive("Sliding", "hop", self.hop)
        _integer("Sliding", "offset", self.offset)

    def windows_of(self, event_time: int) -> List[Window]:
        """The windows holding ``event_time``, by start."""
        first = (event_time - self.offset - self.size) // self.hop + 1
        last = (event_time - self.offset) // self.hop
        return [
            Window(self.offset + j * self.hop, self.offset + j * self.hop + self.size)
            for j in range(first, last + 1)
        ]


@dataclass(frozen=True)
class Session:
    """Per key, events whose event times are less than ``gap`` apart merge into one session;
    a session's window is ``[first, last + gap)``. Data-driven: there is no ``windows_of``
    (an event may join, split or merge sessions as others arrive or are removed).

    Example: with ``Session(5)``, events at 0, 3 and 12 of one key make the windows
    ``Window(0, 8)`` (0 and 3) and ``Window(12, 17)``.
    """

    gap: int

    def __post_init__(self) -> None:
        _positive("Session", "gap", self.gap)

    def windows_of(self, event_time: int) -> List[Window]:
        """Always TypeError: session windows depend on the other events of the key (see
        :mod:`timelypy.windows.session`); ``[event_time, event_time + gap)`` is only the
        session of an event alone."""
        raise TypeError(
            f"{self}: session windows are data-driven (events less than {self.gap} apart "
            f"merge), so an event time alone does not give its window"
        )


Spec = Union[Tumbling, Sliding, Session]
"""A window specification."""


def check_lateness(spec: Spec, lateness: Any, retain: Any) -> None:
    """ValueError unless ``lateness`` is an int ``>= 0`` and ``retain`` None or an int
    ``>= 0`` (naming ``spec`` and the value)."""
    if type(lateness) is not int or lateness < 0:
        raise ValueError(f"windowed {spec}: lateness must be an int >= 0, got {lateness!r}")
    if retain is not None and (type(retain) is not int or retain < 0):
        raise ValueError(f"windowed {spec}: retain must be None or an int >= 0, got {retain!r}")
