/* sigcount
 * Counts the SIGTERM, SIGHUP and SIGINT it gets. Prints "ready" once its handlers are in place,
 * then the name of each signal as it arrives (written by the handler); at the end of stdin
 * prints "count N" (all signals received) and exits 0. A test signals it, reads the first name,
 * closes its stdin and checks that no second copy arrived. */
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static volatile sig_atomic_t received;

static void on_signal(int sig)
{
    const char *name = sig == SIGTERM ? "SIGTERM\n" : sig == SIGHUP ? "SIGHUP\n" : "SIGINT\n";
    received++;
    if (write(STDOUT_FILENO, name, strlen(name)) < 0)
        _exit(1);
}

int main(void)
{
    struct sigaction sa = {.sa_handler = on_signal, .sa_flags = SA_RESTART};
    const int counted[] = {SIGTERM, SIGHUP, SIGINT};
    for (size_t i = 0; i < sizeof counted / sizeof counted[0]; i++)
        sigaction(counted[i], &sa, NULL);
    setvbuf(stdout, NULL, _IONBF, 0);
    printf("ready\n");
    char buf[64];
    while (read(STDIN_FILENO, buf, sizeof buf) > 0)
        ;
    printf("count %d\n", (int)received);
    return 0;
}
