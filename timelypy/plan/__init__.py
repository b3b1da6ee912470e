"""The plan layer: a logical plan of relational operators, lowered onto collections.

Front-ends (Datalog, :mod:`timelypy.frontends`) produce plans (:mod:`.nodes`, with the
expressions of :mod:`.expressions`); :func:`lower` builds them out of a dataflow's input
collections (:mod:`.lower`), with expressions compiled once to Python functions
(:mod:`.compiler`). The test suite's from-scratch oracle evaluates the same plans, so every
front-end is checked against one reference.
"""

from .compiler import (
    compile_expression,
    compile_join_output,
    compile_predicate,
    compile_row,
    key_function,
)
from .errors import ExpressionError, PlanError
from .expressions import (
    And,
    Arith,
    Column,
    Compare,
    Const,
    Expression,
    Row,
    divide,
    evaluate_expression,
)
from .lower import free_recurs, lower, lower_one
from .nodes import (
    Aggregate,
    Antijoin,
    Consolidate,
    Count,
    Distinct,
    Filter,
    Fixpoint,
    FlatMap,
    Fn,
    FreezeAt,
    Join,
    Map,
    Negate,
    Plan,
    Project,
    Recur,
    Reduce,
    Scan,
    Select,
    Semijoin,
    TemporalFilter,
    Threshold,
    Union,
)

__all__ = [
    "Aggregate",
    "And",
    "Antijoin",
    "Arith",
    "Column",
    "Compare",
    "Const",
    "Consolidate",
    "Count",
    "Distinct",
    "Expression",
    "Filter",
    "FlatMap",
    "Fixpoint",
    "Fn",
    "Join",
    "Map",
    "Negate",
    "Plan",
    "Project",
    "Recur",
    "Reduce",
    "Row",
    "Scan",
    "Select",
    "Semijoin",
    "TemporalFilter",
    "FreezeAt",
    "Threshold",
    "Union",
    "PlanError",
    "ExpressionError",
    "lower",
    "lower_one",
    "free_recurs",
    "compile_expression",
    "compile_join_output",
    "compile_predicate",
    "compile_row",
    "key_function",
    "divide",
    "evaluate_expression",
]
