/*
 * The trace file (layout: ioassess-trace.h). Records are stored into memory that holds the
 * file's chunks; extents (of a thread's op slots, of file names, the summary table) are carved
 * out of the last chunk. Where a store can never fault (docs/architecture.md, "Trace
 * storage"; ioassess-storage.c) that memory is a MAP_SHARED mapping of the file, its blocks
 * reserved before it is mapped: a kill loses nothing already stored, and a full disk is a
 * failed reservation here, never SIGBUS in the application. Elsewhere the trace is buffered:
 * its memory is written out by the helper, at each new chunk, when WRITE_BATCH extents wait,
 * and at exit or exec. If a store into a mapping fails all the same (the file was truncated:
 * ioassess-sigbus.c) or a write does, recording stops: the memory replaces the mapping, every
 * later op is counted in ops_lost, and the header is written by the helper.
 * No file descriptor stays open: the file is reopened by path each time, in a helper with a
 * private descriptor table (ioassess-private.c), and only if it is still the file this process
 * created; so the application can close, reuse or swap any descriptor number, and a file put
 * in the trace's place is never written.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <sys/uio.h>

#include "ioassess-internal.h"

#define FIRST_EXTENT_SLOTS 64u         /* one page: short-lived threads stay small */
#define MAX_EXTENT_SLOTS 4096u         /* 256 KiB per thread at most */
#define SUMMARY_ENTRIES 4096u          /* 2 MiB, allocated only when the cap is reached */
#define SUMMARY_SPILL_AT (SUMMARY_ENTRIES / 4 * 3)
#define MAX_CLOCK_INTERVAL_NS 10000000000ull
#define FIRST_CHUNK_BYTES (16u << 10)   /* mapped with the header: one clone at start-up */
#define MAX_CHUNK_BYTES (4u << 20)      /* chunks grow with the file up to this */
#define WRITE_BATCH 64u                 /* buffered: extents written by one helper call */

static char trace_path[IOASSESS_PATH_BYTES];
static dev_t trace_device;              /* the trace file as created: a reopen by path */
static ino_t trace_inode;               /* must find this file */
static struct ioassess_header *header;
static struct ioassess_header started;  /* the header as start-up wrote it */
static uint64_t header_bytes;           /* the header's pages */
static uint64_t page_bytes;
static uint64_t file_bytes;             /* current size of the trace file */
static char *chunk_next, *chunk_end;    /* the part of the last chunk not carved out yet */
static uint64_t op_slots_granted;       /* op slots handed out, against the record cap */
static int space_failed;                /* the file could not grow: records stop */
static int buffered;                    /* memory written out by the helper, not mapped */
static int stopped;                     /* a store or a write failed: nothing more recorded */
static int stop_written;                /* the header saying so was written */
static int header_in_memory;            /* the header is memory, written by the helper */
static struct ioassess_thread *threads; /* live threads with an extent */
static pthread_key_t thread_key;        /* its destructor unmaps an exiting thread's extent */
static pthread_once_t thread_key_once = PTHREAD_ONCE_INIT;

/* File names go to a shared extent written under the lock. */
static struct ioassess_op_record *name_next, *name_end;
static void *name_extent;
static size_t name_extent_bytes;
static uint64_t name_extent_offset;

/* Past the cap. */
static struct ioassess_summary_entry *summary;
static uint32_t summary_used;
static int summary_lost;                /* memory replaced its mapping: its counts are lost */

/* Buffered traces: extents done with, waiting to be written out. */
static struct ioassess_range unwritten[WRITE_BATCH];
static unsigned unwritten_count;

/* An extent being faulted in page by page (kernels without MADV_POPULATE_WRITE). */
static void *faulting_in;
static uint64_t faulting_in_bytes;

/* Clock pairs: ticks per nanosecond estimated at start-up, to schedule later pairs. */
static double ticks_per_ns;
static uint64_t clock_interval_ns;

uint64_t ioassess_next_clock_ticks = UINT64_MAX;

/* A (ticks, CLOCK_MONOTONIC) pair: the monotonic time is the midpoint of two readings taken
 * around the tick reading, and nothing is stored until all three are taken. */
static void clock_pair(uint64_t *ticks, uint64_t *monotonic_ns)
{
    uint64_t before = ioassess_monotonic_ns();
    *ticks = ioassess_ticks();
    uint64_t after = ioassess_monotonic_ns();
    *monotonic_ns = before + (after - before) / 2;
}

static uint64_t round_up(uint64_t value, uint64_t multiple)
{
    return (value + multiple - 1) / multiple * multiple;
}

static void *map_memory(void *at, uint64_t bytes)
{
    void *map = (void *)syscall(SYS_mmap, at, bytes, PROT_READ | PROT_WRITE,
                                MAP_PRIVATE | MAP_ANONYMOUS | (at ? MAP_FIXED : 0), -1, 0);
    return (uintptr_t)map > (uintptr_t)-4096 ? NULL : map;
}

static void unmap(void *map, size_t bytes)
{
    if (map && bytes)
        syscall(SYS_munmap, map, bytes);
}

/* The op records among `bytes` of slots. */
static uint64_t op_records_in(const void *slots, uint64_t bytes)
{
    uint64_t n = 0;
    for (const struct ioassess_op_record *r = slots; (const char *)(r + 1) <= (const char *)slots + bytes; r++)
        n += r->type == IOASSESS_SLOT_OP;
    return n;
}

static void count_lost(uint64_t ops)
{
    if (header && ops)
        __atomic_add_fetch(&header->ops_lost, ops, __ATOMIC_RELAXED);
}

/* The header made memory: a copy of it (read with a system call, which fails instead of
 * faulting when its page is gone; then the header start-up wrote) in place of its mapping.
 * Once; async-signal-safe. Whether the header is memory (no room for a mapping: it is not). */
static int header_to_memory(void)
{
    static struct ioassess_header copy;
    static int failed;
    if (__atomic_exchange_n(&header_in_memory, 1, __ATOMIC_ACQ_REL))
        return !__atomic_load_n(&failed, __ATOMIC_ACQUIRE);
    struct iovec local = {&copy, sizeof copy}, remote = {header, sizeof copy};
    if (syscall(SYS_process_vm_readv, syscall(SYS_getpid), &local, 1UL, &remote, 1UL, 0UL) !=
        (long)sizeof copy)
        copy = started;
    if (!map_memory(header, header_bytes)) {
        __atomic_store_n(&failed, 1, __ATOMIC_RELEASE);
        return 0;
    }
    memcpy(header, &copy, sizeof copy);
    return 1;
}

/* Recording stops for good: a store into the trace's mapping or a write of it failed. Every
 * thread's next record takes the rare path (the clock pair due), which stops the thread.
 * Async-signal-safe: no lock, nothing but memory the header now is. */
static void stop_recording(void)
{
    if (__atomic_exchange_n(&stopped, 1, __ATOMIC_ACQ_REL))
        return;
    if (header_to_memory())
        __atomic_or_fetch(&header->flags, IOASSESS_HEADER_STOPPED, __ATOMIC_RELAXED);
    __atomic_store_n(&ioassess_next_clock_ticks, 0, __ATOMIC_RELAXED);
}

static int within(const void *address, const void *map, uint64_t bytes)
{
    return map && (const char *)address >= (const char *)map &&
           (const char *)address < (const char *)map + bytes;
}

/* The SIGBUS handler's question (ioassess-sigbus.c): is address in one of the trace's mappings
 * (the header, the calling thread's extent, the file names, the summary table, an extent being
 * faulted in)? Those are the only ones this thread can be storing into or reading. If so, memory
 * replaces the mapping, so that the access is retried there, and recording stops. No lock
 * (the faulting thread may hold it); the others' mappings are read as they are, a fault being
 * in the faulting thread's own. */
int ioassess_writer_fault(const void *address)
{
    struct ioassess_thread *t = &ioassess_self;
    if (!header || buffered)
        return 0;
    if (within(address, header, header_bytes)) {
        if (!header_to_memory())
            return 0;
    } else if (within(address, t->extent, t->extent_bytes)) {
        if (!map_memory(t->extent, t->extent_bytes))
            return 0;
        t->extent_lost = 1;
    } else if (within(address, name_extent, name_extent_bytes)) {
        if (!map_memory(name_extent, name_extent_bytes))
            return 0;
    } else if (within(address, summary, round_up(SUMMARY_ENTRIES * sizeof *summary, page_bytes))) {
        if (!map_memory(summary, round_up(SUMMARY_ENTRIES * sizeof *summary, page_bytes)))
            return 0;
        summary_lost = 1;
    } else if (within(address, faulting_in, faulting_in_bytes)) {
        if (!map_memory(faulting_in, faulting_in_bytes))
            return 0;
    } else {
        return 0;
    }
    stop_recording();
    return 1;
}

/* Fault every page in now (one call), not one page per 64 ops inside the timed calls; 0, or
 * -1 when a page of the file cannot be (the file was truncated) and the extent is not to be
 * used. Kernels before 5.14 have no MADV_POPULATE_WRITE: the pages are then touched, a fault
 * of theirs going to ioassess_writer_fault. */
static int prefault(void *map, uint64_t bytes)
{
    if (syscall(SYS_madvise, map, bytes, 23 /* MADV_POPULATE_WRITE, Linux 5.14 */) == 0)
        return 0;
    if (buffered)
        return 0;                        /* memory: its pages come as it is written */
    if (errno != EINVAL)
        return errno == EFAULT ? -1 : 0; /* EFAULT: a page a store would fault on */
    faulting_in_bytes = bytes;
    __atomic_store_n(&faulting_in, map, __ATOMIC_RELEASE);
    for (uint64_t at = 0; at < bytes; at += page_bytes)
        ((volatile char *)map)[at] = 0;
    __atomic_store_n(&faulting_in, NULL, __ATOMIC_RELEASE);
    return stopped ? -1 : 0;
}

/* The helper's work on the trace file, reopened by path and only if it is still the file
 * this process created, as long as the recorder made it (else it was truncated: nothing is
 * written): write out ranges of memory (buffered traces), then add a range to the file, its
 * blocks reserved, and map it (mapped traces). */
struct file_work {
    const struct ioassess_range *writes;
    unsigned write_count;
    unsigned written;                   /* ranges written whole (set by the helper) */
    uint64_t grow_offset, grow_bytes;   /* the range to add; 0 bytes: none */
    void *map;                          /* its mapping (set by the helper) */
    int grown;                          /* 1 if the range was added (set by the helper) */
    int truncated;                      /* 1 if the file is shorter (set by the helper) */
};

static void grow_in_helper(int fd, struct file_work *w)
{
    if (ioassess_storage_reserve(fd, w->grow_offset, w->grow_bytes, buffered) != 0)
        return;
    if (!buffered) {
        void *map = (void *)syscall(SYS_mmap, NULL, w->grow_bytes, PROT_READ | PROT_WRITE,
                                    MAP_SHARED, fd, (off_t)w->grow_offset);
        if ((uintptr_t)map > (uintptr_t)-4096)
            return;
        w->map = map;
    }
    w->grown = 1;
}

static long file_work_in_helper(void *arg)
{
    struct file_work *w = arg;
    int fd = (int)ioassess_sys_open(trace_path, O_RDWR | O_CLOEXEC | O_NOFOLLOW, 0);
    if (fd < 0)
        return -1;
    struct stat st;
    if (syscall(SYS_fstat, fd, &st) == 0 && st.st_dev == trace_device && st.st_ino == trace_inode) {
        w->truncated = (uint64_t)st.st_size < file_bytes;
        if (!w->truncated)
            w->written = ioassess_storage_write(fd, w->writes, w->write_count);
        if (!w->truncated && w->written == w->write_count && w->grow_bytes)
            grow_in_helper(fd, w);
    }
    ioassess_sys_close(fd);
    return 0;
}

/* Buffered traces: write out `count` extents and then the shared ranges (file names, the
 * summary table, and last the header, so that it never names what is not written yet), and
 * add the range w->grow_* if asked. If a write fails, recording stops and the op records of
 * the extents not written are lost. Caller holds the lock. */
static void write_out(const struct ioassess_range *extents, unsigned count, struct file_work *w)
{
    struct ioassess_range ranges[WRITE_BATCH + 3];
    for (unsigned i = 0; i < count; i++)
        ranges[i] = extents[i];
    unsigned n = count;
    if (name_extent)
        ranges[n++] = (struct ioassess_range){name_extent, name_extent_bytes, name_extent_offset};
    if (summary)
        ranges[n++] = (struct ioassess_range){summary, round_up(SUMMARY_ENTRIES * sizeof *summary,
                                                                page_bytes),
                                              header->summary_offset};
    ranges[n++] = (struct ioassess_range){header, header_bytes, 0};
    w->writes = ranges;
    w->write_count = n;
    w->written = 0;
    if (stopped || ioassess_private_fds(file_work_in_helper, w) != 0 || w->written < n) {
        for (unsigned i = w->written; i < count; i++)
            count_lost(op_records_in(extents[i].map, extents[i].bytes));
        stop_recording();
    }
}

/* Buffered traces: write out and unmap the extents waiting. Caller holds the lock. */
static void write_unwritten(struct file_work *w)
{
    write_out(unwritten, unwritten_count, w);
    for (unsigned i = 0; i < unwritten_count; i++)
        unmap(unwritten[i].map, unwritten[i].bytes);
    unwritten_count = 0;
}

/* An extent the process is done with: unmapped, or (buffered) once it is written out, with
 * the next batch. Caller holds the lock. */
static void release(void *map, uint64_t bytes, uint64_t offset)
{
    if (!map || !bytes)
        return;
    if (!buffered || stopped) {
        unmap(map, bytes);
        return;
    }
    unwritten[unwritten_count++] = (struct ioassess_range){map, bytes, offset};
    if (unwritten_count == WRITE_BATCH) {
        struct file_work w = {0};
        write_unwritten(&w);
    }
}

/* No more extents: the file could not grow, was replaced, or the helper could not start. */
static void stop_growing(void)
{
    space_failed = 1;
    ioassess_writer_set_flag(IOASSESS_HEADER_SPACE_FAILED);
}

void ioassess_writer_set_flag(uint32_t flag)
{
    if (header)
        __atomic_or_fetch(&header->flags, flag, __ATOMIC_RELAXED);
}

/* Add a chunk with room for `bytes` to the file: as big as the file so far, from 16 KiB to
 * 4 MiB, so that the helper's clone (tens of microseconds) is rare; mapped, or (buffered)
 * memory, the extents waiting written out first. The rest of the previous chunk stays in the
 * file as empty slots. Caller holds the lock. */
static int map_new_chunk(uint64_t bytes)
{
    unmap(chunk_next, (size_t)(chunk_end - chunk_next));
    chunk_next = chunk_end = NULL;
    uint64_t size = file_bytes < FIRST_CHUNK_BYTES ? FIRST_CHUNK_BYTES
                    : file_bytes > MAX_CHUNK_BYTES ? MAX_CHUNK_BYTES : file_bytes;
    size = round_up(size > bytes ? size : bytes, page_bytes);
    struct file_work w = {.grow_offset = file_bytes, .grow_bytes = size};
    void *map = NULL;
    if (buffered) {
        write_unwritten(&w);
        map = w.grown ? map_memory(NULL, size) : NULL;
    } else if (ioassess_private_fds(file_work_in_helper, &w) == 0) {
        map = w.map;
        if (w.truncated)
            stop_recording();
    }
    if (!map) {
        if (!stopped)
            stop_growing();
        return 0;
    }
    chunk_next = map;
    chunk_end = chunk_next + size;
    file_bytes += size;
    return 1;
}

/* `bytes` (whole pages) of the trace file for a new extent, faulted in; NULL when the file
 * cannot grow or recording stopped. Caller holds the lock. */
static void *map_new_extent(uint64_t bytes)
{
    if (space_failed || stopped)
        return NULL;
    if ((uint64_t)(chunk_end - chunk_next) < bytes && !map_new_chunk(bytes))
        return NULL;
    void *map = chunk_next;
    chunk_next += bytes;
    if (prefault(map, bytes) != 0) {
        unmap(map, bytes);
        stop_recording();
        return NULL;
    }
    return map;
}

/* The file offset of an address in the last chunk. */
static uint64_t file_offset_of(const void *in_chunk)
{
    return file_bytes - (uint64_t)(chunk_end - (const char *)in_chunk);
}

static void copy_string(char *dst, size_t dst_bytes, const char *src)
{
    size_t n = strnlen(src, dst_bytes - 1);
    memcpy(dst, src, n);
    dst[n] = '\0';
}

/* File-name safe form of a header string: [A-Za-z0-9.-], others become '-'. */
static void sanitise(char *dst, size_t dst_bytes, const char *src, const char *if_empty)
{
    if (!src[0])
        src = if_empty;
    size_t i = 0;
    for (; src[i] && i + 1 < dst_bytes && i < 64; i++) {
        char c = src[i];
        int ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                 c == '.' || c == '-';
        dst[i] = ok ? c : '-';
    }
    dst[i] = '\0';
}

/* /proc/self/cmdline as read (arguments separated by NUL) made one line. */
static void arguments_as_line(char *cmdline, long n)
{
    cmdline[n > 0 ? n : 0] = '\0';
    for (long i = 0; i < n; i++)
        if (cmdline[i] == '\0' || cmdline[i] == '\n')
            cmdline[i] = ' ';
    while (n > 0 && cmdline[n - 1] == ' ')
        cmdline[--n] = '\0';
}

static void describe_process(struct ioassess_header *h, char *cmdline, long cmdline_bytes)
{
    char exe[sizeof h->exe];
    long n = syscall(SYS_readlinkat, -100, "/proc/self/exe", exe, sizeof exe - 1);
    exe[n > 0 ? n : 0] = '\0';
    arguments_as_line(cmdline, cmdline_bytes);
    if (ioassess_config.obfuscate) {
        snprintf(h->exe, sizeof h->exe, "obfuscated:%016llx",
                 (unsigned long long)ioassess_hash_name(exe));
        snprintf(h->cmdline, sizeof h->cmdline, "obfuscated:%016llx",
                 (unsigned long long)ioassess_hash_name(cmdline));
        h->flags |= IOASSESS_HEADER_OBFUSCATED;
    } else {
        copy_string(h->exe, sizeof h->exe, exe);
        copy_string(h->cmdline, sizeof h->cmdline, cmdline);
    }
}

#define LONGEST_SEQUENCE "999.iot"     /* what follows the prefix, at most */

/* The trace file's name up to its sequence number, named so that job, host, rank and pid are
 * recoverable, into trace_path; its length, 0 if too long. */
static size_t trace_name_prefix(pid_t pid)
{
    char job[72], host[72];
    sanitise(job, sizeof job, ioassess_config.job_id, "nojob");
    sanitise(host, sizeof host, ioassess_config.hostname, "unknown");
    int n = snprintf(trace_path, sizeof trace_path, "%s/ioassess_%s_%s_r%lld_p%d_",
                     ioassess_config.trace_dir, job, host, (long long)ioassess_config.rank,
                     (int)pid);
    if (n <= 0 || (size_t)n + sizeof LONGEST_SEQUENCE > sizeof trace_path)
        return 0;
    return (size_t)n;
}

/* In the helper: create the trace file under the first free sequence number (it tells apart
 * the images one pid runs through exec). */
static int create_trace_file(size_t prefix_bytes)
{
    for (int seq = 0; seq < 1000; seq++) {
        char *end = trace_path + prefix_bytes;
        if (seq >= 100)
            *end++ = (char)('0' + seq / 100);
        if (seq >= 10)
            *end++ = (char)('0' + seq / 10 % 10);
        *end++ = (char)('0' + seq % 10);
        memcpy(end, ".iot", sizeof ".iot");
        int fd = (int)ioassess_sys_open(trace_path,
                                        O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd >= 0)
            return fd;
        if (errno != EEXIST)
            return -1;
    }
    return -1;
}

#define CLOCK_SOURCE_FILE "/sys/devices/system/clocksource/clocksource0/current_clocksource"

struct trace_start {
    size_t prefix_bytes;                /* trace_path holds the name up to the sequence number */
    uint64_t bytes;                     /* header page and first chunk */
    void *map;                          /* their mapping (set by the helper) */
    char cmdline[sizeof ((struct ioassess_header *)0)->cmdline];
    long cmdline_read;                  /* bytes read into cmdline (set by the helper) */
    int read_clock_source;              /* read the kernel's clock source into: */
    char clock_source[32];
};

/* In the helper: how the new trace open at fd is kept (ioassess-storage.c), its header and
 * first chunk reserved, and their memory: the file's mapping, or (buffered) memory. */
static void *start_storage(int fd, uint64_t bytes)
{
    buffered = ioassess_storage_prepare(fd);
    int reserved = ioassess_storage_reserve(fd, 0, bytes, buffered) == 0;
    if (!reserved && !buffered && errno == EOPNOTSUPP) {
        buffered = 1;                    /* no fallocate: nothing can be reserved */
        reserved = ioassess_storage_reserve(fd, 0, bytes, buffered) == 0;
    }
    if (!reserved)
        return NULL;
    if (buffered)
        return map_memory(NULL, bytes);
    void *map = (void *)syscall(SYS_mmap, NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    return (uintptr_t)map > (uintptr_t)-4096 ? NULL : map;
}

/* In the helper: read the files start-up needs (the process's arguments, the kernel's clock
 * source if asked, the mount table), create the trace file, remember which file it is, and
 * make the memory of its header and first chunk. */
static long start_trace_in_helper(void *arg)
{
    struct trace_start *s = arg;
    /* The helper shares the caller's memory, so its own arguments are the caller's; and
     * /proc/PID of the caller's pid could name another process where /proc was mounted in
     * another pid namespace. */
    s->cmdline_read = ioassess_read_in_helper("/proc/self/cmdline", s->cmdline, sizeof s->cmdline - 1);
    if (s->read_clock_source)
        ioassess_read_in_helper(CLOCK_SOURCE_FILE, s->clock_source, sizeof s->clock_source - 1);
    ioassess_mounts_read();
    int fd = create_trace_file(s->prefix_bytes);
    if (fd < 0)
        return -1;
    struct stat st;
    if (syscall(SYS_fstat, fd, &st) == 0) {
        trace_device = st.st_dev;
        trace_inode = st.st_ino;
        s->map = start_storage(fd, s->bytes);
    }
    ioassess_sys_close(fd);
    if (!s->map)
        syscall(SYS_unlinkat, -100, trace_path, 0);
    return s->map ? 0 : -1;
}

static void create_thread_key(void)
{
    pthread_key_create(&thread_key, ioassess_thread_exit);
}

/* The header of the new trace into `started`, magic last. */
static void describe_header(struct trace_start *start, uint64_t start_ticks, uint64_t start_ns)
{
    struct ioassess_header *h = &started;
    struct timespec real;
    clock_gettime(CLOCK_REALTIME, &real);
    memset(h, 0, sizeof *h);
    h->version = IOASSESS_FORMAT_VERSION;
    h->header_bytes = IOASSESS_HEADER_BYTES;
    h->slot_bytes = IOASSESS_SLOT_BYTES;
    h->byte_order_mark = IOASSESS_BYTE_ORDER_MARK;
    h->clock_source = ioassess_config.use_tsc ? IOASSESS_CLOCK_TSC : IOASSESS_CLOCK_MONOTONIC;
    h->pid = syscall(SYS_getpid);
    h->ppid = syscall(SYS_getppid);
    h->rank = ioassess_config.rank;
    h->start_ticks = start_ticks;
    h->start_monotonic_ns = start_ns;
    h->start_realtime_ns = (uint64_t)real.tv_sec * 1000000000ull + (uint64_t)real.tv_nsec;
    h->record_cap = ioassess_config.record_cap;
    h->flags = ioassess_pagecache_header_flags();
    copy_string(h->job_id, sizeof h->job_id, ioassess_config.job_id);
    copy_string(h->hostname, sizeof h->hostname, ioassess_config.hostname);
    describe_process(h, start->cmdline, start->cmdline_read);
    memcpy(h->magic, IOASSESS_MAGIC, sizeof h->magic);
}

/* The first clock pair after 1 ms, then at doubling gaps. Writing the header took some
 * microseconds: enough for a first rough ticks-per-ns estimate (it only schedules the clock
 * pairs; the reader fits its own from all pairs). */
static void schedule_clock_pairs(uint64_t start_ticks, uint64_t start_ns)
{
    uint64_t now_ticks, now_ns;
    clock_pair(&now_ticks, &now_ns);
    ticks_per_ns = now_ns > start_ns ? (double)(now_ticks - start_ticks) / (now_ns - start_ns)
                                     : 1.0;
    if (!ioassess_config.use_tsc)
        ticks_per_ns = 1.0;
    uint64_t interval = 1000000;
    __atomic_store_n(&clock_interval_ns, interval, __ATOMIC_RELAXED);
    __atomic_store_n(&ioassess_next_clock_ticks, now_ticks + (uint64_t)(interval * ticks_per_ns),
                     __ATOMIC_RELAXED);
}

int ioassess_writer_start(void)
{
    pthread_once(&thread_key_once, create_thread_key);
    page_bytes = getauxval(AT_PAGESZ);
    if (page_bytes < 4096)
        page_bytes = 4096;
    header_bytes = round_up(IOASSESS_HEADER_BYTES, page_bytes);
    struct trace_start start = {
        .prefix_bytes = trace_name_prefix((pid_t)syscall(SYS_getpid)),
        .bytes = header_bytes + round_up(FIRST_CHUNK_BYTES, page_bytes),
        .read_clock_source = ioassess_config.clock_from_kernel,
    };
    if (start.prefix_bytes == 0 || ioassess_private_fds(start_trace_in_helper, &start) != 0)
        return -1;
    if (ioassess_config.clock_from_kernel) {
        /* TSC ticks are trusted when the kernel itself uses the TSC as its clock source
         * (that is, it found it invariant and synchronised across CPUs). */
        ioassess_config.use_tsc = strncmp(start.clock_source, "tsc", 3) == 0;
        ioassess_config.clock_from_kernel = 0;
    }
    uint64_t start_ticks, start_ns;
    ioassess_monotonic_ns();             /* the first call in a process is slow: warm it up */
    clock_pair(&start_ticks, &start_ns);
    file_bytes = start.bytes;
    chunk_next = (char *)start.map + header_bytes;
    chunk_end = (char *)start.map + start.bytes;
    op_slots_granted = 0;
    space_failed = stopped = stop_written = summary_lost = 0;
    header_in_memory = buffered;

    describe_header(&start, start_ticks, start_ns);
    struct ioassess_header *h = start.map;
    memcpy((char *)h + sizeof h->magic, (char *)&started + sizeof h->magic,
           sizeof started - sizeof h->magic);
    __atomic_thread_fence(__ATOMIC_RELEASE);
    memcpy(h->magic, started.magic, sizeof h->magic);   /* last: the header is complete */
    header = h;
    if (buffered) {
        struct file_work w = {0};
        write_out(NULL, 0, &w);          /* the header: the trace is read even if killed */
    } else {
        ioassess_sigbus_install();
    }
    schedule_clock_pairs(start_ticks, start_ns);
    return 0;
}

/* A CLOCK slot written into the op slot r (which the caller owns). */
static void write_clock(struct ioassess_op_record *r)
{
    uint64_t ticks, monotonic_ns;
    clock_pair(&ticks, &monotonic_ns);
    struct ioassess_clock_record *c = (struct ioassess_clock_record *)r;
    c->ticks = ticks;
    c->monotonic_ns = monotonic_ns;
    __atomic_store_n(&c->type, IOASSESS_SLOT_CLOCK, __ATOMIC_RELEASE);
}

/* `count` contiguous slots of the shared extent (file names, scheduled clock pairs), or NULL
 * when the file cannot grow. Caller holds the lock. */
static struct ioassess_op_record *shared_slots(size_t count)
{
    if (name_next + count > name_end) {
        release(name_extent, name_extent_bytes, name_extent_offset);
        name_extent = NULL;
        name_next = name_end = NULL;
        uint64_t bytes = round_up(count * IOASSESS_SLOT_BYTES, page_bytes);
        void *map = map_new_extent(bytes);
        if (!map)
            return NULL;
        name_extent = map;
        name_extent_bytes = bytes;
        name_extent_offset = file_offset_of(map);
        name_next = map;
        name_end = name_next + bytes / IOASSESS_SLOT_BYTES;
    }
    struct ioassess_op_record *slots = name_next;
    name_next += count;
    return slots;
}

/* After a stop (stop_recording): this thread records nothing more, every later op of its is
 * counted in ops_lost (ioassess_writer_summary_add), and so are the records of its extent that
 * will never be written: those it stored into memory that replaced its extent's mapping, or
 * all of them in a buffered trace. */
static void stop_thread(struct ioassess_thread *t)
{
    if (t->extent_lost || buffered)
        count_lost(op_records_in(t->extent, t->extent_bytes));
    t->extent_lost = 0;
    t->end = t->next;
    t->capped = 1;
}

/* A scheduled clock pair goes to the shared extent, under the lock (a few times per run),
 * so that it never takes one of the op slots the record cap counts. errno is kept (called
 * after the wrapped call, whose errno the application is to see). After a stop every record
 * is followed by this call (the next pair is due at 0): it stops the thread. */
void ioassess_writer_clock_due(uint64_t now_ticks)
{
    if (__atomic_load_n(&stopped, __ATOMIC_ACQUIRE)) {
        stop_thread(&ioassess_self);
        return;
    }
    uint64_t due = __atomic_load_n(&ioassess_next_clock_ticks, __ATOMIC_RELAXED);
    if (now_ticks < due)
        return;
    uint64_t interval = __atomic_load_n(&clock_interval_ns, __ATOMIC_RELAXED) * 2;
    if (interval > MAX_CLOCK_INTERVAL_NS)
        interval = MAX_CLOCK_INTERVAL_NS;
    uint64_t next_due = now_ticks + (uint64_t)(interval * ticks_per_ns);
    if (!__atomic_compare_exchange_n(&ioassess_next_clock_ticks, &due, next_due, 0,
                                     __ATOMIC_RELAXED, __ATOMIC_RELAXED))
        return;                          /* another thread took this one */
    if (__atomic_load_n(&stopped, __ATOMIC_ACQUIRE))    /* a stop in between: keep it due */
        __atomic_store_n(&ioassess_next_clock_ticks, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&clock_interval_ns, interval, __ATOMIC_RELAXED);
    int saved_errno = errno;
    pthread_mutex_lock(&ioassess_lock);
    struct ioassess_op_record *slot = shared_slots(1);
    if (slot)
        write_clock(slot);
    pthread_mutex_unlock(&ioassess_lock);
    errno = saved_errno;
}

static void register_thread(struct ioassess_thread *t)
{
    t->head.tid = (uint32_t)syscall(SYS_gettid);
    pthread_setspecific(thread_key, t);
    t->next_extent_slots = FIRST_EXTENT_SLOTS;
    t->prev_thread = NULL;
    t->next_thread = threads;
    if (threads)
        threads->prev_thread = t;
    threads = t;
}

static void unregister_thread(struct ioassess_thread *t)
{
    if (t->prev_thread)
        t->prev_thread->next_thread = t->next_thread;
    else if (threads == t)
        threads = t->next_thread;
    if (t->next_thread)
        t->next_thread->prev_thread = t->prev_thread;
    t->prev_thread = t->next_thread = NULL;
}

/* Slots of the thread's extents that went to page-cache samples go back to the record cap,
 * which counts op records only. Caller holds the lock. */
static void return_sample_slots(struct ioassess_thread *t)
{
    op_slots_granted -= t->pagecache_slots;
    t->pagecache_slots = 0;
}

/* The thread's extent released (written out or unmapped); records in memory that replaced
 * its mapping after a failed store are lost. Caller holds the lock. */
static void release_thread_extent(struct ioassess_thread *t)
{
    if (t->extent_lost)
        count_lost(op_records_in(t->extent, t->extent_bytes));
    t->extent_lost = 0;
    release(t->extent, t->extent_bytes, t->extent_offset);
    t->extent = NULL;
    t->next = t->end = NULL;
}

/* Give the thread a new extent of op slots; 0 when the cap is reached or the file cannot
 * grow (the caller then uses the summary table). The first slot is a CLOCK pair. errno is
 * kept, as by every writer function called after a wrapped call. */
int ioassess_writer_refill(struct ioassess_thread *t)
{
    if (t->capped)
        return 0;
    int saved_errno = errno;
    pthread_mutex_lock(&ioassess_lock);
    if (!t->head.tid)
        register_thread(t);
    return_sample_slots(t);
    release_thread_extent(t);
    uint64_t remaining = ioassess_config.record_cap - op_slots_granted;
    uint64_t op_slots = t->next_extent_slots - 1;
    if (op_slots > remaining)
        op_slots = remaining;
    void *map = NULL;
    uint64_t bytes = round_up((op_slots + 1) * IOASSESS_SLOT_BYTES, page_bytes);
    if (op_slots > 0)
        map = map_new_extent(bytes);
    if (map) {
        op_slots_granted += op_slots;
        t->extent = map;
        t->extent_bytes = bytes;
        t->extent_offset = file_offset_of(map);
        t->next = map;
        t->end = t->next + 1 + op_slots;
        if (t->next_extent_slots < MAX_EXTENT_SLOTS)
            t->next_extent_slots *= 2;
        write_clock(t->next++);
    } else {
        t->capped = 1;
    }
    pthread_mutex_unlock(&ioassess_lock);
    errno = saved_errno;
    return map != NULL;
}

void ioassess_thread_exit(void *state)
{
    struct ioassess_thread *t = state;
    ioassess_enter(t);
    pthread_mutex_lock(&ioassess_lock);
    op_slots_granted -= (uint64_t)(t->end - t->next);   /* unused slots go back to the cap */
    return_sample_slots(t);
    release_thread_extent(t);
    unregister_thread(t);
    t->head.tid = 0;
    pthread_mutex_unlock(&ioassess_lock);
    ioassess_leave(t);
}

/* A slot followed by the NAME_PART slots of name, the parts written: the caller fills the
 * slot and stores its type last (it marks completeness); NULL if there is no room. Caller
 * holds the lock. */
static struct ioassess_op_record *named_slot(const char *name, uint32_t *name_bytes)
{
    size_t bytes = strnlen(name, IOASSESS_PATH_BYTES);
    size_t parts = (bytes + IOASSESS_NAME_PART_BYTES - 1) / IOASSESS_NAME_PART_BYTES;
    struct ioassess_op_record *slots = shared_slots(1 + parts);
    if (!slots)
        return NULL;
    for (size_t i = 0; i < parts; i++) {
        struct ioassess_name_part *p = (struct ioassess_name_part *)(slots + 1 + i);
        size_t n = bytes - i * IOASSESS_NAME_PART_BYTES;
        memcpy(p->bytes, name + i * IOASSESS_NAME_PART_BYTES,
               n < IOASSESS_NAME_PART_BYTES ? n : IOASSESS_NAME_PART_BYTES);
        p->type = IOASSESS_SLOT_NAME_PART;
    }
    *name_bytes = (uint32_t)bytes;
    return slots;
}

/* Caller holds the lock. The MOUNT slot of the name's mount point first, if this process has
 * not written it yet (ioassess-mounts.c). */
void ioassess_writer_file(uint64_t file_id, const struct stat *st, uint64_t fs_magic,
                          const char *name)
{
    ioassess_mounts_note(name);
    uint32_t name_bytes;
    struct ioassess_file_record *f = (struct ioassess_file_record *)named_slot(name, &name_bytes);
    if (!f)
        return;
    f->mode = st ? st->st_mode : 0;
    f->file_id = file_id;
    f->device = st ? st->st_dev : 0;
    f->inode = st ? st->st_ino : 0;
    f->name_bytes = name_bytes;
    f->fs_magic = fs_magic;
    __atomic_store_n(&f->type, IOASSESS_SLOT_FILE, __ATOMIC_RELEASE);
}

/* Caller holds the lock. */
void ioassess_writer_mount(const char *point, const char *fs_type, uint64_t device)
{
    uint32_t name_bytes;
    struct ioassess_mount_record *m = (struct ioassess_mount_record *)named_slot(point, &name_bytes);
    if (!m)
        return;
    m->name_bytes = name_bytes;
    m->device = device;
    snprintf(m->fs_type, sizeof m->fs_type, "%s", fs_type);
    __atomic_store_n(&m->type, IOASSESS_SLOT_MOUNT, __ATOMIC_RELEASE);
}

static struct ioassess_summary_entry *summary_table(void)
{
    struct ioassess_summary_entry *table = __atomic_load_n(&summary, __ATOMIC_ACQUIRE);
    if (table)
        return table;
    pthread_mutex_lock(&ioassess_lock);
    if (!summary) {
        uint64_t bytes = round_up(SUMMARY_ENTRIES * sizeof(struct ioassess_summary_entry),
                                  page_bytes);
        table = map_new_extent(bytes);
        if (table) {
            /* Offset first: a reader that finds an offset with no entries yet walks the
             * (zero) extent as empty slots, which is what it is. */
            __atomic_store_n(&header->summary_offset, file_offset_of(table), __ATOMIC_RELEASE);
            __atomic_store_n(&header->summary_entries, SUMMARY_ENTRIES, __ATOMIC_RELEASE);
            __atomic_store_n(&summary, table, __ATOMIC_RELEASE);
        }
    }
    table = summary;
    pthread_mutex_unlock(&ioassess_lock);
    return table;
}

static uint64_t mix(uint64_t key)
{
    key ^= key >> 33;
    key *= 0xff51afd7ed558ccdull;
    key ^= key >> 33;
    return key;
}

/* Find or claim the entry for a key; NULL if the table is full. */
static struct ioassess_summary_entry *summary_entry(struct ioassess_summary_entry *table,
                                                    uint8_t op, uint8_t size_bucket,
                                                    uint64_t file_id)
{
    if (file_id != 0 && __atomic_load_n(&summary_used, __ATOMIC_RELAXED) >= SUMMARY_SPILL_AT)
        file_id = 0;
    uint64_t start = mix(file_id ^ ((uint64_t)op << 56) ^ ((uint64_t)size_bucket << 48));
    for (uint32_t probe = 0; probe < SUMMARY_ENTRIES; probe++) {
        struct ioassess_summary_entry *e = &table[(start + probe) % SUMMARY_ENTRIES];
        uint32_t state = __atomic_load_n(&e->state, __ATOMIC_ACQUIRE);
        if (state == IOASSESS_SUMMARY_FREE) {
            uint32_t expected = IOASSESS_SUMMARY_FREE;
            if (__atomic_compare_exchange_n(&e->state, &expected, IOASSESS_SUMMARY_CLAIMING, 0,
                                            __ATOMIC_ACQUIRE,
                                            __ATOMIC_RELAXED)) {
                e->op = op;
                e->size_bucket = size_bucket;
                e->file_id = file_id;
                __atomic_add_fetch(&summary_used, 1, __ATOMIC_RELAXED);
                __atomic_store_n(&e->state, IOASSESS_SUMMARY_IN_USE, __ATOMIC_RELEASE);
                return e;
            }
            state = expected;
        }
        while (state == IOASSESS_SUMMARY_CLAIMING) {   /* another thread writes the key */
            sched_yield();
            state = __atomic_load_n(&e->state, __ATOMIC_ACQUIRE);
        }
        if (e->op == op && e->size_bucket == size_bucket && e->file_id == file_id)
            return e;
    }
    return NULL;
}

/* A byte sum of the summary table: saturates at UINT64_MAX instead of wrapping (requests of
 * absurd sizes fail, but are counted). */
static void add_bytes(uint64_t *sum, uint64_t bytes)
{
    uint64_t old = __atomic_load_n(sum, __ATOMIC_RELAXED);
    uint64_t new;
    do
        new = old > UINT64_MAX - bytes ? UINT64_MAX : old + bytes;
    while (!__atomic_compare_exchange_n(sum, &old, new, 1, __ATOMIC_RELAXED, __ATOMIC_RELAXED));
}

static unsigned log2_floor(uint64_t value)
{
    return value ? 63u - (unsigned)__builtin_clzll(value) : 0u;
}

/* In the helper, after a stop: the file made a trace again (whole pages, at least its header's;
 * its summary table left out, its counts lost, if the file no longer holds it or memory
 * replaced its mapping) and the header written. */
static long stopped_header_in_helper(void *unused)
{
    (void)unused;
    int fd = (int)ioassess_sys_open(trace_path, O_RDWR | O_CLOEXEC | O_NOFOLLOW, 0);
    if (fd < 0)
        return -1;
    struct stat st;
    if (syscall(SYS_fstat, fd, &st) == 0 && st.st_dev == trace_device && st.st_ino == trace_inode) {
        uint64_t size = round_up((uint64_t)st.st_size > header_bytes ? (uint64_t)st.st_size : header_bytes,
                                 page_bytes);
        if ((uint64_t)st.st_size != size)
            syscall(SYS_ftruncate, fd, (off_t)size);
        uint64_t offset = header->summary_offset;
        if (offset && (summary_lost || offset + round_up(SUMMARY_ENTRIES * sizeof *summary, page_bytes) > size)) {
            header->summary_entries = 0;
            header->summary_offset = 0;
            count_lost(__atomic_exchange_n(&header->ops_not_kept, 0, __ATOMIC_RELAXED));
        }
        struct ioassess_range whole_header = {header, header_bytes, 0};
        ioassess_storage_write(fd, &whole_header, 1);
    }
    ioassess_sys_close(fd);
    return 0;
}

/* After a stop, the header (memory now) saying so written to the file: at the first op that
 * finds the stop, and again at exit with the final counts. */
static void write_stop(void)
{
    if (__atomic_load_n(&stop_written, __ATOMIC_RELAXED) ||
        __atomic_exchange_n(&stop_written, 1, __ATOMIC_ACQ_REL))
        return;
    int saved_errno = errno;
    pthread_mutex_lock(&ioassess_lock);
    ioassess_private_fds(stopped_header_in_helper, NULL);
    pthread_mutex_unlock(&ioassess_lock);
    errno = saved_errno;
}

void ioassess_writer_summary_add(uint8_t op, uint64_t file_id, uint64_t requested,
                                 int64_t result, uint64_t duration_ticks)
{
    if (__atomic_load_n(&stopped, __ATOMIC_ACQUIRE)) {
        count_lost(1);
        write_stop();
        return;
    }
    int saved_errno = errno;
    struct ioassess_summary_entry *table = summary_table();
    errno = saved_errno;
    uint8_t size_bucket = requested ? (uint8_t)(log2_floor(requested) + 1) : 0;
    struct ioassess_summary_entry *e = table ? summary_entry(table, op, size_bucket, file_id)
                                             : NULL;
    if (!e) {
        ioassess_writer_count_lost();
        return;
    }
    unsigned bin = log2_floor(duration_ticks);
    if (bin >= IOASSESS_HIST_BINS)
        bin = IOASSESS_HIST_BINS - 1;
    __atomic_add_fetch(&e->count, 1, __ATOMIC_RELAXED);
    add_bytes(&e->bytes_requested, requested);
    if (result > 0 && !ioassess_op_moves_no_data(op))   /* metadata, mappings, io_uring instances */
        add_bytes(&e->bytes_returned, (uint64_t)result);
    else if (result < 0)
        __atomic_add_fetch(&e->errors, 1, __ATOMIC_RELAXED);
    __atomic_add_fetch(&e->duration_ticks, duration_ticks, __ATOMIC_RELAXED);
    __atomic_add_fetch(&e->duration_hist[bin], 1, __ATOMIC_RELAXED);
    __atomic_add_fetch(&header->ops_not_kept, 1, __ATOMIC_RELAXED);
}

void ioassess_writer_count_lost(void)
{
    count_lost(1);
}

/* Buffered traces at exit or exec: everything written out, the extents waiting and those of
 * the live threads. Caller holds the lock. */
static void write_all_out(void)
{
    struct file_work w = {0};
    write_unwritten(&w);
    struct ioassess_range live[WRITE_BATCH];
    unsigned n = 0;
    for (struct ioassess_thread *t = threads; t; t = t->next_thread) {
        if (t->extent)
            live[n++] = (struct ioassess_range){t->extent, t->extent_bytes, t->extent_offset};
        if (n == WRITE_BATCH || (!t->next_thread && n)) {
            write_out(live, n, &w);
            n = 0;
        }
    }
}

/* What memory holds of the trace written to the file, at exit or exec: a buffered trace
 * all of it, a stopped one its header. Not from a signal handler that interrupted the
 * recorder's own work (its lock may be held). */
static void write_at_end(void)
{
    struct ioassess_thread *self = &ioassess_self;
    if ((!buffered && !__atomic_load_n(&stopped, __ATOMIC_ACQUIRE)) || self->busy)
        return;
    ioassess_enter(self);
    pthread_mutex_lock(&ioassess_lock);
    if (!__atomic_load_n(&stopped, __ATOMIC_ACQUIRE))
        write_all_out();
    if (__atomic_load_n(&stopped, __ATOMIC_ACQUIRE))    /* also if writing it out stopped it */
        ioassess_private_fds(stopped_header_in_helper, NULL);
    pthread_mutex_unlock(&ioassess_lock);
    ioassess_leave(self);
}

void ioassess_writer_end(uint32_t reason)
{
    if (!header)
        return;
    uint64_t ticks, monotonic_ns;
    clock_pair(&ticks, &monotonic_ns);
    header->end_monotonic_ns = monotonic_ns;
    __atomic_store_n(&header->end_ticks, ticks, __ATOMIC_RELEASE);  /* the pair is complete */
    __atomic_store_n(&header->end_reason, reason, __ATOMIC_RELEASE);
    write_at_end();
}

void ioassess_writer_cancel_end(void)
{
    if (!header)
        return;
    __atomic_store_n(&header->end_reason, IOASSESS_END_RUNNING, __ATOMIC_RELEASE);
    __atomic_store_n(&header->end_ticks, 0, __ATOMIC_RELEASE);
    header->end_monotonic_ns = 0;
}

void ioassess_writer_exit_status(int status)
{
    if (!header)
        return;
    header->exit_status = status;
    __atomic_or_fetch(&header->flags, IOASSESS_HEADER_EXIT_STATUS, __ATOMIC_RELEASE);
}

/* In a fork child (single-threaded, lock held): the parent's mappings are the parent's
 * file; drop them all so the child starts its own trace. */
void ioassess_writer_after_fork(void)
{
    for (struct ioassess_thread *t = threads; t;) {
        struct ioassess_thread *next = t->next_thread;
        unmap(t->extent, t->extent_bytes);
        t->extent = NULL;
        t->next_thread = t->prev_thread = NULL;
        t = next;
    }
    threads = NULL;
    for (unsigned i = 0; i < unwritten_count; i++)
        unmap(unwritten[i].map, unwritten[i].bytes);
    unwritten_count = 0;
    struct ioassess_thread *self = &ioassess_self;
    self->next = self->end = NULL;
    self->extent = NULL;
    self->extent_lost = 0;
    self->head.tid = 0;
    self->capped = 0;
    self->pagecache_slots = 0;
    unmap(name_extent, name_extent_bytes);
    name_extent = NULL;
    name_next = name_end = NULL;
    unmap(summary, round_up(SUMMARY_ENTRIES * sizeof *summary, page_bytes));
    summary = NULL;
    summary_used = 0;
    unmap(chunk_next, (size_t)(chunk_end - chunk_next));
    chunk_next = chunk_end = NULL;
    unmap(header, header_bytes);
    header = NULL;
}
