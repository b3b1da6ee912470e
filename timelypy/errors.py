"""Exception types of timelypy. Messages name the operator, worker, time and value involved."""

from __future__ import annotations

import reprlib
from typing import Any, Callable, Dict, Iterable, List

__all__ = [
    "TimelyError",
    "TimeOrderError",
    "InputClosedError",
    "OperatorError",
    "CycleError",
    "WorkerError",
    "WorkerDiedError",
    "NotConvergedError",
    "ReduceOutputError",
    "UnhashableDataError",
    "WaitTimeoutError",
    "StallError",
    "AuthenticationError",
    "DataEncodingError",
    "DiffTypeError",
    "user_error",
    "unhashable_error",
    "did_you_mean",
]


class TimelyError(Exception):
    """Base class of every error raised by timelypy."""


class TimeOrderError(TimelyError, ValueError):
    """A time is not allowed here: sending before an input's current time, advancing backwards."""


class InputClosedError(TimelyError, RuntimeError):
    """An input handle or session was used after ``close()``."""


class OperatorError(TimelyError):
    """A user function raised inside an operator; the message names the operator, the worker
    and, when the error is tied to one record, the record, its time and its diff.

    ``record`` is the record the user's function was given (for a collection, the update's
    data, not the ``(data, time, diff)`` triple); ``time`` its time; ``diff`` its diff (None
    for a timely stream, whose records have none). All three are None when the error is not
    tied to one record (an operator's construction, a whole batch)."""

    def __init__(
        self,
        message: str,
        operator: str = "",
        worker: int | None = None,
        record: Any = None,
        time: Any = None,
        diff: Any = None,
    ):
        super().__init__(message)
        self.operator = operator
        self.worker = worker
        self.record = record
        self.time = time
        self.diff = diff

    def __reduce__(self) -> Any:
        # keep the fields when the error is pickled (to another process or a Ray driver)
        return (
            type(self),
            (str(self), self.operator, self.worker, self.record, self.time, self.diff),
        )


class CycleError(TimelyError, ValueError):
    """A dataflow cycle along which no path summary strictly advances time."""


class WorkerError(TimelyError):
    """A worker raised; carries the worker index and the original traceback text."""

    def __init__(self, message: str, worker: int | None = None, traceback_text: str = ""):
        super().__init__(message)
        self.worker = worker
        self.traceback_text = traceback_text


class WorkerDiedError(WorkerError):
    """A worker process or actor died (killed, crashed) before finishing."""


class NotConvergedError(TimelyError, RuntimeError):
    """An iterative scope did not reach a fixed point within its iteration limit."""


class ReduceOutputError(TimelyError, TypeError):
    """A reduce function returned something that is not a list of ``(value, count)`` pairs."""


class UnhashableDataError(TimelyError, TypeError):
    """Data that must be hashed (keys, records to consolidate) is not hashable."""


class WaitTimeoutError(TimelyError, TimeoutError):
    """A bounded wait ran out (probe wait, worker start, shutdown)."""


class StallError(WaitTimeoutError):
    """Stepping made no progress: operators hold capabilities nothing will release."""


class DataEncodingError(TimelyError, TypeError):
    """A record cannot be sent to another worker (it cannot be serialised: a lock, a socket, a
    recursive structure); the message names the operator, the worker and the record's type."""


class DiffTypeError(TimelyError, TypeError):
    """A diff that is not an integer (``int`` or a numpy integer; not ``bool``, not a float)."""


class SchemaError(TimelyError, TypeError):
    """A record that does not fit the schema declared for its input
    (``scope.new_collection(schema=...)``); the message names the input, the record and the
    schema."""


class AuthenticationError(TimelyError):
    """A peer failed the job-secret challenge."""


def describe_exception(exc: BaseException) -> str:
    """``str(exc)``, or a placeholder when the exception cannot be printed."""
    try:
        return str(exc)
    except Exception:  # noqa: BLE001 - an exception whose __str__ raises
        return f"<unprintable {type(exc).__name__}>"


def format_exception_safely(exc: BaseException) -> str:
    """The traceback text of ``exc``, even when its message cannot be printed."""
    import traceback

    try:
        return "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    except Exception:  # noqa: BLE001
        lines = traceback.format_tb(exc.__traceback__)
        return "".join(lines) + f"{type(exc).__name__}: {describe_exception(exc)}\n"


_UNSET: Any = object()


def user_error(
    op: Any,
    exc: BaseException,
    what: str = "",
    *,
    record: Any = _UNSET,
    time: Any = _UNSET,
    diff: Any = None,
) -> OperatorError:
    """Wrap an exception raised by user code, naming the operator and worker; ``record``,
    ``time`` and ``diff`` (when given) are named apart in the message and kept as fields of
    the :class:`OperatorError`; ``what`` describes anything else being processed."""
    worker = getattr(op, "worker_index", None)
    where = f"operator {op.name!r}" + (f" on worker {worker}" if worker is not None else "")
    parts = []
    if record is not _UNSET:
        parts.append(f"record {_short_repr(record)}")
    if time is not _UNSET:
        parts.append(f"at time {time!r}")
    if diff is not None:
        parts.append(f"with diff {diff!r}")
    if what:
        parts.append(what)
    detail = f" while processing {' '.join(parts)}" if parts else ""
    return OperatorError(
        f"{where} raised {type(exc).__name__}: {describe_exception(exc)}{detail}",
        operator=op.name,
        worker=worker,
        record=None if record is _UNSET else record,
        time=None if time is _UNSET else time,
        diff=diff,
    )


def _short_repr(value: Any, limit: int = 300) -> str:
    """``repr(value)``, cut to ``limit`` characters (a record can be a large structure)."""
    try:
        text = repr(value)
    except Exception:  # noqa: BLE001 - a record whose __repr__ raises
        return f"<unprintable {type(value).__name__}>"
    return text if len(text) <= limit else text[: limit - 5] + " ...)"


def did_you_mean(name: Any, choices: Iterable[Any]) -> str:
    """``"did you mean 'x'?"`` naming the choices closest to a misspelt ``name`` (difflib),
    or ``""`` when none is close."""
    import difflib

    names = [str(c) for c in choices]
    close = difflib.get_close_matches(str(name), names, n=2, cutoff=0.6)
    if not close:
        lowered = {n.lower(): n for n in names}
        close = [lowered[str(name).lower()]] if str(name).lower() in lowered else []
    return f"did you mean {' or '.join(repr(c) for c in close)}?" if close else ""


def unhashable_error(op: Any, records: Iterable[Any], what: str = "record") -> Exception:
    """An :class:`~timelypy.errors.UnhashableDataError` naming ``op`` and the first record of
    ``records`` that cannot be hashed (or a generic one if all can)."""
    for r in records:
        try:
            hash(r)
        except TypeError:
            return UnhashableDataError(
                f"operator {op.name!r} on worker {op.worker_index}: {what} {r!r} is not hashable "
                f"(use tuples, not lists, sets or dicts, for data that is grouped or keyed)"
            )
    return UnhashableDataError(f"operator {op.name!r}: unhashable data")


class WorkerHungError(WorkerDiedError):
    """A worker process or actor stopped answering: no heartbeat within ``heartbeat_timeout``
    (stopped, frozen, or blocked outside Python); it was killed."""


class SessionInputError(TimelyError, ValueError):
    """A driver session rejected an update (a record that cannot be routed or sent, a diff that
    is not an integer, a time behind the input's time). Nothing of the rejected update was
    applied; ``rejected`` lists ``(input, record, time, diff)`` of every update rejected at once
    (the rest of the session's batch stays buffered)."""

    def __init__(
        self,
        message: str,
        input: str | None = None,
        worker: int | None = None,
        value: Any = None,
        rejected: Any = (),
    ):
        super().__init__(message)
        self.input = input
        self.worker = worker
        self.value = value
        self.rejected = list(rejected)


class UnknownHandleError(TimelyError, KeyError):
    """A driver session call named a handle the dataflow did not return (the message lists the
    names it did return)."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


class HandleKindError(TimelyError, TypeError):
    """A driver session call used a handle of the wrong kind (a probe as an input, ...)."""


class SessionCommandError(WorkerError):
    """A session command failed on a worker that goes on serving: the dataflow is intact and
    the session stays usable."""


__all__ += [
    "WorkerHungError",
    "SessionInputError",
    "UnknownHandleError",
    "HandleKindError",
    "SessionCommandError",
]


# -- waits that would return before the updates they should cover (driver sessions, step_until)
class PendingTimeWarning(UserWarning):
    """A wait returns (or would return) before updates it presumably should cover: they were
    sent at the input's current time, which the input has not advanced past (the fix is
    ``advance_to(t + 1)`` before waiting). The message names the input, the time and the fix."""


__all__ += ["PendingTimeWarning"]


# -- naming what failed: a fused stage, the first record a batch function fails on
class NamedStage:
    """What :func:`user_error` names in place of an operator: a user's stage fused into another
    operator (``Linear[inspect]`` fused into a join, ``Linear[map>filter]`` into a count), named
    as the operator the unfused dataflow would have run, on ``worker_index``."""

    __slots__ = ("name", "worker_index")

    def __init__(self, name: str, worker_index: int):
        self.name = name
        self.worker_index = worker_index


def offending_record(
    batch_fn: Callable[[List[Any]], Any], data: List[Any], time: Any
) -> Dict[str, Any]:
    """:func:`user_error`'s keywords naming the first record of ``data`` on which ``batch_fn``
    fails (re-run one by one). A batch function marked ``over_updates`` (differential's fused
    chains) reads ``(data, time, diff)`` updates: the record is then the update's data, and its
    time and diff are named apart."""
    for record in data:
        try:
            batch_fn([record])
        except Exception:
            if (
                getattr(batch_fn, "over_updates", False)
                and type(record) is tuple
                and len(record) == 3
            ):
                return {"record": record[0], "time": record[1], "diff": record[2]}
            return {"record": record, "time": time}
    return {"what": f"a batch of {len(data)} records at time {time!r}"}


__all__ += ["NamedStage", "offending_record"]


# -- values in messages
_SHORT_REPR = reprlib.Repr()
_SHORT_REPR.maxstring = _SHORT_REPR.maxother = 80
_SHORT_REPR.maxlevel = 4


def short_repr(value: Any) -> str:
    """A short ``repr`` of ``value`` for an error message, even for huge, deep or broken values
    (a ``__repr__`` that raises gives ``<unprintable TYPE>``)."""
    try:
        return _SHORT_REPR.repr(value)
    except Exception:  # noqa: BLE001 - a __repr__ that raises
        return f"<unprintable {type(value).__name__}>"


__all__ += ["short_repr"]


# -- durable jobs: checkpoints and restores
class RecoveryError(TimelyError):
    """A restore cannot proceed: the program's stateful operators differ from the snapshot's,
    or a state was taken at a time that was not closed. The message names the operator."""


class CheckpointError(TimelyError):
    """A checkpoint cannot be written or read: a file is missing, truncated or corrupt (its
    checksum differs), of another format version, unsigned or badly signed (pickled chunks), or
    the checkpoint is unfinished (no manifest, a part missing). ``path`` names the file and
    ``reason`` says why; the message says both."""

    def __init__(self, message: str, path: str = "", reason: str = ""):
        super().__init__(message)
        self.path = path
        self.reason = reason

    def __reduce__(self) -> Any:
        return (type(self), (str(self), self.path, self.reason))


__all__ += ["RecoveryError", "CheckpointError"]


# -- front-ends
class DatalogError(TimelyError, ValueError):
    """A Datalog program (or a fact given to one) is wrong: a syntax error, an undeclared
    relation, an arity or type mismatch, an unbound variable, recursion through negation or
    aggregation. ``source``, ``line`` and ``column`` locate it (0 when unknown), ``rule`` is the
    text of the rule or fact involved (if any) and ``relation`` the relation's name (if any);
    ``str()`` reads ``SOURCE:LINE:COL: message``."""

    def __init__(
        self,
        message: str,
        *,
        source: str = "<program>",
        line: int = 0,
        column: int = 0,
        rule: str = "",
        relation: str = "",
    ):
        self.message = message
        self.source = source
        self.line = line
        self.column = column
        self.rule = rule
        self.relation = relation
        where = f"{source}:{line}:{column}: " if line else (f"{source}: " if source else "")
        text = where + message
        if rule:
            text += f"\n  in: {rule}"
        super().__init__(text)

    def __reduce__(self) -> Any:
        kwargs = dict(
            source=self.source,
            line=self.line,
            column=self.column,
            rule=self.rule,
            relation=self.relation,
        )
        return (_datalog_error, (self.message, kwargs))


def _datalog_error(message: str, kwargs: Dict[str, Any]) -> DatalogError:
    return DatalogError(message, **kwargs)


__all__ += ["DatalogError"]
