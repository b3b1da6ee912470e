"""The kinds of handle a driver session can drive, as runtime-checkable protocols.

A session's ``dataflow(scope)`` returns a dict naming its handles; each command of the session
needs one kind, checked with ``isinstance`` against these protocols (so any object with the
members works, not just the built-in classes):

================  ==============================================  ===============================
kind              members                                         built-in handles
================  ==============================================  ===============================
:class:`Input`    ``send_updates``, ``advance_to``, ``flush``,     ``InputSession`` (differential),
                  ``closed``                                      ``InputHandle`` (timely)
:class:`Probe`    ``less_than(t)``, ``frontier``                  ``ProbeHandle`` (and captures)
:class:`Changes`  ``changes_from(start) -> (items, next)``        ``CapturedCollection``
                                                                  (``(data, time, diff)``),
                                                                  ``Captured`` (``(time, record)``)
:class:`Lookup`   ``lookup(key) -> {value: count}``               ``Arranged``
================  ==============================================  ===============================
"""

from __future__ import annotations

from typing import Any, Dict, Iterable, List, Mapping, Tuple, Type, runtime_checkable
from typing import Protocol

from ..errors import TimelyError

__all__ = ["Input", "Probe", "Changes", "Lookup", "HANDLE_KINDS", "find_handle"]


@runtime_checkable
class Input(Protocol):
    """An input the driver sends updates to and advances."""

    @property
    def closed(self) -> bool:
        """The input was closed: it takes no more updates."""

    def send_updates(self, updates: Iterable[Tuple[Any, Any, int]]) -> None:
        """Apply ``(data, time, diff)`` updates."""

    def advance_to(self, time: Any) -> None:
        """Promise that no more updates come at times before ``time``."""

    def flush(self) -> None:
        """Push what was sent so far into the dataflow."""


@runtime_checkable
class Probe(Protocol):
    """A frontier the driver waits on."""

    @property
    def frontier(self) -> List[Any]:
        """The current frontier (sorted)."""

    def less_than(self, time: Any) -> bool:
        """Some time strictly before ``time`` may still appear."""


@runtime_checkable
class Changes(Protocol):
    """A log of changes the driver reads incrementally."""

    def changes_from(self, start: int) -> Tuple[List[Any], int]:
        """The items from position ``start`` on, and the position to read from next time."""


@runtime_checkable
class Lookup(Protocol):
    """An index the driver queries by key."""

    def lookup(self, key: Any) -> Dict[Any, int]:
        """The values of ``key`` with their non-zero counts."""


HANDLE_KINDS: Dict[Type[Any], str] = {
    Input: "an input (send_updates, advance_to, flush, closed), such as an InputSession or "
           "InputHandle",
    Probe: "a probe (less_than, frontier), such as a ProbeHandle",
    Changes: "a capture (changes_from), such as a CapturedCollection or Captured",
    Lookup: "an arrangement (lookup), such as an Arranged",
}
"""Each handle protocol and how error messages describe it."""


def find_handle(handles: Mapping[str, Any], name: str, kind: Type[Any]) -> Any:
    """The handle named ``name``, checked to be of ``kind`` (one of :data:`HANDLE_KINDS`).

    Raises :class:`~timelypy.errors.TimelyError` naming the handle and the kind expected.
    """
    try:
        handle = handles[name]
    except KeyError:
        raise TimelyError(f"session: no handle named {name!r}; the dataflow returned "
                          f"{sorted(handles)}") from None
    if not isinstance(handle, kind):
        raise TimelyError(f"session: handle {name!r} is a {type(handle).__name__}, expected "
                          f"{HANDLE_KINDS[kind]}")
    return handle
