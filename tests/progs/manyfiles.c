/* manyfiles DIR N [badfd]
 * Creates N files DIR/f<i> and writes one block of 1 + (i*37 % 5000) bytes to each with pwrite
 * at offset 0 (N distinct files: more keys than the recorder's summary table takes). Prints
 * the number of files and bytes written. With "badfd", first makes one read of 7 bytes on a
 * descriptor that is not open (fails with EBADF). */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    if (argc != 3 && argc != 4) { fprintf(stderr, "usage: %s DIR N [badfd]\n", argv[0]); return 2; }
    long n = atol(argv[2]);
    static char buf[5000];
    if (argc == 4 && read(1000, buf, 7) != -1) { fprintf(stderr, "descriptor 1000 is open\n"); return 1; }
    memset(buf, 'm', sizeof buf);
    long long bytes = 0;
    for (long i = 0; i < n; i++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/f%ld", argv[1], i);
        int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd < 0) { perror(path); return 1; }
        size_t size = 1 + (size_t)(i * 37 % 5000);
        if (pwrite(fd, buf, size, 0) != (ssize_t)size) { perror("pwrite"); return 1; }
        bytes += (long long)size;
        close(fd);
    }
    printf("files %ld bytes %lld\n", n, bytes);
    return 0;
}
