"""Exception types of timelypy. Messages name the operator, worker, time and value involved."""

from __future__ import annotations

from typing import Any, Iterable

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
]


class TimelyError(Exception):
    """Base class of every error raised by timelypy."""


class TimeOrderError(TimelyError, ValueError):
    """A time is not allowed here: sending before an input's current time, advancing backwards."""


class InputClosedError(TimelyError, RuntimeError):
    """An input handle or session was used after ``close()``."""


class OperatorError(TimelyError):
    """A user function raised inside an operator; the message names the operator."""

    def __init__(self, message: str, operator: str = "", worker: int | None = None):
        super().__init__(message)
        self.operator = operator
        self.worker = worker


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


def user_error(op: Any, exc: BaseException, what: str = "") -> OperatorError:
    """Wrap an exception raised by user code, naming the operator and worker."""
    worker = getattr(op, "worker_index", None)
    where = f"operator {op.name!r}" + (f" on worker {worker}" if worker is not None else "")
    detail = f" while processing {what}" if what else ""
    err = OperatorError(f"{where} raised {type(exc).__name__}: {exc}{detail}",
                        operator=op.name, worker=worker)
    return err


def unhashable_error(op: Any, records: Iterable[Any], what: str = "record") -> Exception:
    """An :class:`~timelypy.errors.UnhashableDataError` naming ``op`` and the first record of
    ``records`` that cannot be hashed (or a generic one if all can)."""
    for r in records:
        try:
            hash(r)
        except TypeError:
            return UnhashableDataError(
                f"operator {op.name!r} on worker {op.worker_index}: {what} {r!r} is not hashable "
                f"(use tuples, not lists, sets or dicts, for data that is grouped or keyed)")
    return UnhashableDataError(f"operator {op.name!r}: unhashable data")


class WorkerHungError(WorkerDiedError):
    """A worker process or actor stopped answering: no heartbeat within ``heartbeat_timeout``
    (stopped, frozen, or blocked outside Python); it was killed."""


class SessionInputError(TimelyError, ValueError):
    """A driver session rejected an update (a record that cannot be routed or sent, a diff that
    is not an integer, a time behind the input's time). Nothing of the rejected update was
    applied; ``rejected`` lists ``(input, record, time, diff)`` of every update rejected at once
    (the rest of the session's batch stays buffered)."""

    def __init__(self, message: str, input: str | None = None, worker: int | None = None,
                 value: Any = None, rejected: Any = ()):
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


__all__ += ["WorkerHungError", "SessionInputError", "UnknownHandleError", "HandleKindError",
            "SessionCommandError"]


# -- waits that would return before the updates they should cover (driver sessions, step_until)
class PendingTimeWarning(UserWarning):
    """A wait returns (or would return) before updates it presumably should cover: they were
    sent at the input's current time, which the input has not advanced past (the fix is
    ``advance_to(t + 1)`` before waiting). The message names the input, the time and the fix."""


__all__ += ["PendingTimeWarning"]
