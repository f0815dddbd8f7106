/* stdio_threads: THREADS threads each fopen their own file DIR/tN and fwrite then fprintf to it
 * CALLS times, fwrite CALLS times to one stream shared by all (DIR/shared), fflush and fclose
 * their own; one fclose of the shared stream at the end.
 * usage: stdio_threads DIR THREADS CALLS
 * Prints "wrote B bytes to own files, S bytes to the shared one"; exit 0, or 1 with a message. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { MAX_THREADS = 64, RECORD = 16 };

static const char *dir;
static long calls;
static FILE *shared;

static void *work(void *arg)
{
    long index = (long)arg, written = 0;
    char path[4096], record[RECORD];
    snprintf(path, sizeof path, "%s/t%ld", dir, index);
    memset(record, 'a' + (int)index % 26, sizeof record);
    FILE *own = fopen(path, "w");
    if (!own)
        return (void *)-1L;
    for (long i = 0; i < calls; i++) {
        written += (long)fwrite(record, 1, sizeof record, own);
        written += fprintf(own, "%ld %ld\n", index, i);
        if (fwrite(record, 1, sizeof record, shared) != sizeof record)
            return (void *)-1L;
    }
    if (fflush(own) != 0 || fclose(own) != 0)
        return (void *)-1L;
    return (void *)written;
}

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: stdio_threads DIR THREADS CALLS\n");
        return 2;
    }
    dir = argv[1];
    long threads = atol(argv[2]);
    calls = atol(argv[3]);
    if (threads < 1 || threads > MAX_THREADS || calls < 1)
        return 2;
    char path[4096];
    snprintf(path, sizeof path, "%s/shared", dir);
    shared = fopen(path, "w");
    if (!shared) {
        perror(path);
        return 1;
    }
    pthread_t ids[MAX_THREADS];
    for (long t = 0; t < threads; t++)
        if (pthread_create(&ids[t], NULL, work, (void *)t) != 0)
            return 1;
    long own_bytes = 0;
    for (long t = 0; t < threads; t++) {
        void *written;
        pthread_join(ids[t], &written);
        if ((long)written < 0) {
            fprintf(stderr, "stdio_threads: thread %ld failed: %s\n", t, strerror(errno));
            return 1;
        }
        own_bytes += (long)written;
    }
    if (fclose(shared) != 0)
        return 1;
    printf("wrote %ld bytes to own files, %ld bytes to the shared one\n", own_bytes,
           threads * calls * RECORD);
    return 0;
}
