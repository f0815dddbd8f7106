/* offsets DIR
 * Calls that move a descriptor's file offset without going through read/write/lseek, each
 * followed by a read or write whose true offset the program knows; prints, per recorded
 * call, "OP kind=K path=P off=TRUE req=N res=R". The recorder must record either the true
 * offset or -1 (unknown), never a wrong one. Cases:
 *   copy_file_range and sendfile and splice with NULL offsets (advance the input's offset),
 *   a fork child reading the shared file description, preadv2/pwritev2 at offset -1. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sendfile.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

static char buf[65536];

static const char *current_case = "";

static void op(const char *kind, const char *path, long long off, size_t req, long long res)
{
    printf("OP case=%s kind=%s path=%s off=%lld req=%zu res=%lld\n", current_case, kind, path, off, req,
           res);
}

/* Each case starts from positions the recorder knows (lseek is interposed), so that one
 * case's error does not carry into the next. */
static void start_case(const char *name, int fi, int fo)
{
    current_case = name;
    lseek(fi, 1000, SEEK_SET);
    lseek(fo, 2000, SEEK_SET);
}

/* The true offset, asked of the kernel directly: an lseek() call would tell the recorder. */
static long long pos(int fd)
{
    return (long long)syscall(SYS_lseek, fd, 0, SEEK_CUR);
}

int main(int argc, char **argv)
{
    if (argc != 2 || argv[1][0] != '/') { fprintf(stderr, "usage: %s ABSOLUTE_DIR\n", argv[0]); return 2; }
    char in[4096], out[4096];
    snprintf(in, sizeof in, "%s/in", argv[1]);
    snprintf(out, sizeof out, "%s/out", argv[1]);
    memset(buf, 'o', sizeof buf);
    int w = open(in, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (w < 0 || write(w, buf, sizeof buf) != (ssize_t)sizeof buf) { perror(in); return 1; }
    close(w);
    setvbuf(stdout, NULL, _IONBF, 0);

    int fi = open(in, O_RDONLY), fo = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fi < 0 || fo < 0) { perror("open"); return 1; }
    /* copy_file_range with NULL offsets advances both descriptors */
    start_case("copy_file_range", fi, fo);
    if (copy_file_range(fi, NULL, fo, NULL, 100, 0) != 100) { perror("copy_file_range"); return 1; }
    long long p = pos(fi);
    op("read", in, p, 10, read(fi, buf, 10));
    p = pos(fo);
    op("write", out, p, 5, write(fo, buf, 5));
    /* sendfile with a NULL offset advances the input descriptor */
    start_case("sendfile", fi, fo);
    if (sendfile(fo, fi, NULL, 50) != 50) { perror("sendfile"); return 1; }
    p = pos(fi);
    op("read", in, p, 7, read(fi, buf, 7));
    p = pos(fo);
    op("write", out, p, 3, write(fo, buf, 3));
    /* splice from the file into a pipe with a NULL offset */
    start_case("splice", fi, fo);
    int pp[2];
    if (pipe(pp) != 0 || splice(fi, NULL, pp[1], NULL, 30, 0) != 30) { perror("splice"); return 1; }
    close(pp[0]);
    close(pp[1]);
    p = pos(fi);
    op("read", in, p, 9, read(fi, buf, 9));
    /* preadv2 / pwritev2 at offset -1 use and advance the current offset */
    start_case("v2_at_minus_1", fi, fo);
    struct iovec iv = {buf, 11};
    p = pos(fi);
    op("preadv2", in, p, 11, preadv2(fi, &iv, 1, -1, 0));
    p = pos(fi);
    op("read", in, p, 4, read(fi, buf, 4));
    p = pos(fo);
    op("pwritev2", out, p, 11, pwritev2(fo, &iv, 1, -1, 0));
    /* a fork child reads through the shared file description */
    start_case("fork_shared", fi, fo);
    p = pos(fi);
    op("read", in, p, 10, read(fi, buf, 10));
    pid_t child = fork();
    if (child == 0) {
        long long cp = pos(fi);
        op("read", in, cp, 20, read(fi, buf, 20));
        _exit(0);
    }
    waitpid(child, NULL, 0);
    p = pos(fi);
    op("read", in, p, 5, read(fi, buf, 5));
    close(fi);
    close(fo);
    return 0;
}
