/* mpi_calls: every rank of an MPI job makes CALLS MPI-IO writes of SMALL bytes to DIR/data, then
 * CALLS reads of them back, all independent or all collective (tests/test_access_patterns.py):
 *   independent   MPI_File_write_at, then MPI_File_read_at
 *   collective    MPI_File_write_at_all, then MPI_File_read_at_all
 * Call i of rank r is at byte offset (i * size + r) * SMALL: the ranks' blocks interleave, so
 * that each rank's requests are not contiguous. Each rank checks what it reads back.
 * usage: mpi_calls independent|collective DIR CALLS
 * Prints "rank R: MODE ok, CALLS calls" per rank; exit 0, or 1 with a message on a failed call
 * or wrong data read back. */
#include "mpi_check.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { SMALL = 4096 };

static void fill(char *buffer, long call)
{
    for (long i = 0; i < SMALL; i++)
        buffer[i] = (char)('a' + (rank * 7 + call * 3 + i) % 26);
}

/* One call of the mode: a write (reading 0) or a read (reading 1) of SMALL bytes at `at`. */
static int call(int collective, MPI_File fh, int reading, MPI_Offset at, char *buffer)
{
    if (collective)
        return reading ? MPI_File_read_at_all(fh, at, buffer, SMALL, MPI_BYTE, MPI_STATUS_IGNORE)
                       : MPI_File_write_at_all(fh, at, buffer, SMALL, MPI_BYTE, MPI_STATUS_IGNORE);
    return reading ? MPI_File_read_at(fh, at, buffer, SMALL, MPI_BYTE, MPI_STATUS_IGNORE)
                   : MPI_File_write_at(fh, at, buffer, SMALL, MPI_BYTE, MPI_STATUS_IGNORE);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    const char *mode = argc == 4 ? argv[1] : "";
    int collective = strcmp(mode, "collective") == 0;
    if (!collective && strcmp(mode, "independent") != 0) {
        fprintf(stderr, "usage: mpi_calls independent|collective DIR CALLS\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    long calls = atol(argv[3]);
    char path[4096];
    snprintf(path, sizeof path, "%s/data", argv[2]);
    MPI_File fh;
    check(MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_CREATE | MPI_MODE_RDWR, MPI_INFO_NULL, &fh), path);
    char *out = malloc(SMALL), *in = malloc(SMALL);
    for (int reading = 0; reading < 2; reading++) {
        for (long i = 0; i < calls; i++) {
            fill(out, i);
            check(call(collective, fh, reading, ((MPI_Offset)i * size + rank) * SMALL, reading ? in : out),
                  reading ? "read" : "write");
            if (reading && memcmp(in, out, SMALL) != 0) {
                fprintf(stderr, "rank %d: call %ld read back other data\n", rank, i);
                MPI_Abort(MPI_COMM_WORLD, 1);
            }
        }
        MPI_Barrier(MPI_COMM_WORLD);
    }
    check(MPI_File_close(&fh), "MPI_File_close");
    free(out);
    free(in);
    printf("rank %d: %s ok, %ld calls\n", rank, mode, calls);
    MPI_Finalize();
    return 0;
}
