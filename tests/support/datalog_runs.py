"""Run a Datalog program through its session and check it against the from-scratch evaluator.

``check_run(text, steps, ...)`` opens ``Program.from_text(text).session(...)`` observing every
derived relation, applies each step of ``(relation, fact, +1/-1)`` changes and advances; after
every step each derived relation's ``contents`` equals :func:`oracle.datalog.evaluate` on the
facts so far, its ``changes`` add up to it, and ``lookup`` by the first field agrees.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Set, Tuple

from oracle.datalog import evaluate

from timelypy.datalog import Program
from timelypy.frontends.datalog.compile import UNIT

Change = Tuple[str, Tuple[Any, ...], int]


def check_run(
    text: str,
    steps: List[List[Change]],
    workers: int = 1,
    backend: str = "inline",
    lookups: bool = True,
    timeout: float = 120,
    **options: Any,
) -> Dict[str, Set[Tuple[Any, ...]]]:
    """See the module docstring; returns the derived relations at the end."""
    program = Program.from_text(text)
    derived = program.derived
    facts: Dict[str, Set[Tuple[Any, ...]]] = {
        n: {tuple(f) for f in program.facts.get(n, ())} for n in program.inputs if n != UNIT
    }
    accumulated: Dict[str, Dict[Tuple[Any, ...], int]] = {n: {} for n in derived}
    want: Optional[Dict[str, Set[Tuple[Any, ...]]]] = None
    with program.session(
        workers, backend, observe=derived, timeout=timeout, **options
    ) as session:
        for time, step in enumerate(steps, start=1):
            session.update_many(step)
            for relation, fact, diff in step:
                fact = program.compiled.check_fact(relation, fact)
                (facts[relation].add if diff > 0 else facts[relation].discard)(fact)
            session.advance()
            assert session.time == time
            want = evaluate(text, facts)
            for name in derived:
                got = session.contents(name)
                assert got == want[name], (time, name, got ^ want[name])
                for fact, t, diff in session.changes(name):
                    assert t < time, (name, fact, t, time)
                    acc = accumulated[name]
                    acc[fact] = acc.get(fact, 0) + diff
                    if not acc[fact]:
                        del acc[fact]
                assert accumulated[name] == {f: 1 for f in want[name]}, (time, name)
                if lookups and want[name] and program.relations[name].arity:
                    first = sorted(want[name], key=repr)[0][0]
                    expected = sorted(f for f in want[name] if f[0] == first)
                    assert session.lookup(name, first) == expected, (time, name, first)
    assert want is not None
    return {n: want[n] for n in derived}
