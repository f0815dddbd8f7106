/*
 * The interposed metadata calls: stat and its forms, access, unlink, mkdir, rmdir, rename,
 * mkstemp, opendir/readdir/closedir, truncate and fallocate, each timed and recorded as one op
 * of its call family (ioassess-trace.h, IOASSESS_OP_OPEN .. IOASSESS_OP_FALLOCATE); open and
 * close are timed in ioassess-posix.c and recorded through ioassess_meta_opened and
 * ioassess_meta_closed here. chdir and fchdir are followed (not recorded) for relative paths.
 *
 * File ids. A path's id is the FNV-1a hash of its absolute name, the hash descriptors' files
 * get from /proc/self/fd (ioassess-fd.c), so a stat and an open of one file agree. The name
 * is made lexically: a relative path continues the hash state of the current directory (kept
 * here, updated by chdir and fchdir) with "/" and its components, so no call asks the kernel
 * for the current directory; "." components and repeated slashes are skipped as they are
 * hashed, and a path with a ".." component takes the rare path (its name built in a buffer).
 * Symbolic links are not resolved: a path through one has the id of the name as written. An
 * *at() call with another dirfd than AT_FDCWD continues the state of that directory when it
 * was opened here (open with O_DIRECTORY, opendir), else records file id 0 (not known).
 *
 * Which paths are recorded: a set of ids seen (open addressing, lock-free reads, inserts under
 * ioassess_lock) says of each whether it is excluded (IOASSESS_EXCLUDE's prefixes, as for
 * descriptors); a new id takes the rare path once: its name built, checked against the
 * prefixes and, when recorded, its FILE slot written (mode, device and inode from the call's
 * own stat result when it has one, else 0). Failed calls are recorded with -errno.
 *
 * The hot path: the next definition between the two clock reads, then (outside the timed
 * interval) the path's hash, one probe of the set and the op record. No lock, no allocation,
 * no system call; errno is read only when the call failed and never changed; the busy flag
 * makes calls from a signal handler that interrupted the recorder pass through.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/statfs.h>

#include "ioassess-internal.h"

#define PATH_SET_SLOTS 65536u          /* ids of paths seen: up to 3/4 of this in use */
#define PATH_SET_FULL (PATH_SET_SLOTS / 4 * 3)

/* glibc declares most of these calls' pointer arguments nonnull, and so would let the compiler
 * drop our tests of them; an application may still pass NULL (the call then fails or crashes
 * as it would without us, never in our code). A pointer passed through this is tested. */
#define OPAQUE(p) ({ __typeof__(p) p_ = (p); __asm__("" : "+r"(p_)); p_; })

/* ---- the set of path ids ---- */

static uint64_t path_ids[PATH_SET_SLOTS];    /* 0: free */
static uint8_t path_excluded[PATH_SET_SLOTS]; /* written before its id is published */
static uint32_t path_count;                  /* under lock */

/* Hash state (not finalised) of the absolute names of directories: the current directory's,
 * and per descriptor that of the path it was opened with here, when it is not a file the
 * descriptor table records (a directory, a FIFO...); 0 unknown. */
static uint64_t cwd_state;
static char cwd_name[IOASSESS_PATH_BYTES];   /* under lock; "" until first needed */
static uint64_t dir_state[IOASSESS_FD_LIMIT];

/* 1 recorded, 0 excluded, -1 not in the set (yet). */
static inline int path_seen(uint64_t id)
{
    for (uint32_t i = (uint32_t)id % PATH_SET_SLOTS;; i = (i + 1) % PATH_SET_SLOTS) {
        uint64_t entry = __atomic_load_n(&path_ids[i], __ATOMIC_ACQUIRE);
        if (entry == id)
            return !path_excluded[i];
        if (entry == 0)
            return -1;
    }
}

static void path_insert(uint64_t id, int excluded)
{
    if (path_count >= PATH_SET_FULL)
        return;                          /* full: new ids take the rare path every time */
    for (uint32_t i = (uint32_t)id % PATH_SET_SLOTS;; i = (i + 1) % PATH_SET_SLOTS) {
        if (path_ids[i] == id)
            return;
        if (path_ids[i] == 0) {
            path_excluded[i] = (uint8_t)excluded;
            __atomic_store_n(&path_ids[i], id, __ATOMIC_RELEASE);
            path_count++;
            return;
        }
    }
}

/* ---- hashing a path ---- */

/* The state after "/" + each component of path, "." components and repeated slashes skipped;
 * 0 when path has a ".." component or is longer than the kernel takes (the rare path). */
static inline uint64_t hash_components(uint64_t h, const char *path)
{
    const unsigned char *p = (const unsigned char *)path;
    const unsigned char *end = p + IOASSESS_PATH_BYTES;
    while (*p) {
        if (*p == '/') {
            p++;
            continue;
        }
        if (p[0] == '.' && (p[1] == '/' || p[1] == 0)) {
            p++;
            continue;
        }
        if (p[0] == '.' && p[1] == '.' && (p[2] == '/' || p[2] == 0))
            return 0;
        h = ioassess_fnv_byte(h, '/');
        for (; *p && *p != '/'; p++) {
            if (unlikely(p >= end))
                return 0;
            h = ioassess_fnv_byte(h, *p);
        }
    }
    return h;
}

/* The id of a name's hash state: the root has no component ("/"), 0 is kept for "no file". */
static inline uint64_t finalise(uint64_t state)
{
    if (state == IOASSESS_FNV_BASIS)
        state = ioassess_fnv_byte(IOASSESS_FNV_BASIS, '/');
    return state ? state : 1;
}

/* The absolute name of (dirfd, path), lexically normal ("." and ".." resolved, single
 * slashes) into out; 0 if the directory is not known or the name does not fit. Under lock. */
static int absolute_name(int dirfd, const char *path, char *out)
{
    size_t n = 0;
    if (path[0] != '/') {
        if (dirfd == AT_FDCWD) {
            if (!cwd_name[0] && syscall(SYS_getcwd, cwd_name, sizeof cwd_name) <= 0) {
                cwd_name[0] = '\0';
                return 0;
            }
            n = strnlen(cwd_name, IOASSESS_PATH_BYTES - 1);
            memcpy(out, cwd_name, n);
        } else {
            char link[32];
            snprintf(link, sizeof link, "/proc/self/fd/%d", dirfd);
            long got = syscall(SYS_readlinkat, AT_FDCWD, link, out, IOASSESS_PATH_BYTES - 1);
            if (got <= 0 || out[0] != '/')
                return 0;
            n = (size_t)got;
        }
    }
    const char *p = path;
    while (*p) {
        const char *c = p;
        while (*p && *p != '/')
            p++;
        size_t len = (size_t)(p - c);
        if (*p)
            p++;
        if (len == 0 || (len == 1 && c[0] == '.'))
            continue;
        if (len == 2 && c[0] == '.' && c[1] == '.') {
            while (n > 0 && out[n - 1] != '/')
                n--;
            if (n > 0)
                n--;                     /* the slash before the dropped component */
            continue;
        }
        if (n + 1 + len >= IOASSESS_PATH_BYTES)
            return 0;
        out[n++] = '/';
        memcpy(out + n, c, len);
        n += len;
    }
    if (n == 0)
        out[n++] = '/';
    out[n] = '\0';
    return 1;
}

/* The current directory's state, from the kernel's name (under lock). */
static void learn_cwd(void)
{
    if (syscall(SYS_getcwd, cwd_name, sizeof cwd_name) <= 0) {
        cwd_name[0] = '\0';
        __atomic_store_n(&cwd_state, 0, __ATOMIC_RELAXED);
        return;
    }
    __atomic_store_n(&cwd_state, hash_components(IOASSESS_FNV_BASIS, cwd_name), __ATOMIC_RELAXED);
}

/* A path's file id (0: not known, or excluded) and its name's hash state (0 if not known):
 * recorded unless excluded (a known state with id 0). Returned in registers: the wrappers
 * take no local's address, so that the sanitizer builds give them no instrumented stack frame
 * (AddressSanitizer's own start-up calls mkdir before its shadow memory exists). */
struct path_ref {
    uint64_t id;
    uint64_t state;
};

static inline int path_recorded(struct path_ref ref)
{
    return ref.id != 0 || ref.state == 0;
}

/* statfs f_type of the file system a name is on, 0 if not known. A name that does not exist
 * (a stat of a missing path, the lookups of a Python import) is on its nearest existing
 * directory's: the file system that was asked for it. */
static uint64_t fs_of_name(const char *name)
{
    char dir[IOASSESS_PATH_BYTES];
    snprintf(dir, sizeof dir, "%s", name);
    struct statfs fs;
    for (;;) {
        if (syscall(SYS_statfs, dir, &fs) == 0)
            return (uint64_t)fs.f_type;
        char *slash = strrchr(dir, '/');
        if ((errno != ENOENT && errno != ENOTDIR) || !slash || strcmp(dir, "/") == 0)
            return 0;
        slash[slash == dir] = '\0';     /* "/a/b" becomes "/a", "/a" becomes "/" */
    }
}

/* The rare path of a path's id: ".." components, the current directory not yet known, a new
 * id (its name checked against the excluded prefixes and its FILE slot written). */
__attribute__((noinline, cold)) static struct path_ref path_rare(int dirfd, const char *path,
                                                                 uint64_t id, uint64_t state,
                                                                 const struct stat *st)
{
    struct ioassess_thread *t = &ioassess_self;
    int saved_errno = errno;
    char name[IOASSESS_PATH_BYTES];
    ioassess_enter(t);
    pthread_mutex_lock(&ioassess_lock);
    if (path[0] != '/' && dirfd == AT_FDCWD && !__atomic_load_n(&cwd_state, __ATOMIC_RELAXED))
        learn_cwd();
    int named = absolute_name(dirfd, path, name);
    if (id == 0 && named) {
        state = hash_components(IOASSESS_FNV_BASIS, name);
        id = finalise(state);
    }
    int seen = id ? path_seen(id) : 0;
    if (seen < 0) {
        int excluded = named && ioassess_excluded(name);
        if (!excluded) {
            uint64_t fs_magic = named ? fs_of_name(name) : 0;
            char hidden[32];
            const char *shown = named ? name : path;
            if (ioassess_config.obfuscate) {
                snprintf(hidden, sizeof hidden, "obfuscated:%016llx", (unsigned long long)id);
                shown = hidden;
            }
            ioassess_writer_file(id, st, fs_magic, shown);
        }
        path_insert(id, excluded);
        seen = !excluded;
    }
    pthread_mutex_unlock(&ioassess_lock);
    ioassess_leave(t);
    errno = saved_errno;
    return (struct path_ref){seen > 0 ? id : 0, state};
}

/* Hash state of (dirfd, path) on the common path; 0: the rare path must decide; 1: the
 * directory of an *at() call is not known (file id 0). */
#define STATE_UNKNOWN_DIR 1u

static inline uint64_t path_state(int dirfd, const char *path)
{
    uint64_t base;
    if (path[0] == '/')
        base = IOASSESS_FNV_BASIS;
    else if (dirfd == AT_FDCWD)
        base = __atomic_load_n(&cwd_state, __ATOMIC_RELAXED);
    else if ((unsigned)dirfd < IOASSESS_FD_LIMIT &&
             (base = __atomic_load_n(&dir_state[dirfd], __ATOMIC_RELAXED)) != 0)
        ;
    else
        return STATE_UNKNOWN_DIR;
    return base ? hash_components(base, path) : 0;
}

/* The file id to record for a call on (dirfd, path) that returned with err (0: success), and
 * the hash state of its name (for a descriptor it opened). */
static inline struct path_ref path_id(int dirfd, const char *path, int err, const struct stat *st)
{
    if (unlikely(!OPAQUE(path) || err == EFAULT || err == ENAMETOOLONG))
        return (struct path_ref){0, 0};  /* the path may not be readable: not ours to read */
    uint64_t h = path_state(dirfd, path);
    if (h == STATE_UNKNOWN_DIR)
        return (struct path_ref){0, 0};
    uint64_t id = 0;
    if (likely(h != 0)) {
        id = finalise(h);
        int seen = path_seen(id);
        if (likely(seen >= 0))
            return (struct path_ref){seen ? id : 0, h};
    }
    return path_rare(dirfd, path, id, h, st);
}

/* ---- the quick path: a path's id without hashing it byte by byte ---- */

/* FNV-1a takes about 4 cycles a byte (each byte's multiply waits for the previous one): 60 ns
 * for a 50-byte path, more than a metadata call may add. So the calls that do not keep a
 * descriptor (stat, access, unlink, ...) first look the path up by a quick key: its bytes 8
 * at a time, mixed with the hash state of the directory it is relative to, in a memo of the
 * ids found before (id 0: excluded). A miss computes the id as above and enters it. The memo
 * only grows (insert under the lock; a key is published after its id), so a reader that finds
 * a key finds its id; when it is three quarters full, new paths take the long way. */
#define MEMO_SLOTS 65536u
#define QUICK_MISS UINT64_MAX

struct memo {
    uint64_t keys[MEMO_SLOTS];               /* 0: free */
    uint64_t ids[MEMO_SLOTS];                /* written before its key */
    uint32_t count;                          /* under lock */
};

static struct memo quick_memo;               /* paths of the calls that keep no descriptor */

/* One word of a path, read whole when it cannot cross into the next page (reading past the
 * string's end inside a page never faults); the sanitizer builds, which would take that for
 * an overflow, read byte by byte. Bytes after the first NUL are left 0. */
static inline uint64_t path_word(const unsigned char *p)
{
    uint64_t word = 0;
#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
    if (likely(((uintptr_t)p & 4095) <= 4096 - 8)) {
        memcpy(&word, p, 8);
        return word;
    }
#endif
    for (unsigned i = 0; i < 8; i++) {
        word |= (uint64_t)p[i] << (8 * i);
        if (!p[i])
            break;
    }
    return word;
}

/* Bit index of the first NUL byte of word (0 .. 56), or 64 if it has none. */
static inline unsigned nul_bits(uint64_t word)
{
    uint64_t zero = (word - 0x0101010101010101ull) & ~word & 0x8080808080808080ull;
    return zero ? (unsigned)__builtin_ctzll(zero) & ~7u : 64;   /* the lowest flag is the first */
}

/* The quick key of path relative to a directory whose hash state is base; 0 if the path is
 * longer than the kernel takes. Two lanes (even and odd words), each a multiply per word, so
 * that a word waits for the one two before it only: 63 bytes in about 20 cycles. */
static inline uint64_t quick_key(uint64_t base, const char *path)
{
    const unsigned char *p = (const unsigned char *)path;
    uint64_t even = base, odd = ~base;
    unsigned n = 0;
    for (;; n += 16, p += 16) {
        uint64_t word = path_word(p);
        unsigned bits = nul_bits(word);
        if (bits < 64) {
            even = (even ^ (bits ? word & (~0ull >> (64 - bits)) : 0)) * 0x9e3779b97f4a7c15ull;
            n += bits / 8;
            break;
        }
        even = (even ^ word) * 0x9e3779b97f4a7c15ull;
        word = path_word(p + 8);
        bits = nul_bits(word);
        if (bits < 64) {
            odd = (odd ^ (bits ? word & (~0ull >> (64 - bits)) : 0)) * 0xc2b2ae3d27d4eb4full;
            n += 8 + bits / 8;
            break;
        }
        odd = (odd ^ word) * 0xc2b2ae3d27d4eb4full;
        if (n + 16 >= IOASSESS_PATH_BYTES)
            return 0;
    }
    uint64_t h = even ^ (odd << 31 | odd >> 33) ^ ((uint64_t)n << 48);   /* n: the length */
    h = (h ^ (h >> 29)) * 0xbf58476d1ce4e5b9ull;
    h ^= h >> 32;
    return h ? h : 1;
}

/* The memo's id for key: an id, 0 (excluded), or QUICK_MISS. */
static inline uint64_t memo_find(const struct memo *memo, uint64_t key)
{
    for (uint32_t i = (uint32_t)key % MEMO_SLOTS;; i = (i + 1) % MEMO_SLOTS) {
        uint64_t entry = __atomic_load_n(&memo->keys[i], __ATOMIC_ACQUIRE);
        if (entry == key)
            return __atomic_load_n(&memo->ids[i], __ATOMIC_RELAXED);
        if (entry == 0)
            return QUICK_MISS;
    }
}

__attribute__((noinline, cold)) static void memo_enter(struct memo *memo, uint64_t key,
                                                       uint64_t id)
{
    struct ioassess_thread *t = &ioassess_self;
    ioassess_enter(t);
    pthread_mutex_lock(&ioassess_lock);
    for (uint32_t i = (uint32_t)key % MEMO_SLOTS; memo->count < MEMO_SLOTS / 4 * 3;
         i = (i + 1) % MEMO_SLOTS) {
        if (memo->keys[i] == key)
            break;
        if (memo->keys[i] == 0) {
            __atomic_store_n(&memo->ids[i], id, __ATOMIC_RELAXED);
            __atomic_store_n(&memo->keys[i], key, __ATOMIC_RELEASE);
            memo->count++;
            break;
        }
    }
    pthread_mutex_unlock(&ioassess_lock);
    ioassess_leave(t);
}

static inline void memo_clear(struct memo *memo)
{
    if (memo->count)
        memset(memo, 0, sizeof *memo);
}

/* The quick key of (dirfd, path), 0 when it has none (an *at() call's directory not known, the
 * current directory not learnt yet, a path too long). */
static inline uint64_t path_key(int dirfd, const char *path)
{
    uint64_t base;
    if (path[0] == '/')
        base = IOASSESS_FNV_BASIS;
    else if (dirfd == AT_FDCWD)
        base = __atomic_load_n(&cwd_state, __ATOMIC_RELAXED);
    else if ((unsigned)dirfd < IOASSESS_FD_LIMIT)
        base = __atomic_load_n(&dir_state[dirfd], __ATOMIC_RELAXED);
    else
        base = 0;
    return base ? quick_key(base, path) : 0;
}

/* path_id for the calls that keep no descriptor: the same id, through the memo. */
static inline struct path_ref path_id_quick(int dirfd, const char *path, int err,
                                            const struct stat *st)
{
    if (unlikely(!OPAQUE(path) || err == EFAULT || err == ENAMETOOLONG))
        return (struct path_ref){0, 0};
    uint64_t key = path_key(dirfd, path);
    if (likely(key)) {
        uint64_t id = memo_find(&quick_memo, key);
        if (likely(id != QUICK_MISS))
            return (struct path_ref){id, 1};
    }
    struct path_ref ref = path_id(dirfd, path, err, st);
    if (key && ref.state)
        memo_enter(&quick_memo, key, ref.id);
    return ref;
}

/* ---- recording ---- */

/* Whether a metadata call is to be timed. A metadata call does not start the recorder (its
 * constructor, or the first data call or open, does): sanitizer runtimes make some (mkdir) in
 * their own start-up, before a sanitized recorder may run. */
static inline int meta_on(void)
{
    return likely(__atomic_load_n(&ioassess_state, __ATOMIC_ACQUIRE) == IOASSESS_STATE_ACTIVE) &&
           likely(!ioassess_self.busy);
}

static inline void record(uint8_t op, uint64_t file_id, int64_t result, uint64_t start,
                          uint64_t end)
{
    ioassess_record(op, 0, file_id, -1, 0, result, start, end, NULL);
}

/* A path call: recorded unless its path is excluded (an unknown dirfd's records file id 0). */
static inline void record_path(uint8_t op, int dirfd, const char *path, long result, int err,
                               const struct stat *st, uint64_t start, uint64_t end)
{
    struct path_ref ref = path_id_quick(dirfd, path, err, result == 0 ? st : NULL);
    if (path_recorded(ref))
        record(op, ref.id, ioassess_outcome(result, err), start, end);
}

/* The file id of a descriptor: that of a path opened here, or its file's; 0 if it is not
 * recorded (pipes, sockets, excluded files, descriptors the recorder did not see opened). */
static inline uint64_t fd_id(int fd)
{
    if ((unsigned)fd < IOASSESS_FD_LIMIT) {
        uint64_t state = __atomic_load_n(&dir_state[fd], __ATOMIC_RELAXED);
        if (state) {
            uint64_t id = finalise(state);
            if (path_seen(id) > 0)
                return id;
        }
    }
    struct ioassess_ofd *o = ioassess_tracked(fd);
    return o ? o->file_id : 0;
}

#define TIMED(call)                                                            \
    int tsc_ = ioassess_config.use_tsc;                                        \
    uint64_t start_ = ioassess_ticks_start(tsc_);                                 \
    long result_ = (call);                                                     \
    uint64_t end_ = ioassess_ticks_end(tsc_);                                   \
    int err_ = result_ < 0 ? errno : 0

/* A call on a path: (dirfd, path) names it; st is the stat result it fills, or NULL. */
#define PATH_CALL(op, dirfd, path, st, call)                                   \
    do {                                                                       \
        if (!meta_on())                                                        \
            return (call);                                                     \
        TIMED(call);                                                           \
        record_path(op, dirfd, path, result_, err_, st, start_, end_);         \
        return result_;                                                        \
    } while (0)

/* A call on a descriptor. */
#define FD_CALL(op, fd, call)                                                  \
    do {                                                                       \
        uint64_t id_ = meta_on() ? fd_id(fd) : 0;                              \
        if (!id_)                                                              \
            return (call);                                                     \
        TIMED(call);                                                           \
        record(op, id_, ioassess_outcome(result_, err_), start_, end_);                 \
        return result_;                                                        \
    } while (0)

/* An *at() call that may name its descriptor itself (AT_EMPTY_PATH and an empty path). */
#define AT_CALL(op, dirfd, path, flags, st, call)                              \
    do {                                                                       \
        if (((flags) & AT_EMPTY_PATH) && OPAQUE(path) && !path[0])                     \
            FD_CALL(op, dirfd, call);                                          \
        PATH_CALL(op, dirfd, path, st, call);                                  \
    } while (0)

/* ---- the next definitions ---- */

#define META_CALLS(X)                                                            \
    X(stat, int, (const char *, struct stat *))                                 \
    X(stat64, int, (const char *, struct stat64 *))                               \
    X(lstat, int, (const char *, struct stat *))                                \
    X(lstat64, int, (const char *, struct stat64 *))                              \
    X(fstat, int, (int, struct stat *))                                         \
    X(fstat64, int, (int, struct stat64 *))                                       \
    X(fstatat, int, (int, const char *, struct stat *, int))                    \
    X(fstatat64, int, (int, const char *, struct stat64 *, int))                  \
    X(statx, int, (int, const char *, int, unsigned, struct statx *))           \
    X(__xstat, int, (int, const char *, struct stat *))                         \
    X(__xstat64, int, (int, const char *, struct stat64 *))                       \
    X(__lxstat, int, (int, const char *, struct stat *))                        \
    X(__lxstat64, int, (int, const char *, struct stat64 *))                      \
    X(__fxstat, int, (int, int, struct stat *))                                 \
    X(__fxstat64, int, (int, int, struct stat64 *))                               \
    X(__fxstatat, int, (int, int, const char *, struct stat *, int))            \
    X(__fxstatat64, int, (int, int, const char *, struct stat64 *, int))          \
    X(access, int, (const char *, int))                                         \
    X(faccessat, int, (int, const char *, int, int))                            \
    X(euidaccess, int, (const char *, int))                                     \
    X(eaccess, int, (const char *, int))                                        \
    X(unlink, int, (const char *))                                              \
    X(unlinkat, int, (int, const char *, int))                                  \
    X(mkdir, int, (const char *, mode_t))                                       \
    X(mkdirat, int, (int, const char *, mode_t))                                \
    X(rmdir, int, (const char *))                                               \
    X(rename, int, (const char *, const char *))                                \
    X(renameat, int, (int, const char *, int, const char *))                    \
    X(renameat2, int, (int, const char *, int, const char *, unsigned))         \
    X(mkstemp, int, (char *))                                                   \
    X(mkstemp64, int, (char *))                                                 \
    X(mkostemp, int, (char *, int))                                             \
    X(mkostemp64, int, (char *, int))                                           \
    X(mkstemps, int, (char *, int))                                             \
    X(mkstemps64, int, (char *, int))                                           \
    X(mkostemps, int, (char *, int, int))                                       \
    X(mkostemps64, int, (char *, int, int))                                     \
    X(opendir, DIR *, (const char *))                                           \
    X(fdopendir, DIR *, (int))                                                  \
    X(readdir, struct dirent *, (DIR *))                                        \
    X(readdir64, struct dirent64 *, (DIR *))                                    \
    X(readdir_r, int, (DIR *, struct dirent *, struct dirent **))               \
    X(readdir64_r, int, (DIR *, struct dirent64 *, struct dirent64 **))         \
    X(getdents64, ssize_t, (int, void *, size_t))                               \
    X(closedir, int, (DIR *))                                                   \
    X(truncate, int, (const char *, off_t))                                     \
    X(truncate64, int, (const char *, off_t))                                   \
    X(ftruncate, int, (int, off_t))                                             \
    X(ftruncate64, int, (int, off_t))                                           \
    X(fallocate, int, (int, int, off_t, off_t))                                 \
    X(fallocate64, int, (int, int, off_t, off_t))                               \
    X(posix_fallocate, int, (int, off_t, off_t))                                \
    X(posix_fallocate64, int, (int, off_t, off_t))                              \
    X(chdir, int, (const char *))                                               \
    X(fchdir, int, (int))

#define DECLARE_REAL(name, ret, params) static ret (*real_##name) params;
META_CALLS(DECLARE_REAL)
#undef DECLARE_REAL

/* ---- stat ---- */

IOASSESS_EXPORT int stat(const char *path, struct stat *buf)
{
    RESOLVE_OR_FAIL(stat, -1);
    PATH_CALL(IOASSESS_OP_STAT, AT_FDCWD, path, buf, real_stat(path, buf));
}

IOASSESS_EXPORT int stat64(const char *path, struct stat64 *buf)
{
    RESOLVE_OR_FAIL(stat64, -1);
    PATH_CALL(IOASSESS_OP_STAT, AT_FDCWD, path, (const struct stat *)buf, real_stat64(path, buf));
}

IOASSESS_EXPORT int lstat(const char *path, struct stat *buf)
{
    RESOLVE_OR_FAIL(lstat, -1);
    PATH_CALL(IOASSESS_OP_STAT, AT_FDCWD, path, buf, real_lstat(path, buf));
}

IOASSESS_EXPORT int lstat64(const char *path, struct stat64 *buf)
{
    RESOLVE_OR_FAIL(lstat64, -1);
    PATH_CALL(IOASSESS_OP_STAT, AT_FDCWD, path, (const struct stat *)buf, real_lstat64(path, buf));
}

IOASSESS_EXPORT int fstat(int fd, struct stat *buf)
{
    RESOLVE_OR_FAIL(fstat, -1);
    FD_CALL(IOASSESS_OP_STAT, fd, real_fstat(fd, buf));
}

IOASSESS_EXPORT int fstat64(int fd, struct stat64 *buf)
{
    RESOLVE_OR_FAIL(fstat64, -1);
    FD_CALL(IOASSESS_OP_STAT, fd, real_fstat64(fd, buf));
}

IOASSESS_EXPORT int fstatat(int dirfd, const char *path, struct stat *buf, int flags)
{
    RESOLVE_OR_FAIL(fstatat, -1);
    AT_CALL(IOASSESS_OP_STAT, dirfd, path, flags, buf, real_fstatat(dirfd, path, buf, flags));
}

IOASSESS_EXPORT int fstatat64(int dirfd, const char *path, struct stat64 *buf, int flags)
{
    RESOLVE_OR_FAIL(fstatat64, -1);
    AT_CALL(IOASSESS_OP_STAT, dirfd, path, flags, (const struct stat *)buf, real_fstatat64(dirfd, path, buf, flags));
}

/* statx's result carries no struct stat: the FILE slot of a path first seen here has no mode,
 * device or inode. */
IOASSESS_EXPORT int statx(int dirfd, const char *path, int flags, unsigned mask,
                          struct statx *buf)
{
    RESOLVE_OR_FAIL(statx, -1);
    AT_CALL(IOASSESS_OP_STAT, dirfd, path, flags, NULL,
            real_statx(dirfd, path, flags, mask, buf));
}

/* The stat interface of glibc before 2.33, which binaries built then still call. */
IOASSESS_EXPORT int __xstat(int version, const char *path, struct stat *buf)
{
    RESOLVE_OR_FAIL(__xstat, -1);
    PATH_CALL(IOASSESS_OP_STAT, AT_FDCWD, path, buf, real___xstat(version, path, buf));
}

IOASSESS_EXPORT int __xstat64(int version, const char *path, struct stat64 *buf)
{
    RESOLVE_OR_FAIL(__xstat64, -1);
    PATH_CALL(IOASSESS_OP_STAT, AT_FDCWD, path, (const struct stat *)buf, real___xstat64(version, path, buf));
}

IOASSESS_EXPORT int __lxstat(int version, const char *path, struct stat *buf)
{
    RESOLVE_OR_FAIL(__lxstat, -1);
    PATH_CALL(IOASSESS_OP_STAT, AT_FDCWD, path, buf, real___lxstat(version, path, buf));
}

IOASSESS_EXPORT int __lxstat64(int version, const char *path, struct stat64 *buf)
{
    RESOLVE_OR_FAIL(__lxstat64, -1);
    PATH_CALL(IOASSESS_OP_STAT, AT_FDCWD, path, (const struct stat *)buf, real___lxstat64(version, path, buf));
}

IOASSESS_EXPORT int __fxstat(int version, int fd, struct stat *buf)
{
    RESOLVE_OR_FAIL(__fxstat, -1);
    FD_CALL(IOASSESS_OP_STAT, fd, real___fxstat(version, fd, buf));
}

IOASSESS_EXPORT int __fxstat64(int version, int fd, struct stat64 *buf)
{
    RESOLVE_OR_FAIL(__fxstat64, -1);
    FD_CALL(IOASSESS_OP_STAT, fd, real___fxstat64(version, fd, buf));
}

IOASSESS_EXPORT int __fxstatat(int version, int dirfd, const char *path, struct stat *buf,
                               int flags)
{
    RESOLVE_OR_FAIL(__fxstatat, -1);
    AT_CALL(IOASSESS_OP_STAT, dirfd, path, flags, buf,
            real___fxstatat(version, dirfd, path, buf, flags));
}

IOASSESS_EXPORT int __fxstatat64(int version, int dirfd, const char *path, struct stat64 *buf,
                                 int flags)
{
    RESOLVE_OR_FAIL(__fxstatat64, -1);
    AT_CALL(IOASSESS_OP_STAT, dirfd, path, flags, (const struct stat *)buf,
            real___fxstatat64(version, dirfd, path, buf, flags));
}

/* ---- access, unlink, mkdir, rmdir, rename ---- */

IOASSESS_EXPORT int access(const char *path, int mode)
{
    RESOLVE_OR_FAIL(access, -1);
    PATH_CALL(IOASSESS_OP_ACCESS, AT_FDCWD, path, NULL, real_access(path, mode));
}

IOASSESS_EXPORT int faccessat(int dirfd, const char *path, int mode, int flags)
{
    RESOLVE_OR_FAIL(faccessat, -1);
    AT_CALL(IOASSESS_OP_ACCESS, dirfd, path, flags, NULL,
            real_faccessat(dirfd, path, mode, flags));
}

IOASSESS_EXPORT int euidaccess(const char *path, int mode)
{
    RESOLVE_OR_FAIL(euidaccess, -1);
    PATH_CALL(IOASSESS_OP_ACCESS, AT_FDCWD, path, NULL, real_euidaccess(path, mode));
}

IOASSESS_EXPORT int eaccess(const char *path, int mode)
{
    RESOLVE_OR_FAIL(eaccess, -1);
    PATH_CALL(IOASSESS_OP_ACCESS, AT_FDCWD, path, NULL, real_eaccess(path, mode));
}

IOASSESS_EXPORT int unlink(const char *path)
{
    RESOLVE_OR_FAIL(unlink, -1);
    PATH_CALL(IOASSESS_OP_UNLINK, AT_FDCWD, path, NULL, real_unlink(path));
}

IOASSESS_EXPORT int unlinkat(int dirfd, const char *path, int flags)
{
    RESOLVE_OR_FAIL(unlinkat, -1);
    PATH_CALL((flags & AT_REMOVEDIR) ? IOASSESS_OP_RMDIR : IOASSESS_OP_UNLINK, dirfd, path,
              NULL, real_unlinkat(dirfd, path, flags));
}

static inline int mkdir_recorded(const char *path, mode_t mode)
{
    PATH_CALL(IOASSESS_OP_MKDIR, AT_FDCWD, path, NULL, real_mkdir(path, mode));
}

/* Sanitizer runtimes call mkdir while they start (the directories of their log_path), before
 * their shadow memory exists: in the sanitizer builds this entry point is not instrumented and
 * passes such calls on before anything instrumented runs (the recorder is not yet active
 * then); elsewhere mkdir_recorded is inlined into it. */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define STARTUP_SAFE __attribute__((no_sanitize("address", "thread", "undefined")))
#else
#define STARTUP_SAFE
#endif

IOASSESS_EXPORT STARTUP_SAFE int mkdir(const char *path, mode_t mode)
{
    RESOLVE_OR_FAIL(mkdir, -1);
    if (__atomic_load_n(&ioassess_state, __ATOMIC_ACQUIRE) != IOASSESS_STATE_ACTIVE)
        return real_mkdir(path, mode);
    return mkdir_recorded(path, mode);
}

IOASSESS_EXPORT int mkdirat(int dirfd, const char *path, mode_t mode)
{
    RESOLVE_OR_FAIL(mkdirat, -1);
    PATH_CALL(IOASSESS_OP_MKDIR, dirfd, path, NULL, real_mkdirat(dirfd, path, mode));
}

IOASSESS_EXPORT int rmdir(const char *path)
{
    RESOLVE_OR_FAIL(rmdir, -1);
    PATH_CALL(IOASSESS_OP_RMDIR, AT_FDCWD, path, NULL, real_rmdir(path));
}

/* A rename is recorded on its old path. */
IOASSESS_EXPORT int rename(const char *old_path, const char *new_path)
{
    RESOLVE_OR_FAIL(rename, -1);
    PATH_CALL(IOASSESS_OP_RENAME, AT_FDCWD, old_path, NULL, real_rename(old_path, new_path));
}

IOASSESS_EXPORT int renameat(int old_dirfd, const char *old_path, int new_dirfd,
                             const char *new_path)
{
    RESOLVE_OR_FAIL(renameat, -1);
    PATH_CALL(IOASSESS_OP_RENAME, old_dirfd, old_path, NULL,
              real_renameat(old_dirfd, old_path, new_dirfd, new_path));
}

IOASSESS_EXPORT int renameat2(int old_dirfd, const char *old_path, int new_dirfd,
                              const char *new_path, unsigned flags)
{
    RESOLVE_OR_FAIL(renameat2, -1);
    PATH_CALL(IOASSESS_OP_RENAME, old_dirfd, old_path, NULL,
              real_renameat2(old_dirfd, old_path, new_dirfd, new_path, flags));
}

/* ---- open (ioassess-posix.c times it), close, mkstemp ---- */

/* After an open that the descriptor table does not record (a directory, a FIFO): the path's
 * hash state is kept for the calls on the descriptor and the *at() calls relative to it. */
static void remember_dir(int fd, uint64_t state)
{
    if ((unsigned)fd < IOASSESS_FD_LIMIT)
        __atomic_store_n(&dir_state[fd], state, __ATOMIC_RELAXED);
}

/* An open's record (or mkstemp's): on the descriptor's file when it is recorded (the id its
 * reads and writes get), else on its path. Called after the descriptor table learnt the
 * descriptor. */
static void record_opened(uint8_t op, int dirfd, const char *path, int flags, int fd, int err,
                          uint64_t start, uint64_t end)
{
    uint32_t slot = (unsigned)fd < IOASSESS_FD_LIMIT
                        ? __atomic_load_n(&ioassess_fd_slot[fd], __ATOMIC_ACQUIRE)
                        : IOASSESS_FD_UNKNOWN;
    if (slot >= IOASSESS_FD_FIRST_OFD) {
        record(op, ioassess_ofds[slot - IOASSESS_FD_FIRST_OFD].file_id, fd, start, end);
        return;
    }
    struct path_ref ref = path_id(dirfd, path, err, NULL);
    (void)flags;
    if (fd >= 0)
        remember_dir(fd, ref.id ? ref.state : 0);
    if (path_recorded(ref))
        record(op, ref.id, ioassess_outcome(fd, err), start, end);
}

/* Re-opens. Entering a descriptor in the table asks the kernel what its file is (fstat) and
 * its name (/proc/self/fd): two system calls, together more than the open of a cached file
 * costs. So a path that named a recorded regular file when this process last opened it is
 * taken to name one still: a memo keyed by the path's quick key gives its file id, and the
 * descriptor is entered at once, without a system call. A path whose file was since replaced
 * by one of another kind (a FIFO, a directory, a symbolic link elsewhere) is then recorded as
 * the regular file it named before (docs/trace-format.md, "Metadata ops"). */
static struct memo reopen_memo;

static void enter_opened(int dirfd, const char *path, int flags, int fd)
{
    uint64_t key = OPAQUE(path) ? path_key(dirfd, path) : 0;
    if (key) {
        uint64_t id = memo_find(&reopen_memo, key);
        if (id != QUICK_MISS && ioassess_fd_reopened(fd, flags, id))
            return;
    }
    ioassess_fd_opened(fd, flags);
    uint64_t id = key ? ioassess_fd_regular_file(fd) : 0;
    if (id)
        memo_enter(&reopen_memo, key, id);
}

/* An open the recorder timed (ioassess-posix.c): its descriptor entered in the table, then the
 * op recorded on the file the table gave it. */
void ioassess_meta_opened(uint8_t op, int dirfd, const char *path, int flags, int fd, int err,
                          uint64_t start, uint64_t end)
{
    if (fd >= 0)
        enter_opened(dirfd, path, flags, fd);
    record_opened(op, dirfd, path, flags, fd, err, start, end);
}

/* Before a close: the file it is recorded on, 0 if it is not (a descriptor not known: a
 * close is never the one that looks a descriptor up). */
uint64_t ioassess_meta_closing(int fd)
{
    if (!meta_on() || (unsigned)fd >= IOASSESS_FD_LIMIT)
        return 0;
    uint32_t slot = __atomic_load_n(&ioassess_fd_slot[fd], __ATOMIC_ACQUIRE);
    if (slot >= IOASSESS_FD_FIRST_OFD)
        return ioassess_ofds[slot - IOASSESS_FD_FIRST_OFD].file_id;
    uint64_t state = __atomic_load_n(&dir_state[fd], __ATOMIC_RELAXED);
    if (state && path_seen(finalise(state)) > 0)
        return finalise(state);
    return 0;
}

void ioassess_meta_closed(uint8_t op, int fd, uint64_t file_id, int result, int err,
                          uint64_t start, uint64_t end)
{
    if (result == 0)
        ioassess_meta_fd_closed(fd);
    record(op, file_id, ioassess_outcome(result, err), start, end);
}

/* A descriptor closed (close, close_range, dup2 over it...): no longer a known directory. */
void ioassess_meta_fd_closed(int fd)
{
    if ((unsigned)fd < IOASSESS_FD_LIMIT && __atomic_load_n(&dir_state[fd], __ATOMIC_RELAXED))
        __atomic_store_n(&dir_state[fd], 0, __ATOMIC_RELAXED);
}

/* dup, dup2, dup3, F_DUPFD: the new descriptor is the same directory (fts keeps its
 * directories open so), or none. */
void ioassess_meta_fd_duplicated(int old_fd, int new_fd)
{
    if ((unsigned)new_fd >= IOASSESS_FD_LIMIT)
        return;
    uint64_t state = (unsigned)old_fd < IOASSESS_FD_LIMIT
                         ? __atomic_load_n(&dir_state[old_fd], __ATOMIC_RELAXED) : 0;
    if (state || __atomic_load_n(&dir_state[new_fd], __ATOMIC_RELAXED))
        __atomic_store_n(&dir_state[new_fd], state, __ATOMIC_RELAXED);
}

void ioassess_meta_fd_closed_range(unsigned first, unsigned last)
{
    for (unsigned long fd = first; fd <= last && fd < IOASSESS_FD_LIMIT; fd++)
        ioassess_meta_fd_closed((int)fd);
}

/* mkstemp's descriptor is entered in the table like an open's, and the op recorded on the
 * name it made (the template, filled in). */
#define MKSTEMP(call, open_flags)                                              \
    do {                                                                       \
        if (!meta_on())                                                        \
            return (call);                                                     \
        TIMED(call);                                                           \
        if (result_ >= 0)                                                      \
            ioassess_fd_opened((int)result_, O_RDWR | O_CREAT | O_EXCL | (open_flags)); \
        record_opened(IOASSESS_OP_MKSTEMP, AT_FDCWD, template, 0, (int)result_, err_, \
                      start_, end_);                                           \
        return (int)result_;                                                   \
    } while (0)

IOASSESS_EXPORT int mkstemp(char *template)
{
    RESOLVE_OR_FAIL(mkstemp, -1);
    MKSTEMP(real_mkstemp(template), 0);
}

IOASSESS_EXPORT int mkstemp64(char *template)
{
    RESOLVE_OR_FAIL(mkstemp64, -1);
    MKSTEMP(real_mkstemp64(template), 0);
}

IOASSESS_EXPORT int mkostemp(char *template, int flags)
{
    RESOLVE_OR_FAIL(mkostemp, -1);
    MKSTEMP(real_mkostemp(template, flags), flags);
}

IOASSESS_EXPORT int mkostemp64(char *template, int flags)
{
    RESOLVE_OR_FAIL(mkostemp64, -1);
    MKSTEMP(real_mkostemp64(template, flags), flags);
}

IOASSESS_EXPORT int mkstemps(char *template, int suffix_len)
{
    RESOLVE_OR_FAIL(mkstemps, -1);
    MKSTEMP(real_mkstemps(template, suffix_len), 0);
}

IOASSESS_EXPORT int mkstemps64(char *template, int suffix_len)
{
    RESOLVE_OR_FAIL(mkstemps64, -1);
    MKSTEMP(real_mkstemps64(template, suffix_len), 0);
}

IOASSESS_EXPORT int mkostemps(char *template, int suffix_len, int flags)
{
    RESOLVE_OR_FAIL(mkostemps, -1);
    MKSTEMP(real_mkostemps(template, suffix_len, flags), flags);
}

IOASSESS_EXPORT int mkostemps64(char *template, int suffix_len, int flags)
{
    RESOLVE_OR_FAIL(mkostemps64, -1);
    MKSTEMP(real_mkostemps64(template, suffix_len, flags), flags);
}

/* ---- directories ---- */

/* The descriptor of a directory stream (glibc's DIR starts with it; dirfd reads it). */
static inline int stream_fd(DIR *dir)
{
    return OPAQUE(dir) ? dirfd(dir) : -1;
}

#define TIMED_DIR(call)                                                        \
    int tsc_ = ioassess_config.use_tsc;                                        \
    uint64_t start_ = ioassess_ticks_start(tsc_);                                 \
    DIR *dir_ = (call);                                                        \
    uint64_t end_ = ioassess_ticks_end(tsc_);                                   \
    int err_ = dir_ ? 0 : errno

IOASSESS_EXPORT DIR *opendir(const char *path)
{
    RESOLVE_OR_FAIL(opendir, NULL);
    if (!meta_on())
        return real_opendir(path);
    TIMED_DIR(real_opendir(path));
    int fd = stream_fd(dir_);
    struct path_ref ref = path_id(AT_FDCWD, path, err_, NULL);
    if (dir_)
        remember_dir(fd, ref.id ? ref.state : 0);
    if (path_recorded(ref))
        record(IOASSESS_OP_OPENDIR, ref.id, dir_ ? fd : -(int64_t)err_, start_, end_);
    return dir_;
}

IOASSESS_EXPORT DIR *fdopendir(int fd)
{
    RESOLVE_OR_FAIL(fdopendir, NULL);
    uint64_t id = meta_on() ? fd_id(fd) : 0;
    if (!id)
        return real_fdopendir(fd);
    TIMED_DIR(real_fdopendir(fd));
    record(IOASSESS_OP_OPENDIR, id, dir_ ? fd : -(int64_t)err_, start_, end_);
    return dir_;
}

/* readdir: 1 for an entry, 0 at the end, -errno. errno is left as the call left it: unchanged
 * at the end of the directory and with an entry, set on an error; the recorder sets it to 0
 * around the call to tell the end from an error, and puts the caller's value back. */
#define READDIR(name, entry_type)                                              \
    do {                                                                       \
        RESOLVE_OR_FAIL(name, NULL);                                           \
        uint64_t id_ = meta_on() && OPAQUE(dir) ? fd_id(stream_fd(dir)) : 0;   \
        if (!id_)                                                              \
            return real_##name(dir);                                           \
        int saved_errno_ = errno;                                              \
        errno = 0;                                                             \
        int tsc_ = ioassess_config.use_tsc;                                    \
        uint64_t start_ = ioassess_ticks_start(tsc_);                             \
        entry_type *entry_ = real_##name(dir);                                 \
        uint64_t end_ = ioassess_ticks_end(tsc_);                               \
        int err_ = entry_ ? 0 : errno;                                         \
        if (!err_)                                                             \
            errno = saved_errno_;                                              \
        record(IOASSESS_OP_READDIR, id_, entry_ ? 1 : -(int64_t)err_, start_, end_); \
        return entry_;                                                         \
    } while (0)

IOASSESS_EXPORT struct dirent *readdir(DIR *dir)
{
    READDIR(readdir, struct dirent);
}

IOASSESS_EXPORT struct dirent64 *readdir64(DIR *dir)
{
    READDIR(readdir64, struct dirent64);
}

/* readdir_r returns an error number (0 also at the end, with *result NULL). */
#define READDIR_R(name, call)                                                  \
    do {                                                                       \
        RESOLVE(name);                                                         \
        if (unlikely(!real_##name))                                            \
            return ENOSYS;                                                     \
        uint64_t id_ = meta_on() && OPAQUE(dir) ? fd_id(stream_fd(dir)) : 0;   \
        if (!id_)                                                              \
            return (call);                                                     \
        int tsc_ = ioassess_config.use_tsc;                                    \
        uint64_t start_ = ioassess_ticks_start(tsc_);                             \
        int rc_ = (call);                                                      \
        uint64_t end_ = ioassess_ticks_end(tsc_);                               \
        record(IOASSESS_OP_READDIR, id_, rc_ ? -(int64_t)rc_ : (OPAQUE(result) && *result) ? 1 : 0, \
               start_, end_);                                                  \
        return rc_;                                                            \
    } while (0)

IOASSESS_EXPORT int readdir_r(DIR *dir, struct dirent *entry, struct dirent **result)
{
    READDIR_R(readdir_r, real_readdir_r(dir, entry, result));
}

IOASSESS_EXPORT int readdir64_r(DIR *dir, struct dirent64 *entry, struct dirent64 **result)
{
    READDIR_R(readdir64_r, real_readdir64_r(dir, entry, result));
}

/* getdents64: the bytes of entries returned, 0 at the end. */
IOASSESS_EXPORT ssize_t getdents64(int fd, void *buf, size_t bytes)
{
    RESOLVE_OR_FAIL(getdents64, -1);
    FD_CALL(IOASSESS_OP_READDIR, fd, real_getdents64(fd, buf, bytes));
}

IOASSESS_EXPORT int closedir(DIR *dir)
{
    RESOLVE_OR_FAIL(closedir, -1);
    int fd = stream_fd(dir);
    uint64_t id = OPAQUE(dir) ? ioassess_meta_closing(fd) : 0;
    if (!id)
        return real_closedir(dir);
    TIMED(real_closedir(dir));
    ioassess_meta_closed(IOASSESS_OP_CLOSEDIR, fd, id, (int)result_, err_, start_, end_);
    return (int)result_;
}

/* ---- truncate, fallocate ---- */

IOASSESS_EXPORT int truncate(const char *path, off_t length)
{
    RESOLVE_OR_FAIL(truncate, -1);
    PATH_CALL(IOASSESS_OP_TRUNCATE, AT_FDCWD, path, NULL, real_truncate(path, length));
}

IOASSESS_EXPORT int truncate64(const char *path, off_t length)
{
    RESOLVE_OR_FAIL(truncate64, -1);
    PATH_CALL(IOASSESS_OP_TRUNCATE, AT_FDCWD, path, NULL, real_truncate64(path, length));
}

IOASSESS_EXPORT int ftruncate(int fd, off_t length)
{
    RESOLVE_OR_FAIL(ftruncate, -1);
    FD_CALL(IOASSESS_OP_TRUNCATE, fd, real_ftruncate(fd, length));
}

IOASSESS_EXPORT int ftruncate64(int fd, off_t length)
{
    RESOLVE_OR_FAIL(ftruncate64, -1);
    FD_CALL(IOASSESS_OP_TRUNCATE, fd, real_ftruncate64(fd, length));
}

IOASSESS_EXPORT int fallocate(int fd, int mode, off_t offset, off_t length)
{
    RESOLVE_OR_FAIL(fallocate, -1);
    FD_CALL(IOASSESS_OP_FALLOCATE, fd, real_fallocate(fd, mode, offset, length));
}

IOASSESS_EXPORT int fallocate64(int fd, int mode, off_t offset, off_t length)
{
    RESOLVE_OR_FAIL(fallocate64, -1);
    FD_CALL(IOASSESS_OP_FALLOCATE, fd, real_fallocate64(fd, mode, offset, length));
}

/* posix_fallocate returns an error number and leaves errno alone: recorded as -that. */
#define POSIX_FALLOCATE(name)                                                  \
    do {                                                                       \
        RESOLVE(name);                                                         \
        if (unlikely(!real_##name))                                            \
            return ENOSYS;                                                     \
        uint64_t id_ = meta_on() ? fd_id(fd) : 0;                              \
        if (!id_)                                                              \
            return real_##name(fd, offset, length);                            \
        int tsc_ = ioassess_config.use_tsc;                                    \
        uint64_t start_ = ioassess_ticks_start(tsc_);                             \
        int rc_ = real_##name(fd, offset, length);                             \
        uint64_t end_ = ioassess_ticks_end(tsc_);                               \
        record(IOASSESS_OP_FALLOCATE, id_, -(int64_t)rc_, start_, end_);       \
        return rc_;                                                            \
    } while (0)

IOASSESS_EXPORT int posix_fallocate(int fd, off_t offset, off_t length)
{
    POSIX_FALLOCATE(posix_fallocate);
}

IOASSESS_EXPORT int posix_fallocate64(int fd, off_t offset, off_t length)
{
    POSIX_FALLOCATE(posix_fallocate64);
}

/* ---- the current directory ---- */

/* After a successful chdir or fchdir: the new directory's name and state, from the kernel. A
 * signal handler that interrupted the recorder only forgets the state (learnt again later). */
static int changed_dir(int result)
{
    if (result != 0 || ioassess_state != IOASSESS_STATE_ACTIVE)
        return result;
    struct ioassess_thread *t = &ioassess_self;
    if (t->busy) {
        __atomic_store_n(&cwd_state, 0, __ATOMIC_RELAXED);
        return result;
    }
    int saved_errno = errno;
    ioassess_enter(t);
    pthread_mutex_lock(&ioassess_lock);
    learn_cwd();
    pthread_mutex_unlock(&ioassess_lock);
    ioassess_leave(t);
    errno = saved_errno;
    return result;
}

IOASSESS_EXPORT int chdir(const char *path)
{
    RESOLVE_OR_FAIL(chdir, -1);
    return changed_dir(real_chdir(path));
}

IOASSESS_EXPORT int fchdir(int fd)
{
    RESOLVE_OR_FAIL(fchdir, -1);
    return changed_dir(real_fchdir(fd));
}

/* ---- start-up and fork ---- */

void ioassess_meta_resolve(void)
{
#define RESOLVE_REAL(name, ret, params) RESOLVE(name);
    META_CALLS(RESOLVE_REAL)
#undef RESOLVE_REAL
}

/* In a fork child: it writes its own FILE slots, so every path is new to it again. */
void ioassess_meta_fork_child(void)
{
    if (path_count) {
        memset(path_ids, 0, sizeof path_ids);
        memset(path_excluded, 0, sizeof path_excluded);
    }
    path_count = 0;
    memo_clear(&quick_memo);
    memo_clear(&reopen_memo);
}
