"""Ray's side of Spark on Ray: bounded waits on Ray, views as Arrow tables and Ray Datasets.

What it defines, :mod:`timelypy.connectors.spark` re-exports.

Every call here that waits on Ray is bounded (``timeout``) and on expiry names what it waits
for and Ray's CPUs (:func:`cpu_report`). Ray Data's task that reads a new block's metadata
asks Ray for no CPU while a conversion runs, so a conversion completes while Spark's
executors and timelypy's workers hold every CPU of a small machine.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from typing import TYPE_CHECKING, Any, Dict, Iterator, List, Mapping, Optional, Tuple, Union

from ...errors import short_repr
from .columns import (
    INSTALL_HINT,
    Columns,
    SparkConnectorError,
    SparkOutputError,
    SparkUnavailableError,
)

if TYPE_CHECKING:  # pragma: no cover - types only
    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession

__all__ = [
    "cpu_report",
    "is_spark_on_ray",
    "arrow_schema",
    "records_to_arrow",
    "view_to_dataset",
    "changes_to_dataset",
    "dataset_to_spark",
    "RAY_TIMEOUT",
    "require_ray",
    "bounded",
    "metadata_cpus",
    "metadata_tasks_without_cpu",
]

log = logging.getLogger(__name__)

RAY_TIMEOUT = 120.0  # seconds a conversion between Spark, Ray Data and a view waits on Ray


def require_ray() -> Any:
    """The ``ray`` module with Ray Data, or :class:`SparkUnavailableError`."""
    try:
        import ray
        import ray.data  # noqa: F401 - Ray Datasets
    except ImportError as exc:
        raise SparkUnavailableError(
            f"Spark on Ray needs ray[data] ({exc}): {INSTALL_HINT}"
        ) from exc
    return ray


# ----------------------------------------------------------------------------- waits on Ray
def cpu_report(ray: Any = None) -> str:
    """``"the cluster has N CPUs, F free (ray.available_resources())"``: what an error says
    when a call waits on Ray for CPUs."""
    ray = ray or require_ray()
    try:
        total = float(ray.cluster_resources().get("CPU", 0))
        free = float(ray.available_resources().get("CPU", 0))
    except Exception as exc:  # noqa: BLE001 - a report, never the error itself
        return f"Ray's resources could not be read ({type(exc).__name__}: {exc})"
    return f"the cluster has {total:g} CPUs, {free:g} free (ray.available_resources())"


def bounded(
    what: str, waits_for: str, timeout: float, call: Any, *args: Any, option: str = "timeout"
) -> Any:
    """``call(*args)`` in a thread, waited for at most ``timeout`` seconds; on expiry
    :class:`SparkConnectorError` names ``what``, the resource it waits for and Ray's CPUs
    (the call goes on in the background until Ray schedules it or the cluster goes)."""
    if timeout is None or timeout <= 0:
        raise ValueError(f"{what}: timeout must be a positive number of seconds, got {timeout!r}")
    done: List[Any] = []

    def run() -> None:
        try:
            done.append((True, call(*args)))
        except BaseException as exc:  # noqa: BLE001 - re-raised in the caller
            done.append((False, exc))

    thread = threading.Thread(target=run, name=f"timelypy-ray-wait-{what}", daemon=True)
    thread.start()
    thread.join(timeout)
    if not done:
        raise SparkConnectorError(
            f"{what}: no answer from Ray within {timeout:g} s; it waits "
            f"for {waits_for}; {cpu_report()}. Free CPUs (fewer "
            f"executor cores or a smaller num_cpus_per_worker) or pass "
            f"a longer {option}"
        )
    ok, value = done[0]
    if not ok:
        raise value
    return value


_CACHE_LOCK = threading.Lock()


class _Override:  # conversions under way with the 0-CPU metadata task, and what it replaced
    users = 0
    before: Any = None


def _light_metadata_task() -> Optional[Tuple[Any, Any, Any]]:
    """Ray Data's cache of remote functions, the key of its metadata task and that task asking
    for 0 CPUs; None where this Ray has no such cache (the task then keeps Ray's 1 CPU)."""
    try:
        from ray.data._internal import remote_fn
        from ray.data._internal.util import get_table_block_metadata_schema

        key = (get_table_block_metadata_schema, hash(()))  # the key of no remote options
        light = remote_fn.cached_remote_fn(get_table_block_metadata_schema, num_cpus=0)
    except Exception:  # noqa: BLE001 - another Ray version
        log.debug("Ray Data's metadata task keeps its default CPU", exc_info=True)
        return None
    return remote_fn, key, light


def metadata_cpus() -> str:
    """What Ray Data's metadata task asks for, for error messages."""
    return "0 CPUs asked" if _light_metadata_task() is not None else "1 CPU asked"


@contextlib.contextmanager
def metadata_tasks_without_cpu() -> Iterator[None]:
    """Ray Data's ``from_arrow_refs`` (behind ``from_arrow`` and RayDP's conversions) reads
    each block's metadata in a Ray task of Ray's default 1 CPU. Beside a Spark executor and
    timelypy's workers no whole CPU may be free (2 CPUs: 1 + 2 x 0.5), and the task, so the
    call, waits for ever. Reading a block's row count and schema takes no CPU worth
    reserving: while this is active the task asks for 0 CPUs. Without Ray Data's cache of
    remote functions (another Ray version) nothing changes and the caller's bound applies."""
    override = _light_metadata_task()
    if override is None:  # another Ray: the default task, and the caller's bound
        yield
        return
    remote_fn, key, light = override
    from ray.data._internal.util import get_table_block_metadata_schema

    cache = remote_fn.CACHED_FUNCTIONS
    with _CACHE_LOCK:  # held only to count the conversions under way, never while waiting
        if _Override.users == 0:
            _Override.before = cache.get(key)
            cache[key] = light
            if remote_fn.cached_remote_fn(get_table_block_metadata_schema) is not light:
                log.debug("Ray Data's metadata task keeps its default CPU (another cache key)")
        _Override.users += 1
    try:
        yield
    finally:
        with _CACHE_LOCK:
            _Override.users -= 1
            if _Override.users == 0:
                if _Override.before is None:
                    cache.pop(key, None)
                else:
                    cache[key] = _Override.before
                _Override.before = None


def _arrow_dataset(table: "pa.Table", what: str, timeout: float) -> Any:
    """``ray.data.from_arrow(table)``, its metadata task without a CPU, bounded."""
    ray = require_ray()

    def convert() -> Any:
        with metadata_tasks_without_cpu():
            return ray.data.from_arrow(table)

    return bounded(
        what,
        f"Ray Data's task that reads the block's metadata ({metadata_cpus()})",
        timeout,
        convert,
    )


def is_spark_on_ray(spark: "SparkSession") -> bool:
    """``spark`` runs its executors on Ray (RayDP)."""
    try:
        return (spark.sparkContext.master or "").startswith("ray")
    except Exception:  # noqa: BLE001 - a stopped session
        return False


# ----------------------------------------------------------------------------- sinks
_ARROW_TYPES = {
    "tinyint": "int8",
    "smallint": "int16",
    "int": "int32",
    "bigint": "int64",
    "float": "float32",
    "double": "float64",
    "string": "string",
    "boolean": "bool_",
    "binary": "binary",
}
_ALIASES = {
    "long": "bigint",
    "integer": "int",
    "short": "smallint",
    "byte": "tinyint",
    "bool": "boolean",
    "str": "string",
}

_PYTHON_TYPES: Dict[str, Tuple[type, ...]] = {
    **{f"{u}int{n}": (int,) for u in ("", "u") for n in (8, 16, 32, 64)},
    "float": (float, int),
    "double": (float, int),
    "bool": (bool,),
    "string": (str,),
    "large_string": (str,),
    "binary": (bytes, bytearray),
    "large_binary": (bytes, bytearray),
}
"""The Python types a column of each Arrow type takes (others are not checked here)."""

Schema = Union[str, "pa.Schema"]


def arrow_schema(schema: Schema) -> "pa.Schema":
    """``schema`` as a ``pyarrow.Schema``: one already, or Spark-style DDL such as
    ``"src bigint, dst bigint NOT NULL"`` (types: tinyint, smallint, int, bigint, float,
    double, string, boolean, binary, and long, integer, short, byte, bool, str)."""
    import pyarrow as pa

    if isinstance(schema, pa.Schema):
        return schema
    if not isinstance(schema, str):
        raise TypeError(
            f"schema must be a pyarrow.Schema or a DDL string, got {type(schema).__name__}"
        )
    fields = []
    for part in (p.strip() for p in schema.split(",")):
        words = part.split()
        nullable = not (len(words) == 4 and [w.lower() for w in words[2:]] == ["not", "null"])
        if len(words) not in (2, 4) or (len(words) == 4 and nullable):
            raise ValueError(f"schema {schema!r}: {part!r} is not 'name type [NOT NULL]'")
        kind = _ALIASES.get(words[1].lower(), words[1].lower())
        if kind not in _ARROW_TYPES:
            raise ValueError(
                f"schema {schema!r}: column {words[0]!r} has type {words[1]!r}, "
                f"not one of {', '.join(sorted(_ARROW_TYPES))}"
            )
        fields.append(pa.field(words[0], getattr(pa, _ARROW_TYPES[kind])(), nullable=nullable))
    return pa.schema(fields)


def _table(
    rows: List[Tuple[Any, ...]],
    sources: List[Any],
    schema: "pa.Schema",
    order: List[str],
    where: str,
) -> "pa.Table":
    """An Arrow table of ``schema`` from ``rows`` whose values are in ``order``; every value is
    checked first (:class:`SparkOutputError` names the record of ``sources``, column, value)."""
    import pyarrow as pa

    if sorted(order) != sorted(schema.names):
        raise SparkOutputError(
            f"{where}: the schema's columns {schema.names} do not match the columns {order}"
        )
    position = {name: i for i, name in enumerate(order)}
    arrays = []
    for field in schema:
        values = [r[position[field.name]] for r in rows]
        allowed = _PYTHON_TYPES.get(str(field.type))
        for value, record in zip(values, sources):
            if value is None and not field.nullable:
                raise SparkOutputError(
                    f"{where}: column {field.name!r} is not nullable, but "
                    f"record {short_repr(record)} has null there"
                )
            if (
                value is not None
                and allowed is not None
                and (
                    not isinstance(value, allowed)
                    or (bool not in allowed and isinstance(value, bool))
                )
            ):
                raise SparkOutputError(
                    f"{where}: column {field.name!r} has type {field.type}, "
                    f"but record {short_repr(record)} has {short_repr(value)} of type "
                    f"{type(value).__name__} there"
                )
        arrays.append(pa.array(values, type=field.type))
    return pa.Table.from_arrays(arrays, schema=schema)


def records_to_arrow(
    contents: Mapping[Any, int],
    schema: Schema,
    columns: Optional[Columns] = None,
    *,
    count: Optional[str] = None,
    where: str = "records",
) -> "pa.Table":
    """An Arrow table of ``schema`` from ``{record: count}`` (a collection's contents).

    Records are flattened into columns by ``columns`` (default: every schema column but
    ``count``, in order, as ``Columns([...])``). ``count=None``: a record of count n is n rows
    (a negative count is an error); ``count="n"``: one row per record, its count in column
    ``n``. Values are checked against their column's type: :class:`SparkOutputError` names the
    record, the column and the value.
    """
    schema = arrow_schema(schema)
    columns = columns or Columns([n for n in schema.names if n != count])
    rows, sources = [], []
    for record, n in contents.items():
        values = columns.flatten(record)
        if count is None and n < 0:
            raise SparkOutputError(
                f"{where}: record {short_repr(record)} has count {n}: "
                "use count='...' for negative counts"
            )
        copies = 1 if count is not None else n
        rows.extend([values + ((n,) if count is not None else ())] * copies)
        sources.extend([record] * copies)
    return _table(rows, sources, schema, list(columns.names) + ([count] if count else []), where)


def view_to_dataset(
    view: Any,
    schema: Schema,
    columns: Optional[Columns] = None,
    *,
    at: Any = None,
    count: Optional[str] = None,
    timeout: float = RAY_TIMEOUT,
) -> Any:
    """A ``CollectionView``'s contents at ``at`` (default: the latest closed time) as a
    ``ray.data.Dataset`` of ``schema`` (see :func:`records_to_arrow` for ``columns`` and
    ``count``). Call ``view.refresh()`` first. Ray Data's task that reads the block's
    metadata reserves no CPU (beside Spark's executors and timelypy's workers none may be
    free); the call waits at most ``timeout`` seconds (:class:`SparkConnectorError` naming
    what it waits for and Ray's free CPUs)."""
    where = f"view of {view.capture!r}"
    table = records_to_arrow(view.contents(at), schema, columns, count=count, where=where)
    return _arrow_dataset(table, f"view_to_dataset of {view.capture!r}", timeout)


def changes_to_dataset(
    view: Any,
    schema: Schema,
    columns: Optional[Columns] = None,
    *,
    time: str = "time",
    diff: str = "diff",
    timeout: float = RAY_TIMEOUT,
) -> Any:
    """A ``CollectionView``'s consolidated changes as a ``ray.data.Dataset`` of ``schema``:
    the record's columns, then ``time`` and ``diff`` (integer columns). Bounded by
    ``timeout`` as :func:`view_to_dataset`."""
    schema = arrow_schema(schema)
    columns = columns or Columns([n for n in schema.names if n not in (time, diff)])
    changes = view.changes()
    rows = [columns.flatten(d) + (t, r) for d, t, r in changes]
    table = _table(
        rows,
        [d for d, _, _ in changes],
        schema,
        list(columns.names) + [time, diff],
        f"changes of {view.capture!r}",
    )
    return _arrow_dataset(table, f"changes_to_dataset of {view.capture!r}", timeout)


def dataset_to_spark(
    dataset: Any, spark: "SparkSession", *, timeout: float = RAY_TIMEOUT
) -> "DataFrame":
    """A Ray Dataset (of Arrow blocks) as a DataFrame of the RayDP Spark ``spark``
    (``dataset.to_spark(spark)``: the blocks go from Ray's object store to the executors when
    Spark reads them). Handing the blocks to RayDP's master waits at most ``timeout``
    seconds."""
    if not is_spark_on_ray(spark):
        raise SparkConnectorError(
            "dataset_to_spark: the SparkSession does not run on Ray "
            "(RayDP): start it with spark_on_ray()"
        )
    return bounded(
        "dataset_to_spark",
        "RayDP's master actor (0 CPUs asked) to take the dataset's blocks",
        timeout,
        dataset.to_spark,
        spark,
    )
