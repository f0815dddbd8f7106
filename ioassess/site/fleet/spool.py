"""The write path of a job's end (docs/fleet.md, "The spool"): the job's record dropped into
STORE/spool as one small file, written whole under a temporary name, then renamed. No lock and
no wait: another job's end, or the compaction reading the spool, never sees a file half-written.
No pyarrow: the epilog's parent spools."""
import json
import os
import re
import uuid

from .schema import check_record

SPOOL = "spool"
SPOOL_NAME = re.compile(r"^[A-Za-z0-9._-]{1,200}-[0-9a-f]{64}\.json$")
# A spooled record bigger than this is refused (a job's record is a few KiB).
MAX_RECORD_BYTES = 1 << 20


def spool_record(store, record):
    """The record, checked (schema.check_record), as STORE/spool/<job key>-<hash>.json; its path."""
    check_record(record)
    job = record["job"]
    name = f"{_safe_key(job['job_key'])}-{job['record_hash']}.json"
    spool = os.path.join(store, SPOOL)
    os.makedirs(spool, mode=0o700, exist_ok=True)
    path = os.path.join(spool, name)
    temporary = os.path.join(spool, f".{name}.{os.getpid()}.{uuid.uuid4().hex[:8]}")
    data = json.dumps(record, separators=(",", ":"), allow_nan=False).encode()
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)
    os.replace(temporary, path)
    return path


def _safe_key(key):
    return re.sub(r"[^A-Za-z0-9._-]", "_", key)[:200] or "_"
