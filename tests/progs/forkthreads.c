/* forkthreads DIR [THREADS]
 * THREADS threads (default 4, at most 256) each make 2000 pwrites of 512 bytes to
 * DIR/threads.dat (own regions) while the main thread forks 20 children one after the
 * other; child i makes 10 pwrites of 100 bytes to DIR/child<i> and _exits(0). Prints the
 * children's pids and "ok" when every call worked.
 * Checks that fork in a multi-threaded process neither deadlocks nor mixes up traces. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static int fd;
static long bad;

static void *worker(void *arg)
{
    long t = (long)(intptr_t)arg;
    char block[512];
    memset(block, 't', sizeof block);
    for (long i = 0; i < 2000; i++)
        if (pwrite(fd, block, sizeof block, (off_t)((t * 2000 + i) * 512)) != (ssize_t)sizeof block)
            __atomic_add_fetch(&bad, 1, __ATOMIC_RELAXED);
    return NULL;
}

int main(int argc, char **argv)
{
    int threads = argc == 3 ? atoi(argv[2]) : 4;
    if (argc < 2 || argc > 3 || threads < 1 || threads > 256) {
        fprintf(stderr, "usage: %s DIR [THREADS]\n", argv[0]);
        return 2;
    }
    char path[4096];
    snprintf(path, sizeof path, "%s/threads.dat", argv[1]);
    fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) { perror(path); return 1; }
    pthread_t th[256];
    for (long t = 0; t < threads; t++)
        pthread_create(&th[t], NULL, worker, (void *)(intptr_t)t);
    for (int i = 0; i < 20; i++) {
        fflush(stdout);
        pid_t child = fork();
        if (child < 0) { perror("fork"); return 1; }
        if (child == 0) {
            char cpath[4096];
            snprintf(cpath, sizeof cpath, "%s/child%d", argv[1], i);
            int cfd = open(cpath, O_WRONLY | O_CREAT | O_TRUNC, 0644);
            char block[100];
            memset(block, 'c', sizeof block);
            for (int k = 0; k < 10; k++)
                if (cfd < 0 || pwrite(cfd, block, sizeof block, k * 100) != (ssize_t)sizeof block)
                    _exit(1);
            _exit(0);
        }
        int status;
        waitpid(child, &status, 0);
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) bad++;
        printf("child %d pid %d\n", i, (int)child);
    }
    for (int t = 0; t < threads; t++)
        pthread_join(th[t], NULL);
    printf(bad ? "bad %ld\n" : "ok\n", bad);
    return bad ? 1 : 0;
}
