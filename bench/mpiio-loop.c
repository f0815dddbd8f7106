/*
 * MPI-IO overhead probe: one MPI process issues CALLS 1-byte reads of a page-cached file, each
 * an MPI_File_read_at (mode "at": explicit offset) or an MPI_File_read (mode "pointer": the
 * individual file pointer), with a status, and times them in batches of BATCH calls. Batches
 * alternate between the MPI_ name and the PMPI_ name, both measured side by side in one
 * process: an MPI-IO recorder that defines both names (libioassess-mpiio.so, like Darshan's
 * MPI-IO module) records both, so with it preloaded they cost the same. Offsets run through the file, which must hold at least CALLS + BATCH
 * bytes. Prints two lines, MPI_ then PMPI_ batches: the median batch's cost per call and the
 * mean cost per call over the batches, in nanoseconds; then the process's peak resident memory
 * (VmHWM) in KiB. ROMIO turns each call into one pread.
 * usage: mpiexec -n 1 mpiio-loop FILE CALLS BATCH at|pointer
 */
#define _GNU_SOURCE
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "probe.h"

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    if (argc != 5) {
        fprintf(stderr, "usage: %s FILE CALLS BATCH at|pointer\n", argv[0]);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    long calls = atol(argv[2]), batch = atol(argv[3]);
    int at = strcmp(argv[4], "at") == 0;
    MPI_File fh;
    if (MPI_File_open(MPI_COMM_SELF, argv[1], MPI_MODE_RDONLY, MPI_INFO_NULL, &fh) != MPI_SUCCESS) {
        fprintf(stderr, "%s: cannot open\n", argv[1]);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    char byte;
    MPI_Status status;
    MPI_Offset offset = 0;
    for (long i = 0; i < batch; i++, offset++)    /* warm the page cache and the code path */
        MPI_File_read_at(fh, offset, &byte, 1, MPI_BYTE, &status);
    MPI_File_seek(fh, offset, MPI_SEEK_SET);
    long batches = calls / batch / 2;
    double *per_call[2] = {malloc(sizeof(double) * batches), malloc(sizeof(double) * batches)};
    for (long b = 0; b < 2 * batches; b++) {
        int profiled = b % 2;                   /* 0: MPI_File_*, 1: PMPI_File_* */
        double start = now_ns();
        for (long i = 0; i < batch; i++, offset++) {
            int rc = at ? (profiled ? PMPI_File_read_at : MPI_File_read_at)(fh, offset, &byte, 1, MPI_BYTE,
                                                                             &status)
                        : (profiled ? PMPI_File_read : MPI_File_read)(fh, &byte, 1, MPI_BYTE, &status);
            if (rc != MPI_SUCCESS)
                MPI_Abort(MPI_COMM_WORLD, 3);
        }
        per_call[profiled][b / 2] = (now_ns() - start) / batch;
    }
    for (int profiled = 0; profiled < 2; profiled++) {
        double median, mean;
        summarise_batches(per_call[profiled], batches, &median, &mean);
        printf("%.2f %.2f\n", median, mean);
        free(per_call[profiled]);
    }
    MPI_File_close(&fh);
    print_peak_memory();
    MPI_Finalize();
    return 0;
}
