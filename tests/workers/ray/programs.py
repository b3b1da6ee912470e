"""Several generated programs in one job: a Ray job's start costs more than a small program."""

from __future__ import annotations

import sys
from typing import Any, Sequence

import cloudpickle
from support.harness import ref

# Ray actors do not have tests/ on their path: ship this module by value.
cloudpickle.register_pickle_by_value(sys.modules[__name__])


def programs_build(cases: Sequence[tuple]) -> Any:
    """A ``build(worker)`` with every case's program in one dataflow, each driven by its own
    script in turn (updates spread over the workers, every advance on every worker, as the
    harness does); returns each program's output updates on this worker."""

    def build(worker):
        def dataflow(scope):
            made = []
            for program, _script, n_inputs in cases:
                pairs = [scope.new_collection(name=f"in{i}") for i in range(n_inputs)]
                out = ref.build(program, scope, [c for _, c in pairs])
                made.append(([s for s, _ in pairs], out.capture()))
            return made

        made = worker.dataflow(dataflow)
        for (_program, script, _n), (sessions, _captured) in zip(cases, made):
            for k, action in enumerate(script):
                mine = (k % worker.peers) == worker.index
                if action[0] == "update" and mine:
                    sessions[action[1]].update(action[2], action[3])
                elif action[0] == "update_at" and mine:
                    _, i, rec, offset, diff = action
                    sessions[i].update_at(rec, sessions[i].time + offset, diff)
                elif action[0] == "advance":
                    sessions[action[1]].advance_to(action[2])
                    sessions[action[1]].flush()
                elif action[0] == "close":
                    sessions[action[1]].close()
                elif action[0] == "step":
                    for session in sessions:
                        session.flush()
                    for _ in range(action[1]):
                        worker.step()
            for session in sessions:
                session.close()
        worker.step_until_done(timeout=120)
        return [captured.updates() for _sessions, captured in made]

    return build
