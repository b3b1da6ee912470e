"""timelypy's Datalog front-end: the program's text compiled by ``timelypy.datalog``, facts
inserted into a session observing the output relation, then per change: insert or remove,
``advance``, and read the output's ``changes`` (the read waits until the output is complete at
the new time, and costs what the change changed, where ``contents`` would copy the relation).

Where the session API (``timelypy.datalog.Program``) is not there, the peer runs the same
compiled program directly: ``compile_program`` -> ``timelypy.plan.lower`` -> ``open_session``,
waiting on a probe of the output after every change and reading its changes (the JSON's
``how`` says which path ran).
"""

from __future__ import annotations

from typing import Any, Dict, List, Set, Tuple

from workloads import Workload


class TimelypyPeer:
    """One timelypy session (``workers`` and ``backend`` in the options)."""

    def __init__(self, workload: Workload, options: Dict[str, Any]) -> None:
        import timelypy

        self.workload = workload
        self.workers = int(options.get("workers", 1))
        self.backend = str(options.get("backend", "inline"))
        self.timeout = float(options.get("timeout", 600))
        self.version = getattr(timelypy, "__version__", None)
        self.time = 0
        try:
            from timelypy.datalog import Program  # type: ignore[attr-defined]
        except ImportError:
            Program = None
        if Program is not None and not options.get("direct"):
            self.how = "timelypy.datalog session: advance and read the changes per change"
            program = Program.from_text(workload.datalog_text(), source=workload.name)
            self.session = program.session(
                workers=self.workers,
                backend=self.backend,
                timeout=self.timeout,
                observe=[workload.output],
            )
            self.direct = False
        else:
            self.how = "compile_program + plan.lower + open_session, probe waited per change"
            self.session = self._direct_session()
            self.direct = True
        self.session.__enter__()
        self.contents: Dict[Tuple[Any, ...], int] = {}

    def _direct_session(self) -> Any:
        import timelypy as tp
        from timelypy.frontends.datalog import compile_program
        from timelypy.plan import lower

        compiled = compile_program(self.workload.datalog_text(), source=self.workload.name)
        output = self.workload.output

        def dataflow(scope: Any) -> Dict[str, Any]:
            handles: Dict[str, Any] = {}
            inputs = {}
            for name in compiled.inputs:
                handles[name], inputs[name] = scope.new_collection(name)
            built = lower({output: compiled.plans[output]}, inputs)
            handles["out"] = built[output].capture()
            handles["out.probe"] = built[output].probe()
            return handles

        return tp.open_session(
            dataflow, workers=self.workers, backend=self.backend, timeout=self.timeout
        )

    def describe(self) -> Dict[str, Any]:
        return {
            "version": self.version,
            "workers": self.workers,
            "backend": self.backend,
            "how": self.how,
        }

    def _advance(self) -> None:
        s = self.session
        if not self.direct:
            s.advance()
            s.changes(self.workload.output)
            return
        self.time += 1
        s.advance_to(self.time)
        s.wait("out.probe")
        acc = self.contents
        for data, _t, diff in s.changes("out"):
            n = acc.get(data, 0) + diff
            if n:
                acc[data] = n
            else:
                del acc[data]

    def load(self, facts: Dict[str, List[Tuple[int, ...]]]) -> None:
        for rel, rows in facts.items():
            if self.direct:
                self.session.update_many(rel, rows)
            else:
                self.session.insert_many(rel, rows)
        self._advance()

    def change(self, relation: str, fact: Tuple[int, ...], diff: int) -> None:
        if diff > 0:
            self.session.insert(relation, fact)
        else:
            self.session.remove(relation, fact)
        self._advance()

    def output(self) -> Set[Tuple[int, ...]]:
        if self.direct:
            return {f for f, w in self.contents.items() if w > 0}
        return set(self.session.contents(self.workload.output))

    def close(self) -> None:
        self.session.__exit__(None, None, None)
