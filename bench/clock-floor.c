/*
 * The floor of any recorder that times each call with two clock reads: a preloaded pread that
 * reads the TSC before and after the next definition of pread and keeps the difference, and
 * does nothing else (no descriptor lookup, no record). bench/overhead.py measures it beside
 * ioassess, alone and behind Darshan, so that the part of ioassess's cost that is the clock
 * and the part that is its bookkeeping are seen side by side on the host at hand.
 * CLOCK_FLOOR_READ chooses the reads: rdtsc (default; the recorder's before 2026-11-25), rdtscp
 * or lfence (lfence; rdtsc) for both; ordered (rdtsc; lfence before the call, rdtscp after:
 * the recorder's since 2026-11-25, the cheapest pair that keeps the call between the reads);
 * fenced (lfence; rdtsc; lfence before, rdtscp; lfence after: fenced on every side).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <x86intrin.h>

enum read_kind { READ_RDTSC, READ_RDTSCP, READ_LFENCE, READ_ORDERED, READ_FENCED };

static ssize_t (*next_pread)(int, void *, size_t, off_t);
static enum read_kind kind;
volatile uint64_t clock_floor_last_ticks;

static inline uint64_t ticks(int end)
{
    unsigned aux;
    uint64_t read;
    switch (kind) {
    case READ_RDTSCP:
        return __rdtscp(&aux);
    case READ_LFENCE:
        _mm_lfence();
        return __rdtsc();
    case READ_ORDERED:
        if (end)
            return __rdtscp(&aux);
        read = __rdtsc();
        _mm_lfence();
        return read;
    case READ_FENCED:
        if (!end)
            _mm_lfence();
        read = end ? __rdtscp(&aux) : __rdtsc();
        _mm_lfence();
        return read;
    default:
        return __rdtsc();
    }
}

__attribute__((constructor)) static void choose(void)
{
    const char *read = getenv("CLOCK_FLOOR_READ");
    kind = read && strcmp(read, "rdtscp") == 0    ? READ_RDTSCP
           : read && strcmp(read, "lfence") == 0  ? READ_LFENCE
           : read && strcmp(read, "ordered") == 0 ? READ_ORDERED
           : read && strcmp(read, "fenced") == 0  ? READ_FENCED
                                                  : READ_RDTSC;
}

__attribute__((visibility("default"))) ssize_t pread(int fd, void *buf, size_t count, off_t offset)
{
    if (__builtin_expect(!next_pread, 0))
        next_pread = (ssize_t(*)(int, void *, size_t, off_t))dlsym(RTLD_NEXT, "pread");
    uint64_t start = ticks(0);
    ssize_t result = next_pread(fd, buf, count, offset);
    clock_floor_last_ticks = ticks(1) - start;
    return result;
}
