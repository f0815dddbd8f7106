/* allops DIR   (DIR must be an absolute path)
 * Calls every interposed entry point once or more on files in DIR with known arguments and
 * prints, per call, the record the recorder must write:
 *   OP kind=K path=P off=O req=N res=R buf=0xADDR [append]
 * (off=-1 where the offset is unknown: O_APPEND, also set with fcntl F_SETFL; buf is the first iovec's base for vectors),
 * one line per call on descriptors that must NOT be recorded (pipe, socket, FIFO, directory):
 *   NOREC what=W res=R
 * and one line per call on character devices (recorded only if /dev is not excluded):
 *   DEV kind=K path=P req=N res=R
 * plus "fd=N" lines with the descriptor numbers the program got. Exits 1 if a call did not
 * do what is expected. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

void chk_ops(int fd, const char *path); /* allops_chk.c: __read_chk, __pread_chk */

static char wbuf[8192];
static char rbuf[8192];
static int failures;

static void op(const char *kind, const char *path, long long off, size_t req, long long res,
               const void *buf, long long want, const char *extra)
{
    printf("OP kind=%s path=%s off=%lld req=%zu res=%lld buf=%p%s\n", kind, path, off, req, res,
           buf, extra);
    if (res != want) {
        fprintf(stderr, "allops: %s on %s returned %lld, wanted %lld (errno %d)\n", kind, path,
                res, want, errno);
        failures++;
    }
}

static void norec(const char *what, long long res, long long want)
{
    printf("NOREC what=%s res=%lld\n", what, res);
    if (res != want) {
        fprintf(stderr, "allops: %s returned %lld, wanted %lld (errno %d)\n", what, res, want,
                errno);
        failures++;
    }
}

static char *join(const char *dir, const char *name)
{
    char *p = malloc(strlen(dir) + strlen(name) + 2);
    sprintf(p, "%s/%s", dir, name);
    return p;
}

int main(int argc, char **argv)
{
    if (argc != 2 || argv[1][0] != '/') {
        fprintf(stderr, "usage: %s ABSOLUTE_DIR\n", argv[0]);
        return 2;
    }
    const char *dir = argv[1];
    for (size_t i = 0; i < sizeof wbuf; i++) wbuf[i] = (char)('a' + i % 26);
    setvbuf(stdout, NULL, _IOLBF, 0);

    /* --- the plain calls on one file --- */
    char *data = join(dir, "data");
    int fd = open(data, O_RDWR | O_CREAT | O_TRUNC, 0600);
    if (fd < 0) { perror(data); return 1; }
    printf("fd=%d\n", fd);
    op("write", data, 0, 100, write(fd, wbuf, 100), wbuf, 100, "");
    op("pwrite", data, 1000, 200, pwrite(fd, wbuf, 200, 1000), wbuf, 200, "");
    struct iovec wv[2] = {{wbuf, 50}, {wbuf + 100, 70}};
    op("writev", data, 100, 120, writev(fd, wv, 2), wbuf, 120, "");
    struct iovec wv2[2] = {{wbuf + 1, 10}, {wbuf + 2, 20}};
    op("pwritev", data, 5000, 30, pwritev(fd, wv2, 2, 5000), wbuf + 1, 30, "");
    op("pwritev2", data, 6000, 30, pwritev2(fd, wv2, 2, 6000, 0), wbuf + 1, 30, "");
    op("pwrite", data, 7000, 11, pwrite64(fd, wbuf + 3, 11, 7000), wbuf + 3, 11, "");
    lseek(fd, 0, SEEK_SET);
    op("read", data, 0, 64, read(fd, rbuf, 64), rbuf, 64, "");
    op("pread", data, 1000, 128, pread(fd, rbuf + 8, 128, 1000), rbuf + 8, 128, "");
    op("pread", data, 1100, 50, pread64(fd, rbuf + 9, 50, 1100), rbuf + 9, 50, "");
    struct iovec rv[2] = {{rbuf, 16}, {rbuf + 32, 16}};
    op("readv", data, 64, 32, readv(fd, rv, 2), rbuf, 32, "");
    struct iovec rv2[2] = {{rbuf + 200, 8}, {rbuf + 300, 8}};
    op("preadv", data, 5000, 16, preadv(fd, rv2, 2, 5000), rbuf + 200, 16, "");
    op("preadv2", data, 6000, 16, preadv2(fd, rv2, 2, 6000, 0), rbuf + 200, 16, "");
    op("pread", data, 1000000, 100, pread(fd, rbuf, 100, 1000000), rbuf, 0, "");
    lseek(fd, 10, SEEK_CUR); /* offset 96 + 10 */
    op("read", data, 106, 10, read(fd, rbuf, 10), rbuf, 10, "");
    lseek(fd, -4, SEEK_END); /* file size is 7011 */
    op("read", data, 7007, 100, read(fd, rbuf, 100), rbuf, 4, "");
    op("fsync", data, -2, 0, fsync(fd), NULL, 0, "");
    op("fdatasync", data, -2, 0, fdatasync(fd), NULL, 0, "");

    /* --- descriptors made by dup/dup2 share the file and its offset --- */
    int fd2 = dup(fd);
    op("pwrite", data, 9000, 7, pwrite(fd2, wbuf, 7, 9000), wbuf, 7, "");
    if (dup2(fd, 50) != 50) { perror("dup2"); return 1; }
    op("write", data, 7011, 5, write(50, wbuf, 5), wbuf, 5, "");
    close(fd2);
    close(50);
    close(fd);

    /* --- O_APPEND: offset unknown --- */
    char *app = join(dir, "append");
    int afd = open(app, O_WRONLY | O_CREAT | O_APPEND | O_TRUNC, 0600);
    op("write", app, -1, 10, write(afd, wbuf, 10), wbuf, 10, " append");
    op("write", app, -1, 10, write(afd, wbuf + 10, 10), wbuf + 10, 10, " append");
    close(afd);
    char *setfl = join(dir, "setfl");
    int sfd = open(setfl, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    op("write", setfl, 0, 5, write(sfd, wbuf, 5), wbuf, 5, "");
    fcntl(sfd, F_SETFL, O_APPEND); /* appending from now on: offset unknown */
    op("write", setfl, -1, 6, write(sfd, wbuf, 6), wbuf, 6, " append");
    fcntl(sfd, F_SETFL, 0);
    lseek(sfd, 1, SEEK_SET);
    op("write", setfl, 1, 2, write(sfd, wbuf, 2), wbuf, 2, "");
    close(sfd);

    /* --- openat relative to a directory fd, open relative to the cwd, creat --- */
    int dfd = open(dir, O_RDONLY | O_DIRECTORY);
    char *rel = join(dir, "sub_rel");
    int ofd = openat(dfd, "sub_rel", O_RDWR | O_CREAT | O_TRUNC, 0600);
    op("pwrite", rel, 0, 3, pwrite(ofd, wbuf, 3, 0), wbuf, 3, "");
    close(ofd);
    norec("read_directory", read(dfd, rbuf, 10), -1);
    if (chdir(dir) != 0) { perror("chdir"); return 1; }
    char *cwdrel = join(dir, "cwd_rel");
    int cfd = open("cwd_rel", O_RDWR | O_CREAT | O_TRUNC, 0600);
    op("write", cwdrel, 0, 4, write(cfd, wbuf, 4), wbuf, 4, "");
    close(cfd);
    char *cr = join(dir, "creat.dat");
    int crfd = creat(cr, 0600);
    op("write", cr, 0, 6, write(crfd, wbuf, 6), wbuf, 6, "");
    close(crfd);

    /* --- a descriptor the recorder did not see being opened (fopen uses libc internals) --- */
    FILE *f = fopen(data, "r");
    if (!f) { perror("fopen"); return 1; }
    op("pread", data, 2, 5, pread(fileno(f), rbuf, 5, 2), rbuf, 5, "");
    fclose(f);

    /* --- dup2 over a recorded descriptor: the number now names the other file --- */
    char *other = join(dir, "other");
    int xa = open(data, O_RDONLY);
    int xb = open(other, O_RDWR | O_CREAT | O_TRUNC, 0600);
    op("write", other, 0, 8, write(xb, wbuf, 8), wbuf, 8, "");
    if (dup2(xb, xa) != xa) { perror("dup2"); return 1; }
    op("write", other, 8, 9, write(xa, wbuf, 9), wbuf, 9, "");
    close(xa);
    close(xb);
    /* --- F_DUPFD shares the file and offset --- */
    int xc = open(other, O_RDONLY);
    int xd = fcntl(xc, F_DUPFD, 70);
    printf("fd=%d fd=%d\n", xc, xd);
    op("read", other, 0, 4, read(xd, rbuf, 4), rbuf, 4, "");
    op("read", other, 4, 4, read(xc, rbuf, 4), rbuf, 4, "");
    close(xc);
    close(xd);
    /* --- fclose of an fdopen'ed stream closes the descriptor; its number is reused --- */
    int xe = open(data, O_RDONLY);
    FILE *fe = fdopen(xe, "r");
    if (!fe) { perror("fdopen"); return 1; }
    fclose(fe);
    int xf = open(other, O_RDONLY);
    printf("fd=%d reused=%d\n", xf, xf == xe);
    op("pread", other, 1, 3, pread(xf, rbuf, 3, 1), rbuf, 3, "");
    close(xf);

    /* --- __read_chk and __pread_chk --- */
    chk_ops(open(data, O_RDONLY), data);

    /* --- not recorded: pipe, socket, FIFO --- */
    int p[2];
    if (pipe(p) != 0) { perror("pipe"); return 1; }
    norec("pipe_write", write(p[1], wbuf, 5), 5);
    norec("pipe_read", read(p[0], rbuf, 5), 5);
    close(p[0]);
    close(p[1]);
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0) { perror("socketpair"); return 1; }
    norec("socket_write", write(sv[0], wbuf, 6), 6);
    norec("socket_read", read(sv[1], rbuf, 6), 6);
    close(sv[0]);
    close(sv[1]);
    char *fifo = join(dir, "fifo");
    if (mkfifo(fifo, 0600) != 0) { perror("mkfifo"); return 1; }
    int ffd = open(fifo, O_RDWR);
    norec("fifo_write", write(ffd, wbuf, 7), 7);
    norec("fifo_read", read(ffd, rbuf, 7), 7);
    close(ffd);
    close(dfd);

    /* --- character devices (excluded by default through /dev) --- */
    int nfd = open("/dev/null", O_WRONLY);
    printf("DEV kind=write path=/dev/null req=8 res=%zd\n", write(nfd, wbuf, 8));
    close(nfd);
    int zfd = open("/dev/zero", O_RDONLY);
    printf("DEV kind=read path=/dev/zero req=9 res=%zd\n", read(zfd, rbuf, 9));
    close(zfd);

    printf("failures=%d\n", failures);
    return failures ? 1 : 0;
}
