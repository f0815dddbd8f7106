"""One probed file system: its files, made once, and one round of the eight timed ops.

Everything lives in DIR/ioassess-probe/ (mode 0700), whose `lock` the probe holds (flock) while it
runs, so that no two probes take each other's pool files: `data`, a file of exactly data_size bytes
written once in full (so that reads reach the disk, not holes), and `pool/`, pool_files files of
POOL_FILE_BYTES named by sequence number. A round (Kunkel & Betke 2019, section 3.1) reads and
writes one random 1 MiB block and one random 4 KiB block of `data`, then creates the next pool
file, stats, reads and deletes the oldest (MDWorkbench's pattern): between rounds the pool holds
exactly pool_files files and `data` never grows.

Data ops use O_DIRECT; where the file system refuses it (tmpfs), the fallback is O_DSYNC writes
and reads after posix_fadvise(DONTNEED) of the block, and the store says so (io_mode).
"""
import errno
import fcntl
import mmap
import os
import random
import stat
import time

PROBE_DIR = "ioassess-probe"
DATA_FILE = "data"
POOL_DIR = "pool"
LOCK_FILE = "lock"
HOLDER_BYTES = 200            # of the lock file: whose it is, for the message of another probe
POOL_FILE_BYTES = 3901          # MDWorkbench's and IO-500's small file
BLOCK_SIZES = (1 << 20, 4096)
OPS = ("read_1MiB", "write_1MiB", "read_4KiB", "write_4KiB", "create", "stat", "read", "delete")
DATA_OPS = OPS[:4]
IO_DIRECT, IO_FALLBACK = "O_DIRECT", "O_DSYNC writes, reads after fadvise(DONTNEED)"


class ProbeFailure(Exception):
    """A round stopped at an op; str() names the op and the error."""


class TargetUnusable(ProbeFailure):
    """The target's directory is missing, or another probe is probing it."""


class TargetProbe:
    def __init__(self, target, seed=None):
        self.target = target
        self.home = os.path.join(target.dir, PROBE_DIR)
        self.data_path = os.path.join(self.home, DATA_FILE)
        self.pool_path = os.path.join(self.home, POOL_DIR)
        self.random = random.Random(seed)
        self.block = mmap.mmap(-1, BLOCK_SIZES[0])   # page aligned, as O_DIRECT needs
        self.block.write(self.random.randbytes(BLOCK_SIZES[0]))
        self.small_payload = self.random.randbytes(POOL_FILE_BYTES)
        self.io_mode = None
        self.device = None         # st_dev of target.dir when it was first prepared
        self.oldest = self.next = 0
        self.ready = False
        self.lock = None           # the lock file, held from the first preparation on

    def claim(self):
        """Before the first round: the target's directory must be one, and no other probe's
        (TargetUnusable); what else is wrong with it is left to the rounds."""
        try:
            status = os.stat(self.target.dir)
        except (FileNotFoundError, NotADirectoryError) as error:
            raise TargetUnusable(f"{self.target.dir}: {error.strerror}: nothing to probe") from None
        except OSError:
            return
        if not stat.S_ISDIR(status.st_mode):
            raise TargetUnusable(f"{self.target.dir}: not a directory: nothing to probe")
        try:
            self._check_home()
            self._take_lock()
        except OSError:
            pass

    def prepare(self):
        """Make (or check) the data file and the pool; sets io_mode. Raises ProbeFailure."""
        try:
            self._check_home()
            self._take_lock()
            self._make_data_file()
            self.io_mode = self._io_mode()
            self._fill_pool()
        except OSError as error:
            raise ProbeFailure(f"preparing {self.home}: {_reason(error)}") from None
        self.ready = True

    def round(self, record):
        """The eight ops, in OPS order, each timed alone: record(op index, start time (s since
        the epoch), duration (s)). Raises ProbeFailure at the first op that fails; the target
        is then prepared again before its next round."""
        if not self.ready:
            self.prepare()
        op = 0
        try:
            self._check_device()
            flags = os.O_RDWR | (os.O_DIRECT if self.io_mode == IO_DIRECT else os.O_DSYNC)
            fd = os.open(self.data_path, flags | os.O_NOFOLLOW)
            try:
                for size in BLOCK_SIZES:
                    offset = self.random.randrange(self.target.data_size // size) * size
                    buffer = memoryview(self.block)[:size]
                    if self.io_mode != IO_DIRECT:
                        os.posix_fadvise(fd, offset, size, os.POSIX_FADV_DONTNEED)
                    _timed(record, op, os.preadv, fd, [buffer], offset)
                    op += 1
                    offset = self.random.randrange(self.target.data_size // size) * size
                    _timed(record, op, os.pwritev, fd, [buffer], offset)
                    op += 1
            finally:
                os.close(fd)
            _timed(record, op, self._create, self._pool_file(self.next))
            self.next += 1
            oldest = self._pool_file(self.oldest)
            for op, action in enumerate((os.stat, _read_all, os.unlink), start=op + 1):
                _timed(record, op, action, oldest)
            self.oldest += 1
        except OSError as error:
            self.ready = False
            raise ProbeFailure(f"{OPS[op]}: {_reason(error)}") from None

    def cleanup(self):
        """Remove the probe's files (only those it makes) and its directory; returns how many.
        TargetUnusable while another probe is probing the target."""
        if os.path.isdir(self.home):
            self._take_lock()
        removed = 0
        for name in (_sequence_names(self.pool_path) if os.path.isdir(self.pool_path) else []):
            os.unlink(os.path.join(self.pool_path, name))
            removed += 1
        for path in (self.data_path, self.data_path + ".part", os.path.join(self.home, LOCK_FILE)):
            if os.path.lexists(path):
                os.unlink(path)
                removed += 1
        for directory in (self.pool_path, self.home):
            if os.path.isdir(directory):
                os.rmdir(directory)
        return removed

    def _check_home(self):
        """The target directory must exist (the probe never makes a mount point's directory: it
        would probe the file system below), and the probe's own directory be the probe's."""
        status = os.stat(self.target.dir)
        if self.device is None:
            self.device = status.st_dev
        self._check_device()
        try:
            os.mkdir(self.home, 0o700)
        except FileExistsError:
            pass
        status = os.lstat(self.home)
        if not stat.S_ISDIR(status.st_mode) or status.st_uid != os.geteuid():
            raise OSError(f"{self.home} is not a directory of the probe's user (uid {os.geteuid()})")
        os.makedirs(self.pool_path, 0o700, exist_ok=True)

    def _take_lock(self):
        """Hold the lock file (made if missing) from now on; TargetUnusable if another process
        holds it. Where the file system has no locks, the probe goes without."""
        if self.lock is not None:
            return
        fd = os.open(os.path.join(self.home, LOCK_FILE), os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, HOLDER_BYTES, 0).decode(errors="replace").strip()
            os.close(fd)
            raise TargetUnusable(f"{self.target.dir}: another probe is probing it" +
                                 (f" ({holder})" if holder else "")) from None
        except OSError as error:
            os.close(fd)
            if error.errno in (errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOSYS, errno.EINVAL, errno.EBADF):
                return
            raise
        self.lock = fd
        try:
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"pid {os.getpid()} on {os.uname().nodename}\n".encode(), 0)
        except OSError:   # held all the same; only the message of another probe lacks its holder
            pass

    def _check_device(self):
        if os.stat(self.target.dir).st_dev != self.device:
            raise OSError(f"{self.target.dir} is no longer on the file system it was on (unmounted?)")

    def _make_data_file(self):
        """data: written whole once, through data.part renamed when complete."""
        try:
            if os.lstat(self.data_path).st_size == self.target.data_size:
                return
        except FileNotFoundError:
            pass
        partial = self.data_path + ".part"
        fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
        try:
            for offset in range(0, self.target.data_size, BLOCK_SIZES[0]):
                length = min(BLOCK_SIZES[0], self.target.data_size - offset)
                os.pwrite(fd, memoryview(self.block)[:length], offset)
            os.fsync(fd)
        except OSError:
            os.unlink(partial)
            raise
        finally:
            os.close(fd)
        os.replace(partial, self.data_path)

    def _io_mode(self):
        try:
            os.close(os.open(self.data_path, os.O_RDWR | os.O_DIRECT | os.O_NOFOLLOW))
            return IO_DIRECT
        except OSError as error:
            if error.errno != errno.EINVAL:
                raise
            return IO_FALLBACK

    def _fill_pool(self):
        """pool_files files numbered oldest .. next - 1, the newest kept: older ones removed,
        missing ones made."""
        numbers = {int(name) for name in _sequence_names(self.pool_path)}
        self.next = max(max(numbers, default=-1) + 1, self.target.pool_files)
        self.oldest = self.next - self.target.pool_files
        for number in sorted(numbers):
            if number < self.oldest:
                os.unlink(self._pool_file(number))
        for number in range(self.oldest, self.next):
            if number not in numbers:
                self._create(self._pool_file(number))

    def _pool_file(self, number):
        return os.path.join(self.pool_path, str(number))

    def _create(self, path):
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        try:
            os.write(fd, self.small_payload)
        except OSError as error:
            os.close(fd)
            os.unlink(path)
            raise OSError(error.errno, error.strerror, path) from None
        os.close(fd)


def _timed(record, op, action, *args):
    start = time.time()
    began = time.perf_counter()
    action(*args)
    record(op, start, time.perf_counter() - began)


def _read_all(path):
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    try:
        while os.read(fd, 65536):
            pass
    finally:
        os.close(fd)


def _sequence_names(directory):
    return [name for name in os.listdir(directory) if name.isdigit()]


def _reason(error):
    if error.strerror:
        return f"{error.filename}: {error.strerror}" if error.filename else error.strerror
    return str(error)
