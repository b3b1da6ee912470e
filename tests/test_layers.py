"""The shape of the house: layers import only downwards, no cycles, no reaching into privates.

The layers, top (most basic) to bottom (docs/architecture.md):

    order / progress  ->  communication  ->  dataflow  ->  differential  ->  launch (workers)
                                                                         ->  connectors
                                                                         ->  io, testing

``errors``, ``instrument``, ``kernels`` (how another kernel implementation drops in), ``stats`` (statistics from instrument events) and ``hashing`` are leaf
modules every layer may use. Each layer may
import only the layers before it. The one deliberate exception: ``dataflow/scope.py`` imports
``differential.input`` inside ``Scope.new_collection`` (as differential dataflow's ``Input`` trait
extends a timely scope).
"""

from __future__ import annotations

import ast
import pathlib
from typing import Dict, Iterator, List, Set, Tuple

import pytest

PACKAGE = pathlib.Path(__file__).resolve().parent.parent / "timelypy"

LEAVES = {
    "timelypy.errors",
    "timelypy.instrument",
    "timelypy.hashing",
    "timelypy.kernels",
    "timelypy.order",
    "timelypy.stats",
}
ORDER = [
    "progress",
    "communication",
    "dataflow",
    "differential",
    "workers",
    "connectors",
    "io",
    "testing",
    "cli",
]
ALLOWED_UPWARD = {("timelypy.dataflow.scope", "timelypy.differential.input")}


def _modules() -> Dict[str, pathlib.Path]:
    out = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


MODULES = _modules()


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _walk_runtime(tree: ast.AST) -> Iterator[ast.AST]:
    """Every node, except those under ``if TYPE_CHECKING:``."""
    stack = [tree]
    while stack:
        node = stack.pop()
        yield node
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _is_type_checking(child):
                stack.extend(child.orelse)
                continue
            stack.append(child)


def _resolve(module: str, is_package: bool, node: ast.ImportFrom) -> List[str]:
    if node.level == 0:
        base = node.module or ""
    else:
        parts = module.split(".")
        if not is_package:
            parts = parts[:-1]
        parts = parts[: len(parts) - (node.level - 1)]
        base = ".".join(parts + ([node.module] if node.module else []))
    targets = []
    for alias in node.names:
        candidate = f"{base}.{alias.name}"
        targets.append(candidate if candidate in MODULES else base)
    return targets


def _imports(module: str) -> Set[str]:
    path = MODULES[module]
    tree = ast.parse(path.read_text())
    found: Set[str] = set()
    for node in _walk_runtime(tree):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            found.update(_resolve(module, path.name == "__init__.py", node))
    return {m for m in found if m.startswith("timelypy") and m in MODULES and m != module}


GRAPH = {m: _imports(m) for m in MODULES}


def _layer(module: str) -> str:
    if module in LEAVES or module == "timelypy":
        return module
    if module == "timelypy.__main__":  # ``python -m timelypy``: the command line
        return "cli"
    return module.split(".")[1]


def test_layers_import_only_downwards():
    bad = []
    for m, targets in GRAPH.items():
        lm = _layer(m)
        if lm == "timelypy" or lm in LEAVES and m != "timelypy.hashing":
            continue
        for t in targets:
            lt = _layer(t)
            if (m, t) in ALLOWED_UPWARD or lt in LEAVES:
                continue
            if lm in LEAVES:  # hashing may use errors only
                bad.append((m, t))
            elif lt == "timelypy" or ORDER.index(lt) > ORDER.index(lm):
                bad.append((m, t))
    assert not bad, "imports against the layers: " + ", ".join(f"{a} -> {b}" for a, b in bad)


def test_leaf_modules_import_only_leaves():
    for leaf in LEAVES:
        assert GRAPH[leaf] <= LEAVES, (leaf, GRAPH[leaf] - LEAVES)
    assert GRAPH["timelypy.instrument"] == set()
    assert GRAPH["timelypy.stats"] == {"timelypy.instrument"}


def test_specific_rules_of_the_architecture():
    def reaches(m: str, layer: str) -> List[str]:
        return [t for t in GRAPH[m] if _layer(t) == layer and (m, t) not in ALLOWED_UPWARD]

    for m in GRAPH:
        lm = _layer(m)
        if lm == "progress":
            for layer in ("dataflow", "workers", "differential", "communication"):
                assert not reaches(m, layer), (m, layer)
        if lm == "dataflow":
            assert not reaches(m, "workers"), m
            assert not reaches(m, "differential"), m
        if lm != "connectors" and m != "timelypy":
            assert not reaches(m, "connectors"), m
        if lm in ("io", "testing"):  # beside the connectors: workers and differential, no more
            for layer in ("connectors", "cli"):
                assert not reaches(m, layer), (m, layer)
        if lm not in ("io", "testing", "cli") and m != "timelypy":
            assert not reaches(m, "io") and not reaches(m, "testing"), m


def _cycles_within(package: str) -> List[Tuple[str, ...]]:
    nodes = [m for m in GRAPH if m.startswith(package + ".")]
    edges = {
        m: [t for t in GRAPH[m] if t.startswith(package + ".") and t != package] for m in nodes
    }
    index: Dict[str, int] = {}
    low: Dict[str, int] = {}
    stack: List[str] = []
    on_stack: Set[str] = set()
    cycles: List[Tuple[str, ...]] = []
    counter = [0]

    def strongconnect(v: str) -> None:  # Tarjan's algorithm
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                strongconnect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                cycles.append(tuple(sorted(component)))

    for v in nodes:
        if v not in index:
            strongconnect(v)
    return cycles


@pytest.mark.parametrize(
    "package", sorted({".".join(m.split(".")[:2]) for m in MODULES if m.count(".") >= 2})
)
def test_no_import_cycle_inside_a_package(package):
    assert _cycles_within(package) == []


def _owned_privates(package: str) -> Set[str]:
    """Underscore names a package defines: functions, classes, attributes it assigns on self,
    class attributes and slots."""
    names: Set[str] = set()
    for m, path in MODULES.items():
        if _layer(m) != package and m != package:
            continue
        for n in ast.walk(ast.parse(path.read_text())):
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names.add(n.name)
            elif (
                isinstance(n, ast.Attribute)
                and isinstance(n.ctx, ast.Store)
                and isinstance(n.value, ast.Name)
                and n.value.id in ("self", "cls")
            ):
                names.add(n.attr)
            elif isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
                names.add(n.id)
            elif isinstance(n, ast.Constant) and isinstance(n.value, str):
                names.add(n.value)  # __slots__ entries
    return {x for x in names if x.startswith("_")}


EXTERNAL_PRIVATES = {
    "_exit",  # os._exit: leave a forked worker process without running the parent's handlers
    "_jsc",  # pyspark's Java SparkContext: the executors registered have no Python API
    "_spark_context_lock",  # RayDP's lock: is this thread inside raydp.stop_spark()?
}


def test_no_layer_reads_or_writes_another_layers_privates():
    owned = {layer: _owned_privates(layer) for layer in {_layer(m) for m in MODULES}}
    bad = []
    for m, path in MODULES.items():
        mine = owned[_layer(m)]
        for n in ast.walk(ast.parse(path.read_text())):
            if not (
                isinstance(n, ast.Attribute)
                and n.attr.startswith("_")
                and not n.attr.startswith("__")
            ):
                continue
            if isinstance(n.value, ast.Name) and n.value.id in ("self", "cls"):
                continue
            if n.attr in mine or n.attr in EXTERNAL_PRIVATES:
                continue
            bad.append(f"{path.relative_to(PACKAGE.parent)}:{n.lineno}: {ast.unparse(n)}")
    assert not bad, "private attributes of another layer: " + "; ".join(bad)


def test_no_dispatch_on_class_names():
    offenders = []
    for m, path in MODULES.items():
        for n in ast.walk(ast.parse(path.read_text())):
            if (
                isinstance(n, ast.Attribute)
                and n.attr == "__name__"
                and isinstance(n.value, ast.Call)
                and getattr(n.value.func, "id", "") == "type"
            ):
                parent_compare = False
                for c in ast.walk(ast.parse(path.read_text())):
                    if isinstance(c, ast.Compare) and any(x is n for x in ast.walk(c)):
                        parent_compare = True
                if parent_compare:
                    offenders.append(f"{m}:{n.lineno}")
    assert not offenders, offenders


def test_every_module_opens_with_a_one_line_purpose():
    missing = []
    for m, path in MODULES.items():
        doc = ast.get_docstring(ast.parse(path.read_text()))
        if not doc or not doc.splitlines()[0].strip().endswith((".", ":")):
            missing.append(m)
    assert not missing, missing


def test_no_text_cites_documents_outside_the_repository():
    words = (
        "seed 00",
        "engine-brief",
        "house-review",
        "contract 6",
        "../shared",
        "ARCHITECTURE.md",
    )
    hits = []
    for path in list(PACKAGE.rglob("*.py")):
        text = path.read_text()
        hits += [f"{path.name}: {w}" for w in words if w in text]
    assert not hits, hits


MODULE_LINES = 630  # "about 600": a module past it is asking to be split
FUNCTION_LINES = 65  # "about 60"
# Modules and functions allowed past the caps, each with its reason. The answer to a module over
# the cap is to split it by meaning or to record here why it stays, never to move code to wherever
# there is room. (Entries marked "#21" are being split in that branches.)
ALLOWED_LARGE: Dict[str, str] = {
    "timelypy.differential.reduce": "#21: becomes the differential/reduce/ package",
    "timelypy.differential.reduce_product": "#21: becomes the differential/reduce/ package",
    "timelypy.differential.reduce._evaluate_distinct": "#21: split with the reduce package",
    "timelypy.differential.collection": "#21: to be reviewed after ruff format",
    "timelypy.connectors.spark_ray": "#21: becomes the connectors/spark/ package",
    "timelypy.connectors.spark_ray.spark_on_ray": "#21: becomes the connectors/spark/ package",
    "timelypy.workers.session": "#21: the sessions wing of workers/",
    "timelypy.io.formats": "#21: one module per file format",
    "timelypy.progress.reachability._propagate_total": "#21: the progress kernel",
}


def test_modules_and_functions_stay_small():
    big_modules = [
        f"{m} ({n})"
        for m, path in MODULES.items()
        if (n := len(path.read_text().splitlines())) > MODULE_LINES and m not in ALLOWED_LARGE
    ]
    big_functions = []
    for m, path in MODULES.items():
        for n in ast.walk(ast.parse(path.read_text())):
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)):
                length = n.end_lineno - n.lineno + 1
                first = n.body[0]
                if (
                    isinstance(first, ast.Expr)
                    and isinstance(first.value, ast.Constant)
                    and isinstance(first.value.value, str)
                ):
                    length -= first.end_lineno - first.lineno + 1  # the docstring is not code
                if length > FUNCTION_LINES and f"{m}.{n.name}" not in ALLOWED_LARGE:
                    big_functions.append(f"{m}.{n.name} ({length})")
    assert not big_modules and not big_functions, (big_modules, big_functions)


def test_the_seams_are_implemented():
    """The Fabric protocol by every transport, AsWorker by the Worker, the input protocol by
    both kinds of input."""
    from timelypy.communication.fabric import Fabric
    from timelypy.communication.inline import InlineFabric
    from timelypy.communication.mesh import MeshFabric
    from timelypy.dataflow.worker_interface import AsWorker, InputSource
    from timelypy.workers.worker import Worker

    assert isinstance(InlineFabric(2).endpoint(1), Fabric)
    assert {"send", "broadcast", "recv_nowait", "flush", "wait"} <= set(dir(MeshFabric))
    worker = Worker(0, 1)
    assert isinstance(worker, AsWorker)

    def dataflow(scope):
        handle, _ = scope.new_input()
        session, _ = scope.new_collection()
        return handle, session

    handle, session = worker.dataflow(dataflow)
    assert isinstance(handle, InputSource) and isinstance(session, InputSource)
