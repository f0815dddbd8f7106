"""The recorder's trace format as numpy dtypes and constants.

plugin/ioassess-trace.h is the single source of truth; this module mirrors it field by field
and tests/test_traceformat.py compiles that header to check that the two agree. Every dtype is
little-endian, as the recorder writes it (the header's byte_order_mark lets readers check).
"""
import enum

import numpy as np

MAGIC = b"IOASTRC1"
FORMAT_VERSION = 1
HEADER_BYTES = 4096
SLOT_BYTES = 64
BYTE_ORDER_MARK = 0x01020304
NAME_PART_BYTES = 63
HIST_BINS = 56
# An op kind's layer is op >> OP_LAYER_SHIFT (Layer).
OP_LAYER_SHIFT = 6
# The file grows in whole pages: header_bytes plus page-aligned extents.
PAGE_BYTES = 4096


class BufferState(enum.IntEnum):
    """ioassess_pagecache_record.buffer: whether the op's user buffer was in memory before the
    call (a buffer that was not is faulted in during it)."""
    UNKNOWN = 0
    RESIDENT = 1
    FAULTED = 2


class SummaryState(enum.IntEnum):
    """ioassess_summary_entry.state: only IN_USE entries hold counts."""
    FREE = 0
    CLAIMING = 1
    IN_USE = 2


class SlotType(enum.IntEnum):
    EMPTY = 0
    OP = 1
    FILE = 2
    NAME_PART = 3
    CLOCK = 4
    PAGECACHE = 5
    MOUNT = 6


class Layer(enum.IntEnum):
    POSIX = 0
    MPIIO = 1
    STDIO = 2


class Op(enum.IntEnum):
    READ = 1
    WRITE = 2
    PREAD = 3
    PWRITE = 4
    READV = 5
    WRITEV = 6
    PREADV = 7
    PWRITEV = 8
    PREADV2 = 9
    PWRITEV2 = 10
    FSYNC = 11
    FDATASYNC = 12
    OPEN = 13  # metadata kinds (direction "meta"), one per call family
    CLOSE = 14
    STAT = 15
    ACCESS = 16
    UNLINK = 17
    MKDIR = 18
    RMDIR = 19
    RENAME = 20
    MKSTEMP = 21
    OPENDIR = 22
    READDIR = 23
    CLOSEDIR = 24
    TRUNCATE = 25
    FALLOCATE = 26
    AIO_READ = 27  # asynchronous requests (flag ASYNC): from submission to completion
    AIO_WRITE = 28
    AIO_SYNC = 29
    MMAP = 30  # an mmap of a recorded file (direction "mmap": not I/O, not metadata)
    IO_URING = 31  # an io_uring instance seen (direction "io_uring"): its I/O is not timed
    COUNT = 32  # one past the last POSIX kind, not a kind
    MPI_FILE_READ = 64
    MPI_FILE_WRITE = 65
    MPI_FILE_READ_AT = 66
    MPI_FILE_WRITE_AT = 67
    MPI_FILE_READ_ALL = 68
    MPI_FILE_WRITE_ALL = 69
    MPI_FILE_READ_AT_ALL = 70
    MPI_FILE_WRITE_AT_ALL = 71
    MPI_FILE_READ_SHARED = 72
    MPI_FILE_WRITE_SHARED = 73
    MPI_FILE_READ_ORDERED = 74
    MPI_FILE_WRITE_ORDERED = 75
    MPI_FILE_IREAD = 76
    MPI_FILE_IWRITE = 77
    MPI_FILE_IREAD_AT = 78
    MPI_FILE_IWRITE_AT = 79
    MPI_FILE_IREAD_ALL = 80
    MPI_FILE_IWRITE_ALL = 81
    MPI_FILE_IREAD_AT_ALL = 82
    MPI_FILE_IWRITE_AT_ALL = 83
    MPI_FILE_IREAD_SHARED = 84
    MPI_FILE_IWRITE_SHARED = 85
    MPI_FILE_READ_ALL_BEGIN = 86
    MPI_FILE_WRITE_ALL_BEGIN = 87
    MPI_FILE_READ_AT_ALL_BEGIN = 88
    MPI_FILE_WRITE_AT_ALL_BEGIN = 89
    MPI_FILE_READ_ORDERED_BEGIN = 90
    MPI_FILE_WRITE_ORDERED_BEGIN = 91
    MPI_FILE_SYNC = 92
    MPIIO_COUNT = 93  # one past the last MPI-IO kind, not a kind
    FOPEN = 128  # stdio kinds; FOPEN, FCLOSE, FSEEK and FTELL are metadata
    FCLOSE = 129
    FREAD = 130
    FWRITE = 131
    FGETS = 132
    FPUTS = 133
    FGETC = 134
    FPUTC = 135
    FPRINTF = 136
    FSCANF = 137
    FFLUSH = 138  # a write: the stream's buffer reaches the kernel
    FSEEK = 139
    FTELL = 140
    STDIO_COUNT = 141  # one past the last stdio kind, not a kind


class ClockSource(enum.IntEnum):
    MONOTONIC = 1
    TSC = 2


class EndReason(enum.IntEnum):
    RUNNING = 0
    EXIT = 1
    EXEC = 2


class HeaderFlag(enum.IntFlag):
    OBFUSCATED = 1 << 0
    EXIT_STATUS = 1 << 1
    SPACE_FAILED = 1 << 2
    PAGECACHE_UNAVAILABLE = 1 << 3  # the kernel refused cachestat(2): no page-cache samples after that
    PAGECACHE_OFF = 1 << 4  # sampling turned off (IOASSESS_PAGECACHE=0)
    STOPPED = 1 << 5  # a store into the trace, or a write of it, failed: later ops only counted in ops_lost


class OpFlag(enum.IntFlag):
    APPEND = 1 << 0  # POSIX: the descriptor had O_APPEND
    COLLECTIVE = 1 << 1  # MPI-IO: a collective call
    NONBLOCKING = 1 << 2  # MPI-IO: the call only starts the transfer
    UNDER_MPIIO = 1 << 3  # POSIX: made inside an MPI-IO call
    UNDER_COLLECTIVE = 1 << 4  # POSIX: made inside a collective MPI-IO call (aggregator work)
    DIRECT = 1 << 5  # POSIX: the descriptor had O_DIRECT (the op went past the page cache)
    ASYNC = 1 << 6  # POSIX: an asynchronous request, timed from submission to completion
    POSIX_AIO = 1 << 7  # POSIX: ... made with POSIX AIO (else libaio)
    MAP_READ = 1 << 8  # MMAP: PROT_READ
    MAP_WRITE = 1 << 9  # MMAP: PROT_WRITE
    MAP_EXEC = 1 << 10  # MMAP: PROT_EXEC
    MAP_SHARED = 1 << 11  # MMAP: MAP_SHARED (else MAP_PRIVATE)


OP_KINDS = tuple(op for op in Op if op not in (Op.COUNT, Op.MPIIO_COUNT, Op.STDIO_COUNT))
# op code -> name ("read", "pwritev2", "mpi_file_write_all", ...)
OP_NAMES = {int(op): op.name.lower() for op in OP_KINDS}
# "mmap" and "io_uring": facts about the process, neither I/O time nor metadata calls.
DIRECTIONS = ("read", "write", "sync", "meta", "mmap", "io_uring")
_READ_OPS = (Op.READ, Op.PREAD, Op.READV, Op.PREADV, Op.PREADV2, Op.AIO_READ,
             *(op for op in Op if op.name.startswith(("MPI_FILE_READ", "MPI_FILE_IREAD"))),
             Op.FREAD, Op.FGETS, Op.FGETC, Op.FSCANF)
_SYNC_OPS = (Op.FSYNC, Op.FDATASYNC, Op.AIO_SYNC, Op.MPI_FILE_SYNC)
_OWN_DIRECTION = {Op.MMAP: "mmap", Op.IO_URING: "io_uring"}
# The metadata kinds: their result is a descriptor, 0 or -errno (readdir: 1 for an entry, 0 at
# the end; getdents64: bytes of entries; ftell: the position), never bytes of data moved.
META_OPS = (*(op for op in OP_KINDS if Op.OPEN <= op <= Op.FALLOCATE), Op.FOPEN, Op.FCLOSE, Op.FSEEK, Op.FTELL)
# metadata op code -> its call family as the Job names it (ioassess.inputs.job.META_KINDS): the
# stdio kinds are the open, close and seek of a stream
META_KIND_NAMES = {int(op): {Op.FOPEN: "open", Op.FCLOSE: "close", Op.FSEEK: "seek", Op.FTELL: "seek"}.get(
    op, op.name.lower()) for op in META_OPS}
# op code -> "read" | "write" | "sync" | "meta" | "mmap" | "io_uring"
OP_DIRECTION = {
    int(op): _OWN_DIRECTION.get(op) or ("read" if op in _READ_OPS else "sync" if op in _SYNC_OPS
                                        else "meta" if op in META_OPS else "write")
    for op in OP_KINDS
}
# op code -> "posix" | "mpiio" | "stdio"
OP_LAYER = {int(op): Layer(op >> OP_LAYER_SHIFT).name.lower() for op in OP_KINDS}

HEADER_DTYPE = np.dtype([
    ("magic", "S8"),
    ("version", "<u4"),
    ("header_bytes", "<u4"),
    ("slot_bytes", "<u4"),
    ("byte_order_mark", "<u4"),
    ("clock_source", "<u4"),
    ("flags", "<u4"),
    ("pid", "<i8"),
    ("ppid", "<i8"),
    ("rank", "<i8"),
    ("start_ticks", "<u8"),
    ("start_monotonic_ns", "<u8"),
    ("start_realtime_ns", "<u8"),
    ("end_ticks", "<u8"),
    ("end_monotonic_ns", "<u8"),
    ("end_reason", "<u4"),
    ("exit_status", "<i4"),
    ("record_cap", "<u8"),
    ("ops_not_kept", "<u8"),
    ("ops_lost", "<u8"),
    ("summary_offset", "<u8"),
    ("summary_entries", "<u8"),
    ("job_id", "S64"),
    ("hostname", "S256"),
    ("exe", "S512"),
    ("cmdline", "S2048"),
])

OP_RECORD_DTYPE = np.dtype([
    ("type", "u1"),
    ("op", "u1"),
    ("flags", "<u2"),
    ("tid", "<u4"),
    ("file_id", "<u8"),
    ("offset", "<i8"),
    ("requested", "<u8"),
    ("result", "<i8"),
    ("start_ticks", "<u8"),
    ("duration_ticks", "<u8"),
    ("buffer", "<u8"),
])

FILE_RECORD_DTYPE = np.dtype([
    ("type", "u1"),
    ("pad", "u1", (3,)),
    ("mode", "<u4"),
    ("file_id", "<u8"),
    ("device", "<u8"),
    ("inode", "<u8"),
    ("name_bytes", "<u4"),
    ("pad2", "<u4"),
    ("fs_magic", "<u8"),
    ("pad3", "u1", (16,)),
])

NAME_PART_DTYPE = np.dtype([
    ("type", "u1"),
    ("bytes", f"S{NAME_PART_BYTES}"),  # read with .tobytes(): indexing drops trailing NULs
])

MOUNT_RECORD_DTYPE = np.dtype([
    ("type", "u1"),
    ("pad", "u1", (3,)),
    ("name_bytes", "<u4"),
    ("device", "<u8"),
    ("fs_type", "S32"),
    ("pad2", "u1", (16,)),
])

CLOCK_RECORD_DTYPE = np.dtype([
    ("type", "u1"),
    ("pad", "u1", (7,)),
    ("ticks", "<u8"),
    ("monotonic_ns", "<u8"),
    ("pad2", "u1", (40,)),
])

PAGECACHE_RECORD_DTYPE = np.dtype([
    ("type", "u1"),
    ("page_shift", "u1"),
    ("head_pages", "<u2"),
    ("tid", "<u4"),
    ("op_start_ticks", "<u8"),
    ("head_page", "<u8"),
    ("tail_page", "<u8"),
    ("tail_pages", "<u2"),
    ("buffer", "<u2"),
    ("cached", "<u4"),
    ("dirty", "<u4"),
    ("writeback", "<u4"),
    ("evicted", "<u4"),
    ("recently_evicted", "<u4"),
    ("file_size", "<i8"),
])

SUMMARY_ENTRY_DTYPE = np.dtype([
    ("state", "<u4"),
    ("op", "u1"),
    ("size_bucket", "u1"),
    ("pad", "<u2"),
    ("file_id", "<u8"),
    ("count", "<u8"),
    ("bytes_requested", "<u8"),
    ("bytes_returned", "<u8"),
    ("errors", "<u8"),
    ("duration_ticks", "<u8"),
    ("pad2", "<u8"),
    ("duration_hist", "<u8", (HIST_BINS,)),
])

# C struct name -> dtype, for the layout test and the docs.
STRUCT_DTYPES = {
    "ioassess_header": HEADER_DTYPE,
    "ioassess_op_record": OP_RECORD_DTYPE,
    "ioassess_file_record": FILE_RECORD_DTYPE,
    "ioassess_name_part": NAME_PART_DTYPE,
    "ioassess_mount_record": MOUNT_RECORD_DTYPE,
    "ioassess_clock_record": CLOCK_RECORD_DTYPE,
    "ioassess_pagecache_record": PAGECACHE_RECORD_DTYPE,
    "ioassess_summary_entry": SUMMARY_ENTRY_DTYPE,
}
