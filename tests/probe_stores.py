"""Probe stores for the tests: one as the probe makes it, and hostile ones, each made from it
as someone who can write the store (or put a file at its path) could: views and virtual tables
in place of its tables, huge values, values of the wrong type or out of range, very many
targets, histograms or samples, triggers, a schema that takes minutes to read, damaged bytes."""
import os
import random
import time

from ioassess.site.probe.config import Target
from ioassess.site.probe.store import Store
from ioassess.site.probe.synthetic import add_history
from ioassess.site.probe.target import IO_DIRECT

SEED = 20261127
HISTORY_S = 2 * 3600
# SQLite parses a schema whole before the first query, in a time that grows faster than the
# schema: 150,000 views take a minute (100,000: 20 s here), and less than 64 MiB.
SCHEMA_VIEWS = 150_000
ENDLESS = "WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n)"
ENDLESS_SAMPLES = f"CREATE VIEW samples (target, op, start_us, ns) AS {ENDLESS} SELECT 1, 0, 0, 1 FROM n WHERE x < 0"
US = 1_000_000


def probe_store(path, history_s=0):
    """A store as the probe makes it: one target (id 1) on /, with rounds every second over the
    history_s seconds before now, aggregated up to the last hour."""
    store = Store(str(path), writable=True)
    target = store.target_id(Target("root", "/", 1 << 20, 10), IO_DIRECT)
    now = time.time()
    if history_s:
        add_history(store, target, now - history_s, history_s)
        store.aggregate(now - 3600)
    store.close()
    return path


def endless_store(path):
    """A store whose samples are a view over a recursive query that never ends."""
    return _changed(probe_store(path), f"DROP TABLE samples; {ENDLESS_SAMPLES}")


def slow_schema_store(path):
    """A store whose schema holds SCHEMA_VIEWS views, written into sqlite_master directly."""
    store = Store(str(probe_store(path)), writable=True)
    store.db.execute("PRAGMA writable_schema = ON")
    with store.db:
        store.db.execute("BEGIN")
        store.db.executemany("INSERT INTO sqlite_master VALUES ('view', ?, ?, 0, ?)",
                             [(f"v{i}", f"v{i}", f"CREATE VIEW v{i} AS SELECT * FROM targets WHERE id = {i}")
                              for i in range(SCHEMA_VIEWS)])
    store.db.close()
    return path


def _changed(path, script, *rows):
    """The store at path after script (SQL statements) and, for each (statement, parameters) of
    rows, executemany; in rollback-journal mode, as a stopped probe leaves it."""
    store = Store(str(path), writable=True)
    store.db.executescript(script)
    for statement, parameters in rows:
        with store.db:
            store.db.execute("BEGIN")
            store.db.executemany(statement, parameters)
    store.close()
    return path


def _recent_us(count, step_s=1.0):
    """count start times (µs) ending now, step_s apart."""
    now = time.time()
    return (round((now - (count - i) * step_s) * US) for i in range(count))


def _damaged(path, seed):
    """Random bytes written over the store's pages (its header page kept, so that SQLite reads
    on into the damage)."""
    data = bytearray(open(probe_store(path, HISTORY_S), "rb").read())
    rng = random.Random(seed)
    for _ in range(64):
        at = rng.randrange(4096, len(data) - 8)
        data[at:at + 8] = rng.randbytes(8)
    with open(path, "wb") as out:
        out.write(data)
    return path


def _cut_short(path):
    size = os.path.getsize(probe_store(path, HISTORY_S))
    os.truncate(path, size // 2)
    return path


def _fifo(path):
    os.mkfifo(path)
    return path


HOSTILE = {
    "samples an endless recursive view": endless_store,
    "targets an endless recursive view": lambda path: _changed(
        probe_store(path, HISTORY_S), f"DROP TABLE targets; CREATE VIEW targets (id, name, dir, io_mode) AS {ENDLESS} "
                                      "SELECT x, 'root', '/', 'O_DIRECT' FROM n"),
    "hours a view of itself crossed eight times": lambda path: _changed(
        probe_store(path, HISTORY_S), "ALTER TABLE hours RENAME TO h; CREATE VIEW hours AS SELECT h.* FROM h, h AS a, "
                                      "h AS b, h AS c, h AS d, h AS e, h AS f, h AS g"),
    "samples a virtual table": lambda path: _changed(
        probe_store(path), "DROP TABLE samples; CREATE VIRTUAL TABLE samples USING fts5(target, op, start_us, ns)"),
    "tables without the probe's columns": lambda path: _changed(
        probe_store(path), "DROP TABLE hours; CREATE TABLE hours (target, op, hour)"),
    "a 600 MB blob in an hour's histogram": lambda path: _changed(
        probe_store(path, HISTORY_S), "UPDATE hours SET bins = zeroblob(600 * 1024 * 1024) WHERE op = 0 AND hour = "
                                      "(SELECT min(hour) FROM hours)"),
    "a 50 MB target name": lambda path: _changed(
        probe_store(path), "UPDATE targets SET name = CAST(zeroblob(50 * 1024 * 1024) AS TEXT)"),
    "a 50 MB value of aggregated_until": lambda path: _changed(
        probe_store(path, HISTORY_S), "UPDATE meta SET value = zeroblob(50 * 1024 * 1024)"),
    "durations that are text": lambda path: _changed(
        probe_store(path, HISTORY_S), "", ("INSERT OR REPLACE INTO samples VALUES (1, 0, ?, 'slow')",
                                           [(start,) for start in _recent_us(10)])),
    "starts that are reals of 1e300": lambda path: _changed(
        probe_store(path, HISTORY_S), "INSERT INTO samples VALUES (1, 0, 1e300, 5), (1, 1, -1e300, 5)"),
    "ops out of range and target ids that are text": lambda path: _changed(
        probe_store(path, HISTORY_S), "ALTER TABLE targets RENAME TO t; CREATE TABLE targets (id, name, dir, "
                                      "data_size, pool_files, io_mode); INSERT INTO targets SELECT 'one', name, dir, "
                                      "data_size, pool_files, io_mode FROM t",
        ("INSERT OR REPLACE INTO samples VALUES (1, ?, ?, 5)",
         [(op, start) for op, start in zip((-1, 8, 2**62, -2**63), _recent_us(4))])),
    "histogram bins past the last bin": lambda path: _changed(
        probe_store(path, HISTORY_S), "UPDATE hours SET bins = CAST(x'ffff' || substr(bins, 3) AS BLOB)"),
    "histogram blobs of odd length": lambda path: _changed(
        probe_store(path, HISTORY_S), "UPDATE hours SET bins = CAST(bins || x'00' AS BLOB)"),
    "5,000 targets": lambda path: _changed(
        probe_store(path, HISTORY_S), "", ("INSERT INTO targets (name, dir, data_size, pool_files, io_mode) "
                                           "VALUES (?, ?, 1, 1, 'O_DIRECT')",
                                           [(f"t{i}", f"/no/such/dir/{i}") for i in range(5000)])),
    "an hourly histogram for every second": lambda path: _changed(
        probe_store(path), "", ("INSERT INTO hours VALUES (1, 0, ?, x'0100', x'01000000')",
                                [(start // US,) for start in _recent_us(30_000)])),
    "6,000,000 samples of one target in a day": lambda path: _changed(
        probe_store(path), "", ("INSERT INTO samples VALUES (1, ?, ?, 1000)",
                                ((i % 8, start) for i, start in enumerate(_recent_us(6_000_000, 0.01))))),
    "triggers that insert without end": lambda path: _changed(
        probe_store(path, HISTORY_S), "CREATE TRIGGER more AFTER INSERT ON samples BEGIN INSERT INTO samples "
                                      "VALUES (new.target, new.op, new.start_us + 1, new.ns); END; "
                                      "CREATE TRIGGER again AFTER UPDATE ON meta BEGIN UPDATE meta SET value = "
                                      "value + 1; END"),
    "a schema of 150,000 views": slow_schema_store,
    "random bytes in its pages (1)": lambda path: _damaged(path, SEED),
    "random bytes in its pages (2)": lambda path: _damaged(path, SEED + 1),
    "random bytes in its pages (3)": lambda path: _damaged(path, SEED + 2),
    "cut short": _cut_short,
    "a FIFO at its path": _fifo,
    "absurd numbers": lambda path: _changed(
        probe_store(path, HISTORY_S), "UPDATE meta SET value = 9223372036854775807; "
                                      "INSERT INTO hours VALUES (1, 0, -9223372036854775808, x'0100', x'01000000')",
        ("INSERT OR REPLACE INTO samples VALUES (1, 3, ?, ?)",
         [(start, ns) for start, ns in zip(_recent_us(3), (-1, 0, 2**63 - 1))])),
}

