"""The site's store of job records (docs/fleet.md): a spool directory that job ends drop one
small file each into, and Parquet tables partitioned by month that `ioassess fleet compact`
makes of it.

Layout:  STORE/spool/<job key>-<hash>.json   one record each (record.py), written whole then renamed
         STORE/<table>/month=YYYY-MM/part-<batch>.parquet   the tables of schema.STORE_TABLES
         STORE/rejects/part-<batch>.parquet  what could not be taken, and why
         STORE/rejected/<name>               the spooled files it was said of, kept for a look
         STORE/.lock                         held by one compaction at a time

A batch's parts are renamed into place with its jobs part last: a jobs part is the commit of
its batch. A compaction that died half-way leaves parts of other tables without their jobs part;
the next compaction deletes them before it starts, and spooled records whose (job key, hash) are
already in a jobs part are dropped from the spool, not added again. Merging a month's parts
writes the merged parts first; its jobs part names the parts it replaces (in its Parquet
metadata), deleted before the next compaction starts if a merge died before deleting them.
"""
import fcntl
import glob
import json
import os
import signal
import stat
import uuid

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ...escape import printable
from .schema import (BIN, COLUMNS, FLOAT, INTEGER, ROLLUPS, SCHEMA_VERSION, STORE_TABLES, STRING, TABLES, TIMESTAMP,
                     RecordError, check_record)
from .spool import MAX_RECORD_BYTES, SPOOL, SPOOL_NAME

REJECTS = "rejects"
REJECTED = "rejected"
LOCK = ".lock"
# Spooled records per compaction batch: memory stays bounded whatever the spool holds.
BATCH_RECORDS = 50_000
# A month with more parts than this is merged into one at the end of a compaction.
MERGE_PARTS = 16
REPLACES_KEY = b"ioassess.replaces"
SIGNAL_AT_ENV = "IOASSESS_FLEET_SIGNAL_AT"

_ARROW_TYPES = {STRING: pa.string(), INTEGER: pa.int64(), FLOAT: pa.float64(), BIN: pa.int16(),
                TIMESTAMP: pa.timestamp("us", tz="UTC")}
FILE_SCHEMAS = {table: pa.schema([(name, _ARROW_TYPES[kind]) for name, kind in columns])
                for table, columns in {**COLUMNS, **ROLLUPS}.items()}
REJECT_SCHEMA = pa.schema([("source", pa.string()), ("problem", pa.string()), ("batch", pa.string())])


class StoreError(Exception):
    """A store that cannot be used (not a directory, not writable, another schema)."""


# ---- compaction ----

def compact(store, batch_records=BATCH_RECORDS, merge_parts=MERGE_PARTS):
    """The spool into the tables: {"added", "duplicates", "rejected", "merged"} counts, or None
    when another compaction holds the store's lock (it will take what is spooled)."""
    _check_store(store)
    with open(os.path.join(store, LOCK), "a") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return None
        stop_point("lock held")
        finish_interrupted(store)
        counts = {"added": 0, "duplicates": 0, "rejected": 0, "merged": 0}
        present = StoredHashes(store)
        while names := _spooled(store, batch_records):
            for name, count in zip(("added", "duplicates", "rejected"), _compact_batch(store, names, present)):
                counts[name] += count
        counts["merged"] = merge_months(store, merge_parts)
        return counts


class StoredHashes:
    """The record hashes of the jobs table, read per month as batches need them (a set of
    16-byte prefixes: about 50 bytes a job held, for the months a batch touches)."""

    def __init__(self, store):
        self.store = store
        self.months = {}

    def of(self, month):
        if month not in self.months:
            self.months[month] = {bytes.fromhex(digest)[:16]
                                  for digest in column_values(self.store, "jobs", "record_hash", month)}
        return self.months[month]


def stop_point(name):
    """A point a compaction or an ingest passes where dying must lose and duplicate nothing. The
    tests stop it there: IOASSESS_FLEET_SIGNAL_AT="NAME:N:SIGNAL" sends it SIGNAL the Nth time it passes NAME."""
    wanted = os.environ.get(SIGNAL_AT_ENV)
    if wanted:
        step, count, signal_name = wanted.rsplit(":", 2)
        if step == name:
            _steps_passed[name] = _steps_passed.get(name, 0) + 1
            if _steps_passed[name] == int(count):
                os.kill(os.getpid(), signal.Signals[signal_name])


_steps_passed = {}


def _check_store(store):
    if not os.path.isdir(store):
        raise StoreError(f"{printable(store)}: not a directory")
    version = os.path.join(store, "VERSION")
    if os.path.exists(version):
        with open(version) as f:
            text = f.read().strip()
        if text != str(SCHEMA_VERSION):
            raise StoreError(f"{printable(version)}: store schema {printable(text)!r}, this ioassess writes "
                             f"{SCHEMA_VERSION}")
    else:
        _write_whole(version, f"{SCHEMA_VERSION}\n".encode())


def _spooled(store, limit):
    spool = os.path.join(store, SPOOL)
    if not os.path.isdir(spool):
        return []
    names = []
    with os.scandir(spool) as entries:
        for entry in entries:
            if not entry.name.startswith("."):
                names.append(entry.name)
                if len(names) >= limit:
                    break
    return sorted(names)


def _compact_batch(store, names, present):
    """One batch of spooled records into parts, then out of the spool (rejected ones into
    STORE/rejected/): (added, duplicates, rejected)."""
    spool = os.path.join(store, SPOOL)
    records, rejects, duplicates = [], {}, []
    for name in names:
        record, problem = _read_spooled(os.path.join(spool, name), name)
        if problem:
            rejects[name] = problem
            continue
        job = record["job"]
        digest = bytes.fromhex(job["record_hash"])[:16]
        if digest in present.of(job["month"]):
            duplicates.append(name)
            continue
        present.of(job["month"]).add(digest)
        records.append((name, record))
    tables, refused = _tables(records)
    rejects.update(refused)
    known = set(column_values(store, REJECTS, "source"))
    add_rejects(store, [{"source": f"{SPOOL}/{name}", "problem": problem} for name, problem in sorted(rejects.items())
                        if f"{SPOOL}/{name}" not in known])
    for month, parts in sorted(tables.items()):
        commit_parts(store, month, parts)
    for name in [*(name for name, _ in records if name not in refused), *duplicates]:
        os.unlink(os.path.join(spool, name))
        stop_point("spool record removed")
    if rejects:
        os.makedirs(os.path.join(store, REJECTED), mode=0o700, exist_ok=True)
    for name in rejects:
        os.replace(os.path.join(spool, name), os.path.join(store, REJECTED, name))
    return len(records) - len(refused), len(duplicates), len(rejects)


def add_rejects(store, rejects):
    """[{"source", "problem"}] as a part of the rejects table."""
    if rejects:
        batch = uuid.uuid4().hex
        _commit(store, [(os.path.join(store, REJECTS), pa.Table.from_pylist(
            [{**reject, "batch": batch} for reject in rejects], REJECT_SCHEMA))], batch)


def _tables(records):
    """({month: {table: pa.Table}} of the records, {name: problem} of those whose values are not
    of their columns' types): the batch at once, record by record only when that fails."""
    try:
        return _month_tables([record for _, record in records]), {}
    except (pa.ArrowException, TypeError, ValueError, OverflowError):
        good, refused = [], {}
        for name, record in records:
            try:
                _month_tables([record])
                good.append(record)
            except (pa.ArrowException, TypeError, ValueError, OverflowError) as error:
                refused[name] = printable(f"a value is not of its column's type: {error}")[:300]
        return _month_tables(good), refused


def _month_tables(records):
    """{month: {table: pa.Table}} of the records (the jobs rows as they are; the other tables'
    columns with their job's key)."""
    columns = {}
    for record in records:
        job = record["job"]
        month = columns.setdefault(job["month"], {table: {name: [] for name in FILE_SCHEMAS[table].names}
                                                  for table in TABLES})
        for name in FILE_SCHEMAS["jobs"].names:
            month["jobs"][name].append(job[name])
        for table in TABLES[1:]:
            rows = record[table]
            month[table]["job_key"] += [job["job_key"]] * len(next(iter(rows.values()), ()))
            for name, values in rows.items():
                month[table][name] += values
    return {month: {table: pa.Table.from_pydict(tables[table], FILE_SCHEMAS[table]) for table in TABLES}
            for month, tables in columns.items()}


def _read_spooled(path, name):
    """(record, None) or (None, the problem in one line)."""
    if not SPOOL_NAME.match(name):
        return None, "not a spooled record's name"
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as error:
        return None, f"cannot open: {error.strerror}"
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
            return None, "not a regular file"
        data = f.read(MAX_RECORD_BYTES + 1)
    if len(data) > MAX_RECORD_BYTES:
        return None, f"larger than {MAX_RECORD_BYTES} bytes"
    try:
        record = json.loads(data)
        _check_record(record, name)
    except RecursionError:
        return None, "nested too deeply to be a record"
    except (ValueError, RecordError) as error:
        return None, printable(str(error))[:300]
    return record, None


def _check_record(record, name):
    check_record(record)
    if not name.endswith(f"-{record['job']['record_hash']}.json"):
        raise RecordError("its name does not end with its record's hash")


def commit_parts(store, month, tables):
    """{table: pa.Table} of the records' tables as one batch's parts of the month, with its
    rollups."""
    tables = {**tables, "latency_totals": latency_totals(tables["latency"]),
              "findings_totals": findings_totals(tables["findings"])}
    _commit(store, [(_month_dir(store, table, month), tables[table]) for table in STORE_TABLES], uuid.uuid4().hex)


def latency_totals(latency):
    """The latency rows' (or rollups') counts summed per kind, file system and bin."""
    keys = [name for name in FILE_SCHEMAS["latency_totals"].names if name != "count"]
    summed = latency.group_by(keys).aggregate([("count", "sum")]).rename_columns([*keys, "count"])
    return summed.select(FILE_SCHEMAS["latency_totals"].names).cast(FILE_SCHEMAS["latency_totals"])


def findings_totals(findings):
    """Per finding (its code, or its title): the times it fired, the jobs it fired on, the sum and
    the largest of its seconds at stake."""
    named = findings.append_column("finding", pc.coalesce(findings["code"], findings["title"]))
    summed = named.group_by("finding").aggregate([("title", "min"), ("job_key", "count"), ("job_key", "count_distinct"),
                                                  ("at_stake_s", "sum"), ("at_stake_s", "max")])
    return _totals_table(summed)


def _merged_findings_totals(totals):
    summed = totals.group_by("finding").aggregate([("title", "min"), ("fired", "sum"), ("jobs", "sum"),
                                                   ("at_stake_s", "sum"), ("largest_at_stake_s", "max")])
    return _totals_table(summed)


def _totals_table(summed):
    """The findings_totals columns of a group_by's result: the key, then the aggregates in order."""
    schema = FILE_SCHEMAS["findings_totals"]
    aggregates = [name for name in summed.column_names if name != "finding"]
    return pa.Table.from_arrays([summed["finding"], *(summed[name] for name in aggregates)], schema=schema)


def _month_dir(store, table, month):
    return os.path.join(store, table, f"month={month}")


def _commit(store, parts, batch, replaces=()):
    """Write each (directory, table) as part-<batch>.parquet: every part under a temporary name
    first, then renamed into place, the jobs part (the commit) last."""
    staged = []
    for directory, table in parts:
        os.makedirs(directory, mode=0o750, exist_ok=True)
        final = os.path.join(directory, f"part-{batch}.parquet")
        temporary = os.path.join(directory, f".part-{batch}.parquet.tmp")
        if replaces and os.path.basename(os.path.dirname(directory)) == "jobs":
            table = table.replace_schema_metadata({REPLACES_KEY: json.dumps(list(replaces)).encode()})
        pq.write_table(table, temporary, compression="zstd")
        _fsync(temporary)
        staged.append((temporary, final))
    staged.sort(key=lambda pair: os.path.basename(os.path.dirname(os.path.dirname(pair[1]))) == "jobs")
    for temporary, final in staged:
        os.replace(temporary, final)
        stop_point("part renamed")
        _fsync(os.path.dirname(final))


def _fsync(path):
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _write_whole(path, data):
    temporary = f"{path}.{os.getpid()}.tmp"
    with open(temporary, "wb") as f:
        f.write(data)
    os.replace(temporary, path)


def part_pattern(store, table, month="*"):
    """The glob of a table's parts (the rejects' are in no month)."""
    if table == REJECTS:
        return os.path.join(store, REJECTS, "part-*.parquet")
    return os.path.join(store, table, f"month={month}", "part-*.parquet")


def _parts(store, table, month="*"):
    return sorted(glob.glob(part_pattern(store, table, month)))


def column_values(store, table, column, month="*"):
    """Every value of one column of a table's parts."""
    return [value for path in _parts(store, table, month)
            for value in pq.read_table(path, columns=[column]).column(column).to_pylist()]


def _batch_of(path):
    return os.path.basename(path)[len("part-"):-len(".parquet")]


def finish_interrupted(store):
    """After a compaction or merge that died half-way: temporary parts removed, parts a
    committed merge replaced removed, parts of batches without a jobs part (never committed)
    removed."""
    for table in (*STORE_TABLES, REJECTS):
        for path in glob.glob(os.path.join(store, table, "**", ".part-*.parquet.tmp"), recursive=True):
            os.unlink(path)
    replaced = set()
    for path in _parts(store, "jobs"):
        listed = (pq.read_schema(path).metadata or {}).get(REPLACES_KEY)
        replaced.update(json.loads(listed) if listed else ())
    for table in STORE_TABLES:
        for path in _parts(store, table):
            if _batch_of(path) in replaced:
                os.unlink(path)
    committed = {(os.path.dirname(path).rsplit("month=", 1)[1], _batch_of(path)) for path in _parts(store, "jobs")}
    for table in STORE_TABLES[1:]:
        for path in _parts(store, table):
            if (os.path.dirname(path).rsplit("month=", 1)[1], _batch_of(path)) not in committed:
                os.unlink(path)


def merge_months(store, merge_parts):
    """Each month with more than merge_parts jobs parts merged into one part per table; the
    number of months merged."""
    merged = 0
    months = {os.path.basename(os.path.dirname(path)).split("=", 1)[1] for path in _parts(store, "jobs")}
    for month in sorted(months):
        old = _parts(store, "jobs", month)
        if len(old) <= merge_parts:
            continue
        batches = [_batch_of(path) for path in old]
        batch = uuid.uuid4().hex
        parts = []
        for table in STORE_TABLES:
            paths = [p for p in _parts(store, table, month) if _batch_of(p) in batches]
            data = pa.concat_tables([pq.read_table(p, schema=FILE_SCHEMAS[table]) for p in paths]) if paths else \
                FILE_SCHEMAS[table].empty_table()
            if table == "latency_totals":
                data = latency_totals(data)
            elif table == "findings_totals":
                data = _merged_findings_totals(data)
            parts.append((_month_dir(store, table, month), data))
        _commit(store, parts, batch, replaces=batches)
        for table in STORE_TABLES:
            for path in _parts(store, table, month):
                if _batch_of(path) in batches:
                    os.unlink(path)
                    stop_point("merged part removed")
        merged += 1
    return merged
