"""Every public export exists, is documented, and survives a cloudpickle round trip where it is
a callable users hand to workers."""

import cloudpickle

import timelypy


def test_every_export_exists_and_is_documented():
    for name in timelypy.__all__:
        obj = getattr(timelypy, name)
        if name.startswith("__") or name in ("errors", "instrument", "INT_ORDER"):
            continue
        assert getattr(obj, "__doc__", None), f"timelypy.{name} has no docstring"


def test_build_functions_survive_cloudpickle():
    def build(worker):
        def dataflow(scope):
            s, c = scope.new_collection()
            return s, c.map(lambda x: x + 1).count().capture()
        s, out = worker.dataflow(dataflow)
        s.insert(1)
        s.close()
        worker.step_until_done()
        return out.consolidated()

    clone = cloudpickle.loads(cloudpickle.dumps(build))
    assert timelypy.execute(clone) == timelypy.execute(build) == [[((2, 1), 0, 1)]]


def test_execute_rejects_bad_arguments():
    import pytest

    with pytest.raises(ValueError, match="workers"):
        timelypy.execute(lambda w: None, workers=0)
    with pytest.raises(ValueError, match="backend"):
        timelypy.execute(lambda w: None, backend="nope")
