"""The worker as the dataflow layer sees it: a typed interface, as timely's ``AsWorker`` trait.

Scopes, channels and inputs talk to their worker only through :class:`AsWorker`; the launch
layer's :class:`~timelypy.workers.worker.Worker` implements it. The dataflow layer therefore
never depends on a backend: a test can build dataflows on any object with these members.
"""

from __future__ import annotations

from typing import Any, Callable, Optional, Protocol, runtime_checkable

from ..communication.fabric import Fabric
from ..instrument import Instruments
from ..progress.broadcast import Progcaster
from ..progress.subgraph import Subgraph

__all__ = ["AsWorker", "InputSource", "ChannelTarget"]


@runtime_checkable
class ChannelTarget(Protocol):
    """Where records arriving on an exchange channel from another worker are pushed."""

    def push(self, time: Any, data: list) -> None:
        """Take one message of ``data`` records at ``time``."""


@runtime_checkable
class InputSource(Protocol):
    """An input the worker flushes at every step and closes when its ``build`` returns."""

    @property
    def closed(self) -> bool:
        """The input was closed."""

    def flush(self) -> None:
        """Push what was sent so far into the dataflow."""

    def close(self) -> None:
        """Flush and release the input's capability (idempotent)."""

    def has_pending(self) -> bool:
        """Records are buffered or held back (a step would push them)."""

    def describe(self) -> str:
        """The input's name and time, for stall diagnostics."""


@runtime_checkable
class AsWorker(Protocol):
    """What the dataflow layer needs from a worker."""

    index: int
    """This worker's number, ``0 <= index < peers``."""
    peers: int
    """The number of workers running the same dataflows."""
    fabric: Optional[Fabric]
    """The transport to the other workers (None on a worker without peers)."""
    instruments: Instruments
    """The worker's instrument hub: hooks emit events to its sinks when it is enabled."""
    steps: int
    """How many steps the worker has made (an input tells from it whether what it sent was
    taken in since)."""

    def new_identifier(self) -> int:
        """A worker-wide counter, identical on every worker when construction is identical."""

    def register_channel(self, channel: int, target: ChannelTarget) -> None:
        """Deliver data messages arriving for ``channel`` to ``target``."""

    def new_progcaster(self, subgraph: Subgraph) -> Optional[Progcaster]:
        """The progress broadcaster of ``subgraph`` (None when the worker has no peers)."""

    def register_input(self, source: InputSource) -> None:
        """Flush ``source`` at every step and close it when the worker's ``build`` returns."""

    def pace_input(self, source: InputSource) -> bool:
        """Input pacing, the worker's policy: ``source`` sent many updates into the dataflow
        since the worker last stepped and moves to a later time. The worker may take them in
        now (flush ``source`` and step until quiet) so that a producer cannot run arbitrarily
        far ahead of the dataflow; returns whether it did. A worker that declines (inside a
        step, while building, with peers, or as a driver session's worker) returns False."""

    def defer_until_quiet(self, callback: Callable[[], None]) -> None:
        """Call ``callback()`` at the end of the next step that leaves the worker quiet (or once
        its dataflows have all completed): work that belongs to no update, such as freeing a
        trace nothing reads any more, waits for a moment without any."""

    def scope_name(self, name: str) -> str:
        """``name`` for a new scope, made unique on this worker (``name#2``, ``name#3``, ...),
        identical on every worker when construction is identical."""
