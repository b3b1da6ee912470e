"""The timely layer: scopes, streams, operators with capabilities, channels, probes and loops."""

from ..communication.wire import register_type
from ..progress.reachability import Location
from .capability import Capability, CapabilitySet, InputCapability
from .capture import Captured
from .channels import Exchange, Pipeline
from .feedback import LoopHandle
from .graph import DataflowGraph, graph_of, render_png, to_dot, to_mermaid
from .input import InputHandle
from .notificator import Notificator
from .probe import ProbeHandle
from .scope import Scope
from .stream import Stream

__all__ = [
    "Capability",
    "CapabilitySet",
    "InputCapability",
    "Captured",
    "Exchange",
    "Pipeline",
    "LoopHandle",
    "InputHandle",
    "Notificator",
    "ProbeHandle",
    "Scope",
    "Stream",
    "DataflowGraph",
    "graph_of",
    "to_dot",
    "to_mermaid",
    "render_png",
]

LOCATION_WIRE_CODE = 8
"""The msgpack extension code of progress's ``Location`` in progress messages between worker
processes. The transport knows no progress type: the timely layer, which joins the two, registers
it here, at the import of any of its modules (so in every worker process)."""
register_type(Location, LOCATION_WIRE_CODE, Location.to_bytes, Location.from_bytes, cache=True)
