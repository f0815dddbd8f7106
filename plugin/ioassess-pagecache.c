/*
 * Page-cache samples: for some POSIX reads and writes of regular files, the state of the op's
 * byte range in the page cache just before the call, asked with cachestat(2) (Linux 6.5; no
 * privilege needed), written into the trace right after the op's record, with whether the
 * op's user buffer was in memory (mincore(2) of its first and last page). Which ops, and why
 * so few: docs/architecture.md, "Page-cache samples". A kernel that refuses the call turns
 * sampling off for the process at its first refusal, and the header says so.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <string.h>
#include <sys/auxv.h>

#include "ioassess-internal.h"

/* cachestat(2) has no libc wrapper: the system call itself (x86-64's number), so that no
 * interposed symbol is ever on the way. */
#define SYS_CACHESTAT 451
#define MAX_RW_BYTES 0x7ffff000ull     /* the most one read or write transfers (MAX_RW_COUNT) */

struct cachestat_range {
    uint64_t off;
    uint64_t len;
};

struct cachestat {
    uint64_t nr_cache;
    uint64_t nr_dirty;
    uint64_t nr_writeback;
    uint64_t nr_evicted;
    uint64_t nr_recently_evicted;
};

int ioassess_pagecache_state;
static unsigned page_shift = 12;

void ioassess_pagecache_configure(int turned_off)
{
    unsigned long page_bytes = getauxval(AT_PAGESZ);
    if (page_bytes >= 4096 && (page_bytes & (page_bytes - 1)) == 0)
        page_shift = (unsigned)__builtin_ctzl(page_bytes);
    __atomic_store_n(&ioassess_pagecache_state,
                     turned_off ? IOASSESS_PAGECACHE_TURNED_OFF : IOASSESS_PAGECACHE_SAMPLING,
                     __ATOMIC_RELAXED);
}

uint32_t ioassess_pagecache_header_flags(void)
{
    switch (__atomic_load_n(&ioassess_pagecache_state, __ATOMIC_RELAXED)) {
    case IOASSESS_PAGECACHE_REFUSED:
        return IOASSESS_HEADER_PAGECACHE_UNAVAILABLE;
    case IOASSESS_PAGECACHE_TURNED_OFF:
        return IOASSESS_HEADER_PAGECACHE_OFF;
    default:
        return 0;
    }
}

/* Ops until the thread's next sample: uniform in [1, 2 * EVERY - 1], so EVERY on average. */
static int32_t next_gap(struct ioassess_thread *t)
{
    uint32_t x = t->pagecache_random ? t->pagecache_random : ((uint32_t)ioassess_ticks() | 1u);
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    t->pagecache_random = x;
    return 1 + (int32_t)(x % (2 * IOASSESS_PAGECACHE_EVERY - 1));
}

/* An op that ioassess_pagecache_due found due: the first ops of its file description, or the
 * end of the thread's countdown. Sampled if sampling is on, the thread still keeps op records
 * and the file is a regular file not opened with O_DIRECT (whose ops bypass the page cache). */
int ioassess_pagecache_pick(struct ioassess_ofd *o, struct ioassess_thread *t)
{
    /* The description's first ops, counted down by whichever of its threads call (a lost
     * race samples one op more). */
    uint32_t first = __atomic_load_n(&o->pagecache_first, __ATOMIC_RELAXED);
    if (first > 0)
        __atomic_compare_exchange_n(&o->pagecache_first, &first, first - 1, 0, __ATOMIC_RELAXED,
                                    __ATOMIC_RELAXED);
    else
        t->pagecache_countdown = next_gap(t);
    return __atomic_load_n(&ioassess_pagecache_state, __ATOMIC_RELAXED) ==
               IOASSESS_PAGECACHE_SAMPLING &&
           !t->capped &&
           (__atomic_load_n(&o->flags, __ATOMIC_RELAXED) &
            (IOASSESS_OFD_REGULAR | IOASSESS_OFD_DIRECT)) == IOASSESS_OFD_REGULAR;
}

/* The kernel has no cachestat, a seccomp filter forbids it, or the file system refuses it:
 * no more samples in this process (one store; no retry per op). */
static void refused(void)
{
    __atomic_store_n(&ioassess_pagecache_state, IOASSESS_PAGECACHE_REFUSED, __ATOMIC_RELAXED);
    ioassess_writer_set_flag(IOASSESS_HEADER_PAGECACHE_UNAVAILABLE);
}

/* cachestat of `pages` pages from `first_page`; 0 if the kernel did not answer. */
static int ask(int fd, uint64_t first_page, uint64_t pages, struct cachestat *answer)
{
    struct cachestat_range range = {first_page << page_shift, pages << page_shift};
    if (syscall(SYS_CACHESTAT, fd, &range, answer, 0) == 0)
        return 1;
    if (errno == ENOSYS || errno == EPERM || errno == EOPNOTSUPP)
        refused();
    return 0;
}

/* Whether every page of [buffer, buffer + bytes) was in memory (of a longer buffer its first
 * BUFFER_PAGES pages and its last one): a call into a buffer that was not faults it in. The
 * system call itself, like cachestat's. */
#define BUFFER_PAGES 256

static uint16_t buffer_state(const void *buffer, uint64_t bytes)
{
    if (!buffer)
        return IOASSESS_BUFFER_UNKNOWN;
    uintptr_t page_bytes = (uintptr_t)1 << page_shift;
    uintptr_t first = (uintptr_t)buffer & ~(page_bytes - 1);
    uintptr_t last = ((uintptr_t)buffer + (bytes < MAX_RW_BYTES ? bytes : MAX_RW_BYTES) - 1) & ~(page_bytes - 1);
    uintptr_t pages = (last - first) / page_bytes + 1;
    unsigned char resident[BUFFER_PAGES + 1];
    uintptr_t asked = pages < BUFFER_PAGES ? pages : BUFFER_PAGES;
    if (syscall(SYS_mincore, (void *)first, asked * page_bytes, resident) != 0)
        return IOASSESS_BUFFER_UNKNOWN;   /* not mapped: the call is the kernel's to refuse */
    if (pages > BUFFER_PAGES) {
        if (syscall(SYS_mincore, (void *)last, page_bytes, &resident[asked]) != 0)
            return IOASSESS_BUFFER_UNKNOWN;
        asked++;
    }
    for (uintptr_t i = 0; i < asked; i++)
        if (!(resident[i] & 1))
            return IOASSESS_BUFFER_FAULTED;
    return IOASSESS_BUFFER_RESIDENT;
}

/* The page-cache state of [offset, offset + bytes) of fd into *sample (all but its type and
 * key); 1 if the kernel answered. Writes also get the file's size, which tells pages past
 * the end of the file (new pages) from existing ones that are not cached; every op the state
 * of its buffer (NULL: not known before the call). errno is kept. */
int ioassess_pagecache_take(int fd, int64_t offset, uint64_t bytes, int is_write, const void *buffer,
                            struct ioassess_pagecache_record *sample)
{
    int saved_errno = errno;
    uint64_t first = (uint64_t)offset >> page_shift;
    uint64_t last = ((uint64_t)offset + (bytes < MAX_RW_BYTES ? bytes : MAX_RW_BYTES) - 1) >> page_shift;
    uint64_t pages = last - first + 1;
    int whole = pages <= 2 * IOASSESS_PAGECACHE_RANGE_PAGES;
    struct cachestat head, tail = {0};
    memset(sample, 0, sizeof *sample);
    sample->page_shift = (uint8_t)page_shift;
    sample->head_page = first;
    sample->head_pages = (uint16_t)(whole ? pages : IOASSESS_PAGECACHE_RANGE_PAGES);
    int answered = ask(fd, first, sample->head_pages, &head);
    if (answered && !whole) {
        sample->tail_page = last - IOASSESS_PAGECACHE_RANGE_PAGES + 1;
        sample->tail_pages = IOASSESS_PAGECACHE_RANGE_PAGES;
        answered = ask(fd, sample->tail_page, IOASSESS_PAGECACHE_RANGE_PAGES, &tail);
    }
    struct stat st;
    sample->file_size = is_write && answered && syscall(SYS_fstat, fd, &st) == 0 ? st.st_size : -1;
    sample->buffer = answered ? buffer_state(buffer, bytes) : IOASSESS_BUFFER_UNKNOWN;
    errno = saved_errno;
    sample->cached = (uint32_t)(head.nr_cache + tail.nr_cache);
    sample->dirty = (uint32_t)(head.nr_dirty + tail.nr_dirty);
    sample->writeback = (uint32_t)(head.nr_writeback + tail.nr_writeback);
    sample->evicted = (uint32_t)(head.nr_evicted + tail.nr_evicted);
    sample->recently_evicted = (uint32_t)(head.nr_recently_evicted + tail.nr_recently_evicted);
    return answered;
}

/* The sample of the op this thread just recorded (its start_ticks is the key), in the next
 * slot of the thread's extent; none when the op went to the summary table. */
void ioassess_pagecache_record(struct ioassess_pagecache_record *sample, uint64_t op_start_ticks)
{
    struct ioassess_thread *t = &ioassess_self;
    ioassess_enter(t);
    if (t->next != t->end || ioassess_writer_refill(t)) {
        struct ioassess_pagecache_record *slot = (struct ioassess_pagecache_record *)t->next++;
        sample->tid = t->head.tid;
        sample->op_start_ticks = op_start_ticks;
        memcpy((char *)slot + 1, (const char *)sample + 1, sizeof *sample - 1);
        __atomic_store_n(&slot->type, IOASSESS_SLOT_PAGECACHE, __ATOMIC_RELEASE);
        t->pagecache_slots++;
    }
    ioassess_leave(t);
}
