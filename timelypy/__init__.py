"""timelypy: Timely and Differential Dataflow for Python.

Write a dataflow once, change its inputs, and get the exact changes to its outputs, on one
process, on several local processes, or on a Ray cluster.

>>> import timelypy as tp
>>> def build(worker):
...     def dataflow(scope):
...         inp, stream = scope.new_input()
...         return inp, stream.map(lambda x: x * 2).capture()
...     inp, out = worker.dataflow(dataflow)
...     inp.send_batch([1, 2, 3])
...     inp.close()
...     worker.step_until_done()
...     return sorted(r for _, r in out.records())
>>> tp.execute(build)
[[2, 4, 6]]
"""

from . import datalog, errors, instrument, io, testing
from .dataflow import (
    Capability,
    CapabilitySet,
    Captured,
    Exchange,
    InputCapability,
    InputHandle,
    LoopHandle,
    Notificator,
    Pipeline,
    ProbeHandle,
    Scope,
    Stream,
)
from .dataflow.graph import (
    DataflowGraph,
    GraphvizNotFound,
    graph_of,
    render_png,
    to_dot,
    to_mermaid,
)
from .differential import (
    Arranged,
    CapturedCollection,
    Collection,
    InputSession,
    TraceAgent,
    TraceHandle,
    Variable,
    concatenate,
)
from .errors import (
    AuthenticationError,
    CheckpointError,
    CycleError,
    DataEncodingError,
    DatalogError,
    DiffTypeError,
    HandleKindError,
    InputClosedError,
    NotConvergedError,
    OperatorError,
    PendingTimeWarning,
    RecoveryError,
    ReduceOutputError,
    SchemaError,
    SessionCommandError,
    SessionInputError,
    StallError,
    TimelyError,
    TimeOrderError,
    UnhashableDataError,
    UnknownHandleError,
    WaitTimeoutError,
    WorkerDiedError,
    WorkerError,
    WorkerHungError,
)
from .hashing import stable_hash
from .io import FileInputError
from .order import (
    INT_ORDER,
    IntSummary,
    PathSummary,
    Product,
    ProductSummary,
    TimeOrder,
    less_equal,
    less_than,
)
from .progress import Antichain, ChangeBatch, MutableAntichain
from .recovery.session import Checkpoints
from .stats import Statistics, StatsSink
from .workers import (
    Backend,
    DataflowSession,
    Worker,
    backend_names,
    execute,
    open_session,
    register_backend,
)

__version__ = "0.1.0"

__import__("logging").getLogger(__name__).addHandler(__import__("logging").NullHandler())

__all__ = [
    "datalog",
    "errors",
    "instrument",
    "io",
    "testing",
    "FileInputError",
    "execute",
    "register_backend",
    "backend_names",
    "Backend",
    "open_session",
    "DataflowSession",
    "Checkpoints",
    "Worker",
    "Scope",
    "Stream",
    "Collection",
    "InputSession",
    "Arranged",
    "TraceAgent",
    "TraceHandle",
    "Variable",
    "CapturedCollection",
    "concatenate",
    "InputHandle",
    "ProbeHandle",
    "Captured",
    "Capability",
    "CapabilitySet",
    "InputCapability",
    "Notificator",
    "LoopHandle",
    "Pipeline",
    "Exchange",
    "Product",
    "PathSummary",
    "IntSummary",
    "ProductSummary",
    "TimeOrder",
    "INT_ORDER",
    "less_equal",
    "less_than",
    "Antichain",
    "MutableAntichain",
    "ChangeBatch",
    "stable_hash",
    # statistics and pictures of a dataflow (``timelypy.stats``, ``timelypy.dataflow.graph``)
    "Statistics",
    "StatsSink",
    "DataflowGraph",
    "graph_of",
    "to_dot",
    "to_mermaid",
    "render_png",
    "GraphvizNotFound",
    # error types, at the top level too (``except tp.WorkerError``); all in ``timelypy.errors``
    "TimelyError",
    "TimeOrderError",
    "InputClosedError",
    "OperatorError",
    "CycleError",
    "DatalogError",
    "WorkerError",
    "WorkerDiedError",
    "WorkerHungError",
    "NotConvergedError",
    "ReduceOutputError",
    "UnhashableDataError",
    "WaitTimeoutError",
    "PendingTimeWarning",
    "StallError",
    "AuthenticationError",
    "CheckpointError",
    "DataEncodingError",
    "DiffTypeError",
    "SchemaError",
    "SessionInputError",
    "SessionCommandError",
    "UnknownHandleError",
    "HandleKindError",
    "RecoveryError",
    "__version__",
]
