"""pydbsp (pure-Python DBSP, https://github.com/brurucy/pydbsp): the same rules as its
Datalog terms, run by its incremental Datalog body with sort-merge-indexed joins
(``IndexedIncrementalDatalogBody``), driven as the library's Datalog notebook drives it: facts
and rules pushed at an outer tick, the inner fixpoint saturated, its fact deltas fed back.

pydbsp needs Python >= 3.12; ``benchmarks/datalog.py`` runs this peer under the interpreter
given by ``--pydbsp-python`` (or reports the column as unavailable, with the reason).
"""

from __future__ import annotations

from typing import Any, Dict, List, Set, Tuple

from workloads import Workload


def _term(t: Any) -> Any:
    return "?" + t if isinstance(t, str) else t


class PydbspPeer:
    """One pydbsp circuit; every change is one outer tick (``compact`` in the options: call
    the evaluator's storage GC after each)."""

    def __init__(self, workload: Workload, options: Dict[str, Any]) -> None:
        from importlib.metadata import version

        from pydbsp import datalog as dlg
        from pydbsp.circuit import Circuit
        from pydbsp.compute import ComputeCtx
        from pydbsp.core import Antichain, dbsp_time
        from pydbsp.evaluate import Evaluator
        from pydbsp.indexed_relational_operators import IndexedIncrementalDatalogBody
        from pydbsp.operator import Input, LiftStreamIntroduction
        from pydbsp.storage import DictStorage
        from pydbsp.zset import ZSet, ZSetAddition

        self.version = version("pydbsp")
        self.workload = workload
        self.ZSet = ZSet
        self.dlg = dlg
        fg = ZSetAddition()
        e = Evaluator(
            circuit=Circuit(), storage=DictStorage(), ctx=ComputeCtx(lattice=dbsp_time(2)), group=fg
        )
        self.e = e
        self.edb = Input(frontier=Antichain(dbsp_time(1))).connect(e.circuit, ())
        self.program_in = Input(frontier=Antichain(dbsp_time(1))).connect(e.circuit, ())
        self.sf = Input(frontier=Antichain(dbsp_time(2))).connect(e.circuit, ())
        self.sr = Input(frontier=Antichain(dbsp_time(2))).connect(e.circuit, ())
        self.seed = Input(frontier=Antichain(dbsp_time(1))).connect(e.circuit, ())
        program_2d = LiftStreamIntroduction(group=ZSetAddition()).connect(
            e.circuit, (self.program_in,)
        )
        self.body = IndexedIncrementalDatalogBody(
            fact_group=fg,
            rule_group=ZSetAddition(),
            rewrite_group=ZSetAddition(),
            signal_group=ZSetAddition(),
            ext_dir_group=ZSetAddition(),
            jorder_group=ZSetAddition(),
            gatekeep_group=ZSetAddition(),
            indexed_fact_group=ZSetAddition(),
        ).connect(e.circuit, (self.edb, program_2d, self.sf, self.sr, self.seed))
        self.rules = ZSet(
            {
                ((head[0], tuple(map(_term, head[1]))),)
                + tuple((a[0], tuple(map(_term, a[1]))) for a in body): 1
                for head, body in workload.rules
            }
        )
        self.outer = 0
        self.compact = bool(options.get("compact", False))
        self.facts: Dict[Tuple[int, ...], int] = {}

    def describe(self) -> Dict[str, Any]:
        return {
            "version": self.version,
            "how": "IndexedIncrementalDatalogBody, one outer tick per change",
        }

    def _tick(self, edb: Dict[Any, int], program: Any) -> None:
        e, outer = self.e, self.outer
        e.push(self.edb, self.ZSet(edb), t=(outer,))
        e.push(self.program_in, program, t=(outer,))
        if outer == 0:
            e.push(self.seed, self.ZSet({(0, self.dlg._rewrite_monoid.identity()): 1}), t=(0,))
        min_inner = -1
        for o, k in e.frontiers()[self.sf].elements:
            if o < outer and k > min_inner:
                min_inner = k
        name = self.workload.output
        for k, (diff_facts, diff_rewrites) in e.saturate_inner(
            self.body,
            outer,
            is_empty=lambda p: not p[0].inner and not p[1].inner,
            min_inner=min_inner,
        ):
            for (pred, args), w in diff_facts.inner.items():
                if pred == name and w:
                    n = self.facts.get(args, 0) + w
                    if n:
                        self.facts[args] = n
                    else:
                        del self.facts[args]
            e.push(self.sf, diff_facts, t=(outer, k))
            e.push(self.sr, diff_rewrites, t=(outer, k))
        self.outer += 1
        if self.compact:
            self.e.compact()

    def load(self, facts: Dict[str, List[Tuple[int, ...]]]) -> None:
        edb = {(rel, f): 1 for rel, fs in facts.items() for f in fs}
        self._tick(edb, self.rules)

    def change(self, relation: str, fact: Tuple[int, ...], diff: int) -> None:
        self._tick({(relation, fact): diff}, self.ZSet({}))

    def output(self) -> Set[Tuple[int, ...]]:
        return {f for f, w in self.facts.items() if w > 0}

    def close(self) -> None:
        pass
