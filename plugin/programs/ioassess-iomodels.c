/*
 * ioassess-iomodels: the I/O-model benchmark of Sisneros et al., an MPI program. It writes the
 * same total size in every I/O model from serial to one shared file and times each, so that
 * the models can be compared on the log2 P x log2 k grid. `ioassess iomodels` runs it with
 * mpiexec and keeps the median of the repeats; docs/iomodels.md describes the method.
 *
 * An I/O model is four powers of two (n, w, f, m): the first w ranks of each of the first n
 * nodes write (P = n w writers); the writers of a node share f files per node and each file
 * spans m nodes, so every file is written by k = m w / f processes (w / f from each of its
 * nodes) and there are n f / m files. Serial is (1, 1, 1, 1), file per process f = w and m = 1,
 * file per node f = 1 and m = 1, one shared file f = 1 and m = n.
 *
 * Every writer writes total / P bytes with pwrite, in blocks of the transfer size, into its
 * part of its file (one contiguous range, or every k-th block: strided), then fsyncs and
 * closes it. The time of a model is the paper's: from the barrier before the first write to
 * the completion of the slowest writer (each rank times itself from leaving the barrier; the
 * maximum over the ranks is taken, so the ranks' clocks need not agree). Then the first writer
 * of each file checks the file's size and removes it.
 *
 * Nodes are the hosts (MPI_Comm_split_type with MPI_COMM_TYPE_SHARED) or, with
 * --ranks-per-node N, blocks of N consecutive ranks (nodes simulated on one machine). Only
 * powers of two are used: the largest power of two of nodes and of ranks on every node.
 *
 * Rank 0 prints one JSON object per line on stdout: a header, then one line per model and
 * repeat (repeats in the outer loop, so a disturbance hits one repeat, not every one), after a
 * warm-up run of file per process on every rank that is not printed. Exit 0;
 * 2 with one line on stderr for bad options; an I/O error aborts the job with one line
 * naming the rank, the call and the file.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <mpi.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define PROGRAM "ioassess-iomodels"
#define DEFAULT_TRANSFER (1ULL << 20)
#define PAGE 4096ULL
/* The repeat number of the warm-up: one unreported run of file per process on every rank
 * before the first timed run, because a job's first writes are slower (up to 4x here) and no
 * model should pay for that. */
#define WARM_UP (-1)

enum layout { LAYOUT_CONTIGUOUS, LAYOUT_STRIDED };
static const char *const layout_names[] = {"contiguous", "strided"};

struct options {
    const char *dir;
    uint64_t total;
    uint64_t transfer;
    int repeats;
    int ranks_per_node;           /* 0: nodes are the hosts */
    enum layout layout;
    int one_model[4];             /* --model N,W,F,M; all zero: every model */
};

/* Where this rank is: its node and its rank on that node, and the nodes and ranks per node
 * the models may use (powers of two). */
struct topology {
    int rank;
    int size;
    int node;
    int local;
    int nodes;
    int ranks_per_node;
};

struct model {
    int nodes;                    /* n */
    int writers_per_node;         /* w */
    int files_per_node;           /* f */
    int nodes_per_file;           /* m */
};

static int world_rank;

__attribute__((noreturn, format(printf, 1, 2)))
static void usage_error(const char *format, ...)
{
    if (world_rank == 0) {
        va_list args;
        va_start(args, format);
        fputs(PROGRAM ": ", stderr);
        vfprintf(stderr, format, args);
        fputs(" (see docs/iomodels.md)\n", stderr);
        va_end(args);
    }
    MPI_Finalize();
    exit(2);
}

__attribute__((noreturn))
static void io_error(const char *call, const char *path)
{
    int error = errno;
    fprintf(stderr, PROGRAM ": rank %d: %s %s: %s (errno %d)\n", world_rank, call, path, strerror(error),
            error);
    MPI_Abort(MPI_COMM_WORLD, 1);
    exit(1);
}

static int is_power_of_two(uint64_t value)
{
    return value && !(value & (value - 1));
}

static int floor_power_of_two(int value)
{
    int power = 1;
    while (power * 2 <= value)
        power *= 2;
    return power;
}

static uint64_t parse_count(const char *text, const char *option)
{
    char *end;
    errno = 0;
    uint64_t value = strtoull(text, &end, 10);
    if (end == text || *end || text[0] == '-' || errno == ERANGE)
        usage_error("%s: not a whole number: '%s'", option, text);
    return value;
}

static void parse_model(const char *text, int model[4])
{
    char extra;
    if (sscanf(text, "%d,%d,%d,%d%c", &model[0], &model[1], &model[2], &model[3], &extra) != 4)
        usage_error("--model: expected NODES,WRITERS_PER_NODE,FILES_PER_NODE,NODES_PER_FILE, got '%s'", text);
}

static const struct option option_table[] = {
    {"dir", required_argument, NULL, 'd'},
    {"total-bytes", required_argument, NULL, 't'},
    {"transfer-bytes", required_argument, NULL, 'x'},
    {"repeats", required_argument, NULL, 'r'},
    {"ranks-per-node", required_argument, NULL, 'n'},
    {"layout", required_argument, NULL, 'l'},
    {"model", required_argument, NULL, 'm'},
    {NULL, 0, NULL, 0},
};

static void parse_options(int argc, char **argv, struct options *opt)
{
    *opt = (struct options){.transfer = DEFAULT_TRANSFER, .repeats = 1};
    int c;
    while ((c = getopt_long(argc, argv, "", option_table, NULL)) != -1) {
        switch (c) {
        case 'd': opt->dir = optarg; break;
        case 't': opt->total = parse_count(optarg, "--total-bytes"); break;
        case 'x': opt->transfer = parse_count(optarg, "--transfer-bytes"); break;
        case 'r': opt->repeats = (int)parse_count(optarg, "--repeats"); break;
        case 'n': opt->ranks_per_node = (int)parse_count(optarg, "--ranks-per-node"); break;
        case 'l':
            if (strcmp(optarg, "strided") == 0)
                opt->layout = LAYOUT_STRIDED;
            else if (strcmp(optarg, "contiguous") != 0)
                usage_error("--layout: '%s' is neither contiguous nor strided", optarg);
            break;
        case 'm': parse_model(optarg, opt->one_model); break;
        default: usage_error("unknown option '%s'", argv[optind - 1]);
        }
    }
    if (optind < argc)
        usage_error("unexpected argument '%s'", argv[optind]);
    if (!opt->dir)
        usage_error("--dir is required");
    if (!is_power_of_two(opt->total) || !is_power_of_two(opt->transfer) || opt->transfer < PAGE)
        usage_error("--total-bytes and --transfer-bytes must be powers of two, the transfer at least %llu",
                    PAGE);
    if (opt->repeats < 1)
        usage_error("--repeats must be at least 1");
}

/* Nodes and the rank's place on its node: simulated blocks of ranks, or the hosts. */
static struct topology find_topology(int ranks_per_node)
{
    struct topology t = {.rank = world_rank};
    int local_size, nodes;
    MPI_Comm_size(MPI_COMM_WORLD, &t.size);
    if (ranks_per_node > 0) {
        if (t.size % ranks_per_node)
            usage_error("--ranks-per-node %d does not divide the %d ranks", ranks_per_node, t.size);
        t.node = world_rank / ranks_per_node;
        t.local = world_rank % ranks_per_node;
        local_size = ranks_per_node;
        nodes = t.size / ranks_per_node;
    } else {
        MPI_Comm node_comm, leaders;
        MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, world_rank, MPI_INFO_NULL, &node_comm);
        MPI_Comm_rank(node_comm, &t.local);
        MPI_Comm_size(node_comm, &local_size);
        /* Nodes are numbered in the order of their lowest world rank. */
        MPI_Comm_split(MPI_COMM_WORLD, t.local == 0 ? 0 : MPI_UNDEFINED, world_rank, &leaders);
        if (t.local == 0) {
            MPI_Comm_rank(leaders, &t.node);
            MPI_Comm_free(&leaders);
        }
        MPI_Bcast(&t.node, 1, MPI_INT, 0, node_comm);
        MPI_Comm_free(&node_comm);
        int last_node;
        MPI_Allreduce(&t.node, &last_node, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
        nodes = last_node + 1;
    }
    int fewest_ranks;
    MPI_Allreduce(&local_size, &fewest_ranks, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    t.nodes = floor_power_of_two(nodes);
    t.ranks_per_node = floor_power_of_two(fewest_ranks);
    return t;
}

static int model_fits(const struct model *mo, const struct topology *t)
{
    return is_power_of_two(mo->nodes) && is_power_of_two(mo->writers_per_node) &&
           is_power_of_two(mo->files_per_node) && is_power_of_two(mo->nodes_per_file) &&
           mo->nodes <= t->nodes && mo->writers_per_node <= t->ranks_per_node &&
           mo->files_per_node <= mo->writers_per_node && mo->nodes_per_file <= mo->nodes;
}

/* Every model of the topology, by nodes, writers per node, files per node, nodes per file;
 * models == NULL only counts them. */
static int all_models(const struct topology *t, struct model *models)
{
    int count = 0;
    for (int n = 1; n <= t->nodes; n *= 2)
        for (int w = 1; w <= t->ranks_per_node; w *= 2)
            for (int f = 1; f <= w; f *= 2)
                for (int m = 1; m <= n; m *= 2, count++)
                    if (models)
                        models[count] = (struct model){n, w, f, m};
    return count;
}

static int writers(const struct model *mo)
{
    return mo->nodes * mo->writers_per_node;
}

static int writers_per_file(const struct model *mo)
{
    return mo->nodes_per_file * mo->writers_per_node / mo->files_per_node;
}

static int files(const struct model *mo)
{
    return mo->nodes * mo->files_per_node / mo->nodes_per_file;
}

/* Whether this rank writes in the model; if so its file and its slot (0 .. k-1) in that file.
 * The w / f writers of a node that share a file are consecutive ranks of the node. */
static int place_writer(const struct model *mo, const struct topology *t, int *file, int *slot)
{
    if (t->node >= mo->nodes || t->local >= mo->writers_per_node)
        return 0;
    int per_file_on_node = mo->writers_per_node / mo->files_per_node;
    *file = (t->node / mo->nodes_per_file) * mo->files_per_node + t->local / per_file_on_node;
    *slot = (t->node % mo->nodes_per_file) * per_file_on_node + t->local % per_file_on_node;
    return 1;
}

static void file_path(char *path, size_t size, const char *dir, const struct model *mo, int file)
{
    snprintf(path, size, "%s/iom-n%d-w%d-f%d-m%d.%d", dir, mo->nodes, mo->writers_per_node,
             mo->files_per_node, mo->nodes_per_file, file);
}

/* Write this writer's part of its file; returns the bytes written. */
static uint64_t write_part(const char *path, const struct options *opt, const struct model *mo, int slot,
                           const char *buffer)
{
    uint64_t part = opt->total / (uint64_t)writers(mo);
    uint64_t block = part < opt->transfer ? part : opt->transfer;
    uint64_t k = (uint64_t)writers_per_file(mo);
    int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);  /* no O_TRUNC: k writers open it */
    if (fd < 0)
        io_error("open", path);
    uint64_t written = 0;
    for (uint64_t b = 0; b < part / block; b++) {
        uint64_t offset = opt->layout == LAYOUT_STRIDED ? (b * k + (uint64_t)slot) * block
                                                        : (uint64_t)slot * part + b * block;
        for (uint64_t done = 0; done < block;) {
            ssize_t n = pwrite(fd, buffer + done, block - done, (off_t)(offset + done));
            if (n < 0 && errno == EINTR)
                continue;
            if (n <= 0)
                io_error("pwrite", path);
            done += (uint64_t)n;
            written += (uint64_t)n;
        }
    }
    if (fsync(fd) != 0)
        io_error("fsync", path);
    if (close(fd) != 0)
        io_error("close", path);
    return written;
}

/* One timed run of a model; rank 0 prints its line, except for the warm-up. */
static void measure(const struct options *opt, const struct topology *t, const struct model *mo, int repeat,
                    const char *buffer)
{
    char path[PATH_MAX];
    int file, slot;
    int is_writer = place_writer(mo, t, &file, &slot);
    if (is_writer)
        file_path(path, sizeof path, opt->dir, mo, file);
    uint64_t written = 0, file_bytes = 0;
    MPI_Barrier(MPI_COMM_WORLD);
    double start = MPI_Wtime();
    if (is_writer)
        written = write_part(path, opt, mo, slot, buffer);
    double elapsed = MPI_Wtime() - start;
    double slowest;
    MPI_Reduce(&elapsed, &slowest, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    MPI_Barrier(MPI_COMM_WORLD);  /* every writer has closed its file */
    if (is_writer && slot == 0) {
        struct stat st;
        if (stat(path, &st) != 0)
            io_error("stat", path);
        file_bytes = (uint64_t)st.st_size;
        if (unlink(path) != 0)
            io_error("unlink", path);
    }
    uint64_t local[2] = {written, file_bytes}, sums[2];
    MPI_Reduce(local, sums, 2, MPI_UINT64_T, MPI_SUM, 0, MPI_COMM_WORLD);
    if (t->rank == 0 && repeat != WARM_UP) {
        printf("{\"repeat\": %d, \"nodes\": %d, \"writers_per_node\": %d, \"files_per_node\": %d, "
               "\"nodes_per_file\": %d, \"processes\": %d, \"processes_per_file\": %d, \"files\": %d, "
               "\"bytes_written\": %" PRIu64 ", \"file_bytes\": %" PRIu64 ", \"seconds\": %.9f}\n",
               repeat, mo->nodes, mo->writers_per_node, mo->files_per_node, mo->nodes_per_file, writers(mo),
               writers_per_file(mo), files(mo), sums[0], sums[1], slowest);
        fflush(stdout);
    }
}

/* Not all zeros, so that no layer can store it as a hole or compress it away. */
static char *filled_buffer(uint64_t size)
{
    char *buffer;
    if (posix_memalign((void **)&buffer, PAGE, size) != 0) {
        errno = ENOMEM;
        io_error("posix_memalign", "(write buffer)");
    }
    uint64_t state = 0x9e3779b97f4a7c15ULL;
    for (uint64_t i = 0; i < size; i++) {
        state ^= state << 13, state ^= state >> 7, state ^= state << 17;
        buffer[i] = (char)state;
    }
    return buffer;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
    struct options opt;
    parse_options(argc, argv, &opt);
    struct topology t = find_topology(opt.ranks_per_node);
    int count = opt.one_model[0] ? 1 : all_models(&t, NULL);
    struct model *models = malloc((size_t)count * sizeof *models);
    if (!models) {
        errno = ENOMEM;
        io_error("malloc", "(models)");
    }
    if (opt.one_model[0]) {
        models[0] = (struct model){opt.one_model[0], opt.one_model[1], opt.one_model[2], opt.one_model[3]};
        if (!model_fits(&models[0], &t))
            usage_error("--model %d,%d,%d,%d does not fit %d nodes of %d ranks (powers of two, files per node "
                        "<= writers per node, nodes per file <= nodes)", opt.one_model[0], opt.one_model[1],
                        opt.one_model[2], opt.one_model[3], t.nodes, t.ranks_per_node);
    } else {
        all_models(&t, models);
    }
    if (opt.total < PAGE * (uint64_t)(t.nodes * t.ranks_per_node))
        usage_error("--total-bytes %" PRIu64 " gives less than %llu bytes to each of %d writers", opt.total, PAGE,
                    t.nodes * t.ranks_per_node);
    if (world_rank == 0) {
        printf("{\"ranks\": %d, \"nodes\": %d, \"ranks_per_node\": %d, \"nodes_from\": \"%s\", \"models\": %d, "
               "\"repeats\": %d, \"total_bytes\": %" PRIu64 ", \"transfer_bytes\": %" PRIu64 ", "
               "\"layout\": \"%s\"}\n", t.size, t.nodes, t.ranks_per_node,
               opt.ranks_per_node ? "ranks-per-node" : "hosts", count, opt.repeats, opt.total, opt.transfer,
               layout_names[opt.layout]);
        fflush(stdout);
    }
    char *buffer = filled_buffer(opt.transfer);
    struct model every_rank_alone = {t.nodes, t.ranks_per_node, t.ranks_per_node, 1};
    measure(&opt, &t, &every_rank_alone, WARM_UP, buffer);
    for (int repeat = 0; repeat < opt.repeats; repeat++)
        for (int i = 0; i < count; i++)
            measure(&opt, &t, &models[i], repeat, buffer);
    free(buffer);
    free(models);
    MPI_Finalize();
    return 0;
}
