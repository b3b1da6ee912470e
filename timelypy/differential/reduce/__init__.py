"""Reduce: per-key group logic over a collection, in one variant per kind of time and logic.

* :mod:`.general` -- :class:`ReduceOperator`, exact at any (partially ordered) times, and
  :func:`reduce_stream`, which picks the operator for an arrangement's batches;
* :mod:`.product` -- :class:`ProductReduce` / :class:`ProductReduceUpdates`, the hot case of
  iterative programs (``Product(int, int)`` times), and :func:`reduce_product` (no arrangement);
* :mod:`.distinct_product` -- :class:`ProductDistinct` (``distinct`` at those times on flat
  states) and :func:`threshold_product`;
* :mod:`.total` -- ``count`` / ``distinct`` / ``threshold`` at totally ordered times in O(1)
  per update (:func:`count_total`, :func:`threshold_total`);
* :mod:`.column_count` -- the column path of :mod:`.total`: large messages of fixed-width
  records summed per time with numpy, the output changes built by C-level loops;
* :mod:`.column_sum` -- ``sum`` at totally ordered times on large column batches of ``int``
  values, with numpy (the column path of :class:`ReduceOperator`);
* :mod:`.logic` -- the built-in group logics and :class:`GroupLogic`, how a logic declares its
  kind (general, threshold, distinct);
* :mod:`.common` -- what every variant shares (types, the output check, the frontier test).

The loops over a key's history are the kernels of :mod:`timelypy.differential.kernel.histories`.
"""

from .common import Group, Logic, check_output, is_product_order
from .distinct_product import ProductDistinct, threshold_product
from .general import ReduceOperator, reduce_stream
from .logic import (
    GroupLogic,
    as_group_logic,
    count_logic,
    distinct_logic,
    sum_logic,
    threshold_logic,
)
from .product import ProductReduce, ProductReduceUpdates, reduce_product
from .total import CountTotal, ThresholdTotal, count_total, threshold_total

__all__ = [
    "CountTotal",
    "Group",
    "GroupLogic",
    "Logic",
    "ProductDistinct",
    "ProductReduce",
    "ProductReduceUpdates",
    "ReduceOperator",
    "ThresholdTotal",
    "as_group_logic",
    "check_output",
    "count_logic",
    "count_total",
    "distinct_logic",
    "is_product_order",
    "reduce_product",
    "reduce_stream",
    "sum_logic",
    "threshold_logic",
    "threshold_product",
    "threshold_total",
]
