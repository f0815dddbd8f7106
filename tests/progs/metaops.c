/* metaops DIR
 * Calls every metadata entry point the recorder wraps (built with _FORTIFY_SOURCE=2, so that
 * open and openat with flags not known at compile time call __open_2, __open64_2, __openat_2 and
 * __openat64_2), in DIR (absolute; the program changes into it, so most paths are relative),
 * successes and failures. Prints one line per call:
 *   CALL KIND RESULT ERRNO PATH
 * CALL: the entry point; KIND: the op kind the recorder is to record ("none": not recorded:
 * excluded paths, descriptors it does not know); RESULT: the record's result (a descriptor, 0,
 * 1 or 0 for readdir, bytes for getdents64, or -errno); ERRNO: errno after the call (it is set
 * to 4321 before each, so a success shows that errno was left alone); PATH: the absolute name
 * of the record's file, "-" for file id 0 (an *at() call relative to a descriptor the
 * recorder did not see opened) or when not recorded. The output must be the
 * same with and without the recorder; the trace must hold exactly the recorded lines, in order.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* glibc before 2.33's stat interface, still exported (binaries built then call it). */
int __xstat(int, const char *, struct stat *);
int __xstat64(int, const char *, struct stat64 *);
int __lxstat(int, const char *, struct stat *);
int __lxstat64(int, const char *, struct stat64 *);
int __fxstat(int, int, struct stat *);
int __fxstat64(int, int, struct stat64 *);
int __fxstatat(int, int, const char *, struct stat *, int);
int __fxstatat64(int, int, const char *, struct stat64 *, int);
#define STAT_VER 1   /* _STAT_VER_LINUX on x86-64 */

static char dir[4096];

static void line(const char *call, const char *kind, long result, const char *path)
{
    int err = errno;
    char name[8192];
    if (!path)
        snprintf(name, sizeof name, "-");
    else if (path[0] == '/')
        snprintf(name, sizeof name, "%s", path);
    else
        snprintf(name, sizeof name, "%s/%s", dir, path);
    printf("%s %s %ld %d %s\n", call, kind, result, err, name);
    fflush(stdout);
}

/* A call returning -1 and errno, or a descriptor / 0. */
#define CALL(call, kind, path, expr)                                           \
    do {                                                                       \
        errno = 4321;                                                          \
        long r_ = (long)(expr);                                                \
        line(call, kind, r_ < 0 ? -(long)errno : r_, path);                    \
    } while (0)

/* volatile: not known at compile time, so the fortified open calls __open_2 and friends. */
static volatile int rdonly = O_RDONLY;

int main(int argc, char **argv)
{
    if (argc < 2 || argv[1][0] != '/') {
        fprintf(stderr, "usage: metaops /ABSOLUTE/DIR\n");
        return 2;
    }
    snprintf(dir, sizeof dir, "%s", argv[1]);
    if (chdir(dir) != 0) {
        perror("chdir");
        return 1;
    }
    struct stat st;
    struct stat64 st64;
    struct statx stx;
    int fd, dfd;

    /* mkdir, open and close */
    CALL("mkdir", "mkdir", "sub", mkdir("sub", 0755));
    CALL("mkdir", "mkdir", "sub", mkdir("sub", 0755));                    /* EEXIST */
    CALL("mkdirat", "mkdir", "sub2", mkdirat(AT_FDCWD, "sub2", 0755));
    CALL("open", "open", "f1", fd = open("f1", O_CREAT | O_WRONLY, 0644));
    CALL("write", "none", NULL, write(fd, "0123456789", 10));
    CALL("close", "close", "f1", close(fd));
    CALL("close", "none", NULL, close(fd));                                /* EBADF */
    CALL("open64", "open", "f1", fd = open64("f1", O_RDONLY));
    CALL("close", "close", "f1", close(fd));
    CALL("openat", "open", "f1", fd = openat(AT_FDCWD, "f1", O_RDONLY));
    CALL("close", "close", "f1", close(fd));
    CALL("openat64", "open", "f1", fd = openat64(AT_FDCWD, "f1", O_RDONLY));
    CALL("close", "close", "f1", close(fd));
    CALL("creat", "open", "f3", fd = creat("f3", 0644));
    CALL("close", "close", "f3", close(fd));
    CALL("creat64", "open", "f3", fd = creat64("f3", 0644));
    CALL("close", "close", "f3", close(fd));
    CALL("__open_2", "open", "f1", fd = open("f1", rdonly));
    CALL("close", "close", "f1", close(fd));
    CALL("__open64_2", "open", "f1", fd = open64("f1", rdonly));
    CALL("close", "close", "f1", close(fd));
    CALL("__openat_2", "open", "f1", fd = openat(AT_FDCWD, "f1", rdonly));
    CALL("close", "close", "f1", close(fd));
    CALL("__openat64_2", "open", "f1", fd = openat64(AT_FDCWD, "f1", rdonly));
    CALL("close", "close", "f1", close(fd));
    CALL("open", "open", "missing", open("missing", O_RDONLY));            /* ENOENT */
    CALL("__openat_2", "open", "missing", openat(AT_FDCWD, "missing", rdonly));
    CALL("open", "open", dir, fd = open(dir, O_RDONLY | O_DIRECTORY));      /* absolute */
    CALL("close", "close", dir, close(fd));
    CALL("open", "none", "/dev/null", fd = open("/dev/null", O_RDONLY));   /* excluded */
    CALL("close", "none", NULL, close(fd));

    /* a directory descriptor: *at() calls relative to it */
    CALL("open", "open", "sub", dfd = open("sub", O_RDONLY | O_DIRECTORY));
    CALL("openat", "open", "sub/g", fd = openat(dfd, "g", O_CREAT | O_RDWR, 0600));
    CALL("close", "close", "sub/g", close(fd));
    CALL("fstatat", "stat", "sub/g", fstatat(dfd, "g", &st, 0));
    CALL("fstatat", "stat", "sub", fstatat(dfd, "", &st, AT_EMPTY_PATH));
    CALL("fstatat", "stat", "f1", fstatat(dfd, "../f1", &st, 0));
    CALL("fstatat", "stat", "sub/nothere", fstatat(dfd, "nothere", &st, 0)); /* ENOENT */
    int copy = dup(dfd);                   /* a duplicate is the same directory */
    CALL("fstatat", "stat", "sub/g", fstatat(copy, "g", &st, 0));
    CALL("close", "close", "sub", close(copy));
    CALL("open", "open", "sub", copy = open("sub", O_RDONLY));  /* O_DIRECTORY or not */
    CALL("fstatat", "stat", "sub/g", fstatat(copy, "g", &st, 0));
    CALL("close", "close", "sub", close(copy));
    CALL("fstatat", "stat", NULL, fstatat(0, "g", &st, 0));   /* a descriptor not seen opened */
    CALL("unlinkat", "unlink", "sub/g", unlinkat(dfd, "g", 0));
    CALL("close", "close", "sub", close(dfd));

    /* stat and its forms */
    CALL("stat", "stat", "f1", stat("f1", &st));
    CALL("stat", "stat", "missing", stat("missing", &st));                 /* ENOENT */
    CALL("stat", "stat", "f1", stat("./sub/../f1", &st));
    CALL("stat", "stat", "f1", stat(".//f1", &st));
    CALL("stat", "stat", dir, stat(dir, &st));
    CALL("stat64", "stat", "f1", stat64("f1", &st64));
    CALL("lstat", "stat", "f1", lstat("f1", &st));
    CALL("lstat64", "stat", "f1", lstat64("f1", &st64));
    CALL("open", "open", "f1", fd = open("f1", O_RDWR));
    CALL("fstat", "stat", "f1", fstat(fd, &st));
    CALL("fstat64", "stat", "f1", fstat64(fd, &st64));
    CALL("fstatat", "stat", "f1", fstatat(AT_FDCWD, "f1", &st, 0));
    CALL("fstatat64", "stat", "f1", fstatat64(AT_FDCWD, "f1", &st64, AT_SYMLINK_NOFOLLOW));
    CALL("statx", "stat", "f1", statx(AT_FDCWD, "f1", 0, STATX_BASIC_STATS, &stx));
    CALL("statx", "stat", "f1", statx(fd, "", AT_EMPTY_PATH, STATX_BASIC_STATS, &stx));
    CALL("statx", "stat", "missing", statx(AT_FDCWD, "missing", 0, STATX_BASIC_STATS, &stx));
    CALL("__xstat", "stat", "f1", __xstat(STAT_VER, "f1", &st));
    CALL("__xstat64", "stat", "f1", __xstat64(STAT_VER, "f1", &st64));
    CALL("__lxstat", "stat", "f1", __lxstat(STAT_VER, "f1", &st));
    CALL("__lxstat64", "stat", "missing", __lxstat64(STAT_VER, "missing", &st64));
    CALL("__fxstat", "stat", "f1", __fxstat(STAT_VER, fd, &st));
    CALL("__fxstat64", "stat", "f1", __fxstat64(STAT_VER, fd, &st64));
    CALL("__fxstatat", "stat", "f1", __fxstatat(STAT_VER, AT_FDCWD, "f1", &st, 0));
    CALL("__fxstatat64", "stat", "f1", __fxstatat64(STAT_VER, AT_FDCWD, "f1", &st64, 0));
    CALL("stat", "none", "/usr/bin", stat("/usr/bin", &st));               /* excluded */
    CALL("stat", "none", "/etc/nothere", stat("/etc/nothere", &st));

    /* paths of 1 to 24 bytes ending right before an unmapped page: the recorder must read no
     * byte past a path's end there (it reads whole words only where they stay in the page) */
    char *pages = mmap(NULL, 8192, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (pages == MAP_FAILED || mprotect(pages + 4096, 4096, PROT_NONE) != 0)
        return 1;
    for (int len = 1; len <= 24; len++) {
        char *name = pages + 4096 - (len + 1);
        memset(name, 'a' + len % 26, (size_t)len);
        name[len] = '\0';
        CALL("stat", "stat", name, stat(name, &st));                     /* ENOENT */
    }

    /* truncate, fallocate */
    CALL("truncate", "truncate", "f1", truncate("f1", 100));
    CALL("truncate64", "truncate", "f1", truncate64("f1", 200));
    CALL("truncate", "truncate", "missing", truncate("missing", 1));       /* ENOENT */
    CALL("ftruncate", "truncate", "f1", ftruncate(fd, 300));
    CALL("ftruncate64", "truncate", "f1", ftruncate64(fd, 400));
    CALL("fallocate", "fallocate", "f1", fallocate(fd, 0, 0, 8192));
    CALL("fallocate64", "fallocate", "f1", fallocate64(fd, 0, 0, 16384));
    CALL("fallocate", "fallocate", "f1", fallocate(fd, 0, -1, 1));         /* EINVAL */
    errno = 4321;
    int rc = posix_fallocate(fd, 0, 32768);
    line("posix_fallocate", "fallocate", -(long)rc, "f1");
    errno = 4321;
    rc = posix_fallocate64(fd, 0, 65536);
    line("posix_fallocate64", "fallocate", -(long)rc, "f1");
    CALL("close", "close", "f1", close(fd));
    CALL("open", "open", "f1", fd = open("f1", O_RDONLY));
    errno = 4321;
    rc = posix_fallocate(fd, 0, 4096);                                     /* EBADF */
    line("posix_fallocate", "fallocate", -(long)rc, "f1");
    CALL("ftruncate", "truncate", "f1", ftruncate(fd, 0));                 /* EINVAL */
    CALL("close", "close", "f1", close(fd));

    /* access */
    CALL("access", "access", "f1", access("f1", R_OK));
    CALL("access", "access", "missing", access("missing", F_OK));
    CALL("faccessat", "access", "f1", faccessat(AT_FDCWD, "f1", W_OK, AT_EACCESS));
    CALL("euidaccess", "access", "f1", euidaccess("f1", R_OK));
    CALL("eaccess", "access", "missing", eaccess("missing", R_OK));

    /* rename */
    CALL("rename", "rename", "f1", rename("f1", "f2"));
    CALL("renameat", "rename", "f2", renameat(AT_FDCWD, "f2", AT_FDCWD, "f1"));
    CALL("renameat2", "rename", "f3", renameat2(AT_FDCWD, "f3", AT_FDCWD, "f1", RENAME_NOREPLACE));
    CALL("rename", "rename", "missing", rename("missing", "f9"));

    /* mkstemp and its forms */
    char names[8][64];
    const char *templates[8] = {"tmpXXXXXX", "tmpXXXXXX", "tmpXXXXXX", "tmpXXXXXX",
                                "tmpXXXXXX.s", "tmpXXXXXX.s", "tmpXXXXXX.s", "tmpXXXXXX.s"};
    for (int i = 0; i < 8; i++)
        snprintf(names[i], sizeof names[i], "%s", templates[i]);
    int fds[8];
    CALL("mkstemp", "mkstemp", names[0], fds[0] = mkstemp(names[0]));
    CALL("mkstemp64", "mkstemp", names[1], fds[1] = mkstemp64(names[1]));
    CALL("mkostemp", "mkstemp", names[2], fds[2] = mkostemp(names[2], O_CLOEXEC));
    CALL("mkostemp64", "mkstemp", names[3], fds[3] = mkostemp64(names[3], O_CLOEXEC));
    CALL("mkstemps", "mkstemp", names[4], fds[4] = mkstemps(names[4], 2));
    CALL("mkstemps64", "mkstemp", names[5], fds[5] = mkstemps64(names[5], 2));
    CALL("mkostemps", "mkstemp", names[6], fds[6] = mkostemps(names[6], 2, O_CLOEXEC));
    CALL("mkostemps64", "mkstemp", names[7], fds[7] = mkostemps64(names[7], 2, O_CLOEXEC));
    char bad[] = "tmpXXXX";                                                /* EINVAL */
    CALL("mkstemp", "mkstemp", bad, mkstemp(bad));
    for (int i = 0; i < 8; i++) {
        CALL("close", "close", names[i], close(fds[i]));
        CALL("unlink", "unlink", names[i], unlink(names[i]));
    }

    /* directories */
    CALL("open", "open", "sub/e1", fd = open("sub/e1", O_CREAT | O_WRONLY, 0644));
    CALL("close", "close", "sub/e1", close(fd));
    errno = 4321;
    DIR *d = opendir("sub");
    line("opendir", "opendir", d ? dirfd(d) : -(long)errno, "sub");
    for (;;) {
        errno = 4321;
        struct dirent *e = readdir(d);
        line("readdir", "readdir", e ? 1 : errno != 4321 ? -(long)errno : 0, "sub");
        if (!e)
            break;
    }
    rewinddir(d);
    errno = 4321;
    struct dirent64 *e64 = readdir64(d);
    line("readdir64", "readdir", e64 ? 1 : 0, "sub");
    CALL("closedir", "closedir", "sub", closedir(d));
    errno = 4321;
    d = opendir("missing");
    line("opendir", "opendir", d ? 0 : -(long)errno, "missing");
    CALL("open", "open", "sub", dfd = open("sub", O_RDONLY | O_DIRECTORY));
    errno = 4321;
    d = fdopendir(dfd);
    line("fdopendir", "opendir", d ? dfd : -(long)errno, "sub");
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"   /* readdir_r: still called */
    struct dirent entry, *got;
    errno = 4321;
    rc = readdir_r(d, &entry, &got);
    line("readdir_r", "readdir", rc ? -(long)rc : got ? 1 : 0, "sub");
    struct dirent64 entry64, *got64;
    errno = 4321;
    rc = readdir64_r(d, &entry64, &got64);
    line("readdir64_r", "readdir", rc ? -(long)rc : got64 ? 1 : 0, "sub");
#pragma GCC diagnostic pop
    CALL("closedir", "closedir", "sub", closedir(d));
    CALL("open", "open", "sub2", dfd = open("sub2", O_RDONLY | O_DIRECTORY));
    char buf[4096];
    CALL("getdents64", "readdir", "sub2", getdents64(dfd, buf, sizeof buf));
    CALL("getdents64", "readdir", "sub2", getdents64(dfd, buf, sizeof buf));
    CALL("close", "close", "sub2", close(dfd));
    errno = 4321;
    d = opendir("/usr");                                                   /* excluded */
    line("opendir", "none", d ? 0 : -1, NULL);
    errno = 4321;
    line("readdir", "none", readdir(d) ? 1 : 0, NULL);
    CALL("closedir", "none", NULL, closedir(d));

    /* unlink, rmdir */
    CALL("unlink", "unlink", "sub/e1", unlink("sub/e1"));
    CALL("unlink", "unlink", "missing", unlink("missing"));
    CALL("unlinkat", "rmdir", "sub2", unlinkat(AT_FDCWD, "sub2", AT_REMOVEDIR));
    CALL("rmdir", "rmdir", "sub", rmdir("sub"));
    CALL("rmdir", "rmdir", "sub", rmdir("sub"));                           /* ENOENT */

    /* chdir: relative paths follow it */
    CALL("mkdir", "mkdir", "deeper", mkdir("deeper", 0755));
    CALL("chdir", "none", NULL, chdir("deeper"));
    CALL("stat", "stat", "deeper/nothing", stat("nothing", &st));
    CALL("stat", "stat", "f1", stat("../f1", &st));
    CALL("open", "open", "deeper", dfd = open(".", O_RDONLY | O_DIRECTORY));
    CALL("chdir", "none", NULL, chdir(".."));
    CALL("fchdir", "none", NULL, fchdir(dfd));
    CALL("access", "access", "deeper/nothing", access("nothing", F_OK));
    CALL("close", "close", "deeper", close(dfd));
    CALL("chdir", "none", NULL, chdir(dir));
    CALL("rmdir", "rmdir", "deeper", rmdir("deeper"));
    CALL("unlink", "unlink", "f1", unlink("f1"));
    return 0;
}
