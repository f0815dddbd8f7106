/*
 * The entry points of layer libraries (ioassess-layer.h): libioassess-mpiio.so times MPI-IO
 * calls and records them here, into this process's trace. While a layer call runs, the
 * thread's head.flags mark the POSIX ops it makes (ioassess_record adds them).
 */
#define _GNU_SOURCE
#include <errno.h>

#include "ioassess-internal.h"
#include "ioassess-layer.h"

IOASSESS_EXPORT int ioassess_layer_begin(uint16_t nested_flags)
{
    int saved_errno = errno;
    int recording = ioassess_active();
    errno = saved_errno;
    struct ioassess_thread *t = &ioassess_self;
    if (unlikely(!recording || t->busy || t->head.flags))
        return 0;
    t->head.flags = nested_flags;
    return 1;
}

/* One function times both ends of a layer call, so its read is ordered on both sides: rdtscp
 * waits for every earlier instruction (the end of the call before it) and the lfence after it
 * keeps every later one (the call after it) from beginning before the read
 * (ioassess-internal.h, ioassess_ticks_start). */
IOASSESS_EXPORT uint64_t ioassess_layer_ticks(void)
{
    int use_tsc = ioassess_config.use_tsc;
    uint64_t ticks = ioassess_ticks_end(use_tsc);
    ioassess_lfence();
    return ticks;
}

IOASSESS_EXPORT void ioassess_layer_end(uint8_t op, uint16_t flags, uint64_t file_id,
                                        int64_t offset, uint64_t requested, int64_t result,
                                        uint64_t start_ticks, uint64_t end_ticks,
                                        const void *buffer)
{
    int saved_errno = errno;
    ioassess_self.head.flags = 0;
    ioassess_record(op, flags, file_id, offset, requested, result, start_ticks, end_ticks,
                    buffer);
    errno = saved_errno;
}

IOASSESS_EXPORT uint64_t ioassess_layer_file(const char *path)
{
    int saved_errno = errno;
    uint64_t file_id = 0;
    if (ioassess_active() && !ioassess_self.busy && !ioassess_self.head.flags)
        file_id = ioassess_fd_name_path(path);
    errno = saved_errno;
    return file_id;
}
