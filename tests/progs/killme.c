/* killme FILE COUNTER_FILE
 * Writes 4 KiB blocks with pwrite to FILE forever (offsets cycle over 4 MiB). After each
 * completed pwrite, stores the number of completed calls into the first 8 bytes of
 * COUNTER_FILE through a MAP_SHARED mapping (no syscall, so nothing else is recorded), so a
 * test that SIGKILLs it knows how many ops completed. Never exits by itself. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    if (argc != 3) { fprintf(stderr, "usage: %s FILE COUNTER_FILE\n", argv[0]); return 2; }
    int fd = open(argv[1], O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) { perror(argv[1]); return 1; }
    int cfd = open(argv[2], O_RDWR | O_CREAT | O_TRUNC, 0644);
    if (cfd < 0 || ftruncate(cfd, 4096) != 0) { perror(argv[2]); return 1; }
    volatile uint64_t *counter = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, cfd, 0);
    if (counter == MAP_FAILED) { perror("mmap"); return 1; }
    close(cfd);
    static char block[4096];
    memset(block, 'k', sizeof block);
    for (uint64_t i = 0;; i++) {
        if (pwrite(fd, block, sizeof block, (off_t)(i % 1024) * 4096) != (ssize_t)sizeof block) {
            perror("pwrite");
            return 1;
        }
        __atomic_store_n(counter, i + 1, __ATOMIC_RELEASE);
    }
}
