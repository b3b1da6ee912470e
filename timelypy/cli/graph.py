"""``timelypy graph``: run a program on one inline worker and draw the dataflows it builds.

The program runs in this process with ``TIMELYPY_WORKERS=1`` and ``TIMELYPY_BACKEND=inline``;
:func:`timelypy.workers.worker.observe_dataflows` collects the root scopes worker 0 builds, and
:mod:`timelypy.dataflow.graph` draws them. With ``--stats`` a
:class:`~timelypy.stats.StatsSink` on the worker counts records in and out per operator while the
program runs, and each operator of the picture shows its counts.
"""

from __future__ import annotations

import contextlib
import pathlib
import sys
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Tuple

import typer

from ..dataflow.graph import GraphvizNotFound, render_image, to_dot, to_mermaid
from ..stats import Statistics, StatsSink
from ..workers.worker import observe_dataflows
from .common import fail, reporting, run_environment, run_program, suggest

if TYPE_CHECKING:
    from ..dataflow.scope import Scope
    from ..workers.worker import Worker

__all__ = ["graph", "collect_dataflows", "FORMATS"]

FORMATS = ("dot", "mermaid", "png", "svg")
"""What ``--format`` accepts."""


def collect_dataflows(
    program: pathlib.Path, args: List[str], stats: bool = False
) -> Tuple[List[Any], Dict[Tuple[str, int], str]]:
    """Run ``program`` on one inline worker (its output goes to stderr); return the root scopes
    worker 0 built and, with ``stats``, per-operator annotations (else ``{}``)."""
    scopes: List[Scope] = []
    sinks: Dict[int, StatsSink] = {}

    def starting(worker: Worker, name: str) -> None:
        if stats and worker.index == 0 and id(worker) not in sinks:
            sink = StatsSink(worker.index)
            worker.instruments.add(sink)
            sinks[id(worker)] = sink

    def built(worker: Worker, scope: Scope) -> None:
        if worker.index == 0:
            scopes.append(scope)

    with (
        run_environment(1, "inline"),
        observe_dataflows(built, starting),
        contextlib.redirect_stdout(sys.stderr),
    ):
        run_program(program, args)
    if not stats:
        return scopes, {}
    return scopes, Statistics(s.snapshot() for s in sinks.values()).annotations()


def _write(text_or_bytes: Any, output: Optional[pathlib.Path]) -> None:
    if output is not None:
        if isinstance(text_or_bytes, bytes):
            output.write_bytes(text_or_bytes)
        else:
            output.write_text(text_or_bytes)
        typer.echo(f"wrote {output}", err=True)
    elif isinstance(text_or_bytes, bytes):
        sys.stdout.buffer.write(text_or_bytes)
        sys.stdout.flush()
    else:
        typer.echo(text_or_bytes, nl=False)


def graph(
    program: pathlib.Path = typer.Argument(..., help="The Python program whose dataflows to draw."),
    args: Optional[List[str]] = typer.Argument(None, help="Arguments for the program (after --)."),
    fmt: str = typer.Option("dot", "--format", "-f", help="dot | mermaid | png | svg."),
    output: Optional[pathlib.Path] = typer.Option(
        None, "--output", "-o", help="Write here (default: stdout; png/svg need -o on a terminal)."
    ),
    stats: bool = typer.Option(
        False,
        "--stats",
        help="Show records in / out, time and runs per operator, counted while the program ran.",
    ),
    verbose: bool = typer.Option(
        False,
        "--verbose",
        "-v",
        help="On an error of the program, print the whole traceback, not only your code's lines.",
    ),
) -> None:
    """Draw the dataflows PROGRAM.py builds.

    Operators, channels with their pact (pipeline or exchange), scopes as clusters, loops. The
    program runs to its end on one inline worker (its own output goes to stderr):

        timelypy graph examples/skip_level.py --format png -o skip_level.png --stats
    """
    if fmt not in FORMATS:
        raise fail(
            f"--format must be one of {', '.join(FORMATS)}, got {fmt!r}" + suggest(fmt, FORMATS)
        )
    if fmt in ("png", "svg") and output is None and sys.stdout.isatty():
        raise fail(f"a {fmt} picture is binary: write it to a file with -o FILE.{fmt}")
    with reporting(verbose):
        scopes, annotations = collect_dataflows(program, args or [], stats)
    if not scopes:
        raise fail(
            "the program built no dataflow in this process. `timelypy graph` runs it on "
            "one inline worker: a program that sets workers or backend itself "
            '(execute(..., backend="processes")) builds its dataflows elsewhere',
            1,
        )
    if fmt == "mermaid":
        _write(to_mermaid(scopes, annotations), output)
        return
    dot_text = to_dot(scopes, annotations, title=program.name)
    if fmt == "dot":
        _write(dot_text, output)
        return
    try:
        _write(render_image(dot_text, fmt), output)
    except GraphvizNotFound as exc:
        raise fail(str(exc), 1) from None
