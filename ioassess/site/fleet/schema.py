"""The store's schema, version SCHEMA_VERSION (docs/fleet.md, "Schema"): its tables, their
columns and kinds, and the check of a job's record against them. Pure Python (no pyarrow): the
epilog checks a record with it before spooling."""
import re

from ...escape import printable

SCHEMA_VERSION = 1
TABLES = ("jobs", "findings", "files", "latency")
STRING, INTEGER, FLOAT, TIMESTAMP, BIN = "string", "integer", "float", "timestamp", "bin"
_AMOUNTS = [(f"{layer}_{direction}_{unit}", INTEGER if unit == "bytes" else FLOAT)
            for layer in ("posix", "stdio", "mpiio") for direction in ("read", "write") for unit in ("bytes", "s")]
# Every table's columns in the store's files (month: the directory month=YYYY-MM of each part).
COLUMNS = {
    "jobs": [
        ("job_key", STRING), ("job_id", STRING), ("step", STRING), ("user", STRING), ("account", STRING),
        ("app", STRING), ("nodes", INTEGER), ("processes", INTEGER), ("start", TIMESTAMP), ("end", TIMESTAMP),
        ("runtime_s", FLOAT), ("main_fs", STRING), ("main_fs_type", STRING), ("file_systems", STRING),
        ("tier", STRING), ("io_cell", STRING), ("io_s", FLOAT), ("lost_low_s", FLOAT), ("lost_high_s", FLOAT),
        ("storage_s", FLOAT), ("new_pages_s", FLOAT), ("stall_s", FLOAT), ("allocation_s", FLOAT),
        ("memory_s", FLOAT), ("main_cause", STRING), ("findings", INTEGER), ("first_finding", STRING),
        ("at_stake_s", FLOAT), ("meta_calls", INTEGER), ("meta_s", FLOAT), *_AMOUNTS, ("model", STRING),
        ("model_match", STRING), ("model_fs_type", STRING), ("model_host", STRING), ("model_date", STRING),
        ("probe_slowdown", FLOAT), ("report", STRING), ("source", STRING), ("schema_version", INTEGER),
        ("record_hash", STRING)],
    "findings": [("job_key", STRING), ("position", INTEGER), ("code", STRING), ("title", STRING), ("level", STRING),
                 ("at_stake_s", FLOAT), ("rank_seconds", FLOAT)],
    "files": [("job_key", STRING), ("position", INTEGER), ("name", STRING), ("fs_type", STRING),
              ("mount_point", STRING), ("ops", INTEGER), ("bytes", INTEGER), ("seconds", FLOAT),
              ("lost_high_s", FLOAT)],
    "latency": [("job_key", STRING), ("kind", STRING), ("mount_point", STRING), ("fs_type", STRING), ("bin", BIN),
                ("count", INTEGER)],
}
# Tables the compaction derives from each batch's records, which the questions without filters
# read instead of every job's rows: the latency bins summed per kind and file system, and per
# finding (its code, or its title) how often it fired, on how many jobs (a job's rows are in one
# batch: the counts of the batches add up) and its seconds at stake.
ROLLUPS = {"latency_totals": [(name, kind) for name, kind in COLUMNS["latency"] if name != "job_key"],
           "findings_totals": [("finding", STRING), ("title", STRING), ("fired", INTEGER), ("jobs", INTEGER),
                               ("at_stake_s", FLOAT), ("largest_at_stake_s", FLOAT)]}
STORE_TABLES = (*TABLES, *ROLLUPS)
# A record's job row has the jobs columns and its month; the other tables' columns but job_key.
JOB_FIELDS = [name for name, _ in COLUMNS["jobs"]] + ["month"]
RECORD_COLUMNS = {table: [name for name, _ in COLUMNS[table] if name != "job_key"] for table in TABLES[1:]}
MONTH = re.compile(r"\d{4}-\d{2}|unknown")
HASH = re.compile(r"[0-9a-f]{64}")
# Values bounded as the store's types bound them (int64 integers and timestamps in microseconds,
# a bin an int16), and strings short enough to be a field, not a file.
MAX_INTEGER = 2 ** 63 - 1
MAX_STRING = 4096
# A float (seconds, a slowdown) far beyond any job's, yet whose sums over 10^9 jobs stay finite.
MAX_FLOAT = 1e12
MAX_ROWS = 100_000
# What each kind's values are (JSON's: a bool is no number) and the bounds they keep.
_TYPES = {FLOAT: (int, float), BIN: (int,), INTEGER: (int,), TIMESTAMP: (int,)}
_BOUNDS = {FLOAT: (-MAX_FLOAT, MAX_FLOAT), BIN: (0, 2 ** 15 - 1), INTEGER: (-MAX_INTEGER, MAX_INTEGER),
           TIMESTAMP: (-MAX_INTEGER, MAX_INTEGER)}


class RecordError(ValueError):
    """A record (or an assessment) the store cannot take: str() says why in one line."""


def check_record(record):
    """Raise RecordError unless record is a job record of this schema: {"job": row, table:
    {column: [values]}} with the store's columns, values of their kinds, columns of one length."""
    if not isinstance(record, dict) or set(record) != {"job", *TABLES[1:]} or not isinstance(record["job"], dict):
        raise RecordError("not a job record: job, " + ", ".join(TABLES[1:]))
    job = record["job"]
    if sorted(job) != sorted(JOB_FIELDS):
        raise RecordError("its job has other fields than the store's columns")
    kinds = dict(COLUMNS["jobs"])
    for name, value in job.items():
        if name != "month":
            _check_value(value, kinds[name], f"job {name}")
    if not isinstance(job["month"], str) or not MONTH.fullmatch(job["month"]):
        raise RecordError(f"month {printable(str(job['month']))[:20]!r} is not YYYY-MM")
    if not isinstance(job["record_hash"], str) or not HASH.fullmatch(job["record_hash"]):
        raise RecordError("its record_hash is not a sha256")
    for table in TABLES[1:]:
        columns = record[table]
        if not isinstance(columns, dict) or sorted(columns) != sorted(RECORD_COLUMNS[table]) or \
                not all(isinstance(values, list) for values in columns.values()) or \
                len({len(values) for values in columns.values()}) > 1:
            raise RecordError(f"its {table} are not the store's columns, of one length")
        if len(next(iter(columns.values()))) > MAX_ROWS:
            raise RecordError(f"more than {MAX_ROWS} {table} rows")
        kinds = dict(COLUMNS[table])
        for name, values in columns.items():
            _check_column(values, kinds[name], f"{table} {name}")


def _check_column(values, kind, what):
    """_check_value of each value, a column at a time (a job's latency bins are hundreds)."""
    present = [value for value in values if value is not None]
    if kind == STRING:
        good = all(type(value) is str and len(value) <= MAX_STRING for value in present)
    else:
        low, high = _BOUNDS[kind]
        good = all(type(value) in _TYPES[kind] for value in present) and all(low <= v <= high for v in present)
    if not good:
        for value in present:
            _check_value(value, kind, what)


def _check_value(value, kind, what):
    if value is None:
        return
    if kind == STRING:
        good = type(value) is str and len(value) <= MAX_STRING
    else:
        low, high = _BOUNDS[kind]
        good = type(value) in _TYPES[kind] and low <= value <= high
    if not good:
        raise RecordError(f"{what}: {printable(repr(value))[:40]} is not a {kind}")
