"""Timestamps, their partial order and lattice, and path summaries.

Root-scope times are plain ``int``. Nested (iterative) scopes use :class:`Product`, a pair
``(outer, inner)`` ordered by the *product* partial order: ``p <= q`` iff both coordinates are.

Python's ``<`` on :class:`Product` (a tuple) is lexicographic. That is a total order which
*extends* the product order, so it is right for sorting and heaps and wrong for "happens before".
Every partial-order comparison in timelypy goes through :func:`less_equal` (or the per-type
functions of a :class:`TimeOrder`).

Path summaries (:class:`PathSummary`) describe what a path through the dataflow does to a time:
``results_in(t)`` applies it (``None`` means the time left the valid range), ``followed_by(s)``
composes two paths.
"""

from __future__ import annotations

from typing import Any, Callable, Optional, Tuple

__all__ = [
    "Product",
    "less_equal",
    "less_than",
    "join",
    "meet",
    "minimum_like",
    "PathSummary",
    "IntSummary",
    "ProductSummary",
    "identity_summary",
    "TimeOrder",
    "INT_ORDER",
    "order_for",
    "MAX_INT_TIME",
]

MAX_INT_TIME = (1 << 63) - 1
"""Largest valid integer time; summaries that would pass it return ``None`` (overflow)."""


class Product(tuple):
    """A pair ``(outer, inner)`` under the product partial order. Nestable.

    >>> less_equal(Product(1, 2), Product(2, 2)), less_equal(Product(1, 3), Product(2, 2))
    (True, False)
    >>> join(Product(3, 7), Product(4, 6)), meet(Product(3, 7), Product(4, 6))
    (Product(4, 7), Product(3, 6))
    """

    __slots__ = ()

    def __new__(cls, outer: Any, inner: Any) -> "Product":
        return tuple.__new__(cls, (outer, inner))

    def __getnewargs__(self) -> Tuple[Any, Any]:
        return (self[0], self[1])

    @property
    def outer(self) -> Any:
        """The first coordinate: the time in the enclosing scope."""
        return self[0]

    @property
    def inner(self) -> Any:
        """The second coordinate: the round (iteration) counter of the nested scope."""
        return self[1]

    def __repr__(self) -> str:
        return f"Product({self[0]!r}, {self[1]!r})"


def less_equal(a: Any, b: Any) -> bool:
    """The partial order: ``a <= b`` (ints by value, Products coordinate-wise)."""
    if type(a) is Product:
        return less_equal(a[0], b[0]) and less_equal(a[1], b[1])
    return a <= b


def less_than(a: Any, b: Any) -> bool:
    """``a <= b and a != b`` in the partial order."""
    return a != b and less_equal(a, b)


def join(a: Any, b: Any) -> Any:
    """Least upper bound (``max`` for ints, coordinate-wise for Products)."""
    if type(a) is Product:
        return Product(join(a[0], b[0]), join(a[1], b[1]))
    return a if a >= b else b


def meet(a: Any, b: Any) -> Any:
    """Greatest lower bound (``min`` for ints, coordinate-wise for Products)."""
    if type(a) is Product:
        return Product(meet(a[0], b[0]), meet(a[1], b[1]))
    return a if a <= b else b


def minimum_like(t: Any) -> Any:
    """The minimum of the timestamp type of ``t``."""
    if type(t) is Product:
        return Product(minimum_like(t[0]), minimum_like(t[1]))
    return 0


# --------------------------------------------------------------------------------------
# Path summaries


class PathSummary:
    """What a path through the dataflow does to a timestamp.

    Subclasses implement :meth:`results_in`, :meth:`followed_by`, :meth:`less_equal` and
    :meth:`is_identity`. Summaries are immutable, hashable and compare by value.
    """

    __slots__ = ()

    def results_in(self, t: Any) -> Optional[Any]:  # pragma: no cover - abstract
        """The time ``t`` advanced along this path, or None if it leaves the valid range."""
        raise NotImplementedError

    def followed_by(self, other: "PathSummary") -> Optional["PathSummary"]:  # pragma: no cover
        """The summary of this path then ``other``, or None if it overflows every time."""
        raise NotImplementedError

    def less_equal(self, other: "PathSummary") -> bool:  # pragma: no cover
        """The summary order: ``self`` advances every time no further than ``other`` does."""
        raise NotImplementedError

    def is_identity(self) -> bool:  # pragma: no cover
        """True when the summary leaves every time unchanged (a path that does not advance time)."""
        raise NotImplementedError


class IntSummary(PathSummary):
    """Adds ``delta`` (>= 0) to an int time; ``None`` past :data:`MAX_INT_TIME`."""

    __slots__ = ("delta",)

    def __init__(self, delta: int = 0) -> None:
        if delta < 0:
            raise ValueError(f"IntSummary delta must be >= 0, got {delta}")
        self.delta = delta

    def results_in(self, t: int) -> Optional[int]:
        """``t + delta``, or None past :data:`MAX_INT_TIME`. O(1)."""
        r = t + self.delta
        return r if r <= MAX_INT_TIME else None

    def followed_by(self, other: PathSummary) -> Optional[PathSummary]:
        """The sum of the deltas (None past :data:`MAX_INT_TIME`); another kind is composed."""
        if not isinstance(other, IntSummary):
            return _Compose(self, other).simplify()
        d = self.delta + other.delta
        return IntSummary(d) if d <= MAX_INT_TIME else None

    def less_equal(self, other: PathSummary) -> bool:
        """``self.delta <= other.delta``; False against a summary of another kind."""
        return isinstance(other, IntSummary) and self.delta <= other.delta

    def is_identity(self) -> bool:
        """``delta == 0``."""
        return self.delta == 0

    def __eq__(self, other: object) -> bool:
        return isinstance(other, IntSummary) and other.delta == self.delta

    def __hash__(self) -> int:
        return hash(("IntSummary", self.delta))

    def __lt__(self, other: "IntSummary") -> bool:  # sort key only
        return self.delta < other.delta

    def __repr__(self) -> str:
        return f"IntSummary({self.delta})"


class ProductSummary(PathSummary):
    """Applies ``outer`` and ``inner`` summaries coordinate-wise to a :class:`Product`."""

    __slots__ = ("outer", "inner", "results_in")

    def __init__(self, outer: PathSummary, inner: PathSummary) -> None:
        self.outer = outer
        self.inner = inner
        if type(outer) is IntSummary and outer.delta == 0 and type(inner) is IntSummary:
            # Product(int, int) times, the outer coordinate unchanged (a loop's feedback, an
            # edge inside an iterative scope): written out on the second coordinate.
            # (results_in is a per-instance slot specialised here, a closure in the common
            # case: mypy sees a method replaced, which is the point)
            self.results_in = _inner_adder(inner.delta)  # type: ignore[method-assign,assignment]
        else:
            self.results_in = self._results_in  # type: ignore[method-assign]

    def __reduce__(self) -> Any:
        return (ProductSummary, (self.outer, self.inner))

    def _results_in(self, t: Product) -> Optional[Product]:
        """``Product(outer.results_in(t.outer), inner.results_in(t.inner))``; None if either
        is None."""
        o = self.outer.results_in(t[0])
        if o is None:
            return None
        i = self.inner.results_in(t[1])
        if i is None:
            return None
        return Product(o, i)

    def followed_by(self, other: PathSummary) -> Optional[PathSummary]:
        """Composes coordinate-wise; None if either coordinate overflows."""
        if not isinstance(other, ProductSummary):
            return _Compose(self, other).simplify()
        o = self.outer.followed_by(other.outer)
        i = self.inner.followed_by(other.inner)
        if o is None or i is None:
            return None
        return ProductSummary(o, i)

    def less_equal(self, other: PathSummary) -> bool:
        """Coordinate-wise summary order; False against a summary of another kind."""
        return (
            isinstance(other, ProductSummary)
            and self.outer.less_equal(other.outer)
            and self.inner.less_equal(other.inner)
        )

    def is_identity(self) -> bool:
        """Both coordinate summaries are identities."""
        return self.outer.is_identity() and self.inner.is_identity()

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, ProductSummary)
            and other.outer == self.outer
            and other.inner == self.inner
        )

    def __hash__(self) -> int:
        return hash(("ProductSummary", self.outer, self.inner))

    def __repr__(self) -> str:
        return f"ProductSummary({self.outer!r}, {self.inner!r})"


def _inner_adder(delta: int) -> Callable[[Product], Optional[Product]]:
    """``results_in`` of ``ProductSummary(IntSummary(0), IntSummary(delta))``."""
    new = tuple.__new__

    def results_in(t: Product) -> Optional[Product]:
        i = t[1] + delta
        if i > MAX_INT_TIME:
            return None
        return new(Product, (t[0], i)) if delta else t

    return results_in


class _Compose(PathSummary):
    """A composition of summaries of different kinds (only met in hand-built graphs)."""

    __slots__ = ("parts",)
    parts: Tuple[PathSummary, ...]

    def __init__(self, *parts: PathSummary) -> None:
        flat: list = []
        for p in parts:
            flat.extend(p.parts if isinstance(p, _Compose) else (p,))
        self.parts = tuple(flat)

    def simplify(self) -> PathSummary:
        """Without its identity parts: the one part left, a shorter composition, or (all parts
        identities) the first part."""
        parts = [p for p in self.parts if not p.is_identity()]
        if not parts:
            return self.parts[0]
        return parts[0] if len(parts) == 1 else _Compose(*parts)

    def results_in(self, t: Any) -> Optional[Any]:
        """Applies the parts in order; None as soon as one leaves the valid range. O(parts)."""
        for p in self.parts:
            t = p.results_in(t)
            if t is None:
                return None
        return t

    def followed_by(self, other: PathSummary) -> Optional[PathSummary]:
        """The flattened composition of these parts then ``other``."""
        return _Compose(self, other).simplify()

    def less_equal(self, other: PathSummary) -> bool:
        """Equality only: a conservative order, so distinct compositions are incomparable."""
        return self == other

    def is_identity(self) -> bool:
        """Every part is an identity."""
        return all(p.is_identity() for p in self.parts)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Compose) and other.parts == self.parts

    def __hash__(self) -> int:
        return hash(("Compose", self.parts))

    def __repr__(self) -> str:
        return "Compose(" + ", ".join(map(repr, self.parts)) + ")"


def identity_summary(t: Any) -> PathSummary:
    """The identity summary for the timestamp type of ``t``."""
    if type(t) is Product:
        return ProductSummary(identity_summary(t[0]), identity_summary(t[1]))
    return IntSummary(0)


# --------------------------------------------------------------------------------------
# Per-type order objects: fast bound functions for the hot paths.


class TimeOrder:
    """The order, lattice and summaries of one timestamp type.

    Each scope has one; operators take ``order.le`` / ``order.join`` once and call them on
    their hot paths, so that int times pay no type dispatch.

    Attributes: ``minimum`` (the least time), ``le`` / ``join`` / ``meet`` (two-argument
    functions), ``identity`` (the identity path summary), ``depth`` (0 for root-scope ints, +1
    per nested scope), ``outer`` (the order of the enclosing scope, None at the root) and
    ``is_total`` (True only at the root, where times are totally ordered).
    """

    __slots__ = ("minimum", "le", "join", "meet", "identity", "depth", "outer", "is_total")

    def __init__(
        self,
        minimum: Any,
        le: Callable[[Any, Any], bool],
        join_fn: Callable[[Any, Any], Any],
        meet_fn: Callable[[Any, Any], Any],
        identity: PathSummary,
        depth: int,
        outer: Optional["TimeOrder"],
    ) -> None:
        self.minimum = minimum
        self.le = le
        self.join = join_fn
        self.meet = meet_fn
        self.identity = identity
        self.depth = depth
        self.outer = outer
        self.is_total = outer is None

    def lt(self, a: Any, b: Any) -> bool:
        """``a < b`` in this type's partial order: ``a <= b`` and ``a != b``."""
        return a != b and self.le(a, b)

    def nested(self) -> "TimeOrder":
        """The order of ``Product(self's time, int)``, used by an iterative child scope."""
        if self.is_total:
            return _PRODUCT_INT_ORDER
        return self._nested_generic()

    def _nested_generic(self) -> "TimeOrder":
        """``nested`` for an outer order that is itself a product (nested iterative scopes)."""
        outer_le, outer_join, outer_meet = self.le, self.join, self.meet

        def le(a, b):
            return a[1] <= b[1] and outer_le(a[0], b[0])

        def join_fn(a, b):
            if le(b, a):
                return a
            if le(a, b):
                return b
            return Product(outer_join(a[0], b[0]), a[1] if a[1] >= b[1] else b[1])

        def meet_fn(a, b):
            return Product(outer_meet(a[0], b[0]), a[1] if a[1] <= b[1] else b[1])

        return TimeOrder(
            Product(self.minimum, 0),
            le,
            join_fn,
            meet_fn,
            ProductSummary(self.identity, IntSummary(0)),
            self.depth + 1,
            self,
        )

    def __repr__(self) -> str:
        return f"TimeOrder(depth={self.depth})"


def _int_le(a: int, b: int) -> bool:
    return a <= b


INT_ORDER = TimeOrder(0, _int_le, max, min, IntSummary(0), 0, None)
"""The order of root-scope (int) times."""

_new_tuple = tuple.__new__


# Product(int, int), the times of an iterative scope in a root scope: the hot case, so its
# order is written out on the two coordinates (no calls to the outer order, and Products are
# built with tuple.__new__ rather than through Product.__new__).
def _pii_le(a: Product, b: Product) -> bool:
    return a[0] <= b[0] and a[1] <= b[1]


def _pii_join(a: Product, b: Product) -> Product:
    a0, a1 = a
    b0, b1 = b
    if a0 <= b0:
        return b if a1 <= b1 else _new_tuple(Product, (b0, a1))
    return a if b1 <= a1 else _new_tuple(Product, (a0, b1))


def _pii_meet(a: Product, b: Product) -> Product:
    a0, a1 = a
    b0, b1 = b
    if a0 <= b0:
        return a if a1 <= b1 else _new_tuple(Product, (a0, b1))
    return b if b1 <= a1 else _new_tuple(Product, (b0, a1))


_PRODUCT_INT_ORDER = TimeOrder(
    Product(0, 0),
    _pii_le,
    _pii_join,
    _pii_meet,
    ProductSummary(IntSummary(0), IntSummary(0)),
    1,
    INT_ORDER,
)


def order_for(t: Any) -> TimeOrder:
    """The :class:`TimeOrder` of the timestamp type of ``t``."""
    if type(t) is Product:
        return order_for(t[0]).nested()
    return INT_ORDER
