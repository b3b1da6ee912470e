"""Checkpoints and restore on the ray backend: a checkpoint of ``processes`` restored onto Ray
actors (another number of them), and one the Ray actors wrote restored ``inline``.

Every actor writes its part of a checkpoint to the location from its own process and reads the
parts back there; the driver only publishes the manifest. The suite's local Ray
(``ray_session`` in ``tests/conftest.py``) serves these tests. The driver killed at a random
moment and restored, on Ray as on the other backends, is the kill family of
``test_session_checkpoint.py``.
"""

from __future__ import annotations

import pytest
from recovery.test_session_checkpoint import checkpoint_then_restore, reference  # noqa: F401 - a fixture

pytest.importorskip("ray", reason="Ray is not installed: pip install -e '.[ray]'")

pytestmark = [
    pytest.mark.ray,
    pytest.mark.timeout(300),
    pytest.mark.usefixtures("ray_session"),
]

RAY = {"backend": "ray", "timeout": 120, "num_cpus_per_worker": 0.25}


@pytest.mark.processes
def test_processes_checkpoint_restored_on_ray_with_more_workers(tmp_path, reference):  # noqa: F811
    checkpoint_then_restore(
        tmp_path, reference, {"workers": 2, "backend": "processes"}, {"workers": 3, **RAY}
    )


def test_ray_checkpoint_restored_inline_on_one_worker(tmp_path, reference):  # noqa: F811
    checkpoint_then_restore(tmp_path, reference, {"workers": 2, **RAY}, {"workers": 1})
