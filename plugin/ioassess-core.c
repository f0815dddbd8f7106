/*
 * Start-up and the process life cycle: configuration from the environment, the trace of a
 * new process image, fork (the child starts its own trace), vfork (run as fork, so the child
 * never writes into its parent's state), exec (the old trace ends with reason "exec", the new
 * image starts a new one) and exit (end time and status in the header).
 * On any failure at start-up the recorder disables itself and the application runs as if it
 * were not there; it never prints anything.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/utsname.h>

#include "ioassess-internal.h"

int ioassess_state;
struct ioassess_config ioassess_config;
pthread_mutex_t ioassess_lock = PTHREAD_MUTEX_INITIALIZER;
__thread struct ioassess_thread ioassess_self __attribute__((tls_model("initial-exec")));

static const char *first_env(const char *const names[])
{
    for (int i = 0; names[i]; i++) {
        const char *value = getenv(names[i]);
        if (value && value[0])
            return value;
    }
    return NULL;
}

static int env_flag(const char *name)
{
    const char *value = getenv(name);
    return value && value[0] && strcmp(value, "0") != 0;
}

static void copy_bounded(char *dst, size_t dst_bytes, const char *src)
{
    snprintf(dst, dst_bytes, "%s", src ? src : "");
}

/* The trace directory and every directory above it must be such that no one but root and
 * the user can replace or add anything in the trace directory, or replace a directory on the
 * way to it: then a trace can be written nowhere else. */

/* A directory on the way: root's or the user's, and writable by no one else unless sticky
 * (like /tmp: others may add entries, but not rename or remove the user's). */
static int safe_on_the_way(const struct stat *st, uid_t user)
{
    return S_ISDIR(st->st_mode) && (st->st_uid == 0 || st->st_uid == user) &&
           (!(st->st_mode & (S_IWGRP | S_IWOTH)) || (st->st_mode & S_ISVTX));
}

/* The trace directory itself (its path already resolved): a directory of the user's that no
 * one else can write. */
static int private_dir(const struct stat *st, uid_t user)
{
    return S_ISDIR(st->st_mode) && st->st_uid == user && !(st->st_mode & (S_IWGRP | S_IWOTH));
}

static int lstat_path(const char *path, struct stat *st)
{
    return (int)syscall(SYS_newfstatat, -100, path, st, AT_SYMLINK_NOFOLLOW);
}

/* `path` (absolute) with the part that exists resolved by the kernel (no symbolic link, no
 * "." or "..") and the part that does not appended as it is; -1 if that part has "." or ".."
 * or the result does not fit. */
static int canonical_path(const char *path, char *out, size_t out_bytes)
{
    char existing[IOASSESS_PATH_BYTES], resolved[IOASSESS_PATH_BYTES];
    copy_bounded(existing, sizeof existing, path);
    while (!realpath(existing[0] ? existing : "/", resolved)) {
        char *last = strrchr(existing, '/');
        if (errno != ENOENT || !last || strcmp(last, "/.") == 0 || strcmp(last, "/..") == 0)
            return -1;
        *last = '\0';
    }
    const char *rest = path + strlen(existing);
    int n = snprintf(out, out_bytes, "%s%s", strcmp(resolved, "/") == 0 ? "" : resolved, rest);
    return n > 0 && (size_t)n < out_bytes ? 0 : -1;
}

/* Walk the canonical `path` from /, creating what is missing with mode 0700 (only inside a
 * directory already found safe), and check every directory on the way and the last one. */
static int make_trace_dir(char *path)
{
    uid_t user = getuid();
    struct stat st;
    if (lstat_path("/", &st) != 0 || !safe_on_the_way(&st, user))
        return -1;
    for (char *slash = path + 1;; slash++) {
        if (*slash != '/' && *slash != '\0')
            continue;
        char saved = *slash;
        *slash = '\0';
        int found = lstat_path(path, &st) == 0 ||
                    ((syscall(SYS_mkdirat, -100, path, 0700) == 0 || errno == EEXIST) &&
                     lstat_path(path, &st) == 0);
        *slash = saved;
        if (!found)
            return -1;
        int last = saved == '\0' || slash[1] == '\0';
        if (last)
            return private_dir(&st, user) ? 0 : -1;
        if (!safe_on_the_way(&st, user))
            return -1;
    }
}

/* The trace directory: IOASSESS_TRACE_DIR (relative to the working directory) or
 * $TMPDIR/ioassess-UID, made canonical and safe (make_trace_dir); -1 if it cannot be. */
static int configure_trace_dir(void)
{
    char wanted[IOASSESS_PATH_BYTES];
    const char *configured = getenv("IOASSESS_TRACE_DIR");
    const char *tmp = getenv("TMPDIR");
    int n;
    if (configured && configured[0] == '/') {
        n = snprintf(wanted, sizeof wanted, "%s", configured);
    } else if (configured && configured[0]) {
        char cwd[IOASSESS_PATH_BYTES];
        if (syscall(SYS_getcwd, cwd, sizeof cwd) <= 0)
            return -1;
        n = snprintf(wanted, sizeof wanted, "%.2047s/%.2047s", cwd, configured);
    } else {
        n = snprintf(wanted, sizeof wanted, "%s/ioassess-%u", tmp && tmp[0] == '/' ? tmp : "/tmp",
                     (unsigned)getuid());
    }
    if (n <= 0 || (size_t)n >= sizeof wanted)
        return -1;
    struct stat st;
    /* the path as named must not end in a symbolic link or a file (it is resolved below) */
    if (lstat_path(wanted, &st) == 0 && !S_ISDIR(st.st_mode))
        return -1;
    char *dir = ioassess_config.trace_dir;
    if (canonical_path(wanted, dir, sizeof ioassess_config.trace_dir) != 0)
        return -1;
    return make_trace_dir(dir);
}

static void configure_excludes(void)
{
    const char *list = getenv("IOASSESS_EXCLUDE");
    if (!list)
        list = IOASSESS_DEFAULT_EXCLUDE;
    if (strcmp(list, "none") == 0)
        return;
    /* Darshan's runtime, when loaded (every preloaded library is, before any constructor runs),
     * writes its own logs: they are not the job's I/O. */
    ioassess_config.skip_darshan_logs = dlsym(RTLD_DEFAULT, "darshan_core_initialize") != NULL;
    while (*list && ioassess_config.exclude_count < IOASSESS_MAX_EXCLUDES) {
        const char *end = strchr(list, ':');
        size_t n = end ? (size_t)(end - list) : strlen(list);
        if (n > 0 && n < sizeof ioassess_config.exclude[0] && list[0] == '/') {
            memcpy(ioassess_config.exclude[ioassess_config.exclude_count], list, n);
            ioassess_config.exclude[ioassess_config.exclude_count++][n] = '\0';
        }
        list += end ? n + 1 : n;
    }
}

/* The launcher's rank: an integer from -1 (none) to IOASSESS_MAX_RANK, the ranks a reader
 * accepts; anything else (not a number, out of range) is no rank, -1. */
static int64_t parse_rank(const char *value)
{
    if (!value)
        return -1;
    char *end = NULL;
    errno = 0;
    long long rank = strtoll(value, &end, 10);
    int valid = end != value && *end == '\0' && errno == 0 && rank >= -1 && rank <= IOASSESS_MAX_RANK;
    return valid ? rank : -1;
}

/* IOASSESS_CLOCK chooses the ticks; without it the writer asks the kernel at start-up. */
static void configure_clock(void)
{
#if defined(__x86_64__) || defined(__i386__)
    const char *choice = getenv("IOASSESS_CLOCK");
    int tsc = choice && strcmp(choice, "tsc") == 0;
    ioassess_config.use_tsc = tsc;
    ioassess_config.clock_from_kernel = !tsc && !(choice && strcmp(choice, "monotonic") == 0);
#endif
}

static int configure(void)
{
    /* A set-user-ID or set-group-ID program (or one given capabilities) would create
     * directories and traces with ids the user who named them does not have: no recording. */
    if (env_flag("IOASSESS_DISABLE") || getauxval(AT_SECURE))
        return -1;
    if (configure_trace_dir() != 0)
        return -1;
    const char *cap = getenv("IOASSESS_MAX_RECORDS");
    char *end = NULL;
    unsigned long long parsed = cap ? strtoull(cap, &end, 10) : 0;
    ioassess_config.record_cap =
        (cap && end != cap && *end == '\0') ? parsed : IOASSESS_DEFAULT_RECORD_CAP;
    ioassess_config.obfuscate = env_flag("IOASSESS_OBFUSCATE");
    configure_clock();
    static const char *const job_vars[] = {"IOASSESS_JOB_ID", "SLURM_JOB_ID", "PBS_JOBID",
                                           "LSB_JOBID", "FLUX_JOB_ID", NULL};
    static const char *const rank_vars[] = {"IOASSESS_RANK", "PMI_RANK", "PMIX_RANK",
                                            "OMPI_COMM_WORLD_RANK", "SLURM_PROCID", NULL};
    copy_bounded(ioassess_config.job_id, sizeof ioassess_config.job_id, first_env(job_vars));
    ioassess_config.rank = parse_rank(first_env(rank_vars));
    const char *host = getenv("IOASSESS_HOSTNAME");
    struct utsname uts;
    if (!(host && host[0]) && uname(&uts) == 0)
        host = uts.nodename;
    copy_bounded(ioassess_config.hostname, sizeof ioassess_config.hostname, host);
    configure_excludes();
    const char *pagecache = getenv("IOASSESS_PAGECACHE");
    ioassess_pagecache_configure(pagecache && strcmp(pagecache, "0") == 0);
    return 0;
}

/* Whether this thread's fork took the lock: per thread, since a fork from a signal handler
 * inside the recorder (busy) takes nothing while another thread's fork may hold the lock. */
static __thread int fork_locked;

static void before_fork(void)
{
    if (ioassess_state_now() != IOASSESS_STATE_ACTIVE || ioassess_self.busy)
        return;                          /* busy: fork from a handler inside the recorder */
    ioassess_enter(&ioassess_self);
    pthread_mutex_lock(&ioassess_lock);
    fork_locked = 1;
}

static void after_fork_in_parent(void)
{
    if (!fork_locked)
        return;
    fork_locked = 0;
    ioassess_fd_fork_parent();
    pthread_mutex_unlock(&ioassess_lock);
    ioassess_leave(&ioassess_self);
}

static void after_fork_in_child(void)
{
    if (ioassess_state_now() != IOASSESS_STATE_ACTIVE)
        return;
    if (!fork_locked) {                  /* state may be half-updated: stay out of the way */
        __atomic_store_n(&ioassess_state, IOASSESS_STATE_DISABLED, __ATOMIC_RELEASE);
        return;
    }
    fork_locked = 0;
    pthread_mutex_init(&ioassess_lock, NULL);
    ioassess_writer_after_fork();
    ioassess_fd_fork_child();
    ioassess_meta_fork_child();
    ioassess_mounts_fork_child();
    ioassess_aio_fork_child();
    if (ioassess_writer_start() != 0)
        __atomic_store_n(&ioassess_state, IOASSESS_STATE_DISABLED, __ATOMIC_RELEASE);
    ioassess_leave(&ioassess_self);
}

void ioassess_init(void)
{
    int expected = IOASSESS_STATE_UNINITIALISED;
    if (!__atomic_compare_exchange_n(&ioassess_state, &expected, IOASSESS_STATE_INITIALISING, 0,
                                     __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
        return;
    int saved_errno = errno;
    int ok = configure() == 0 && ioassess_writer_start() == 0 &&
             pthread_atfork(before_fork, after_fork_in_parent, after_fork_in_child) == 0;
    __atomic_store_n(&ioassess_state, ok ? IOASSESS_STATE_ACTIVE : IOASSESS_STATE_DISABLED,
                     __ATOMIC_RELEASE);
    errno = saved_errno;
}

__attribute__((constructor)) static void at_load(void)
{
    ioassess_posix_resolve();
    ioassess_init();
}

__attribute__((destructor)) static void at_unload(void)
{
    if (ioassess_state_now() == IOASSESS_STATE_ACTIVE)
        ioassess_writer_end(IOASSESS_END_EXIT);
}

/* ---- process life cycle calls ---- */

#define REAL(name) real_##name

static void (*real_exit)(int);
static void (*real__exit)(int);
static void (*real__Exit)(int);
static int (*real_execve)(const char *, char *const[], char *const[]);
static int (*real_execv)(const char *, char *const[]);
static int (*real_execvp)(const char *, char *const[]);
static int (*real_execvpe)(const char *, char *const[], char *const[]);
static int (*real_fexecve)(int, char *const[], char *const[]);
static pid_t (*real_fork)(void);

static void exec_starting(void)
{
    if (ioassess_state_now() == IOASSESS_STATE_ACTIVE)
        ioassess_writer_end(IOASSESS_END_EXEC);
    ioassess_sigbus_before_exec();
}

/* The exec failed and returned: this image goes on recording. */
static int exec_failed(int result)
{
    int saved_errno = errno;
    ioassess_sigbus_after_failed_exec();
    if (ioassess_state_now() == IOASSESS_STATE_ACTIVE)
        ioassess_writer_cancel_end();
    errno = saved_errno;
    return result;
}

static void ending(int status, int finished)
{
    if (ioassess_state_now() != IOASSESS_STATE_ACTIVE)
        return;
    ioassess_writer_exit_status(status);
    if (finished)
        ioassess_writer_end(IOASSESS_END_EXIT);
}

IOASSESS_EXPORT void exit(int status)
{
    RESOLVE(exit);
    ending(status, 0);                   /* atexit handlers may still do I/O */
    REAL(exit)(status);
    __builtin_unreachable();
}

IOASSESS_EXPORT void _exit(int status)
{
    RESOLVE(_exit);
    ending(status, 1);
    REAL(_exit)(status);
    __builtin_unreachable();
}

IOASSESS_EXPORT void _Exit(int status)
{
    RESOLVE(_Exit);
    ending(status, 1);
    REAL(_Exit)(status);
    __builtin_unreachable();
}

IOASSESS_EXPORT int execve(const char *path, char *const argv[], char *const envp[])
{
    RESOLVE(execve);
    exec_starting();
    return exec_failed(REAL(execve)(path, argv, envp));
}

IOASSESS_EXPORT int execv(const char *path, char *const argv[])
{
    RESOLVE(execv);
    exec_starting();
    return exec_failed(REAL(execv)(path, argv));
}

IOASSESS_EXPORT int execvp(const char *file, char *const argv[])
{
    RESOLVE(execvp);
    exec_starting();
    return exec_failed(REAL(execvp)(file, argv));
}

IOASSESS_EXPORT int execvpe(const char *file, char *const argv[], char *const envp[])
{
    RESOLVE(execvpe);
    exec_starting();
    return exec_failed(REAL(execvpe)(file, argv, envp));
}

IOASSESS_EXPORT int fexecve(int fd, char *const argv[], char *const envp[])
{
    RESOLVE(fexecve);
    exec_starting();
    return exec_failed(REAL(fexecve)(fd, argv, envp));
}

/* main's return value is the exit status of most programs, which never call exit()
 * themselves: wrap main to record it. */
typedef int (*main_function)(int, char **, char **);
static int (*real___libc_start_main)(main_function, int, char **, void (*)(void), void (*)(void),
                                     void (*)(void), void *);
static main_function application_main;

static int main_with_status(int argc, char **argv, char **envp)
{
    int status = application_main(argc, argv, envp);
    ending(status, 0);
    return status;
}

IOASSESS_EXPORT int __libc_start_main(main_function main, int argc, char **argv,
                                      void (*init)(void), void (*fini)(void),
                                      void (*rtld_fini)(void), void *stack_end)
{
    RESOLVE(__libc_start_main);
    application_main = main;
    return REAL(__libc_start_main)(main_with_status, argc, argv, init, fini, rtld_fini,
                                   stack_end);
}

/* execl, execlp, execle: collect the variadic arguments, then as execv/execvp/execve. */
static int count_args(va_list args)
{
    int count = 1;
    while (va_arg(args, char *))
        count++;
    return count;
}

#define COLLECT_ARGS(first, last, argv)                                        \
    va_list args_;                                                             \
    va_start(args_, last);                                                     \
    va_list counting_;                                                         \
    va_copy(counting_, args_);                                                 \
    int argc_ = count_args(counting_);                                         \
    va_end(counting_);                                                         \
    char *argv[argc_ + 1];                                                     \
    argv[0] = (char *)(first);                                                 \
    for (int i_ = 1; i_ <= argc_; i_++)                                        \
        argv[i_] = va_arg(args_, char *)

IOASSESS_EXPORT int execl(const char *path, const char *arg, ...)
{
    COLLECT_ARGS(arg, arg, argv);
    va_end(args_);
    return execv(path, argv);
}

IOASSESS_EXPORT int execlp(const char *file, const char *arg, ...)
{
    COLLECT_ARGS(arg, arg, argv);
    va_end(args_);
    return execvp(file, argv);
}

IOASSESS_EXPORT int execle(const char *path, const char *arg, ...)
{
    COLLECT_ARGS(arg, arg, argv);
    char *const *envp = va_arg(args_, char *const *);
    va_end(args_);
    return execve(path, argv, envp);
}

/* vfork's child shares its parent's memory until it execs, so the recorder's state would be
 * changed under the parent's feet; fork gives every POSIX-conforming caller the same result. */
IOASSESS_EXPORT pid_t vfork(void)
{
    RESOLVE(fork);
    return REAL(fork)();
}
