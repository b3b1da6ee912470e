"""A directory watched for new files, each loaded once as an atomic epoch (as Spark's file source).

:class:`DirectoryWatcher` polls a directory: a file is taken once it looks complete (its size
and modification time unchanged for ``settle`` seconds; a writer that renames a finished file
into place can use ``settle=0``), never if its name is hidden or temporary (``.x``, ``_x``,
``x.tmp``, ``x.part``, ``x~``), and in (modification time, name) order. The files taken are kept
in a :class:`WatchState`, a small object that can be saved and restored (``to_dict`` /
``from_dict``, ``save`` / ``load``), so that a restarted program does not take a file twice:
remember it together with the dataflow's state once checkpoints exist.

:func:`watch_directory` drives a session with it: each new file parsed and checked whole, then
inserted at one time and the input advanced (:func:`~timelypy.io.sources.load_rows`); it polls
every ``poll`` seconds until ``stop()`` says so, ``max_files`` were taken, nothing new came for
``idle`` seconds, or ``timeout`` passed: every wait is bounded.
"""

from __future__ import annotations

import json
import logging
import os
import pathlib
import time as _time
from fnmatch import fnmatch
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Optional, Tuple

from ..windows.event_time import EventTimeInput
from .event_time import event_time_feed, push_rows, with_event_time
from .formats import FileFormat, FileInputError, PathLike, format_for
from .sources import load_rows, read_rows

if TYPE_CHECKING:
    from ..workers.sessions.session import DataflowSession

__all__ = ["WatchState", "DirectoryWatcher", "watch_directory", "is_temporary", "files_in"]

log = logging.getLogger(__name__)

TEMPORARY_SUFFIXES = (".tmp", ".temp", ".part", ".partial", ".crdownload", "~", ".swp")


def is_temporary(name: str) -> bool:
    """Whether a file name looks hidden or unfinished (skipped by watchers and listings)."""
    return name.startswith((".", "_")) or name.endswith(TEMPORARY_SUFFIXES)


def files_in(directory: PathLike, pattern: str = "*") -> List[pathlib.Path]:
    """The complete-looking files of ``directory`` matching ``pattern``, by name (hidden and
    temporary names skipped, as a watcher does)."""
    return sorted(
        p for p in pathlib.Path(directory).glob(pattern) if p.is_file() and not is_temporary(p.name)
    )


class WatchState:
    """The files a watcher has taken (name -> (size, mtime_ns) when taken) and the files it
    refused (name -> the error's message), by name: one state per watched directory. Plain
    data: save it, restore it, compare it."""

    def __init__(
        self,
        taken: Optional[Dict[str, Tuple[int, int]]] = None,
        refused: Optional[Dict[str, str]] = None,
    ) -> None:
        self.taken: Dict[str, Tuple[int, int]] = dict(taken or {})
        self.refused: Dict[str, str] = dict(refused or {})

    def seen(self, name: str) -> bool:
        """Whether ``name`` was taken or refused before."""
        return name in self.taken or name in self.refused

    def to_dict(self) -> Dict[str, Any]:
        """The state as JSON-ready data."""
        return {
            "version": 1,
            "taken": {k: list(v) for k, v in self.taken.items()},
            "refused": dict(self.refused),
        }

    @classmethod
    def from_dict(cls, data: Dict[str, Any]) -> "WatchState":
        """The state :meth:`to_dict` gave."""
        if data.get("version") != 1:
            raise ValueError(f"WatchState: unknown version {data.get('version')!r}")
        return cls(
            {k: (int(v[0]), int(v[1])) for k, v in data.get("taken", {}).items()},
            data.get("refused", {}),
        )

    def save(self, path: PathLike) -> None:
        """Write the state as JSON, atomically (a temporary file renamed into place)."""
        target = pathlib.Path(path)
        scratch = target.with_name(target.name + ".tmp")
        scratch.write_text(json.dumps(self.to_dict(), sort_keys=True))
        os.replace(scratch, target)

    @classmethod
    def load(cls, path: PathLike) -> "WatchState":
        """The state saved at ``path``, or an empty one if there is no file yet."""
        target = pathlib.Path(path)
        if not target.exists():
            return cls()
        return cls.from_dict(json.loads(target.read_text()))

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, WatchState)
            and self.taken == other.taken
            and self.refused == other.refused
        )

    def __repr__(self) -> str:
        return f"WatchState({len(self.taken)} taken, {len(self.refused)} refused)"


class DirectoryWatcher:
    """New complete files of ``directory`` matching ``pattern``, each returned once by
    :meth:`poll` (see the module's notes on what counts as complete)."""

    def __init__(
        self,
        directory: PathLike,
        pattern: str = "*",
        settle: float = 0.5,
        state: Optional[WatchState] = None,
        clock: Callable[[], float] = _time.monotonic,
    ) -> None:
        self.directory = pathlib.Path(directory)
        if not self.directory.is_dir():
            raise FileNotFoundError(f"watch: {self.directory} is not a directory")
        self.pattern = pattern
        self.settle = settle
        self.state = state if state is not None else WatchState()
        self._clock = clock
        self._sightings: Dict[str, Tuple[int, int, float]] = {}

    def _candidates(self) -> List[Tuple[int, str, int]]:
        """(mtime_ns, name, size) of the files that are new and not temporary."""
        found = []
        with os.scandir(self.directory) as entries:
            for entry in entries:
                name = entry.name
                if is_temporary(name) or not fnmatch(name, self.pattern) or self.state.seen(name):
                    continue
                try:
                    if not entry.is_file():
                        continue
                    st = entry.stat()
                except FileNotFoundError:  # renamed or removed between listing and stat
                    continue
                found.append((st.st_mtime_ns, name, st.st_size))
        return found

    def poll(self) -> List[pathlib.Path]:
        """The files that became complete since the last poll, in (mtime, name) order. They
        are not yet marked taken: call :meth:`mark_taken` (or :meth:`mark_refused`) once each
        is handled, so a crash in between takes it again after a restart."""
        now = self._clock()
        ready = []
        present = set()
        for mtime, name, size in self._candidates():
            present.add(name)
            first = self._sightings.get(name)
            if first is None or first[:2] != (size, mtime):
                self._sightings[name] = (size, mtime, now)
                if self.settle > 0:
                    continue
                first = self._sightings[name]
            if now - first[2] >= self.settle:
                ready.append((mtime, name))
        for name in list(self._sightings):
            if name not in present:
                del self._sightings[name]
        return [self.directory / name for _, name in sorted(ready)]

    def mark_taken(self, path: PathLike) -> None:
        """Remember ``path`` as taken (with its size and mtime as the poll saw them)."""
        name = pathlib.Path(path).name
        seen = self._sightings.pop(name, None)
        if seen is None:
            st = pathlib.Path(path).stat()
            seen = (st.st_size, st.st_mtime_ns, 0.0)
        self.state.taken[name] = (seen[0], seen[1])

    def mark_refused(self, path: PathLike, reason: str) -> None:
        """Remember ``path`` as refused (it is not offered again)."""
        name = pathlib.Path(path).name
        self.state.refused[name] = reason
        self._sightings.pop(name, None)


def watch_directory(
    session: DataflowSession,
    input: str,
    directory: PathLike,
    fmt: Optional[FileFormat] = None,
    *,
    pattern: str = "*",
    state: Optional[WatchState] = None,
    settle: float = 0.5,
    poll: float = 0.2,
    timeout: float = 60.0,
    idle: Optional[float] = None,
    max_files: Optional[int] = None,
    stop: Optional[Callable[[], bool]] = None,
    on_error: str = "raise",
    on_file: Optional[Callable[[pathlib.Path, Any], None]] = None,
    event_time: Optional[str] = None,
    max_out_of_orderness: int = 0,
    feed: Optional[EventTimeInput] = None,
) -> WatchState:
    """Load every new complete file of ``directory`` into ``input``, one epoch each, until
    ``stop()`` is true, ``max_files`` files were taken, no file came for ``idle`` seconds, or
    ``timeout`` seconds passed (whichever first; at least one of them ends the loop, the
    timeout always). Returns the state (the one given, updated). ``on_file(path, time)`` is
    called after each file is loaded. A bad file raises
    :class:`~timelypy.io.formats.FileInputError` (nothing of it applied, not marked taken) or,
    with ``on_error="skip"``, is logged and remembered as refused.

    With ``event_time`` (a column name), each row goes in at its event time through an
    :class:`~timelypy.windows.EventTimeInput` (``max_out_of_orderness``, or the ``feed``
    given) and the input advances to the watermark after each file, as
    :func:`~timelypy.io.sources.load_files` does; ``on_file`` then gets the watermark."""
    if on_error not in ("raise", "skip"):
        raise ValueError(f"watch: on_error must be 'raise' or 'skip', not {on_error!r}")
    watcher = DirectoryWatcher(directory, pattern, settle, state)
    timed = None
    if event_time is not None:
        timed = event_time_feed(session, input, feed, max_out_of_orderness)
    start = last = _time.monotonic()
    taken = 0
    while True:
        for path in watcher.poll():
            try:
                if timed is None or event_time is None:
                    at = load_rows(session, input, read_rows(path, fmt))
                else:
                    shaped = with_event_time(fmt or format_for(path), event_time)
                    at = push_rows(timed, read_rows(path, shaped))
            except FileNotFoundError:  # removed or renamed since the poll: not taken
                log.info("watch: %s went away before it was read", path)
                continue
            except FileInputError as exc:
                if on_error == "raise":
                    raise
                log.warning("watch: %s refused: %s", path, exc)
                watcher.mark_refused(path, str(exc))
                continue
            watcher.mark_taken(path)
            taken += 1
            last = _time.monotonic()
            if on_file is not None:
                on_file(path, at)
            if max_files is not None and taken >= max_files:
                return watcher.state
        now = _time.monotonic()
        if (
            (stop is not None and stop())
            or now - start >= timeout
            or (idle is not None and now - last >= idle)
        ):
            return watcher.state
        _time.sleep(poll)
