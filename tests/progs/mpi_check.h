/* What the MPI test programs share: this rank and the job's size (main sets them), and check(),
 * which ends the whole job with the failed call's message and the rank in front of it. */
#ifndef MPI_CHECK_H
#define MPI_CHECK_H

#include <mpi.h>
#include <stdio.h>

static int rank, size;

static void check(int rc, const char *what)
{
    if (rc != MPI_SUCCESS) {
        char text[MPI_MAX_ERROR_STRING];
        int length;
        MPI_Error_string(rc, text, &length);
        fprintf(stderr, "rank %d: %s: %s\n", rank, what, text);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
}

#endif
