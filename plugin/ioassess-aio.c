/*
 * Asynchronous I/O, mapped files and io_uring instances.
 *
 * Asynchronous requests (libaio's io_submit/io_getevents, POSIX AIO's aio_read, aio_write,
 * aio_fsync, lio_listio and aio_return) are recorded as one op each (IOASSESS_OP_AIO_READ,
 * _WRITE, _SYNC, flag ASYNC, and POSIX_AIO for POSIX AIO), timed from the start of the call
 * that submitted them to the moment the application learnt they were complete:
 *   - libaio: the return of the io_getevents (or io_pgetevents) that reaped its event; the
 *     result is the event's res (bytes, or -errno);
 *   - POSIX AIO: the return of the first aio_error that found it done, of an aio_suspend after
 *     which it was done, or of a lio_listio(LIO_WAIT) that waited for it; else of its
 *     aio_return, which ends it (the result: what aio_return returned, or -aio_error).
 * Between submission and completion a request is kept in a bounded table keyed by its control
 * block's address (and libaio's context), under ioassess_lock; io_cancel and io_destroy forget
 * requests, a resubmitted control block replaces its old request, and when the table is three
 * quarters full new requests are not recorded (counted in ops_lost). Completions of requests
 * never seen submitted are ignored. The record is written by the thread that reaped it.
 *
 * mmap of a recorded file (the descriptor table's: a regular file or device outside the
 * excluded paths) is recorded as IOASSESS_OP_MMAP: its length, file offset, protection and
 * sharing; its page faults, the I/O it makes, are not timed. Anonymous mappings are not.
 *
 * io_uring: an instance is recorded once (IOASSESS_OP_IO_URING) when its ring is set up
 * through libc's syscall() (fio) or when an mmap of its rings goes through libc (fio again);
 * liburing >= 2.2 makes raw system calls, so its rings are found by a scan of the process's
 * descriptors at exit. Instances are told apart by the inode of their descriptor (each ring
 * has its own). Their I/O is not timed.
 *
 * Each wrapper returns what the next definition returned, with its errno; control blocks,
 * events and iovec arrays are read only when the call accepted or filled them.
 */
#define _GNU_SOURCE
#include <aio.h>
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/aio_abi.h>
#include <stdarg.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/uio.h>

#include "ioassess-internal.h"

#ifndef __NR_io_uring_setup
#define __NR_io_uring_setup 425
#endif
#define IOASSESS_STRINGIFY_(x) #x
#define IOASSESS_STRINGIFY(x) IOASSESS_STRINGIFY_(x)
#define IORING_OFF_SQ_RING 0L           /* the offset of an io_uring's first ring mapping */
#define IO_URING_LINK "anon_inode:[io_uring]"

/* The POSIX AIO calls also need glibc's aio_error (a request done or not). */
#define RESOLVE_POSIX_AIO(name)                                                \
    do {                                                                       \
        RESOLVE_OR_FAIL(aio_error, -1);                                        \
        RESOLVE_OR_FAIL(name, -1);                                             \
    } while (0)

/* ---- requests in flight ---- */

#define PENDING_SLOTS 4096u
#define PENDING_FULL (PENDING_SLOTS / 4 * 3)
#define POSIX_CONTEXT 0u                /* the context of POSIX AIO requests */

struct pending {
    uintptr_t key;                      /* the iocb's or aiocb's address; 0: a free slot */
    uint64_t context;                   /* libaio's io_context_t; POSIX_CONTEXT */
    uint64_t start;                     /* ticks when its submission began */
    uint64_t done;                      /* POSIX AIO: ticks when first seen done, 0 before */
    uint64_t file_id;
    int64_t offset;
    uint64_t requested;
    uint64_t buffer;
    uint16_t flags;
    uint8_t op;
};

static struct pending pending[PENDING_SLOTS];   /* under ioassess_lock */
static uint32_t pending_count;

static inline uint32_t home(uintptr_t key)
{
    return (uint32_t)(((uint64_t)key * 0x9e3779b97f4a7c15ull) >> 52) % PENDING_SLOTS;
}

/* The slot of key, or of the free slot where it would go. */
static uint32_t pending_slot(uintptr_t key)
{
    uint32_t i = home(key);
    while (pending[i].key != 0 && pending[i].key != key)
        i = (i + 1) % PENDING_SLOTS;
    return i;
}

static void pending_put(const struct pending *p)
{
    uint32_t i = pending_slot(p->key);
    if (pending[i].key == 0) {
        if (pending_count >= PENDING_FULL) {
            ioassess_writer_count_lost();
            return;
        }
        pending_count++;
    }
    pending[i] = *p;
}

/* Removes slot i, moving later entries of its cluster back (no tombstones). */
static void pending_remove(uint32_t i)
{
    uint32_t j = i;
    pending_count--;
    for (;;) {
        pending[i].key = 0;
        uint32_t k;
        do {
            j = (j + 1) % PENDING_SLOTS;
            if (pending[j].key == 0)
                return;
            k = home(pending[j].key);
        } while (i <= j ? (i < k && k <= j) : (i < k || k <= j));
        pending[i] = pending[j];
        i = j;
    }
}

/* Takes key's request of context out of the table into *out; 0 if there is none. */
static int pending_take(uintptr_t key, uint64_t context, struct pending *out)
{
    uint32_t i = pending_slot(key);
    if (pending[i].key == 0 || pending[i].context != context)
        return 0;
    *out = pending[i];
    pending_remove(i);
    return 1;
}

static inline void table_lock(struct ioassess_thread *t)
{
    ioassess_enter(t);
    pthread_mutex_lock(&ioassess_lock);
}

static inline void table_unlock(struct ioassess_thread *t)
{
    pthread_mutex_unlock(&ioassess_lock);
    ioassess_leave(t);
}

/* Whether calls are recorded now (not from a handler that interrupted the recorder). */
static inline int recording(void)
{
    return ioassess_active() && !ioassess_self.busy;
}

/* A request's op record; end: when the application learnt it was done. */
static void record_request(const struct pending *p, int64_t result, uint64_t end)
{
    ioassess_record(p->op, p->flags, p->file_id, p->offset, p->requested, result, p->start, end,
                    (const void *)(uintptr_t)p->buffer);
}

/* The request of a read, write or sync on fd, or 0 if fd is not recorded. */
static int describe(struct pending *p, int fd, uint8_t op, int64_t offset, uint64_t requested,
                    const void *buffer, uint16_t flags)
{
    struct ioassess_ofd *o = ioassess_tracked(fd);
    if (!o)
        return 0;
    uint32_t ofd_flags = __atomic_load_n(&o->flags, __ATOMIC_RELAXED);
    int appends = op == IOASSESS_OP_AIO_WRITE && (ofd_flags & IOASSESS_OFD_APPEND);
    p->file_id = __atomic_load_n(&o->file_id, __ATOMIC_RELAXED);
    p->offset = op == IOASSESS_OP_AIO_SYNC || appends || !(ofd_flags & IOASSESS_OFD_SEEKABLE)
                    ? -1 : offset;
    p->requested = op == IOASSESS_OP_AIO_SYNC ? 0 : requested;
    p->buffer = (uint64_t)(uintptr_t)buffer;
    p->op = op;
    p->flags = (uint16_t)(flags | IOASSESS_OP_ASYNC |
                          (appends ? IOASSESS_OP_APPEND : 0) |
                          ((ofd_flags & IOASSESS_OFD_DIRECT) ? IOASSESS_OP_DIRECT : 0));
    p->done = 0;
    return 1;
}

/* ---- libaio ---- */

typedef struct io_context *io_context_t;

static int (*real_io_submit)(io_context_t, long, struct iocb **);
static int (*real_io_getevents)(io_context_t, long, long, struct io_event *, struct timespec *);
static int (*real_io_pgetevents)(io_context_t, long, long, struct io_event *, struct timespec *,
                                 const void *);
static int (*real_io_cancel)(io_context_t, struct iocb *, struct io_event *);
static int (*real_io_destroy)(io_context_t);

/* The request of an iocb the kernel accepted, or 0 if it is not recorded. */
static int describe_iocb(struct pending *p, const struct iocb *cb, io_context_t ctx, uint64_t start)
{
    uint8_t op;
    uint64_t bytes = cb->aio_nbytes;
    switch (cb->aio_lio_opcode) {
    case IOCB_CMD_PREAD:
    case IOCB_CMD_PREADV:
        op = IOASSESS_OP_AIO_READ;
        break;
    case IOCB_CMD_PWRITE:
    case IOCB_CMD_PWRITEV:
        op = IOASSESS_OP_AIO_WRITE;
        break;
    case IOCB_CMD_FSYNC:
    case IOCB_CMD_FDSYNC:
        op = IOASSESS_OP_AIO_SYNC;
        break;
    default:
        return 0;                       /* poll, noop */
    }
    const void *buffer = (const void *)(uintptr_t)cb->aio_buf;
    if (cb->aio_lio_opcode == IOCB_CMD_PREADV || cb->aio_lio_opcode == IOCB_CMD_PWRITEV) {
        const struct iovec *iov = buffer;   /* the kernel read it at submission */
        bytes = 0;
        for (uint64_t i = 0; i < cb->aio_nbytes; i++)
            bytes += iov[i].iov_len;
        buffer = cb->aio_nbytes ? iov[0].iov_base : NULL;
    }
    if (!describe(p, (int)cb->aio_fildes, op, cb->aio_offset, bytes, buffer, 0))
        return 0;
    p->key = (uintptr_t)cb;
    p->context = (uint64_t)(uintptr_t)ctx;
    p->start = start;
    return 1;
}

#define BATCH 64                        /* requests described before the table is locked */

IOASSESS_EXPORT int io_submit(io_context_t ctx, long nr, struct iocb **iocbs)
{
    RESOLVE(io_submit);
    if (unlikely(!real_io_submit))
        return -ENOSYS;                 /* libaio returns -errno */
    if (!recording())
        return real_io_submit(ctx, nr, iocbs);
    uint64_t start = ioassess_ticks_start(ioassess_config.use_tsc);
    int submitted = real_io_submit(ctx, nr, iocbs);
    int saved_errno = errno;
    struct ioassess_thread *t = &ioassess_self;
    struct pending batch[BATCH];
    for (int first = 0; first < submitted; first += BATCH) {
        int n = 0;
        for (int i = first; i < submitted && i < first + BATCH; i++)
            n += describe_iocb(&batch[n], iocbs[i], ctx, start);
        table_lock(t);
        for (int i = 0; i < n; i++)
            pending_put(&batch[i]);
        table_unlock(t);
    }
    errno = saved_errno;
    return submitted;
}

/* Records the requests the events complete (end: when the reaping call returned). */
static void reaped(io_context_t ctx, const struct io_event *events, int count, uint64_t end)
{
    int saved_errno = errno;
    struct ioassess_thread *t = &ioassess_self;
    struct pending batch[BATCH];
    int64_t results[BATCH];
    for (int first = 0; first < count; first += BATCH) {
        int n = 0;
        table_lock(t);
        for (int i = first; i < count && i < first + BATCH; i++) {
            results[n] = events[i].res;
            n += pending_take((uintptr_t)events[i].obj, (uint64_t)(uintptr_t)ctx, &batch[n]);
        }
        table_unlock(t);
        for (int i = 0; i < n; i++)
            record_request(&batch[i], results[i], end);
    }
    errno = saved_errno;
}

IOASSESS_EXPORT int io_getevents(io_context_t ctx, long min_nr, long nr, struct io_event *events,
                                 struct timespec *timeout)
{
    RESOLVE(io_getevents);
    if (unlikely(!real_io_getevents))
        return -ENOSYS;
    if (!recording())
        return real_io_getevents(ctx, min_nr, nr, events, timeout);
    int count = real_io_getevents(ctx, min_nr, nr, events, timeout);
    uint64_t end = ioassess_ticks_end(ioassess_config.use_tsc);
    if (count > 0)
        reaped(ctx, events, count, end);
    return count;
}

IOASSESS_EXPORT int io_pgetevents(io_context_t ctx, long min_nr, long nr, struct io_event *events,
                                  struct timespec *timeout, const void *sigmask)
{
    RESOLVE(io_pgetevents);
    if (unlikely(!real_io_pgetevents))
        return -ENOSYS;
    if (!recording())
        return real_io_pgetevents(ctx, min_nr, nr, events, timeout, sigmask);
    int count = real_io_pgetevents(ctx, min_nr, nr, events, timeout, sigmask);
    uint64_t end = ioassess_ticks_end(ioassess_config.use_tsc);
    if (count > 0)
        reaped(ctx, events, count, end);
    return count;
}

/* A cancelled request's event goes to the caller, not to io_getevents: it is forgotten. */
IOASSESS_EXPORT int io_cancel(io_context_t ctx, struct iocb *iocb, struct io_event *result)
{
    RESOLVE(io_cancel);
    if (unlikely(!real_io_cancel))
        return -ENOSYS;
    int status = real_io_cancel(ctx, iocb, result);
    if (status == 0 && recording()) {
        struct ioassess_thread *t = &ioassess_self;
        struct pending gone;
        int saved_errno = errno;
        table_lock(t);
        pending_take((uintptr_t)iocb, (uint64_t)(uintptr_t)ctx, &gone);
        table_unlock(t);
        errno = saved_errno;
    }
    return status;
}

IOASSESS_EXPORT int io_destroy(io_context_t ctx)
{
    RESOLVE(io_destroy);
    if (unlikely(!real_io_destroy))
        return -ENOSYS;
    int status = real_io_destroy(ctx);
    if (recording()) {
        struct ioassess_thread *t = &ioassess_self;
        int saved_errno = errno;
        table_lock(t);
        for (uint32_t i = 0; i < PENDING_SLOTS; i++)
            while (pending[i].key != 0 && pending[i].context == (uint64_t)(uintptr_t)ctx)
                pending_remove(i);      /* moves a later entry into slot i: look again */
        table_unlock(t);
        errno = saved_errno;
    }
    return status;
}

/* ---- POSIX AIO ---- */

#define POSIX_AIO_CALLS(X)                                                     \
    X(aio_read, int, (struct aiocb *))                                         \
    X(aio_read64, int, (struct aiocb64 *))                                     \
    X(aio_write, int, (struct aiocb *))                                        \
    X(aio_write64, int, (struct aiocb64 *))                                    \
    X(aio_fsync, int, (int, struct aiocb *))                                   \
    X(aio_fsync64, int, (int, struct aiocb64 *))                               \
    X(lio_listio, int, (int, struct aiocb *const[], int, struct sigevent *))   \
    X(lio_listio64, int, (int, struct aiocb64 *const[], int, struct sigevent *)) \
    X(aio_error, int, (const struct aiocb *))                                  \
    X(aio_error64, int, (const struct aiocb64 *))                              \
    X(aio_suspend, int, (const struct aiocb *const[], int, const struct timespec *)) \
    X(aio_suspend64, int, (const struct aiocb64 *const[], int, const struct timespec *)) \
    X(aio_return, ssize_t, (struct aiocb *))                                   \
    X(aio_return64, ssize_t, (struct aiocb64 *))

#define DECLARE_REAL(name, ret, params) static ret (*real_##name) params;
POSIX_AIO_CALLS(DECLARE_REAL)
#undef DECLARE_REAL

/* The request of an aiocb of kind op whose submission began at start. */
static int describe_aiocb(struct pending *p, const struct aiocb *cb, uint8_t op, uint64_t start)
{
    if (!describe(p, cb->aio_fildes, op, cb->aio_offset, cb->aio_nbytes, (const void *)cb->aio_buf,
                  IOASSESS_OP_POSIX_AIO))
        return 0;
    p->key = (uintptr_t)cb;
    p->context = POSIX_CONTEXT;
    p->start = start;
    return 1;
}

static void submitted(const struct aiocb *cb, uint8_t op, uint64_t start)
{
    struct pending p;
    int saved_errno = errno;
    if (describe_aiocb(&p, cb, op, start)) {
        struct ioassess_thread *t = &ioassess_self;
        table_lock(t);
        pending_put(&p);
        table_unlock(t);
    }
    errno = saved_errno;
}

#define SUBMIT(name, op, call)                                                 \
    do {                                                                       \
        RESOLVE_POSIX_AIO(name);                                               \
        if (!recording())                                                      \
            return (call);                                                     \
        uint64_t start_ = ioassess_ticks_start(ioassess_config.use_tsc);       \
        int result_ = (call);                                                  \
        if (result_ == 0)                                                      \
            submitted(cb, op, start_);                                         \
        return result_;                                                        \
    } while (0)

IOASSESS_EXPORT int aio_read(struct aiocb *cb)
{
    SUBMIT(aio_read, IOASSESS_OP_AIO_READ, real_aio_read(cb));
}

IOASSESS_EXPORT int aio_read64(struct aiocb64 *cb64)
{
    const struct aiocb *cb = (const struct aiocb *)cb64;
    SUBMIT(aio_read64, IOASSESS_OP_AIO_READ, real_aio_read64(cb64));
}

IOASSESS_EXPORT int aio_write(struct aiocb *cb)
{
    SUBMIT(aio_write, IOASSESS_OP_AIO_WRITE, real_aio_write(cb));
}

IOASSESS_EXPORT int aio_write64(struct aiocb64 *cb64)
{
    const struct aiocb *cb = (const struct aiocb *)cb64;
    SUBMIT(aio_write64, IOASSESS_OP_AIO_WRITE, real_aio_write64(cb64));
}

IOASSESS_EXPORT int aio_fsync(int operation, struct aiocb *cb)
{
    SUBMIT(aio_fsync, IOASSESS_OP_AIO_SYNC, real_aio_fsync(operation, cb));
}

IOASSESS_EXPORT int aio_fsync64(int operation, struct aiocb64 *cb64)
{
    const struct aiocb *cb = (const struct aiocb *)cb64;
    SUBMIT(aio_fsync64, IOASSESS_OP_AIO_SYNC, real_aio_fsync64(operation, cb64));
}

/* Marks the requests of list that are done (their aio_error is no longer EINPROGRESS) as done
 * at `now`, unless they were seen done before. */
static void seen_done(const struct aiocb *const list[], int count, uint64_t now)
{
    int saved_errno = errno;
    struct ioassess_thread *t = &ioassess_self;
    table_lock(t);
    for (int i = 0; i < count; i++) {
        if (!list[i] || real_aio_error(list[i]) == EINPROGRESS)
            continue;
        uint32_t slot = pending_slot((uintptr_t)list[i]);
        if (pending[slot].key && pending[slot].context == POSIX_CONTEXT && !pending[slot].done)
            pending[slot].done = now;
    }
    table_unlock(t);
    errno = saved_errno;
}

/* glibc declares the list nonnull; an application may still pass NULL: tested through this. */
#define OPAQUE(p) ({ __typeof__(p) p_ = (p); __asm__("" : "+r"(p_)); p_; })

/* Every read and write of the list is submitted when the call succeeds, and may be when it
 * fails with EIO (some failed) or EINTR (LIO_WAIT interrupted): those are recorded too (one
 * never submitted has no aio_return to end it and leaves the table with its control block's
 * next use). After a LIO_WAIT call, the requests it waited for are done. */
static int listed(int mode, struct aiocb *const list[], int count, uint64_t start, int result)
{
    int saved_errno = errno;
    if (result == 0 || saved_errno == EIO || saved_errno == EINTR) {
        for (int i = 0; i < count; i++) {
            if (!list[i])
                continue;
            int opcode = list[i]->aio_lio_opcode;
            if (opcode == LIO_READ || opcode == LIO_WRITE)
                submitted(list[i], opcode == LIO_READ ? IOASSESS_OP_AIO_READ : IOASSESS_OP_AIO_WRITE,
                          start);
        }
        if (mode == LIO_WAIT)
            seen_done((const struct aiocb *const *)list, count,
                      ioassess_ticks_end(ioassess_config.use_tsc));
    }
    errno = saved_errno;
    return result;
}

#define LIST(name)                                                             \
    do {                                                                       \
        RESOLVE_POSIX_AIO(name);                                               \
        if (!recording() || count <= 0 || !OPAQUE(list))                       \
            return real_##name(mode, list, count, sig);                        \
        uint64_t start_ = ioassess_ticks_start(ioassess_config.use_tsc);       \
        return listed(mode, (struct aiocb *const *)list, count, start_,          \
                      real_##name(mode, list, count, sig));                    \
    } while (0)

IOASSESS_EXPORT int lio_listio(int mode, struct aiocb *const list[], int count,
                               struct sigevent *sig)
{
    LIST(lio_listio);
}

IOASSESS_EXPORT int lio_listio64(int mode, struct aiocb64 *const list[], int count,
                                 struct sigevent *sig)
{
    LIST(lio_listio64);
}

/* A request found done: the first such look is its completion time. */
#define ERROR(name)                                                            \
    do {                                                                       \
        RESOLVE_POSIX_AIO(name);                                               \
        int status_ = real_##name(cb);                                         \
        if (status_ != EINPROGRESS && status_ >= 0 && recording()) {           \
            uint64_t now_ = ioassess_ticks_end(ioassess_config.use_tsc);       \
            const struct aiocb *one_[1] = {(const struct aiocb *)cb};          \
            seen_done(one_, 1, now_);                                          \
        }                                                                      \
        return status_;                                                        \
    } while (0)

IOASSESS_EXPORT int aio_error(const struct aiocb *cb)
{
    ERROR(aio_error);
}

IOASSESS_EXPORT int aio_error64(const struct aiocb64 *cb)
{
    ERROR(aio_error64);
}

#define SUSPEND(name)                                                          \
    do {                                                                       \
        RESOLVE_POSIX_AIO(name);                                               \
        int result_ = real_##name(list, count, timeout);                       \
        if (result_ == 0 && recording())                                       \
            seen_done((const struct aiocb *const *)list, count,                \
                      ioassess_ticks_end(ioassess_config.use_tsc));            \
        return result_;                                                        \
    } while (0)

IOASSESS_EXPORT int aio_suspend(const struct aiocb *const list[], int count,
                                const struct timespec *timeout)
{
    SUSPEND(aio_suspend);
}

IOASSESS_EXPORT int aio_suspend64(const struct aiocb64 *const list[], int count,
                                  const struct timespec *timeout)
{
    SUSPEND(aio_suspend64);
}

/* aio_return ends a request: recorded with what it returned (-aio_error for a failed one),
 * done when first seen done, or now. */
#define RETURN(name)                                                           \
    do {                                                                       \
        RESOLVE_POSIX_AIO(name);                                               \
        if (!recording())                                                      \
            return real_##name(cb);                                            \
        struct ioassess_thread *t_ = &ioassess_self;                           \
        struct pending p_;                                                     \
        int saved_errno_ = errno;                                              \
        table_lock(t_);                                                        \
        int known_ = pending_take((uintptr_t)cb, POSIX_CONTEXT, &p_);          \
        table_unlock(t_);                                                      \
        int error_ = known_ ? real_aio_error((const struct aiocb *)cb) : 0;    \
        errno = saved_errno_;                                                  \
        ssize_t result_ = real_##name(cb);                                     \
        uint64_t now_ = ioassess_ticks_end(ioassess_config.use_tsc);           \
        if (known_ && error_ != EINPROGRESS) {                                 \
            saved_errno_ = errno;                                              \
            record_request(&p_, result_ >= 0 ? (int64_t)result_ : -(int64_t)error_, \
                           p_.done ? p_.done : now_);                          \
            errno = saved_errno_;                                              \
        }                                                                      \
        return result_;                                                        \
    } while (0)

IOASSESS_EXPORT ssize_t aio_return(struct aiocb *cb)
{
    RETURN(aio_return);
}

IOASSESS_EXPORT ssize_t aio_return64(struct aiocb64 *cb)
{
    RETURN(aio_return64);
}

/* ---- io_uring instances ---- */

#define RING_SLOTS 256u                 /* instances told apart; past that each is counted */

static uint64_t rings[RING_SLOTS];      /* inodes of the rings seen, under ioassess_lock */
static uint32_t ring_count;

/* Whether the ring with this inode is new (then remembered). Under the lock. */
static int ring_new(uint64_t inode)
{
    for (uint32_t i = 0; i < ring_count; i++)
        if (rings[i] == inode)
            return 0;
    if (ring_count < RING_SLOTS)
        rings[ring_count++] = inode;
    return 1;
}

/* Records the io_uring instance of descriptor fd (set up between start and end, or found then)
 * unless it was seen before; entries: its size when known, else 0. */
static void ring_seen(int fd, uint64_t entries, uint64_t start, uint64_t end)
{
    struct stat st;
    int saved_errno = errno;
    if (syscall(SYS_fstat, fd, &st) == 0) {
        struct ioassess_thread *t = &ioassess_self;
        table_lock(t);
        int fresh = ring_new((uint64_t)st.st_ino);
        table_unlock(t);
        if (fresh)
            ioassess_record(IOASSESS_OP_IO_URING, 0, 0, -1, entries, fd, start, end, NULL);
    }
    errno = saved_errno;
}

/* Whether descriptor fd is an io_uring instance (what /proc/self/fd shows of it). */
static int is_ring(int fd)
{
    char link[32], target[sizeof IO_URING_LINK];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    long n = syscall(SYS_readlinkat, AT_FDCWD, link, target, sizeof target);
    return n == (long)sizeof target - 1 && memcmp(target, IO_URING_LINK, (size_t)n) == 0;
}

static long (*real_syscall)(long, ...) __attribute__((used));

/* syscall() given io_uring_setup (and, on x86-64, any call made before the next definition was
 * looked up): the arguments are those of the call, six words as glibc's own syscall reads them. */
__attribute__((used, noinline, noclone)) static long syscall_watched(long number, long a, long b, long c,
                                                                     long d, long e, long f)
{
    RESOLVE(syscall);
    if (number != __NR_io_uring_setup || !recording())
        return real_syscall(number, a, b, c, d, e, f);
    uint64_t start = ioassess_ticks_start(ioassess_config.use_tsc);
    long fd = real_syscall(number, a, b, c, d, e, f);
    uint64_t end = ioassess_ticks_end(ioassess_config.use_tsc);
    if (fd >= 0)
        ring_seen((int)fd, (uint64_t)a, start, end);
    return fd;
}

/* libc's syscall(), io_uring_setup watched; the recorder's own system calls pass here too. On
 * x86-64 any other number jumps straight to the next definition with every register and the
 * stack as the caller left them (a compare and an indirect jump: about 1 ns, where a C
 * function that reads its variadic arguments costs 4 ns on a 76 ns getppid); io_uring_setup
 * jumps to syscall_watched, whose seven parameters are where the caller put syscall's. */
#if defined(__x86_64__)
__asm__(".text\n"
        ".globl syscall\n"
        ".type syscall, @function\n"
        "syscall:\n"
        "    endbr64\n"
        "    cmpq $" IOASSESS_STRINGIFY(__NR_io_uring_setup) ", %rdi\n"
        "    je 1f\n"
        "    movq real_syscall(%rip), %rax\n"
        "    testq %rax, %rax\n"
        "    jz 1f\n"
        "    jmp *%rax\n"
        "1:  jmp syscall_watched\n"
        ".size syscall, .-syscall\n");
#else
IOASSESS_EXPORT long syscall(long number, ...)
{
    va_list args;
    va_start(args, number);
    long a = va_arg(args, long), b = va_arg(args, long), c = va_arg(args, long);
    long d = va_arg(args, long), e = va_arg(args, long), f = va_arg(args, long);
    va_end(args);
    return syscall_watched(number, a, b, c, d, e, f);
}
#endif

/* At exit: the rings still open (liburing's, set up by raw system calls). The scan runs in the
 * recorder's helper (ioassess-private.c), whose copy of the descriptor table is the
 * application's: it lists /proc/self/fd there and returns the inodes of the rings. */
struct ring_scan {
    uint32_t count;
    uint64_t inodes[RING_SLOTS];
};

static long scan_rings_in_helper(void *arg)
{
    struct ring_scan *scan = arg;
    int dir = (int)ioassess_sys_open("/proc/self/fd", O_RDONLY | O_DIRECTORY | O_CLOEXEC, 0);
    if (dir < 0)
        return -1;
    char entries[4096];
    long n;
    while ((n = syscall(SYS_getdents64, dir, entries, sizeof entries)) > 0) {
        for (long at = 0; at < n;) {
            struct dirent64 *entry = (struct dirent64 *)(entries + at);
            at += entry->d_reclen;
            int fd = atoi(entry->d_name);
            struct stat st;
            if (entry->d_name[0] != '.' && fd != dir && is_ring(fd) &&
                syscall(SYS_fstat, fd, &st) == 0 && scan->count < RING_SLOTS)
                scan->inodes[scan->count++] = (uint64_t)st.st_ino;
        }
    }
    ioassess_sys_close(dir);
    return 0;
}

static void scan_rings_at_exit(void)
{
    static struct ring_scan scan;
    struct ioassess_thread *t = &ioassess_self;
    if (ioassess_state_now() != IOASSESS_STATE_ACTIVE || t->busy)
        return;
    uint64_t now = ioassess_ticks();
    table_lock(t);                      /* the helper's stack is used under the lock */
    scan.count = 0;
    int found = ioassess_private_fds(scan_rings_in_helper, &scan) == 0;
    uint32_t fresh = 0;
    for (uint32_t i = 0; found && i < scan.count; i++)
        if (ring_new(scan.inodes[i]))
            scan.inodes[fresh++] = scan.inodes[i];
    table_unlock(t);
    for (uint32_t i = 0; i < fresh; i++)
        ioassess_record(IOASSESS_OP_IO_URING, 0, 0, -1, 0, -1, now, now, NULL);
}

/* ---- mapped files ---- */

static void *(*real_mmap)(void *, size_t, int, int, int, off_t);
static void *(*real_mmap64)(void *, size_t, int, int, int, off_t);

static inline uint16_t map_flags(int prot, int flags)
{
    int type = flags & MAP_TYPE;
    return (uint16_t)(((prot & PROT_READ) ? IOASSESS_OP_MAP_READ : 0) |
                      ((prot & PROT_WRITE) ? IOASSESS_OP_MAP_WRITE : 0) |
                      ((prot & PROT_EXEC) ? IOASSESS_OP_MAP_EXEC : 0) |
                      ((type == MAP_SHARED || type == MAP_SHARED_VALIDATE) ? IOASSESS_OP_MAP_SHARED
                                                                           : 0));
}

/* A mapping of a descriptor: of a recorded file, an MMAP op; of an io_uring's first ring, its
 * instance. Anonymous mappings pass straight through. */
#define MMAP(name)                                                             \
    do {                                                                       \
        RESOLVE_OR_FAIL(name, MAP_FAILED);                                     \
        if (likely((flags & MAP_ANONYMOUS) || fd < 0))                         \
            return real_##name(addr, length, prot, flags, fd, offset);         \
        struct ioassess_ofd *o_ = ioassess_tracked(fd);                        \
        uint64_t start_ = ioassess_ticks_start(ioassess_config.use_tsc);       \
        void *map_ = real_##name(addr, length, prot, flags, fd, offset);       \
        uint64_t end_ = ioassess_ticks_end(ioassess_config.use_tsc);           \
        int err_ = errno;                                                      \
        if (o_)                                                                \
            ioassess_record(IOASSESS_OP_MMAP, map_flags(prot, flags),          \
                            __atomic_load_n(&o_->file_id, __ATOMIC_RELAXED), offset, length, \
                            map_ == MAP_FAILED ? -(int64_t)err_ : 0, start_, end_, \
                            map_ == MAP_FAILED ? NULL : map_);                 \
        else if (map_ != MAP_FAILED && offset == IORING_OFF_SQ_RING && recording() && is_ring(fd)) \
            ring_seen(fd, 0, start_, end_);                                    \
        errno = err_;                                                          \
        return map_;                                                           \
    } while (0)

IOASSESS_EXPORT void *mmap(void *addr, size_t length, int prot, int flags, int fd, off_t offset)
{
    MMAP(mmap);
}

IOASSESS_EXPORT void *mmap64(void *addr, size_t length, int prot, int flags, int fd, off_t offset)
{
    MMAP(mmap64);
}

/* ---- start-up and fork ---- */

void ioassess_aio_resolve(void)
{
#define RESOLVE_REAL(name, ret, params) RESOLVE(name);
    POSIX_AIO_CALLS(RESOLVE_REAL)
#undef RESOLVE_REAL
    RESOLVE(io_submit);
    RESOLVE(io_getevents);
    RESOLVE(io_pgetevents);
    RESOLVE(io_cancel);
    RESOLVE(io_destroy);
    RESOLVE(mmap);
    RESOLVE(mmap64);
    RESOLVE(syscall);
    atexit(scan_rings_at_exit);
}

/* A fork child has none of its parent's requests in flight (its threads are gone, libaio's
 * contexts are the parent's), and counts the rings it uses itself. */
void ioassess_aio_fork_child(void)
{
    memset(pending, 0, sizeof pending);
    pending_count = 0;
    ring_count = 0;
}
