/*
 * Overhead probe for metadata calls: CALLS calls in the main thread, timed in batches of BATCH
 * calls. Prints one line: the median batch's cost per call and the mean cost per call over all
 * batches, in nanoseconds; then the process's peak resident memory (VmHWM) in KiB. Run it with
 * and without the recorder; the difference is the recorder's added cost per call.
 *   stat       stat() of FILE (as given: an absolute path is hashed whole)
 *   stat-rel   stat() of FILE's name relative to its directory, after chdir there
 *   missing    stat() of a path that does not exist beside FILE (fails with ENOENT)
 *   openclose  open(FILE, O_RDONLY) then close(): per call is per open or close (half a pair)
 * usage: meta-loop FILE CALLS BATCH stat|stat-rel|missing|openclose
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "probe.h"

int main(int argc, char **argv)
{
    if (argc != 5) {
        fprintf(stderr, "usage: %s FILE CALLS BATCH stat|stat-rel|missing|openclose\n", argv[0]);
        return 2;
    }
    char path[4096], directory[4096];
    snprintf(path, sizeof path, "%s", argv[1]);
    snprintf(directory, sizeof directory, "%s", argv[1]);
    long calls = atol(argv[2]), batch = atol(argv[3]);
    const char *mode = argv[4];
    int open_close = strcmp(mode, "openclose") == 0;
    if (strcmp(mode, "stat-rel") == 0) {
        if (chdir(dirname(directory)) != 0)
            return 3;
        snprintf(path, sizeof path, "%s", basename(argv[1]));
    } else if (strcmp(mode, "missing") == 0) {
        strncat(path, ".missing", sizeof path - strlen(path) - 1);
    } else if (!open_close && strcmp(mode, "stat") != 0) {
        fprintf(stderr, "%s: unknown mode %s\n", argv[0], mode);
        return 2;
    }
    int expect = strcmp(mode, "missing") == 0 ? -1 : 0;
    struct stat st;
    long per_batch = open_close ? batch / 2 : batch;  /* openclose: a pair is two calls */
    for (long i = 0; i < per_batch; i++)             /* warm the path and the code */
        if (open_close)
            close(open(path, O_RDONLY));
        else
            stat(path, &st);
    long batches = calls / batch;
    double *per_call = malloc(sizeof *per_call * batches);
    for (long b = 0; b < batches; b++) {
        double start = now_ns();
        for (long i = 0; i < per_batch; i++) {
            if (open_close) {
                int fd = open(path, O_RDONLY);
                if (fd < 0 || close(fd) != 0)
                    return 3;
            } else if (stat(path, &st) != expect) {
                return 3;
            }
        }
        per_call[b] = (now_ns() - start) / batch;
    }
    double median, mean;
    summarise_batches(per_call, batches, &median, &mean);
    printf("%.2f %.2f\n", median, mean);
    print_peak_memory();
    return 0;
}
