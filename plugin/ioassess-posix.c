/*
 * The interposed POSIX calls. Data calls (read, write and their positional, vector and
 * fortified forms, fsync, fdatasync) are timed and recorded; descriptor calls (open, dup,
 * close, lseek, fcntl) keep the descriptor table true, and open and close are also timed and
 * recorded as metadata ops (ioassess-meta.c has the other metadata calls). Each exported symbol resolves the next
 * definition with dlsym(RTLD_NEXT) (so a stacked library such as libdarshan.so works in
 * either order) and returns exactly what that definition returned, with its errno.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <sys/sendfile.h>
#include <sys/uio.h>

#include "ioassess-internal.h"

/* A call whose next definition does not exist fails as an unknown system call would. */
#define CALL_REAL(name, ...)                                                   \
    (likely(real_##name != NULL) ? real_##name(__VA_ARGS__) : (errno = ENOSYS, -1))

/* ---- offsets ---- */

/* A call at the descriptor's position (read, write, readv, writev, preadv2 and pwritev2 given
 * -1, lseek, sendfile and the like) learns its offset from the description's offset, which the
 * recorder keeps in user space. Threads that share the description may call at the same time:
 * the kernel then serializes the calls in an order no one sees (docs/trace-format.md,
 * "Offsets"). Most descriptions are used by one thread only, so each has an OWNER, the first
 * thread to call at its position, and two ways of counting:
 *
 * Owned (x86-64): the owner's calls add 1 to owner_calls as they begin and as they end (odd:
 * one in flight) with plain adds, keep the position in owner_offset, and are exact if, after
 * the call, the description is still owned by the caller and no fork happened meanwhile:
 *   - any call by another thread (and one by a signal handler that interrupts an owner's call:
 *     it finds owner_calls odd) first makes the description SHARED (ioassess_position_share,
 *     a locked exchange, so visible before its own system call);
 *   - if such a call's kernel operation moved the position before the owner's kernel
 *     operation used it, the owner's operation read the position that call wrote (or a later
 *     one), so the owner's load of `owner` after its call sees SHARED: on x86 (total store
 *     order) a load that sees a store sees every store that was visible before it, and the
 *     other call stored SHARED before its system call; for regular files the kernel's f_pos
 *     lock also orders the two (release, acquire). The owner then records -1;
 *   - otherwise no other call moved the position between the owner's previous call (which
 *     stored owner_offset) and this one: the offset is exact. A fork (the child shares the
 *     position) bumps ioassess_fd_forks, which the owner compares with owner_forks.
 * ThreadSanitizer does not see this argument (it does not model the kernel's position, and
 * the owner's adds are inline assembly it does not see); every access is atomic, so it has
 * nothing to report either. The owner's own calls write owner_offset; a signal handler's call
 * on the owner's thread outside an owner's call is an owner's call like another.
 *
 * Shared (every thread, and the owner's calls once another thread has called): the calls are
 * counted as they begin and end:
 *   - a call that begins when every call begun before it has ended ("alone") and no owner's
 *     call is in flight, the position known, starts at offset; if still no other call has
 *     begun and owner_calls has not moved when it ends, it stores the position after it and
 *     records its offset: exact;
 *   - a call that begins while another is in flight marks the position lost and records -1,
 *     and so does the one in flight when it ends (it sees that a call began);
 *   - the next call that runs alone reads the position from the kernel after it
 *     (lseek(fd, 0, SEEK_CUR), its own bytes subtracted): exact again. So do calls after a
 *     fork (the child shares the position), after an O_APPEND write, after sendfile,
 *     copy_file_range or splice moved it, after a call that passed through unrecorded, and
 *     after the description became shared.
 * An owner's call still in flight when the description became shared (it began owned) is not
 * in the counts: owner_calls stands for it. It added 1 before its system call, so a shared
 * call whose kernel operation (or lseek) saw the position it moved sees owner_calls moved
 * after its own call (the same order as above) and records -1; one that moved the position
 * between two shared calls is seen by the second, owner_calls no longer being
 * owner_calls_known, the value it had when offset was stored.
 * Why counting holds: a call reads the counts of ended calls before it adds itself to
 * calls_begun (a locked add, a full barrier), so "alone" means every earlier call had ended,
 * each having stored offset and the lost mark before counting itself ended; and only one alone
 * call is in flight at a time (any call beginning meanwhile sees it unended), so
 * calls_ended_alone and offset are written by one call at a time, with plain stores.
 * Costs: an owner's call, plain loads, stores and two unlocked adds (as a single-threaded
 * process's); a shared alone call, one locked add (none while the process has one thread:
 * ioassess_calls_begin) and a few plain loads and stores. A call at the position that
 * bypasses the wrappers (a raw system call, glibc's stdio reading its buffer) is beyond this,
 * as before, and so are a thread that glibc does not know of sharing its parent's thread
 * state (raw clone: the same owner token), and a call whose descriptor another thread closes
 * and reopens, reusing the description, between its look-up of the descriptor and its begin
 * (as for a call whose descriptor number then names another file). */
struct at_position {
    int seekable;                           /* offsets are tracked at all */
    int alone;                              /* every call begun before it had ended */
    int resync;                             /* alone, the position lost: read it from the
                                               kernel after the call */
    int owned;                              /* counted as its owner's call */
    uint64_t begun;                         /* calls_begun before it (shared); the fork count
                                               when it began (owned) */
    uint64_t ended_alone;                   /* calls_ended_alone when it began */
    uint64_t owner_calls;                   /* owner_calls when it began (shared) */
    int64_t before;                         /* the offset it starts at if known now, else -1 */
};

#define AT_POSITION_NONE {0, 0, 0, 0, 0, 0, 0, -1}

/* This thread's token as an owner. */
static inline uintptr_t owner_token(void)
{
    return (uintptr_t)&ioassess_self;
}

/* The beginning of an owner's call, or 0 if the caller may not count as the owner (another
 * thread owns the description, or it is shared, or one of this thread's calls is in flight
 * there: a signal handler interrupted it). */
static inline __attribute__((always_inline)) int owned_begin(struct ioassess_ofd *o, struct at_position *p)
{
#if defined(__x86_64__)
    uintptr_t me = owner_token(), owner = __atomic_load_n(&o->owner, __ATOMIC_ACQUIRE);
    if (unlikely(owner != me)) {
        if (owner != IOASSESS_OWNER_NONE)
            return 0;
        /* the first call at this position (of this description's life) takes it */
        if (!__atomic_compare_exchange_n(&o->owner, &owner, me, 0, __ATOMIC_ACQ_REL,
                                         __ATOMIC_ACQUIRE))
            return 0;
    }
    if (unlikely(__atomic_load_n(&o->owner_calls, __ATOMIC_RELAXED) & 1))
        return 0;                           /* a handler inside this thread's own call */
    ioassess_owner_count(&o->owner_calls);
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    p->owned = p->alone = 1;
    uint32_t forks = __atomic_load_n(&ioassess_fd_forks, __ATOMIC_RELAXED);
    p->begun = forks;
    p->before = __atomic_load_n(&o->owner_offset, __ATOMIC_RELAXED);
    if (unlikely(forks != __atomic_load_n(&o->owner_forks, __ATOMIC_RELAXED))) {
        __atomic_store_n(&o->owner_forks, forks, __ATOMIC_RELAXED);
        p->before = -1;
    }
    p->resync = p->before < 0;
    return 1;
#else
    (void)o;
    (void)p;
    return 0;
#endif
}

/* The beginning of a call counted by every thread (out of line: the owner's is the common
 * path). */
static __attribute__((noinline)) struct at_position shared_begin(struct ioassess_ofd *o)
{
    struct at_position p = AT_POSITION_NONE;
    p.seekable = 1;
    if (unlikely(__atomic_load_n(&o->owner, __ATOMIC_RELAXED) != IOASSESS_OWNER_SHARED))
        ioassess_position_share(o);         /* another thread's, or this thread's in flight */
    p.ended_alone = __atomic_load_n(&o->calls_ended_alone, __ATOMIC_ACQUIRE);
    uint64_t ended_shared = __atomic_load_n(&o->calls_ended_shared, __ATOMIC_ACQUIRE);
    p.begun = ioassess_calls_begin(&o->calls_begun);
    p.owner_calls = __atomic_load_n(&o->owner_calls, __ATOMIC_ACQUIRE);
    if (unlikely(p.begun != p.ended_alone + ended_shared || (p.owner_calls & 1))) {
        ioassess_position_lost(o);          /* another call is in flight: neither is exact */
        return p;
    }
    p.alone = 1;
    if (likely(!__atomic_load_n(&o->position_lost, __ATOMIC_RELAXED) &&
               p.owner_calls == __atomic_load_n(&o->owner_calls_known, __ATOMIC_RELAXED))) {
        p.before = __atomic_load_n(&o->offset, __ATOMIC_RELAXED);
    } else {
        /* The mark is taken off now: a call beginning while this one runs puts it back. */
        __atomic_store_n(&o->position_lost, 0, __ATOMIC_RELAXED);
        p.resync = 1;
    }
    return p;
}

static inline __attribute__((always_inline)) struct at_position
position_begin(struct ioassess_ofd *o, uint32_t flags)
{
    struct at_position p = AT_POSITION_NONE;
    if (!(flags & IOASSESS_OFD_SEEKABLE))
        return p;                           /* a character device: no position */
    p.seekable = 1;
    if (likely(owned_begin(o, &p)))
        return p;
    return shared_begin(o);
}

/* The end of an owner's call: the position after it stored (-1: unknown), and whether the
 * call was exact: still the owner's, no fork since it began. The store comes before the count
 * (an interrupting handler's call then starts from it); the check after both. */
static inline __attribute__((always_inline)) int owned_settle(struct ioassess_ofd *o, struct at_position p, int64_t after)
{
    __atomic_store_n(&o->owner_offset, after >= 0 ? after : -1, __ATOMIC_RELAXED);
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    ioassess_owner_count(&o->owner_calls);
    return after >= 0 && __atomic_load_n(&o->owner, __ATOMIC_ACQUIRE) == owner_token() &&
           __atomic_load_n(&ioassess_fd_forks, __ATOMIC_RELAXED) == (uint32_t)p.begun;
}

/* The end of a call counted by every thread (out of line, as its beginning). */
static __attribute__((noinline)) int shared_settle(struct ioassess_ofd *o, struct at_position p,
                                                   int64_t after)
{
    if (unlikely(!p.alone)) {
        __atomic_fetch_add(&o->calls_ended_shared, 1, __ATOMIC_RELEASE);
        return 0;
    }
    int exact = after >= 0 && __atomic_load_n(&o->calls_begun, __ATOMIC_ACQUIRE) == p.begun + 1 &&
                __atomic_load_n(&o->owner_calls, __ATOMIC_ACQUIRE) == p.owner_calls;
    if (likely(exact)) {
        __atomic_store_n(&o->offset, after, __ATOMIC_RELAXED);
        __atomic_store_n(&o->owner_calls_known, p.owner_calls, __ATOMIC_RELAXED);
    } else {
        ioassess_position_lost(o);
    }
    /* last: the next call to begin alone sees the offset and the mark stored above */
    __atomic_store_n(&o->calls_ended_alone, p.ended_alone + 1, __ATOMIC_RELEASE);
    return exact;
}

/* The end of a call at the position; after: the position after it, -1 if unknown. Whether the
 * call ran alone from beginning to end, so that its offset is exact. */
static inline __attribute__((always_inline)) int position_settle(struct ioassess_ofd *o,
                                                                 struct at_position p,
                                                                 int64_t after)
{
    if (!p.seekable)
        return 0;
    if (likely(p.owned))
        return owned_settle(o, p, after);
    return shared_settle(o, p, after);
}

/* The offset a read or write at the position started at (-1 if unknown), and the position
 * settled. unknown_after: an O_APPEND write, which the kernel made at the end of the file. */
static inline __attribute__((always_inline)) int64_t position_end(int fd, struct ioassess_ofd *o, struct at_position p,
                                   ssize_t result, int unknown_after)
{
    int64_t moved = result > 0 ? result : 0, offset = p.before, after;
    if (unknown_after || !p.alone) {
        offset = after = -1;
    } else if (unlikely(p.resync)) {
        /* the kernel's position after this call (exact if no other call began meanwhile:
         * position_settle) */
        int saved_errno = errno;
        long position = syscall(SYS_lseek, fd, 0L, SEEK_CUR);
        errno = saved_errno;
        after = position;
        offset = position >= 0 ? position - moved : -1;
    } else {
        after = offset >= 0 ? offset + moved : -1;
    }
    return position_settle(o, p, after) ? offset : -1;
}

/* A call at the position made from a signal handler while this thread is inside the
 * recorder (ioassess_tracked passes it through unrecorded): counted in flight all the same,
 * so that an alone call of another thread does not take its move for its own. */
static inline struct ioassess_ofd *passing_at_position(int fd)
{
    if (likely(!ioassess_self.busy) || (unsigned)fd >= IOASSESS_FD_LIMIT ||
        ioassess_state_now() != IOASSESS_STATE_ACTIVE)
        return NULL;
    uint32_t slot = __atomic_load_n(&ioassess_fd_slot[fd], __ATOMIC_ACQUIRE);
    return slot >= IOASSESS_FD_FIRST_OFD ? &ioassess_ofds[slot - IOASSESS_FD_FIRST_OFD] : NULL;
}

#define PASS_THROUGH_AT_POSITION(fd, call)                                     \
    do {                                                                       \
        struct ioassess_ofd *u_ = passing_at_position(fd);                     \
        if (likely(!u_))                                                       \
            return (call);                                                     \
        struct at_position a_ = position_begin(u_, ofd_flags(u_));             \
        ssize_t r_ = (call);                                                   \
        int e_ = errno;                                                        \
        position_settle(u_, a_, -1);                                           \
        errno = e_;                                                            \
        return r_;                                                             \
    } while (0)

/* The is_write of pwritev2 given RWF_APPEND: the data goes to the end of the file whatever
 * the offset (and, given -1, the position moves there). */
#define WRITE_AT_END 2

/* Whether a write goes to the end of the file, where the recorder does not know: O_APPEND
 * (also for pwrite and pwritev: on Linux they append whatever their offset), RWF_APPEND. */
static inline int appends(uint32_t flags, int is_write)
{
    return is_write == WRITE_AT_END || (is_write && (flags & IOASSESS_OFD_APPEND));
}

/* The op record's flags the descriptor decides: O_APPEND (writes), O_DIRECT. */
static inline uint16_t op_flags(uint32_t flags, int is_write)
{
    return (appends(flags, is_write) ? IOASSESS_OP_APPEND : 0) |
           ((flags & IOASSESS_OFD_DIRECT) ? IOASSESS_OP_DIRECT : 0);
}

/* The offset of a call given one: -1 for a device without positions, and for a write that
 * goes to the end of the file instead. */
static inline int64_t positional(uint32_t flags, off_t offset, int is_write)
{
    return (flags & IOASSESS_OFD_SEEKABLE) && !appends(flags, is_write) ? (int64_t)offset : -1;
}

/* The description's flags and file: F_SETFL (flags) and a new open that reuses the entry
 * (file_id) write them under the lock while calls read them. Read again after the call
 * rather than kept across it (a value kept across the call is spilled to the stack). */
static inline uint32_t ofd_flags(const struct ioassess_ofd *o)
{
    return __atomic_load_n(&o->flags, __ATOMIC_RELAXED);
}

static inline uint64_t ofd_file(const struct ioassess_ofd *o)
{
    return __atomic_load_n(&o->file_id, __ATOMIC_RELAXED);
}

/* Bytes and first buffer of an iovec array, read only when the call succeeded: a failed call
 * may have failed because the array itself is not readable (the kernel reports that; a
 * fault here would crash the application). */
static inline uint64_t iov_bytes(const struct iovec *iov, int count, ssize_t result)
{
    uint64_t bytes = 0;
    for (int i = 0; result >= 0 && i < count; i++)
        bytes += iov[i].iov_len;
    return bytes;
}

static inline const void *iov_base(const struct iovec *iov, int count, ssize_t result)
{
    return result >= 0 && count > 0 ? iov[0].iov_base : NULL;
}

/* ---- timing bodies shared by every entry point of one kind ---- */

/* The path of a read(), from entry to record (every data call follows it; pread skips the
 * position steps 4 and 7):
 *  1. read() (below) is the application's read: the loader finds this library's symbol first.
 *     RESOLVE_OR_FAIL checks that the next definition (libc's, or a stacked library's) was found;
 *     ioassess_posix_resolve looked them all up at load. SEQUENTIAL expands the rest.
 *  2. ioassess_tracked (ioassess-internal.h): ioassess_active (one acquire load of the state;
 *     the process's first call starts the recorder, ioassess_init), then the descriptor's slot
 *     in ioassess_fd_slot (acquire load).
 *  3. The reentrancy check, in ioassess_tracked: if this thread's busy flag is set, a signal
 *     handler has interrupted the recorder's own bookkeeping; the call passes straight through
 *     (counted by ioassess_writer_count_lost; at the position still counted in flight,
 *     PASS_THROUGH_AT_POSITION). A slot IOASSESS_FD_IGNORED (a pipe, an excluded path) returns
 *     the plain call too; IOASSESS_FD_UNKNOWN (a descriptor not seen being opened) is looked up
 *     once, under the lock (ioassess_fd_discover, register_fd in ioassess-fd.c).
 *  4. The offset: ofd_flags reads the description's flags once; position_begin, if this
 *     thread owns the description (the common case: owned_begin, a load of `owner`, one add
 *     without the lock prefix to owner_calls), takes the offset it starts at from
 *     owner_offset; else (shared_begin, out of line) it counts the call in the description
 *     (ioassess_calls_begin) and, if no other call is in flight there, takes the offset from
 *     offset ("offsets", above).
 *  5. Sampling (SAMPLED): ioassess_pagecache_due, one load and one thread-local decrement;
 *     about one op in 512 (and the first 4 of each file) goes on to ioassess_pagecache_pick and
 *     ioassess_pagecache_take, which asks cachestat(2) before the call, outside its time.
 *  6. The timestamps and the real call (TIMED): ioassess_ticks_start (rdtsc; lfence), the next
 *     definition, ioassess_ticks_end (rdtscp), so that the call lies between them. errno is
 *     read only when the call failed, and never written: every step after it that may change
 *     errno saves and restores it, so the application sees the call's own.
 *  7. The offset settled: position_end (the offset if the call ran alone, else -1; an lseek
 *     when the position had been lost) and position_settle (the position after the call:
 *     owned_settle stores it, adds 1 to owner_calls and checks that the description is still
 *     this thread's; shared_settle counts the call ended).
 *  8. The record slot: ioassess_record (ioassess-internal.h) sets the busy flag
 *     (ioassess_enter), takes the next slot of the thread's extent (a full extent: a new one
 *     from ioassess_writer_refill, or past the record cap ioassess_writer_summary_add),
 *     prefetches a later slot (ioassess_prefetch_for_write), stores the record and, last, its
 *     type byte (release: a reader sees whole records only), writes a clock pair if one is due
 *     (ioassess_writer_clock_due) and clears the busy flag (ioassess_leave).
 *  9. A sampled op's PAGECACHE slot follows its record in the extent (RECORD_SAMPLE,
 *     ioassess_pagecache_record); then read() returns what the next definition returned. */

/* The page-cache state of the op's range, when the op is sampled (ioassess-pagecache.c):
 * taken before the call, written after its op record. The common path asks only whether the
 * op is due; an op at an unknown offset lets its turn pass. */
#define SAMPLED(fd, o, offset, bytes, is_write, buffer)                        \
    struct ioassess_pagecache_record sample_;                                  \
    int sampled_ = ioassess_pagecache_due(o) && (offset) >= 0 && (bytes) > 0 && \
                   ioassess_pagecache_take(fd, offset, bytes, is_write, buffer, &sample_)

#define RECORD_SAMPLE()                                                        \
    do {                                                                       \
        if (unlikely(sampled_))                                                \
            ioassess_pagecache_record(&sample_, start_);                       \
    } while (0)

/* errno is read only when the call failed, and never written: what runs after the call
 * keeps it (the writer's slow paths save and restore it), so the application sees the
 * call's own errno. */
#define TIMED(call)                                                            \
    int tsc_ = ioassess_config.use_tsc;                                        \
    uint64_t start_ = ioassess_ticks_start(tsc_);                              \
    ssize_t result_ = (call);                                                  \
    uint64_t end_ = ioassess_ticks_end(tsc_);                                  \
    int err_ = result_ < 0 ? errno : 0

#define SEQUENTIAL(op, fd, buf, count, is_write, call)                         \
    do {                                                                       \
        struct ioassess_ofd *o_ = ioassess_tracked(fd);                        \
        if (!o_)                                                               \
            PASS_THROUGH_AT_POSITION(fd, call);                                \
        uint32_t flags_ = ofd_flags(o_);                                       \
        struct at_position at_ = position_begin(o_, flags_);                   \
        SAMPLED(fd, o_, appends(flags_, is_write) ? -1 : at_.before, (uint64_t)(count), \
                is_write, buf);                                                \
        TIMED(call);                                                           \
        int64_t offset_ = position_end(fd, o_, at_, result_, appends(flags_, is_write)); \
        ioassess_record(op, op_flags(flags_, is_write), ofd_file(o_), offset_, \
                        (uint64_t)(count), ioassess_outcome(result_, err_), start_, end_, buf); \
        RECORD_SAMPLE();                                                       \
        return result_;                                                        \
    } while (0)

#define POSITIONAL(op, fd, buf, count, offset, is_write, call)                 \
    do {                                                                       \
        struct ioassess_ofd *o_ = ioassess_tracked(fd);                        \
        if (!o_)                                                               \
            return (call);                                                     \
        SAMPLED(fd, o_, positional(ofd_flags(o_), offset, is_write), (uint64_t)(count), \
                is_write, buf);                                                \
        TIMED(call);                                                           \
        uint32_t flags_ = ofd_flags(o_);                                       \
        ioassess_record(op, op_flags(flags_, is_write), ofd_file(o_),          \
                        positional(flags_, offset, is_write), (uint64_t)(count), \
                        ioassess_outcome(result_, err_), start_, end_, buf);            \
        RECORD_SAMPLE();                                                       \
        return result_;                                                        \
    } while (0)

/* Vector calls; offset < 0 means "at the descriptor's position" (readv/writev, and
 * preadv2/pwritev2 given -1). A sample asks about the first page only: the array's lengths
 * cannot be read before the call (an unreadable array is the kernel's to report). */
#define VECTOR(op, fd, iov, iovcnt, offset, is_write, call)                    \
    do {                                                                       \
        struct ioassess_ofd *o_ = ioassess_tracked(fd);                        \
        if (!o_ && (offset) < 0)                                               \
            PASS_THROUGH_AT_POSITION(fd, call);                                \
        if (!o_)                                                               \
            return (call);                                                     \
        uint32_t flags_ = ofd_flags(o_);                                       \
        struct at_position at_ = AT_POSITION_NONE;                              \
        if ((offset) < 0)                                                      \
            at_ = position_begin(o_, flags_);                                  \
        SAMPLED(fd, o_, (offset) >= 0 ? positional(flags_, offset, is_write)   \
                        : appends(flags_, is_write) ? -1 : at_.before, 1, is_write, NULL); \
        TIMED(call);                                                           \
        int64_t offset_ = (offset) >= 0 ? positional(flags_, offset, is_write) \
                          : position_end(fd, o_, at_, result_, appends(flags_, is_write)); \
        ioassess_record(op, op_flags(flags_, is_write), ofd_file(o_), offset_, \
                        iov_bytes(iov, iovcnt, result_), ioassess_outcome(result_, err_), \
                        start_, end_, iov_base(iov, iovcnt, result_));         \
        RECORD_SAMPLE();                                                       \
        return result_;                                                        \
    } while (0)

#define SYNC(op, fd, call)                                                     \
    do {                                                                       \
        struct ioassess_ofd *o_ = ioassess_tracked(fd);                        \
        if (!o_)                                                               \
            return (call);                                                     \
        TIMED(call);                                                           \
        ioassess_record(op, 0, ofd_file(o_), -1, 0, ioassess_outcome(result_, err_), start_, end_, \
                        NULL);                                                 \
        return (int)result_;                                                   \
    } while (0)

/* The next definitions of the interposed calls: declared from lists of (name, return type,
 * parameters), looked up all at load (ioassess_posix_resolve) and by RESOLVE at a call that
 * comes before it. */
#define DECLARE_REAL(name, ret, params) static ret (*real_##name) params;

/* ---- data calls ---- */

#define DATA_CALLS(X)                                                     \
    X(read, ssize_t, (int, void *, size_t))                               \
    X(__read_chk, ssize_t, (int, void *, size_t, size_t))                 \
    X(write, ssize_t, (int, const void *, size_t))                        \
    X(pread, ssize_t, (int, void *, size_t, off_t))                       \
    X(pread64, ssize_t, (int, void *, size_t, off_t))                     \
    X(__pread_chk, ssize_t, (int, void *, size_t, off_t, size_t))         \
    X(__pread64_chk, ssize_t, (int, void *, size_t, off_t, size_t))       \
    X(pwrite, ssize_t, (int, const void *, size_t, off_t))                \
    X(pwrite64, ssize_t, (int, const void *, size_t, off_t))              \
    X(readv, ssize_t, (int, const struct iovec *, int))                   \
    X(writev, ssize_t, (int, const struct iovec *, int))                  \
    X(preadv, ssize_t, (int, const struct iovec *, int, off_t))           \
    X(preadv64, ssize_t, (int, const struct iovec *, int, off_t))         \
    X(pwritev, ssize_t, (int, const struct iovec *, int, off_t))          \
    X(pwritev64, ssize_t, (int, const struct iovec *, int, off_t))        \
    X(preadv2, ssize_t, (int, const struct iovec *, int, off_t, int))     \
    X(preadv64v2, ssize_t, (int, const struct iovec *, int, off_t, int))  \
    X(pwritev2, ssize_t, (int, const struct iovec *, int, off_t, int))    \
    X(pwritev64v2, ssize_t, (int, const struct iovec *, int, off_t, int)) \
    X(fsync, int, (int))                                                  \
    X(fdatasync, int, (int))
DATA_CALLS(DECLARE_REAL)

IOASSESS_EXPORT ssize_t read(int fd, void *buf, size_t count)
{
    RESOLVE_OR_FAIL(read, -1);
    SEQUENTIAL(IOASSESS_OP_READ, fd, buf, count, 0, real_read(fd, buf, count));
}

IOASSESS_EXPORT ssize_t __read_chk(int fd, void *buf, size_t count, size_t buflen)
{
    RESOLVE_OR_FAIL(__read_chk, -1);
    SEQUENTIAL(IOASSESS_OP_READ, fd, buf, count, 0, real___read_chk(fd, buf, count, buflen));
}

IOASSESS_EXPORT ssize_t write(int fd, const void *buf, size_t count)
{
    RESOLVE_OR_FAIL(write, -1);
    SEQUENTIAL(IOASSESS_OP_WRITE, fd, buf, count, 1, real_write(fd, buf, count));
}

IOASSESS_EXPORT ssize_t pread(int fd, void *buf, size_t count, off_t offset)
{
    RESOLVE_OR_FAIL(pread, -1);
    POSITIONAL(IOASSESS_OP_PREAD, fd, buf, count, offset, 0, real_pread(fd, buf, count, offset));
}

IOASSESS_EXPORT ssize_t pread64(int fd, void *buf, size_t count, off_t offset)
{
    RESOLVE_OR_FAIL(pread64, -1);
    POSITIONAL(IOASSESS_OP_PREAD, fd, buf, count, offset, 0,
               real_pread64(fd, buf, count, offset));
}

IOASSESS_EXPORT ssize_t __pread_chk(int fd, void *buf, size_t count, off_t offset, size_t buflen)
{
    RESOLVE_OR_FAIL(__pread_chk, -1);
    POSITIONAL(IOASSESS_OP_PREAD, fd, buf, count, offset, 0,
               real___pread_chk(fd, buf, count, offset, buflen));
}

IOASSESS_EXPORT ssize_t __pread64_chk(int fd, void *buf, size_t count, off_t offset, size_t buflen)
{
    RESOLVE_OR_FAIL(__pread64_chk, -1);
    POSITIONAL(IOASSESS_OP_PREAD, fd, buf, count, offset, 0,
               real___pread64_chk(fd, buf, count, offset, buflen));
}

IOASSESS_EXPORT ssize_t pwrite(int fd, const void *buf, size_t count, off_t offset)
{
    RESOLVE_OR_FAIL(pwrite, -1);
    POSITIONAL(IOASSESS_OP_PWRITE, fd, buf, count, offset, 1,
               real_pwrite(fd, buf, count, offset));
}

IOASSESS_EXPORT ssize_t pwrite64(int fd, const void *buf, size_t count, off_t offset)
{
    RESOLVE_OR_FAIL(pwrite64, -1);
    POSITIONAL(IOASSESS_OP_PWRITE, fd, buf, count, offset, 1,
               real_pwrite64(fd, buf, count, offset));
}

IOASSESS_EXPORT ssize_t readv(int fd, const struct iovec *iov, int iovcnt)
{
    RESOLVE_OR_FAIL(readv, -1);
    VECTOR(IOASSESS_OP_READV, fd, iov, iovcnt, -1, 0, real_readv(fd, iov, iovcnt));
}

IOASSESS_EXPORT ssize_t writev(int fd, const struct iovec *iov, int iovcnt)
{
    RESOLVE_OR_FAIL(writev, -1);
    VECTOR(IOASSESS_OP_WRITEV, fd, iov, iovcnt, -1, 1, real_writev(fd, iov, iovcnt));
}

IOASSESS_EXPORT ssize_t preadv(int fd, const struct iovec *iov, int iovcnt, off_t offset)
{
    RESOLVE_OR_FAIL(preadv, -1);
    VECTOR(IOASSESS_OP_PREADV, fd, iov, iovcnt, offset, 0,
           real_preadv(fd, iov, iovcnt, offset));
}

IOASSESS_EXPORT ssize_t preadv64(int fd, const struct iovec *iov, int iovcnt, off_t offset)
{
    RESOLVE_OR_FAIL(preadv64, -1);
    VECTOR(IOASSESS_OP_PREADV, fd, iov, iovcnt, offset, 0,
           real_preadv64(fd, iov, iovcnt, offset));
}

IOASSESS_EXPORT ssize_t pwritev(int fd, const struct iovec *iov, int iovcnt, off_t offset)
{
    RESOLVE_OR_FAIL(pwritev, -1);
    VECTOR(IOASSESS_OP_PWRITEV, fd, iov, iovcnt, offset, 1,
           real_pwritev(fd, iov, iovcnt, offset));
}

IOASSESS_EXPORT ssize_t pwritev64(int fd, const struct iovec *iov, int iovcnt, off_t offset)
{
    RESOLVE_OR_FAIL(pwritev64, -1);
    VECTOR(IOASSESS_OP_PWRITEV, fd, iov, iovcnt, offset, 1,
           real_pwritev64(fd, iov, iovcnt, offset));
}

IOASSESS_EXPORT ssize_t preadv2(int fd, const struct iovec *iov, int iovcnt, off_t offset,
                                int flags)
{
    RESOLVE_OR_FAIL(preadv2, -1);
    VECTOR(IOASSESS_OP_PREADV2, fd, iov, iovcnt, offset, 0,
           real_preadv2(fd, iov, iovcnt, offset, flags));
}

IOASSESS_EXPORT ssize_t preadv64v2(int fd, const struct iovec *iov, int iovcnt, off_t offset,
                                   int flags)
{
    RESOLVE_OR_FAIL(preadv64v2, -1);
    VECTOR(IOASSESS_OP_PREADV2, fd, iov, iovcnt, offset, 0,
           real_preadv64v2(fd, iov, iovcnt, offset, flags));
}

IOASSESS_EXPORT ssize_t pwritev2(int fd, const struct iovec *iov, int iovcnt, off_t offset,
                                 int flags)
{
    RESOLVE_OR_FAIL(pwritev2, -1);
    VECTOR(IOASSESS_OP_PWRITEV2, fd, iov, iovcnt, offset, (flags & RWF_APPEND) ? WRITE_AT_END : 1,
           real_pwritev2(fd, iov, iovcnt, offset, flags));
}

IOASSESS_EXPORT ssize_t pwritev64v2(int fd, const struct iovec *iov, int iovcnt, off_t offset,
                                    int flags)
{
    RESOLVE_OR_FAIL(pwritev64v2, -1);
    VECTOR(IOASSESS_OP_PWRITEV2, fd, iov, iovcnt, offset, (flags & RWF_APPEND) ? WRITE_AT_END : 1,
           real_pwritev64v2(fd, iov, iovcnt, offset, flags));
}

IOASSESS_EXPORT int fsync(int fd)
{
    RESOLVE_OR_FAIL(fsync, -1);
    SYNC(IOASSESS_OP_FSYNC, fd, real_fsync(fd));
}

IOASSESS_EXPORT int fdatasync(int fd)
{
    RESOLVE_OR_FAIL(fdatasync, -1);
    SYNC(IOASSESS_OP_FDATASYNC, fd, real_fdatasync(fd));
}

/* ---- descriptor calls ---- */

#define DESCRIPTOR_CALLS(X)                         \
    X(open, int, (const char *, int, ...))          \
    X(open64, int, (const char *, int, ...))        \
    X(openat, int, (int, const char *, int, ...))   \
    X(openat64, int, (int, const char *, int, ...)) \
    X(__open_2, int, (const char *, int))           \
    X(__open64_2, int, (const char *, int))         \
    X(__openat_2, int, (int, const char *, int))    \
    X(__openat64_2, int, (int, const char *, int))  \
    X(creat, int, (const char *, mode_t))           \
    X(creat64, int, (const char *, mode_t))         \
    X(close, int, (int))                            \
    X(close_range, int, (unsigned, unsigned, int))  \
    X(closefrom, void, (int))                       \
    X(dup, int, (int))                              \
    X(dup2, int, (int, int))                        \
    X(dup3, int, (int, int, int))                   \
    X(fcntl, int, (int, int, ...))                  \
    X(fcntl64, int, (int, int, ...))                \
    X(lseek, off_t, (int, off_t, int))              \
    X(lseek64, off_t, (int, off_t, int))
DESCRIPTOR_CALLS(DECLARE_REAL)

/* Whether open's variadic mode argument is present. */
static inline int takes_mode(int flags)
{
    return (flags & O_CREAT) || (flags & O_TMPFILE) == O_TMPFILE;
}

static inline int opened(int fd, int flags)
{
    if (fd >= 0)
        ioassess_fd_opened(fd, flags);
    return fd;
}

/* An open is timed here; ioassess-meta.c enters its descriptor in the table and records it as a
 * metadata op on the file the table gave it, the file its reads and writes name. */
#define OPEN_TIMED(dirfd, path, flags, call)                                   \
    do {                                                                       \
        if (!ioassess_active() || ioassess_self.busy)                          \
            return opened(call, flags);                                        \
        TIMED(call);                                                           \
        ioassess_meta_opened(IOASSESS_OP_OPEN, dirfd, path, flags, (int)result_, err_, start_, \
                             end_);                                            \
        return (int)result_;                                                   \
    } while (0)

#define OPEN_WITH_MODE(name, dirfd, ...)                                       \
    do {                                                                       \
        mode_t mode_ = 0;                                                      \
        if (takes_mode(flags)) {                                               \
            va_list args_;                                                     \
            va_start(args_, flags);                                            \
            mode_ = (mode_t)va_arg(args_, int);                                \
            va_end(args_);                                                     \
        }                                                                      \
        RESOLVE(name);                                                         \
        OPEN_TIMED(dirfd, path, flags, CALL_REAL(name, __VA_ARGS__, mode_));   \
    } while (0)

IOASSESS_EXPORT int open(const char *path, int flags, ...)
{
    OPEN_WITH_MODE(open, AT_FDCWD, path, flags);
}

IOASSESS_EXPORT int open64(const char *path, int flags, ...)
{
    OPEN_WITH_MODE(open64, AT_FDCWD, path, flags);
}

IOASSESS_EXPORT int openat(int dirfd, const char *path, int flags, ...)
{
    OPEN_WITH_MODE(openat, dirfd, dirfd, path, flags);
}

IOASSESS_EXPORT int openat64(int dirfd, const char *path, int flags, ...)
{
    OPEN_WITH_MODE(openat64, dirfd, dirfd, path, flags);
}

IOASSESS_EXPORT int __open_2(const char *path, int flags)
{
    RESOLVE(__open_2);
    OPEN_TIMED(AT_FDCWD, path, flags, CALL_REAL(__open_2, path, flags));
}

IOASSESS_EXPORT int __open64_2(const char *path, int flags)
{
    RESOLVE(__open64_2);
    OPEN_TIMED(AT_FDCWD, path, flags, CALL_REAL(__open64_2, path, flags));
}

IOASSESS_EXPORT int __openat_2(int dirfd, const char *path, int flags)
{
    RESOLVE(__openat_2);
    OPEN_TIMED(dirfd, path, flags, CALL_REAL(__openat_2, dirfd, path, flags));
}

IOASSESS_EXPORT int __openat64_2(int dirfd, const char *path, int flags)
{
    RESOLVE(__openat64_2);
    OPEN_TIMED(dirfd, path, flags, CALL_REAL(__openat64_2, dirfd, path, flags));
}

IOASSESS_EXPORT int creat(const char *path, mode_t mode)
{
    RESOLVE(creat);
    OPEN_TIMED(AT_FDCWD, path, O_CREAT | O_WRONLY | O_TRUNC, CALL_REAL(creat, path, mode));
}

IOASSESS_EXPORT int creat64(const char *path, mode_t mode)
{
    RESOLVE(creat64);
    OPEN_TIMED(AT_FDCWD, path, O_CREAT | O_WRONLY | O_TRUNC, CALL_REAL(creat64, path, mode));
}

/* The table is changed after the call: a descriptor number freed by close may be reused by
 * another thread at once, and a forgotten slot is simply looked up again on its next use. */
IOASSESS_EXPORT int close(int fd)
{
    RESOLVE(close);
    uint64_t file_id_ = ioassess_meta_closing(fd);
    if (!file_id_) {                               /* a descriptor not recorded: not timed */
        int result = CALL_REAL(close, fd);
        if (result == 0) {
            ioassess_fd_closed(fd);
            ioassess_meta_fd_closed(fd);
        }
        return result;
    }
    TIMED(CALL_REAL(close, fd));
    if (result_ == 0)
        ioassess_fd_closed(fd);
    ioassess_meta_closed(IOASSESS_OP_CLOSE, fd, file_id_, (int)result_, err_, start_, end_);
    return (int)result_;
}

IOASSESS_EXPORT int close_range(unsigned first, unsigned last, int flags)
{
    RESOLVE(close_range);
    int result = CALL_REAL(close_range, first, last, flags);
    if (result == 0 && !(flags & CLOSE_RANGE_CLOEXEC)) {
        ioassess_fd_closed_range(first, last);
        ioassess_meta_fd_closed_range(first, last);
    }
    return result;
}

IOASSESS_EXPORT void closefrom(int lowest)
{
    RESOLVE(closefrom);
    if (real_closefrom)
        real_closefrom(lowest);
    if (lowest >= 0) {
        ioassess_fd_closed_range((unsigned)lowest, ~0u);
        ioassess_meta_fd_closed_range((unsigned)lowest, ~0u);
    }
}

static inline int duplicated(int old_fd, int new_fd)
{
    if (new_fd >= 0 && new_fd != old_fd) {
        ioassess_fd_duplicated(old_fd, new_fd);
        ioassess_meta_fd_duplicated(old_fd, new_fd);
    }
    return new_fd;
}

IOASSESS_EXPORT int dup(int fd)
{
    RESOLVE(dup);
    return duplicated(fd, CALL_REAL(dup, fd));
}

IOASSESS_EXPORT int dup2(int old_fd, int new_fd)
{
    RESOLVE(dup2);
    return duplicated(old_fd, CALL_REAL(dup2, old_fd, new_fd));
}

IOASSESS_EXPORT int dup3(int old_fd, int new_fd, int flags)
{
    RESOLVE(dup3);
    return duplicated(old_fd, CALL_REAL(dup3, old_fd, new_fd, flags));
}

/* fcntl's third argument is an int or a pointer; passing it on as a pointer is what glibc
 * itself does and is exact on every ABI we build for. */
static inline int after_fcntl(int fd, int cmd, void *arg, int result)
{
    if (result < 0)
        return result;
    if (cmd == F_DUPFD || cmd == F_DUPFD_CLOEXEC)
        return duplicated(fd, result);
    if (cmd == F_SETFL)
        ioassess_fd_set_status(fd, (int)(intptr_t)arg);
    return result;
}

#define FCNTL(name)                                                            \
    do {                                                                       \
        va_list args_;                                                         \
        va_start(args_, cmd);                                                  \
        void *arg_ = va_arg(args_, void *);                                    \
        va_end(args_);                                                         \
        RESOLVE(name);                                                         \
        int result_ = CALL_REAL(name, fd, cmd, arg_);                          \
        int err_ = errno;                                                      \
        result_ = after_fcntl(fd, cmd, arg_, result_);                         \
        errno = err_;                                                          \
        return result_;                                                        \
    } while (0)

IOASSESS_EXPORT int fcntl(int fd, int cmd, ...)
{
    FCNTL(fcntl);
}

IOASSESS_EXPORT int fcntl64(int fd, int cmd, ...)
{
    FCNTL(fcntl64);
}

/* Calls that move a descriptor's position without passing through read or write. */
#define MOVING_CALLS(X)                                                           \
    X(copy_file_range, ssize_t, (int, loff_t *, int, loff_t *, size_t, unsigned)) \
    X(sendfile, ssize_t, (int, int, off_t *, size_t))                             \
    X(sendfile64, ssize_t, (int, int, off_t *, size_t))                           \
    X(splice, ssize_t, (int, loff_t *, int, loff_t *, size_t, unsigned))
MOVING_CALLS(DECLARE_REAL)

/* The description of a recorded seekable descriptor, without looking up one not seen yet. */
static inline struct ioassess_ofd *known_seekable(int fd)
{
    if (ioassess_state_now() != IOASSESS_STATE_ACTIVE || (unsigned)fd >= IOASSESS_FD_LIMIT)
        return NULL;
    uint32_t slot = __atomic_load_n(&ioassess_fd_slot[fd], __ATOMIC_ACQUIRE);
    if (slot < IOASSESS_FD_FIRST_OFD)
        return NULL;
    struct ioassess_ofd *o = &ioassess_ofds[slot - IOASSESS_FD_FIRST_OFD];
    return (ofd_flags(o) & IOASSESS_OFD_SEEKABLE) ? o : NULL;
}

/* These calls, given no offset, move the descriptor's position: counted at the position
 * while they run ("offsets", above), their move not followed, so the next call that runs
 * alone reads the position from the kernel. */
struct moving {
    struct ioassess_ofd *o;                 /* NULL: the position is not the recorder's */
    struct at_position at;
};

static inline struct moving moving_begin(int fd, const void *offset_argument)
{
    struct moving m = {NULL, AT_POSITION_NONE};
    if (!offset_argument && (m.o = known_seekable(fd)) != NULL)
        m.at = position_begin(m.o, IOASSESS_OFD_SEEKABLE);
    return m;
}

static inline void moving_end(struct moving m)
{
    if (m.o)
        position_settle(m.o, m.at, -1);
}

#define MOVING(name, in_fd, in_offset, out_fd, out_offset, ...)                \
    do {                                                                       \
        RESOLVE(name);                                                         \
        struct moving in_ = moving_begin(in_fd, in_offset);                    \
        struct moving out_ = moving_begin(out_fd, out_offset);                 \
        ssize_t result_ = CALL_REAL(name, __VA_ARGS__);                        \
        moving_end(in_);                                                       \
        moving_end(out_);                                                      \
        return result_;                                                        \
    } while (0)

IOASSESS_EXPORT ssize_t copy_file_range(int in_fd, loff_t *in_offset, int out_fd,
                                        loff_t *out_offset, size_t length, unsigned flags)
{
    MOVING(copy_file_range, in_fd, in_offset, out_fd, out_offset, in_fd, in_offset, out_fd,
           out_offset, length, flags);
}

IOASSESS_EXPORT ssize_t sendfile(int out_fd, int in_fd, off_t *in_offset, size_t count)
{
    MOVING(sendfile, in_fd, in_offset, out_fd, NULL, out_fd, in_fd, in_offset, count);
}

IOASSESS_EXPORT ssize_t sendfile64(int out_fd, int in_fd, off_t *in_offset, size_t count)
{
    MOVING(sendfile64, in_fd, in_offset, out_fd, NULL, out_fd, in_fd, in_offset, count);
}

IOASSESS_EXPORT ssize_t splice(int in_fd, loff_t *in_offset, int out_fd, loff_t *out_offset,
                               size_t length, unsigned flags)
{
    MOVING(splice, in_fd, in_offset, out_fd, out_offset, in_fd, in_offset, out_fd, out_offset,
           length, flags);
}

/* lseek is a call at the position like read: counted while it runs, so that a read in flight
 * on another thread at the same time is not taken for exact, and what it returns is the
 * position if it ran alone. Only descriptors already known are followed (a failed lseek
 * leaves the position to be read from the kernel at the next call). */
#define SEEK(name)                                                             \
    do {                                                                       \
        RESOLVE(name);                                                         \
        struct ioassess_ofd *o_ = known_seekable(fd);                          \
        if (!o_)                                                               \
            return CALL_REAL(name, fd, offset, whence);                        \
        struct at_position at_ = position_begin(o_, IOASSESS_OFD_SEEKABLE);    \
        off_t result_ = CALL_REAL(name, fd, offset, whence);                   \
        position_settle(o_, at_, result_ >= 0 ? (int64_t)result_ : -1);        \
        return result_;                                                        \
    } while (0)

IOASSESS_EXPORT off_t lseek(int fd, off_t offset, int whence)
{
    SEEK(lseek);
}

IOASSESS_EXPORT off_t lseek64(int fd, off_t offset, int whence)
{
    SEEK(lseek64);
}

/* Every next definition looked up at load, from the constructor, before the program starts
 * threads: a thread's call then only reads the pointer, which no other thread writes (a lazy
 * lookup wrote it from the first caller while others read it: a data race). A call made
 * before the constructor (in another library's constructor) still looks its own up first. */
void ioassess_posix_resolve(void)
{
#define RESOLVE_REAL(name, ret, params) RESOLVE(name);
    DATA_CALLS(RESOLVE_REAL)
    DESCRIPTOR_CALLS(RESOLVE_REAL)
    MOVING_CALLS(RESOLVE_REAL)
#undef RESOLVE_REAL
    ioassess_meta_resolve();
    ioassess_stdio_resolve();
    ioassess_aio_resolve();
}
