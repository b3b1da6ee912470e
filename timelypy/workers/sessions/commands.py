"""The commands of a driver session and the kinds of its workers' replies.

A command is a tuple whose first item is one of the constants below; the driver sends it to a
worker (:mod:`.remote`, :mod:`.inprocess`), whose :class:`~.service.HandleService` runs it.
Replies to the driver are ``(reply, worker index, command id, value)`` with ``reply`` one of
``HELLO``, ``OK``, ``FAILED`` (the command failed; the worker and its dataflow are intact) and
``ERROR`` (the worker failed).
"""

from __future__ import annotations

from typing import Any, List, Tuple

__all__ = [
    "UPDATE",
    "STAGE",
    "COMMIT",
    "DISCARD",
    "ADVANCE",
    "FLUSH",
    "CHANGES",
    "LOOKUP",
    "FRONTIER",
    "STATS",
    "WAIT",
    "CLOSE",
    "CLOSED_AT",
    "CHECKPOINT",
    "FINGERPRINT",
    "RESTORE",
    "RESTORED",
    "MARK_RESTORED",
    "HELLO",
    "OK",
    "FAILED",
    "ERROR",
    "Command",
    "Staged",
    "Rejection",
]

Command = Tuple[Any, ...]
"""``(kind, *arguments)``; ``kind`` is one of the command constants."""

UPDATE = "update"
"""``(UPDATE, input, [(data, time, diff), ...])``: check, then send updates into one input."""
STAGE = "stage"
"""``(STAGE, [(input, [(data, time, diff), ...]), ...])``: check and keep updates; the reply is
the list of rejected ones, ``[(input, position, reason), ...]`` (empty: all staged)."""
COMMIT = "commit"
"""``(COMMIT,)``: apply what was staged, then flush every open input."""
DISCARD = "discard"
"""``(DISCARD,)``: drop what was staged."""
ADVANCE = "advance"
"""``(ADVANCE, input or None, time)``: advance one input (None: every open input) and flush."""
FLUSH = "flush"
"""``(FLUSH,)``: flush every open input."""
CHANGES = "changes"
"""``(CHANGES, capture)``: what the capture recorded since the last ``CHANGES``."""
LOOKUP = "lookup"
"""``(LOOKUP, arrangement, key)``: ``{value: count}`` of ``key``."""
FRONTIER = "frontier"
"""``(FRONTIER, probe)``: the probe's frontier."""
STATS = "stats"
"""``(STATS,)``: this worker's operator statistics (:meth:`timelypy.stats.StatsSink.snapshot`);
fails unless the session collects statistics."""
WAIT = "wait"
"""``(WAIT, probe, time)``: answered once the probe has passed every time before ``time``."""
CLOSE = "close"
"""``(CLOSE,)``: close the inputs; the worker then runs its dataflows to completion."""
CLOSED_AT = "closed_at"
"""``(CLOSED_AT, time)``: answered once no operator can still receive or hold work before
``time`` (:func:`~timelypy.recovery.snapshot.closed_at`): a checkpoint at ``time`` is exact."""
CHECKPOINT = "checkpoint"
"""``(CHECKPOINT, checkpoints, checkpoint_id, time)``: write this worker's part of a checkpoint
to the store (from this process); the reply is the part's description."""
FINGERPRINT = "fingerprint"
"""``(FINGERPRINT,)``: the program's shape, ``{operator id: description}``."""
RESTORE = "restore"
"""``(RESTORE, checkpoints, manifest)``: read the checkpoint from the store and restore this
worker's operators (before any update); the inputs end at the checkpoint's time. The reply is
None, or the ``CheckpointError`` of a file that cannot be read (then nothing is restored)."""
MARK_RESTORED = "mark_restored"
"""``(MARK_RESTORED,)``: after a restore, once closed at its time: keep what every capture holds
(the restored state) apart from the changes that follow."""
RESTORED = "restored"
"""``(RESTORED, capture)``: what the capture held when the session was restored (its state at
the checkpoint's time), which ``CHANGES`` does not return."""

HELLO = "hello"
"""Reply kind: the worker built the dataflow and serves commands."""
OK = "ok"
"""Reply kind: the command's result."""
FAILED = "failed"
"""Reply kind: the command failed, the worker serves on; the value is the traceback text."""
ERROR = "error"
"""Reply kind: the worker failed (its dataflow is broken); the value is the traceback text."""

Staged = List[Tuple[str, List[Any], List[Any], List[int]]]
"""``[(input, records, times, diffs), ...]`` (columns): a worker's part of a session batch."""
Rejection = Tuple[str, int, str]
"""``(input, position in that input's updates, reason)``."""
