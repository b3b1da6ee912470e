"""Pictures of dataflows: the graph model, DOT and Mermaid text, PNG, `timelypy graph --stats`."""

from __future__ import annotations

import re
import shutil
import textwrap

import pytest
from typer.testing import CliRunner

import timelypy as tp
from timelypy.cli import app
from timelypy.dataflow import graph as graph_module
from timelypy.dataflow.graph import GraphvizNotFound, graph_of, render_png, to_dot, to_mermaid

pytestmark = pytest.mark.timeout(120)


def timely_loop(worker):
    """input -> map -> [iterative scope: concat(enter, feedback) -> filter>map -> feedback;
    concat -> exchange -> leave] -> probe."""

    def dataflow(scope):
        handle, stream = scope.new_input(name="numbers")
        doubled = stream.map(lambda x: 2 * x, name="double")

        def loop(child):
            feedback, cycle = child.feedback(max_iterations=200)
            head = doubled.enter(child).concat(cycle, name="head")
            head.filter(lambda x: x < 100).map(lambda x: x + 1).connect_loop(feedback)
            return head.exchange(lambda x: x, name="spread").leave()

        scope.iterative(loop, name="loop").probe()
        return scope

    return worker.dataflow(dataflow)


def map_join_iterate(worker):
    """The differential shape: map + join, and an iterate (reachability by distinct)."""

    def dataflow(scope):
        edges_in, edges = scope.new_collection(name="edges")
        edges.map(lambda e: (e[1], e[0])).join(edges).probe()
        roots_in, roots = scope.new_collection(name="roots")
        roots.iterate(
            lambda r: (
                r.map(lambda n: (n, ()))
                .join(edges.enter(r.scope))
                .map(lambda kv: kv[1][1])
                .concat(r)
                .distinct()
            )
        ).probe()
        return scope

    return worker.dataflow(dataflow)


def test_model_of_a_timely_loop_has_exactly_its_operators_edges_and_cluster():
    (scope,) = tp.execute(timely_loop)
    g = graph_of(scope)
    names = {n.id: (n.name, n.kind) for n in g.nodes.values()}
    assert names == {
        "d0_1": ("numbers", "operator"),
        "d0_3": ("double", "operator"),
        "d0_4": ("Probe", "operator"),
        "d0_2_in0": ("enter 0", "scope-input"),
        "d0_2_out0": ("leave 0", "scope-output"),
        "d0_2_1": ("Feedback", "feedback"),
        "d0_2_2": ("head", "operator"),
        "d0_2_3": ("Linear[filter>map]", "operator"),
        "d0_2_4": ("spread", "operator"),
    }
    edges = {(e.source, e.target, e.pact, e.loop) for e in g.edges}
    assert edges == {
        ("d0_1", "d0_3", "Pipeline", False),
        ("d0_3", "d0_2_in0", "Pipeline", False),
        ("d0_2_in0", "d0_2_2", "Pipeline", False),
        ("d0_2_1", "d0_2_2", "Pipeline", True),
        ("d0_2_2", "d0_2_3", "Pipeline", False),
        ("d0_2_3", "d0_2_1", "Pipeline", False),
        ("d0_2_2", "d0_2_4", "Exchange", False),
        ("d0_2_4", "d0_2_out0", "Pipeline", False),
        ("d0_2_out0", "d0_4", "Pipeline", False),
    }
    assert len(g.edges) == len(edges)
    (top,) = g.clusters
    assert (top.name, top.nodes) == ("dataflow1", ["d0_1", "d0_3", "d0_4"])
    (inner,) = top.clusters
    assert inner.name == "loop" and set(inner.nodes) == {
        "d0_2_in0",
        "d0_2_out0",
        "d0_2_1",
        "d0_2_2",
        "d0_2_3",
        "d0_2_4",
    }


def _dot_edges(text):
    return set(re.findall(r'^  "(\w+)" -> "(\w+)"(.*);$', text, re.M))


def test_dot_and_mermaid_of_map_join_iterate():
    (scope,) = tp.execute(map_join_iterate)
    g = graph_of(scope)
    dot, mermaid = to_dot(scope), to_mermaid(scope)
    # Every node and edge of the model, once, in both texts.
    for node in g.nodes.values():
        assert len(re.findall(rf'^\s+"{node.id}" \[label=', dot, re.M)) == 1
        assert len(re.findall(rf"^\s+{node.id}[\[(]", mermaid, re.M)) == 1
    dot_edges = _dot_edges(dot)
    assert len(dot_edges) == len({(e.source, e.target, e.pact, e.loop) for e in g.edges})
    for e in g.edges:
        (attrs,) = [a for s, t, a in dot_edges if (s, t) == (e.source, e.target)] or [None]
        assert attrs is not None
        assert ('label="Exchange"' in attrs) == (e.pact == "Exchange")
        assert ("style=dashed" in attrs) == e.loop
        arrow = "-.->|loop|" if e.loop else "==>|Exchange|" if e.pact == "Exchange" else "-->"
        assert f"  {e.source} {arrow} {e.target}" in mermaid.splitlines()
    # The shape: the join's two inputs are arranged behind exchanges, the join reads them
    # through pipelines; the iterate is a cluster with a loop edge inside.
    (join,) = [n for n in g.operators() if n.name == "Join" and n.scope == "dataflow1"]
    into_join = [e for e in g.edges if e.target == join.id]
    assert len(into_join) == 2 and {e.pact for e in into_join} == {"Pipeline"}
    for e in into_join:
        assert g.nodes[e.source].name.startswith("Arrange")
        assert {x.pact for x in g.edges if x.target == e.source} == {"Exchange"}
    (iterate,) = g.clusters[0].clusters
    assert iterate.name == "Iterate"
    assert f'subgraph "cluster_{iterate.id}" {{' in dot
    assert f"subgraph {iterate.id}[" in mermaid
    loops = [e for e in g.edges if e.loop]
    assert len(loops) == 1 and loops[0].source.startswith(iterate.id + "_")
    assert dot.startswith("digraph timelypy {") and dot.rstrip().endswith("}")
    assert mermaid.startswith("flowchart TB\n")


def test_annotations_reach_the_operators():
    (scope,) = tp.execute(timely_loop)
    dot = to_dot(scope, {("dataflow1", 3): "in 7 / out 7", ("loop", 4): 'hello "there"'})
    assert '"d0_3" [label="[3] double\\nin 7 / out 7"' in dot
    assert '[4] spread\\nhello \\"there\\"' in dot
    mermaid = to_mermaid(scope, {("loop", 4): 'a "b"'})
    assert 'd0_2_4["[4] spread<br/>a #quot;b#quot;"]' in mermaid


@pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz's dot is not installed")
def test_png_bytes():
    (scope,) = tp.execute(map_join_iterate)
    assert render_png(scope).startswith(b"\x89PNG\r\n\x1a\n")


def test_missing_graphviz_is_named(monkeypatch):
    monkeypatch.setattr(graph_module.shutil, "which", lambda name: None)
    (scope,) = tp.execute(timely_loop)
    with pytest.raises(GraphvizNotFound, match="graphviz"):
        render_png(scope)


PROGRAM = textwrap.dedent("""
    import timelypy as tp

    def build(worker):
        def dataflow(scope):
            numbers_in, numbers = scope.new_collection(name="numbers")
            evens = numbers.filter(lambda x: x % 2 == 0)
            return numbers_in, evens.probe()
        numbers_in, probe = worker.dataflow(dataflow)
        for x in range({count}):
            numbers_in.insert(x)

    if __name__ == "__main__":
        tp.execute(build)
        print("program done")
""")


def test_graph_command_with_stats_shows_the_records_fed(tmp_path):
    program = tmp_path / "evens.py"
    program.write_text(PROGRAM.format(count=17))
    result = CliRunner().invoke(app, ["graph", str(program), "--format", "dot", "--stats"])
    assert result.exit_code == 0, result.output
    labels = dict(re.findall(r'"(d0_\d+)" \[label="([^"]*)"', result.stdout))
    by_name = {label.split("\\n")[0]: label.split("\\n")[1] for label in labels.values()}
    assert by_name["[1] numbers"].startswith("in 0 / out 17,")
    assert by_name["[2] Linear[filter]"].startswith("in 17 / out 9,")
    assert by_name["[3] Probe"].startswith("in 9 / out 0,")
    assert "program done" not in result.stdout  # the program's output goes to stderr


def test_graph_command_mermaid_and_png(tmp_path):
    program = tmp_path / "evens.py"
    program.write_text(PROGRAM.format(count=3))
    result = CliRunner().invoke(app, ["graph", str(program), "-f", "mermaid"])
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("flowchart TB")
    assert 'd0_2["[2] Linear[filter]"]' in result.stdout
    if shutil.which("dot"):
        out = tmp_path / "evens.png"
        result = CliRunner().invoke(app, ["graph", str(program), "-f", "png", "-o", str(out)])
        assert result.exit_code == 0, result.output
        assert out.read_bytes().startswith(b"\x89PNG")


def test_graph_command_explains_a_program_that_builds_nothing_here(tmp_path):
    program = tmp_path / "nothing.py"
    program.write_text("print('no dataflow')\n")
    result = CliRunner().invoke(app, ["graph", str(program)])
    assert result.exit_code == 1
    assert "built no dataflow" in result.output


def test_statistics_table_and_graph_name_every_operator_alike():
    """Fused chains, joins, a count fused behind a map, a reduce and a loop: the statistics
    (rows and the rendered table) and the graph model give each operator the same name, so
    ``Linear[map>filter]`` in a picture is ``Linear[map>filter]`` in the table."""
    from timelypy.stats import Statistics, StatsSink

    def build(worker):
        sink = worker.instruments.add(StatsSink(worker.index))

        def dataflow(scope):
            edges_in, edges = scope.new_collection(name="edges")
            roots_in, roots = scope.new_collection(name="roots")
            flipped = edges.map(lambda e: (e[1], e[0])).filter(lambda e: e[0] != e[1])
            probes = [
                flipped.join(edges).map(lambda kv: kv[0]).count().probe(),
                edges.reduce(lambda key, vals: [(len(vals), 1)]).probe(),
                roots.iterate(
                    lambda r: (
                        r.map(lambda n: (n, ()))
                        .join(edges.enter(r.scope))
                        .map(lambda kv: kv[1][1])
                        .concat(r)
                        .distinct()
                    )
                ).probe(),
            ]
            return scope, edges_in, roots_in, probes

        scope, edges_in, roots_in, probes = worker.dataflow(dataflow)
        for n in range(5):
            edges_in.insert((n, n + 1))
        roots_in.insert(0)
        for handle in (edges_in, roots_in):
            handle.advance_to(1)
            handle.flush()
        for probe in probes:
            worker.step_until(probe, 1, timeout=30)
        return scope, sink.snapshot()

    ((scope, snapshot),) = tp.execute(build)
    stats = Statistics([snapshot])
    g = graph_of(scope)
    by_key = {(op["scope"], op["operator"]): op["name"] for op in stats.operators()}
    drawn = {(n.scope, n.index): n.name for n in g.operators()}
    drawn.update(
        {
            (parent.name, child.index): child.name
            for parent in g.clusters
            for child in parent.clusters
        }
    )
    assert {
        "Linear[map>filter]",
        "Linear[map]>CountTotal",
        "Join",
        "Reduce",
        "Iterate",
        "Linear[map]",
        "Distinct",
    } <= set(drawn.values())
    # every operator that ran is drawn, under the same (scope, index) and the same name
    assert {k: by_key[k] for k in drawn if k in by_key} == {k: drawn[k] for k in by_key}
    table = stats.render(width=400)
    dot = to_dot(scope)
    for name in set(drawn.values()):
        assert f" {name} " in table, name
        assert name in dot, name
