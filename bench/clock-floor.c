/*
 * The floor of any recorder that times each call with two TSC reads: a preloaded pread that
 * reads the TSC before and after the next definition of pread and keeps the difference, and
 * does nothing else (no descriptor lookup, no record). bench/overhead.py measures it beside
 * ioassess, alone and behind Darshan, so that the part of ioassess's cost that is the clock
 * and the part that is its bookkeeping are seen side by side on the host at hand.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <unistd.h>
#include <x86intrin.h>

static ssize_t (*next_pread)(int, void *, size_t, off_t);
volatile uint64_t clock_floor_last_ticks;

__attribute__((visibility("default"))) ssize_t pread(int fd, void *buf, size_t count, off_t offset)
{
    if (__builtin_expect(!next_pread, 0))
        next_pread = (ssize_t(*)(int, void *, size_t, off_t))dlsym(RTLD_NEXT, "pread");
    uint64_t start = __rdtsc();
    ssize_t result = next_pread(fd, buf, count, offset);
    clock_floor_last_ticks = __rdtsc() - start;
    return result;
}
