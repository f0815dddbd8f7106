/*
 * What the overhead probes (pread-loop.c, mpiio-loop.c) share: the clock, the per-call cost of
 * a batch summarised as the median batch and the mean over batches, and the peak memory line.
 */
#ifndef IOASSESS_BENCH_PROBE_H
#define IOASSESS_BENCH_PROBE_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static inline double now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e9 + t.tv_nsec;
}

static int by_value(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Median and mean of per_call[0..batches) (ns per call of each batch); sorts per_call. */
static inline void summarise_batches(double *per_call, long batches, double *median, double *mean)
{
    double sum = 0;
    for (long b = 0; b < batches; b++)
        sum += per_call[b];
    *mean = sum / batches;
    qsort(per_call, batches, sizeof *per_call, by_value);
    *median = per_call[batches / 2];
}

/* Prints the process's peak resident memory (VmHWM) in KiB on a line of its own. */
static inline void print_peak_memory(void)
{
    char line[256];
    FILE *status = fopen("/proc/self/status", "r");
    while (status && fgets(line, sizeof line, status))
        if (strncmp(line, "VmHWM:", 6) == 0)
            printf("%ld\n", atol(line + 6));
    if (status)
        fclose(status);
}

#endif
