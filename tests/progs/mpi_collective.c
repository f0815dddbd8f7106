/* mpi_collective: every rank of an MPI job does MPI-IO on DIR/data (and DIR/shared), with ROMIO
 * hints that force collective buffering through AGGREGATORS processes: cb_nodes=AGGREGATORS,
 * cb_config_list "*:*" (any process of a host may aggregate), romio_cb_write and romio_cb_read
 * "enable". Each rank checks what it reads back.
 *   collective   each rank writes BLOCK bytes at rank * BLOCK with MPI_File_seek +
 *                MPI_File_write_all, MPI_File_sync, then reads them back with MPI_File_read_all
 *   independent  a view of MPI_INTs at displacement VIEW_DISP; each rank writes BLOCK bytes at
 *                etype offset rank * BLOCK / 4 with MPI_File_write_at, reads them back with
 *                MPI_File_read_at (byte offset VIEW_DISP + rank * BLOCK)
 *   nonblocking  the same without a view, with MPI_File_iwrite_at and MPI_File_iread_at, each
 *                followed by MPI_Wait
 *   every        each recorded data call once, SMALL bytes (SMALL / 4 MPI_INTs) per call, in the
 *                order of data_call(): call i at byte offset (i mod 12 * size + rank) * SMALL
 *                of DIR/data (calls 12 to 23 read what calls 0 to 11 wrote), MPI_File_sync,
 *                then the eight shared_call()s on DIR/shared
 *   errors       DIR/data opened write-only; MPI_File_read_at of SMALL bytes at rank * SMALL
 *                must fail: prints "rank R: error class C" (the MPI error class it returned)
 *   reopen       REOPEN_ROUNDS rounds of: open 8 files DIR/reopen.<rank>.<(round * 8 + k) mod 50>
 *                (MPI_COMM_SELF), MPI_File_write_at of 1 byte at offset round to each, close
 *                them: many handles opened and closed, of 50 files per rank
 * usage: mpi_collective collective|independent|nonblocking|every|errors|reopen DIR [AGGREGATORS]
 * Prints "cb_nodes N" (rank 0: the hint in effect), then "rank R: MODE ok, wrote B bytes" per
 * rank; exit 0, or 1 with a message on a failed call or wrong data read back. */
#include "mpi_check.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { BLOCK = 262144, SMALL = 4096, VIEW_DISP = 4096, REGIONS = 12, REOPEN_ROUNDS = 10000 };

static void fill(char *buffer, long bytes, long region)
{
    for (long i = 0; i < bytes; i++)
        buffer[i] = (char)('a' + (rank * 7 + region * 3 + i) % 26);
}

static void expect(const char *got, long bytes, long region, const char *what)
{
    char *want = malloc(bytes);
    fill(want, bytes, region);
    if (memcmp(got, want, bytes) != 0) {
        fprintf(stderr, "rank %d: %s read back other data\n", rank, what);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    free(want);
}

static MPI_File open_file(const char *dir, const char *name, const char *aggregators, int amode)
{
    MPI_Info info;
    MPI_Info_create(&info);
    MPI_Info_set(info, "cb_nodes", aggregators);
    MPI_Info_set(info, "cb_config_list", "*:*");
    MPI_Info_set(info, "romio_cb_write", "enable");
    MPI_Info_set(info, "romio_cb_read", "enable");
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    MPI_File fh;
    check(MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_CREATE | amode, info, &fh), path);
    MPI_Info_free(&info);
    return fh;
}

static void print_cb_nodes(MPI_File fh)
{
    MPI_Info used;
    char value[64] = "?";
    int found;
    check(MPI_File_get_info(fh, &used), "MPI_File_get_info");
    MPI_Info_get(used, "cb_nodes", sizeof value - 1, value, &found);
    MPI_Info_free(&used);
    if (rank == 0)
        printf("cb_nodes %s\n", value);
    fflush(stdout);
}

static long collective(MPI_File fh)
{
    char *out = malloc(BLOCK), *in = malloc(BLOCK);
    fill(out, BLOCK, 0);
    MPI_Status status;
    check(MPI_File_seek(fh, (MPI_Offset)rank * BLOCK, MPI_SEEK_SET), "MPI_File_seek");
    check(MPI_File_write_all(fh, out, BLOCK, MPI_BYTE, &status), "MPI_File_write_all");
    check(MPI_File_sync(fh), "MPI_File_sync");
    check(MPI_File_seek(fh, (MPI_Offset)rank * BLOCK, MPI_SEEK_SET), "MPI_File_seek");
    check(MPI_File_read_all(fh, in, BLOCK, MPI_BYTE, &status), "MPI_File_read_all");
    expect(in, BLOCK, 0, "MPI_File_read_all");
    free(out);
    free(in);
    return BLOCK;
}

static long independent(MPI_File fh)
{
    char *out = malloc(BLOCK), *in = malloc(BLOCK);
    fill(out, BLOCK, 0);
    check(MPI_File_set_view(fh, VIEW_DISP, MPI_INT, MPI_INT, "native", MPI_INFO_NULL),
          "MPI_File_set_view");
    MPI_Offset at = (MPI_Offset)rank * (BLOCK / 4);
    check(MPI_File_write_at(fh, at, out, BLOCK / 4, MPI_INT, MPI_STATUS_IGNORE), "MPI_File_write_at");
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Status status;
    check(MPI_File_read_at(fh, at, in, BLOCK / 4, MPI_INT, &status), "MPI_File_read_at");
    expect(in, BLOCK, 0, "MPI_File_read_at");
    free(out);
    free(in);
    return BLOCK;
}

static long nonblocking(MPI_File fh)
{
    char *out = malloc(BLOCK), *in = malloc(BLOCK);
    fill(out, BLOCK, 0);
    MPI_Request request;
    MPI_Offset at = (MPI_Offset)rank * BLOCK;
    check(MPI_File_iwrite_at(fh, at, out, BLOCK, MPI_BYTE, &request), "MPI_File_iwrite_at");
    check(MPI_Wait(&request, MPI_STATUS_IGNORE), "MPI_Wait");
    MPI_Barrier(MPI_COMM_WORLD);
    check(MPI_File_iread_at(fh, at, in, BLOCK, MPI_BYTE, &request), "MPI_File_iread_at");
    check(MPI_Wait(&request, MPI_STATUS_IGNORE), "MPI_Wait");
    expect(in, BLOCK, 0, "MPI_File_iread_at");
    free(out);
    free(in);
    return BLOCK;
}

static long errors(MPI_File fh)
{
    char buffer[SMALL];
    int rc = MPI_File_read_at(fh, (MPI_Offset)rank * SMALL, buffer, SMALL, MPI_BYTE, MPI_STATUS_IGNORE);
    int class = MPI_SUCCESS;
    MPI_Error_class(rc, &class);
    if (rc == MPI_SUCCESS) {
        fprintf(stderr, "rank %d: MPI_File_read_at of a write-only file succeeded\n", rank);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    printf("rank %d: error class %d\n", rank, class);
    return 0;
}

static long reopen(const char *dir)
{
    char path[4096], byte = 'r';
    MPI_File files[8];
    for (int round = 0; round < REOPEN_ROUNDS; round++) {
        for (int k = 0; k < 8; k++) {
            snprintf(path, sizeof path, "%s/reopen.%d.%d", dir, rank, (round * 8 + k) % 50);
            check(MPI_File_open(MPI_COMM_SELF, path, MPI_MODE_CREATE | MPI_MODE_RDWR, MPI_INFO_NULL,
                                &files[k]), path);
        }
        for (int k = 0; k < 8; k++) {
            check(MPI_File_write_at(files[k], round, &byte, 1, MPI_BYTE, MPI_STATUS_IGNORE),
                  "MPI_File_write_at");
            check(MPI_File_close(&files[k]), "MPI_File_close");
        }
    }
    return 8L * REOPEN_ROUNDS;
}

/* ---- every: each recorded call once ---- */

enum { COUNT = SMALL / 4 };

static void seek(MPI_File fh, MPI_Offset at)
{
    check(MPI_File_seek(fh, at, MPI_SEEK_SET), "MPI_File_seek");
}

static void wait(MPI_Request *request)
{
    check(MPI_Wait(request, MPI_STATUS_IGNORE), "MPI_Wait");
}

/* Call i of the data file: i < REGIONS writes region i, the others read region i - REGIONS. */
static int data_call(MPI_File fh, int i, char *buffer)
{
    MPI_Offset at = ((MPI_Offset)(i % REGIONS) * size + rank) * SMALL;
    MPI_Request request;
    MPI_Status status;
    switch (i) {
    case 0: seek(fh, at); return MPI_File_write(fh, buffer, COUNT, MPI_INT, &status);
    case 1: return MPI_File_write_at(fh, at, buffer, COUNT, MPI_INT, &status);
    case 2: seek(fh, at); return MPI_File_write_all(fh, buffer, COUNT, MPI_INT, &status);
    case 3: return MPI_File_write_at_all(fh, at, buffer, COUNT, MPI_INT, &status);
    case 4: seek(fh, at); check(MPI_File_iwrite(fh, buffer, COUNT, MPI_INT, &request), "iwrite");
        wait(&request); return MPI_SUCCESS;
    case 5: check(MPI_File_iwrite_at(fh, at, buffer, COUNT, MPI_INT, &request), "iwrite_at");
        wait(&request); return MPI_SUCCESS;
    case 6: seek(fh, at); check(MPI_File_iwrite_all(fh, buffer, COUNT, MPI_INT, &request), "iwrite_all");
        wait(&request); return MPI_SUCCESS;
    case 7: check(MPI_File_iwrite_at_all(fh, at, buffer, COUNT, MPI_INT, &request), "iwrite_at_all");
        wait(&request); return MPI_SUCCESS;
    case 8: seek(fh, at); check(MPI_File_write_all_begin(fh, buffer, COUNT, MPI_INT), "write_all_begin");
        return MPI_File_write_all_end(fh, buffer, &status);
    case 9: check(MPI_File_write_at_all_begin(fh, at, buffer, COUNT, MPI_INT), "write_at_all_begin");
        return MPI_File_write_at_all_end(fh, buffer, &status);
    case 10: return MPI_File_write_at_c(fh, at, buffer, (MPI_Count)COUNT, MPI_INT, &status);
    case 11: seek(fh, at); return MPI_File_write_all_c(fh, buffer, (MPI_Count)COUNT, MPI_INT, &status);
    case 12: seek(fh, at); return MPI_File_read(fh, buffer, COUNT, MPI_INT, &status);
    case 13: return MPI_File_read_at(fh, at, buffer, COUNT, MPI_INT, &status);
    case 14: seek(fh, at); return MPI_File_read_all(fh, buffer, COUNT, MPI_INT, &status);
    case 15: return MPI_File_read_at_all(fh, at, buffer, COUNT, MPI_INT, &status);
    case 16: seek(fh, at); check(MPI_File_iread(fh, buffer, COUNT, MPI_INT, &request), "iread");
        wait(&request); return MPI_SUCCESS;
    case 17: check(MPI_File_iread_at(fh, at, buffer, COUNT, MPI_INT, &request), "iread_at");
        wait(&request); return MPI_SUCCESS;
    case 18: seek(fh, at); check(MPI_File_iread_all(fh, buffer, COUNT, MPI_INT, &request), "iread_all");
        wait(&request); return MPI_SUCCESS;
    case 19: check(MPI_File_iread_at_all(fh, at, buffer, COUNT, MPI_INT, &request), "iread_at_all");
        wait(&request); return MPI_SUCCESS;
    case 20: seek(fh, at); check(MPI_File_read_all_begin(fh, buffer, COUNT, MPI_INT), "read_all_begin");
        return MPI_File_read_all_end(fh, buffer, &status);
    case 21: check(MPI_File_read_at_all_begin(fh, at, buffer, COUNT, MPI_INT), "read_at_all_begin");
        return MPI_File_read_at_all_end(fh, buffer, &status);
    case 22: return MPI_File_read_at_c(fh, at, buffer, (MPI_Count)COUNT, MPI_INT, &status);
    default: seek(fh, at); return MPI_File_read_all_c(fh, buffer, (MPI_Count)COUNT, MPI_INT, &status);
    }
}

/* Shared file pointer calls: four writes, back to the start, four reads. */
static int shared_call(MPI_File fh, int i, char *buffer)
{
    MPI_Request request;
    MPI_Status status;
    switch (i) {
    case 0: return MPI_File_write_shared(fh, buffer, COUNT, MPI_INT, &status);
    case 1: return MPI_File_write_ordered(fh, buffer, COUNT, MPI_INT, &status);
    case 2: check(MPI_File_iwrite_shared(fh, buffer, COUNT, MPI_INT, &request), "iwrite_shared");
        wait(&request); return MPI_SUCCESS;
    case 3: check(MPI_File_write_ordered_begin(fh, buffer, COUNT, MPI_INT), "write_ordered_begin");
        return MPI_File_write_ordered_end(fh, buffer, &status);
    case 4: check(MPI_File_seek_shared(fh, 0, MPI_SEEK_SET), "seek_shared");
        return MPI_File_read_shared(fh, buffer, COUNT, MPI_INT, &status);
    case 5: return MPI_File_read_ordered(fh, buffer, COUNT, MPI_INT, &status);
    case 6: check(MPI_File_iread_shared(fh, buffer, COUNT, MPI_INT, &request), "iread_shared");
        wait(&request); return MPI_SUCCESS;
    default: check(MPI_File_read_ordered_begin(fh, buffer, COUNT, MPI_INT), "read_ordered_begin");
        return MPI_File_read_ordered_end(fh, buffer, &status);
    }
}

static long every(MPI_File fh, MPI_File shared)
{
    char *buffer = malloc(SMALL);
    long written = 0;
    for (int i = 0; i < 2 * REGIONS; i++) {
        if (i < REGIONS)
            fill(buffer, SMALL, i);
        char name[32];
        snprintf(name, sizeof name, "data call %d", i);
        check(data_call(fh, i, buffer), name);
        if (i >= REGIONS)
            expect(buffer, SMALL, i - REGIONS, name);
        else
            written += SMALL;
        MPI_Barrier(MPI_COMM_WORLD);
    }
    check(MPI_File_sync(fh), "MPI_File_sync");
    fill(buffer, SMALL, 0);
    for (int i = 0; i < 8; i++) {
        char name[32];
        snprintf(name, sizeof name, "shared call %d", i);
        check(shared_call(shared, i, buffer), name);
        written += i < 4 ? SMALL : 0;
        MPI_Barrier(MPI_COMM_WORLD);
    }
    free(buffer);
    return written;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (argc < 3) {
        fprintf(stderr, "usage: mpi_collective collective|independent|nonblocking|every|errors|reopen "
                        "DIR [AGGREGATORS]\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    const char *mode = argv[1], *aggregators = argc > 3 ? argv[3] : "2";
    int write_only = strcmp(mode, "errors") == 0;
    MPI_File fh = open_file(argv[2], "data", aggregators, write_only ? MPI_MODE_WRONLY : MPI_MODE_RDWR);
    print_cb_nodes(fh);
    long written = 0;
    if (strcmp(mode, "collective") == 0) {
        written = collective(fh);
    } else if (strcmp(mode, "independent") == 0) {
        written = independent(fh);
    } else if (strcmp(mode, "nonblocking") == 0) {
        written = nonblocking(fh);
    } else if (strcmp(mode, "every") == 0) {
        MPI_File shared = open_file(argv[2], "shared", aggregators, MPI_MODE_RDWR);
        written = every(fh, shared);
        check(MPI_File_close(&shared), "MPI_File_close");
    } else if (write_only) {
        written = errors(fh);
    } else if (strcmp(mode, "reopen") == 0) {
        written = reopen(argv[2]);
    } else {
        fprintf(stderr, "mpi_collective: unknown mode %s\n", mode);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    check(MPI_File_close(&fh), "MPI_File_close");
    MPI_Barrier(MPI_COMM_WORLD);
    printf("rank %d: %s ok, wrote %ld bytes\n", rank, mode, written);
    MPI_Finalize();
    return 0;
}
