/* fillup DIR READS
 * Fills the file system DIR is on: writes DIR/fill, 1 MiB and then 4 KiB at a time, until a
 * write fails with ENOSPC, and prints "full"; then makes READS preads of 64 bytes of the file
 * (a recorded op each) and prints how many read 64 bytes. The output is the same whatever
 * space there was. Exits 0, or 1 if a write fails otherwise or a pread fails. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static char block[1 << 20];

int main(int argc, char **argv)
{
    char path[4096];
    if (argc != 3 || snprintf(path, sizeof path, "%s/fill", argv[1]) >= (int)sizeof path)
        return 2;
    int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
    if (fd < 0)
        return 1;
    while (write(fd, block, sizeof block) > 0)
        ;
    while (errno == ENOSPC && write(fd, block, 4096) > 0)
        ;
    if (errno != ENOSPC)
        return 1;
    printf("full\n");
    long reads = strtol(argv[2], NULL, 10), whole = 0;
    for (long i = 0; i < reads; i++)
        whole += pread(fd, block, 64, (i * 4096) % (1 << 20)) == 64;
    printf("read %ld of %ld\n", whole, reads);
    return whole == reads ? 0 : 1;
}
