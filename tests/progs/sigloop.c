/* sigloop DATA_FILE LOG_FILE MIN_SIGNALS
 * A busy loop of 4 KiB preads on DATA_FILE (at least 64 KiB long) while SIGALRM fires every
 * 200 us (setitimer); the handler write()s one byte to LOG_FILE. Stops once MIN_SIGNALS handler
 * writes happened, then prints the number of preads and handler writes. Exits 1 if any call
 * misbehaved, if errno was clobbered in the main loop or if LOG_FILE's size differs. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>

static int logfd;
static volatile sig_atomic_t handler_writes, handler_bad;

static void on_alarm(int sig)
{
    (void)sig;
    int saved = errno;
    if (write(logfd, "s", 1) == 1)
        handler_writes++;
    else
        handler_bad++;
    errno = saved;
}

int main(int argc, char **argv)
{
    if (argc != 4) { fprintf(stderr, "usage: %s DATA LOG MIN_SIGNALS\n", argv[0]); return 2; }
    long min_signals = atol(argv[3]);
    int fd = open(argv[1], O_RDONLY);
    if (fd < 0) { perror(argv[1]); return 1; }
    logfd = open(argv[2], O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (logfd < 0) { perror(argv[2]); return 1; }
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_alarm;
    sa.sa_flags = SA_RESTART;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGALRM, &sa, NULL);
    struct itimerval it = {{0, 200}, {0, 200}};
    setitimer(ITIMER_REAL, &it, NULL);
    static char buf[4096];
    long reads = 0, bad = 0;
    while (handler_writes < min_signals) {
        errno = 4242;
        ssize_t n = pread(fd, buf, sizeof buf, (off_t)(reads % 16) * 4096);
        reads++;
        if (n != (ssize_t)sizeof buf || errno != 4242) bad++;
    }
    struct itimerval off = {{0, 0}, {0, 0}};
    setitimer(ITIMER_REAL, &off, NULL);
    signal(SIGALRM, SIG_IGN);
    struct stat st;
    fstat(logfd, &st);
    long writes = handler_writes;
    printf("preads %ld handler_writes %ld bad %ld handler_bad %ld log_size_ok %d\n", reads, writes,
           bad, (long)handler_bad, (long)st.st_size == writes);
    return (bad || handler_bad || (long)st.st_size != writes) ? 1 : 0;
}
