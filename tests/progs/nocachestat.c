/* nocachestat ERRNO PROGRAM [ARGS...]
 * Runs PROGRAM under a seccomp filter that fails cachestat(2) (x86-64 system call 451) with
 * ERRNO (38: ENOSYS, a kernel without the call; 1: EPERM, a container's policy) and allows
 * every other call: a kernel that refuses the recorder's page-cache samples. */
#define _GNU_SOURCE
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <unistd.h>

#define SYS_CACHESTAT 451

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: nocachestat ERRNO PROGRAM [ARGS...]\n");
        return 2;
    }
    unsigned error = (unsigned)atoi(argv[1]) & SECCOMP_RET_DATA;
    struct sock_filter filter[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_CACHESTAT, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | error),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    struct sock_fprog program = {sizeof filter / sizeof filter[0], filter};
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 ||
        prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &program) != 0) {
        perror("seccomp");
        return 2;
    }
    execv(argv[2], argv + 2);
    perror(argv[2]);
    return 127;
}
