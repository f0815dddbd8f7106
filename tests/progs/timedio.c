/* timedio FILE SECONDS
 * I/O for SECONDS of wall time (CLOCK_MONOTONIC), however fast the machine: passes over FILE,
 * each writing 1 MiB (4 KiB, 64 KiB and 256 KiB writes), an fsync, then reading it back (4 KiB
 * and 64 KiB reads), until SECONDS have passed since the start; the last pass is whole. Prints
 * "passes=N elapsed=S". */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define FILE_BYTES (1 << 20)

static char buf[256 << 10];

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* FILE_BYTES in blocks of `block` bytes from the descriptor's current offset. */
static int pass_over(int fd, size_t block, int writing)
{
    for (size_t done = 0; done < FILE_BYTES; done += block) {
        ssize_t n = writing ? write(fd, buf, block) : read(fd, buf, block);
        if (n != (ssize_t)block) {
            perror(writing ? "write" : "read");
            return -1;
        }
    }
    return 0;
}

int main(int argc, char **argv)
{
    if (argc != 3) { fprintf(stderr, "usage: %s FILE SECONDS\n", argv[0]); return 2; }
    double seconds = atof(argv[2]), start = now(), elapsed = 0;
    memset(buf, 'x', sizeof buf);
    int fd = open(argv[1], O_RDWR | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) { perror(argv[1]); return 1; }
    static const size_t write_blocks[] = {4 << 10, 64 << 10, 256 << 10}, read_blocks[] = {4 << 10, 64 << 10};
    long passes = 0;
    while (elapsed < seconds) {
        if (lseek(fd, 0, SEEK_SET) != 0 ||
            pass_over(fd, write_blocks[passes % 3], 1) != 0 || fsync(fd) != 0 ||
            lseek(fd, 0, SEEK_SET) != 0 || pass_over(fd, read_blocks[passes % 2], 0) != 0)
            return 1;
        passes++;
        elapsed = now() - start;
    }
    if (close(fd) != 0) { perror("close"); return 1; }
    printf("passes=%ld elapsed=%.6f\n", passes, elapsed);
    return 0;
}
