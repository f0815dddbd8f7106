/* sigbus ACTION FILE
 * A program with SIGBUS of its own, for the recorder's SIGBUS handling (which must never let a
 * SIGBUS from its trace reach the program, and must let every other one reach it as without
 * the recorder). ACTION is how it sets SIGBUS: "sigaction" (a handler with SA_SIGINFO),
 * "signal" (a handler with signal()), "sysv" (with sysv_signal(): reset to the default when it
 * runs), "default" or "ignore". It prints, one per line:
 *   "action: own|default|ignore", as sigaction() reads it back;
 *   "ready" after 1000 pwrites of 64 bytes to FILE, then waits for a line on standard input
 *   (meanwhile a test may truncate its trace), then makes 1000 more and prints "wrote 2000";
 *   what its handler sees of a SIGBUS it sends itself with kill() ("caught SIGBUS sent", not
 *   for "default", which would end it);
 *   what its handler sees of a SIGBUS of its own mapping, FILE.map truncated to nothing
 *   ("caught SIGBUS at its mapping"; the handler jumps back), or it ends by it;
 *   "done".
 * Exits 0, or by SIGBUS. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static sigjmp_buf back;
static volatile char *mapping;

static void say(const char *text)
{
    if (write(STDOUT_FILENO, text, strlen(text)) < 0)
        _exit(3);
}

static void caught(int sig, siginfo_t *info, void *context)
{
    (void)context;
    if (sig != SIGBUS)
        say("caught another signal\n");
    else if (info->si_code == SI_USER)
        say("caught SIGBUS sent\n");
    else if (info->si_code == BUS_ADRERR && info->si_addr == (void *)mapping)
        say("caught SIGBUS at its mapping\n");
    else
        say("caught SIGBUS from elsewhere\n");
    if (sig == SIGBUS && info->si_code != SI_USER)
        siglongjmp(back, 1);
}

static void caught_plain(int sig)
{
    siginfo_t info = {.si_code = mapping ? BUS_ADRERR : SI_USER};
    info.si_addr = (void *)mapping;
    caught(sig, &info, NULL);
}

static int set_action(const char *action)
{
    struct sigaction act = {.sa_sigaction = caught, .sa_flags = SA_SIGINFO};
    sigemptyset(&act.sa_mask);
    if (strcmp(action, "sigaction") == 0)
        return sigaction(SIGBUS, &act, NULL);
    if (strcmp(action, "signal") == 0)
        return signal(SIGBUS, caught_plain) == SIG_ERR;
    if (strcmp(action, "sysv") == 0)
        return sysv_signal(SIGBUS, caught_plain) == SIG_ERR;
    if (strcmp(action, "ignore") == 0)
        return signal(SIGBUS, SIG_IGN) == SIG_ERR;
    return strcmp(action, "default") != 0;
}

static const char *action_now(void)
{
    struct sigaction now;
    sigaction(SIGBUS, NULL, &now);
    return now.sa_handler == SIG_DFL ? "default" : now.sa_handler == SIG_IGN ? "ignore" : "own";
}

static int writes(int fd, int from, int count)
{
    static char record[64] = "record";
    for (int i = from; i < from + count; i++)
        if (pwrite(fd, record, sizeof record, (off_t)i * 64) != sizeof record)
            return -1;
    return 0;
}

/* Its own SIGBUS: a store into its mapping of a file it truncated to nothing. */
static void fault_in_own_mapping(const char *path)
{
    char name[4096];
    snprintf(name, sizeof name, "%s.map", path);
    int fd = open(name, O_RDWR | O_CREAT | O_TRUNC, 0600);
    if (fd < 0 || ftruncate(fd, 4096) != 0)
        _exit(1);
    mapping = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (mapping == MAP_FAILED || ftruncate(fd, 0) != 0)
        _exit(1);
    if (sigsetjmp(back, 1) == 0)
        mapping[0] = 1;
    close(fd);
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    int fd = argc == 3 ? open(argv[2], O_RDWR | O_CREAT | O_TRUNC, 0600) : -1;
    if (fd < 0 || set_action(argv[1]) != 0)
        return 2;
    printf("action: %s\n", action_now());
    if (writes(fd, 0, 1000) != 0)
        return 1;
    printf("ready\n");
    char line[64];
    if (!fgets(line, sizeof line, stdin) || writes(fd, 1000, 1000) != 0)
        return 1;
    printf("wrote 2000\n");
    if (strcmp(argv[1], "default") != 0)
        kill(getpid(), SIGBUS);
    fault_in_own_mapping(argv[2]);
    printf("done\n");
    return 0;
}
