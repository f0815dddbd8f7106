/*
 * The floor of any recorder that times each call with two clock reads: a preloaded pread that
 * reads the TSC before and after the next definition of pread and keeps the difference, and
 * does nothing else (no descriptor lookup, no record). bench/overhead.py measures it beside
 * ioassess, alone and behind Darshan, so that the part of ioassess's cost that is the clock
 * and the part that is its bookkeeping are seen side by side on the host at hand.
 * CLOCK_FLOOR_READ chooses the read: rdtsc (default; what the recorder uses), rdtscp or lfence
 * (lfence; rdtsc): the two ways to keep the reads ordered with the call around them.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <x86intrin.h>

enum read_kind { READ_RDTSC, READ_RDTSCP, READ_LFENCE };

static ssize_t (*next_pread)(int, void *, size_t, off_t);
static enum read_kind kind;
volatile uint64_t clock_floor_last_ticks;

static inline uint64_t ticks(void)
{
    unsigned aux;
    switch (kind) {
    case READ_RDTSCP:
        return __rdtscp(&aux);
    case READ_LFENCE:
        _mm_lfence();
        return __rdtsc();
    default:
        return __rdtsc();
    }
}

__attribute__((constructor)) static void choose(void)
{
    const char *read = getenv("CLOCK_FLOOR_READ");
    kind = read && strcmp(read, "rdtscp") == 0   ? READ_RDTSCP
           : read && strcmp(read, "lfence") == 0 ? READ_LFENCE
                                                 : READ_RDTSC;
}

__attribute__((visibility("default"))) ssize_t pread(int fd, void *buf, size_t count, off_t offset)
{
    if (__builtin_expect(!next_pread, 0))
        next_pread = (ssize_t(*)(int, void *, size_t, off_t))dlsym(RTLD_NEXT, "pread");
    uint64_t start = ticks();
    ssize_t result = next_pread(fd, buf, count, offset);
    clock_floor_last_ticks = ticks() - start;
    return result;
}
