"""Declared schemas: ``scope.new_collection(schema=...)`` checks records as they are sent."""

from __future__ import annotations

import pytest

import timelypy as tp
from timelypy.differential.trace.layout import Layout


def _run(schema, records, bad=None):
    def build(worker):
        def dataflow(scope):
            session, pairs = scope.new_collection("pairs", schema=schema)
            arranged = pairs.arrange_by_key(name="Pairs")
            return session, arranged, arranged.as_collection().capture(), pairs.probe()

        session, arranged, captured, probe = worker.dataflow(dataflow)
        for record in records:
            session.insert(record)
        session.advance_to(1)
        session.flush()
        worker.step_until(probe, 1, timeout=60)
        error = None
        if bad is not None:
            session.insert(bad)
            try:
                session.advance_to(2)
                session.flush()
            except tp.SchemaError as exc:
                error = str(exc)
        return captured.at(0), arranged.spine.sealed_paths, error

    return tp.execute(build)[0]


def test_a_declared_schema_keeps_records_and_takes_the_column_path():
    records = [(i % 7, (i, float(i) / 2)) for i in range(1000)]
    contents, (objects, columns), error = _run((int, (int, float)), records)
    assert contents == {r: 1 for r in records}
    assert columns >= 1 and error is None


@pytest.mark.parametrize(
    "bad", [(1, (2, "x")), (1, (2, 3)), (1.5, (2, 0.5)), (True, (2, 0.5)), (1, 2), "x"]
)
def test_a_record_that_does_not_fit_is_refused_naming_the_input_record_and_schema(bad):
    records = [(i % 7, (i, 0.5)) for i in range(10)]
    _, _, error = _run((int, (int, float)), records, bad=bad)
    assert error is not None
    assert "'pairs'" in error and repr(bad) in error and "(int, (int, float))" in error


def test_an_undeclarable_schema_is_refused_when_the_input_is_made():
    def build(worker):
        def dataflow(scope):
            scope.new_collection("words", schema=(int, list))

        worker.dataflow(dataflow)

    with pytest.raises(Exception, match="list"):
        tp.execute(build)


def test_layouts_from_types_describe_themselves():
    assert Layout.from_types((int, (float, bool))).describe() == "(int, (float, bool))"
    assert Layout.from_types(int).describe() == "int"
    assert Layout.from_types((int,)).describe() == "(int,)"
    assert Layout.from_types((int, int)).first_misfit([(1, 2), (3, "x"), (4, 5)]) == 1
