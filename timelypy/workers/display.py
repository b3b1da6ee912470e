"""The progress display: one line on stderr while a long load or wait runs.

A wait that lasts more than :data:`DELAY` seconds (``worker.step_until``, a session's ``wait``
and ``flush``) shows one line - what it waits for, the input and output frontiers, records and
records per second, elapsed time - refreshed at most every :data:`INTERVAL` seconds by one
daemon thread of this process, never by the waiting loop itself. On a terminal the line is a
transient ``rich`` live line; forced on elsewhere, it is written as plain lines (at most one a
second).

When it shows (:func:`progress_enabled`): the ``progress`` argument when given (True / False);
else the environment variable ``TIMELYPY_PROGRESS`` (``1`` on, ``0`` off; read at most once a
second); else only when stderr is a terminal and this process is not a Ray worker or job.

>>> from timelypy.workers.display import progress_enabled
>>> progress_enabled(False)
False

The lines also go to the ``timelypy.workers.display`` logger at DEBUG (once a second).
"""

from __future__ import annotations

import logging
import os
import sys
import threading
import time as _time
from typing import Any, Callable, List, Mapping, Optional, TextIO

from ..stats import in_ray_actor

__all__ = [
    "ENV",
    "DELAY",
    "INTERVAL",
    "progress_enabled",
    "ProgressDisplay",
    "Watch",
    "begin_wait",
    "end_wait",
    "display",
]

ENV = "TIMELYPY_PROGRESS"
"""The environment variable that forces the display on (``1``) or off (``0``)."""
DELAY = 0.5
"""Seconds a wait lasts before its line shows."""
INTERVAL = 0.1
"""Seconds between refreshes of the line (10 a second at most)."""

log = logging.getLogger(__name__)

Status = Callable[[], Mapping[str, Any]]
"""Returns ``{"input": text, "output": text, "records": int or None}`` (any may be missing)."""


def progress_enabled(progress: Optional[bool] = None, stream: Optional[TextIO] = None) -> bool:
    """Whether a wait shows the display (see the module docstring for the rules). Without
    ``progress``, the decision is remembered for a second per stream: a wait pays no system
    call and no environment lookup for it."""
    if progress is not None:
        return bool(progress)
    stream = stream if stream is not None else sys.stderr
    now = _time.monotonic()
    last = _LAST_DECISION
    if last and last[0] is stream and now < last[2]:
        return last[1]
    env = os.environ.get(ENV, "").strip().lower()
    decision = env not in ("0", "false", "no", "off") if env else _decide(stream)
    _LAST_DECISION[:] = [stream, decision, now + 1.0]
    return decision


_LAST_DECISION: List[Any] = []
"""``[stream, decision, valid until]`` of the last default decision."""


def _decide(stream: Any) -> bool:
    if os.environ.get("RAY_JOB_SUBMISSION_ID") or in_ray_actor():
        return False
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError, OSError):
        return False


class Watch:
    """One wait being shown: its label, its status function and when it started."""

    __slots__ = ("label", "status", "started", "shown", "last_plain", "last_log")

    def __init__(self, label: str, status: Status) -> None:
        self.label = label
        self.status = status
        self.started = _time.monotonic()
        self.shown = False
        self.last_plain = 0.0
        self.last_log = 0.0

    def line(self, now: float) -> str:
        """The display line now."""
        elapsed = now - self.started
        try:
            status = self.status()
        except Exception:  # noqa: BLE001 - read while the waiter mutates: try next time
            status = {}
        parts = [self.label]
        if status.get("input") is not None:
            parts.append(f"input {status['input']}")
        if status.get("output") is not None:
            parts.append(f"output {status['output']}")
        records = status.get("records")
        if records is not None:
            parts.append(f"{records:,} records, {records / max(elapsed, 1e-9):,.0f} rec/s")
        parts.append(f"{elapsed:.1f} s")
        return " | ".join(parts)


class ProgressDisplay:
    """Shows the oldest running :class:`Watch` on ``stream`` (default: stderr) from a daemon
    thread, once it has run ``delay`` seconds, refreshing every ``interval`` seconds."""

    def __init__(
        self, stream: Optional[TextIO] = None, delay: float = DELAY, interval: float = INTERVAL
    ) -> None:
        self.stream = stream
        self.delay = delay
        self.interval = interval
        self._watches: List[Watch] = []
        self._lock = threading.Condition()
        self._thread: Optional[threading.Thread] = None
        self._live: Any = None

    def begin(self, label: str, status: Status) -> Watch:
        """Start showing a wait (after ``delay``); cheap: no thread starts per wait."""
        watch = Watch(label, status)
        with self._lock:
            self._watches.append(watch)
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="timelypy-progress", daemon=True
                )
                self._thread.start()
            self._lock.notify()
        return watch

    def end(self, watch: Watch) -> None:
        """Stop showing ``watch`` (its line disappears from a terminal)."""
        with self._lock:
            if watch in self._watches:
                self._watches.remove(watch)
            if watch.shown:
                self._clear()

    def _run(self) -> None:
        while True:
            with self._lock:
                while not self._watches:
                    self._lock.wait()
                watch = self._watches[0]
                now = _time.monotonic()
                if now - watch.started >= self.delay:
                    self._show(watch, now)
                self._lock.wait(self.interval)

    def _stream(self) -> TextIO:
        return self.stream if self.stream is not None else sys.stderr

    def _show(self, watch: Watch, now: float) -> None:
        line = watch.line(now)
        watch.shown = True
        if now - watch.last_log >= 1.0:
            watch.last_log = now
            log.debug("%s", line)
        stream = self._stream()
        try:
            terminal = stream.isatty()
        except (AttributeError, ValueError, OSError):
            terminal = False
        try:
            if terminal:
                self._show_live(stream, line)
            elif now - watch.last_plain >= 1.0:
                watch.last_plain = now
                stream.write(line + "\n")
                stream.flush()
        except (OSError, ValueError):  # a closed stream: nothing to show on
            pass

    def _show_live(self, stream: TextIO, line: str) -> None:
        from rich.console import Console
        from rich.live import Live
        from rich.text import Text

        if self._live is None:
            self._live = Live(
                Text(line), console=Console(file=stream), transient=True, auto_refresh=False
            )
            self._live.start()
        self._live.update(Text(line, overflow="ellipsis", no_wrap=True), refresh=True)

    def _clear(self) -> None:
        if self._live is not None:
            try:
                self._live.stop()
            except (OSError, ValueError):
                pass
            self._live = None


_DISPLAY: Optional[ProgressDisplay] = None
_DISPLAY_LOCK = threading.Lock()


def display() -> ProgressDisplay:
    """This process's display (created on first use)."""
    global _DISPLAY
    with _DISPLAY_LOCK:
        if _DISPLAY is None:
            _DISPLAY = ProgressDisplay()
        return _DISPLAY


def begin_wait(label: str, status: Status, progress: Optional[bool] = None) -> Optional[Watch]:
    """Start showing a wait if the display is on (:func:`progress_enabled`); returns the watch
    to pass to :func:`end_wait`, or None (then nothing was started)."""
    if not progress_enabled(progress):
        return None
    return display().begin(label, status)


def end_wait(watch: Optional[Watch]) -> None:
    """Stop showing a wait started by :func:`begin_wait` (None: a no-op)."""
    if watch is not None:
        display().end(watch)
