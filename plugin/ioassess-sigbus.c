/*
 * SIGBUS from the trace's mapping never reaches the application; every other SIGBUS does, as
 * without the recorder. A store into a MAP_SHARED mapping faults with SIGBUS when the page is
 * past the end of the file (someone truncated the trace) or the file system cannot keep it
 * (ioassess-storage.c says where that cannot happen). Once a trace is mapped, the recorder's
 * handler is the kernel's action for SIGBUS: a fault in the trace's mapping is handled there
 * (ioassess_writer_fault: memory replaces the mapping, the store is retried, recording stops);
 * any other SIGBUS gets the action the application set, which the recorder keeps: its sigaction
 * and signal calls for SIGBUS set and read that one, and the kernel's action takes its mask
 * and flags (an alternate stack, restarted calls), so its handler runs as it would have, on
 * the same frame; its default action (or ignoring a fault, which the kernel does not allow)
 * ends the process by SIGBUS.
 * Not covered: a thread that blocks SIGBUS gets the kernel's default action for a fault, also
 * one in the trace; a SIGBUS action set with the raw rt_sigaction system call, or with the
 * obsolete sigset(); an ignored SIGBUS is not ignored in a child started by posix_spawn.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <signal.h>

#include "ioassess-internal.h"

static int (*real_sigaction)(int, const struct sigaction *, struct sigaction *);
static int installed;                       /* the recorder's handler is the kernel's action */
static struct sigaction application;        /* the application's action for SIGBUS */
static pthread_mutex_t action_lock = PTHREAD_MUTEX_INITIALIZER;

static void on_sigbus(int sig, siginfo_t *info, void *context);

/* The wrappers that a sanitizer's runtime may call while it starts, before it can record a
 * function's entry (ThreadSanitizer installs its signal handlers from its constructor, through
 * whatever sigaction comes first): never instrumented. */
#define EARLY __attribute__((no_sanitize_thread))

/* The kernel's action: the recorder's handler, with the application's mask and the flags that
 * decide where and how a handler runs. Its other flags are the recorder's to follow. */
static void install_kernel_action(void)
{
    struct sigaction ours = {.sa_sigaction = on_sigbus, .sa_mask = application.sa_mask};
    ours.sa_flags = SA_SIGINFO | (application.sa_flags & (SA_ONSTACK | SA_RESTART | SA_NODEFER));
    real_sigaction(SIGBUS, &ours, NULL);
}

void ioassess_sigbus_install(void)
{
    RESOLVE(sigaction);
    if (installed || !real_sigaction || real_sigaction(SIGBUS, NULL, &application) != 0)
        return;
    install_kernel_action();
    __atomic_store_n(&installed, 1, __ATOMIC_RELEASE);
}

/* The default action of SIGBUS: the process ends by it. The action made the default, the
 * signal sent again to this thread; it arrives as the handler returns, before the faulting
 * instruction would run again. */
static void default_action(void)
{
    struct sigaction fallback = {.sa_handler = SIG_DFL};
    real_sigaction(SIGBUS, &fallback, NULL);
    syscall(SYS_tgkill, syscall(SYS_getpid), syscall(SYS_gettid), SIGBUS);
}

static void on_sigbus(int sig, siginfo_t *info, void *context)
{
    int saved_errno = errno;
    if (info->si_code > 0 && ioassess_writer_fault(info->si_addr)) {
        errno = saved_errno;
        return;                              /* the access is retried in memory */
    }
    errno = saved_errno;
    struct sigaction action = application;
    if (action.sa_handler == SIG_IGN && info->si_code <= 0)
        return;                              /* a SIGBUS sent to it, ignored */
    if (action.sa_handler == SIG_DFL || action.sa_handler == SIG_IGN) {
        default_action();                    /* a fault is never ignored */
        return;
    }
    if (action.sa_flags & SA_RESETHAND) {    /* the kernel would have reset it on delivery */
        application.sa_handler = SIG_DFL;
        application.sa_flags &= ~SA_SIGINFO;
        install_kernel_action();
    }
    if (action.sa_flags & SA_SIGINFO)
        action.sa_sigaction(sig, info, context);
    else
        action.sa_handler(sig);
}

/* The application's sigaction for SIGBUS: its action kept, the kernel's made to match. With
 * every signal blocked meanwhile: the handler reads the action. */
static int application_sigaction(const struct sigaction *act, struct sigaction *old)
{
    sigset_t all, saved;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &saved);
    pthread_mutex_lock(&action_lock);
    if (old)
        *old = application;
    if (act) {
        application = *act;
        install_kernel_action();
    }
    pthread_mutex_unlock(&action_lock);
    pthread_sigmask(SIG_SETMASK, &saved, NULL);
    return 0;
}

static inline __attribute__((always_inline)) int keeps(int sig)
{
    return sig == SIGBUS && __atomic_load_n(&installed, __ATOMIC_ACQUIRE);
}

IOASSESS_EXPORT EARLY int sigaction(int sig, const struct sigaction *act, struct sigaction *old)
{
    RESOLVE_OR_FAIL(sigaction, -1);
    return keeps(sig) ? application_sigaction(act, old) : real_sigaction(sig, act, old);
}

IOASSESS_EXPORT EARLY int __sigaction(int sig, const struct sigaction *act, struct sigaction *old)
{
    return sigaction(sig, act, old);
}

/* signal() and its other names install an action as glibc builds it. */
static sighandler_t set_handler(int sig, sighandler_t handler, int flags, int mask_itself)
{
    struct sigaction act = {.sa_handler = handler, .sa_flags = flags}, old;
    sigemptyset(&act.sa_mask);
    if (mask_itself)
        sigaddset(&act.sa_mask, sig);
    application_sigaction(&act, &old);
    return old.sa_handler;
}

static sighandler_t (*real_signal)(int, sighandler_t);
static sighandler_t (*real_sysv_signal)(int, sighandler_t);
static int (*real_sigignore)(int);

IOASSESS_EXPORT EARLY sighandler_t signal(int sig, sighandler_t handler)
{
    RESOLVE_OR_FAIL(signal, SIG_ERR);
    return keeps(sig) ? set_handler(sig, handler, SA_RESTART, 1) : real_signal(sig, handler);
}

IOASSESS_EXPORT EARLY sighandler_t bsd_signal(int sig, sighandler_t handler)
{
    return signal(sig, handler);
}

IOASSESS_EXPORT EARLY sighandler_t ssignal(int sig, sighandler_t handler)
{
    return signal(sig, handler);
}

IOASSESS_EXPORT EARLY sighandler_t sysv_signal(int sig, sighandler_t handler)
{
    RESOLVE_OR_FAIL(sysv_signal, SIG_ERR);
    return keeps(sig) ? set_handler(sig, handler, SA_RESETHAND | SA_NODEFER, 0)
                      : real_sysv_signal(sig, handler);
}

IOASSESS_EXPORT EARLY sighandler_t __sysv_signal(int sig, sighandler_t handler)
{
    return sysv_signal(sig, handler);
}

IOASSESS_EXPORT EARLY int sigignore(int sig)
{
    RESOLVE_OR_FAIL(sigignore, -1);
    if (!keeps(sig))
        return real_sigignore(sig);
    set_handler(sig, SIG_IGN, 0, 0);
    return 0;
}

/* exec keeps an ignored SIGBUS ignored, and resets a handled one: the application's must be
 * the kernel's while the new image starts. */
void ioassess_sigbus_before_exec(void)
{
    if (__atomic_load_n(&installed, __ATOMIC_ACQUIRE) && application.sa_handler == SIG_IGN)
        real_sigaction(SIGBUS, &application, NULL);
}

void ioassess_sigbus_after_failed_exec(void)
{
    if (__atomic_load_n(&installed, __ATOMIC_ACQUIRE) && application.sa_handler == SIG_IGN)
        install_kernel_action();
}
