"""Errors from the user's functions: the user's file and line on every backend, and the record,
its time and its diff named apart (fields of ``OperatorError`` and parts of its message)."""

from __future__ import annotations

import os
import pickle
import re
import subprocess
import sys
import textwrap
import traceback

import cloudpickle
import pytest

import timelypy as tp
from timelypy.errors import OperatorError, WorkerError
from timelypy.workers.launch.shipping import DYNAMIC_FILENAME, dumps

pytestmark = pytest.mark.timeout(300)

HERE = os.path.abspath(__file__)


def _line_of(text: str) -> int:
    """The line of this file holding ``text`` (once)."""
    with open(HERE) as f:
        (line,) = [
            i for i, source in enumerate(f, 1) if text in source and "_line_of" not in source
        ]
    return line


def _collection_dataflow(scope):
    nums_in, nums = scope.new_collection()
    out = nums.map(lambda x: 12 // x)  # the user's failing lambda: 12 // 0
    return {"nums": nums_in, "probe": out.probe()}


def _build(worker):
    nums_in, probe = worker.dataflow(lambda scope: tuple(_collection_dataflow(scope).values()))
    if worker.index == 0:
        nums_in.insert(3)
        nums_in.update(0, 2)  # diff 2
    nums_in.advance_to(1)
    nums_in.flush()
    worker.step_until(probe, 1, timeout=60)


LAMBDA_LINE = _line_of("the user's failing lambda")
FRAME = f'File "{HERE}", line {LAMBDA_LINE}, in <lambda>'


def test_inline_collection_error_names_record_time_and_diff_apart_and_the_users_line():
    with pytest.raises(OperatorError) as info:
        tp.execute(_build)
    err = info.value
    assert (err.operator, err.worker) == ("Linear[map]", 0)
    assert (err.record, err.time, err.diff) == (0, 0, 2)  # not the triple (0, 0, 2)
    assert str(err).endswith(
        "ZeroDivisionError: integer division or modulo by zero while "
        "processing record 0 at time 0 with diff 2"
    )
    assert FRAME in "".join(traceback.format_exception(err))


def test_timely_stream_error_has_a_record_and_time_but_no_diff():
    def build(worker):
        def dataflow(scope):
            handle, stream = scope.new_input()
            return handle, stream.map(lambda x: x["missing"], name="lookup").probe()

        handle, probe = worker.dataflow(dataflow)
        handle.advance_to(4)
        handle.send({"present": 1})
        handle.advance_to(5)
        worker.step_until(probe, 5, timeout=60)

    with pytest.raises(OperatorError) as info:
        tp.execute(build)
    err = info.value
    assert (err.operator, err.record, err.time, err.diff) == ("lookup", {"present": 1}, 4, None)
    assert str(err).endswith("KeyError: 'missing' while processing record {'present': 1} at time 4")


def test_operator_error_keeps_its_fields_through_pickle():
    err = OperatorError(
        "operator 'x' raised", operator="x", worker=1, record=(1, 2), time=3, diff=-1
    )
    back = pickle.loads(pickle.dumps(err))
    assert (str(back), back.operator, back.worker, back.record, back.time, back.diff) == (
        "operator 'x' raised",
        "x",
        1,
        (1, 2),
        3,
        -1,
    )


def test_processes_error_names_the_users_file_and_line():
    with pytest.raises(WorkerError) as info:
        tp.execute(_build, workers=2, backend="processes", timeout=120)
    text = str(info.value)
    assert "while processing record 0 at time 0 with diff 2" in text
    assert FRAME in info.value.traceback_text
    assert "<dynamic-code>" not in text


@pytest.mark.ray
@pytest.mark.timeout(180)
def test_ray_error_names_the_users_file_and_line(ray_session):
    with pytest.raises(WorkerError) as info:
        tp.execute(_build, workers=2, backend="ray", timeout=120)
    assert "while processing record 0 at time 0 with diff 2" in str(info.value)
    assert FRAME in info.value.traceback_text


def test_processes_session_error_names_the_users_file_and_line():
    with tp.open_session(_collection_dataflow, workers=2, backend="processes", timeout=120) as s:
        s.insert("nums", 0)
        with pytest.raises(WorkerError) as info:
            s.advance_to(1)
            s.wait("probe", timeout=60)
    assert FRAME in info.value.traceback_text
    assert "while processing record 0 at time 0 with diff 1" in str(info.value)


PROGRAM = textwrap.dedent("""\
    import timelypy as tp

    def build(worker):
        def dataflow(scope):
            nums_in, nums = scope.new_collection()
            return nums_in, nums.map(lambda x: 12 // x).probe()

        nums_in, probe = worker.dataflow(dataflow)
        nums_in.insert(worker.index)
        nums_in.advance_to(1)
        nums_in.flush()
        worker.step_until(probe, 1, timeout=60)

    if __name__ == "__main__":
        tp.execute(build, workers=2, backend="processes", timeout=120)
""")


def test_a_scripts_functions_travel_by_value_and_keep_their_file(tmp_path):
    """A script's functions live in ``__main__``: they reach the worker processes by value
    (cloudpickle), and the workers' tracebacks still name the script and the line."""
    program = tmp_path / "divide.py"
    program.write_text(PROGRAM)
    env = {k: v for k, v in os.environ.items() if not k.startswith("TIMELYPY_")}
    done = subprocess.run(
        [sys.executable, str(program)],
        capture_output=True,
        text=True,
        timeout=240,
        env=env,
        cwd=tmp_path,
    )
    assert done.returncode == 1
    assert f'File "{program}", line 6, in <lambda>' in done.stderr
    assert f'File "{program}", line 12, in build' in done.stderr
    assert "return nums_in, nums.map(lambda x: 12 // x).probe()" in done.stderr  # its source
    assert "<dynamic-code>" not in done.stderr


def test_dumps_keeps_the_file_name_of_code_pickled_by_value():
    """What cloudpickle (3.1 and later) replaces by ``<dynamic-code>``: the file of a function
    that travels by value, and of the functions nested in it."""
    namespace = {"__name__": "not_importable_anywhere"}
    source = "def outer(n):\n    return [(lambda x: x // n)(k) for k in range(3)]\n"
    exec(compile(source, "/somewhere/user_program.py", "exec"), namespace)  # noqa: S102
    outer = namespace["outer"]
    back = cloudpickle.loads(dumps(outer))
    assert back(1) == [0, 1, 2]
    codes = [back.__code__]
    while codes:
        code = codes.pop()
        assert code.co_filename == "/somewhere/user_program.py", code
        codes += [c for c in code.co_consts if hasattr(c, "co_filename")]
    with pytest.raises(ZeroDivisionError) as info:
        back(0)
    frames = [f.filename for f in traceback.extract_tb(info.value.__traceback__)]
    assert DYNAMIC_FILENAME not in frames and frames[-1] == "/somewhere/user_program.py"
    assert re.search(r"<lambda>", "".join(traceback.format_tb(info.value.__traceback__)))


def test_a_misspelt_session_handle_gets_a_suggestion():
    with tp.open_session(_collection_dataflow) as s:
        with pytest.raises(
            tp.errors.UnknownHandleError,
            match=r"no handle named 'nmus'; the dataflow returned \['nums', "
            r"'probe'\]; did you mean 'nums'\?",
        ):
            s.insert("nmus", 1)
        with pytest.raises(tp.errors.UnknownHandleError) as info:
            s.wait("zzz")
        assert "did you mean" not in str(info.value)  # nothing close: no guess


def test_a_failing_reduce_names_its_key():
    def build(worker):
        def dataflow(scope):
            pairs_in, pairs = scope.new_collection()
            return pairs_in, pairs.reduce(lambda key, vals: [(1 // (key - 3), 1)]).probe()

        pairs_in, probe = worker.dataflow(dataflow)
        for k in range(5):
            pairs_in.insert((k, "v"))
        pairs_in.advance_to(1)
        pairs_in.flush()
        worker.step_until(probe, 1, timeout=60)

    with pytest.raises(
        OperatorError,
        match=r"operator 'Reduce' on worker 0 raised "
        r"ZeroDivisionError: .* while processing key 3$",
    ):
        tp.execute(build)


def test_a_map_fused_into_a_count_names_the_update_apart():
    def build(worker):
        def dataflow(scope):
            nums_in, nums = scope.new_collection()
            return nums_in, nums.map(lambda x: 1 // x).count().probe()

        nums_in, probe = worker.dataflow(dataflow)
        nums_in.advance_to(3)
        for x in (2, 0, 1):
            nums_in.insert(x)
        nums_in.advance_to(4)
        nums_in.flush()
        worker.step_until(probe, 4, timeout=60)

    with pytest.raises(OperatorError) as info:
        tp.execute(build)
    err = info.value
    assert (err.operator, err.record, err.time, err.diff) == ("Linear[map]", 0, 3, 1)
    assert "while processing record 0 at time 3 with diff 1" in str(err)
