"""``timelypy bench``: list the benchmarks, or run one and show its JSON result as a table.

Each script in ``benchmarks/`` prints one JSON object on stdout (``benchmarks/README.md``); this
command runs it in a fresh interpreter, maps ``--size`` to the script's own size option and shows
the result: a table on a terminal, the JSON itself with ``--json`` or when not a terminal.
"""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any, Dict, Iterator, List, Optional, Tuple

import typer

from .common import bundled_dir, fail, first_doc_line, scripts_in, suggest

__all__ = ["bench", "SIZE_OPTIONS", "flatten"]

SIZE_OPTIONS: Dict[str, str] = {
    "backends_skip_level": "--size",
    "datalog": "--edges",
    "exchange_throughput": "--records",
    "linear_fusion": "--records",
    "reachability": "--nodes",
    "skip_level": "--size",
    "spark_connector": "--rows",
    "timely_throughput": "--records",
    "wordcount": "--lines",
}
"""Each benchmark's option for its main size (what ``--size`` sets)."""


def flatten(value: Any, prefix: str = "") -> Iterator[Tuple[str, Any]]:
    """``(dotted.key, leaf)`` pairs of a JSON value (lists of scalars stay whole)."""
    if isinstance(value, dict):
        for key, item in value.items():
            yield from flatten(item, f"{prefix}.{key}" if prefix else str(key))
    elif isinstance(value, list) and any(isinstance(v, (dict, list)) for v in value):
        for i, item in enumerate(value):
            yield from flatten(item, f"{prefix}[{i}]")
    else:
        yield prefix, value


def _list(scripts: List[Any]) -> None:
    width = max((len(p.stem) for p in scripts), default=0)
    for path in scripts:
        size = SIZE_OPTIONS.get(path.stem, "-")
        typer.echo(f"{path.stem.ljust(width)}  (--size -> {size})  {first_doc_line(path)}")


def _table(name: str, result: Any) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"benchmark {name}", title_justify="left")
    table.add_column("measure", style="cyan")
    table.add_column("value", justify="right")
    for key, value in flatten(result):
        table.add_row(key, f"{value:,.6g}" if isinstance(value, float) else str(value))
    Console().print(table)


def bench(
    name: Optional[str] = typer.Argument(None, help="The benchmark (e.g. wordcount); none: list."),
    args: Optional[List[str]] = typer.Argument(
        None, help="More options for the benchmark script (after --, e.g. `-- --rounds 10`)."
    ),
    size: Optional[int] = typer.Option(
        None, "--size", "-n", help="The benchmark's main size (records, lines, nodes, people)."
    ),
    as_json: bool = typer.Option(
        False, "--json", help="Print the JSON result (the default when stdout is not a terminal)."
    ),
) -> None:
    """List the benchmarks, or run one and show its result.

    timelypy bench

    timelypy bench wordcount --size 1000 -- --rounds 20
    """
    directory = bundled_dir("benchmarks")
    scripts = scripts_in(directory)
    if name is None:
        _list(scripts)
        return
    stem = name[:-3] if name.endswith(".py") else name
    if stem not in {p.stem for p in scripts}:
        known = [p.stem for p in scripts]
        raise fail(
            f"no benchmark named {name!r}{suggest(stem, known)}; the benchmarks are: "
            f"{', '.join(known)}"
        )
    command = [sys.executable, str(directory / f"{stem}.py")]
    if size is not None:
        command += [SIZE_OPTIONS.get(stem, "--size"), str(size)]
    command += list(args or [])
    done = subprocess.run(command, stdout=subprocess.PIPE, text=True, check=False)
    if done.returncode != 0:
        raise fail(
            f"benchmark {stem} failed with exit code {done.returncode}", done.returncode or 1
        )
    try:
        result = json.loads(done.stdout)
    except json.JSONDecodeError:
        raise fail(f"benchmark {stem} did not print one JSON object:\n{done.stdout}", 1) from None
    if as_json or not sys.stdout.isatty():
        typer.echo(json.dumps(result, indent=2))
    else:
        _table(stem, result)
