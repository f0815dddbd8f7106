/*
 * Declarations shared by the recorder's source files (not installed, not a format).
 *
 *   ioassess-core.c    configuration from the environment, start-up, fork, exec and exit
 *   ioassess-writer.c  the trace file: extents, op records, file names, clock pairs, summary
 *   ioassess-storage.c where the trace's bytes are kept: a mapping of reserved blocks, or memory
 *                      the helper writes out (copy-on-write file systems)
 *   ioassess-sigbus.c  SIGBUS from the trace's mapping handled, every other the application's
 *   ioassess-private.c the helper process that does the recorder's work with descriptors
 *   ioassess-fd.c      descriptor table: which file and offset each descriptor refers to
 *   ioassess-posix.c   the interposed POSIX calls
 *   ioassess-meta.c    the interposed metadata calls (stat, unlink, readdir, ...), file ids of paths
 *   ioassess-mounts.c  the mount point of each recorded file (MOUNT slots)
 *   ioassess-stdio.c   the interposed C stdio calls on FILE streams (the STDIO layer)
 *   ioassess-pagecache.c which ops are sampled, and their page-cache state (cachestat)
 *   ioassess-layer.c   the entry points of layer libraries (ioassess-layer.h)
 *   ioassess-aio.c     asynchronous I/O (libaio, POSIX AIO), mapped files, io_uring instances
 *
 * Rules every file follows: the recorder's own I/O goes through raw syscalls (never through
 * an interposed symbol, so it is never recorded, by us or by a stacked library) and opens
 * files only in the helper of ioassess-private.c (never in the application's descriptor
 * table, where another thread could swap the file under the descriptor); errno is
 * saved and restored around any recorder work; any code that takes ioassess_lock or changes
 * shared state runs with the thread's busy flag set, and an interposed call that finds the
 * flag set (a signal handler interrupting the recorder) passes straight through.
 */
#ifndef IOASSESS_INTERNAL_H
#define IOASSESS_INTERNAL_H

#include <pthread.h>
#include <stddef.h>
#include <sys/single_threaded.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h>
#endif

#include "ioassess-trace.h"

/* Everything declared here is the library's own: addressed directly, never through the GOT. */
#pragma GCC visibility push(hidden)

#define IOASSESS_EXPORT __attribute__((visibility("default")))

/* An interposed call's next definition (a stacked library's, or libc's), looked up with
 * dlsym(RTLD_NEXT) at its first use into the wrapper's real_NAME (the file includes dlfcn.h). */
#define RESOLVE(name)                                                          \
    do {                                                                       \
        if (unlikely(!real_##name))                                            \
            real_##name = (__typeof__(real_##name))dlsym(RTLD_NEXT, #name);    \
    } while (0)

/* The same in a wrapper that returns `failure` as an unknown system call would (errno ENOSYS)
 * when there is no next definition, so that its timed path calls it without another test. */
#define RESOLVE_OR_FAIL(name, failure)                                         \
    do {                                                                       \
        RESOLVE(name);                                                         \
        if (unlikely(!real_##name)) {                                          \
            errno = ENOSYS;                                                    \
            return failure;                                                    \
        }                                                                      \
    } while (0)
#define likely(x) __builtin_expect(!!(x), 1)
#define unlikely(x) __builtin_expect(!!(x), 0)

#define IOASSESS_DEFAULT_RECORD_CAP (1u << 20)
#define IOASSESS_DEFAULT_EXCLUDE \
    "/proc:/sys:/etc:/usr:/bin:/sbin:/lib:/lib32:/lib64:/boot:/opt:/dev:/var:/run:/snap"
#define IOASSESS_MAX_EXCLUDES 32
#define IOASSESS_PATH_BYTES 4096
#define IOASSESS_MAX_RANK ((1 << 23) - 1)  /* the highest rank a reader accepts (MAX_RANKS - 1) */

enum ioassess_state {
    IOASSESS_STATE_UNINITIALISED = 0,
    IOASSESS_STATE_INITIALISING,
    IOASSESS_STATE_ACTIVE,
    IOASSESS_STATE_DISABLED,
};

/* Settings read once from the environment at start-up (see README, "Configuration"). */
struct ioassess_config {
    char trace_dir[IOASSESS_PATH_BYTES];    /* absolute directory for trace files */
    uint64_t record_cap;                    /* op records kept individually per process */
    int obfuscate;                          /* store hashes instead of names */
    int use_tsc;                            /* ticks are TSC cycles (else CLOCK_MONOTONIC ns) */
    int clock_from_kernel;                  /* use_tsc is to be set at start-up from the
                                               kernel's clock source */
    int64_t rank;                           /* from the launcher's environment, else -1 */
    char job_id[64];                        /* from the batch system's environment */
    char hostname[256];                     /* uname nodename or IOASSESS_HOSTNAME */
    int exclude_count;                      /* path prefixes not recorded */
    int skip_darshan_logs;                  /* Darshan's own logs are not the job's I/O */
    char exclude[IOASSESS_MAX_EXCLUDES][256];
};

/* The first 8 bytes of an op record (struct ioassess_op_record) as one word, so that a
 * thread's part of them (its id, the flags of an enclosing layer call) is written with one
 * store. type is IOASSESS_SLOT_EMPTY until the record is complete. */
union ioassess_record_head {
    struct {
        uint8_t type;
        uint8_t op;
        uint16_t flags;
        uint32_t tid;
    };
    uint64_t word;
};

/* Per-thread recorder state; lives in static TLS so the hot path needs no lookup. */
struct ioassess_thread {
    struct ioassess_op_record *next;        /* next free op slot in this thread's extent */
    struct ioassess_op_record *end;         /* one past the last op slot it may use */
    void *extent;                           /* the mapped extent, NULL if none */
    size_t extent_bytes;                    /* its length */
    union ioassess_record_head head;        /* this thread's op records start so: tid, the
                                               kernel thread id (0 until registered); flags,
                                               IOASSESS_OP_UNDER_* while the thread is inside
                                               a recorded MPI-IO call (0 outside) */
    uint32_t next_extent_slots;             /* slots to ask for next time (grows) */
    int busy;                               /* inside recorder bookkeeping */
    int stdio_nested;                       /* inside a recorded stdio call: the stdio calls
                                               made in it (a stacked library's) are not
                                               recorded (ioassess-stdio.c) */
    int capped;                             /* record cap reached: use the summary table */
    int32_t pagecache_countdown;            /* ops until this thread samples the next one */
    uint32_t pagecache_random;              /* xorshift state drawing the gaps, 0 unseeded */
    uint32_t pagecache_slots;               /* samples written since the last refill: slots
                                               the record cap does not count */
    struct ioassess_thread *prev_thread;    /* registry of live threads (under lock) */
    struct ioassess_thread *next_thread;
    uint64_t extent_offset;                 /* the extent's place in the trace file */
    int extent_lost;                        /* memory replaced its mapping after a failed
                                               store (ioassess_writer_fault): the records in
                                               it are lost */
};

/* One open file description as this process sees it (shared by dup'ed descriptors). Which
 * thread writes each field and how: docs/architecture.md, "Threads". */
struct ioassess_ofd {
    uint64_t file_id;                       /* hash of the path, as in op records */
    int64_t offset;                         /* current position (seekable files), valid while
                                               position_lost is 0 and no call is in flight */
    uint32_t refs;                          /* descriptors pointing here (under lock) */
    uint32_t flags;                         /* IOASSESS_OFD_* */
    uint32_t next_free;                     /* free-list link (under lock) */
    uint32_t pagecache_first;               /* its next ops to sample whatever the
                                               countdown: the first ops of each open file */
    /* Calls at the position (read, write, readv, writev, lseek, ...; ioassess-posix.c,
     * "offsets") once the description is shared (below): none is in flight when
     * calls_begun == calls_ended_alone + calls_ended_shared and owner_calls is even. */
    uint64_t calls_begun;                   /* every call adds 1 as it begins */
    uint64_t calls_ended_alone;             /* calls that began with none in flight, counted
                                               as they end (by them: one at a time) */
    uint64_t calls_ended_shared;            /* the others, counted as they end */
    uint32_t position_lost;                 /* 1: offset is not the kernel's position */
    uint32_t owner_forks;                   /* ioassess_fd_forks when owner_offset was known */
    /* Its owner (ioassess-posix.c, "offsets"): the first thread to call at the position
     * counts its calls alone, with plain stores, until another thread calls there. */
    uintptr_t owner;                        /* IOASSESS_OWNER_NONE, the owning thread's
                                               token (its &ioassess_self), or
                                               IOASSESS_OWNER_SHARED: counted as above */
    uint64_t owner_calls;                   /* the owner adds 1 as each of its calls begins
                                               and 1 as it ends (odd: one in flight); no
                                               other thread writes it while it is owned */
    int64_t owner_offset;                   /* the owner's position, -1 if unknown */
    uint64_t owner_calls_known;             /* owner_calls when offset was stored (shared) */
} __attribute__((aligned(64)));             /* threads using different files never share a line */

#define IOASSESS_OWNER_NONE ((uintptr_t)0)
#define IOASSESS_OWNER_SHARED ((uintptr_t)1)

#define IOASSESS_OFD_SEEKABLE (1u << 0)     /* regular file or block device */
#define IOASSESS_OFD_APPEND (1u << 1)       /* O_APPEND: writes go to the end */
#define IOASSESS_OFD_REGULAR (1u << 3)      /* a regular file: its ops may be sampled */
#define IOASSESS_OFD_DIRECT (1u << 4)       /* O_DIRECT: ops bypass the page cache */

/* Page-cache sampling (docs/architecture.md, "Page-cache samples"): the first
 * IOASSESS_PAGECACHE_FIRST_OPS ops of each open file description, then per thread one op in
 * IOASSESS_PAGECACHE_EVERY on average (random gaps, so that no periodic access pattern is
 * always or never sampled); an op of more than 2 x IOASSESS_PAGECACHE_RANGE_PAGES pages is
 * asked about its first and last IOASSESS_PAGECACHE_RANGE_PAGES pages only. */
#define IOASSESS_PAGECACHE_FIRST_OPS 4
#define IOASSESS_PAGECACHE_EVERY 512
#define IOASSESS_PAGECACHE_RANGE_PAGES 2

enum ioassess_pagecache_state {
    IOASSESS_PAGECACHE_SAMPLING = 0,        /* the default */
    IOASSESS_PAGECACHE_REFUSED,             /* the kernel refused cachestat: never again */
    IOASSESS_PAGECACHE_TURNED_OFF,          /* IOASSESS_PAGECACHE=0 */
};

extern int ioassess_state;
extern int ioassess_pagecache_state;
extern struct ioassess_config ioassess_config;
extern pthread_mutex_t ioassess_lock;
extern uint64_t ioassess_next_clock_ticks;
extern __thread struct ioassess_thread ioassess_self __attribute__((tls_model("initial-exec")));

/* ioassess-core.c */
void ioassess_init(void);
void ioassess_posix_resolve(void);

/* ioassess-writer.c */
int ioassess_writer_start(void);             /* new trace file for this process; 0 on success */
void ioassess_writer_after_fork(void);       /* in the child: drop the parent's mappings */
int ioassess_writer_refill(struct ioassess_thread *t);
void ioassess_writer_summary_add(uint8_t op, uint64_t file_id, uint64_t requested,
                                 int64_t result, uint64_t duration_ticks);
void ioassess_writer_clock_due(uint64_t now_ticks);
void ioassess_writer_file(uint64_t file_id, const struct stat *st, uint64_t fs_magic,
                          const char *name);
void ioassess_writer_mount(const char *point, const char *fs_type, uint64_t device);
void ioassess_writer_count_lost(void);
int ioassess_writer_fault(const void *address);  /* SIGBUS at address: the trace's? */
void ioassess_writer_set_flag(uint32_t flag);
void ioassess_writer_end(uint32_t reason);
void ioassess_writer_cancel_end(void);
void ioassess_writer_exit_status(int status);
void ioassess_thread_exit(void *state);

/* A range of the trace file and the memory that holds it. */
struct ioassess_range {
    void *map;
    uint64_t bytes, offset;
};

/* ioassess-storage.c (in the helper) */
int ioassess_storage_prepare(int fd);
int ioassess_storage_reserve(int fd, uint64_t offset, uint64_t bytes, int buffered);
unsigned ioassess_storage_write(int fd, const struct ioassess_range *ranges, unsigned count);

/* ioassess-sigbus.c */
void ioassess_sigbus_install(void);         /* once the trace is mapped */
void ioassess_sigbus_before_exec(void);
void ioassess_sigbus_after_failed_exec(void);

/* ioassess-pagecache.c */
void ioassess_pagecache_configure(int turned_off);
uint32_t ioassess_pagecache_header_flags(void);
int ioassess_pagecache_pick(struct ioassess_ofd *o, struct ioassess_thread *t);
int ioassess_pagecache_take(int fd, int64_t offset, uint64_t bytes, int is_write, const void *buffer,
                            struct ioassess_pagecache_record *sample);
void ioassess_pagecache_record(struct ioassess_pagecache_record *sample, uint64_t op_start_ticks);

/* ioassess-private.c */
long ioassess_private_fds(long (*work)(void *), void *arg);  /* work's result, -1 if no helper */
long ioassess_read_in_helper(const char *path, char *buf, size_t buf_bytes);

/* ioassess-fd.c */
struct ioassess_ofd *ioassess_fd_discover(int fd);
uint64_t ioassess_fd_name_path(const char *path);
void ioassess_fd_opened(int fd, int flags);
int ioassess_fd_reopened(int fd, int flags, uint64_t file_id);
uint64_t ioassess_fd_regular_file(int fd);
void ioassess_fd_closed(int fd);
void ioassess_fd_closed_range(unsigned first, unsigned last);
void ioassess_fd_duplicated(int old_fd, int new_fd);
void ioassess_fd_set_status(int fd, int status_flags);
void ioassess_fd_fork_parent(void);
void ioassess_fd_fork_child(void);
/* File ids are 64-bit FNV-1a hashes of absolute names (ioassess_hash_name; the metadata
 * calls continue a directory's state with a path's bytes, ioassess-meta.c). */
#define IOASSESS_FNV_BASIS 0xcbf29ce484222325ull
#define IOASSESS_FNV_PRIME 0x100000001b3ull

static inline uint64_t ioassess_fnv_byte(uint64_t hash, unsigned char c)
{
    return (hash ^ c) * IOASSESS_FNV_PRIME;
}

/* Whether an op kind's result is not bytes moved: a metadata call's (a descriptor, 0, a
 * position...), a mapping's or an io_uring instance's. */
static inline int ioassess_op_moves_no_data(uint8_t op)
{
    return (op >= IOASSESS_OP_OPEN && op <= IOASSESS_OP_FALLOCATE) || op == IOASSESS_OP_FOPEN ||
           op == IOASSESS_OP_FCLOSE || op == IOASSESS_OP_FSEEK || op == IOASSESS_OP_FTELL ||
           op == IOASSESS_OP_MMAP || op == IOASSESS_OP_IO_URING;
}

/* An op record's result: what the call returned, or -errno when it failed. */
static inline int64_t ioassess_outcome(long result, int err)
{
    return result < 0 ? -(int64_t)err : (int64_t)result;
}

uint64_t ioassess_hash_name(const char *name);
int ioassess_excluded(const char *path);     /* under an excluded prefix, or a Darshan log */

/* ioassess-mounts.c */
void ioassess_mounts_read(void);            /* in the helper, as the trace starts */
void ioassess_mounts_note(const char *name);
void ioassess_mounts_fork_child(void);
/* ioassess-stdio.c */
void ioassess_stdio_resolve(void);

/* ioassess-meta.c */
void ioassess_meta_resolve(void);
void ioassess_meta_fork_child(void);
void ioassess_meta_opened(uint8_t op, int dirfd, const char *path, int flags, int fd, int err,
                          uint64_t start, uint64_t end);
uint64_t ioassess_meta_closing(int fd);
void ioassess_meta_closed(uint8_t op, int fd, uint64_t file_id, int result, int err,
                          uint64_t start, uint64_t end);
void ioassess_meta_fd_closed(int fd);
void ioassess_meta_fd_duplicated(int old_fd, int new_fd);
void ioassess_meta_fd_closed_range(unsigned first, unsigned last);

/* ioassess-aio.c */
void ioassess_aio_resolve(void);
void ioassess_aio_fork_child(void);

#define IOASSESS_FD_LIMIT 65536
#define IOASSESS_FD_UNKNOWN 0u               /* not seen yet: look it up on first use */
#define IOASSESS_FD_IGNORED 1u               /* not a recorded kind of file, or excluded */
#define IOASSESS_FD_FIRST_OFD 2u             /* slot value = ofd index + 2 */
extern uint32_t ioassess_fd_slot[IOASSESS_FD_LIMIT];
extern struct ioassess_ofd ioassess_ofds[];
extern uint32_t ioassess_fd_forks;          /* forks so far: an owner's position is lost after
                                               one (the child shares it) */

/* The recorder's clock. rdtsc is the cheapest timer here (~10 ns against ~23 ns for
 * clock_gettime); the reader converts ticks with the CLOCK pairs the writer leaves.
 *
 * A timed call lies between ioassess_ticks_start and ioassess_ticks_end. rdtsc alone is not
 * ordered with the instructions around it: the CPU may read the counter after the call's first
 * instructions have begun, or before its last ones (and the loads of its result) are done, and
 * an op's duration would then miss part of the call. The cheapest reads that keep the whole
 * call inside the interval (Intel SDM, RDTSC and RDTSCP; measured in docs/performance.md,
 * 2026-11-25):
 *   start: rdtsc; lfence   the lfence waits for the read, and no later instruction (the
 *                          call) begins before it completes;
 *   end:   rdtscp          reads only once every earlier instruction has executed and every
 *                          earlier load is globally visible (the call is done).
 * Not fenced on the other sides, on purpose: an lfence before the start would keep the
 * recorder's own lookups out of the interval and one after the end would keep the record's
 * stores from starting early; neither changes whether the call is inside, and each costs a
 * few ns. Without the TSC, clock_gettime (vDSO) orders its own counter read before it (the
 * kernel's rdtsc_ordered) but not the instructions after it: an lfence after the start read
 * and one before the end read do what rdtsc; lfence and rdtscp do. Other architectures rely
 * on their vDSO's own barriers. The inline assembly's memory clobber keeps the compiler from
 * moving memory accesses (and the call) across a read. */
static inline void ioassess_lfence(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __asm__ volatile("lfence" : : : "memory");
#endif
}

static inline uint64_t ioassess_ticks_start(int use_tsc)
{
#if defined(__x86_64__) || defined(__i386__)
    if (likely(use_tsc)) {
        uint32_t low, high;
        __asm__ volatile("rdtsc\n\tlfence" : "=a"(low), "=d"(high) : : "memory");
        return (uint64_t)high << 32 | low;
    }
#endif
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    ioassess_lfence();
    return (uint64_t)now.tv_sec * 1000000000ull + (uint64_t)now.tv_nsec;
}

static inline uint64_t ioassess_ticks_end(int use_tsc)
{
#if defined(__x86_64__) || defined(__i386__)
    if (likely(use_tsc)) {
        uint32_t low, high;
        __asm__ volatile("rdtscp" : "=a"(low), "=d"(high) : : "rcx", "memory");
        return (uint64_t)high << 32 | low;
    }
#endif
    ioassess_lfence();
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (uint64_t)now.tv_sec * 1000000000ull + (uint64_t)now.tv_nsec;
}

/* An unordered read, for what times no call: the writer's (ticks, CLOCK_MONOTONIC) pairs and
 * the seed of the sampling gaps. */
static inline uint64_t ioassess_ticks(void)
{
#if defined(__x86_64__) || defined(__i386__)
    if (likely(ioassess_config.use_tsc))
        return __rdtsc();
#endif
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (uint64_t)now.tv_sec * 1000000000ull + (uint64_t)now.tv_nsec;
}

static inline uint64_t ioassess_monotonic_ns(void)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (uint64_t)now.tv_sec * 1000000000ull + (uint64_t)now.tv_nsec;
}

static inline void ioassess_enter(struct ioassess_thread *t)
{
    t->busy = 1;
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
}

static inline void ioassess_leave(struct ioassess_thread *t)
{
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    t->busy = 0;
}

/* ioassess_lock for a change that no signal handler makes (the busy flag is set): taken only
 * once the process has other threads (glibc's __libc_single_threaded, cleared for good by the
 * first pthread_create). While it has one, no other thread can be inside the change, and none
 * can start before the change is done: creating one is a call of this thread. Returns
 * whether the lock was taken, for ioassess_unlock_if. */
static inline int ioassess_lock_if_threaded(void)
{
    if (__libc_single_threaded)
        return 0;
    pthread_mutex_lock(&ioassess_lock);
    return 1;
}

static inline void ioassess_unlock_if(int locked)
{
    if (locked)
        pthread_mutex_unlock(&ioassess_lock);
}

/* Whether the recorder records; the first call in a process starts it. */
/* The count of calls begun at a description's position. While the process has one thread
 * (glibc's __libc_single_threaded, cleared by the first pthread_create) it is added to by one
 * x86 instruction without the lock prefix: still indivisible for a signal handler that
 * interrupts this thread (it runs between two instructions), and a few cycles instead of the
 * 20-odd of a locked one. Once other threads exist (or elsewhere than x86-64) the add is
 * atomic, and a full barrier: the loads before it are done before it, the loads after it
 * after. Threads that glibc does not know of are beyond this: made with clone() outside
 * pthread_create (the flag stays set), or started by a signal handler in the middle of a
 * call at the position. Their calls at a position shared with another thread may lose a
 * count, and two overlapping calls may then both take themselves for alone (wrong offsets). */
static inline uint64_t ioassess_calls_begin(uint64_t *begun)
{
    uint64_t before = 1;
#if defined(__x86_64__)
    if (likely(__libc_single_threaded)) {
        __asm__ volatile("xaddq %0, %1" : "+r"(before), "+m"(*begun) : : "memory");
        return before;
    }
#endif
    return __atomic_fetch_add(begun, before, __ATOMIC_SEQ_CST);
}

/* One more call of a description's owner begun or ended: one x86 instruction without the lock
 * prefix, indivisible for a signal handler that interrupts the owner (its calls are the only
 * others that write the count while the description is owned). Owned descriptions exist on
 * x86-64 only (ioassess-posix.c, "offsets"). */
static inline void ioassess_owner_count(uint64_t *calls)
{
#if defined(__x86_64__)
    __asm__ volatile("addq $1, %0" : "+m"(*calls) : : "memory");
#else
    __atomic_fetch_add(calls, 1, __ATOMIC_SEQ_CST);
#endif
}

/* The position is no longer known: the next call that runs alone reads it from the kernel. */
static inline void ioassess_position_lost(struct ioassess_ofd *o)
{
    __atomic_store_n(&o->position_lost, 1, __ATOMIC_RELAXED);
}

/* A description's calls counted by every thread from now on (a call of another thread than its
 * owner, of a signal handler inside an owner's call, a description reused with a call in
 * flight): the position is lost, and the owner's call in flight, if any, records -1 (it finds
 * the owner changed when it ends). An exchange, a full barrier: visible before the caller's
 * system call. Once per description's life. */
static inline void ioassess_position_share(struct ioassess_ofd *o)
{
    ioassess_position_lost(o);
    __atomic_exchange_n(&o->owner, IOASSESS_OWNER_SHARED, __ATOMIC_SEQ_CST);
}

/* A move of the position the recorder does not follow (a fork child's) counted as a call that
 * overlapped any in flight: it marks the position lost, and an alone call in flight sees that
 * a call began (and does not take the position for known). */
static inline void ioassess_position_unfollowed(struct ioassess_ofd *o)
{
    ioassess_calls_begin(&o->calls_begun);
    ioassess_position_lost(o);
    __atomic_fetch_add(&o->calls_ended_shared, 1, __ATOMIC_RELEASE);
}

static inline int ioassess_state_now(void)
{
    return __atomic_load_n(&ioassess_state, __ATOMIC_ACQUIRE);   /* a plain load on x86 */
}

static inline int ioassess_active(void)
{
    int state = ioassess_state_now();
    if (likely(state == IOASSESS_STATE_ACTIVE))
        return 1;
    if (state != IOASSESS_STATE_UNINITIALISED)
        return 0;
    ioassess_init();
    return ioassess_state_now() == IOASSESS_STATE_ACTIVE;
}

/* The descriptor's file description if fd is recorded, else NULL. Called before the
 * wrapped call; the busy check makes nested calls from signal handlers pass through. */
static inline struct ioassess_ofd *ioassess_tracked(int fd)
{
    if (unlikely(!ioassess_active()))
        return NULL;
    if (unlikely((unsigned)fd >= IOASSESS_FD_LIMIT))
        return NULL;
    uint32_t slot = __atomic_load_n(&ioassess_fd_slot[fd], __ATOMIC_ACQUIRE);
    if (unlikely(ioassess_self.busy)) {
        if (slot >= IOASSESS_FD_FIRST_OFD)  /* a call at the position is still counted in
                                               flight (ioassess-posix.c, "offsets") */
            ioassess_writer_count_lost();
        return NULL;
    }
    if (likely(slot >= IOASSESS_FD_FIRST_OFD))
        return &ioassess_ofds[slot - IOASSESS_FD_FIRST_OFD];
    if (slot == IOASSESS_FD_IGNORED)
        return NULL;
    return ioassess_fd_discover(fd);
}

/* How many slots ahead of the one being written ioassess_record prefetches: about 1 us of
 * the fastest ops ahead, far more than a memory access takes. A prefetch past the extent's
 * end is harmless (a prefetch never faults). */
#define IOASSESS_PREFETCH_SLOTS 4

static inline void ioassess_prefetch_for_write(const void *address)
{
#if defined(__x86_64__) || defined(__i386__)
    __asm__ volatile("prefetchw %0" : : "m"(*(const char *)address));  /* a NOP where absent */
#else
    __builtin_prefetch(address, 1);
#endif
}

/* Append one op record (or, past the cap, add it to the summary table). The flags of an
 * enclosing MPI-IO call, if any, are added to the record's. */
static inline void ioassess_record(uint8_t op, uint16_t flags, uint64_t file_id, int64_t offset,
                                   uint64_t requested, int64_t result, uint64_t start_ticks,
                                   uint64_t end_ticks, const void *buffer)
{
    struct ioassess_thread *t = &ioassess_self;
    ioassess_enter(t);
    if (unlikely(t->next == t->end) && !ioassess_writer_refill(t)) {
        ioassess_writer_summary_add(op, file_id, requested, result, end_ticks - start_ticks);
        ioassess_leave(t);
        return;
    }
    struct ioassess_op_record *r = t->next++;
    /* The slots were written (with zeros) when their chunk was made, long enough ago to have
     * left the cache: ask for a later slot's line now, so that its store does not wait. */
    ioassess_prefetch_for_write(r + IOASSESS_PREFETCH_SLOTS);
    union ioassess_record_head head = t->head;
    head.op = op;
    head.flags |= flags;
    memcpy(r, &head.word, sizeof head.word);
    r->file_id = file_id;
    r->offset = offset;
    r->requested = requested;
    r->result = result;
    r->start_ticks = start_ticks;
    r->duration_ticks = end_ticks - start_ticks;
    r->buffer = (uint64_t)(uintptr_t)buffer;
    __atomic_store_n(&r->type, IOASSESS_SLOT_OP, __ATOMIC_RELEASE);
    if (unlikely(end_ticks >= __atomic_load_n(&ioassess_next_clock_ticks, __ATOMIC_RELAXED)))
        ioassess_writer_clock_due(end_ticks);
    ioassess_leave(t);
}

/* Whether this op is to be sampled: its page-cache state taken before the call
 * (ioassess_pagecache_take) and written after its op record (ioassess_pagecache_record).
 * Common path: one load from the file description and one decrement of a thread-local count. */
static inline int ioassess_pagecache_due(struct ioassess_ofd *o)
{
    struct ioassess_thread *t = &ioassess_self;
    if (likely(__atomic_load_n(&o->pagecache_first, __ATOMIC_RELAXED) == 0 &&
               --t->pagecache_countdown > 0))
        return 0;
    return ioassess_pagecache_pick(o, t);
}

/* Raw system calls for the recorder's own work: never recorded, by us or by a stacked
 * library, and never a detour through the application's interposed symbols. */
static inline long ioassess_sys_open(const char *path, int flags, mode_t mode)
{
    return syscall(SYS_openat, -100 /* AT_FDCWD */, path, flags, mode);
}

static inline long ioassess_sys_close(int fd)
{
    return syscall(SYS_close, fd);
}

#pragma GCC visibility pop

#endif
