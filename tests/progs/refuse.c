/* refuse CALL ERRNO PROGRAM [ARGS...]
 * Runs PROGRAM under a seccomp filter that fails the x86-64 system call number CALL with ERRNO
 * and allows every other call: an older kernel, or a container's policy. cachestat(2) (451)
 * with 38 (ENOSYS, a kernel without the call) or 1 (EPERM, a policy) refuses the recorder's
 * page-cache samples; madvise (28) with 22 (EINVAL) is a kernel before 5.14, which has no
 * MADV_POPULATE_WRITE. */
#define _GNU_SOURCE
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    if (argc < 4) {
        fprintf(stderr, "usage: refuse CALL ERRNO PROGRAM [ARGS...]\n");
        return 2;
    }
    unsigned call = (unsigned)atoi(argv[1]);
    unsigned error = (unsigned)atoi(argv[2]) & SECCOMP_RET_DATA;
    struct sock_filter filter[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, call, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | error),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    struct sock_fprog program = {sizeof filter / sizeof filter[0], filter};
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 ||
        prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &program) != 0) {
        perror("seccomp");
        return 2;
    }
    execv(argv[3], argv + 3);
    perror(argv[3]);
    return 127;
}
