/*
 * Descriptor table: for each descriptor, the open file description it refers to (file id,
 * current offset, flags), so that read/write know their file and offset without a syscall.
 * Descriptors the recorder did not see being opened (inherited, or made by calls it does not
 * interpose) are looked up once, on first use: fstat, and /proc/self/fd for the path. Only
 * regular files and character/block devices outside the excluded prefixes are recorded.
 * Mutations happen under ioassess_lock; the hot path only loads a slot.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statfs.h>

#include "ioassess-internal.h"

#define OFD_LIMIT 16384u
#define EMITTED_SLOTS 4096u              /* file ids whose name this process has written */
#define NO_OFD UINT32_MAX
#define INVALID_FD_NAME "<invalid descriptor>"   /* file of failed calls on closed descriptors */

uint32_t ioassess_fd_slot[IOASSESS_FD_LIMIT];
struct ioassess_ofd ioassess_ofds[OFD_LIMIT];
uint32_t ioassess_fd_forks;

static uint32_t ofd_unused;              /* entries below this index have been handed out */
static uint32_t ofd_free = NO_OFD;       /* free list of released entries */
static int fd_high_water = -1;           /* highest descriptor with a non-unknown slot */
static uint64_t emitted[EMITTED_SLOTS];
static uint32_t emitted_count;
static int invalid_fd_named;
static struct ioassess_ofd invalid_fd_ofd = {.offset = -1, .refs = 1, .next_free = NO_OFD};

/* 64-bit FNV-1a; 0 is kept for "no file". */
uint64_t ioassess_hash_name(const char *name)
{
    uint64_t hash = IOASSESS_FNV_BASIS;
    for (const unsigned char *c = (const unsigned char *)name; *c; c++)
        hash = ioassess_fnv_byte(hash, *c);
    return hash ? hash : 1;
}

/* 1 if the id was not yet marked (its name must be written), also when the set is full. */
static int mark_emitted(uint64_t file_id)
{
    if (emitted_count >= EMITTED_SLOTS / 4 * 3)
        return 1;
    for (uint32_t probe = 0;; probe++) {
        uint64_t *entry = &emitted[(file_id + probe) % EMITTED_SLOTS];
        if (*entry == file_id)
            return 0;
        if (*entry == 0) {
            *entry = file_id;
            emitted_count++;
            return 1;
        }
    }
}

static int ends_with(const char *text, const char *suffix)
{
    size_t n = strlen(text), k = strlen(suffix);
    return n >= k && strcmp(text + n - k, suffix) == 0;
}

/* Darshan writes its log as NAME.darshan_partial, renamed to NAME.darshan at the end, and its
 * mmap log (of a process that never finished) as NAME_mmap-log-ID.darshan, wherever
 * DARSHAN_LOGPATH and DARSHAN_MMAP_LOGPATH put them. */
static int darshan_log(const char *path)
{
    return ends_with(path, ".darshan_partial") || ends_with(path, ".darshan");
}

static int excluded(const char *path)
{
    if (ioassess_config.skip_darshan_logs && darshan_log(path))
        return 1;
    for (int i = 0; i < ioassess_config.exclude_count; i++) {
        const char *prefix = ioassess_config.exclude[i];
        size_t n = strlen(prefix);
        if (strncmp(path, prefix, n) == 0 &&
            (prefix[n - 1] == '/' || path[n] == '/' || path[n] == '\0'))
            return 1;
    }
    return 0;
}

static uint32_t ofd_alloc(void)
{
    uint32_t index = ofd_free;
    if (index != NO_OFD)
        ofd_free = ioassess_ofds[index].next_free;
    else if (ofd_unused < OFD_LIMIT)
        index = ofd_unused++;
    return index;
}

static void release_slot(int fd)
{
    uint32_t slot = __atomic_load_n(&ioassess_fd_slot[fd], __ATOMIC_RELAXED);
    __atomic_store_n(&ioassess_fd_slot[fd], IOASSESS_FD_UNKNOWN, __ATOMIC_RELEASE);
    if (slot < IOASSESS_FD_FIRST_OFD)
        return;
    struct ioassess_ofd *o = &ioassess_ofds[slot - IOASSESS_FD_FIRST_OFD];
    if (--o->refs == 0) {
        o->next_free = ofd_free;
        ofd_free = slot - IOASSESS_FD_FIRST_OFD;
    }
}

static void set_slot(int fd, uint32_t slot)
{
    if (fd > fd_high_water)
        fd_high_water = fd;
    __atomic_store_n(&ioassess_fd_slot[fd], slot, __ATOMIC_RELEASE);
}

/* The FILE slot of a file, once per process; fd < 0: the file system is asked by path. */
static void write_name(uint64_t file_id, int fd, const struct stat *st, const char *path)
{
    if (!mark_emitted(file_id))
        return;
    struct statfs fs;
    long rc = fd >= 0 ? syscall(SYS_fstatfs, fd, &fs) : syscall(SYS_statfs, path, &fs);
    uint64_t fs_magic = rc == 0 ? (uint64_t)fs.f_type : 0;
    char hidden[32];
    if (ioassess_config.obfuscate) {
        snprintf(hidden, sizeof hidden, "obfuscated:%016llx", (unsigned long long)file_id);
        path = hidden;
    }
    ioassess_writer_file(file_id, st, fs_magic, path);
}

/* The file description's flags that its file status flags (open, F_SETFL) decide. */
static uint32_t status_bits(int status_flags)
{
    return ((status_flags & O_APPEND) ? IOASSESS_OFD_APPEND : 0) |
           ((status_flags & O_DIRECT) ? IOASSESS_OFD_DIRECT : 0);
}

/* Enter fd in the table as a new description (entry `index`) of the file file_id with the
 * given IOASSESS_OFD_* flags, at offset (-1: not known). Caller holds the lock. */
static uint32_t install(int fd, uint32_t index, uint64_t file_id, uint32_t flags, int64_t offset)
{
    struct ioassess_ofd *o = &ioassess_ofds[index];
    uint32_t pagecache_first = 0;
    if ((flags & IOASSESS_OFD_REGULAR) &&
        __atomic_load_n(&ioassess_pagecache_state, __ATOMIC_RELAXED) == IOASSESS_PAGECACHE_SAMPLING)
        pagecache_first = IOASSESS_PAGECACHE_FIRST_OPS;
    __atomic_store_n(&o->file_id, file_id, __ATOMIC_RELAXED);
    __atomic_store_n(&o->flags, flags, __ATOMIC_RELAXED);
    __atomic_store_n(&o->pagecache_first, pagecache_first, __ATOMIC_RELAXED);
    o->refs = 1;
    /* The entry may be a released one that a call of another thread still uses (its
     * descriptor closed under it): its counts stay its own, and its position must not become
     * the new file's. So this counts as a call that began (the old call, ending, sees it and
     * does not take its position for known), and the position is stored only if no call is
     * in flight: one that ended stored its own before counting itself ended (an owner's call,
     * owner_calls even again, its owner_offset). With a call in flight the description is
     * shared from the start (its calls counted by all, the position read from the kernel);
     * without, the next call at its position takes it (ioassess-posix.c, "offsets"). */
    ioassess_calls_begin(&o->calls_begun);
    ioassess_calls_begin(&o->calls_ended_shared);     /* the same add: it began and ended */
    uint64_t owner_calls = __atomic_load_n(&o->owner_calls, __ATOMIC_ACQUIRE);
    int in_flight = __atomic_load_n(&o->calls_begun, __ATOMIC_ACQUIRE) !=
                    __atomic_load_n(&o->calls_ended_alone, __ATOMIC_ACQUIRE) +
                        __atomic_load_n(&o->calls_ended_shared, __ATOMIC_ACQUIRE) ||
                    (owner_calls & 1);
    if (!in_flight) {
        __atomic_store_n(&o->offset, offset, __ATOMIC_RELAXED);
        __atomic_store_n(&o->owner_offset, offset, __ATOMIC_RELAXED);
        __atomic_store_n(&o->owner_forks, __atomic_load_n(&ioassess_fd_forks, __ATOMIC_RELAXED),
                         __ATOMIC_RELAXED);
    }
    __atomic_store_n(&o->owner_calls_known, owner_calls, __ATOMIC_RELAXED);
    __atomic_store_n(&o->position_lost, in_flight || offset < 0, __ATOMIC_RELEASE);
    uintptr_t owner = in_flight ? IOASSESS_OWNER_SHARED : IOASSESS_OWNER_NONE;
    if (__libc_single_threaded)      /* only a signal handler can be inside a call: in order */
        __atomic_store_n(&o->owner, owner, __ATOMIC_RELAXED);
    else
        __atomic_store_n(&o->owner, owner, __ATOMIC_SEQ_CST);
    set_slot(fd, index + IOASSESS_FD_FIRST_OFD);
    return index + IOASSESS_FD_FIRST_OFD;
}

/* Decide what fd refers to and set its slot. open_flags < 0: the descriptor was not seen
 * being opened (ask the kernel for its flags and position). Caller holds the lock. */
static uint32_t register_fd(int fd, int open_flags)
{
    struct stat st;
    if (syscall(SYS_fstat, fd, &st) != 0)
        return IOASSESS_FD_UNKNOWN;
    if (!S_ISREG(st.st_mode) && !S_ISCHR(st.st_mode) && !S_ISBLK(st.st_mode)) {
        set_slot(fd, IOASSESS_FD_IGNORED);
        return IOASSESS_FD_IGNORED;
    }
    char link[32], path[IOASSESS_PATH_BYTES];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    long n = syscall(SYS_readlinkat, -100, link, path, sizeof path - 1);
    if (n <= 0)
        n = snprintf(path, sizeof path, "<descriptor %d>", fd);
    path[n < (long)sizeof path ? n : (long)sizeof path - 1] = '\0';
    uint32_t index = excluded(path) ? NO_OFD : ofd_alloc();
    if (index == NO_OFD) {
        set_slot(fd, IOASSESS_FD_IGNORED);
        return IOASSESS_FD_IGNORED;
    }
    uint64_t file_id = ioassess_hash_name(path);
    write_name(file_id, fd, &st, path);
    int discovered = open_flags < 0;
    if (discovered)
        open_flags = (int)syscall(SYS_fcntl, fd, F_GETFL);
    uint32_t flags = open_flags >= 0 ? status_bits(open_flags) : 0;
    int64_t offset = -1;
    if (S_ISREG(st.st_mode))
        flags |= IOASSESS_OFD_REGULAR;
    if (S_ISREG(st.st_mode) || S_ISBLK(st.st_mode)) {
        flags |= IOASSESS_OFD_SEEKABLE;
        offset = 0;                      /* a fresh open starts at 0, even with O_APPEND */
        if (discovered)
            offset = syscall(SYS_lseek, fd, 0L, SEEK_CUR);
    }
    return install(fd, index, file_id, flags, offset);
}

struct ioassess_ofd *ioassess_fd_discover(int fd)
{
    struct ioassess_thread *t = &ioassess_self;
    int saved_errno = errno;
    ioassess_enter(t);
    pthread_mutex_lock(&ioassess_lock);
    uint32_t slot = __atomic_load_n(&ioassess_fd_slot[fd], __ATOMIC_RELAXED);
    if (slot == IOASSESS_FD_UNKNOWN)
        slot = register_fd(fd, -1);
    struct ioassess_ofd *o = NULL;
    if (slot >= IOASSESS_FD_FIRST_OFD) {
        o = &ioassess_ofds[slot - IOASSESS_FD_FIRST_OFD];
    } else if (slot == IOASSESS_FD_UNKNOWN) {   /* not open: record the failed call */
        if (!invalid_fd_named) {
            uint64_t file_id = ioassess_hash_name(INVALID_FD_NAME);
            __atomic_store_n(&invalid_fd_ofd.file_id, file_id, __ATOMIC_RELAXED);
            ioassess_writer_file(file_id, NULL, 0, INVALID_FD_NAME);
        }
        invalid_fd_named = 1;
        o = &invalid_fd_ofd;
    }
    pthread_mutex_unlock(&ioassess_lock);
    ioassess_leave(t);
    errno = saved_errno;
    return o;
}

/* The file id of a path named by another layer (an MPI-IO file name), its FILE slot written
 * once; 0 if the path is excluded. The name is made canonical as the kernel shows the files of
 * descriptors (absolute, symbolic links resolved), so both layers give a file the same id. */
uint64_t ioassess_fd_name_path(const char *path)
{
    char canonical[IOASSESS_PATH_BYTES];
    if (!realpath(path, canonical)) {           /* gone already, or too long: made absolute */
        char cwd[IOASSESS_PATH_BYTES];
        if (path[0] == '/' || syscall(SYS_getcwd, cwd, sizeof cwd) <= 0 ||
            snprintf(canonical, sizeof canonical, "%s/%s", cwd, path) >= (int)sizeof canonical)
            snprintf(canonical, sizeof canonical, "%s", path);
    }
    if (excluded(canonical))
        return 0;
    uint64_t file_id = ioassess_hash_name(canonical);
    struct stat st;
    int known = syscall(SYS_newfstatat, -100, canonical, &st, 0) == 0;
    struct ioassess_thread *t = &ioassess_self;
    ioassess_enter(t);
    pthread_mutex_lock(&ioassess_lock);
    write_name(file_id, -1, known ? &st : NULL, canonical);
    pthread_mutex_unlock(&ioassess_lock);
    ioassess_leave(t);
    return file_id;
}

/* Runs `change` on the table under the lock, or, when the recorder is busy on this thread
 * (a signal handler interrupted it), only forgets fd so that it is looked up again later. */
#define TABLE_CHANGE(fd, change)                                                  \
    do {                                                                          \
        if (ioassess_state_now() != IOASSESS_STATE_ACTIVE || \
            (unsigned)(fd) >= IOASSESS_FD_LIMIT)                                  \
            break;                                                                \
        struct ioassess_thread *t_ = &ioassess_self;                              \
        if (t_->busy) {                                                           \
            __atomic_store_n(&ioassess_fd_slot[fd], IOASSESS_FD_UNKNOWN, __ATOMIC_RELEASE); \
            break;                                                                \
        }                                                                         \
        int saved_errno_ = errno;                                                 \
        ioassess_enter(t_);                                                       \
        int locked_ = ioassess_lock_if_threaded();                                \
        change;                                                                   \
        ioassess_unlock_if(locked_);                                              \
        ioassess_leave(t_);                                                       \
        errno = saved_errno_;                                                     \
    } while (0)

void ioassess_fd_opened(int fd, int flags)
{
    TABLE_CHANGE(fd, {
        release_slot(fd);
        register_fd(fd, flags);
    });
}

/* An open of a path that named a recorded regular file, file_id, when this process last opened
 * it (ioassess-meta.c, "re-opens"): fd entered as a new description of that file without asking
 * the kernel anything. 0 if it was not entered (the recorder is off or busy, the table full):
 * the caller enters it the long way. */
int ioassess_fd_reopened(int fd, int flags, uint64_t file_id)
{
    int entered = 0;
    TABLE_CHANGE(fd, {
        release_slot(fd);
        uint32_t index = ofd_alloc();
        if (index != NO_OFD) {
            install(fd, index, file_id,
                    status_bits(flags) | IOASSESS_OFD_REGULAR | IOASSESS_OFD_SEEKABLE, 0);
            entered = 1;
        }
    });
    return entered;
}

/* The file id of fd if the table records it as a regular file, else 0. */
uint64_t ioassess_fd_regular_file(int fd)
{
    if ((unsigned)fd >= IOASSESS_FD_LIMIT)
        return 0;
    uint32_t slot = __atomic_load_n(&ioassess_fd_slot[fd], __ATOMIC_ACQUIRE);
    if (slot < IOASSESS_FD_FIRST_OFD)
        return 0;
    struct ioassess_ofd *o = &ioassess_ofds[slot - IOASSESS_FD_FIRST_OFD];
    if (!(__atomic_load_n(&o->flags, __ATOMIC_RELAXED) & IOASSESS_OFD_REGULAR))
        return 0;
    return __atomic_load_n(&o->file_id, __ATOMIC_RELAXED);
}

void ioassess_fd_closed(int fd)
{
    TABLE_CHANGE(fd, release_slot(fd));
}

void ioassess_fd_closed_range(unsigned first, unsigned last)
{
    if (first >= IOASSESS_FD_LIMIT)
        return;
    TABLE_CHANGE(first, {
        for (long fd = first; fd <= (long)last && fd <= fd_high_water; fd++)
            release_slot((int)fd);
    });
}

void ioassess_fd_duplicated(int old_fd, int new_fd)
{
    TABLE_CHANGE(new_fd, {
        release_slot(new_fd);
        uint32_t slot = (unsigned)old_fd < IOASSESS_FD_LIMIT
                            ? __atomic_load_n(&ioassess_fd_slot[old_fd], __ATOMIC_RELAXED)
                            : IOASSESS_FD_UNKNOWN;
        if (slot >= IOASSESS_FD_FIRST_OFD)
            ioassess_ofds[slot - IOASSESS_FD_FIRST_OFD].refs++;
        if (slot != IOASSESS_FD_UNKNOWN)
            set_slot(new_fd, slot);
    });
}

/* After F_SETFL: O_APPEND and O_DIRECT may have changed. */
void ioassess_fd_set_status(int fd, int status_flags)
{
    TABLE_CHANGE(fd, {
        uint32_t slot = __atomic_load_n(&ioassess_fd_slot[fd], __ATOMIC_RELAXED);
        if (slot >= IOASSESS_FD_FIRST_OFD) {
            struct ioassess_ofd *o = &ioassess_ofds[slot - IOASSESS_FD_FIRST_OFD];
            uint32_t flags = __atomic_load_n(&o->flags, __ATOMIC_RELAXED);
            flags = (flags & ~(IOASSESS_OFD_APPEND | IOASSESS_OFD_DIRECT)) |
                    status_bits(status_flags);
            __atomic_store_n(&o->flags, flags, __ATOMIC_RELAXED);
        }
    });
}

/* In the parent after fork (lock held): the child shares every open description and may
 * move its position, so each is read from the kernel at its next use. A position moved by
 * both processes at the same time remains beyond our knowledge. */
void ioassess_fd_fork_parent(void)
{
    __atomic_fetch_add(&ioassess_fd_forks, 1, __ATOMIC_SEQ_CST);  /* owners' positions too */
    for (uint32_t i = 0; i < ofd_unused; i++)
        if (ioassess_ofds[i].refs > 0)
            ioassess_position_unfollowed(&ioassess_ofds[i]);
}

/* In a fork child: the child must write its own file names, and the offsets it shares with
 * its parent are best read afresh, so every descriptor is looked up again on first use. */
void ioassess_fd_fork_child(void)
{
    for (int fd = 0; fd <= fd_high_water; fd++)
        __atomic_store_n(&ioassess_fd_slot[fd], IOASSESS_FD_UNKNOWN, __ATOMIC_RELAXED);
    for (uint32_t i = 0; i < ofd_unused; i++) {  /* calls in flight in the parent's threads */
        struct ioassess_ofd *o = &ioassess_ofds[i];
        __atomic_store_n(&o->calls_begun, 0, __ATOMIC_RELAXED);
        __atomic_store_n(&o->calls_ended_alone, 0, __ATOMIC_RELAXED);
        __atomic_store_n(&o->calls_ended_shared, 0, __ATOMIC_RELAXED);
        __atomic_store_n(&o->owner_calls, 0, __ATOMIC_RELAXED);
        __atomic_store_n(&o->owner, IOASSESS_OWNER_NONE, __ATOMIC_RELAXED);
    }
    fd_high_water = -1;
    ofd_unused = 0;
    ofd_free = NO_OFD;
    if (emitted_count)
        memset(emitted, 0, sizeof emitted);
    emitted_count = 0;
    invalid_fd_named = 0;
}

int ioassess_excluded(const char *path)
{
    return excluded(path);
}
