/* edges MODE DIR
 * Programs at the edges of what a process may do, for the recorder's transparency tests:
 *   io        64 pwrites of 4 KiB to DIR/io, read back with pread; prints the bytes' sum.
 *   closeall  writes DIR/before, closes every descriptor from 3 up to the soft RLIMIT_NOFILE
 *             (at most 65536; one close() each, as programs that daemonise do), then writes DIR/after with 64
 *             pwrites of 4 KiB; prints how many of those closes succeeded.
 *   openmax   opens DIR/f<i> until open fails; prints how many opens worked and the errno's
 *             name, closes them all, then writes DIR/io as `io` does.
 *   tightas   lowers its own RLIMIT_AS to its present address-space size (so no new mapping
 *             can be made), then does what `io` does 16 times.
 * Exit status 0 when every call that should work did. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#define BLOCK 4096
#define BLOCKS 64

static int write_and_read_back(const char *dir, const char *name)
{
    char path[4096], block[BLOCK];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) {
        perror(path);
        return 1;
    }
    for (int i = 0; i < BLOCKS; i++) {
        memset(block, 'a' + i % 26, sizeof block);
        if (pwrite(fd, block, sizeof block, (off_t)i * BLOCK) != BLOCK)
            return 1;
    }
    unsigned long sum = 0;
    for (int i = 0; i < BLOCKS; i++) {
        if (pread(fd, block, sizeof block, (off_t)i * BLOCK) != BLOCK)
            return 1;
        for (int k = 0; k < BLOCK; k++)
            sum += (unsigned char)block[k];
    }
    printf("%s sum %lu\n", name, sum);
    return close(fd) != 0;
}

static int close_all(const char *dir)
{
    if (write_and_read_back(dir, "before"))
        return 1;
    struct rlimit limit;
    if (getrlimit(RLIMIT_NOFILE, &limit) != 0)
        return 1;
    rlim_t highest = limit.rlim_cur < 65536 ? limit.rlim_cur : 65536;
    long closed = 0;
    fflush(stdout);
    for (rlim_t fd = 3; fd < highest; fd++)
        closed += close((int)fd) == 0;
    printf("closed %ld\n", closed);
    return write_and_read_back(dir, "after");
}

static int open_max(const char *dir)
{
    static int fds[1 << 16];
    int n = 0;
    for (; n < (int)(sizeof fds / sizeof fds[0]); n++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/f%d", dir, n);
        fds[n] = open(path, O_RDONLY | O_CREAT, 0644);
        if (fds[n] < 0)
            break;
    }
    printf("opened %d then %s\n", n, strerrorname_np(errno));
    for (int i = 0; i < n; i++)
        close(fds[i]);
    return write_and_read_back(dir, "io");
}

static int tight_address_space(const char *dir)
{
    unsigned long pages = 0;
    FILE *statm = fopen("/proc/self/statm", "r");
    if (!statm || fscanf(statm, "%lu", &pages) != 1)
        return 1;
    fclose(statm);
    struct rlimit limit;
    limit.rlim_cur = limit.rlim_max = pages * (rlim_t)sysconf(_SC_PAGESIZE);
    if (setrlimit(RLIMIT_AS, &limit) != 0)
        return 1;
    for (int round = 0; round < 16; round++)
        if (write_and_read_back(dir, "io"))
            return 1;
    return 0;
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: %s io|closeall|openmax|tightas DIR\n", argv[0]);
        return 2;
    }
    if (strcmp(argv[1], "io") == 0)
        return write_and_read_back(argv[2], "io");
    if (strcmp(argv[1], "closeall") == 0)
        return close_all(argv[2]);
    if (strcmp(argv[1], "openmax") == 0)
        return open_max(argv[2]);
    if (strcmp(argv[1], "tightas") == 0)
        return tight_address_space(argv[2]);
    fprintf(stderr, "%s: unknown mode %s\n", argv[0], argv[1]);
    return 2;
}
