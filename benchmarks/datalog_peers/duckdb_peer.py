"""DuckDB: the facts in tables, the program as one ``WITH RECURSIVE`` query, recomputed into a
table after every change (DuckDB has no incremental view maintenance for recursive queries).

Transitive closure and same generation are linear recursions: ``UNION`` (not ``UNION ALL``)
makes DuckDB keep only rows it has not seen, which is semi-naive evaluation. Andersen's
analysis is not linear (``pointsTo`` twice in a body): an SQL recursive CTE's self-reference
sees only the previous iteration's new rows, which misses a new row joined with an old one, so
that query uses DuckDB's ``USING KEY`` form, whose ``recurring.<cte>`` reads every row so far:
each non-linear rule is written twice (new x all, all x new).
"""

from __future__ import annotations

from typing import Any, Dict, List, Set, Tuple

from workloads import INPUTS, Workload

QUERIES = {
    "tc": """
WITH RECURSIVE path(x, y) AS (
    SELECT x, y FROM edge
    UNION
    SELECT path.x, edge.y FROM path JOIN edge ON path.y = edge.x
) SELECT x, y FROM path""",
    "sg": """
WITH RECURSIVE sg(x, y) AS (
    SELECT a.c, b.c FROM par a JOIN par b ON a.p = b.p
    UNION
    SELECT a.c, b.c FROM sg JOIN par a ON a.p = sg.x JOIN par b ON b.p = sg.y
) SELECT x, y FROM sg""",
    "andersen": """
WITH RECURSIVE pt(v, o) USING KEY (v, o) AS (
    SELECT p, a FROM addressOf
    UNION
    SELECT * FROM (
        SELECT s.p, n.o FROM assign s JOIN pt n ON s.q = n.v
        UNION ALL
        SELECT s.p, y.o FROM load s JOIN pt x ON s.q = x.v JOIN recurring.pt y ON x.o = y.v
        UNION ALL
        SELECT s.p, y.o FROM load s JOIN recurring.pt x ON s.q = x.v JOIN pt y ON x.o = y.v
        UNION ALL
        SELECT x.o, y.o FROM store s JOIN pt x ON s.p = x.v JOIN recurring.pt y ON s.q = y.v
        UNION ALL
        SELECT x.o, y.o FROM store s JOIN recurring.pt x ON s.p = x.v JOIN pt y ON s.q = y.v
    )
) SELECT v, o FROM pt""",
}
"""Each workload's query (the output relation's rows)."""


class DuckDBPeer:
    """One in-memory DuckDB database; ``threads`` in the options (0: DuckDB's default)."""

    def __init__(self, workload: Workload, options: Dict[str, Any]) -> None:
        import duckdb

        self.workload = workload
        self.db = duckdb.connect(":memory:")
        self.threads = int(options.get("threads", 0))
        if self.threads:
            self.db.execute(f"SET threads = {self.threads}")
        self.version = duckdb.__version__
        self.columns: Dict[str, Tuple[str, ...]] = dict(INPUTS[workload.name])
        for rel, cols in self.columns.items():
            self.db.execute(f"CREATE TABLE {rel} ({', '.join(c + ' BIGINT' for c in cols)})")
        self.recompute_sql = f"CREATE OR REPLACE TABLE result AS {QUERIES[workload.name]}"

    def describe(self) -> Dict[str, Any]:
        threads = self.db.execute("SELECT current_setting('threads')").fetchone()
        return {
            "version": self.version,
            "threads": int(threads[0]) if threads else None,
            "how": "WITH RECURSIVE recomputed into a table after every change",
        }

    def load(self, facts: Dict[str, List[Tuple[int, ...]]]) -> None:
        import pyarrow as pa

        for rel, rows in facts.items():
            if rows:
                # Bulk, through Arrow (``executemany`` goes row by row, 100x slower).
                cols = self.columns[rel]
                batch = pa.table({c: [r[i] for r in rows] for i, c in enumerate(cols)})
                self.db.register("load_batch", batch)
                self.db.execute(f"INSERT INTO {rel} SELECT * FROM load_batch")
                self.db.unregister("load_batch")
        self.db.execute(self.recompute_sql)

    def change(self, relation: str, fact: Tuple[int, ...], diff: int) -> None:
        cols = self.columns[relation]
        if diff > 0:
            self.db.execute(
                f"INSERT INTO {relation} VALUES ({', '.join('?' for _ in cols)})", list(fact)
            )
        else:
            where = " AND ".join(f"{c} = ?" for c in cols)
            self.db.execute(f"DELETE FROM {relation} WHERE {where}", list(fact))
        self.db.execute(self.recompute_sql)

    def output(self) -> Set[Tuple[int, ...]]:
        return set(self.db.execute("SELECT * FROM result").fetchall())

    def close(self) -> None:
        self.db.close()
