/* killself [FILE]
 * Reads one byte of FILE if given (one recorded op), then sends itself SIGKILL: a process that
 * runs for microseconds and is killed, leaving a trace without an end and with at most the
 * clock readings of its start and of its first op. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    if (argc > 1) {
        char byte;
        int fd = open(argv[1], O_RDONLY);
        if (fd < 0 || pread(fd, &byte, 1, 0) < 0)
            return 1;
    }
    kill(getpid(), SIGKILL);
    return 1;
}
