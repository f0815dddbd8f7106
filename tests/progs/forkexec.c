/* forkexec MODE DIR [PROG ARGS...]
 * Process-lifecycle scenarios for the recorder tests. Every write is a 100-byte pwrite at
 * offset 100*i to a file in DIR; the program prints what it did, including pids.
 *   fork DIR      parent: 3 writes to DIR/parent.dat, fork; child: 5 writes to DIR/child.dat,
 *                 then _exit(7); parent waits, then 2 more writes to DIR/parent.dat.
 *   exec DIR      2 writes to DIR/before.dat, then execs itself as "after DIR" (same pid),
 *                 which does 4 writes to DIR/after.dat and returns 0.
 *   execfail DIR  1 write to DIR/fail.dat, an exec of a missing program (fails with ENOENT),
 *                 then 1 more write to DIR/fail.dat; returns 0.
 *   vfork DIR PROG ARGS...   1 write to DIR/vparent.dat, vfork + execv(PROG, ARGS) in the
 *                 child, waits, prints the child's pid and exit status, 1 more write. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static int open_in(const char *dir, const char *name)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    int fd = open(path, O_WRONLY | O_CREAT, 0644);
    if (fd < 0) { perror(path); exit(1); }
    return fd;
}

static void writes(int fd, int first, int n)
{
    char block[100];
    memset(block, 'w', sizeof block);
    for (int i = first; i < first + n; i++)
        if (pwrite(fd, block, sizeof block, (off_t)i * 100) != (ssize_t)sizeof block) {
            perror("pwrite");
            exit(1);
        }
}

int main(int argc, char **argv)
{
    if (argc < 3) { fprintf(stderr, "usage: %s MODE DIR [PROG ARGS...]\n", argv[0]); return 2; }
    const char *mode = argv[1], *dir = argv[2];
    setvbuf(stdout, NULL, _IONBF, 0);
    if (strcmp(mode, "fork") == 0) {
        int fd = open_in(dir, "parent.dat");
        writes(fd, 0, 3);
        pid_t child = fork();
        if (child < 0) { perror("fork"); return 1; }
        if (child == 0) {
            int cfd = open_in(dir, "child.dat");
            writes(cfd, 0, 5);
            printf("child pid %d ppid %d\n", (int)getpid(), (int)getppid());
            _exit(7);
        }
        int status;
        waitpid(child, &status, 0);
        writes(fd, 3, 2);
        printf("parent pid %d child %d exit %d\n", (int)getpid(), (int)child,
               WIFEXITED(status) ? WEXITSTATUS(status) : -1);
        return 0;
    }
    if (strcmp(mode, "exec") == 0) {
        int fd = open_in(dir, "before.dat");
        writes(fd, 0, 2);
        close(fd);
        printf("exec pid %d\n", (int)getpid());
        execl("/proc/self/exe", argv[0], "after", dir, (char *)NULL);
        perror("exec");
        return 1;
    }
    if (strcmp(mode, "after") == 0) {
        int fd = open_in(dir, "after.dat");
        writes(fd, 0, 4);
        printf("after pid %d\n", (int)getpid());
        return 0;
    }
    if (strcmp(mode, "execfail") == 0) {
        int fd = open_in(dir, "fail.dat");
        writes(fd, 0, 1);
        execl("/nonexistent/ioassess-no-such-program", "x", (char *)NULL);
        printf("exec failed errno %s\n", errno == ENOENT ? "ENOENT" : "other");
        writes(fd, 1, 1);
        printf("execfail pid %d done\n", (int)getpid());
        return 0;
    }
    if (strcmp(mode, "vfork") == 0 && argc >= 4) {
        int fd = open_in(dir, "vparent.dat");
        writes(fd, 0, 1);
        pid_t child = vfork();
        if (child < 0) { perror("vfork"); return 1; }
        if (child == 0) {
            execv(argv[3], argv + 3);
            _exit(127);
        }
        int status;
        waitpid(child, &status, 0);
        writes(fd, 1, 1);
        printf("vfork parent %d child %d exit %d\n", (int)getpid(), (int)child,
               WIFEXITED(status) ? WEXITSTATUS(status) : -1);
        return 0;
    }
    fprintf(stderr, "unknown mode %s\n", mode);
    return 2;
}
