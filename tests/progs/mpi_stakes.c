/* mpi_stakes: MPI jobs whose I/O a fix shortens by a known amount, each beside its fixed twin
 * (bench/validate_stakes.py measures what the fix saves against the report's seconds at stake;
 * tests/test_stakes.py checks the report of each unfixed job). All read DIR/input, BLOCKS blocks
 * of BLOCK bytes that the caller wrote and synced beforehand, from the storage device (not the
 * page cache), so that the I/O waits for the device, not for a CPU, and ranks side by side on a
 * small machine overlap it:
 *   alone        rank 0 reads all BLOCKS blocks with O_DIRECT preads, the other ranks none; then
 *                a barrier: the job waits for rank 0
 *   split        the fixed twin: the same blocks split evenly over the ranks, rank r reading its
 *                contiguous share; then a barrier (also the job of balanced ranks)
 *   blocking     each rank drops its contiguous share of DIR/input from the page cache
 *                (posix_fadvise DONTNEED), computes (WORK million steps), then reads its share
 *                with MPI_File_read_all: the ranks wait in a blocking collective read
 *   nonblocking  the fixed twin: the read is MPI_File_iread_at, started before the same
 *                computation, which calls MPI_Test now and then, and finished with MPI_Wait.
 *                ROMIO (MPICH 4.0.2) runs it through POSIX aio, whose thread reads while the
 *                rank computes; its MPI_File_iread_all of a contiguous share makes the read
 *                inside the call (strace: the pread in the rank's own thread, before the
 *                computation), which overlaps nothing
 * usage: mpi_stakes alone|split|blocking|nonblocking DIR BLOCKS [WORK]
 * Its barriers sleep while they wait (wait_for_all). Prints "rank R: MODE ok, read B bytes" per
 * rank and, on rank 0, "elapsed S" (seconds by MPI_Wtime from the barrier after MPI_Init to the
 * last barrier); exit 0, or 1 with a message on a failed call or a short read. */
#define _GNU_SOURCE
#include "mpi_check.h"
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

enum { BLOCK = 4096, STEPS_PER_TEST = 100000 };

static void fail(const char *what)
{
    perror(what);
    MPI_Abort(MPI_COMM_WORLD, 1);
}

/* A barrier that sleeps while it waits (MPICH's spins): a waiting rank leaves the CPU to those
 * whose I/O completes, as on a machine with a core per rank. */
static void wait_for_all(void)
{
    MPI_Request request;
    int done = 0;
    check(MPI_Ibarrier(MPI_COMM_WORLD, &request), "MPI_Ibarrier");
    while (check(MPI_Test(&request, &done, MPI_STATUS_IGNORE), "MPI_Test"), !done)
        usleep(1000);
}

/* With MPI_STAKES_CGROUP set (bench/validate_stakes.py: storage that serves each rank at a
 * rate of its own, as a parallel file system serves each client), the rank moves into the
 * cgroup MPI_STAKES_CGROUP<rank> whose reads the kernel throttles. By system calls, not libc's:
 * the harness's step, not the job's I/O, stays out of the recorder's trace. */
static void enter_cgroup(void)
{
    const char *prefix = getenv("MPI_STAKES_CGROUP");
    if (prefix == NULL)
        return;
    char path[4096], pid[32];
    snprintf(path, sizeof path, "%s%d/cgroup.procs", prefix, rank);
    long n = snprintf(pid, sizeof pid, "%d", (int)getpid());
    long fd = syscall(SYS_openat, AT_FDCWD, path, O_WRONLY | O_CLOEXEC);
    if (fd < 0 || syscall(SYS_write, fd, pid, n) != n)
        fail(path);
    syscall(SYS_close, fd);
}

/* alone, split: blocks blocks from block first on, one O_DIRECT pread each. */
static long read_direct(const char *path, long first, long blocks)
{
    void *buffer = NULL;
    int fd = open(path, O_RDONLY | O_DIRECT);
    if (fd < 0 || posix_memalign(&buffer, BLOCK, BLOCK) != 0)
        fail(path);
    for (long i = 0; i < blocks; i++)
        if (pread(fd, buffer, BLOCK, (first + i) * BLOCK) != BLOCK)
            fail("pread");
    close(fd);
    free(buffer);
    return blocks * BLOCK;
}

/* WORK million steps of arithmetic; with a request, MPI_Test on it every STEPS_PER_TEST steps. */
static double compute(long work, MPI_Request *request)
{
    double x = 1.0;
    int done = request == NULL;
    for (long i = 0; i < work * 1000000; i++) {
        x = x * 1.0000001 + 1e-9;
        if (!done && i % STEPS_PER_TEST == 0)
            check(MPI_Test(request, &done, MPI_STATUS_IGNORE), "MPI_Test");
    }
    return x;
}

/* blocking, nonblocking: blocks blocks from block first on, uncached, read collectively after
 * the computation (nonblocking: during it). */
static long read_after_compute(const char *path, long first, long blocks, long work, int nonblocking)
{
    MPI_Offset bytes = (MPI_Offset)blocks * BLOCK;
    int fd = open(path, O_RDONLY);
    if (fd < 0 || posix_fadvise(fd, first * BLOCK, bytes, POSIX_FADV_DONTNEED) != 0)
        fail(path);
    close(fd);
    char *in = malloc(bytes);
    if (in == NULL)
        fail("malloc");
    memset(in, 0, bytes);   /* its pages faulted in now: the read then copies, and waits */
    MPI_File fh;
    MPI_Status status;
    check(MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_RDONLY, MPI_INFO_NULL, &fh), path);
    double x;
    if (nonblocking) {
        MPI_Request request;
        check(MPI_File_iread_at(fh, first * BLOCK, in, (int)bytes, MPI_BYTE, &request), "MPI_File_iread_at");
        x = compute(work, &request);
        check(MPI_Wait(&request, &status), "MPI_Wait");
    } else {
        x = compute(work, NULL);
        check(MPI_File_seek(fh, first * BLOCK, MPI_SEEK_SET), "MPI_File_seek");
        check(MPI_File_read_all(fh, in, (int)bytes, MPI_BYTE, &status), "MPI_File_read_all");
    }
    check(MPI_File_close(&fh), "MPI_File_close");
    int count = (int)bytes;   /* ROMIO's MPI_Wait of a non-blocking read may leave the count 0 */
    if (!nonblocking)
        MPI_Get_count(&status, MPI_BYTE, &count);
    if (count != bytes || x < 1.0) {
        fprintf(stderr, "rank %d: read %d of %lld bytes\n", rank, count, (long long)bytes);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    free(in);
    return bytes;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    const char *mode = argc >= 4 ? argv[1] : "";
    const char *modes[] = {"alone", "split", "blocking", "nonblocking"};
    int m = 0;
    while (m < 4 && strcmp(mode, modes[m]) != 0)
        m++;
    if (m == 4) {
        fprintf(stderr, "usage: mpi_stakes alone|split|blocking|nonblocking DIR BLOCKS [WORK]\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    long blocks = atol(argv[3]), work = argc > 4 ? atol(argv[4]) : 0, moved = 0;
    /* this rank's share: rank 0 all of them (alone), else an even contiguous split */
    long share = blocks / size, first = rank * share;
    if (m == 0)
        share = rank == 0 ? blocks : 0, first = 0;
    char path[4096];
    snprintf(path, sizeof path, "%s/input", argv[2]);
    enter_cgroup();
    wait_for_all();
    double t0 = MPI_Wtime();
    if (m < 2)
        moved = share ? read_direct(path, first, share) : 0;
    else
        moved = read_after_compute(path, first, share, work, m == 3);
    wait_for_all();
    double elapsed = MPI_Wtime() - t0;
    printf("rank %d: %s ok, read %ld bytes\n", rank, mode, moved);
    if (rank == 0)
        printf("elapsed %.6f\n", elapsed);
    MPI_Finalize();
    return 0;
}
