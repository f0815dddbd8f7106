"""Running the named questions (queries.py) and SQL on the store with DuckDB: views jobs,
findings, files and latency over the store's Parquet parts (read in place, month from the
directory), the command line's filters as one condition on jobs."""
import dataclasses
import datetime
import glob
import os

from ...report.latency import LATENCY_SCALE
from .queries import QUERIES
from .schema import STORE_TABLES
from .store import FILE_SCHEMAS, StoreError

_DUCKDB_TYPES = {"string": "VARCHAR", "int64": "BIGINT", "int16": "SMALLINT", "double": "DOUBLE",
                 "timestamp[us, tz=UTC]": "TIMESTAMPTZ"}


@dataclasses.dataclass(frozen=True)
class Filters:
    since: datetime.datetime = None    # jobs that ended at or after
    until: datetime.datetime = None    # jobs that ended before
    user: str = None
    app: str = None
    fs: str = None                     # a mount point the job's main file system is, or among its file systems

    def condition(self):
        """(SQL condition on jobs j, its parameters)."""
        parts, parameters = [], []
        if self.since:
            parts.append('j."end" >= ?')
            parameters.append(self.since)
        if self.until:
            parts.append('j."end" < ?')
            parameters.append(self.until)
        for column, value in (("user", self.user), ("app", self.app)):
            if value is not None:
                parts.append(f"j.{column} = ?")
                parameters.append(value)
        if self.fs is not None:
            parts.append("(j.main_fs = ? OR list_contains(string_split(j.file_systems, ','), ?))")
            parameters += [self.fs, self.fs]
        return " AND ".join(parts) or "TRUE", parameters


def connect(store):
    """A DuckDB connection with the store's views (empty views for tables with no part yet)."""
    import duckdb
    if not os.path.isdir(store):
        raise StoreError(f"{store}: no such store (a directory `ioassess fleet compact` fills)")
    connection = duckdb.connect()
    for table in STORE_TABLES:
        pattern = os.path.join(store, table, "month=*", "part-*.parquet")
        if glob.glob(pattern):
            connection.execute(f"CREATE VIEW {table} AS SELECT * FROM read_parquet({_literal(pattern)}, "
                               f"hive_partitioning = true, hive_types = {{'month': VARCHAR}})")
        else:
            columns = ", ".join(f'NULL::{_DUCKDB_TYPES[str(field.type)]} AS "{field.name}"'
                                for field in FILE_SCHEMAS[table])
            connection.execute(f"CREATE VIEW {table} AS SELECT {columns}, NULL::VARCHAR AS month WHERE FALSE")
    return connection


def _literal(text):
    return "'" + text.replace("'", "''") + "'"


def run_query(connection, name, filters=Filters(), argument=None):
    """(column names, rows) of a named question."""
    query = QUERIES[name]
    condition, parameters = filters.condition()
    template = query.unfiltered_sql if query.unfiltered_sql and not parameters else query.sql
    sql = template.format(where=condition, min_s=repr(LATENCY_SCALE.min_s), ratio=repr(LATENCY_SCALE.ratio))
    parameters = parameters * template.count("{where}")
    if query.leading:
        parameters = [argument if query.leading == "argument" else filters.since, *parameters]
    result = connection.execute(sql, parameters)
    return [column[0] for column in result.description], result.fetchall()


def run_sql(connection, sql):
    result = connection.execute(sql)
    return [column[0] for column in result.description], result.fetchall()
