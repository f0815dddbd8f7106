/* threads16 FILE OPS_PER_THREAD SIZE
 * 16 threads, started together, each doing OPS_PER_THREAD pwrite and OPS_PER_THREAD pread calls
 * of SIZE bytes on its own region [t*ops*size, (t+1)*ops*size) of FILE (created if needed).
 * Thread t writes block i with a pattern of (t, i), then reads it back. Prints the op counts
 * and an FNV-1a checksum of every byte read (in thread order); exits 0 only if every call
 * transferred SIZE bytes and every block read back equals what was written. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define NTHREADS 16

static int fd;
static long ops;
static size_t size;
static pthread_barrier_t barrier;

struct result {
    long preads, pwrites, bad;
    uint64_t checksum;
};
static struct result results[NTHREADS];

static void fill(unsigned char *buf, int t, long i)
{
    for (size_t k = 0; k < size; k++)
        buf[k] = (unsigned char)((t * 131 + i * 7 + k * 13) & 0xff);
}

static void *worker(void *arg)
{
    int t = (int)(intptr_t)arg;
    struct result *r = &results[t];
    unsigned char *wbuf = malloc(size), *rbuf = malloc(size);
    if (!wbuf || !rbuf) { r->bad++; return NULL; }
    r->checksum = 1469598103934665603ULL;
    pthread_barrier_wait(&barrier);
    for (long i = 0; i < ops; i++) {
        off_t off = ((off_t)t * ops + i) * (off_t)size;
        fill(wbuf, t, i);
        ssize_t n = pwrite(fd, wbuf, size, off);
        r->pwrites++;
        if (n != (ssize_t)size) r->bad++;
        memset(rbuf, 0, size);
        n = pread(fd, rbuf, size, off);
        r->preads++;
        if (n != (ssize_t)size || memcmp(rbuf, wbuf, size) != 0) r->bad++;
        for (size_t k = 0; k < size; k++) {
            r->checksum ^= rbuf[k];
            r->checksum *= 1099511628211ULL;
        }
    }
    free(wbuf);
    free(rbuf);
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: %s FILE OPS_PER_THREAD SIZE\n", argv[0]);
        return 2;
    }
    ops = atol(argv[2]);
    size = (size_t)atol(argv[3]);
    if (ops < 0 || size == 0) { fprintf(stderr, "bad arguments\n"); return 2; }
    fd = open(argv[1], O_RDWR | O_CREAT, 0644);
    if (fd < 0) { perror(argv[1]); return 1; }
    pthread_barrier_init(&barrier, NULL, NTHREADS);
    pthread_t th[NTHREADS];
    for (int t = 0; t < NTHREADS; t++)
        if (pthread_create(&th[t], NULL, worker, (void *)(intptr_t)t) != 0) {
            fprintf(stderr, "pthread_create failed\n");
            return 1;
        }
    long preads = 0, pwrites = 0, bad = 0;
    uint64_t checksum = 1469598103934665603ULL;
    for (int t = 0; t < NTHREADS; t++) {
        pthread_join(th[t], NULL);
        preads += results[t].preads;
        pwrites += results[t].pwrites;
        bad += results[t].bad;
        checksum = (checksum ^ results[t].checksum) * 1099511628211ULL;
    }
    close(fd);
    printf("threads %d pread %ld pwrite %ld bad %ld checksum %016llx\n", NTHREADS, preads, pwrites,
           bad, (unsigned long long)checksum);
    return bad ? 1 : 0;
}
