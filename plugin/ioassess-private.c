/*
 * The recorder's own work with file descriptors (creating the trace, growing and mapping it,
 * reading the files start-up needs) runs in a helper process with a private descriptor table, never in
 * the application's. An application thread can replace the file under any descriptor number
 * at any moment (dup2, also as a raw system call no wrapper sees), so a descriptor the
 * recorder opened in the shared table could name another file by the time it is written or
 * mapped, and closing it could close the application's descriptor.
 *
 * The helper is started with clone(CLONE_VM | CLONE_VFORK) without CLONE_FILES:
 *   - it gets a copy of the descriptor table: what it opens no other thread can touch;
 *   - it shares the address space: what it maps and stores stays after it exits;
 *   - the caller is suspended until it exits, then reaps it (waitid with __WCLONE);
 *   - its exit signal is 0: no SIGCHLD, and the application's wait()/waitpid() never see it
 *     (only a wait with __WALL or __WCLONE could reap it first, which does no harm here);
 *   - every signal is blocked around the clone (the helper inherits the mask), so no
 *     application handler runs in the helper, and errno and the mask are restored after.
 * The helper shares the caller's thread-local storage: its work makes raw system calls only.
 * It is started with glibc's __clone (the same function as clone) so that a tool that
 * interposes clone as if it were fork never runs its fork bookkeeping in the helper: it would
 * do so on the caller's own state, shared. ThreadSanitizer does: its child-side "forked a
 * multi-threaded process" step left the calling thread ignoring every lock for good, and it
 * then reported the accesses made under ioassess_lock as races. Through __clone the helper's
 * work is, to such a tool, the caller's own, which it is: the caller is suspended meanwhile.
 * Its stack is static, so calls must not overlap: they are made at start-up (before the
 * recorder is active, or in a fork child, single-threaded) or under ioassess_lock.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/wait.h>

#include "ioassess-internal.h"

#define KERNEL_SIGSET_BYTES (_NSIG / 8)

/* glibc exports it beside clone (GLIBC_2.2.5) without declaring it. */
extern int __clone(int (*fn)(void *), void *stack, int flags, void *arg, ...);

static char helper_stack[32 * 1024] __attribute__((aligned(64)));

struct private_call {
    long (*work)(void *);
    void *arg;
    long result;
};

static int run_work(void *call_)
{
    struct private_call *call = call_;
    call->result = call->work(call->arg);
    return 0;
}

long ioassess_private_fds(long (*work)(void *), void *arg)
{
    struct private_call call = {work, arg, -1};
    int saved_errno = errno;
    sigset_t all, saved;
    sigfillset(&all);
    syscall(SYS_rt_sigprocmask, SIG_SETMASK, &all, &saved, KERNEL_SIGSET_BYTES);
    int pid = __clone(run_work, helper_stack + sizeof helper_stack, CLONE_VM | CLONE_VFORK, &call);
    if (pid > 0) {
        siginfo_t info;
        while (syscall(SYS_waitid, P_PID, pid, &info, WEXITED | __WCLONE, NULL) != 0 &&
               errno == EINTR)
            ;
    }
    syscall(SYS_rt_sigprocmask, SIG_SETMASK, &saved, NULL, KERNEL_SIGSET_BYTES);
    errno = saved_errno;
    return pid > 0 ? call.result : -1;
}

long ioassess_read_in_helper(const char *path, char *buf, size_t buf_bytes)
{
    int fd = (int)ioassess_sys_open(path, O_RDONLY | O_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    long n = syscall(SYS_read, fd, buf, buf_bytes);
    ioassess_sys_close(fd);
    return n;
}
