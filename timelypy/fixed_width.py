"""Fixed-width values: which Python values have a shape of scalar columns (a leaf module).

A value is *fixed-width* when it is an ``int``, ``float`` or ``bool`` (exactly those types, not
subclasses) or a plain ``tuple`` of fixed-width values; its *shape* is ``"i"``, ``"f"`` or
``"b"`` for a scalar and the tuple of its items' shapes for a tuple. Arrangements keep such
records as numpy columns (``timelypy.differential.trace.layout``) and the wire packs lists of
them as columns (``timelypy.communication.wire_columns``, which also takes ``Product(int, int)``
times, shape ``"P"``); both detect shapes here.

>>> shape_of((1, (2.5, True))), shape_of((1, "a"))
(('i', ('f', 'b')), None)
"""

from __future__ import annotations

from typing import Any, Optional, Tuple, Union

import numpy as np

from .order import Product

__all__ = ["DTYPE_OF_KIND", "KIND_OF_TYPE", "PRODUCT", "Shape", "TYPE_OF_KIND", "shape_of"]

Shape = Union[str, Tuple[Any, ...]]
"""``"i"``, ``"f"``, ``"b"`` (``"P"``: a ``Product`` of two ints), or a tuple of shapes."""

KIND_OF_TYPE = {int: "i", float: "f", bool: "b"}
"""The shape of each scalar type."""
TYPE_OF_KIND = {"i": int, "f": float, "b": bool}
"""The scalar type of each scalar shape."""
DTYPE_OF_KIND = {"i": np.int64, "f": np.float64, "b": np.bool_}
"""The numpy type a scalar shape's column takes at full width."""
PRODUCT = "P"
"""The shape of a ``Product(int, int)`` (only where ``products=True``)."""


def shape_of(
    value: Any, products: bool = False, limit: Optional[int] = None, depth: int = 0
) -> Optional[Shape]:
    """The shape of ``value``, or None when it is not fixed-width (or is nested more than
    ``limit`` tuples deep). ``products``: a ``Product`` of two ints is a value too (``"P"``).

    >>> from timelypy.order import Product
    >>> shape_of(((1, 2), Product(0, 1)), products=True), shape_of(Product(0, 1))
    ((('i', 'i'), 'P'), None)
    """
    cls = type(value)
    kind = KIND_OF_TYPE.get(cls)
    if kind is not None:
        return kind
    if cls is Product:
        if products and type(value[0]) is int and type(value[1]) is int:
            return PRODUCT
        return None
    if cls is not tuple or (limit is not None and depth >= limit):
        return None
    parts = []
    for item in value:
        part = shape_of(item, products, limit, depth + 1)
        if part is None:
            return None
        parts.append(part)
    return tuple(parts)
