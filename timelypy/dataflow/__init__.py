"""The timely layer: scopes, streams, operators with capabilities, channels, probes and loops."""

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
