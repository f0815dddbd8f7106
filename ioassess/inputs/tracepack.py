"""Trace packs: a node's trace files in one file, `*.iotpack` (docs/trace-format.md, "Packs").

Every process image writes its own trace; a job of 100,000 ranks would make 100,000 files in one
shared directory. With the per-node layout (docs/epilog.md) the recorder writes to node-local
storage and the epilog of each node packs the job's traces there into one pack on the shared
file system (write_pack); the reader (ioassess/inputs/trace.py) reads each member of a pack as it
reads a trace file, from the pack, without extracting it (pack_entries, PackMember.open_trace).

Layout, little-endian: the header (PACK_HEADER_DTYPE, 64 bytes), the members' stored bytes, then
the index: the member records (MEMBER_DTYPE), their extents (EXTENT_DTYPE) and their names. Only
a member's data is stored: its holes (SEEK_DATA / SEEK_HOLE) and its pages of zeros (a trace's
reserved, unused space) are not, and read back as zeros. A pack is written under a temporary
name beside its final one, synced, and renamed into place only when complete.
"""
import bisect
import errno
import os
import stat
import tempfile
import threading
import zlib

import numpy as np

from .trace import DAMAGED, NOT_A_TRACE, NOT_OWNED, UNREADABLE, TraceFileError

PACK_SUFFIX = ".iotpack"
PACK_MAGIC = b"IOTPACK1"
PACK_VERSION = 1
PACK_HEADER_DTYPE = np.dtype([
    ("magic", "S8"),
    ("version", "<u4"),
    ("header_bytes", "<u4"),    # 64: where the members' bytes start
    ("members", "<u8"),         # member records in the index
    ("extents", "<u8"),         # extent records in the index
    ("names_bytes", "<u8"),     # bytes of the members' names, after the extents
    ("index_offset", "<u8"),    # the index: members, extents, names; it ends the file
    ("pack_bytes", "<u8"),      # the whole file's size
    ("index_crc32", "<u4"),     # zlib.crc32 of the index's bytes
    ("reserved", "<u4"),
])
MEMBER_DTYPE = np.dtype([
    ("name_offset", "<u8"),     # into the names
    ("name_bytes", "<u4"),
    ("uid", "<u4"),             # the trace file's owner when it was packed
    ("mode", "<u4"),            # its st_mode
    ("extent_count", "<u4"),
    ("size", "<u8"),            # its size; what no extent covers reads as zeros
    ("first_extent", "<u8"),    # its extents are [first_extent, first_extent + extent_count)
    ("mtime_ns", "<i8"),
])
EXTENT_DTYPE = np.dtype([
    ("member_offset", "<u8"),   # where in the member the bytes go
    ("pack_offset", "<u8"),     # where in the pack they are
    ("length", "<u8"),
])
HEADER_BYTES = PACK_HEADER_DTYPE.itemsize
assert (HEADER_BYTES, MEMBER_DTYPE.itemsize, EXTENT_DTYPE.itemsize) == (64, 48, 24)
# Beyond what any pack the epilog writes holds: a header that claims more is refused before
# anything is allocated for it.
MAX_MEMBERS = 1 << 24
MAX_EXTENTS = 1 << 28
MAX_NAME_BYTES = 255            # a file name (NAME_MAX)
MAX_MEMBER_BYTES = 1 << 48      # a member's size (256 TiB; the recorder's traces are at most GiBs)
# The granularity of the zeros left out of a member (the trace's page), and how much of a member
# the writer reads at a time.
ZERO_PAGE = 4096
COPY_BYTES = 8 << 20


class PackError(Exception):
    """A pack cannot be written; str() is one line naming the file."""


# ---- writing ----

def write_pack(pack_path, trace_paths, uid=None, on_member=None):
    """Pack the files trace_paths into pack_path: written as a temporary file beside it (mode
    0600), synced, renamed into place when complete, its directory synced; an error or a kill
    leaves nothing under pack_path (a kill leaves the temporary `.NAME.XXXX.part`). A file that
    is not a regular file (not followed if a link), belongs to another uid than uid (when given)
    or changes while it is read is left out. Members are stored by their base names, sorted.
    Returns (the paths packed, ["PATH: problem" of each file left out]). on_member(path) is
    called after each member is written (a test's view of a packer at work). Raises PackError
    (the pack cannot be written) or OSError of pack_path."""
    directory, name = os.path.split(os.path.abspath(pack_path))
    by_name = sorted((os.path.basename(path), path) for path in trace_paths)
    names = [os.fsencode(base) for base, _ in by_name]
    if len(set(names)) != len(names):
        raise PackError(f"{pack_path}: two of the files to pack have the same name")
    if any(not 0 < len(base) <= MAX_NAME_BYTES for base in names):
        raise PackError(f"{pack_path}: a file to pack has a name longer than {MAX_NAME_BYTES} bytes")
    fd, temporary = tempfile.mkstemp(dir=directory, prefix=f".{name}.", suffix=".part")
    try:
        with os.fdopen(fd, "wb", buffering=1 << 20) as out:
            os.fchmod(out.fileno(), 0o600)
            writer = _Writer(out)
            packed, left_out = [], []
            for base, path in by_name:
                problem = writer.add(path, os.fsencode(base), uid)
                if problem:
                    left_out.append(f"{path}: {problem}")
                else:
                    packed.append(path)
                    if on_member:
                        out.flush()
                        on_member(path)
            writer.finish()
            out.flush()
            os.fsync(out.fileno())
        os.rename(temporary, pack_path)
    except BaseException:
        try:
            os.unlink(temporary)
        except OSError:
            pass
        raise
    _sync_directory(directory)
    return packed, left_out


class _Writer:
    """The pack being written to out (a binary file at offset 0): members, then index."""

    def __init__(self, out):
        self.out = out
        self.offset = HEADER_BYTES
        out.write(bytes(HEADER_BYTES))   # the header is written last, once the index is known
        self.members, self.extents, self.names = [], [], bytearray()

    def add(self, path, name, uid):
        """Store one member; the problem, if it is left out (None when it is stored)."""
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        except OSError as error:
            return ("not a regular file: left out" if error.errno == errno.ELOOP
                    else f"cannot read: {error.strerror}")
        try:
            status = os.fstat(fd)
            if not stat.S_ISREG(status.st_mode):
                return "not a regular file: left out"
            if uid is not None and status.st_uid != uid:
                return f"belongs to uid {status.st_uid}, not the job's user: left out"
            if status.st_size > MAX_MEMBER_BYTES:
                return f"larger than the {MAX_MEMBER_BYTES} bytes a pack's member may have: left out"
            first, mark = len(self.extents), self.offset
            try:
                for start, data in _stored_pieces(fd, status.st_size):
                    self._store(first, start, data)
            except _Unreadable as error:
                del self.extents[first:]   # and what was stored of it is cut off again
                self.out.seek(mark)
                self.out.truncate()
                self.offset = mark
                return error.problem
        finally:
            os.close(fd)
        self.members.append((len(self.names), len(name), status.st_uid, status.st_mode, len(self.extents) - first,
                             status.st_size, first, status.st_mtime_ns))
        self.names += name
        return None

    def _store(self, first, member_offset, data):
        """data, at member_offset of the member whose extents start at index first: appended to
        its last extent when it follows it in the member (and so in the pack)."""
        last = self.extents[-1] if len(self.extents) > first else None
        if last and last[0] + last[2] == member_offset:
            self.extents[-1] = (last[0], last[1], last[2] + len(data))
        else:
            self.extents.append((member_offset, self.offset, len(data)))
        self.out.write(data)
        self.offset += len(data)

    def finish(self):
        members = np.array(self.members, MEMBER_DTYPE)
        extents = np.array(self.extents, EXTENT_DTYPE)
        index = members.tobytes() + extents.tobytes() + bytes(self.names)
        self.out.write(index)
        header = np.zeros(1, PACK_HEADER_DTYPE)
        header[0] = (PACK_MAGIC, PACK_VERSION, HEADER_BYTES, len(members), len(extents), len(self.names),
                     self.offset, self.offset + len(index), zlib.crc32(index), 0)
        self.out.seek(0)
        self.out.write(header.tobytes())


class _Unreadable(Exception):
    """The file being packed cannot be read, or shrank while it was read (a write to the pack
    that fails is an OSError: the pack cannot be written)."""

    def __init__(self, problem):
        super().__init__(problem)
        self.problem = problem


def _stored_pieces(fd, size):
    """(offset, bytes) of what a file stores that is not zeros: its data regions (SEEK_DATA /
    SEEK_HOLE; the whole file where the file system cannot say), without their pages of zeros,
    read COPY_BYTES at a time. Raises _Unreadable."""
    for data, hole in _data_regions(fd, size):
        start = data - data % ZERO_PAGE
        while start < hole:
            end = min(start + COPY_BYTES, hole)
            try:
                chunk = os.pread(fd, end - start, start)
            except OSError as error:
                raise _Unreadable(f"cannot read: {error.strerror}") from None
            if len(chunk) != end - start:
                raise _Unreadable("changed while being packed (it shrank): left out")
            yield from _non_zero_runs(start, chunk)
            start = end


def _data_regions(fd, size):
    position = 0
    while position < size:
        try:
            data = os.lseek(fd, position, os.SEEK_DATA)
            hole = os.lseek(fd, data, os.SEEK_HOLE)
        except OSError as error:
            if error.errno == errno.ENXIO:   # a hole up to the end
                return
            yield position, size   # the file system cannot say where its holes are
            return
        hole = min(size, -(-hole // ZERO_PAGE) * ZERO_PAGE)
        if hole <= data:
            return
        yield data, hole
        position = hole


def _non_zero_runs(start, chunk):
    """(offset, bytes) of the runs of pages of chunk (at file offset start, a page boundary)
    that are not all zeros."""
    padded = chunk + bytes(-len(chunk) % ZERO_PAGE) if len(chunk) % ZERO_PAGE else chunk
    pages = np.frombuffer(padded, np.uint64).reshape(-1, ZERO_PAGE // 8).any(axis=1)
    edges = np.diff(np.concatenate([[0], pages.view(np.int8), [0]]))
    view = memoryview(chunk)
    for first, stop in zip(np.flatnonzero(edges == 1).tolist(), np.flatnonzero(edges == -1).tolist()):
        yield start + first * ZERO_PAGE, view[first * ZERO_PAGE:stop * ZERO_PAGE]


def _sync_directory(directory):
    """fsync the directory, so that the rename survives a crash (where the file system can)."""
    try:
        fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


# ---- reading ----

def is_pack(path):
    """Whether a path names a pack (by its name, as *.iot names a trace)."""
    return os.fspath(path).endswith(PACK_SUFFIX)


def expand_packs(paths):
    """paths with every pack (is_pack) replaced by its members (pack_entries)."""
    expanded = []
    for path in paths:
        expanded += pack_entries(path) if is_pack(path) else [path]
    return expanded


def pack_entries(path):
    """The members of the pack at path, as PackMember paths, in their order; a pack whose index
    cannot be read is one BrokenPack, whose reading raises its TraceFileError (the reader then
    reports it as it reports a damaged trace, and reads the rest)."""
    try:
        pack = read_pack(path)
    except TraceFileError as error:
        return [BrokenPack(path, error.with_traceback(None))]
    return [PackMember(pack, index) for index in range(len(pack.members))]


def stored_in(path):
    """The file that holds a trace: the pack of a PackMember, else the path itself."""
    return path.pack.path if isinstance(path, PackMember) else path


def read_pack(path):
    """The pack at path with its index read and checked (Pack); raises TraceFileError naming the
    pack and its problem."""
    path = os.fspath(path)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as error:
        raise TraceFileError(path, f"cannot read: {error.strerror}", UNREADABLE) from None
    try:
        status = os.fstat(fd)
        if not stat.S_ISREG(status.st_mode):
            raise TraceFileError(path, "not a regular file", UNREADABLE)
        header = _check_header(path, _pread_exactly(path, fd, min(status.st_size, HEADER_BYTES), 0), status.st_size)
        index_offset = int(header["index_offset"])
        index = _pread_exactly(path, fd, status.st_size - index_offset, index_offset)
    finally:
        os.close(fd)
    crc = zlib.crc32(index)
    if crc != header["index_crc32"]:
        raise TraceFileError(path, f"corrupt: its index's checksum is 0x{crc:08x}, not "
                                   f"0x{int(header['index_crc32']):08x} as its header says")
    n_members, n_extents = int(header["members"]), int(header["extents"])
    members = np.frombuffer(index, MEMBER_DTYPE, n_members)
    extents = np.frombuffer(index, EXTENT_DTYPE, n_extents, n_members * MEMBER_DTYPE.itemsize)
    names = index[n_members * MEMBER_DTYPE.itemsize + n_extents * EXTENT_DTYPE.itemsize:]
    member_names = _check_members(path, members, n_extents, names)
    _check_extents(path, members, extents, index_offset)
    identity = (status.st_dev, status.st_ino, status.st_size, status.st_mtime_ns)
    return Pack(path, identity, members, extents, member_names)


def pack_member_count(path):
    """How many members the pack's header says it has; None when that cannot be read (the
    reader then says why)."""
    try:
        with open(path, "rb") as f:
            data = f.read(HEADER_BYTES)
    except OSError:
        return None
    if len(data) < HEADER_BYTES or data[:len(PACK_MAGIC)] != PACK_MAGIC:
        return None
    return int(np.frombuffer(data, PACK_HEADER_DTYPE)[0]["members"])


def _pread_exactly(path, fd, nbytes, offset):
    try:
        data = os.pread(fd, nbytes, offset)
    except OSError as error:
        raise TraceFileError(path, f"cannot read: {error.strerror}", UNREADABLE) from None
    if len(data) != nbytes:
        raise TraceFileError(path, "truncated while being read (the file shrank)")
    return data


def _check_header(path, data, size):
    if size >= len(PACK_MAGIC) and data[:len(PACK_MAGIC)] != PACK_MAGIC:
        raise TraceFileError(path, "not an ioassess trace pack (bad magic)", NOT_A_TRACE)
    if size < HEADER_BYTES:
        raise TraceFileError(path, f"truncated: {size} bytes, a pack's header alone needs {HEADER_BYTES}",
                             NOT_A_TRACE if size < len(PACK_MAGIC) else DAMAGED)
    header = np.frombuffer(data, PACK_HEADER_DTYPE)[0]
    if header["version"] > PACK_VERSION:
        raise TraceFileError(path, f"trace pack format version {header['version']} is newer than this reader "
                                   f"supports ({PACK_VERSION})", NOT_A_TRACE)
    for field, value in (("version", PACK_VERSION), ("header_bytes", HEADER_BYTES)):
        if header[field] != value:
            raise TraceFileError(path, f"corrupt: header {field} is {header[field]}, expected {value}")
    pack_bytes = int(header["pack_bytes"])
    if size < pack_bytes:
        raise TraceFileError(path, f"truncated: {size} bytes, its header says {pack_bytes}")
    if size > pack_bytes:
        raise TraceFileError(path, f"corrupt: {size} bytes, its header says {pack_bytes} (something was appended?)")
    counts = {"members": MAX_MEMBERS, "extents": MAX_EXTENTS}
    for field, limit in counts.items():
        if header[field] > limit:
            raise TraceFileError(path, f"corrupt: {header[field]} {field}, more than the {limit} this reader takes")
    members, extents, names = (int(header[field]) for field in ("members", "extents", "names_bytes"))
    if names > members * MAX_NAME_BYTES:
        raise TraceFileError(path, f"corrupt: {names} bytes of names for {members} members (at most "
                                   f"{MAX_NAME_BYTES} each)")
    index_offset = int(header["index_offset"])
    index_end = index_offset + members * MEMBER_DTYPE.itemsize + extents * EXTENT_DTYPE.itemsize + names
    if index_offset < HEADER_BYTES or index_end != pack_bytes:
        raise TraceFileError(path, f"corrupt: its index [{index_offset}, {index_end}) is not between its header and "
                                   f"the end of the pack ({pack_bytes} bytes)")
    return header


def _check_members(path, members, n_extents, names):
    """The members' names (str), after checking every member record against the index."""
    counts = members["extent_count"].astype(np.int64)
    expected_first = np.cumsum(counts) - counts
    bad = np.flatnonzero(members["first_extent"].astype(np.int64) != expected_first)
    if len(bad) or counts.sum() != n_extents:
        which = f"member {bad[0]}'s" if len(bad) else "the members'"
        raise TraceFileError(path, f"corrupt: {which} extents are not where its index puts them")
    checks = (("a name outside the index's names", (members["name_offset"] > len(names))
               | (members["name_bytes"] > len(names) - np.minimum(members["name_offset"], len(names)))),
              (f"a name of 0 or more than {MAX_NAME_BYTES} bytes",
               (members["name_bytes"] == 0) | (members["name_bytes"] > MAX_NAME_BYTES)),
              (f"a size of more than {MAX_MEMBER_BYTES} bytes", members["size"] > MAX_MEMBER_BYTES),
              ("a mode that is not a regular file's", (members["mode"] & 0o170000) != stat.S_IFREG))
    for problem, bad in checks:
        if bad.any():
            raise TraceFileError(path, f"corrupt: member {np.flatnonzero(bad)[0]} has {problem}")
    member_names = []
    for offset, length in zip(members["name_offset"].tolist(), members["name_bytes"].tolist()):
        name = names[offset:offset + length]
        if b"/" in name or b"\0" in name or name in (b".", b".."):
            raise TraceFileError(path, f"corrupt: member {len(member_names)} has the name {name!r}, not a file name")
        member_names.append(os.fsdecode(name))
    if len(set(member_names)) != len(member_names):
        raise TraceFileError(path, "corrupt: two members have the same name")
    return member_names


def _check_extents(path, members, extents, index_offset):
    """Every extent inside its member and inside the pack's data, each member's in order, and no
    two of them over the same bytes of the pack."""
    owner = np.repeat(np.arange(len(members)), members["extent_count"].astype(np.int64))
    member_size = members["size"][owner]
    start, length, at = extents["member_offset"], extents["length"], extents["pack_offset"]
    checks = (("is empty", length == 0),
              ("reaches past its member's end", (start > member_size) | (length > member_size - np.minimum(
                  start, member_size))),
              ("is not in the pack's data, between its header and its index",
               (at < HEADER_BYTES) | (at > index_offset) | (length > index_offset - np.minimum(at, index_offset))))
    for problem, bad in checks:
        if bad.any():
            first = np.flatnonzero(bad)[0]
            raise TraceFileError(path, f"corrupt: extent {first} (of member {owner[first]}) {problem}")
    same_member = owner[1:] == owner[:-1]
    unordered = np.flatnonzero(same_member & (start[1:] < start[:-1] + length[:-1]))
    if len(unordered):
        raise TraceFileError(path, f"corrupt: the extents of member {owner[unordered[0]]} overlap or are out of order")
    order = np.argsort(at, kind="stable")
    overlap = np.flatnonzero(at[order][1:] < at[order][:-1] + length[order][:-1])
    if len(overlap):
        a, b = owner[order[overlap[0]]], owner[order[overlap[0] + 1]]
        raise TraceFileError(path, f"corrupt: members {min(a, b)} and {max(a, b)} overlap in the pack at offset "
                                   f"{at[order[overlap[0] + 1]]}")


class Pack:
    """A pack whose index has been read: its members' records, extents and names. Its members
    share one descriptor of the pack, opened at the first member's reading and closed once
    every member has been opened and closed (or when the Pack is let go)."""

    def __init__(self, path, identity, members, extents, names):
        self.path = path
        self.identity = identity   # (st_dev, st_ino, st_size, st_mtime_ns) when the index was read
        self.members = members
        self.extents = extents
        self.names = names
        self._init_descriptor()

    def _init_descriptor(self):
        self._lock = threading.Lock()
        self._fd = None
        self._uid = None
        self._users = 0
        self._unopened = len(self.members)

    def __getstate__(self):   # a descriptor and a lock do not cross processes
        return {name: value for name, value in self.__dict__.items() if not name.startswith("_")}

    def __setstate__(self, state):
        self.__dict__.update(state)
        self._init_descriptor()

    def __del__(self):
        if getattr(self, "_fd", None) is not None:
            os.close(self._fd)

    def _acquire(self, member, owner_uid):
        """The pack's descriptor for member, checked: still the file whose index was read, and
        owned by owner_uid (when given)."""
        with self._lock:
            if self._fd is None:
                try:
                    fd = os.open(self.path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
                except OSError as error:
                    raise TraceFileError(member, f"cannot read its pack: {error.strerror}", UNREADABLE) from None
                status = os.fstat(fd)
                if (status.st_dev, status.st_ino, status.st_size, status.st_mtime_ns) != self.identity:
                    os.close(fd)
                    raise TraceFileError(member, "its pack changed since its index was read")
                self._fd, self._uid = fd, status.st_uid
            if owner_uid is not None and self._uid != owner_uid:
                raise TraceFileError(member, f"in a pack that belongs to uid {self._uid}, not to uid {owner_uid} whose "
                                             "traces these are: refused", NOT_OWNED)
            self._users += 1
            self._unopened -= 1
            return self._fd

    def _release(self):
        with self._lock:
            self._users -= 1
            if self._users == 0 and self._unopened <= 0 and self._fd is not None:
                os.close(self._fd)
                self._fd = None


class PackEntry(str):
    """A trace in a pack, as a path for the trace reader: a str (`PACK/MEMBER`, or the pack's
    own path) that the reader opens with open_trace instead of os.open."""

    def open_trace(self, owner_uid):
        raise NotImplementedError


class PackMember(PackEntry):
    """A member of a pack: the str `PACK/NAME`."""

    def __new__(cls, pack, index):
        member = super().__new__(cls, f"{pack.path}/{pack.names[index]}")
        member.pack, member.index = pack, index
        return member

    def __reduce__(self):
        return PackMember, (self.pack, self.index)

    @property
    def packed_bytes(self):
        return int(self.pack.members[self.index]["size"])

    def open_trace(self, owner_uid):
        """(a read-only file object of the member, its size), as trace._open_trace gives a trace
        file's: refused when the pack is not owned by owner_uid or the member was packed as
        another uid's file."""
        record = self.pack.members[self.index]
        fd = self.pack._acquire(self, owner_uid)
        if owner_uid is not None and int(record["uid"]) != owner_uid:
            self.pack._release()
            raise TraceFileError(self, f"packed as a file of uid {record['uid']}, not of uid {owner_uid} whose traces "
                                       "these are: refused", NOT_OWNED)
        first = int(record["first_extent"])
        extents = self.pack.extents[first:first + int(record["extent_count"])]
        return _MemberFile(self.pack, fd, extents, int(record["size"])), int(record["size"])


class BrokenPack(PackEntry):
    """A pack whose index cannot be read: the str of its path; reading it raises its error."""

    def __new__(cls, path, error):
        entry = super().__new__(cls, os.fspath(path))
        entry.error = error
        return entry

    def __reduce__(self):
        return BrokenPack, (str(self), self.error)

    def open_trace(self, owner_uid):
        raise self.error


class _MemberFile:
    """A member of a pack as a read-only binary file: read, seek (with SEEK_DATA and SEEK_HOLE
    from its extents: what no extent covers is a hole, read as zeros), tell, close."""

    def __init__(self, pack, fd, extents, size):
        self._pack, self._fd, self.size, self._position = pack, fd, size, 0
        self._starts = extents["member_offset"].tolist()
        self._ends = (extents["member_offset"] + extents["length"]).tolist()
        self._at = extents["pack_offset"].tolist()
        self.closed = False

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self):
        if not self.closed:
            self.closed = True
            self._pack._release()

    def readable(self):
        return True

    def seekable(self):
        return True

    def tell(self):
        return self._position

    def seek(self, offset, whence=os.SEEK_SET):
        if whence in (os.SEEK_DATA, os.SEEK_HOLE):
            position = self._data_or_hole(offset, whence)
        else:
            position = {os.SEEK_SET: 0, os.SEEK_CUR: self._position, os.SEEK_END: self.size}[whence] + offset
            if position < 0:
                raise OSError(errno.EINVAL, os.strerror(errno.EINVAL))
        self._position = position
        return position

    def _data_or_hole(self, offset, whence):
        if not 0 <= offset < self.size:
            raise OSError(errno.ENXIO, os.strerror(errno.ENXIO))
        i = bisect.bisect_right(self._ends, offset)   # the first extent that ends after offset
        if whence == os.SEEK_DATA:
            if i == len(self._starts):
                raise OSError(errno.ENXIO, os.strerror(errno.ENXIO))
            return max(offset, self._starts[i])
        if i == len(self._starts) or self._starts[i] > offset:
            return offset
        while i + 1 < len(self._starts) and self._starts[i + 1] == self._ends[i]:
            i += 1
        return min(self._ends[i], self.size)

    def read(self, size=-1):
        position = self._position
        end = self.size if size is None or size < 0 else min(self.size, position + size)
        if end <= position:
            return b""
        out = bytearray(end - position)
        i = bisect.bisect_right(self._ends, position)
        while i < len(self._starts) and self._starts[i] < end:
            first, stop = max(self._starts[i], position), min(self._ends[i], end)
            data = os.pread(self._fd, stop - first, self._at[i] + first - self._starts[i])
            out[first - position:first - position + len(data)] = data
            if len(data) != stop - first:   # the pack shrank: what is read ends here
                self._position = first + len(data)
                return bytes(out[:self._position - position])
            i += 1
        self._position = end
        return bytes(out)
