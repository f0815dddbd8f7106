"""The probe's history: one SQLite file in WAL mode (no server, readers while the probe
writes, whole after a crash).

    targets   one row per probed file system (by name): its directory, sizes and io_mode
    samples   one row per op of a round: target, op (index in target.OPS), start (us since the
              epoch), duration (ns); kept raw_days
    minutes   per target, op and minute: count, median, p90, p95, p99 and max (s); kept
              aggregate_days
    hours     per target, op and hour: the durations' histogram (histogram.py); kept
              aggregate_days; the normal of an op is read from these
    meta      aggregated_until: the minute up to which minutes and hours are made

Aggregation is idempotent (an hour's histogram and a minute's row are made again from the raw
rows), so a probe killed at any point and restarted continues the same history.

A store is read by every user's job report, and anyone who can write the file (or the path it
is found at) can put anything in it. A reader therefore opens it read-only, takes only tables
(never views or virtual tables) with the probe's columns, reads no text or blob longer than the
probe writes, no more than MAX_TARGETS targets or MAX_ROWS samples at once, and stops after a
time limit (a progress handler interrupts the query under way): past any of these it raises a
StoreError naming the file and the problem.
"""
import math
import os
import pathlib
import sqlite3
import time

import numpy as np

from ...arrays import distinct
from . import histogram
from .target import OPS

SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS targets (id INTEGER PRIMARY KEY, name TEXT UNIQUE NOT NULL, dir TEXT NOT NULL,
    data_size INTEGER NOT NULL, pool_files INTEGER NOT NULL, io_mode TEXT);
CREATE TABLE IF NOT EXISTS samples (target INTEGER NOT NULL, op INTEGER NOT NULL, start_us INTEGER NOT NULL,
    ns INTEGER NOT NULL, PRIMARY KEY (target, op, start_us)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS minutes (target INTEGER NOT NULL, op INTEGER NOT NULL, minute INTEGER NOT NULL,
    count INTEGER NOT NULL, median REAL, p90 REAL, p95 REAL, p99 REAL, max REAL,
    PRIMARY KEY (target, op, minute)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS hours (target INTEGER NOT NULL, op INTEGER NOT NULL, hour INTEGER NOT NULL,
    bins BLOB NOT NULL, counts BLOB NOT NULL, PRIMARY KEY (target, op, hour)) WITHOUT ROWID;
"""
MINUTE_QUANTILES = (0.5, 0.9, 0.95, 0.99, 1.0)
US = 1_000_000
DB_MODE = 0o644      # latencies of a shared file system: every user's job report reads them
# What a reader takes: the tables it reads with the columns it reads of them.
READ_COLUMNS = {"meta": {"key", "value"}, "targets": {"id", "name", "dir", "io_mode"},
                "samples": {"target", "op", "start_us", "ns"}, "hours": {"target", "op", "hour", "bins", "counts"}}
READ_TIME_LIMIT_S = 10.0    # a job's report reads the store for at most this long
MAX_TARGETS = 256            # the probe makes one per file system
MAX_ROWS = 5_000_000         # samples of one target read at once: about 40 hours of rounds every 0.25 s
# The longest text or blob a reader takes: an hour's histogram is at most BINS 4-byte counts.
MAX_VALUE_BYTES = 4 * histogram.BINS
MAX_COLUMNS = 64
# SQLite's own memory, of the whole process (a reader's only): a key comparison reads a record
# whole, so a record of 600 MB would otherwise take 600 MB before any limit on values.
HEAP_LIMIT_BYTES = 64 << 20
ERROR_CHARS = 200             # of an error quoting a value, in a StoreError
PROGRESS_STEPS = 10_000      # SQLite steps between two looks at the time limit
FETCH_ROWS = 65_536
OP_PLACES = ", ".join("?" * len(OPS))


class StoreError(Exception):
    """A probe store that cannot be opened or read; str() names the file."""


def not_a_store(path, error):
    """The line for a store whose contents are not the probe's: the error cut short, since it
    may quote a value."""
    text = str(error)
    return f"{path}: not a probe store ({text if len(text) <= ERROR_CHARS else text[:ERROR_CHARS] + '...'})"


# What reading a store that is not the probe's (another program's tables of the same names,
# a damaged file) raises besides sqlite3.Error: values of the wrong type or size.
DAMAGED_STORE_ERRORS = (sqlite3.Error, ValueError, TypeError, OverflowError, KeyError)


class Store:
    """The probe's store: writable=True for the probe itself; otherwise read-only, within
    time_limit_s seconds from the opening (the module's doc)."""

    def __init__(self, path, writable=False, time_limit_s=READ_TIME_LIMIT_S):
        self.path = path
        self.writable = writable
        self.time_limit_s = time_limit_s
        self.deadline = math.inf if writable else time.monotonic() + time_limit_s
        try:
            if writable:
                _create_readable(path)
                self.db = sqlite3.connect(path, isolation_level=None)
                self.db.execute("PRAGMA journal_mode=WAL")
                self.db.execute("PRAGMA synchronous=NORMAL")
                self.db.executescript(SCHEMA)
            else:
                if not os.path.isfile(path):
                    raise StoreError(f"{path}: no probe store there")
                uri = pathlib.Path(path).absolute().as_uri()   # percent-encoded: any name opens
                self.db = sqlite3.connect(f"{uri}?mode=ro", uri=True, isolation_level=None,
                                          timeout=min(5.0, time_limit_s))
                self.db.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, MAX_VALUE_BYTES)
                self.db.execute(f"PRAGMA hard_heap_limit = {HEAP_LIMIT_BYTES}")
                self.db.set_progress_handler(self._past_deadline, PROGRESS_STEPS)
                self._check_tables()
        except (sqlite3.Error, MemoryError) as error:
            raise self._read_error(error) from None

    def _past_deadline(self):
        return time.monotonic() > self.deadline

    def _read_error(self, error):
        """The StoreError of a failed read: the time limit, or what SQLite found."""
        if self._past_deadline():
            return StoreError(f"{self.path}: reading it took longer than {self.time_limit_s:g} s: stopped")
        if isinstance(error, MemoryError):
            return StoreError(f"{self.path}: not a probe store (reading it takes more than "
                              f"{HEAP_LIMIT_BYTES >> 20} MiB)")
        return StoreError(not_a_store(self.path, error))

    def _check_tables(self):
        """Each table a reader reads is a table (a view could compute rows without end) with
        the columns read."""
        kinds = dict(self._rows("SELECT name, CASE WHEN sql LIKE 'CREATE VIRTUAL%' THEN 'virtual table' ELSE type END "
                                "FROM sqlite_master WHERE name IN (?, ?, ?, ?)", tuple(READ_COLUMNS),
                                len(READ_COLUMNS), "tables of the same name"))
        for table, columns in READ_COLUMNS.items():
            if kinds.get(table) != "table":
                problem = f"{table} is a {kinds[table]}" if table in kinds else f"no table {table}"
                raise StoreError(f"{self.path}: not a probe store ({problem})")
            missing = columns - {name for _, name, *_ in self._rows(f"PRAGMA table_info({table})", (), MAX_COLUMNS,
                                                                    f"columns in {table}")}
            if missing:
                raise StoreError(f"{self.path}: not a probe store ({table} has no column {', '.join(sorted(missing))})")

    def _chunks(self, sql, args, most, what):
        """The rows of a query, FETCH_ROWS at a time: a StoreError if there are more than `most`
        (`what` they are), or once the time limit has passed."""
        if self._past_deadline():
            raise self._read_error(None)
        count = 0
        try:
            cursor = self.db.execute(sql, args)
            while chunk := cursor.fetchmany(min(FETCH_ROWS, most + 1)):
                count += len(chunk)
                if count > most:
                    raise StoreError(f"{self.path}: more than {most:,} {what} to read at once")
                yield chunk
        except (sqlite3.Error, MemoryError) as error:
            raise self._read_error(error) from None

    def _rows(self, sql, args, most, what):
        return [row for chunk in self._chunks(sql, args, most, what) for row in chunk]

    def _array(self, sql, args, columns, most, what):
        """_rows as an int64 array of `columns` columns, converted a chunk at a time."""
        chunks = [np.array(chunk, dtype=np.int64).reshape(-1, columns) for chunk in self._chunks(sql, args, most, what)]
        return np.concatenate(chunks) if chunks else np.zeros((0, columns), dtype=np.int64)

    def close(self):
        """Closed; the probe's store is left in rollback-journal mode, so that a user's report
        reads it from a directory the user cannot write (a reader of a WAL database needs its
        -shm file, which SQLite removes with the last connection). A reader still connected
        keeps it in WAL mode, as does a probe killed: its -wal and -shm files stay readable."""
        if self.writable:
            try:
                self.db.execute("PRAGMA journal_mode=DELETE")
            except sqlite3.Error:
                pass
        self.db.close()

    # ---- writing (the probe) ----

    def target_id(self, target, io_mode):
        self.db.execute("INSERT INTO targets (name, dir, data_size, pool_files, io_mode) VALUES (?, ?, ?, ?, ?) "
                        "ON CONFLICT (name) DO UPDATE SET dir = excluded.dir, data_size = excluded.data_size, "
                        "pool_files = excluded.pool_files, io_mode = excluded.io_mode",
                        (target.name, target.dir, target.data_size, target.pool_files, io_mode))
        return self.db.execute("SELECT id FROM targets WHERE name = ?", (target.name,)).fetchone()[0]

    def add_samples(self, rows):
        """rows: (target id, op, start s, duration s), committed together."""
        with self.db:
            self.db.execute("BEGIN")
            self.db.executemany("INSERT OR REPLACE INTO samples VALUES (?, ?, ?, ?)",
                                [(target, op, round(start * US), max(1, round(seconds * 1e9)))
                                 for target, op, start, seconds in rows])

    def aggregate(self, until_s):
        """Make the minutes and hours of the raw rows up to the last whole minute before until_s."""
        until_minute = int(until_s // 60) * 60
        done = self._meta("aggregated_until")
        if done is None:
            first = self.db.execute("SELECT min(start_us) FROM samples").fetchone()[0]
            if first is None:
                return
            done = first // US // 60 * 60
        if done >= until_minute:
            return
        with self.db:
            self.db.execute("BEGIN")
            for hour in range(done // 3600 * 3600, until_minute, 3600):
                self._aggregate_hour(hour, max(done, hour), min(hour + 3600, until_minute))
            self.db.execute("INSERT OR REPLACE INTO meta VALUES ('aggregated_until', ?)", (until_minute,))

    def _aggregate_hour(self, hour, first_minute, until_minute):
        target, op, start, seconds = self._raw(hour, until_minute)
        series = target.astype(np.int64) * len(OPS) + op
        for key in distinct(series):
            mine = series == key
            bins, counts = histogram.encode(seconds[mine])
            self.db.execute("INSERT OR REPLACE INTO hours VALUES (?, ?, ?, ?, ?)",
                            (int(key // len(OPS)), int(key % len(OPS)), hour, bins, counts))
            minutes = (start[mine] // 60).astype(np.int64) * 60
            inside = minutes >= first_minute
            count, quantiles = histogram.group_quantiles(seconds[mine][inside], np.ones(int(inside.sum())),
                                                         (minutes[inside] - first_minute) // 60,
                                                         (until_minute - first_minute) // 60, MINUTE_QUANTILES)
            self.db.executemany("INSERT OR REPLACE INTO minutes VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                                [(int(key // len(OPS)), int(key % len(OPS)), first_minute + 60 * index,
                                  int(count[index]), *map(float, quantiles[:, index]))
                                 for index in np.flatnonzero(count)])

    def prune(self, now_s, raw_days, aggregate_days):
        """Drop raw rows older than raw_days (once aggregated) and aggregates older than
        aggregate_days."""
        aggregated = self._meta("aggregated_until") or 0
        raw_limit = min(now_s - raw_days * 86400, aggregated)
        aggregate_limit = now_s - aggregate_days * 86400
        with self.db:
            self.db.execute("BEGIN")
            for target, in self.db.execute("SELECT id FROM targets").fetchall():
                for op in range(len(OPS)):
                    self.db.execute("DELETE FROM samples WHERE target = ? AND op = ? AND start_us < ?",
                                    (target, op, int(raw_limit * US)))
                    for table, column in (("minutes", "minute"), ("hours", "hour")):
                        self.db.execute(f"DELETE FROM {table} WHERE target = ? AND op = ? AND {column} < ?",
                                        (target, op, aggregate_limit))

    # ---- reading (reports, the exporter) ----

    def targets(self):
        """{name: (id, dir, io_mode)}."""
        rows = self._rows("SELECT id, name, dir, io_mode FROM targets ORDER BY name", (), MAX_TARGETS, "targets")
        for target, name, directory, io_mode in rows:
            if not (type(target) is int and isinstance(name, str) and isinstance(directory, str) and
                    isinstance(io_mode, (str, type(None)))):
                raise StoreError(f"{self.path}: not a probe store (a target of id, name, directory or I/O mode "
                                 "of the wrong type)")
        return {name: (target, directory, io_mode) for target, name, directory, io_mode in rows}

    def raw(self, target, since_s, until_s):
        """(op, start s, duration s) arrays of one target's raw rows in [since, until)."""
        rows = self._array(f"SELECT op, start_us, ns FROM samples WHERE target = ? AND op IN ({OP_PLACES}) "
                           "AND start_us >= ? AND start_us < ?",
                           (target, *range(len(OPS)), int(since_s * US), int(until_s * US)), 3, MAX_ROWS,
                           "samples of one target in the window (whole-hour intervals read the hourly histograms)")
        return rows[:, 0], rows[:, 1] / US, rows[:, 2] / 1e9

    def _raw(self, since_s, until_s):
        """(target, op, start s, duration s) of all targets' raw rows in [since, until)."""
        rows = np.array(self.db.execute(
            "SELECT target, op, start_us, ns FROM samples WHERE start_us >= ? AND start_us < ?",
            (int(since_s * US), int(until_s * US))).fetchall(), dtype=np.int64).reshape(-1, 4)
        return rows[:, 0], rows[:, 1], rows[:, 2] / US, rows[:, 3] / 1e9

    def hour_histograms(self, target, since_s, until_s):
        """(op, hour start s, bin, count) arrays of one target's hours starting in [since, until):
        at most one histogram per op and hour."""
        hours_asked = max(0, math.ceil((until_s - since_s) / 3600)) + 1
        rows = self._rows(f"SELECT op, hour, bins, counts FROM hours WHERE target = ? AND op IN ({OP_PLACES}) "
                          "AND hour >= ? AND hour < ?", (target, *range(len(OPS)), int(since_s), int(until_s)),
                          hours_asked * len(OPS), "hourly histograms of one target in the window")
        if not rows:
            return (np.zeros(0, dtype=np.int64),) * 4
        ops, hours, bins, counts = zip(*rows)
        lengths = [len(blob) // 2 for blob in bins]
        bins, counts = histogram.decode(b"".join(bins), b"".join(counts))
        if bins.size != counts.size or bins.max(initial=0) >= histogram.BINS:
            raise ValueError("hourly histograms of bins and counts that differ in length or bins out of range")
        return np.repeat(ops, lengths), np.repeat(hours, lengths), bins, counts

    def oldest_raw(self, target):
        """The start (s) of the target's oldest raw row, or None."""
        first = self._oldest("samples", "start_us", target)
        return None if first is None else first / US

    def oldest_hour(self, target):
        """The start (s) of the target's oldest hourly histogram, or None."""
        return self._oldest("hours", "hour", target)

    def _oldest(self, table, column, target):
        """The least column of the target's rows, op by op (each a step in the primary key)."""
        return min((row[0] for op in range(len(OPS)) for row in self._rows(
            f"SELECT min({column}) FROM {table} WHERE target = ? AND op = ?", (target, op), 1, "minimum")
            if row[0] is not None), default=None)

    def aggregated_until(self):
        return self._meta("aggregated_until") or 0

    def _meta(self, key):
        rows = self._rows("SELECT value FROM meta WHERE key = ?", (key,), 1, f"meta rows of {key}")
        return rows[0][0] if rows else None


def _create_readable(path):
    """The store file, made mode DB_MODE if new (SQLite gives its -wal and -shm the same mode)."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    os.close(os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, DB_MODE))
