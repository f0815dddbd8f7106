/* mapfiles DIR
 * Maps files as programs do: DIR/shared.dat (64 KiB) shared, read and write, written through
 * the mapping and msync'ed; DIR/private.dat (16 KiB) private and read-only from offset 4096;
 * an anonymous mapping of 1 MiB and /dev/zero (excluded path), which are not to be recorded;
 * and mappings that fail: a descriptor that is not open, and a file opened read-only mapped
 * shared for writing (EACCES). Prints one line per mapping:
 *   MAP NAME LENGTH OFFSET PROT SHARED RESULT ERRNO
 * (PROT as r, w and x letters; RESULT 0 or -errno, the op the recorder is to record; ERRNO set to
 * 4321 before each call), then the checksum of what the files hold. The output is the same
 * with and without the recorder.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static void *map(const char *name, size_t length, int prot, int flags, int fd, off_t offset)
{
    errno = 4321;
    void *p = mmap(NULL, length, prot, flags, fd, offset);
    int err = errno;
    printf("MAP %s %zu %lld %s%s%s %d %d %d\n", name, length, (long long)offset, prot & PROT_READ ? "r" : "",
           prot & PROT_WRITE ? "w" : "", prot & PROT_EXEC ? "x" : "", (flags & MAP_TYPE) == MAP_SHARED,
           p == MAP_FAILED ? -err : 0, err);
    return p;
}

static int create(const char *dir, const char *name, size_t bytes, char *path)
{
    snprintf(path, 4096, "%s/%s", dir, name);
    int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
    if (fd < 0 || ftruncate(fd, (off_t)bytes) != 0)
        return -1;
    return fd;
}

int main(int argc, char **argv)
{
    if (argc != 2)
        return 2;
    char shared_path[4096], private_path[4096];
    int shared = create(argv[1], "shared.dat", 64 << 10, shared_path);
    int private = create(argv[1], "private.dat", 16 << 10, private_path);
    if (shared < 0 || private < 0)
        return 1;
    char block[4096];
    memset(block, 'p', sizeof block);
    for (off_t at = 0; at < (16 << 10); at += 4096)
        if (pwrite(private, block, sizeof block, at) != (ssize_t)sizeof block)
            return 1;

    char *s = map("shared.dat", 64 << 10, PROT_READ | PROT_WRITE, MAP_SHARED, shared, 0);
    if (s == MAP_FAILED)
        return 1;
    for (int i = 0; i < (64 << 10); i++)
        s[i] = (char)('A' + i % 26);
    msync(s, 64 << 10, MS_SYNC);
    char *p = map("private.dat", 12 << 10, PROT_READ, MAP_PRIVATE, private, 4096);
    if (p == MAP_FAILED)
        return 1;
    unsigned long sum = 0;
    for (int i = 0; i < (12 << 10); i++)
        sum += (unsigned char)p[i];

    char *anonymous = mmap(NULL, 1 << 20, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (anonymous == MAP_FAILED)
        return 1;
    anonymous[0] = 1;
    int zero = open("/dev/zero", O_RDONLY);
    char *z = mmap(NULL, 4096, PROT_READ, MAP_PRIVATE, zero, 0);
    printf("ANONYMOUS %d DEVZERO %d\n", anonymous != MAP_FAILED, z != MAP_FAILED && z[0] == 0);

    map("closed", 4096, PROT_READ, MAP_PRIVATE, 987, 0);
    int readonly = open(private_path, O_RDONLY);
    map("private.dat", 4096, PROT_READ | PROT_WRITE, MAP_SHARED, readonly, 0);

    for (int i = 0; i < (64 << 10); i++)
        sum += (unsigned char)s[i];
    printf("SUM %lu\n", sum);
    munmap(s, 64 << 10);
    munmap(p, 12 << 10);
    munmap(anonymous, 1 << 20);
    munmap(z, 4096);
    close(zero);
    close(readonly);
    close(shared);
    close(private);
    return 0;
}
