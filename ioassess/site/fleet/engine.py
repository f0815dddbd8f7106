"""Running the named questions (queries.py) and SQL on the store, with DuckDB (embedded, the
default) or PySpark (local mode, or a cluster's master URL): views jobs, findings, files,
latency and the rollups over the store's Parquet parts, read in place (month from the
directory); the command line's filters as one condition on jobs. Both engines answer a
question with the same rows (tests/test_fleet.py compares every question)."""
import dataclasses
import datetime
import glob
import os

from ...report.latency import LATENCY_SCALE
from .queries import DIALECTS, QUERIES, filled
from .schema import STORE_TABLES
from .store import FILE_SCHEMAS, StoreError, part_pattern

_DUCKDB_TYPES = {"string": "VARCHAR", "int64": "BIGINT", "int16": "SMALLINT", "double": "DOUBLE",
                 "timestamp[us, tz=UTC]": "TIMESTAMPTZ"}


@dataclasses.dataclass(frozen=True)
class Filters:
    since: datetime.datetime = None    # jobs that ended at or after
    until: datetime.datetime = None    # jobs that ended before
    user: str = None
    app: str = None
    fs: str = None                     # a mount point the job's main file system is, or among its file systems

    def condition(self, dialect):
        """(SQL condition on jobs j, its parameters)."""
        words = DIALECTS[dialect]
        end, user = f"j.{words['end']}", f"j.{words['user']}"
        parts, parameters = [], []
        if self.since:
            parts.append(f"{end} >= ?")
            parameters.append(self.since)
        if self.until:
            parts.append(f"{end} < ?")
            parameters.append(self.until)
        for column, value in ((user, self.user), ("j.app", self.app)):
            if value is not None:
                parts.append(f"{column} = ?")
                parameters.append(value)
        if self.fs is not None:
            parts.append(f"(j.main_fs = ? OR {words['listed'].format('j.file_systems')})")
            parameters += [self.fs, self.fs]
        return " AND ".join(parts) or "TRUE", parameters


def _check(store):
    if not os.path.isdir(store):
        raise StoreError(f"{store}: no such store (a directory `ioassess fleet compact` fills)")


class DuckDB:
    """The store's views in an in-memory DuckDB database."""
    dialect = "duckdb"

    def __init__(self, store):
        import duckdb
        _check(store)
        self.error = duckdb.Error
        self.connection = duckdb.connect()
        self.connection.execute("SET TimeZone = 'UTC'")   # weeks and days are UTC's, as on Spark
        for table in STORE_TABLES:
            pattern = part_pattern(store, table)
            if glob.glob(pattern):
                self.connection.execute(f"CREATE VIEW {table} AS SELECT * FROM read_parquet({_literal(pattern)}, "
                                        f"hive_partitioning = true, hive_types = {{'month': VARCHAR}})")
            else:
                columns = ", ".join(f'NULL::{_DUCKDB_TYPES[str(field.type)]} AS "{field.name}"'
                                    for field in FILE_SCHEMAS[table])
                self.connection.execute(f"CREATE VIEW {table} AS SELECT {columns}, NULL::VARCHAR AS month WHERE FALSE")

    def run(self, sql, parameters=()):
        result = self.connection.execute(sql, list(parameters))
        return [column[0] for column in result.description], result.fetchall()

    def close(self):
        self.connection.close()


class Spark:
    """The store's views in a Spark session (master: local[N] or a cluster's URL), UTC."""
    dialect = "spark"

    def __init__(self, store, master=None):
        from pyspark.errors import PySparkException
        from pyspark.sql import SparkSession
        _check(store)
        self.error = PySparkException
        master = master or f"local[{os.cpu_count()}]"
        active = SparkSession.getActiveSession()
        if active is not None and active.sparkContext.master != master:
            active.stop()   # getOrCreate would hand back this process's session on its own master
        self.session = (SparkSession.builder.master(master).appName("ioassess fleet")
                        .config("spark.sql.session.timeZone", "UTC")
                        .config("spark.sql.sources.partitionColumnTypeInference.enabled", "false")
                        .config("spark.ui.enabled", "false").getOrCreate())
        self.session.sparkContext.setLogLevel("ERROR")
        for table in STORE_TABLES:
            root = os.path.join(store, table)
            if glob.glob(part_pattern(store, table)):
                frame = self.session.read.option("basePath", root).parquet(os.path.join(root, "month=*"))
            else:
                frame = self.session.createDataFrame([], self._schema(table))
            frame.createOrReplaceTempView(table)

    def _schema(self, table):
        from pyspark.sql.types import (DoubleType, LongType, ShortType, StringType, StructField, StructType,
                                       TimestampType)
        types = {"string": StringType(), "int64": LongType(), "int16": ShortType(), "double": DoubleType(),
                 "timestamp[us, tz=UTC]": TimestampType()}
        return StructType([StructField(field.name, types[str(field.type)]) for field in FILE_SCHEMAS[table]]
                          + [StructField("month", StringType())])

    def run(self, sql, parameters=()):
        frame = self.session.sql(sql, args=list(parameters)) if parameters else self.session.sql(sql)
        rows = frame.collect()
        return list(frame.columns), [tuple(_utc(value) for value in row) for row in rows]

    def close(self):
        pass   # the session is kept for the process's next questions (starting one takes seconds)


def _utc(value):
    """PySpark gives a timestamp as a naive datetime in the Python process's local time: as
    DuckDB gives it, in UTC."""
    if isinstance(value, datetime.datetime) and value.tzinfo is None:
        return value.astimezone(datetime.timezone.utc)
    return value


def connect(store, engine="duckdb", master=None):
    """The engine's views of the store."""
    return DuckDB(store) if engine == "duckdb" else Spark(store, master)


def _literal(text):
    return "'" + text.replace("'", "''") + "'"


def run_query(engine, name, filters=Filters(), argument=None):
    """(column names, rows) of a named question."""
    query = QUERIES[name]
    condition, parameters = filters.condition(engine.dialect)
    sql, wheres = filled(query, engine.dialect, condition, not parameters, LATENCY_SCALE)
    parameters = parameters * wheres
    if query.leading:
        parameters = [argument if query.leading == "argument" else filters.since, *parameters]
    return engine.run(sql, parameters)
