/* libaio_edges DIR
 * libaio (linked as fio links it, declared here: no libaio header is needed) and libc's syscall() as programs
 * use them, and as hostile ones misuse them, on DIR/edges.dat:
 *   - io_submit of a pwrite, a pwritev of 3 buffers, an fsync, a pread and a preadv (one at a
 *     time, each reaped by io_getevents), then of 4 preads at once reaped 2 and 2;
 *   - io_submit of NULL with nr 1 (EFAULT), with nr -1 (EINVAL), of an iocb on a descriptor that
 *     is not open (EBADF), of a huge nr; io_getevents with nothing in flight (timeout 0) (not on
 *     a context that is not one: libaio reads its ring first); io_cancel of an iocb never
 *     submitted; io_destroy;
 *   - syscall() with 0, 3 and 6 arguments (getpid's result is not printed), and a failing one.
 * Prints one line per call: its result and errno (set to 4321 before each); and per request
 * the recorder is to record:
 *   REQUEST KIND OFFSET BYTES RESULT
 * The output is the same with and without the recorder.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/aio_abi.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

typedef struct io_context *io_context_t;
int io_setup(int, io_context_t *);
int io_submit(io_context_t, long, struct iocb **);
int io_getevents(io_context_t, long, long, struct io_event *, struct timespec *);
int io_cancel(io_context_t, struct iocb *, struct io_event *);
int io_destroy(io_context_t);

static void say(const char *call, long result)
{
    printf("%s %ld %d\n", call, result, errno);
    errno = 4321;
}

static void prepare(struct iocb *cb, int fd, int opcode, void *buf, unsigned long nbytes, long long offset)
{
    memset(cb, 0, sizeof *cb);
    cb->aio_fildes = (unsigned)fd;
    cb->aio_lio_opcode = (unsigned short)opcode;
    cb->aio_buf = (unsigned long)buf;
    cb->aio_nbytes = nbytes;
    cb->aio_offset = offset;
}

/* Submits one request, reaps it and prints the request's line. */
static void one(io_context_t ctx, struct iocb *cb, const char *kind, long long offset, long bytes)
{
    struct iocb *list[1] = {cb};
    struct io_event event;
    say("io_submit", io_submit(ctx, 1, list));
    long reaped = io_getevents(ctx, 1, 1, &event, NULL);
    say("io_getevents", reaped);
    printf("REQUEST %s %lld %ld %lld\n", kind, offset, bytes, (long long)event.res);
}

int main(int argc, char **argv)
{
    if (argc != 2)
        return 2;
    char path[4096];
    snprintf(path, sizeof path, "%s/edges.dat", argv[1]);
    int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
    io_context_t ctx = 0;
    errno = 4321;
    say("io_setup", io_setup(16, &ctx));

    static char data[65536], back[65536];
    for (size_t i = 0; i < sizeof data; i++)
        data[i] = (char)('a' + i % 19);
    struct iocb cb, four[4];
    prepare(&cb, fd, IOCB_CMD_PWRITE, data, 20000, 0);
    one(ctx, &cb, "aio_write", 0, 20000);
    struct iovec iov[3] = {{data, 100}, {data + 100, 4000}, {data + 4100, 900}};
    prepare(&cb, fd, IOCB_CMD_PWRITEV, iov, 3, 30000);
    one(ctx, &cb, "aio_write", 30000, 5000);
    prepare(&cb, fd, IOCB_CMD_FSYNC, NULL, 0, 0);
    one(ctx, &cb, "aio_sync", -1, 0);
    prepare(&cb, fd, IOCB_CMD_PREAD, back, 8192, 16384);
    one(ctx, &cb, "aio_read", 16384, 8192);
    struct iovec into[2] = {{back, 1000}, {back + 1000, 3000}};
    prepare(&cb, fd, IOCB_CMD_PREADV, into, 2, 0);
    one(ctx, &cb, "aio_read", 0, 4000);

    struct iocb *list[4];
    for (int i = 0; i < 4; i++) {
        prepare(&four[i], fd, IOCB_CMD_PREAD, back + i * 4096, 4096, i * 4096);
        list[i] = &four[i];
    }
    say("io_submit_four", io_submit(ctx, 4, list));
    struct io_event events[4];
    long got = 0;
    while (got < 4) {
        long n = io_getevents(ctx, 1, 2, events + got, NULL);
        if (n <= 0)
            break;
        got += n;
    }
    say("io_getevents_four", got);
    for (int i = 0; i < 4; i++)
        printf("REQUEST aio_read %d 4096 4096\n", i * 4096);

    say("io_submit_null", io_submit(ctx, 1, NULL));
    say("io_submit_negative", io_submit(ctx, -1, list));
    prepare(&cb, 987, IOCB_CMD_PREAD, back, 4096, 0);
    list[0] = &cb;
    say("io_submit_bad_descriptor", io_submit(ctx, 1, list));
    list[0] = NULL;
    say("io_submit_huge", io_submit(ctx, 1L << 40, list) < 0);
    struct timespec none = {0, 0};
    say("io_getevents_nothing", io_getevents(ctx, 0, 4, events, &none));
    prepare(&cb, fd, IOCB_CMD_PREAD, back, 4096, 0);
    say("io_cancel_never_submitted", io_cancel(ctx, &cb, events));
    say("io_destroy", io_destroy(ctx));

    say("syscall_getpid", syscall(SYS_getpid) == getpid());
    say("syscall_write", syscall(SYS_write, 987, data, 10));
    say("syscall_pread", syscall(SYS_pread64, fd, back, 100, 0, 0, 0));
    say("syscall_unknown", syscall(100000, 1, 2, 3, 4, 5, 6));
    say("compare", memcmp(back, data, 4096) == 0);
    close(fd);
    return 0;
}
