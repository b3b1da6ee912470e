"""timelypy's Datalog front-end: the program's text compiled by ``timelypy.datalog``, facts
inserted into a session, one ``advance`` per change (the session applies the change and
computes until the output relations are complete at the new time)."""

from __future__ import annotations

from typing import Any, Dict, List, Set, Tuple

from workloads import Workload


class TimelypyPeer:
    """One ``timelypy.datalog`` session (``workers`` and ``backend`` in the options)."""

    def __init__(self, workload: Workload, options: Dict[str, Any]) -> None:
        import timelypy
        from timelypy import datalog

        self.workload = workload
        self.workers = int(options.get("workers", 1))
        self.backend = str(options.get("backend", "inline"))
        self.version = getattr(timelypy, "__version__", None)
        program = datalog.Program.from_text(workload.datalog_text())
        self.session = program.session(
            workers=self.workers, backend=self.backend, timeout=float(options.get("timeout", 600))
        )
        self.session.__enter__()

    def describe(self) -> Dict[str, Any]:
        return {
            "version": self.version,
            "workers": self.workers,
            "backend": self.backend,
            "how": "timelypy.datalog session, one advance per change",
        }

    def load(self, facts: Dict[str, List[Tuple[int, ...]]]) -> None:
        for rel, rows in facts.items():
            self.session.insert_many(rel, rows)
        self.session.advance()

    def change(self, relation: str, fact: Tuple[int, ...], diff: int) -> None:
        if diff > 0:
            self.session.insert(relation, fact)
        else:
            self.session.remove(relation, fact)
        self.session.advance()

    def output(self) -> Set[Tuple[int, ...]]:
        return set(self.session.contents(self.workload.output))

    def close(self) -> None:
        self.session.__exit__(None, None, None)
