/* fdswap VICTIM DIR OPS_PER_THREAD
 * An application that swaps files under low descriptor numbers while it does I/O: VICTIM
 * (an existing file whose byte i is (i * 131 + 7) & 0xff) is opened at descriptor 200;
 * 160 files DIR/w000 .. DIR/w159 are created at descriptors 300 and up; one thread loops
 * dup2(200, k); close(k) for k = 3..9 (every other round through raw system calls, which no
 * wrapper sees) while 160 threads each pwrite OPS_PER_THREAD blocks of 64 bytes into their own
 * file. Then VICTIM is read back through descriptor 200 and compared with its pattern.
 * Prints "writes N victim ok" (N: pwrites that wrote 64 bytes) or "victim corrupt at offset
 * X"; exits 0 only when every pwrite wrote its block and the victim is intact. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#define NTHREADS 160
#define VICTIM_FD 200
#define FIRST_WORKER_FD 300

static long ops;
static long written[NTHREADS];
static int stop;
static pthread_barrier_t barrier;

static unsigned char pattern(uint64_t offset)
{
    return (unsigned char)((offset * 131 + 7) & 0xff);
}

static void *swapper(void *unused)
{
    (void)unused;
    pthread_barrier_wait(&barrier);
    for (long round = 0; !__atomic_load_n(&stop, __ATOMIC_RELAXED); round++)
        for (int k = 3; k <= 9; k++) {
            if (round % 2) {
                syscall(SYS_dup2, VICTIM_FD, k);
                syscall(SYS_close, k);
            } else {
                dup2(VICTIM_FD, k);
                close(k);
            }
        }
    return NULL;
}

static void *worker(void *arg)
{
    int t = (int)(intptr_t)arg;
    char block[64];
    memset(block, 'a' + t % 26, sizeof block);
    pthread_barrier_wait(&barrier);
    for (long i = 0; i < ops; i++)
        if (pwrite(FIRST_WORKER_FD + t, block, sizeof block, i * (off_t)sizeof block) == sizeof block)
            written[t]++;
    return NULL;
}

/* The first offset where the victim differs from its pattern (or its size changed), -1 if none. */
static long long victim_damage(off_t expected_size)
{
    struct stat st;
    if (fstat(VICTIM_FD, &st) != 0)
        return 0;
    if (st.st_size != expected_size)
        return st.st_size;
    static unsigned char buf[1 << 20];
    for (off_t at = 0; at < expected_size;) {
        ssize_t n = pread(VICTIM_FD, buf, sizeof buf, at);
        if (n <= 0)
            return at;
        for (ssize_t i = 0; i < n; i++)
            if (buf[i] != pattern((uint64_t)(at + i)))
                return at + i;
        at += n;
    }
    return -1;
}

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: fdswap VICTIM DIR OPS_PER_THREAD\n");
        return 2;
    }
    ops = atol(argv[3]);
    int fd = open(argv[1], O_RDWR);
    if (fd < 0 || dup2(fd, VICTIM_FD) != VICTIM_FD) {
        perror(argv[1]);
        return 2;
    }
    close(fd);
    struct stat victim;
    if (fstat(VICTIM_FD, &victim) != 0) {
        perror(argv[1]);
        return 2;
    }
    for (int t = 0; t < NTHREADS; t++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/w%03d", argv[2], t);
        fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd < 0 || dup2(fd, FIRST_WORKER_FD + t) != FIRST_WORKER_FD + t) {
            perror(path);
            return 2;
        }
        close(fd);
    }
    pthread_t threads[NTHREADS + 1];
    pthread_barrier_init(&barrier, NULL, NTHREADS + 1);
    pthread_create(&threads[NTHREADS], NULL, swapper, NULL);
    for (int t = 0; t < NTHREADS; t++)
        pthread_create(&threads[t], NULL, worker, (void *)(intptr_t)t);
    for (int t = 0; t < NTHREADS; t++)
        pthread_join(threads[t], NULL);
    __atomic_store_n(&stop, 1, __ATOMIC_RELAXED);
    pthread_join(threads[NTHREADS], NULL);
    long total = 0;
    for (int t = 0; t < NTHREADS; t++)
        total += written[t];
    long long damage = victim_damage(victim.st_size);
    if (damage >= 0) {
        printf("victim corrupt at offset %lld\n", damage);
        return 1;
    }
    printf("writes %ld victim ok\n", total);
    return total == NTHREADS * ops ? 0 : 1;
}
