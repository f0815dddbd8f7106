/* sharedpos MODE THREADS BLOCKS FILE
 * THREADS threads call at the position of ONE shared descriptor at the same time, 4 KiB a
 * call, and each learns from the data which offset its call really got; the recorder must
 * record that offset or -1 (unknown), never another (docs/trace-format.md, "Offsets").
 *   read, readv: FILE is first made of BLOCKS blocks of 4 KiB, each holding its own offset
 *     (written with pwrite), then opened once, read-only; every thread reads 4 KiB blocks
 *     through it until end of file (readv: as two 2 KiB halves). The kernel serializes calls
 *     at a shared position, so every call gets one whole block, and its first 8 bytes say
 *     which. The last call of each thread returns 0 at offset BLOCKS * 4096.
 *   write, writev: FILE is created empty and opened once, write-only; the threads write
 *     BLOCKS blocks in all (BLOCKS / THREADS each), each block tagged with its thread and
 *     number; then the file is read back (pread) to learn where each block landed.
 *   own: as read, but each thread opens FILE for itself and reads all of it through its own
 *     descriptor (BLOCKS blocks and the call at the end): descriptions used by one thread
 *     each, in a process with several.
 *   handoff: ROUNDS rounds of read, each through a new descriptor that thread 0 opens (the
 *     recorder reuses the description of the last round's, closed): thread 0 reads BLOCKS / 4
 *     blocks before the others begin (they wait for a flag it sets), then all read at the same
 *     time: a description used by one thread for a while, then by others. Its calls while
 *     alone print alone=1.
 *   signal: as read with THREADS 1, but SIGALRM interrupts the reading thread every 20 us and
 *     its handler reads 512 bytes at the same position (while the thread is inside a read
 *     there, or between two), each into a buffer of its own; the thread reads the file again
 *     from the start (lseek) until the handler has read at least 200 times. The handler's
 *     reads print as "HANDLER off=TRUE res=RESULT buf=ADDRESS", after the thread's.
 * Every 8 bytes of FILE hold their own offset, so any read learns its offset from its data.
 * The threads start together at a barrier. After they have joined, prints one line per call,
 * thread by thread in the order of their calls:
 *   "CALL tid=TID off=TRUE res=RESULT alone=0|1"
 * and exits 0; any failed or short call is an error (exit 1). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <sys/uio.h>
#include <unistd.h>

#define BLOCK 4096

struct call {
    long long offset;          /* the true offset, learned from the data */
    long long result;
    int alone;                 /* handoff: made before the other threads began */
};

#define ROUNDS 64

struct thread {
    pthread_t id;
    int index;
    pid_t tid;
    struct call *calls;
    long count;
};

static int fd, vector, writing, own, handoff, handoff_go, signalled;
static long blocks, per_thread, capacity;

#define HANDLER_READS 200
#define HANDLER_BYTES 512
static struct call handler_calls[4 * HANDLER_READS];
static uint64_t handler_data[4 * HANDLER_READS][HANDLER_BYTES / 8];   /* one buffer a call */
static volatile sig_atomic_t handler_count;

/* mode signal: a read at the interrupted thread's position. */
static void on_alarm(int sig)
{
    (void)sig;
    int saved = errno;
    if (handler_count < (int)(sizeof handler_calls / sizeof *handler_calls)) {
        uint64_t *data = handler_data[handler_count];
        ssize_t n = read(fd, data, HANDLER_BYTES);
        handler_calls[handler_count].offset = n > 0 ? (long long)data[0] : blocks * BLOCK;
        handler_calls[handler_count].result = n;
        handler_count++;
    }
    errno = saved;
}
static const char *path;
static pthread_barrier_t start;

static void fail(const char *what)
{
    perror(what);
    exit(1);
}

/* One read or write of a whole block at the position of `through`: the shared descriptor, or
 * the thread's own in mode own. */
static ssize_t call(int through, void *block)
{
    if (!vector)
        return writing ? write(through, block, BLOCK) : read(through, block, BLOCK);
    struct iovec halves[2] = {{block, BLOCK / 2}, {(char *)block + BLOCK / 2, BLOCK / 2}};
    return writing ? writev(through, halves, 2) : readv(through, halves, 2);
}

/* Reads through `from` until end of file; thread 0 of a handoff lets the others begin after
 * BLOCKS / 4 calls of round `round`. */
static void read_all(struct thread *t, int from, int round)
{
    uint64_t block[BLOCK / 8];
    long first = t->count;
    if (handoff && t->index > 0)
        while (__atomic_load_n(&handoff_go, __ATOMIC_ACQUIRE) != round + 1)
            sched_yield();
    for (;;) {
        if (t->count == capacity)
            fail("more calls than room for them");
        ssize_t n = call(from, block);
        if (signalled && n > 0 && n % HANDLER_BYTES == 0)
            ;                               /* the handler's reads leave a shorter block */
        else if (n != 0 && n != BLOCK)
            fail("short or failed read");
        t->calls[t->count].alone = handoff && t->index == 0 && t->count - first < blocks / 4;
        t->calls[t->count].offset = n ? (long long)block[0] : blocks * BLOCK;
        t->calls[t->count++].result = n;
        if (handoff && t->index == 0 && t->count - first == blocks / 4)
            __atomic_store_n(&handoff_go, round + 1, __ATOMIC_RELEASE);
        if (n == 0 && signalled && handler_count < HANDLER_READS) {
            if (lseek(from, 0, SEEK_SET) != 0)
                fail("lseek");
            continue;                       /* again, until the handler has read enough */
        }
        if (n == 0)
            return;
    }
}

static void *reader(void *arg)
{
    struct thread *t = arg;
    t->tid = gettid();
    if (handoff) {
        for (int round = 0; round < ROUNDS; round++) {
            if (t->index == 0 && (fd = open(path, O_RDONLY)) < 0)
                fail(path);
            pthread_barrier_wait(&start);        /* fd is this round's */
            read_all(t, fd, round);
            pthread_barrier_wait(&start);        /* every thread is done with it */
            if (t->index == 0)
                close(fd);
        }
        return NULL;
    }
    int from = own ? open(path, O_RDONLY) : fd;
    if (from < 0)
        fail(path);
    pthread_barrier_wait(&start);
    if (signalled) {
        sigset_t alarm;
        sigemptyset(&alarm);
        sigaddset(&alarm, SIGALRM);
        struct itimerval every = {{0, 20}, {0, 20}};
        if (pthread_sigmask(SIG_UNBLOCK, &alarm, NULL) != 0 ||
            setitimer(ITIMER_REAL, &every, NULL) != 0)
            fail("setitimer");
    }
    read_all(t, from, 0);
    if (signalled) {
        struct itimerval never = {{0, 0}, {0, 0}};
        sigset_t alarm;
        sigemptyset(&alarm);
        sigaddset(&alarm, SIGALRM);
        setitimer(ITIMER_REAL, &never, NULL);
        pthread_sigmask(SIG_BLOCK, &alarm, NULL);
    }
    if (own)
        close(from);
    return NULL;
}

static void *writer(void *arg)
{
    struct thread *t = arg;
    t->tid = gettid();
    uint64_t block[BLOCK / 8];
    memset(block, 0x5a, sizeof block);
    pthread_barrier_wait(&start);
    for (long i = 0; i < per_thread; i++) {
        block[0] = (uint64_t)t->index;
        block[1] = (uint64_t)i;
        if (call(fd, block) != BLOCK)
            fail("short or failed write");
        t->calls[t->count++].result = BLOCK;
    }
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc != 5) {
        fprintf(stderr, "usage: %s read|readv|write|writev|own|handoff THREADS BLOCKS FILE\n",
                argv[0]);
        return 2;
    }
    const char *mode = argv[1];
    path = argv[4];
    int threads = atoi(argv[2]);
    blocks = atol(argv[3]);
    writing = strncmp(mode, "write", 5) == 0;
    vector = mode[strlen(mode) - 1] == 'v';
    own = strcmp(mode, "own") == 0;
    handoff = strcmp(mode, "handoff") == 0 ? threads : 0;
    signalled = strcmp(mode, "signal") == 0;
    if (signalled) {                        /* the reading thread alone takes SIGALRM */
        if (threads != 1)
            return 2;
        sigset_t alarm;
        sigemptyset(&alarm);
        sigaddset(&alarm, SIGALRM);
        struct sigaction on = {.sa_handler = on_alarm};
        if (pthread_sigmask(SIG_BLOCK, &alarm, NULL) != 0 || sigaction(SIGALRM, &on, NULL) != 0)
            fail("sigaction");
    }
    if (threads < 1 || blocks < threads || blocks % threads || (handoff && blocks < 4))
        return 2;
    per_thread = blocks / threads;
    capacity = (blocks + 1) * (handoff ? ROUNDS : signalled ? 4096 : 1);
    uint64_t block[BLOCK / 8];
    if (!writing) {
        int w = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (w < 0)
            fail(path);
        for (long b = 0; b < blocks; b++) {
            for (size_t i = 0; i < BLOCK / 8; i++)
                block[i] = (uint64_t)b * BLOCK + i * 8;
            if (pwrite(w, block, BLOCK, b * BLOCK) != BLOCK)
                fail("pwrite");
        }
        close(w);
        fd = handoff ? 0 : open(path, O_RDONLY);
    } else {
        fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    }
    if (fd < 0)
        fail(path);
    struct thread *t = calloc((size_t)threads, sizeof *t);
    pthread_barrier_init(&start, NULL, (unsigned)threads);
    for (int i = 0; i < threads; i++) {
        t[i].index = i;
        t[i].calls = calloc((size_t)capacity, sizeof *t[i].calls);
        if (!t[i].calls)
            fail("calloc");
        if (pthread_create(&t[i].id, NULL, writing ? writer : reader, &t[i]) != 0)
            fail("pthread_create");
    }
    for (int i = 0; i < threads; i++)
        pthread_join(t[i].id, NULL);
    if (!handoff)
        close(fd);
    if (writing) {                       /* where did each block land? */
        int r = open(path, O_RDONLY);
        if (r < 0)
            fail(path);
        for (long b = 0; b < blocks; b++) {
            if (pread(r, block, BLOCK, b * BLOCK) != BLOCK || block[0] >= (uint64_t)threads ||
                block[1] >= (uint64_t)per_thread)
                fail("reading back");
            t[block[0]].calls[block[1]].offset = b * BLOCK;
        }
        close(r);
    }
    for (int i = 0; i < threads; i++)
        for (long c = 0; c < t[i].count; c++)
            printf("CALL tid=%d off=%lld res=%lld alone=%d\n", (int)t[i].tid,
                   t[i].calls[c].offset, t[i].calls[c].result, t[i].calls[c].alone);
    for (int h = 0; h < handler_count; h++)
        printf("HANDLER off=%lld res=%lld buf=%llu\n", handler_calls[h].offset,
               handler_calls[h].result, (unsigned long long)(uintptr_t)handler_data[h]);
    return 0;
}
