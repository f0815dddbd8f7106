/* posixaio DIR
 * POSIX AIO as programs use it, on DIR/aio.dat: aio_write of 8 requests of different sizes
 * waited for with aio_suspend, an aio_fsync, aio_read of them back polled with aio_error, a
 * lio_listio(LIO_WAIT) of 4 reads and 2 writes (and a LIO_NOP), a lio_listio(LIO_NOWAIT) of 3
 * reads, a read past the end of the file, a read of a descriptor that is not open, and calls on
 * control blocks never submitted (aio_error, aio_return) and an empty list. Prints one line per
 * call (its result and errno, set to 4321 before each, so a success shows errno left alone) and
 * per request one line
 *   REQUEST KIND OFFSET BYTES RESULT
 * (KIND aio_read, aio_write or aio_sync; RESULT what aio_return returned, or -aio_error): the
 * op the recorder is to record for it. The output is the same with and without the recorder.
 */
#define _GNU_SOURCE
#include <aio.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define WRITES 8
#define CHUNK 8192

static char data[WRITES * CHUNK], back[WRITES * CHUNK];

static void say(const char *call, long result)
{
    printf("%s %ld %d\n", call, result, errno);
    errno = 4321;
}

/* Waits for the request, then reports and ends it. */
static void finish(struct aiocb *cb, const char *kind)
{
    const struct aiocb *list[1] = {cb};
    while (aio_error(cb) == EINPROGRESS)
        aio_suspend(list, 1, NULL);
    int error = aio_error(cb);
    ssize_t result = aio_return(cb);
    say("aio_return", (long)result);
    printf("REQUEST %s %lld %zu %ld\n", kind, strcmp(kind, "aio_sync") ? (long long)cb->aio_offset : -1LL,
           strcmp(kind, "aio_sync") ? cb->aio_nbytes : 0, result >= 0 ? (long)result : -(long)error);
}

static void fill(struct aiocb *cb, int fd, void *buf, size_t bytes, off_t offset, int opcode)
{
    memset(cb, 0, sizeof *cb);
    cb->aio_fildes = fd;
    cb->aio_buf = buf;
    cb->aio_nbytes = bytes;
    cb->aio_offset = offset;
    cb->aio_lio_opcode = opcode;
}

int main(int argc, char **argv)
{
    if (argc != 2)
        return 2;
    char path[4096];
    snprintf(path, sizeof path, "%s/aio.dat", argv[1]);
    for (size_t i = 0; i < sizeof data; i++)
        data[i] = (char)('a' + i % 23);
    int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
    if (fd < 0)
        return 1;
    errno = 4321;

    struct aiocb writes[WRITES];
    for (int i = 0; i < WRITES; i++) {
        fill(&writes[i], fd, data + i * CHUNK, (size_t)(i + 1) * 1000, (off_t)i * CHUNK, LIO_WRITE);
        say("aio_write", aio_write(&writes[i]));
    }
    for (int i = 0; i < WRITES; i++)
        finish(&writes[i], "aio_write");
    struct aiocb sync;
    fill(&sync, fd, NULL, 0, 0, LIO_NOP);
    say("aio_fsync", aio_fsync(O_SYNC, &sync));
    finish(&sync, "aio_sync");

    struct aiocb reads[WRITES];
    for (int i = 0; i < WRITES; i++) {
        fill(&reads[i], fd, back + i * CHUNK, CHUNK, (off_t)i * CHUNK, LIO_READ);
        say("aio_read", aio_read(&reads[i]));
    }
    for (int i = 0; i < WRITES; i++) {
        while (aio_error(&reads[i]) == EINPROGRESS)
            ;                           /* polled, as some programs do */
        finish(&reads[i], "aio_read");
    }

    struct aiocb listed[7];
    struct aiocb *list[8];
    for (int i = 0; i < 4; i++)
        fill(&listed[i], fd, back + i * CHUNK, 4096, (off_t)i * CHUNK, LIO_READ);
    fill(&listed[4], fd, data, 512, 100000, LIO_WRITE);
    fill(&listed[5], fd, data, 4096, 120000, LIO_WRITE);
    fill(&listed[6], fd, back, 4096, 0, LIO_NOP);
    for (int i = 0; i < 7; i++)
        list[i] = &listed[i];
    list[7] = NULL;
    say("lio_listio_wait", lio_listio(LIO_WAIT, list, 8, NULL));
    for (int i = 0; i < 6; i++)
        finish(&listed[i], i < 4 ? "aio_read" : "aio_write");

    for (int i = 0; i < 3; i++) {
        fill(&listed[i], fd, back + i * CHUNK, 2048, (off_t)i * 4096, LIO_READ);
        list[i] = &listed[i];
    }
    say("lio_listio_nowait", lio_listio(LIO_NOWAIT, list, 3, NULL));
    for (int i = 0; i < 3; i++)
        finish(&listed[i], "aio_read");

    struct aiocb past_end;
    fill(&past_end, fd, back, 4096, 1 << 20, LIO_READ);
    say("aio_read_past_end", aio_read(&past_end));
    finish(&past_end, "aio_read");

    struct aiocb bad;
    fill(&bad, 987, back, 4096, 0, LIO_READ);
    long submitted = aio_read(&bad);
    say("aio_read_bad_descriptor", submitted);
    if (submitted == 0) {   /* glibc queues it and the request fails; recorded on the file
                               <invalid descriptor>, as a data call on it is, at no offset */
        const struct aiocb *one[1] = {&bad};
        while (aio_error(&bad) == EINPROGRESS)
            aio_suspend(one, 1, NULL);
        int error = aio_error(&bad);
        say("aio_return_bad_descriptor", (long)aio_return(&bad));
        printf("REQUEST aio_read -1 4096 %d\n", -error);
    }

    struct aiocb never;
    fill(&never, fd, back, 4096, 0, LIO_READ);
    say("aio_error_never_submitted", aio_error(&never));
    say("aio_return_never_submitted", (long)aio_return(&never));
    say("lio_listio_empty", lio_listio(LIO_WAIT, list, 0, NULL));

    say("compare", memcmp(back, data, 3 * 2048 > CHUNK ? CHUNK : 2048) == 0);
    close(fd);
    return 0;
}
