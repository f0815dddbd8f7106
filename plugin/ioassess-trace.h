/*
 * ioassess trace format, version 1: the single source of truth for the on-disk layout.
 * docs/trace-format.md describes the same layout for readers; ioassess/traceformat.py
 * mirrors it as numpy dtypes (tests/test_traceformat.py checks that the two agree).
 *
 * One file per process, written by libioassess.so; libioassess-mpiio.so records MPI-IO calls
 * into the same file through it (ioassess-layer.h). Version 1 covers both: MPI-IO kinds and
 * flags, and later PAGECACHE slots, were added without changing the layout, and traces
 * without them read as before.
 * The file is written only through MAP_SHARED mappings, so every completed store is in the
 * page cache even if the process is killed; there is no footer.
 *
 *   [0, header_bytes)            struct ioassess_header
 *   [header_bytes, file size)    64-byte slots, in page-aligned extents allocated as the
 *                                process runs: per-thread extents (op records and the
 *                                page-cache samples of some of them), file-name extents and
 *                                (once the record cap is reached) the summary table.
 *
 * A slot's first byte is its type. A slot is written in full before its type byte is stored
 * (release order), so a slot whose type is IOASSESS_SLOT_EMPTY is unused or was cut off by a
 * kill, and every other slot is complete. Readers walk every slot of the file; the summary
 * table extent is skipped using summary_offset / summary_entries from the header.
 * All integers are little-endian (x86_64); byte_order_mark lets a reader check that.
 */
#ifndef IOASSESS_TRACE_H
#define IOASSESS_TRACE_H

#include <stdint.h>

#define IOASSESS_MAGIC "IOASTRC1"      /* 8 bytes, no terminator in the file */
#define IOASSESS_FORMAT_VERSION 1
#define IOASSESS_HEADER_BYTES 4096
#define IOASSESS_SLOT_BYTES 64
#define IOASSESS_BYTE_ORDER_MARK 0x01020304u
#define IOASSESS_NAME_PART_BYTES 63     /* name bytes carried by one NAME_PART slot */
#define IOASSESS_HIST_BINS 56           /* log2 duration bins of a summary entry */

/* Slot types (first byte of every slot). */
enum ioassess_slot_type {
    IOASSESS_SLOT_EMPTY = 0,     /* never written, or cut off before completion */
    IOASSESS_SLOT_OP = 1,        /* struct ioassess_op_record */
    IOASSESS_SLOT_FILE = 2,      /* struct ioassess_file_record; its name follows */
    IOASSESS_SLOT_NAME_PART = 3, /* struct ioassess_name_part */
    IOASSESS_SLOT_CLOCK = 4,     /* struct ioassess_clock_record */
    IOASSESS_SLOT_PAGECACHE = 5, /* struct ioassess_pagecache_record */
    IOASSESS_SLOT_MOUNT = 6,     /* struct ioassess_mount_record; its name follows */
};

/* An op kind's layer is its top two bits: op >> IOASSESS_OP_LAYER_SHIFT. */
#define IOASSESS_OP_LAYER_SHIFT 6

/* I/O layers (the op kind's top bits). */
enum ioassess_layer {
    IOASSESS_LAYER_POSIX = 0,    /* kinds 1 .. 63: POSIX calls (libioassess.so) */
    IOASSESS_LAYER_MPIIO = 1,    /* kinds 64 .. 127: MPI-IO calls (libioassess-mpiio.so) */
    IOASSESS_LAYER_STDIO = 2,    /* kinds 128 .. 191: C stdio calls on FILE streams
                                    (libioassess.so) */
};

/* Operation kinds recorded in ioassess_op_record.op. POSIX: the *64 and __*_chk entry points
 * map to the same kind as their plain form; the metadata kinds (OPEN .. FALLOCATE) are one
 * kind per call family, their records have offset -1, requested 0 and the call's return (a
 * descriptor, 0, bytes; readdir: 1 for an entry, 0 at the end) or -errno as result, and the
 * file id of their path (docs/trace-format.md, "Metadata ops": relative paths, dirfd, 0 when
 * the directory of an *at() call is not known). MPI-IO: the large-count MPI_File_*_c entry points
 * map to the same kind as their plain form; non-blocking kinds (iread, iwrite, ...) time the
 * call that starts the transfer, and the split collectives' *_begin calls are recorded (their
 * *_end calls are not). stdio: one kind per call family, the _unlocked, __*_chk, __isoc99_*,
 * v* and *64 entry points map to their plain form; records have offset -1, requested and
 * result in bytes (docs/trace-format.md, "stdio ops"); FOPEN, FCLOSE, FSEEK and FTELL are
 * metadata (direction meta), FFLUSH a write of the stream's buffer. */
enum ioassess_op {
    IOASSESS_OP_READ = 1,
    IOASSESS_OP_WRITE = 2,
    IOASSESS_OP_PREAD = 3,
    IOASSESS_OP_PWRITE = 4,
    IOASSESS_OP_READV = 5,
    IOASSESS_OP_WRITEV = 6,
    IOASSESS_OP_PREADV = 7,
    IOASSESS_OP_PWRITEV = 8,
    IOASSESS_OP_PREADV2 = 9,
    IOASSESS_OP_PWRITEV2 = 10,
    IOASSESS_OP_FSYNC = 11,
    IOASSESS_OP_FDATASYNC = 12,
    IOASSESS_OP_OPEN = 13,                    /* metadata (direction meta): open, openat, creat,
                                                 __open_2, __openat_2 and their *64 forms */
    IOASSESS_OP_CLOSE = 14,                   /* close of a recorded file or directory */
    IOASSESS_OP_STAT = 15,                    /* stat, lstat, fstat, fstatat, statx, __xstat,
                                                 __lxstat, __fxstat, __fxstatat (and *64) */
    IOASSESS_OP_ACCESS = 16,                  /* access, faccessat, euidaccess, eaccess */
    IOASSESS_OP_UNLINK = 17,                  /* unlink, unlinkat without AT_REMOVEDIR */
    IOASSESS_OP_MKDIR = 18,                   /* mkdir, mkdirat */
    IOASSESS_OP_RMDIR = 19,                   /* rmdir, unlinkat with AT_REMOVEDIR */
    IOASSESS_OP_RENAME = 20,                  /* rename, renameat, renameat2 (the old path) */
    IOASSESS_OP_MKSTEMP = 21,                 /* mkstemp, mkostemp, mkstemps, mkostemps (*64) */
    IOASSESS_OP_OPENDIR = 22,                 /* opendir, fdopendir */
    IOASSESS_OP_READDIR = 23,                 /* readdir, readdir_r (*64), getdents64 */
    IOASSESS_OP_CLOSEDIR = 24,                /* closedir */
    IOASSESS_OP_TRUNCATE = 25,                /* truncate, ftruncate (*64) */
    IOASSESS_OP_FALLOCATE = 26,               /* fallocate, posix_fallocate (*64) */
    IOASSESS_OP_AIO_READ = 27,                /* asynchronous (flag ASYNC): libaio's
                                                 IOCB_CMD_PREAD(V), POSIX aio_read; timed
                                                 from submission to completion */
    IOASSESS_OP_AIO_WRITE = 28,               /* IOCB_CMD_PWRITE(V), aio_write */
    IOASSESS_OP_AIO_SYNC = 29,                /* IOCB_CMD_FSYNC/FDSYNC, aio_fsync */
    IOASSESS_OP_MMAP = 30,                    /* mmap of a recorded file: not I/O time (the
                                                 page faults are not timed); requested is
                                                 the length, flags IOASSESS_OP_MAP_* */
    IOASSESS_OP_IO_URING = 31,                /* one io_uring instance seen (its I/O is not
                                                 timed): result its descriptor */
    IOASSESS_OP_COUNT = 32,                   /* one past the last POSIX kind */
    IOASSESS_OP_MPI_FILE_READ = 64,           /* individual file pointer */
    IOASSESS_OP_MPI_FILE_WRITE = 65,
    IOASSESS_OP_MPI_FILE_READ_AT = 66,        /* explicit offset */
    IOASSESS_OP_MPI_FILE_WRITE_AT = 67,
    IOASSESS_OP_MPI_FILE_READ_ALL = 68,       /* collective */
    IOASSESS_OP_MPI_FILE_WRITE_ALL = 69,
    IOASSESS_OP_MPI_FILE_READ_AT_ALL = 70,    /* collective, explicit offset */
    IOASSESS_OP_MPI_FILE_WRITE_AT_ALL = 71,
    IOASSESS_OP_MPI_FILE_READ_SHARED = 72,    /* shared file pointer */
    IOASSESS_OP_MPI_FILE_WRITE_SHARED = 73,
    IOASSESS_OP_MPI_FILE_READ_ORDERED = 74,   /* collective, shared file pointer */
    IOASSESS_OP_MPI_FILE_WRITE_ORDERED = 75,
    IOASSESS_OP_MPI_FILE_IREAD = 76,          /* non-blocking forms of the above */
    IOASSESS_OP_MPI_FILE_IWRITE = 77,
    IOASSESS_OP_MPI_FILE_IREAD_AT = 78,
    IOASSESS_OP_MPI_FILE_IWRITE_AT = 79,
    IOASSESS_OP_MPI_FILE_IREAD_ALL = 80,
    IOASSESS_OP_MPI_FILE_IWRITE_ALL = 81,
    IOASSESS_OP_MPI_FILE_IREAD_AT_ALL = 82,
    IOASSESS_OP_MPI_FILE_IWRITE_AT_ALL = 83,
    IOASSESS_OP_MPI_FILE_IREAD_SHARED = 84,
    IOASSESS_OP_MPI_FILE_IWRITE_SHARED = 85,
    IOASSESS_OP_MPI_FILE_READ_ALL_BEGIN = 86, /* split collectives (the *_begin call) */
    IOASSESS_OP_MPI_FILE_WRITE_ALL_BEGIN = 87,
    IOASSESS_OP_MPI_FILE_READ_AT_ALL_BEGIN = 88,
    IOASSESS_OP_MPI_FILE_WRITE_AT_ALL_BEGIN = 89,
    IOASSESS_OP_MPI_FILE_READ_ORDERED_BEGIN = 90,
    IOASSESS_OP_MPI_FILE_WRITE_ORDERED_BEGIN = 91,
    IOASSESS_OP_MPI_FILE_SYNC = 92,           /* collective */
    IOASSESS_OP_MPIIO_COUNT = 93,             /* one past the last MPI-IO kind */
    IOASSESS_OP_FOPEN = 128,                  /* metadata: fopen, fdopen, freopen (*64) */
    IOASSESS_OP_FCLOSE = 129,                 /* metadata: fclose */
    IOASSESS_OP_FREAD = 130,                  /* fread (_unlocked, __fread_chk) */
    IOASSESS_OP_FWRITE = 131,                 /* fwrite (_unlocked) */
    IOASSESS_OP_FGETS = 132,                  /* fgets (_unlocked, __fgets_chk) */
    IOASSESS_OP_FPUTS = 133,                  /* fputs (_unlocked) */
    IOASSESS_OP_FGETC = 134,                  /* fgetc, getc, _IO_getc */
    IOASSESS_OP_FPUTC = 135,                  /* fputc, putc, _IO_putc */
    IOASSESS_OP_FPRINTF = 136,                /* fprintf, vfprintf (__*_chk) */
    IOASSESS_OP_FSCANF = 137,                 /* fscanf, vfscanf (__isoc99_*) */
    IOASSESS_OP_FFLUSH = 138,                 /* fflush of one stream (a write) */
    IOASSESS_OP_FSEEK = 139,                  /* metadata: fseek, fseeko, fsetpos (*64),
                                                 rewind */
    IOASSESS_OP_FTELL = 140,                  /* metadata: ftell, ftello (*64) */
    IOASSESS_OP_STDIO_COUNT = 141             /* one past the last stdio kind */
};

/* Clock sources (ioassess_header.clock_source). */
enum ioassess_clock_source {
    IOASSESS_CLOCK_MONOTONIC = 1, /* ticks are CLOCK_MONOTONIC nanoseconds */
    IOASSESS_CLOCK_TSC = 2,       /* ticks are x86 TSC cycles; convert with CLOCK slots */
};

/* Why the process stopped recording (ioassess_header.end_reason). */
enum ioassess_end_reason {
    IOASSESS_END_RUNNING = 0,  /* still running, or killed (SIGKILL, walltime, crash) */
    IOASSESS_END_EXIT = 1,     /* normal exit (exit(), return from main, _exit()) */
    IOASSESS_END_EXEC = 2,     /* replaced by exec; the new image writes its own trace */
};

/* Header flags (ioassess_header.flags). */
#define IOASSESS_HEADER_OBFUSCATED (1u << 0)   /* names are hashes, not paths */
#define IOASSESS_HEADER_EXIT_STATUS (1u << 1)  /* exit_status is valid */
#define IOASSESS_HEADER_SPACE_FAILED (1u << 2) /* the trace file could not grow (full disk, no
                                                  helper process, or the file at the trace's
                                                  path is no longer the trace): later ops are
                                                  in the summary table only, or counted in
                                                  ops_lost if there is none */
#define IOASSESS_HEADER_PAGECACHE_UNAVAILABLE (1u << 3) /* the kernel refused cachestat(2)
                                                  (no such call, a seccomp filter, or a file
                                                  system without it): no page-cache samples
                                                  after the refusal */
#define IOASSESS_HEADER_PAGECACHE_OFF (1u << 4) /* page-cache sampling turned off
                                                  (IOASSESS_PAGECACHE=0): no samples */
#define IOASSESS_HEADER_STOPPED (1u << 5)      /* recording stopped: a store into the trace's
                                                  mapping failed (SIGBUS: the file was
                                                  truncated, or its blocks could not be
                                                  written) or a write of it failed; every
                                                  later op is counted in ops_lost, so are the
                                                  records that could not be stored */

/* Op record flags (ioassess_op_record.flags). */
#define IOASSESS_OP_APPEND (1u << 0)            /* POSIX: the descriptor had O_APPEND: offset
                                                   is -1 */
#define IOASSESS_OP_COLLECTIVE (1u << 1)        /* MPI-IO: a collective call (_all, _ordered,
                                                   MPI_File_sync) */
#define IOASSESS_OP_NONBLOCKING (1u << 2)       /* MPI-IO: the call only starts the transfer
                                                   (iread, iwrite, ...; split *_begin) */
#define IOASSESS_OP_UNDER_MPIIO (1u << 3)       /* POSIX: made by this thread inside a recorded
                                                   MPI-IO call */
#define IOASSESS_OP_UNDER_COLLECTIVE (1u << 4)  /* POSIX: ... inside a collective MPI-IO call
                                                   (aggregator work) */
#define IOASSESS_OP_DIRECT (1u << 5)            /* POSIX: the descriptor had O_DIRECT: the op
                                                   went past the page cache (never sampled) */
#define IOASSESS_OP_ASYNC (1u << 6)             /* POSIX: an asynchronous request (AIO_*): its
                                                   time runs from submission to completion and
                                                   overlaps other ops of its thread */
#define IOASSESS_OP_POSIX_AIO (1u << 7)         /* POSIX: ... made with POSIX AIO (aio_read,
                                                   lio_listio, ...), else with libaio */
#define IOASSESS_OP_MAP_READ (1u << 8)          /* MMAP: PROT_READ */
#define IOASSESS_OP_MAP_WRITE (1u << 9)         /* MMAP: PROT_WRITE */
#define IOASSESS_OP_MAP_EXEC (1u << 10)         /* MMAP: PROT_EXEC */
#define IOASSESS_OP_MAP_SHARED (1u << 11)       /* MMAP: MAP_SHARED (stores reach the file),
                                                   else MAP_PRIVATE */

/* At offset 0; padded to IOASSESS_HEADER_BYTES. Strings are NUL-terminated. */
struct ioassess_header {
    char magic[8];                 /* IOASSESS_MAGIC */
    uint32_t version;              /* IOASSESS_FORMAT_VERSION */
    uint32_t header_bytes;         /* IOASSESS_HEADER_BYTES: offset of the first slot */
    uint32_t slot_bytes;           /* IOASSESS_SLOT_BYTES */
    uint32_t byte_order_mark;      /* IOASSESS_BYTE_ORDER_MARK as stored by the writer */
    uint32_t clock_source;         /* enum ioassess_clock_source */
    uint32_t flags;                /* IOASSESS_HEADER_* */
    int64_t pid;                   /* process id */
    int64_t ppid;                  /* parent process id at start */
    int64_t rank;                  /* MPI/batch rank from the environment, -1 if none */
    uint64_t start_ticks;          /* clock ticks when recording started */
    uint64_t start_monotonic_ns;   /* CLOCK_MONOTONIC at start_ticks */
    uint64_t start_realtime_ns;    /* CLOCK_REALTIME (ns since the epoch) at start_ticks */
    uint64_t end_ticks;            /* clock ticks when recording ended, 0 while running */
    uint64_t end_monotonic_ns;     /* CLOCK_MONOTONIC at end_ticks, 0 while running */
    uint32_t end_reason;           /* enum ioassess_end_reason */
    int32_t exit_status;           /* returned by main or passed to exit/_exit
                                      (valid with IOASSESS_HEADER_EXIT_STATUS) */
    uint64_t record_cap;           /* most op records this process keeps individually */
    uint64_t ops_not_kept;         /* ops counted only in the summary table (past the cap) */
    uint64_t ops_lost;             /* ops not counted at all: a signal handler's op that
                                      interrupted the recorder's own bookkeeping, or an op
                                      past the cap with no room left in the summary table */
    uint64_t summary_offset;       /* file offset of the summary table, 0 if none */
    uint64_t summary_entries;      /* capacity of the summary table (used or not) */
    char job_id[64];               /* batch job id from the environment, "" if none */
    char hostname[256];            /* host name (uname nodename, or IOASSESS_HOSTNAME) */
    char exe[512];                 /* executable path, or its hash when obfuscated */
    char cmdline[2048];            /* arguments separated by single spaces, truncated */
};

/* One read/write/sync/metadata call of any layer. */
struct ioassess_op_record {
    uint8_t type;                  /* IOASSESS_SLOT_OP */
    uint8_t op;                    /* enum ioassess_op */
    uint16_t flags;                /* IOASSESS_OP_* */
    uint32_t tid;                  /* kernel thread id of the caller */
    uint64_t file_id;              /* 64-bit hash of the file's path (matches a FILE slot) */
    int64_t offset;                /* file offset (bytes) the op started at, -1 if unknown */
    uint64_t requested;            /* bytes requested (sum of iov_len for vector ops; MPI-IO:
                                      count x type size) */
    int64_t result;                /* bytes returned, or -errno when the call failed (MPI-IO:
                                      bytes moved, or minus the MPI error class) */
    uint64_t start_ticks;          /* clock ticks just before the call */
    uint64_t duration_ticks;       /* clock ticks the call took */
    uint64_t buffer;               /* user buffer address (first iovec's base for vectors) */
};

/* A file this process used; written before any op names its file_id. */
struct ioassess_file_record {
    uint8_t type;                  /* IOASSESS_SLOT_FILE */
    uint8_t pad[3];                /* zero */
    uint32_t mode;                 /* st_mode of the file (type and permission bits) */
    uint64_t file_id;              /* 64-bit FNV-1a hash of the path */
    uint64_t device;               /* st_dev */
    uint64_t inode;                /* st_ino */
    uint32_t name_bytes;           /* length of the name in the NAME_PART slots that follow */
    uint32_t pad2;                 /* zero */
    uint64_t fs_magic;             /* statfs f_type of the file system, 0 if unknown */
    uint8_t pad3[16];              /* zero */
};

/* Carries IOASSESS_NAME_PART_BYTES bytes of the preceding FILE slot's name; the name's
 * parts are the ceil(name_bytes / 63) slots right after that FILE slot, in order. */
struct ioassess_name_part {
    uint8_t type;                  /* IOASSESS_SLOT_NAME_PART */
    char bytes[IOASSESS_NAME_PART_BYTES]; /* name bytes; the last part is zero-padded */
};

/* A mount point (as /proc/self/mountinfo lists it) of files this process used, written once
 * per mount point before the FILE slot of the first file under it; its name is in the
 * ceil(name_bytes / 63) NAME_PART slots right after it. A file's mount point is the longest
 * MOUNT name that is a prefix of the file's name at a '/' (the whole name, or "/"). */
struct ioassess_mount_record {
    uint8_t type;                  /* IOASSESS_SLOT_MOUNT */
    uint8_t pad[3];                /* zero */
    uint32_t name_bytes;           /* length of the mount point in the NAME_PART slots that follow */
    uint64_t device;               /* st_dev of the mounted file system (mountinfo's major:minor) */
    char fs_type[32];              /* the type as mountinfo names it ("lustre", "nfs4"),
                                      NUL-terminated, truncated */
    uint8_t pad2[16];              /* zero */
};

/* A pair of readings taken back to back, to convert ticks to nanoseconds. */
struct ioassess_clock_record {
    uint8_t type;                  /* IOASSESS_SLOT_CLOCK */
    uint8_t pad[7];                /* zero */
    uint64_t ticks;                /* clock ticks */
    uint64_t monotonic_ns;         /* CLOCK_MONOTONIC read right after ticks */
    uint8_t pad2[40];              /* zero */
};

/* The page-cache state of a sampled POSIX read or write's byte range on a regular file, taken
 * with cachestat(2) just before the call and written (by the op's thread) right after its op
 * record. Its op is the one of this process with the same (tid, start_ticks). At most two
 * page ranges are asked: the head range from head_page on and, when the op spans more pages
 * than the recorder asks about at once, a tail range that ends at the op's last page. The
 * counts are summed over both ranges; a cached page that is dirty counts in both. */
struct ioassess_pagecache_record {
    uint8_t type;                  /* IOASSESS_SLOT_PAGECACHE */
    uint8_t page_shift;            /* log2 of the page size of the ranges (12: 4 KiB) */
    uint16_t head_pages;           /* pages asked from head_page on (at least 1) */
    uint32_t tid;                  /* kernel thread id of the op's caller (the op's key) */
    uint64_t op_start_ticks;       /* start_ticks of the op's record (the op's key) */
    uint64_t head_page;            /* first page asked: the op's offset >> page_shift */
    uint64_t tail_page;            /* first page of the tail range, 0 if none */
    uint16_t tail_pages;           /* pages asked from tail_page on, 0: no tail range */
    uint16_t buffer;               /* the op's user buffer before the call (mincore(2) of its
                                      first and last page): IOASSESS_BUFFER_* */
    uint32_t cached;               /* nr_cache: pages asked that were in the page cache */
    uint32_t dirty;                /* nr_dirty: pages asked that were cached and dirty */
    uint32_t writeback;            /* nr_writeback: pages asked under writeback */
    uint32_t evicted;              /* nr_evicted: pages asked that reclaim evicted */
    uint32_t recently_evicted;     /* nr_recently_evicted: of those, evicted recently (more
                                      memory would have kept them) */
    int64_t file_size;             /* writes: st_size just before the call; reads: -1 */
};

/* ioassess_pagecache_record.buffer: whether the op's user buffer was in memory before the call.
 * A buffer not yet touched (fresh memory) is faulted in page by page during the copy, which can
 * take longer than the copy itself; its op's duration says little of the page cache. */
enum ioassess_buffer_state {
    IOASSESS_BUFFER_UNKNOWN = 0,    /* not asked (vector calls) or not answered */
    IOASSESS_BUFFER_RESIDENT = 1,   /* its first and last page were in memory */
    IOASSESS_BUFFER_FAULTED = 2,    /* one of them was not: the call faulted it in */
};

/* Past the record cap, ops are added here instead: exact per (file, op, size bucket).
 * Open addressing on the key; an entry whose state is not IN_USE is unused. When the table
 * is three quarters full, new keys use file_id 0 ("other files"), so counts stay exact
 * per op and size bucket. Size bucket b holds requests of [2^(b-1), 2^b) bytes; bucket 0
 * holds 0-byte requests. Duration bin b holds durations of [2^b, 2^(b+1)) ticks (bin 0
 * also holds 0), the last bin everything longer. */
#define IOASSESS_SUMMARY_FREE 0u      /* entry states */
#define IOASSESS_SUMMARY_CLAIMING 1u
#define IOASSESS_SUMMARY_IN_USE 2u

struct ioassess_summary_entry {
    uint32_t state;                /* IOASSESS_SUMMARY_*: only IN_USE entries are valid */
    uint8_t op;                    /* enum ioassess_op */
    uint8_t size_bucket;           /* log2 bucket of the requested bytes, see above */
    uint16_t pad;                  /* zero */
    uint64_t file_id;              /* as in op records; 0 = other files (table full) */
    uint64_t count;                /* ops */
    uint64_t bytes_requested;      /* sum of requested bytes */
    uint64_t bytes_returned;       /* sum of positive results (0 for metadata kinds) */
    uint64_t errors;               /* ops that returned -errno */
    uint64_t duration_ticks;       /* sum of durations */
    uint64_t pad2;                 /* zero */
    uint64_t duration_hist[IOASSESS_HIST_BINS]; /* ops per log2 duration bin */
};

#endif
