"""Time in dataflows: windows over event time, event-time sources and processing-time clocks.

Everything here is built from ordinary collections and the linear time operators
(:meth:`~timelypy.Collection.temporal_filter`, :meth:`~timelypy.Collection.freeze_at`): a
windowed result is an exact collection keyed by ``(window, key)`` that appears once the
window's end has passed, changes with late data within the allowed lateness, and then stays
while the state behind it compacts away. See ``docs/time.md``.

Example: ``windowed(clicks, Tumbling(300), lambda c: c.time).count()`` holds
``((Window(0, 300), page), n)`` from logical time 300 on.
"""

from __future__ import annotations

from .aggregate import Windowed, windowed
from .clock import ProcessingTimeClock
from .event_time import EventTimeInput
from .spec import Session, Sliding, Spec, Tumbling, Window

__all__ = [
    "Window",
    "Tumbling",
    "Sliding",
    "Session",
    "Spec",
    "windowed",
    "Windowed",
    "EventTimeInput",
    "ProcessingTimeClock",
]
