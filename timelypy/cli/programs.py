"""``timelypy run`` and ``timelypy examples``: run a program, list or run the bundled examples.

Workers and backend reach the program through the environment
(:mod:`timelypy.workers.launch.defaults`): every ``execute`` / ``open_session`` call that leaves
``workers`` and ``backend`` unset uses them.
"""

from __future__ import annotations

import pathlib
import sys
from typing import List, Optional

import typer

from .common import (
    BACKENDS,
    bundled_dir,
    fail,
    first_doc_line,
    reporting,
    run_environment,
    run_program,
    run_target,
    scripts_in,
    suggest,
)

__all__ = ["run", "examples"]

WORKERS_HELP = "Number of workers (TIMELYPY_WORKERS); default: the program's own choice, else 1."
BACKEND_HELP = (
    f"Backend: {' | '.join(BACKENDS)} (TIMELYPY_BACKEND); default: the program's own "
    f"choice, else inline."
)
ADDRESS_HELP = "Address of a running Ray cluster for the ray backend (TIMELYPY_RAY_ADDRESS)."
VERBOSE_HELP = (
    "On an error, print the whole traceback (through timelypy's internals), not "
    "only the error and your own code's lines."
)


def run(
    program: str = typer.Argument(
        ...,
        metavar="PROGRAM",
        help="The Python program to run as __main__ (a file), or module:function.",
    ),
    args: Optional[List[str]] = typer.Argument(
        None, help="Arguments for the program (after --, e.g. `-- 1000 --verbose`)."
    ),
    workers: Optional[int] = typer.Option(None, "--workers", "-w", help=WORKERS_HELP),
    backend: Optional[str] = typer.Option(None, "--backend", "-b", help=BACKEND_HELP),
    ray_address: Optional[str] = typer.Option(None, "--ray-address", help=ADDRESS_HELP),
    verbose: bool = typer.Option(False, "--verbose", "-v", help=VERBOSE_HELP),
) -> None:
    """Run PROGRAM.py as __main__, or module:function, with the given workers and backend.

    Every tp.execute(...) / tp.open_session(...) call of the program that leaves workers and
    backend unset uses these (as timely's execute_from_args takes them from the command line):

        timelypy run examples/skip_level.py --workers 2 --backend processes

    module:function imports the module from the current directory (or sys.path) and calls
    function() - or, when it takes one argument, runs it as build(worker) with execute and
    prints each worker's result:

        timelypy run my_flows:build --workers 2 --backend processes

    On an error it prints the error and the lines of your code it went through; --verbose prints
    the whole traceback.
    """
    with reporting(verbose), run_environment(workers, backend, ray_address):
        run_target(program, args or [])


def _print_examples(directory: pathlib.Path) -> None:
    scripts = scripts_in(directory)
    if sys.stdout.isatty():
        from rich.console import Console
        from rich.table import Table
        from rich.text import Text

        table = Table(title=f"timelypy examples ({directory})", title_justify="left")
        table.add_column("name", style="bold cyan", no_wrap=True)
        table.add_column("what it shows")
        for path in scripts:
            table.add_row(Text(path.stem), Text(first_doc_line(path)))  # not markup
        Console().print(table)
        Console().print(
            "Run one: [bold]timelypy examples NAME [--workers N --backend B] [-- args][/bold]"
        )
        return
    width = max((len(p.stem) for p in scripts), default=0)
    for path in scripts:
        typer.echo(f"{path.stem.ljust(width)}  {first_doc_line(path)}")


def examples(
    name: Optional[str] = typer.Argument(
        None, help="The example to run (e.g. skip_level); none: list them."
    ),
    args: Optional[List[str]] = typer.Argument(None, help="Arguments for the example (after --)."),
    workers: Optional[int] = typer.Option(None, "--workers", "-w", help=WORKERS_HELP),
    backend: Optional[str] = typer.Option(None, "--backend", "-b", help=BACKEND_HELP),
    ray_address: Optional[str] = typer.Option(None, "--ray-address", help=ADDRESS_HELP),
    verbose: bool = typer.Option(False, "--verbose", "-v", help=VERBOSE_HELP),
) -> None:
    """List the bundled examples, or run one of them.

    timelypy examples

    timelypy examples skip_level --workers 2 --backend processes -- 40
    """
    directory = bundled_dir("examples")
    if name is None:
        _print_examples(directory)
        return
    program = directory / (name if name.endswith(".py") else f"{name}.py")
    if not program.is_file():
        known = [p.stem for p in scripts_in(directory)]
        raise fail(
            f"no example named {name!r}{suggest(name, known)}; the examples are: {', '.join(known)}"
        )
    with reporting(verbose), run_environment(workers, backend, ray_address):
        run_program(program, args or [])
