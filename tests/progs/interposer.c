/* libstack_probe.so: a second LD_PRELOAD library for the stacking tests. It interposes
 * read, write, pread(64) and pwrite(64), forwards each call to the next definition
 * (dlsym(RTLD_NEXT)) and counts the calls made on regular files. At exit it writes
 * "read N\nwrite N\npread N\npwrite N\n" to the file named by $STACK_PROBE_OUT, using raw
 * syscalls so that the recorder does not see its own output. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <unistd.h>

enum { P_READ, P_WRITE, P_PREAD, P_PWRITE, P_N };
static unsigned long counts[P_N];

static int regular(int fd)
{
    struct stat st;
    return syscall(SYS_fstat, fd, &st) == 0 && S_ISREG(st.st_mode);
}

static void *next(const char *name)
{
    void *f = dlsym(RTLD_NEXT, name);
    if (!f) {
        static const char msg[] = "libstack_probe: dlsym failed\n";
        syscall(SYS_write, 2, msg, sizeof msg - 1);
        abort();
    }
    return f;
}

#define COUNT(kind, fd) do { if (regular(fd)) __atomic_add_fetch(&counts[kind], 1, __ATOMIC_RELAXED); } while (0)

ssize_t read(int fd, void *buf, size_t n)
{
    static ssize_t (*real)(int, void *, size_t);
    if (!real) real = next("read");
    COUNT(P_READ, fd);
    return real(fd, buf, n);
}

ssize_t write(int fd, const void *buf, size_t n)
{
    static ssize_t (*real)(int, const void *, size_t);
    if (!real) real = next("write");
    COUNT(P_WRITE, fd);
    return real(fd, buf, n);
}

ssize_t pread(int fd, void *buf, size_t n, off_t off)
{
    static ssize_t (*real)(int, void *, size_t, off_t);
    if (!real) real = next("pread");
    COUNT(P_PREAD, fd);
    return real(fd, buf, n, off);
}

ssize_t pread64(int fd, void *buf, size_t n, off_t off)
{
    static ssize_t (*real)(int, void *, size_t, off_t);
    if (!real) real = next("pread64");
    COUNT(P_PREAD, fd);
    return real(fd, buf, n, off);
}

ssize_t pwrite(int fd, const void *buf, size_t n, off_t off)
{
    static ssize_t (*real)(int, const void *, size_t, off_t);
    if (!real) real = next("pwrite");
    COUNT(P_PWRITE, fd);
    return real(fd, buf, n, off);
}

ssize_t pwrite64(int fd, const void *buf, size_t n, off_t off)
{
    static ssize_t (*real)(int, const void *, size_t, off_t);
    if (!real) real = next("pwrite64");
    COUNT(P_PWRITE, fd);
    return real(fd, buf, n, off);
}

__attribute__((destructor)) static void probe_report(void)
{
    const char *path = getenv("STACK_PROBE_OUT");
    if (!path) return;
    char text[256];
    int n = snprintf(text, sizeof text, "read %lu\nwrite %lu\npread %lu\npwrite %lu\n",
                     counts[P_READ], counts[P_WRITE], counts[P_PREAD], counts[P_PWRITE]);
    int fd = (int)syscall(SYS_openat, AT_FDCWD, path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) return;
    syscall(SYS_write, fd, text, (size_t)n);
    syscall(SYS_close, fd);
}
