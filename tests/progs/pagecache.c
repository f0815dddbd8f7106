/* pagecache MODE FILE SIZE COUNT STRIDE
 * I/O whose page-cache state the test sets up and checks (tests/test_pagecache.py):
 *   read       COUNT preads of SIZE bytes of FILE at offsets 0, STRIDE, 2 x STRIDE, ...
 *   readv      the same with preadv (one iovec)
 *   read-fresh the preads of read, each even one into a new anonymous mapping no one has
 *              touched (fresh memory: the call faults it in), each odd one into the previous one's
 *   read-zero  the same, each new mapping read (never written) first: its pages map the zero
 *              page, in memory to mincore, and the call still faults them (copy-on-write)
 *   append     creates FILE (truncated) and writes COUNT x SIZE bytes with write()
 *   overwrite  COUNT pwrites of SIZE bytes into FILE at offsets 0, STRIDE, ...
 *   errno      (SIZE, COUNT, STRIDE ignored) a read of FILE opened write-only, which fails
 *              with EBADF, and a pread and a write of FILE that succeed with errno set before
 *              them to 4242: prints each call's result and the errno it left.
 * Prints "done BYTES" (bytes moved) at the end. Every call is on a fresh descriptor of FILE, so
 * the recorder samples the first ones. Exit status 1 if a call fails (errno mode aside). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <unistd.h>

static void errno_calls(const char *path)
{
    char buf[16] = "0123456789abcdef";
    int fd = open(path, O_WRONLY);
    errno = 0;
    ssize_t n = read(fd, buf, sizeof buf);
    printf("read_wronly %zd errno %d\n", n, errno);
    close(fd);
    fd = open(path, O_RDWR);
    errno = 4242;
    n = pread(fd, buf, sizeof buf, 0);
    printf("pread_ok %zd errno %d\n", n, errno);
    errno = 4242;
    n = write(fd, buf, sizeof buf);
    printf("write_ok %zd errno %d\n", n, errno);
    close(fd);
}

int main(int argc, char **argv)
{
    if (argc != 6) {
        fprintf(stderr, "usage: pagecache read|readv|read-fresh|read-zero|append|overwrite|errno FILE SIZE COUNT STRIDE\n");
        return 2;
    }
    const char *mode = argv[1], *path = argv[2];
    size_t size = strtoul(argv[3], NULL, 10);
    long count = atol(argv[4]);
    off_t stride = atoll(argv[5]);
    if (strcmp(mode, "errno") == 0) {
        errno_calls(path);
        return 0;
    }
    char *buf = calloc(1, size ? size : 1);
    int appending = strcmp(mode, "append") == 0;
    int writing = appending || strcmp(mode, "overwrite") == 0;
    int zero = strcmp(mode, "read-zero") == 0;
    int fresh = zero || strcmp(mode, "read-fresh") == 0;
    int fd = open(path, appending ? O_WRONLY | O_CREAT | O_TRUNC : writing ? O_WRONLY : O_RDONLY, 0644);
    if (!buf || fd < 0) {
        perror(path);
        return 1;
    }
    long long moved = 0;
    for (long i = 0; i < count; i++) {
        if (fresh && i % 2 == 0) {
            buf = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
            if (buf == MAP_FAILED) {
                perror("mmap");
                return 1;
            }
            volatile char sum = 0;
            for (size_t at = 0; zero && at < size; at += 4096)
                sum += buf[at];
        }
        struct iovec iov = {buf, size};
        ssize_t n = appending ? write(fd, buf, size)
                    : writing ? pwrite(fd, buf, size, i * stride)
                    : strcmp(mode, "readv") == 0 ? preadv(fd, &iov, 1, i * stride)
                    : pread(fd, buf, size, i * stride);
        if (n < 0) {
            perror(mode);
            return 1;
        }
        moved += n;
    }
    close(fd);
    printf("done %lld\n", moved);
    return 0;
}
