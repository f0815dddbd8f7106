/* tally COUNTER_FILE PROG ARGS...
 * Appends "pid ppid\n" to COUNTER_FILE (O_APPEND, one write) and execs PROG (PATH search),
 * so a test knows exactly which processes a shell started and who their parent was. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    if (argc < 3) { fprintf(stderr, "usage: %s COUNTER_FILE PROG ARGS...\n", argv[0]); return 2; }
    int fd = open(argv[1], O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd < 0) { perror(argv[1]); return 127; }
    char line[64];
    int n = snprintf(line, sizeof line, "%d %d\n", (int)getpid(), (int)getppid());
    if (write(fd, line, (size_t)n) != n) { perror("write"); return 127; }
    close(fd);
    execvp(argv[2], argv + 2);
    perror(argv[2]);
    return 127;
}
