"""Time in dataflows: windows over event time, event-time sources and processing-time clocks.

Everything here is built from ordinary collections and the linear time operators
(:meth:`~timelypy.Collection.temporal_filter`, :meth:`~timelypy.Collection.freeze_at`): a
windowed result is an exact collection keyed by ``(window, key)`` that appears once the
window's end has passed, changes with late data within the allowed lateness, and then stays
while the state behind it compacts away. See ``docs/time.md``.
"""

from __future__ import annotations

from .clock import ProcessingTimeClock
from .event_time import EventTimeInput

__all__: list = ["EventTimeInput", "ProcessingTimeClock"]
