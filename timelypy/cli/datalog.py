"""``timelypy datalog``: run a Datalog program on facts files, as Soufflé does, then keep it live.

``timelypy datalog PROGRAM.dl -F FACTS -D OUT`` reads ``<relation>.facts`` of every input
relation from FACTS (tab-separated; a missing file is no facts) and ``<relation>.delta`` change
files, evaluates, and writes ``<relation>.csv`` per output relation into OUT (tab-separated,
sorted). With ``--watch`` it then polls FACTS: a changed ``.facts`` file is compared with what it
held before and the difference applied; lines appended to a ``.delta`` file (``+`` or ``-``, a
tab, the fields) are applied once each. After each change the outputs that changed are
rewritten. Ctrl-C (or SIGTERM) ends it cleanly; ``--watch-for`` bounds it.
"""

from __future__ import annotations

import pathlib
import signal
import time as _time
from typing import Any, Dict, Iterator, List, Optional, Tuple

import typer

from ..errors import DatalogError, TimelyError
from ..frontends.datalog.facts import (
    format_fact,
    parse_delta,
    parse_facts,
    sorted_facts,
    write_csv,
)
from ..frontends.datalog.program import Program
from ..frontends.datalog.session import DatalogSession
from .common import BACKENDS, fail

__all__ = ["datalog", "FactsWatcher"]

Change = Tuple[str, Tuple[Any, ...], int]


class FactsWatcher:
    """What changed in a facts directory since the last look: ``.facts`` files compared with
    their previous contents, lines appended to ``.delta`` files (complete lines only: a line
    still being written waits for the next look; a file that shrank is read again from the
    start)."""

    def __init__(self, directory: pathlib.Path, program: Program) -> None:
        self.directory = directory
        self.program = program
        self._seen: Dict[str, Tuple[int, int]] = {}
        self._facts: Dict[str, set] = {}
        self._offsets: Dict[str, int] = {}

    def poll(self) -> Tuple[List[Change], List[DatalogError]]:
        """The changes since the last poll (the first: everything), and the errors of files
        that could not be read (their changes are left out; a fixed file is read again)."""
        changes: List[Change] = []
        errors: List[DatalogError] = []
        for name in self.program.inputs:
            relation = self.program.relations[name]
            try:
                changes.extend(self._facts_file(name, relation))
                changes.extend(self._delta_file(name, relation))
            except DatalogError as exc:
                errors.append(exc)
        return changes, errors

    def _facts_file(self, name: str, relation: Any) -> Iterator[Change]:
        path = self.directory / f"{name}.facts"
        try:
            stat = path.stat()
        except FileNotFoundError:
            stat = None
        signature = (stat.st_mtime_ns, stat.st_size) if stat is not None else (0, -1)
        if self._seen.get(str(path)) == signature:
            return
        now = set()
        if stat is not None:
            now = set(parse_facts(_read_text(path), relation, str(path)))
        self._seen[str(path)] = signature
        before = self._facts.get(name, set())
        self._facts[name] = now
        for fact in sorted(before - now, key=repr):
            yield (name, fact, -1)
        for fact in sorted(now - before, key=repr):
            yield (name, fact, 1)

    def _delta_file(self, name: str, relation: Any) -> Iterator[Change]:
        path = self.directory / f"{name}.delta"
        if not path.is_file():
            self._offsets.pop(str(path), None)
            return
        offset = self._offsets.get(str(path), 0)
        with open(path, "rb") as f:
            data = f.read()
        if len(data) < offset:
            offset = 0
        end = data.rfind(b"\n") + 1
        if end <= offset:
            return
        first_line = data[:offset].count(b"\n") + 1
        self._offsets[str(path)] = end
        try:
            text = data[offset:end].decode("utf-8")
        except UnicodeDecodeError as exc:
            raise DatalogError(f"not UTF-8 text: {exc}", source=str(path)) from None
        for fact, diff in parse_delta(text, relation, str(path), first_line):
            yield (name, fact, diff)


def _read_text(path: pathlib.Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise DatalogError(f"cannot read: {exc}", source=str(path)) from None


def _write_outputs(session: DatalogSession, out: pathlib.Path, names: List[str]) -> None:
    """``<relation>.csv`` files in ``out``; ``-D -`` prints them instead, framed as Soufflé
    frames a relation printed to standard output."""
    for name in names:
        if str(out) == "-":
            rel = session.program.relations[name]
            rows = sorted_facts(session.contents(name))
            lines = ["-" * 15, name, "\t".join(a for a, _ in rel.columns), "=" * 15]
            lines += [format_fact(f) for f in rows] + ["=" * 15]
            typer.echo("\n".join(lines))
        else:
            write_csv(out / f"{name}.csv", session.contents(name))


def _make_output_directory(out: pathlib.Path) -> None:
    if str(out) != "-":  # "-": standard output
        out.mkdir(parents=True, exist_ok=True)


def _summary(changes: List[Change]) -> str:
    counts: Dict[str, List[int]] = {}
    for name, _fact, diff in changes:
        c = counts.setdefault(name, [0, 0])
        c[0 if diff > 0 else 1] += 1
    return ", ".join(f"{n} +{a} -{r}" for n, (a, r) in counts.items()) or "no change"


class _Stop(Exception):
    """SIGTERM, turned into a clean stop."""


def _on_term(signum: int, frame: Any) -> None:
    raise _Stop()


def datalog(
    program: pathlib.Path = typer.Argument(..., metavar="PROGRAM.dl", help="The program."),
    facts: pathlib.Path = typer.Option(
        pathlib.Path("."), "--facts", "-F", help="Directory of <relation>.facts input files."
    ),
    output: pathlib.Path = typer.Option(
        pathlib.Path("."), "--output", "-D", help="Directory for <relation>.csv ('-': stdout)."
    ),
    workers: int = typer.Option(1, "--workers", "-w", help="Number of workers."),
    backend: str = typer.Option("inline", "--backend", "-b", help=" | ".join(BACKENDS)),
    ray_address: Optional[str] = typer.Option(
        None, "--ray-address", help="Address of a running Ray cluster (ray backend)."
    ),
    watch: bool = typer.Option(
        False, "--watch", help="Keep running: apply later changes of the facts files."
    ),
    interval: float = typer.Option(0.5, "--interval", help="Seconds between two looks (watch)."),
    watch_for: Optional[float] = typer.Option(
        None, "--watch-for", help="Stop watching after this many seconds (default: Ctrl-C)."
    ),
    timeout: float = typer.Option(
        600.0, "--timeout", help="Bound in seconds of every wait for the workers."
    ),
) -> None:
    """Evaluate PROGRAM.dl on the facts in FACTS and write its outputs to OUT, as Soufflé does.

        timelypy datalog reach.dl -F facts -D out --workers 2 --backend processes

    --watch then applies later changes: an edited <relation>.facts file (its difference), or
    lines appended to <relation>.delta ("+" or "-", a tab, the tab-separated fields):

        printf '+\\t4\\t5\\n' >> facts/edge.delta
    """
    if backend not in BACKENDS:
        raise fail(f"unknown backend {backend!r}; the backends are: {', '.join(BACKENDS)}")
    if not facts.is_dir():
        raise fail(f"no facts directory {str(facts)!r}")
    if interval <= 0:
        raise fail(f"--interval must be positive, got {interval}")
    try:
        prog = Program.from_file(program)
    except DatalogError as exc:
        raise fail(str(exc), 1) from None
    _make_output_directory(output)
    options: Dict[str, Any] = {"address": ray_address} if ray_address else {}
    previous = signal.signal(signal.SIGTERM, _on_term)
    session: Optional[DatalogSession] = None
    try:
        session = prog.session(workers, backend, timeout=timeout, **options)
        watcher = FactsWatcher(facts, prog)
        changes, errors = watcher.poll()
        if errors:
            raise fail("\n".join(str(e) for e in errors), 1)
        session.update_many(changes)
        session.advance()
        _write_outputs(session, output, prog.outputs)
        typer.echo(f"time {session.time}: {_summary(changes)}", err=True)
        if watch:
            _watch(session, watcher, output, interval, watch_for)
    except (KeyboardInterrupt, _Stop):
        typer.echo("stopped", err=True)
    except (DatalogError, TimelyError) as exc:
        if session is not None:
            session.session.abort()
        raise fail(str(exc), 1) from None
    finally:
        signal.signal(signal.SIGTERM, previous)
        if session is not None:
            try:
                session.close(min(timeout, 60.0))
            except TimelyError:
                session.session.abort()


def _watch(
    session: DatalogSession,
    watcher: FactsWatcher,
    output: pathlib.Path,
    interval: float,
    watch_for: Optional[float],
) -> None:
    deadline = None if watch_for is None else _time.monotonic() + watch_for
    outputs = session.program.outputs
    for name in outputs:  # what the first write showed
        session.changes(name)
    typer.echo(f"watching {watcher.directory} (Ctrl-C ends)", err=True)
    while deadline is None or _time.monotonic() < deadline:
        left = interval if deadline is None else min(interval, deadline - _time.monotonic())
        _time.sleep(max(left, 0.0))
        changes, errors = watcher.poll()
        for exc in errors:
            typer.secho(f"skipped: {exc}", err=True, fg=typer.colors.YELLOW)
        if not changes:
            continue
        try:
            applied = session.update_many(changes)
        except DatalogError as exc:
            typer.secho(f"skipped: {exc}", err=True, fg=typer.colors.YELLOW)
            continue
        session.advance()
        changed = [name for name in outputs if session.changes(name)]
        _write_outputs(session, output, changed)
        typer.echo(
            f"time {session.time}: {_summary(changes)} ({applied} applied); "
            f"rewrote {', '.join(changed) or 'nothing'}",
            err=True,
        )
