/* errnos DIR
 * Makes calls that fail and prints, one per line, the call, its return value and the errno it
 * saw, then a successful read. The output must be identical with and without the recorder.
 * Uses DIR/errnos.dat (created). Lines:
 *   read_wronly, write_rdonly, pread_negative, read_efault: on DIR/errnos.dat (recorded)
 *   read_closed, pread_pipe, fsync_closed: on a closed fd and a pipe (not recorded)
 *   read_ok: a successful read of the file's 12 bytes.
 * errnos DIR badiov
 *   vector calls with an invalid iovec array on descriptors opened the wrong way: the kernel
 *   fails them with EBADF before it looks at the array, so the recorder must not look at it
 *   either.
 * errnos DIR kept CALLS
 *   CALLS successful writes, then as many preads, each with errno set to a different value
 *   just before: prints how many calls changed errno (the recorder's rare paths after a call,
 *   a new extent, the summary table past the record cap, a clock pair, a page-cache sample,
 *   must keep it as the call left it). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

static const char *ename(int e)
{
    switch (e) {
    case 0: return "OK";
    case EBADF: return "EBADF";
    case EINVAL: return "EINVAL";
    case EFAULT: return "EFAULT";
    case ESPIPE: return "ESPIPE";
    case EISDIR: return "EISDIR";
    default: return "OTHER";
    }
}

static void report(const char *what, long ret, int err)
{
    printf("%s ret=%ld errno=%s(%d)\n", what, ret, ret < 0 ? ename(err) : "OK", ret < 0 ? err : 0);
}

static int errno_kept(const char *dir, long calls)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/kept.dat", dir);
    int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) { perror(path); return 1; }
    long changed = 0;
    char byte = 'x';
    for (long i = 0; i < 2 * calls; i++) {
        int sentinel = 1000 + (int)(i % 50000);
        errno = sentinel;
        long r = i < calls ? write(fd, &byte, 1) : pread(fd, &byte, 1, i - calls);
        if (r != 1) { perror("kept"); return 1; }
        changed += errno != sentinel;
    }
    printf("calls=%ld errno_changed=%ld\n", 2 * calls, changed);
    close(fd);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc == 4 && strcmp(argv[2], "kept") == 0)
        return errno_kept(argv[1], atol(argv[3]));
    if (argc != 2 && !(argc == 3 && strcmp(argv[2], "badiov") == 0)) {
        fprintf(stderr, "usage: %s DIR [badiov | kept CALLS]\n", argv[0]);
        return 2;
    }
    char path[4096];
    snprintf(path, sizeof path, "%s/errnos.dat", argv[1]);
    char buf[64];
    long r;
    if (argc == 3) {
        setvbuf(stdout, NULL, _IONBF, 0);
        struct iovec *volatile bad_iov = (struct iovec *)1;
        int wfd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        int rfd = open(path, O_RDONLY);
        if (wfd < 0 || rfd < 0) { perror(path); return 1; }
        errno = 0; r = readv(wfd, bad_iov, 1); report("readv_wronly_badiov", r, errno);
        errno = 0; r = preadv(wfd, bad_iov, 1, 0); report("preadv_wronly_badiov", r, errno);
        errno = 0; r = writev(rfd, bad_iov, 1); report("writev_rdonly_badiov", r, errno);
        errno = 0; r = pwritev2(rfd, bad_iov, 1, 0, 0); report("pwritev2_rdonly_badiov", r, errno);
        return 0;
    }

    int wfd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (wfd < 0) { perror(path); return 1; }
    errno = 0; r = write(wfd, "hello world\n", 12); report("write_ok", r, errno);
    errno = 0; r = read(wfd, buf, sizeof buf); report("read_wronly", r, errno);

    int rfd = open(path, O_RDONLY);
    if (rfd < 0) { perror(path); return 1; }
    errno = 0; r = write(rfd, "x", 1); report("write_rdonly", r, errno);
    errno = 0; r = pread(rfd, buf, 10, -1); report("pread_negative", r, errno);
    void *volatile bad_address = (void *)1;
    errno = 0; r = read(rfd, bad_address, 10); report("read_efault", r, errno);

    int cfd = open(path, O_RDONLY);
    close(cfd);
    errno = 0; r = read(cfd, buf, 10); report("read_closed", r, errno);
    errno = 0; r = fsync(cfd); report("fsync_closed", r, errno);

    int p[2];
    if (pipe(p) != 0) { perror("pipe"); return 1; }
    errno = 0; r = pread(p[0], buf, 10, 0); report("pread_pipe", r, errno);
    close(p[0]);
    close(p[1]);

    errno = 0; r = read(rfd, buf, sizeof buf); report("read_ok", r, errno);
    if (r > 0) printf("data=%.*s", (int)r, buf);
    /* errno must be preserved across a successful call too */
    errno = 12345;
    r = read(rfd, buf, sizeof buf);
    printf("read_eof ret=%ld errno_kept=%d\n", r, errno == 12345);
    close(wfd);
    close(rfd);
    return 0;
}
