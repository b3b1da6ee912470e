"""Ends the local Ray a driver started when that driver ends, however it ends (Linux).

Ray starts a local cluster's daemons (``gcs_server``, ``raylet``, the monitor, the log monitor,
the dashboard head) as children of the driver with ``PR_SET_PDEATHSIG``, so they die with the
driver; but the raylet's own children - ``ray::DashboardAgent``, ``ray::RuntimeEnvAgent``,
worker processes - rename themselves (their command line no longer names the session) and, once
the raylet is gone, are orphans that outlived a ``SIGKILL``-ed driver by more than a minute.

:mod:`timelypy.workers.launch.ray_actors` starts this file as a script (``python -I <this file>
DRIVER_PID SESSION_DIR``, standard library only, in a session of its own so a terminal's Ctrl-C
does not reach it) right after it started a local Ray. The watchdog

* remembers, once a second, the driver's children whose command line names ``SESSION_DIR`` (the
  daemons of *that* Ray, never another one) and all their descendants, by pid and start time;
* on ``stop`` on its stdin (a clean :func:`~timelypy.workers.launch.ray_actors.shutdown`), on end of
  file (the driver's process is gone: the kernel closed the pipe) or when its parent is no longer
  the driver, signals every remembered process that still runs - ``SIGTERM``, then ``SIGKILL``
  after :data:`GRACE` seconds - and exits. A process is signalled only if its pid *and* start
  time match what was remembered, so a reused pid is never hit.

Only Linux has the ``/proc`` this reads and the death signal it completes; elsewhere the
caller does not start it.
"""

from __future__ import annotations

import logging
import os
import select
import signal
import sys
import time
from typing import Dict, Iterable, List, Optional, Set, Tuple

log = logging.getLogger("timelypy.workers.launch.ray_watchdog")

__all__ = ["GRACE", "SCAN_INTERVAL", "main", "session_processes", "stop_processes"]

GRACE = 1.0
"""Seconds between ``SIGTERM`` and ``SIGKILL`` for the processes left when the driver ends."""

SCAN_INTERVAL = 1.0
"""Seconds between two looks at the process table while the driver lives."""

_POLL = 0.2

Proc = Tuple[int, int]  # (pid, start time in clock ticks since boot)


def _stat(pid: int) -> Optional[Tuple[int, int]]:
    """``(ppid, start time)`` of ``pid`` from ``/proc/PID/stat``; None if it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read()
    except OSError:
        return None
    # The command name (field 2) may hold spaces and parentheses: split after its last ')'.
    fields = data[data.rfind(b")") + 2 :].split()
    try:
        return int(fields[1]), int(fields[19])
    except (IndexError, ValueError):
        return None


def _cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def _table() -> Dict[int, Tuple[int, int]]:
    """Every live process: ``{pid: (ppid, start time)}``."""
    out = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            st = _stat(int(name))
            if st is not None:
                out[int(name)] = st
    return out


def session_processes(driver: int, session_dir: str) -> Set[Proc]:
    """The processes of the Ray ``driver`` started in ``session_dir``, as ``(pid, start time)``.

    The roots are the driver's children whose command line names ``session_dir`` (Ray's daemons
    carry it in their flags); then every descendant of a root (agents, workers), whatever it is
    called. The driver and the calling process are never included.
    """
    table = _table()
    children: Dict[int, List[int]] = {}
    for pid, (ppid, _) in table.items():
        children.setdefault(ppid, []).append(pid)
    stack = [pid for pid in children.get(driver, ()) if session_dir in _cmdline(pid)]
    found: Set[Proc] = set()
    while stack:
        pid = stack.pop()
        if pid in (driver, os.getpid()) or pid not in table:
            continue
        if (pid, table[pid][1]) in found:
            continue
        found.add((pid, table[pid][1]))
        stack.extend(children.get(pid, ()))
    return found


def _alive(procs: Iterable[Proc]) -> List[Proc]:
    alive = []
    for pid, start in procs:
        st = _stat(pid)
        if st is not None and st[1] == start and not _zombie(pid):
            alive.append((pid, start))
    return alive


def _zombie(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read()
    except OSError:
        return True
    return data[data.rfind(b")") + 2 :][:1] in (b"Z", b"X")


def stop_processes(procs: Iterable[Proc], grace: float = GRACE) -> List[int]:
    """``SIGTERM`` the live ones of ``procs``, ``SIGKILL`` those still alive after ``grace``
    seconds; wait (at most ``grace`` more) until they are gone. Returns the pids signalled."""
    left = _alive(procs)
    signalled = [pid for pid, _ in left]
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, grace)):
        for pid, _ in left:
            try:
                os.kill(pid, sig)
            except OSError:
                pass
        deadline = time.monotonic() + wait
        while left and time.monotonic() < deadline:
            time.sleep(0.05)
            left = _alive(left)
        if not left:
            break
    return signalled


def _driver_gone(driver: int) -> bool:
    return os.getppid() != driver


class _Terminated(Exception):
    pass


def _terminated(signum: int, frame: object) -> None:
    raise _Terminated()


def main(argv: List[str]) -> int:
    """``DRIVER_PID SESSION_DIR``: watch until the driver stops or ends, then clean up."""
    driver, session_dir = int(argv[0]), argv[1]
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, _terminated)  # terminated: clean up first, then exit
    known: Set[Proc] = set()
    reason = "driver gone"
    try:
        reason = _watch(driver, session_dir, known)
    except _Terminated:
        reason = "SIGTERM"
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    known |= session_processes(driver, session_dir)
    signalled = stop_processes(known)
    if signalled:
        log.warning(
            "timelypy ray watchdog (%s): stopped %d process(es) of %s: %s",
            reason,
            len(signalled),
            session_dir,
            sorted(signalled),
        )
    return 0


def _watch(driver: int, session_dir: str, known: Set[Proc]) -> str:
    """Keep ``known`` up to date until the driver says stop or ends; return which."""
    next_scan = 0.0
    while True:
        now = time.monotonic()
        if now >= next_scan:
            current = set(_alive(known)) | session_processes(driver, session_dir)
            known.clear()
            known.update(current)
            next_scan = now + SCAN_INTERVAL
        if _driver_gone(driver):
            return "driver gone"
        ready, _, _ = select.select([sys.stdin], [], [], _POLL)
        if ready:
            line = sys.stdin.readline()
            if line.strip() == "stop":
                return "stop"
            if not line:  # end of file: the driver's end of the pipe is closed
                return "driver gone"


if __name__ == "__main__":
    # run as a script: its one report goes to the stderr it shares with the driver
    logging.basicConfig(stream=sys.stderr, format="%(message)s")
    sys.exit(main(sys.argv[1:]))
