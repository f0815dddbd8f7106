/* Part of allops, compiled with -D_FORTIFY_SOURCE=2: the reads here go through __read_chk and
 * __pread_chk (the length is not a compile-time constant and the buffer size is known). */
#define _GNU_SOURCE
#include <stdio.h>
#include <unistd.h>

void chk_ops(int fd, const char *path);

void chk_ops(int fd, const char *path)
{
    static char buf[256];
    volatile size_t n = 40, m = 30;
    ssize_t r = read(fd, buf, n);
    printf("OP kind=read path=%s off=0 req=%zu res=%zd buf=%p\n", path, (size_t)n, r, (void *)buf);
    r = pread(fd, buf + 1, m, 100);
    printf("OP kind=pread path=%s off=100 req=%zu res=%zd buf=%p\n", path, (size_t)m, r,
           (void *)(buf + 1));
    close(fd);
}
