"""What a record can be: the types of docs/guide/input.md's "What a record can be".

Frozen dataclasses, named tuples, Enums, ``datetime.date`` / ``datetime`` (naive and aware) /
``time`` / ``timedelta``, ``Decimal``, ``Fraction`` and ``UUID`` are records, keys and values:

* :func:`timelypy.stable_hash` takes them, equal values hash equal (``Decimal("1.0")`` as ``1``,
  a named tuple as the plain tuple, aware datetimes of one instant in any zone), and the hash is
  the same in interpreters with different ``PYTHONHASHSEED``;
* the wire codec (msgpack, used for the data of nested scopes) carries them as themselves;
* a program of join, count, distinct, reduce and an iterate over such records gives on two
  worker processes what it gives on one inline worker;
* what is refused (mutable dataclasses, lists, dicts, other classes) is refused with an error
  naming the type, the value and what is accepted.
"""

from __future__ import annotations

import collections
import dataclasses
import enum
import json
import os
import subprocess
import sys
import textwrap
import typing
import uuid
from collections import Counter
from datetime import date, datetime, time, timedelta, timezone
from decimal import Decimal
from fractions import Fraction
from typing import Any, Dict, List

import cloudpickle
import pytest

import timelypy as tp
from timelypy import Product, stable_hash
from timelypy.communication.wire import decode, encode
from timelypy.errors import SessionInputError, UnhashableDataError

cloudpickle.register_pickle_by_value(sys.modules[__name__])

pytestmark = pytest.mark.timeout(120)

CLOUDPICKLE_3 = int(cloudpickle.__version__.split(".")[0]) >= 3


@dataclasses.dataclass(frozen=True)
class Account:
    owner: str
    number: int
    note: str = dataclasses.field(default="", compare=False)  # not part of ==, nor of the hash


@dataclasses.dataclass(frozen=True)
class Booking:
    account: Account
    day: date


class Pair(typing.NamedTuple):
    a: int
    b: str


Pt = collections.namedtuple("Pt", "x y")


class Planet(enum.Enum):
    MERCURY = 1
    VENUS = 2
    EARTH = 3
    MARS = 4
    JUPITER = 5
    SATURN = 6


class Level(enum.IntEnum):
    LOW = 1
    HIGH = 2


@dataclasses.dataclass
class Mutable:
    x: int


@dataclasses.dataclass(frozen=True, eq=False)
class ByIdentity:
    x: int


class Plain:
    def __init__(self, x: int) -> None:
        self.x = x

    def __hash__(self) -> int:
        return hash(self.x)


PLUS5 = timezone(timedelta(hours=5))

# Six distinct values of each type (an iterate runs along them as a chain).
KINDS: Dict[str, List[Any]] = {
    "frozen-dataclass": [Account(f"o{i % 3}", i) for i in range(6)],
    "nested-dataclass": [Booking(Account("ann", i), date(2024, 1, 1 + i)) for i in range(6)],
    "typing-namedtuple": [Pair(i, f"b{i}") for i in range(6)],
    "collections-namedtuple": [Pt(i, -i) for i in range(6)],
    "enum": list(Planet),
    "date": [date(2024, 2, 27) + timedelta(days=i) for i in range(6)],
    "datetime-naive": [datetime(2024, 3, 31, 1, 30) + timedelta(hours=7 * i) for i in range(6)],
    "datetime-aware": [
        datetime(2024, 3, 31, 1, 30, tzinfo=timezone.utc if i % 2 else PLUS5) + timedelta(minutes=i)
        for i in range(6)
    ],
    "time": [time(i, 15, 0, 250) if i % 2 else time(i, 15, tzinfo=PLUS5) for i in range(6)],
    "timedelta": [timedelta(days=i - 2, microseconds=7 * i) for i in range(6)],
    "decimal": [Decimal("0.1") * i + Decimal("1.00") for i in range(6)],
    "fraction": [Fraction(i + 1, 3) for i in range(6)],
    "uuid": [
        uuid.UUID(int=(i + 1) * 0x0123456789ABCDEF0123456789ABCDEF % 2**128) for i in range(6)
    ],
}
NEEDS_CLOUDPICKLE_3 = {"typing-namedtuple"}


def _kind_param(kind: str) -> Any:
    marks = []
    if kind in NEEDS_CLOUDPICKLE_3:
        marks.append(
            pytest.mark.skipif(
                not CLOUDPICKLE_3,
                reason="cloudpickle < 3 cannot send a typing.NamedTuple class "
                "defined in a test module (or __main__) by value",
            )
        )
    return pytest.param(kind, marks=marks, id=kind)


# ------------------------------------------------------------------------------------------
# the hash: equal values hash equal; refusals say what is accepted


@pytest.mark.parametrize(
    "group",
    [
        (Decimal("1.0"), Decimal("1"), Decimal("1.000"), 1, 1.0, True, Fraction(2, 2)),
        (Decimal("0.5"), Decimal("0.50"), 0.5, Fraction(1, 2)),
        (Decimal("-0"), Decimal("0.00"), 0, 0.0),
        (Decimal("Infinity"), float("inf")),
        (Decimal("0.1"), Decimal("0.10"), Fraction(1, 10)),
        (Pair(1, "a"), (1, "a"), Pt(1, "a")),
        (Level.HIGH, 2, 2.0),
        (datetime(2024, 1, 1, 12, tzinfo=timezone.utc), datetime(2024, 1, 1, 17, tzinfo=PLUS5)),
        (time(12, 0, tzinfo=timezone.utc), time(17, 0, tzinfo=PLUS5)),
        (timedelta(days=1), timedelta(hours=24), timedelta(seconds=86400)),
        (Account("ann", 1, note="x"), Account("ann", 1, note="y")),
        (("k", Account("ann", 1)), ("k", Account("ann", 1, note="z"))),
    ],
    ids=repr,
)
def test_equal_values_hash_equal(group):
    assert all(v == group[0] for v in group)
    assert len({stable_hash(v) for v in group}) == 1, [stable_hash(v) for v in group]


@pytest.mark.parametrize(
    "a, b",
    [
        (date(2024, 1, 1), datetime(2024, 1, 1)),  # a date never equals a datetime
        (datetime(2024, 1, 1), datetime(2024, 1, 1, tzinfo=timezone.utc)),  # naive != aware
        (Planet.MERCURY, 1),  # an Enum member is not its value
        (Account("ann", 1), ("ann", 1)),  # a dataclass is not the tuple of fields
        (Decimal("0.1"), 0.1),  # 0.1 the float is not exactly 1/10
    ],
)
def test_unequal_values_of_related_types_hash_apart(a, b):
    assert a != b
    assert stable_hash(a) != stable_hash(b)


@pytest.mark.parametrize("kind", list(KINDS))
def test_values_of_each_type_spread_over_workers(kind):
    values = KINDS[kind]
    assert len({stable_hash(v) for v in values}) == len(values)
    assert len({stable_hash(v) % 2 for v in values}) == 2


@pytest.mark.parametrize(
    "value, type_name, why",
    [
        (Mutable(1), "Mutable", "frozen=True"),
        (ByIdentity(1), "ByIdentity", "eq=False"),
        (Plain(1), "Plain", "not known to be the same in every process"),
        ([1, 2], "list", "mutable"),
        ({"a": 1}, "dict", "mutable"),
        (("k", [1]), "list", "mutable"),
        (Account("ann", [1]), "list", "mutable"),  # a frozen dataclass holding a list
    ],
)
def test_refusals_name_the_type_the_value_and_what_is_accepted(value, type_name, why):
    with pytest.raises(UnhashableDataError) as info:
        stable_hash(value)
    message = str(info.value)
    assert f"of type {type_name}:" in message and why in message
    assert "frozen dataclasses" in message and "Decimal" in message and "UUID" in message


def test_a_session_refuses_a_mutable_dataclass_at_the_call_and_takes_a_frozen_one():
    def dataflow(scope):
        records_in, records = scope.new_collection()
        counts = records.count()
        return {"records": records_in, "counts": counts.capture(), "probe": counts.probe()}

    with tp.open_session(dataflow, workers=1, timeout=60) as s:
        s.insert("records", Account("ann", 1))
        s.insert("records", Account("ann", 1, note="same account"))
        s.insert("records", Planet.EARTH)
        with pytest.raises(
            SessionInputError,
            match=r"record Mutable\(x=1\) of type Mutable "
            r"cannot be routed .*frozen=True",
        ):
            s.insert("records", Mutable(1))
        s.advance_to(1)
        s.wait("probe")
        counts = Counter()
        for (record, n), _t, r in s.changes("counts"):
            counts[(record, n)] += r
        assert +counts == Counter({(Account("ann", 1), 2): 1, (Planet.EARTH, 1): 1})


# ------------------------------------------------------------------------------------------
# the hash across interpreters with different PYTHONHASHSEED

CHILD = textwrap.dedent(
    """
    import dataclasses, enum, json, sys, typing, uuid
    from datetime import date, datetime, time, timedelta, timezone
    from decimal import Decimal
    from fractions import Fraction
    from timelypy import stable_hash

    @dataclasses.dataclass(frozen=True)
    class Account:
        owner: str
        number: int

    class Pair(typing.NamedTuple):
        a: int
        b: str

    class Planet(enum.Enum):
        EARTH = "earth"
        MARS = ("mars", 4)

    class Mood(str, enum.Enum):
        HAPPY = "happy"

    PLUS5 = timezone(timedelta(hours=5))
    SHARED = [
        date(2024, 2, 29), datetime(2024, 2, 29, 23, 59, 59, 999999),
        datetime(1969, 7, 20, 20, 17, tzinfo=timezone.utc), datetime(2024, 1, 1, tzinfo=PLUS5),
        time(0), time(23, 59, 59, 1), time(5, tzinfo=PLUS5), timedelta(0), timedelta(-1, 5, 7),
        Decimal("1.0"), Decimal("-12.345"), Decimal("1e-30"), Decimal("NaN"), Decimal("-Inf"),
        Fraction(22, 7), uuid.UUID(int=2**127 + 12345), ("caf\\u00e9", Decimal("2.5")),
    ]
    OWN = [Account("ann", 1), Account("caf\\u00e9", -2**70), Pair(3, "x"), Planet.EARTH,
           Planet.MARS, Mood.HAPPY, (Account("bob", 2), frozenset({Planet.MARS}))]
    print(json.dumps({"shared": [stable_hash(v) for v in SHARED],
                      "own": [stable_hash(v) for v in OWN],
                      "salted": hash("a salted string")}))
    """
)


def _child(seed: str) -> Dict[str, Any]:
    env = dict(os.environ, PYTHONHASHSEED=seed)
    proc = subprocess.run(
        [sys.executable, "-c", CHILD], env=env, capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_record_hashes_are_the_same_in_interpreters_with_different_hash_seeds():
    first, second = _child("1"), _child("4242")
    assert first["salted"] != second["salted"], "the seeds had no effect: the test is moot"
    assert first["own"] == second["own"]
    assert first["shared"] == second["shared"]
    namespace: Dict[str, Any] = {}
    exec(CHILD.split("print(")[0], namespace)  # the same values, built in this process
    assert [stable_hash(v) for v in namespace["SHARED"]] == first["shared"]


# ------------------------------------------------------------------------------------------
# the wire (msgpack: the data of nested scopes)


def _same(a: Any, b: Any) -> bool:
    """Equal, of exactly the same type, and so are their parts (tuples, fields, zones)."""
    if type(a) is not type(b) or a != b:
        return False
    if isinstance(a, tuple):
        return all(_same(x, y) for x, y in zip(a, b, strict=True))
    if dataclasses.is_dataclass(a):
        return all(_same(getattr(a, f), getattr(b, f)) for f in a.__dataclass_fields__)
    if isinstance(a, (datetime, time)):
        return a.tzinfo == b.tzinfo and a.fold == b.fold
    if isinstance(a, Decimal):
        return str(a) == str(b)
    return True


@pytest.mark.parametrize("kind", [_kind_param(k) for k in KINDS])
def test_each_type_crosses_the_wire_as_itself(kind):
    values = KINDS[kind]
    for value in values:
        assert _same(decode(encode(value)), value)
    # A batch of updates at Product times as a nested scope sends it: columnar, many of a class.
    batch = [((v, i), Product(1, i), 1) for i in range(5) for v in values]
    back = decode(encode(("d", 7, Product(1, 0), batch)))
    assert back[:3] == ("d", 7, Product(1, 0))
    assert all(_same(x[0][0], y[0][0]) for x, y in zip(back[3], batch, strict=True))
    assert len(back[3]) == len(batch)
    # Records as values of sets, frozensets and Products; one message after another.
    for obj in ({values[0], values[1]}, frozenset(values), Product(values[2], values[3])):
        assert decode(encode(obj)) == obj


def test_the_wire_keeps_exact_decimals_zones_and_fold():
    zoneinfo = pytest.importorskip("zoneinfo")
    try:
        paris = zoneinfo.ZoneInfo("Europe/Paris")
    except zoneinfo.ZoneInfoNotFoundError:
        pytest.skip("no time zone database")
    values = [
        Decimal("1.10"),
        Decimal("-0"),
        Decimal("sNaN"),
        Decimal("1E+3"),
        datetime(2024, 10, 27, 2, 30, tzinfo=paris, fold=1),
        datetime(2024, 10, 27, 2, 30, tzinfo=paris, fold=0),
        time(1, 2, 3, 4, tzinfo=timezone(timedelta(hours=-3), "BRT"), fold=1),
        datetime.max,
        date.min,
        timedelta.min,
    ]
    for value in values:
        back = decode(encode(value))
        assert type(back) is type(value) and str(back) == str(value) and repr(back) == repr(value)
        if isinstance(value, (datetime, time)):
            assert back.fold == value.fold and back.tzinfo == value.tzinfo


@dataclasses.dataclass(frozen=True)
class Node:
    label: Any
    child: Any = None


def test_records_inside_records_of_their_own_class_and_across_messages():
    tree = Node(
        Planet.EARTH,
        Node(
            Pair(1, "a") if CLOUDPICKLE_3 else Pt(1, "a"),
            Node(Decimal("2.50"), Node(("x", date(2024, 1, 1)))),
        ),
    )
    for message in ((tree, tree.child, Node(1)), (tree, (Node(2, tree),) * 20)):
        for _ in range(2):  # the second message numbers classes anew
            assert _same(decode(encode(message)), message)


@dataclasses.dataclass(frozen=True)
class Circle:
    radius: float

    def __post_init__(self) -> None:
        object.__setattr__(self, "area", 3.0 * self.radius**2)  # not a field


def test_a_record_with_attributes_besides_its_fields_keeps_them():
    back = decode(encode((Circle(2.0), Circle(1.0))))
    assert back == (Circle(2.0), Circle(1.0)) and [c.area for c in back] == [12.0, 3.0]


def test_a_class_travels_once_per_message_not_once_per_record():
    one = len(encode([Account("ann", 1)]))
    many = len(encode([Account("ann", i) for i in range(100)]))
    assert many < one + 100 * 40, (one, many)  # each further record: its fields only


# ------------------------------------------------------------------------------------------
# end to end: the same program on one inline worker and on two worker processes


def _records_graph(scope):
    """join, count, distinct, reduce and an iterate (reachability along the items as a chain):
    ``(items input, roots input, captures by output name)``."""
    items_in, items = scope.new_collection(name="items")  # (value, next value)
    roots_in, roots = scope.new_collection(name="roots")
    keys = items.map(lambda kv: kv[0])
    reach = roots.iterate(
        lambda r: (
            r.map(lambda n: (n, n))
            .join_map(items.enter(r.scope), lambda n, _, m: m)
            .concat(roots.enter(r.scope))
            .distinct()
        )
    )
    outputs = {
        "join": items.join(items.map(lambda kv: (kv[1], ("prev", kv[0])))),
        "count": keys.count(),
        "distinct": items.map(lambda kv: kv[1]).distinct(),
        "reduce": items.reduce(lambda k, vals: [(sum(c for _, c in vals), 1)]),
        "reach": reach,
    }
    return items_in, roots_in, {n: c.capture() for n, c in outputs.items()}


def _feed(worker, values: List[Any], items_in, roots_in, t: int) -> None:
    """This worker's changes at time ``t``: a chain and a second copy of one edge at 0, an edge
    removed at 1, one added at 2."""
    n = len(values)
    mine = [k for k in range(n) if k % worker.peers == worker.index]
    if t == 0:
        for k in mine:
            items_in.insert((values[k], values[(k + 1) % n]))
        if worker.index == worker.peers - 1:
            items_in.insert((values[0], values[1]))
            roots_in.insert(values[0])
    elif t == 1 and 2 in mine:
        items_in.remove((values[2], values[3]))
    elif t == 2 and 4 in mine:
        items_in.insert((values[4], values[2]))


def records_programs(groups: Dict[str, List[Any]]):
    """The records program over each group of values (records of one type), changing over three
    times; values enter on every worker. One dataflow holds every group's copy (outputs named
    ``group/output``; a group named ``""`` keeps the bare names)."""

    def build(worker):
        graphs = worker.dataflow(lambda scope: {g: _records_graph(scope) for g in groups})
        for t in range(3):
            for g, values in groups.items():
                items_in, roots_in, _ = graphs[g]
                if t:
                    items_in.advance_to(t)
                    roots_in.advance_to(t)
                _feed(worker, values, items_in, roots_in, t)
        for items_in, roots_in, _ in graphs.values():
            items_in.close()
            roots_in.close()
        worker.step_until_done(timeout=90)
        return {
            (f"{g}/{name}" if g else name): cap.updates()
            for g, (_, _, captures) in graphs.items()
            for name, cap in captures.items()
        }

    return build


def records_program(values: List[Any]):
    """:func:`records_programs` over records of one type."""
    return records_programs({"": values})


def _consolidate(results) -> Dict[str, Counter]:
    out: Dict[str, Counter] = {}
    for result in results:
        for name, updates in result.items():
            acc = out.setdefault(name, Counter())
            for data, t, r in updates:
                acc[(data, t)] += r
    return {name: Counter({k: r for k, r in acc.items() if r}) for name, acc in out.items()}


@pytest.mark.processes
@pytest.mark.timeout(180)
@pytest.mark.parametrize("kind", [_kind_param(k) for k in KINDS])
def test_records_of_each_type_on_two_processes_as_on_one_worker(kind):
    values = KINDS[kind]
    expected = _consolidate(tp.execute(records_program(values), workers=1))
    assert all(expected.values()), {n: len(c) for n, c in expected.items()}
    # The loop reached the chain's end at time 0 and lost part of it at time 1.
    reached = {d: r for (d, t), r in expected["reach"].items() if t == 0}
    assert set(reached) == set(values)
    assert any(t == 1 and r < 0 for (_d, t), r in expected["reach"].items())
    assert expected["count"][((values[0], 2), 0)] == 1  # the doubled edge counted twice

    results = tp.execute(records_program(values), workers=2, backend="processes", timeout=150)
    got = _consolidate(results)
    assert got == expected
    # Records came back as themselves (not tuples or pickles of something else).
    sample = next(iter(got["distinct"]))[0]
    assert type(sample) is type(values[0])


MEETING = [
    Decimal("1.0"),
    Decimal("1"),
    1,
    Fraction(3, 3),
    *([Pair(7, "x")] if CLOUDPICKLE_3 else []),
    (7, "x"),
    Pt(7, "x"),
    datetime(2024, 1, 1, 12, tzinfo=timezone.utc),
    datetime(2024, 1, 1, 17, tzinfo=PLUS5),
    Account("ann", 1, note="a"),
    Account("ann", 1, note="b"),
    Level.HIGH,
    2,
    Planet.MARS,
    Planet.MARS,
    uuid.UUID(int=5),
    uuid.UUID(int=5),
]


def meeting_build(worker):
    def dataflow(scope):
        keys_in, keys = scope.new_collection(name="keys")
        return keys_in, keys.count().capture()

    keys_in, captured = worker.dataflow(dataflow)
    for k, key in enumerate(MEETING):
        if k % worker.peers == worker.index:  # equal keys enter on different workers
            keys_in.insert(key)
    keys_in.close()
    worker.step_until_done(timeout=60)
    return {"count": captured.updates()}


@pytest.mark.processes
@pytest.mark.timeout(120)
def test_equal_records_of_different_types_meet_on_one_worker():
    expected = Counter(MEETING)  # groups by ==
    assert expected[1] == 4 and expected[(7, "x")] >= 2 and expected[2] == 2
    results = tp.execute(
        meeting_build, workers=3, backend="processes", start_method="spawn", timeout=90
    )
    got = _consolidate(results)["count"]
    assert got == Counter({((key, n), 0): 1 for key, n in expected.items()})


def _session_dataflow(scope):
    records_in, records = scope.new_collection()
    counts = records.count()
    return {
        "records": records_in,
        "counts": counts.capture(),
        "probe": counts.probe(),
        "by_record": counts.arrange_by_key(),
    }


SESSION_RECORDS = [
    Account("ann", 1),
    Account("ann", 1, note="again"),
    Planet.MARS,
    date(2026, 11, 26),
    datetime(2026, 11, 26, 12, tzinfo=timezone.utc),
    datetime(2026, 11, 26, 17, tzinfo=PLUS5),
    Decimal("1.0"),
    Decimal("1"),
    uuid.UUID(int=7),
    Pt(1, 2),
    (1, 2),
    Booking(Account("bob", 2), date.min),
]


@pytest.mark.processes
@pytest.mark.timeout(120)
def test_a_session_on_two_processes_takes_records_of_each_type():
    expected = Counter(SESSION_RECORDS)
    with tp.open_session(_session_dataflow, workers=2, backend="processes", timeout=60) as s:
        for record in SESSION_RECORDS:
            s.insert("records", record)
        s.advance_to(1)
        s.wait("probe")
        counts: Counter = Counter()
        for (record, n), _t, r in s.changes("counts"):
            counts[(record, n)] += r
        assert Counter({k: r for k, r in counts.items() if r}) == Counter(
            {(record, n): 1 for record, n in expected.items()}
        )
        assert s.lookup("by_record", Account("ann", 1, note="any")) == {2: 1}
        assert s.lookup(
            "by_record", datetime(2026, 11, 26, 14, tzinfo=timezone(timedelta(hours=2)))
        ) == {2: 1}


@pytest.mark.ray
@pytest.mark.timeout(300)
def test_records_of_every_type_on_two_ray_workers_as_on_one_worker(ray_session):
    """The same programs as on two processes, on two Ray actors (the suite's local Ray): Ray
    ships the build by value and the actors meet over the same mesh and wire. Every kind runs in
    one job (one dataflow, a copy of the program per kind): a Ray job's start costs more than
    the programs."""
    kinds = [k for k in KINDS if k not in NEEDS_CLOUDPICKLE_3 or CLOUDPICKLE_3]
    together = records_programs({kind: KINDS[kind] for kind in kinds})
    got = _consolidate(tp.execute(together, workers=2, backend="ray", timeout=150))
    for kind in kinds:
        values = KINDS[kind]
        expected = _consolidate(tp.execute(records_program(values), workers=1))
        mine = {name.split("/", 1)[1]: c for name, c in got.items() if name.startswith(kind + "/")}
        assert mine == expected, kind
        assert type(next(iter(mine["distinct"]))[0]) is type(values[0]), kind
