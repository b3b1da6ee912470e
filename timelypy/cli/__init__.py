"""The ``timelypy`` command line: run programs and examples, benchmarks, pictures of dataflows.

``timelypy --help`` lists the commands; each has its own ``--help``. ``python -m timelypy``
is the same program. See ``docs/cli.md``.
"""

from __future__ import annotations

from typing import Any, List, Optional

import typer

from .bench import bench
from .datalog import datalog
from .graph import graph
from .kernels import compile_kernels_command
from .programs import examples, run

__all__ = ["app", "main"]


app = typer.Typer(
    name="timelypy",
    help="Timely and Differential Dataflow for Python: run programs and examples on any "
    "backend, run benchmarks, draw dataflows, run Datalog programs.",
    no_args_is_help=True,
    add_completion=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _version(value: bool) -> None:
    if value:
        import importlib

        typer.echo(f"timelypy {importlib.import_module('timelypy').__version__}")
        raise typer.Exit()


@app.callback()
def _options(
    version: bool = typer.Option(
        False,
        "--version",
        "-V",
        callback=_version,
        is_eager=True,
        help="Print the version and exit.",
    ),
) -> None:
    """Timely and Differential Dataflow for Python: run programs and examples on any backend,
    run benchmarks, draw dataflows."""


app.command("run")(run)
app.command("examples")(examples)
app.command("bench")(bench)
app.command("graph")(graph)
app.command("datalog")(datalog)
app.command("compile-kernels")(compile_kernels_command)


def main(argv: Optional[List[str]] = None) -> Any:
    """Entry point of the ``timelypy`` console script (``argv``: default ``sys.argv[1:]``)."""
    return app(args=argv, prog_name="timelypy")
