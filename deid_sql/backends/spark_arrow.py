"""Spark results as Arrow: column types under DuckDB's names, and batches one partition at a time.

Kept apart from ``spark.py`` (the backend) because it is the one part that touches PySpark's
internal Arrow serving and its row objects; the backend asks it for schemas and batches.
"""

from __future__ import annotations

import datetime as dt
import itertools
from collections.abc import Iterable, Iterator
from typing import Any

import pyarrow as pa
from py4j.protocol import Py4JError
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import types as T


def type_name(t: T.DataType) -> str:
    """A Spark type under DuckDB's name, so loading's type checks read every engine alike."""
    if isinstance(t, T.StringType | T.VarcharType | T.CharType):
        return "VARCHAR"
    if isinstance(t, T.DecimalType):
        return f"DECIMAL({t.precision},{t.scale})"
    if isinstance(t, T.TimestampNTZType):
        return "TIMESTAMP"
    for cls, name in ((T.BooleanType, "BOOLEAN"), (T.ByteType, "TINYINT"), (T.ShortType, "SMALLINT"),
                      (T.IntegerType, "INTEGER"), (T.LongType, "BIGINT"), (T.FloatType, "FLOAT"),
                      (T.DoubleType, "DOUBLE"), (T.DateType, "DATE"), (T.TimestampType, "TIMESTAMP WITH TIME ZONE"),
                      (T.BinaryType, "BLOB")):
        if isinstance(t, cls):
            return name
    return t.simpleString().upper()


def arrow_schema(df: DataFrame) -> pa.Schema:
    """The Arrow schema ``toArrow`` gives ``df`` (no rows are computed)."""
    return df.limit(0).toArrow().schema


def partition_batches(session: SparkSession, df: DataFrame, schema: pa.Schema) -> Iterator[pa.RecordBatch]:
    """Arrow batches, one partition at a time.  Fast path: Spark's own Arrow batches of each
    partition served like ``toLocalIterator`` (internal API); if a PySpark version lacks it,
    the public ``toLocalIterator`` rows converted to Arrow."""
    try:
        from pyspark.serializers import NoOpSerializer
        from pyspark.util import _local_iterator_from_socket

        jvm = session.sparkContext._jvm
        served = jvm.PythonRDD.toLocalIteratorAndServe(df._jdf.toArrowBatchRdd(), True)
    except (ImportError, AttributeError, Py4JError):
        yield from row_batches(df.toLocalIterator(prefetchPartitions=True), schema)
        return
    for message in _local_iterator_from_socket(served, NoOpSerializer()):
        yield pa.ipc.read_record_batch(pa.py_buffer(message), schema)


def row_batches(rows: Iterable[Any], schema: pa.Schema, size: int = 100_000) -> Iterator[pa.RecordBatch]:
    it = iter(rows)
    while chunk := list(itertools.islice(it, size)):
        columns = list(zip(*chunk))
        arrays = []
        for field, values in zip(schema, columns):
            if pa.types.is_timestamp(field.type) and field.type.tz:  # Spark gives local wall-clock times
                values = tuple(v.astimezone(dt.UTC) if isinstance(v, dt.datetime) else v for v in values)
            arrays.append(pa.array(values, type=field.type))
        yield pa.RecordBatch.from_arrays(arrays, schema=schema)
