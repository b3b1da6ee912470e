"""Communication below the dataflow layer: the fabric protocol, message kinds and transports.

As timely's communication crate sits below timely: the dataflow layer sees only a
:class:`Fabric`; the inline transport (one process) and the authenticated socket mesh (processes,
Ray actors) implement it, and :mod:`.wire` is the codec of the mesh.
"""

from .fabric import CONTROL, DATA, PROGRESS, Fabric, control_message, data_message, progress_message
from .inline import InlineEndpoint, InlineFabric

__all__ = [
    "Fabric",
    "DATA",
    "PROGRESS",
    "CONTROL",
    "data_message",
    "progress_message",
    "control_message",
    "InlineFabric",
    "InlineEndpoint",
]
