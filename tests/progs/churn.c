/* churn FILE NTHREADS OPS
 * Thread churn: NTHREADS short-lived threads, 4 alive at a time, each making OPS pwrites of
 * 64 bytes to FILE at offsets of its own, then exiting. Prints the number of calls made. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int fd;
static long ops, bad;

static void *worker(void *arg)
{
    long t = (long)(intptr_t)arg;
    char block[64];
    memset(block, 'c', sizeof block);
    for (long i = 0; i < ops; i++)
        if (pwrite(fd, block, sizeof block, (off_t)((t * ops + i) * 64)) != (ssize_t)sizeof block)
            __atomic_add_fetch(&bad, 1, __ATOMIC_RELAXED);
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc != 4) { fprintf(stderr, "usage: %s FILE NTHREADS OPS\n", argv[0]); return 2; }
    long n = atol(argv[2]);
    ops = atol(argv[3]);
    fd = open(argv[1], O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) { perror(argv[1]); return 1; }
    for (long t = 0; t < n; t += 4) {
        pthread_t th[4];
        int k = 0;
        for (; k < 4 && t + k < n; k++)
            if (pthread_create(&th[k], NULL, worker, (void *)(intptr_t)(t + k)) != 0) { perror("pthread"); return 1; }
        for (int j = 0; j < k; j++)
            pthread_join(th[j], NULL);
    }
    printf("threads %ld pwrites %ld bad %ld\n", n, n * ops, bad);
    return bad ? 1 : 0;
}
