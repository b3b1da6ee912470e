"""``timelypy compile-kernels``: build a compiled mirror of the kernel modules with mypyc.

:func:`timelypy.kernels.compile_kernels` does the work: it copies every kernel module into
``DIR/PACKAGE`` and compiles the copies; the command prints how to use the result (the two
environment variables a job sets before it imports timelypy).
"""

from __future__ import annotations

import pathlib

import typer

from ..kernels import COMPILED_PACKAGE, ENVIRONMENT_VARIABLE, KernelBuildError, compile_kernels
from .common import fail

__all__ = ["compile_kernels_command"]


def compile_kernels_command(
    directory: pathlib.Path = typer.Argument(
        ..., help="Where to build the mirror (it goes on PYTHONPATH)."
    ),
    package: str = typer.Option(
        COMPILED_PACKAGE, "--package", help="The mirror's package name (TIMELYPY_KERNELS)."
    ),
) -> None:
    """Compile the kernel modules (grouping, consolidation, merging, the join, reduce's
    histories and distinct, the progress kernels) with mypyc, for TIMELYPY_KERNELS.

    Needs mypy (pip install mypy) and a C compiler. Example: ``timelypy compile-kernels
    ~/.timelypy-kernels``, then ``PYTHONPATH=~/.timelypy-kernels
    TIMELYPY_KERNELS=timelypy_compiled python job.py``."""
    typer.echo(f"compiling the kernel modules into {directory / package} (mypyc) ...", err=True)
    try:
        built = compile_kernels(directory, package)
    except (KernelBuildError, ValueError) as error:
        raise fail(str(error)) from error
    for name in built:
        typer.echo(f"  {name}", err=True)
    typer.echo(f"export PYTHONPATH={directory.resolve()}${{PYTHONPATH:+:$PYTHONPATH}}")
    typer.echo(f"export {ENVIRONMENT_VARIABLE}={package}")
