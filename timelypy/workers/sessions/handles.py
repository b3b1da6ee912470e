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

An input that also has ``update_at(data, time, diff)`` (:class:`Retracting`, as ``InputSession``)
takes negative diffs; a timely ``InputHandle`` takes positive counts only.

Each worker reports its handles once at start-up (:func:`describe_handles`: the name, the class
name and the kinds of every handle); the driver checks every call against that report with a
:class:`HandleDirectory` before anything is sent, so a misspelt name or a handle of the wrong kind
fails in the driver and nothing reaches the workers.
"""

from __future__ import annotations

from typing import (
    TYPE_CHECKING,
    Any,
    Callable,
    Dict,
    Iterable,
    List,
    Mapping,
    Protocol,
    Tuple,
    Type,
    runtime_checkable,
)

from ...errors import HandleKindError, UnknownHandleError, did_you_mean

if TYPE_CHECKING:
    from ...dataflow.scope import Scope

__all__ = [
    "Dataflow",
    "Input",
    "Retracting",
    "Probe",
    "Changes",
    "Lookup",
    "HANDLE_KINDS",
    "find_handle",
    "is_kind",
    "KIND_NAMES",
    "RETRACTIONS",
    "describe_handles",
    "HandleDirectory",
]

Dataflow = Callable[["Scope"], Dict[str, Any]]
"""A session's dataflow function: builds on a worker's scope and names its handles."""


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
class Retracting(Protocol):
    """An input that takes negative diffs (retractions) at any time at or after its own."""

    def update_at(self, data: Any, time: Any, diff: int) -> None:
        """Change ``data`` by ``diff`` at ``time``."""


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
    except (KeyError, TypeError):
        raise _unknown(name, handles) from None
    if not is_kind(handle, kind):
        raise _wrong_kind(name, type(handle).__name__, kind)
    return handle


def is_kind(handle: Any, kind: Type[Any]) -> bool:
    """``isinstance(handle, kind)`` for a handle kind, remembered per class (see :data:`_FITS`)."""
    key = (type(handle), kind)
    fits = _FITS.get(key)
    if fits is None:
        fits = _FITS[key] = isinstance(handle, kind)
    return fits


_FITS: Dict[Tuple[type, Type[Any]], bool] = {}
"""Whether a class of handle is of a kind: a runtime protocol's ``isinstance`` walks the
protocol's members every time (the largest item of a session's profile at one record per epoch),
and a handle's members come from its class."""


def _unknown(name: Any, names: Iterable[str]) -> UnknownHandleError:
    names = sorted(names)
    hint = did_you_mean(name, names)
    return UnknownHandleError(
        f"session: no handle named {name!r}; the dataflow returned "
        f"{names}" + (f"; {hint}" if hint else "")
    )


def _wrong_kind(name: str, class_name: str, kind: Type[Any]) -> HandleKindError:
    return HandleKindError(
        f"session: handle {name!r} is a {class_name}, expected {HANDLE_KINDS[kind]}"
    )


KIND_NAMES: Dict[Type[Any], str] = {
    Input: "input",
    Probe: "probe",
    Changes: "changes",
    Lookup: "lookup",
}
"""The name of each handle kind in a worker's report of its handles."""
RETRACTIONS = "retractions"
"""The kind name of an input that takes negative diffs (:class:`Retracting`)."""

HandleReport = Dict[str, Tuple[str, Tuple[str, ...]]]
"""``{name: (class name, kind names)}``: what a worker reports of its handles."""


def describe_handles(handles: Mapping[str, Any]) -> HandleReport:
    """The report of ``handles`` a worker sends the driver at start-up."""
    report: HandleReport = {}
    for name, handle in handles.items():
        kinds = [label for kind, label in KIND_NAMES.items() if isinstance(handle, kind)]
        if isinstance(handle, Input) and isinstance(handle, Retracting):
            kinds.append(RETRACTIONS)
        report[str(name)] = (type(handle).__name__, tuple(kinds))
    return report


class HandleDirectory:
    """The driver's copy of the workers' handle report: checks names and kinds of calls."""

    def __init__(self, report: HandleReport) -> None:
        self.report = dict(report)

    def require(self, name: Any, kind: Type[Any]) -> None:
        """Raise :class:`UnknownHandleError` (listing the names) or :class:`HandleKindError`
        unless ``name`` is a handle of ``kind``."""
        entry = self.report.get(name) if isinstance(name, str) else None
        if entry is None:
            raise _unknown(name, self.report)
        class_name, kinds = entry
        if KIND_NAMES[kind] not in kinds:
            raise _wrong_kind(name, class_name, kind)

    def retracts(self, name: str) -> bool:
        """The input ``name`` takes negative diffs."""
        return RETRACTIONS in self.report[name][1]

    def inputs(self) -> List[str]:
        """The names of the input handles."""
        return [n for n, (_, kinds) in self.report.items() if KIND_NAMES[Input] in kinds]
