/*
 * Overhead probe: THREADS threads each issue CALLS 1-byte preads on a page-cached file and
 * time them in batches of BATCH calls. Prints one line per thread: the median batch's cost
 * per call and the mean cost per call over all batches, in nanoseconds. Run it with and without the recorder; the difference is the
 * recorder's added cost per call.
 * Last line: the process's peak resident memory (VmHWM) in KiB.
 * CALL read: 1-byte read()s instead, at each thread's own descriptor's position (the file must
 * hold CALLS + BATCH bytes): the recorder's path for calls at the position.
 * THREADS 0: one thread, the main one, so that the process stays single-threaded.
 * usage: pread-loop FILE CALLS BATCH THREADS [pread|read]
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "probe.h"

static const char *path;
static long calls, batch;
static int at_position;                 /* read() instead of pread() */

static ssize_t one_byte(int fd, char *byte, long i)
{
    return at_position ? read(fd, byte, 1) : pread(fd, byte, 1, (i * 64) % 4096);
}

struct result {
    double median, mean;
};

static void *run(void *arg)
{
    struct result *result = arg;
    int fd = open(path, O_RDONLY);
    if (fd < 0) {
        perror(path);
        exit(2);
    }
    long batches = calls / batch;
    double *per_call = malloc(sizeof *per_call * batches);
    char byte;
    for (long i = 0; i < batch; i++)    /* warm the page cache and the code path */
        one_byte(fd, &byte, i);
    for (long b = 0; b < batches; b++) {
        double start = now_ns();
        for (long i = 0; i < batch; i++)
            if (one_byte(fd, &byte, i) != 1)
                exit(3);
        per_call[b] = (now_ns() - start) / batch;
    }
    summarise_batches(per_call, batches, &result->median, &result->mean);
    free(per_call);
    close(fd);
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc != 5 && !(argc == 6 && (strcmp(argv[5], "read") == 0 || strcmp(argv[5], "pread") == 0))) {
        fprintf(stderr, "usage: %s FILE CALLS BATCH THREADS [pread|read]\n", argv[0]);
        return 2;
    }
    at_position = argc == 6 && strcmp(argv[5], "read") == 0;
    path = argv[1];
    calls = atol(argv[2]);
    batch = atol(argv[3]);
    int threads = atoi(argv[4]), in_main = threads == 0;
    if (in_main)
        threads = 1;
    pthread_t ids[threads];
    struct result results[threads];
    if (in_main)
        run(&results[0]);
    for (int t = 0; t < threads && !in_main; t++)
        pthread_create(&ids[t], NULL, run, &results[t]);
    for (int t = 0; t < threads && !in_main; t++)
        pthread_join(ids[t], NULL);
    for (int t = 0; t < threads; t++)
        printf("%.2f %.2f\n", results[t].median, results[t].mean);
    print_peak_memory();
    return 0;
}
