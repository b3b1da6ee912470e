"""DatalogSession: set semantics of inputs, refused facts leave nothing applied, reads (contents,
changes, lookup by prefix), observed relations, files, the alias module, other backends, and
restore from a checkpoint."""

from __future__ import annotations

import pytest

import timelypy
from timelypy import datalog
from timelypy.errors import DatalogError

pytestmark = pytest.mark.timeout(300)

TC = """
.decl edge(x: number, y: number)
.input edge
.decl path(x: number, y: number)
path(x, y) :- edge(x, y).
path(x, z) :- path(x, y), edge(y, z).
.output path
"""

TYPED = """
.decl item(name: symbol, weight: float, copies: unsigned)
.input item
.decl heavy(name: symbol)
heavy(n) :- item(n, w, _), w > 2.5.
.output heavy
"""


def test_alias_module_and_export():
    import timelypy.datalog as alias

    assert alias.Program is datalog.Program is timelypy.datalog.Program
    assert "datalog" in timelypy.__all__
    assert alias.DatalogError is DatalogError


def test_program_properties():
    program = datalog.Program.from_text(TC)
    assert program.inputs == ["edge"] and program.outputs == ["path"]
    assert list(program.relations) == ["edge", "path"] and program.derived == ["path"]
    assert set(program.plans) == {"path"}


def test_nothing_visible_before_advance_and_set_semantics():
    with datalog.Program.from_text(TC).session() as s:
        assert s.time == 0
        assert s.insert_many("edge", [(1, 2), (1, 2), (2, 3)]) == 2
        assert s.contents("path") == set()
        s.advance()
        assert s.time == 1
        assert s.contents("path") == {(1, 2), (1, 3), (2, 3)}
        s.insert("edge", (1, 2))  # present: nothing
        s.remove("edge", (7, 7))  # absent: nothing
        assert s.remove_many("edge", [(2, 3), (2, 3)]) == 1
        s.advance()
        assert s.contents("path") == {(1, 2)}
        assert s.changes("path") == [
            ((1, 2), 0, 1),
            ((1, 3), 0, 1),
            ((2, 3), 0, 1),
            ((1, 3), 1, -1),
            ((2, 3), 1, -1),
        ]
        assert s.changes("path") == []
        s.insert("edge", (2, 3))
        s.remove("edge", (2, 3))  # in the same time: cancels
        s.advance()
        assert s.changes("path") == [] and s.facts("edge") == {(1, 2)}


def test_lookup_by_prefix():
    with datalog.Program.from_text(TC).session(workers=2) as s:
        assert s.lookup("path", 1) == []
        s.insert_many("edge", [(1, 2), (2, 3), (3, 4), (5, 1)])
        s.advance()
        assert s.lookup("path", 1) == [(1, 2), (1, 3), (1, 4)]
        assert s.lookup("path", 1, 3) == [(1, 3)]
        assert s.lookup("path", 9) == []
        assert s.lookup("path") == sorted(s.contents("path"))
        with pytest.raises(DatalogError, match="prefix of 3 fields"):
            s.lookup("path", 1, 2, 3)
        with pytest.raises(DatalogError, match=r"field 1 \(x\) expects a number"):
            s.lookup("path", "one")


def test_a_bad_fact_is_refused_with_nothing_applied():
    with datalog.Program.from_text(TYPED).session() as s:
        with pytest.raises(DatalogError) as info:
            s.insert_many("item", [("a", 3.0, 1), ("b", 1.0, -2)])
        assert info.value.relation == "item"
        assert "field 3 (copies)" in str(info.value) and "-2" in str(info.value)
        with pytest.raises(DatalogError, match=r"field 2 \(weight\) expects a float"):
            s.insert("item", ("c", "heavy", 1))
        with pytest.raises(DatalogError, match="3 fields"):
            s.insert("item", ("c", 1.0))
        s.advance()
        assert s.contents("heavy") == set() and s.facts("item") == set()
        s.insert("item", ("a", 3, 1))  # an int for a float field becomes a float
        s.advance()
        assert s.contents("heavy") == {("a",)} and s.facts("item") == {("a", 3.0, 1)}


def test_errors_name_the_relation():
    with datalog.Program.from_text(TC).session() as s:
        with pytest.raises(DatalogError, match="path is derived by rules"):
            s.insert("path", (1, 2))
        with pytest.raises(DatalogError, match="unknown relation 'edges'.*edge"):
            s.insert("edges", (1, 2))
        with pytest.raises(DatalogError, match=r"\+1 \(insert\) or -1"):
            s.update_many([("edge", (1, 2), 2)])
        with pytest.raises(DatalogError, match="'edge' is not observed"):
            s.contents("edge")


def test_observe_chooses_the_relations():
    text = TC.replace(".output path", "")  # no outputs: every derived relation is shown
    program = datalog.Program.from_text(text)
    assert program.observable() == ["path"]
    with pytest.raises(DatalogError, match="cannot observe 'edge': it is an input"):
        program.observable(["edge"])
    with pytest.raises(DatalogError, match="not declared"):
        program.observable(["nope"])


def test_dataflow_with_open_session_directly():
    program = datalog.Program.from_text(TC)
    names = datalog.handle_names("path")
    with timelypy.open_session(program.dataflow()) as s:
        s.insert(datalog.handle_names("edge")["input"], (1, 2))
        s.advance_to(1)
        s.wait("probe")
        assert s.changes(names["capture"]) == [((1, 2), 0, 1)]
        assert s.lookup(names["by_first"], 1) == {(1, 2): 1}


def test_from_file_names_the_file(tmp_path):
    path = tmp_path / "bad.dl"
    path.write_text(".decl edge(x: number)\nedge(1, 2).\n")
    with pytest.raises(DatalogError) as info:
        datalog.Program.from_file(path)
    assert str(info.value).startswith(str(path) + ":2:")
    with pytest.raises(DatalogError, match="cannot read"):
        datalog.Program.from_file(tmp_path / "missing.dl")


def test_load_facts_and_delta(tmp_path):
    (tmp_path / "edge.facts").write_text("1\t2\n2\t3\n\n")
    with datalog.Program.from_text(TC).session() as s:
        assert s.load_facts(tmp_path) == {"edge": 2}
        s.advance()
        assert s.contents("path") == {(1, 2), (1, 3), (2, 3)}
        (tmp_path / "edge.delta").write_text("-\t2\t3\n+\t3\t4\n")
        assert s.load_delta(tmp_path / "edge.delta", "edge") == 2
        s.advance()
        assert s.contents("path") == {(1, 2), (3, 4)}
        (tmp_path / "edge.facts").write_text("1\t2\nx\t3\n")
        with pytest.raises(DatalogError) as info:
            s.load_facts(tmp_path)
        assert info.value.line == 2 and "edge.facts" in str(info.value)
        assert s.facts("edge") == {(1, 2), (3, 4)}
    with datalog.Program.from_text(TC).session() as s:  # no file: no facts
        (tmp_path / "empty").mkdir()
        assert s.load_facts(tmp_path / "empty") == {}
        with pytest.raises(DatalogError, match="no facts directory"):
            s.load_facts(tmp_path / "nowhere")


@pytest.mark.processes
def test_processes_backend():
    with datalog.Program.from_text(TC).session(2, "processes", timeout=120) as s:
        s.insert_many("edge", [(1, 2), (2, 3)])
        s.advance()
        assert s.contents("path") == {(1, 2), (1, 3), (2, 3)}
        assert s.lookup("path", 2) == [(2, 3)]
        s.remove("edge", (1, 2))
        s.advance()
        assert s.changes("path")[-2:] == [((1, 2), 1, -1), ((1, 3), 1, -1)]


def test_checkpoint_and_restore_on_other_workers(tmp_path):
    program = datalog.Program.from_text(TC)
    every = timelypy.Checkpoints(str(tmp_path / "ck"))
    with program.session(2, checkpoint=every) as s:
        s.insert_many("edge", [(1, 2), (2, 3)])
        s.advance()
        s.checkpoint()
    with program.session(3, restore=str(tmp_path / "ck")) as s:
        assert s.time == 1
        assert s.contents("path") == {(1, 2), (1, 3), (2, 3)}
        assert s.facts("edge") == {(1, 2), (2, 3)}
        assert s.changes("path") == []
        s.remove("edge", (2, 3))
        s.insert("edge", (1, 2))  # present after the restore: nothing
        s.advance()
        assert s.contents("path") == {(1, 2)}
        assert s.lookup("path", 1) == [(1, 2)]


REACH_FROM_FACT = """
.decl edge(x: number, y: number)
.input edge
.decl source(x: number)
source(0).
.decl reach(x: number)
reach(x) :- source(x).
reach(y) :- reach(x), edge(x, y).
.output reach
"""


def test_program_facts_survive_a_restore_once(tmp_path):
    """The program's own facts (``source(0).``) are part of the checkpointed state: a restored
    session neither loses them nor counts them twice."""
    program = datalog.Program.from_text(REACH_FROM_FACT)
    with program.session(2, checkpoint=timelypy.Checkpoints(str(tmp_path / "ck"))) as s:
        s.insert_many("edge", [(0, 1), (1, 2)])
        s.advance()
        s.checkpoint()
    with program.session(1, restore=str(tmp_path / "ck")) as s:
        assert s.contents("reach") == {(0,), (1,), (2,)}
        s.remove("edge", (0, 1))
        s.advance()
        assert s.contents("reach") == {(0,)}  # source(0) still there, exactly once
        s.insert("edge", (0, 2))
        s.advance()
        assert s.contents("reach") == {(0,), (2,)}
