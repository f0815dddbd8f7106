/* mpi_layouts: every rank of an MPI job writes BLOCKS blocks of BLOCK bytes with pwrite in
 * one of three I/O models, then reads them back with pread:
 *   fpp     file per process: DIR/rank.<rank>
 *   shared  one shared file: DIR/shared, rank r's blocks at offsets (i * size + r) * BLOCK
 *   node    file per node: DIR/node.<rank / PER_NODE>, shared by PER_NODE consecutive ranks
 * usage: mpi_layouts fpp|shared|node DIR [PER_NODE [KILLED_RANK [HEAVY_RANK [HEAVY]]]]
 * Prints "rank R of N: wrote B bytes" per rank; exit 0, or 1 with a message on an I/O error.
 * KILLED_RANK (a walltime kill simulated): that rank sends itself SIGKILL after its writes;
 * -1: none. HEAVY_RANK (an imbalanced job): that rank writes and reads HEAVY (default 64) times
 * the blocks. */
#include <fcntl.h>
#include <mpi.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { BLOCK = 65536, BLOCKS = 16, HEAVY = 64 };

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (argc < 3) {
        fprintf(stderr, "usage: mpi_layouts fpp|shared|node DIR [PER_NODE [KILLED_RANK [HEAVY_RANK [HEAVY]]]]\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    int per_node = argc > 3 ? atoi(argv[3]) : 4;
    int killed_rank = argc > 4 ? atoi(argv[4]) : -1;
    int heavy = argc > 6 ? atoi(argv[6]) : HEAVY;
    int blocks = argc > 5 && atoi(argv[5]) == rank ? BLOCKS * heavy : BLOCKS;
    char path[4096];
    int slot = rank, stride = 1;   /* block i of this rank goes to (i * stride + slot) * BLOCK */
    if (strcmp(argv[1], "fpp") == 0) {
        snprintf(path, sizeof path, "%s/rank.%d", argv[2], rank);
        slot = 0;
    } else if (strcmp(argv[1], "shared") == 0) {
        snprintf(path, sizeof path, "%s/shared", argv[2]);
        stride = size;
    } else {
        snprintf(path, sizeof path, "%s/node.%d", argv[2], rank / per_node);
        slot = rank % per_node;
        stride = per_node;
    }
    int fd = open(path, O_RDWR | O_CREAT, 0644);
    char *buffer = malloc(BLOCK);
    if (fd < 0 || !buffer) {
        perror(path);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    memset(buffer, 'a' + rank % 26, BLOCK);
    long written = 0;
    for (int i = 0; i < blocks; i++) {
        off_t offset = ((off_t)i * stride + slot) * BLOCK;
        if (pwrite(fd, buffer, BLOCK, offset) != BLOCK) {
            perror("pwrite");
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
        written += BLOCK;
    }
    if (rank == killed_rank)
        raise(SIGKILL);
    MPI_Barrier(MPI_COMM_WORLD);
    for (int i = 0; i < blocks; i++) {
        off_t offset = ((off_t)i * stride + slot) * BLOCK;
        if (pread(fd, buffer, BLOCK, offset) != BLOCK || buffer[0] != 'a' + rank % 26) {
            fprintf(stderr, "rank %d: read back wrong data\n", rank);
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
    }
    close(fd);
    free(buffer);
    printf("rank %d of %d: wrote %ld bytes\n", rank, size, written);
    MPI_Finalize();
    return 0;
}
