"""Datalog (a Soufflé-compatible subset) compiled to the plan layer."""

from .compile import Compiled, compile_program
from .normal import Relation
from .parser import parse

__all__ = ["Compiled", "Relation", "compile_program", "parse"]
