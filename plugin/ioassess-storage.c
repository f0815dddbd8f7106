/*
 * Where the trace's bytes are kept (docs/architecture.md, "Trace storage"). A store into a
 * MAP_SHARED mapping of the trace must never fault, so a range is mapped only once its blocks
 * are reserved (fallocate) on a file system that overwrites them in place. A copy-on-write
 * file system (btrfs, ZFS, bcachefs, NILFS) needs new blocks for a store into a page that was
 * written back, whatever was reserved or written before: a full one turns that store into
 * SIGBUS. There, and where fallocate is not supported, the trace is "buffered": its records
 * are kept in memory and written with pwrite by the helper, which gets ENOSPC instead. On
 * btrfs the new file is made NOCOW first, so its reserved blocks are overwritten in place and
 * those writes succeed on a full file system.
 * Everything here runs in the helper (ioassess-private.c): raw system calls only.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/fs.h>
#include <linux/magic.h>
#include <sys/ioctl.h>
#include <sys/statfs.h>

#include "ioassess-internal.h"

#define ZFS_SUPER_MAGIC 0x2fc12fc1u        /* not in linux/magic.h (out of tree) */
#define BCACHEFS_SUPER_MAGIC 0xca451a4eu

static int copy_on_write(uint64_t fs_magic)
{
    return fs_magic == BTRFS_SUPER_MAGIC || fs_magic == ZFS_SUPER_MAGIC ||
           fs_magic == BCACHEFS_SUPER_MAGIC || fs_magic == NILFS_SUPER_MAGIC;
}

/* Whether the new, empty trace open at fd is to be buffered (its file system copies on write,
 * or cannot be asked); on btrfs it is made NOCOW, which only an empty file can be. */
int ioassess_storage_prepare(int fd)
{
    struct statfs fs;
    if (syscall(SYS_fstatfs, fd, &fs) != 0)
        return 1;
    if ((uint64_t)fs.f_type == BTRFS_SUPER_MAGIC) {
        int flags = 0;
        if (syscall(SYS_ioctl, fd, FS_IOC_GETFLAGS, &flags) == 0) {
            flags |= FS_NOCOW_FL;
            syscall(SYS_ioctl, fd, FS_IOC_SETFLAGS, &flags);
        }
    }
    return copy_on_write((uint64_t)fs.f_type);
}

/* Zeros for the pages of a mapped range: never written, so reading it costs no memory. */
static char zeros[256 << 10];

/* Write zeros over [offset, offset + bytes): its pages are then in the page cache, dirty, so
 * faulting them into the mapping is cheap (the pages of an fallocated range only, faulted in
 * one by one under the recorder's lock, doubled the average cost of a record here:
 * docs/performance.md, 2026-11-27). */
static int write_zeros(int fd, uint64_t offset, uint64_t bytes)
{
    while (bytes > 0) {
        long n = syscall(SYS_pwrite64, fd, zeros, bytes < sizeof zeros ? bytes : sizeof zeros,
                         (off_t)offset);
        if (n <= 0)
            return -1;
        offset += (uint64_t)n;
        bytes -= (uint64_t)n;
    }
    return 0;
}

/* Reserve [offset, offset + bytes): its blocks allocated, the file at least that long, and
 * (mapped traces) its pages in the page cache; 0 on success, else -1 with errno, the size left
 * at offset (a whole number of pages). A buffered trace on a file system without fallocate
 * (EOPNOTSUPP) is only extended: its writes come later, and a failed one is counted then. */
int ioassess_storage_reserve(int fd, uint64_t offset, uint64_t bytes, int buffered)
{
    if (syscall(SYS_fallocate, fd, 0, (off_t)offset, (off_t)bytes) == 0 &&
        (buffered || write_zeros(fd, offset, bytes) == 0))
        return 0;
    if (buffered && errno == EOPNOTSUPP &&
        syscall(SYS_ftruncate, fd, (off_t)(offset + bytes)) == 0)
        return 0;
    int err = errno;
    syscall(SYS_ftruncate, fd, (off_t)offset);   /* a partial allocation may have grown it */
    errno = err;
    return -1;
}

/* Write each range's memory to its place in the file, in order; returns how many were
 * written whole (the first one that was not stops it). */
unsigned ioassess_storage_write(int fd, const struct ioassess_range *ranges, unsigned count)
{
    for (unsigned i = 0; i < count; i++) {
        const char *from = ranges[i].map;
        uint64_t offset = ranges[i].offset, left = ranges[i].bytes;
        while (left > 0) {
            long n = syscall(SYS_pwrite64, fd, from, left, (off_t)offset);
            if (n <= 0)
                return i;
            from += n;
            offset += (uint64_t)n;
            left -= (uint64_t)n;
        }
    }
    return count;
}
