"""Soufflé's files: ``.facts`` read per column type, ``.delta`` changes, ``.csv`` written sorted,
and errors naming the file, the line, the relation, the field and the value."""

from __future__ import annotations

import pytest

from timelypy.datalog import Program, read_delta, read_facts, write_csv
from timelypy.errors import DatalogError
from timelypy.frontends.datalog.facts import format_fact, parse_facts

TEXT = """
.decl r(s: symbol, n: number, u: unsigned, f: float)
.input r
.decl z()
.input z
"""
PROGRAM = Program.from_text(TEXT)
R = PROGRAM.relations["r"]
Z = PROGRAM.relations["z"]


def test_fields_by_type(tmp_path):
    path = tmp_path / "r.facts"
    path.write_text("a b\t-3\t7\t2.5\r\n\n  \nx\t0x10\t0\t1e3\n\t1\t2\t3\n")
    assert read_facts(path, R) == [("a b", -3, 7, 2.5), ("x", 16, 0, 1000.0), ("", 1, 2, 3.0)]


def test_a_relation_of_no_fields():
    assert parse_facts("()\n", Z) == [()]
    assert format_fact(()) == "()"


@pytest.mark.parametrize(
    "line, field, message",
    [
        ("a\tx\t1\t1.0", "field 2 (n)", "expects a number, got 'x'"),
        ("a\t1\t-1\t1.0", "field 3 (u)", "expects an unsigned, got '-1'"),
        ("a\t1\t1\tnope", "field 4 (f)", "expects a float, got 'nope'"),
    ],
)
def test_bad_field(tmp_path, line, field, message):
    path = tmp_path / "r.facts"
    path.write_text("a\t1\t1\t1.0\n" + line + "\n")
    with pytest.raises(DatalogError) as info:
        read_facts(path, R)
    error = info.value
    assert (error.line, error.relation, error.source) == (2, "r", str(path))
    assert field in str(error) and message in str(error)


def test_wrong_number_of_fields(tmp_path):
    path = tmp_path / "r.facts"
    path.write_text("a\t1\t1\n")
    with pytest.raises(DatalogError, match="4 tab-separated fields.*got 3"):
        read_facts(path, R)


def test_delta(tmp_path):
    path = tmp_path / "r.delta"
    path.write_text("+\ta\t1\t2\t3\n-\tb\t1\t2\t3.5\n")
    assert read_delta(path, R) == [(("a", 1, 2, 3.0), 1), (("b", 1, 2, 3.5), -1)]
    path.write_text("+\ta\t1\t2\t3\n*\tb\t1\t2\t3.5\n")
    with pytest.raises(DatalogError, match="starts with '\\+' or '-'") as info:
        read_delta(path, R)
    assert info.value.line == 2


def test_unreadable_file(tmp_path):
    path = tmp_path / "r.facts"
    path.write_bytes(b"\xff\xfe\n")
    with pytest.raises(DatalogError, match="not UTF-8"):
        read_facts(path, R)


def test_csv_sorted_numerically_and_atomic(tmp_path):
    path = tmp_path / "out.csv"
    assert write_csv(path, {(10, "b"), (9, "a"), (10, "a")}) == 3
    assert path.read_text() == "9\ta\n10\ta\n10\tb\n"
    assert write_csv(path, []) == 0 and path.read_text() == ""
    assert [p.name for p in tmp_path.iterdir()] == ["out.csv"]
    write_csv(path, {(1.5,), (0.25,)})
    assert path.read_text() == "0.25\n1.5\n"
