/*
 * The trace file (layout: ioassess-trace.h). Everything is written through MAP_SHARED
 * mappings of chunks that are written with zeros (so their blocks exist) before they are
 * mapped, so a kill loses nothing already stored and a full disk shows up as a failed write
 * here, never as SIGBUS in the application. Extents (of a thread's op slots, of file names, the
 * summary table) are carved out of the last chunk. No file descriptor stays open: the file is
 * reopened by path for each new chunk, in a helper with a private descriptor table
 * (ioassess-private.c), and only if it is still the file this process created; so the
 * application can close, reuse or swap any descriptor number, and a file put in the trace's
 * place is never written.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/mman.h>

#include "ioassess-internal.h"

#define FIRST_EXTENT_SLOTS 64u         /* one page: short-lived threads stay small */
#define MAX_EXTENT_SLOTS 4096u         /* 256 KiB per thread at most */
#define SUMMARY_ENTRIES 4096u          /* 2 MiB, allocated only when the cap is reached */
#define SUMMARY_SPILL_AT (SUMMARY_ENTRIES / 4 * 3)
#define MAX_CLOCK_INTERVAL_NS 10000000000ull
#define FIRST_CHUNK_BYTES (16u << 10)   /* mapped with the header: one clone at start-up */
#define MAX_CHUNK_BYTES (4u << 20)      /* chunks grow with the file up to this */

static char trace_path[IOASSESS_PATH_BYTES];
static dev_t trace_device;              /* the trace file as created: a reopen by path */
static ino_t trace_inode;               /* must find this file */
static struct ioassess_header *header;
static uint64_t page_bytes;
static uint64_t file_bytes;             /* current size of the trace file */
static char *chunk_next, *chunk_end;    /* the part of the last chunk not carved out yet */
static uint64_t op_slots_granted;       /* op slots handed out, against the record cap */
static int space_failed;                /* the file could not grow: records stop */
static struct ioassess_thread *threads; /* live threads with an extent */
static pthread_key_t thread_key;        /* its destructor unmaps an exiting thread's extent */
static pthread_once_t thread_key_once = PTHREAD_ONCE_INIT;

/* File names go to a shared extent written under the lock. */
static struct ioassess_op_record *name_next, *name_end;
static void *name_extent;
static size_t name_extent_bytes;

/* Past the cap. */
static struct ioassess_summary_entry *summary;
static uint32_t summary_used;

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

/* Zeros for growing the file: never written, so reading it costs no memory. */
static char zeros[MAX_EXTENT_SLOTS * IOASSESS_SLOT_BYTES];

/* Append `bytes` of zeros at `offset`: the blocks are then allocated (a full disk fails
 * here, not later as SIGBUS in the application) and the pages are in the page cache. */
static int grow_file(int fd, uint64_t offset, uint64_t bytes)
{
    while (bytes > 0) {
        uint64_t n = bytes < sizeof zeros ? bytes : sizeof zeros;
        long written = syscall(SYS_pwrite64, fd, zeros, n, (off_t)offset);
        if (written <= 0)
            return -1;
        offset += (uint64_t)written;
        bytes -= (uint64_t)written;
    }
    return 0;
}

/* Fault every page in now (one call), not one page per 64 ops inside the timed calls. */
static void prefault(void *map, uint64_t bytes)
{
    if (syscall(SYS_madvise, map, bytes, 23 /* MADV_POPULATE_WRITE, Linux 5.14 */) == 0)
        return;
    for (uint64_t at = 0; at < bytes; at += page_bytes)
        ((volatile char *)map)[at] = 0;
}

/* In the helper: append `bytes` of zeros at `offset` to the file open at fd and map them;
 * NULL if it cannot. */
static void *grow_and_map(int fd, uint64_t offset, uint64_t bytes)
{
    if (grow_file(fd, offset, bytes) != 0) {
        /* Keep the size page aligned after a short write, so readers see whole slots. */
        syscall(SYS_ftruncate, fd, (off_t)offset);
        return NULL;
    }
    void *map = (void *)syscall(SYS_mmap, NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd,
                                (off_t)offset);
    return (uintptr_t)map > (uintptr_t)-4096 ? NULL : map;
}

struct chunk_request {
    uint64_t offset, bytes;             /* the new range of the file */
    void *map;                          /* its mapping (set by the helper) */
};

/* In the helper: reopen the trace by path and, if it is still the file this process created,
 * grow and map the requested range. */
static long map_chunk_in_helper(void *arg)
{
    struct chunk_request *c = arg;
    int fd = (int)ioassess_sys_open(trace_path, O_RDWR | O_CLOEXEC | O_NOFOLLOW, 0);
    if (fd < 0)
        return -1;
    struct stat st;
    if (syscall(SYS_fstat, fd, &st) == 0 && st.st_dev == trace_device && st.st_ino == trace_inode)
        c->map = grow_and_map(fd, c->offset, c->bytes);
    ioassess_sys_close(fd);
    return c->map ? 0 : -1;
}

static void unmap(void *map, size_t bytes)
{
    if (map && bytes)
        syscall(SYS_munmap, map, bytes);
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

/* Map a new chunk with room for `bytes`: as big as the file so far, from 16 KiB to 4 MiB, so
 * that the helper's clone (tens of microseconds) is rare. The rest of the previous chunk stays
 * in the file as empty slots. Caller holds the lock. */
static int map_new_chunk(uint64_t bytes)
{
    unmap(chunk_next, (size_t)(chunk_end - chunk_next));
    chunk_next = chunk_end = NULL;
    uint64_t size = file_bytes < FIRST_CHUNK_BYTES ? FIRST_CHUNK_BYTES
                    : file_bytes > MAX_CHUNK_BYTES ? MAX_CHUNK_BYTES : file_bytes;
    size = round_up(size > bytes ? size : bytes, page_bytes);
    struct chunk_request c = {file_bytes, size, NULL};
    if (ioassess_private_fds(map_chunk_in_helper, &c) != 0) {
        stop_growing();
        return 0;
    }
    chunk_next = c.map;
    chunk_end = chunk_next + size;
    file_bytes += size;
    return 1;
}

/* `bytes` (whole pages) of the trace file for a new extent, mapped and faulted in; NULL when
 * the file cannot grow. Caller holds the lock. */
static void *map_new_extent(uint64_t bytes)
{
    if (space_failed)
        return NULL;
    if ((uint64_t)(chunk_end - chunk_next) < bytes && !map_new_chunk(bytes))
        return NULL;
    void *map = chunk_next;
    chunk_next += bytes;
    prefault(map, bytes);
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

/* In the helper: read the files start-up needs (the process's arguments, the kernel's clock
 * source if asked, the mount table), create the trace file, remember which file it is, and map its header and
 * first chunk. */
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
        s->map = grow_and_map(fd, 0, s->bytes);
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

int ioassess_writer_start(void)
{
    pthread_once(&thread_key_once, create_thread_key);
    page_bytes = getauxval(AT_PAGESZ);
    if (page_bytes < 4096)
        page_bytes = 4096;
    pid_t pid = (pid_t)syscall(SYS_getpid);
    uint64_t first_slot = round_up(IOASSESS_HEADER_BYTES, page_bytes);
    struct trace_start start = {
        .prefix_bytes = trace_name_prefix(pid),
        .bytes = first_slot + round_up(FIRST_CHUNK_BYTES, page_bytes),
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
    struct timespec real;
    clock_gettime(CLOCK_REALTIME, &real);
    file_bytes = start.bytes;
    chunk_next = (char *)start.map + first_slot;
    chunk_end = (char *)start.map + start.bytes;
    op_slots_granted = 0;
    space_failed = 0;

    struct ioassess_header *h = start.map;
    h->version = IOASSESS_FORMAT_VERSION;
    h->header_bytes = IOASSESS_HEADER_BYTES;
    h->slot_bytes = IOASSESS_SLOT_BYTES;
    h->byte_order_mark = IOASSESS_BYTE_ORDER_MARK;
    h->clock_source = ioassess_config.use_tsc ? IOASSESS_CLOCK_TSC : IOASSESS_CLOCK_MONOTONIC;
    h->pid = pid;
    h->ppid = syscall(SYS_getppid);
    h->rank = ioassess_config.rank;
    h->start_ticks = start_ticks;
    h->start_monotonic_ns = start_ns;
    h->start_realtime_ns = (uint64_t)real.tv_sec * 1000000000ull + (uint64_t)real.tv_nsec;
    h->record_cap = ioassess_config.record_cap;
    h->flags |= ioassess_pagecache_header_flags();
    copy_string(h->job_id, sizeof h->job_id, ioassess_config.job_id);
    copy_string(h->hostname, sizeof h->hostname, ioassess_config.hostname);
    describe_process(h, start.cmdline, start.cmdline_read);
    __atomic_thread_fence(__ATOMIC_RELEASE);
    memcpy(h->magic, IOASSESS_MAGIC, sizeof h->magic);   /* last: the header is complete */
    header = h;

    /* Writing the header took some microseconds: enough for a first rough ticks-per-ns
     * estimate (it only schedules the clock pairs; the reader fits its own from all pairs). */
    uint64_t now_ticks, now_ns;
    clock_pair(&now_ticks, &now_ns);
    ticks_per_ns = now_ns > start_ns ? (double)(now_ticks - start_ticks) / (now_ns - start_ns)
                                     : 1.0;
    if (!ioassess_config.use_tsc)
        ticks_per_ns = 1.0;
    uint64_t interval = 1000000;         /* first pair after 1 ms, then at doubling gaps */
    __atomic_store_n(&clock_interval_ns, interval, __ATOMIC_RELAXED);
    __atomic_store_n(&ioassess_next_clock_ticks, now_ticks + (uint64_t)(interval * ticks_per_ns),
                     __ATOMIC_RELAXED);
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
        unmap(name_extent, name_extent_bytes);
        name_extent = NULL;
        name_next = name_end = NULL;
        uint64_t bytes = round_up(count * IOASSESS_SLOT_BYTES, page_bytes);
        void *map = map_new_extent(bytes);
        if (!map)
            return NULL;
        name_extent = map;
        name_extent_bytes = bytes;
        name_next = map;
        name_end = name_next + bytes / IOASSESS_SLOT_BYTES;
    }
    struct ioassess_op_record *slots = name_next;
    name_next += count;
    return slots;
}

/* A scheduled clock pair goes to the shared extent, under the lock (a few times per run),
 * so that it never takes one of the op slots the record cap counts. errno is kept (called
 * after the wrapped call, whose errno the application is to see). */
void ioassess_writer_clock_due(uint64_t now_ticks)
{
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
    unmap(t->extent, t->extent_bytes);
    t->extent = NULL;
    t->next = t->end = NULL;
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
    unmap(t->extent, t->extent_bytes);
    t->extent = NULL;
    t->next = t->end = NULL;
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

void ioassess_writer_summary_add(uint8_t op, uint64_t file_id, uint64_t requested,
                                 int64_t result, uint64_t duration_ticks)
{
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
    if (header)
        __atomic_add_fetch(&header->ops_lost, 1, __ATOMIC_RELAXED);
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
    struct ioassess_thread *self = &ioassess_self;
    self->next = self->end = NULL;
    self->extent = NULL;
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
    unmap(header, round_up(IOASSESS_HEADER_BYTES, page_bytes));
    header = NULL;
}
