/*
 * ioassess-workload: the training workload generator (the successor of io-model in Kunkel
 * 2015, section 5.2) and two page-cache probes the trainer uses to set up and verify the
 * "cached" and "uncached" states. docs/workload.md describes the options and outputs.
 *
 * The trainer runs this program under the recorder and takes every op on the target file as
 * a training sample, so the target file sees exactly the timed pread/pwrite calls (plus the
 * fsync of --fsync-end): no other read or write of it, no lseek, no stdio.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define PROGRAM "ioassess-workload"
#define MIB (1024ULL * 1024)
#define DEFAULT_SIZE 4096ULL
#define DEFAULT_MEM_BUFFER (256 * MIB)
#define DEFAULT_STRIDE (8 * MIB)
#define DEFAULT_REPEATS 10000ULL
#define DEFAULT_BUDGET (1024 * MIB)
#define DEFAULT_SEED 1ULL
/* The memory layout draws from its own random stream, so the file offsets of a seed do not
 * depend on the memory layout. */
#define MEMORY_STREAM_KEY 0x6d656d6f72796c61ULL
#define RESIDENCY_CHUNK_PAGES 65536ULL  /* pages mapped at once by the probes */

enum layout { LAYOUT_OFF0, LAYOUT_SEQ, LAYOUT_RND, LAYOUT_STRIDE, LAYOUT_REVERSE, LAYOUT_COUNT };
static const char *const layout_names[LAYOUT_COUNT] = {"off0", "seq", "rnd", "stride", "reverse"};

enum mode { MODE_WORKLOAD, MODE_RESIDENT, MODE_EVICT };

struct options {
    enum mode mode;
    const char *path;
    int is_write;
    uint64_t size;
    enum layout mem_layout;
    uint64_t mem_buffer;          /* 0 when not given: max(DEFAULT_MEM_BUFFER, size) */
    uint64_t mem_offset;          /* bytes from the page-aligned mapping to the buffer */
    enum layout file_layout;
    uint64_t file_span;           /* resolved from the file when not given */
    int file_span_given;
    uint64_t stride;
    uint64_t offset_base;
    uint64_t repeats;
    uint64_t budget;
    uint64_t seed;
    int create;
    int fsync_end;
    int workload_options_given;   /* the probes take no workload option */
};

/* The aligned positions (slots of `size` bytes) of a buffer or a file span, visited in the
 * order of one layout. */
struct walk {
    enum layout layout;
    uint64_t slots;
    uint64_t step;                /* slots from one access to the next (stride) */
    uint64_t rng;                 /* seed of the permutations (rnd) */
};

struct outcome {
    uint64_t ops;
    uint64_t bytes;
    uint64_t short_ops;
    double elapsed_s;
    double fsync_s;
};

struct residency {
    uint64_t pages;
    uint64_t resident_pages;
};

__attribute__((noreturn, format(printf, 1, 2)))
static void die_usage(const char *format, ...)
{
    va_list args;
    va_start(args, format);
    fputs(PROGRAM ": ", stderr);
    vfprintf(stderr, format, args);
    fputs(" (see --help)\n", stderr);
    va_end(args);
    exit(2);
}

/* For failed system calls: the message, then errno's text and number. */
__attribute__((noreturn, format(printf, 1, 2)))
static void die_errno(const char *format, ...)
{
    int error = errno;
    va_list args;
    va_start(args, format);
    fputs(PROGRAM ": ", stderr);
    vfprintf(stderr, format, args);
    fprintf(stderr, ": %s (errno %d)\n", strerror(error), error);
    va_end(args);
    exit(1);
}

static const char usage_text[] =
    "usage: " PROGRAM " --file PATH [--op read|write] [--size BYTES]\n"
    "         [--mem-layout L] [--mem-buffer BYTES] [--mem-offset BYTES] [--file-layout L]\n"
    "         [--file-span BYTES] [--stride BYTES] [--offset-base BYTES] [--repeats N] [--budget BYTES]\n"
    "         [--seed N] [--create] [--fsync-end]\n"
    "       " PROGRAM " --resident PATH\n"
    "       " PROGRAM " --evict PATH\n"
    "layouts L: off0 seq rnd stride reverse; numbers take a k, m, g or t suffix (powers of 1024)\n"
    "defaults: --op read --size 4k --mem-layout off0 --mem-buffer 256m --mem-offset 0\n"
    "          --file-layout seq\n"
    "          --file-span: the file's size after --offset-base (regular files), else 0\n"
    "          --stride 8m --offset-base 0 --repeats 10000 --budget 1g --seed 1\n"
    "ops = min(repeats, max(1, budget / size)); see docs/workload.md\n";

/* A non-negative integer with an optional binary suffix: 4k = 4096. */
static uint64_t parse_number(const char *text, const char *option)
{
    char *end;
    errno = 0;
    uint64_t value = strtoull(text, &end, 10);
    if (end == text || text[0] == '-')
        die_usage("%s: not a number: '%s'", option, text);
    if (errno == ERANGE)
        die_usage("%s: too large: '%s'", option, text);
    const char *suffixes = "kmgt";
    const char *suffix = *end ? strchr(suffixes, end[0] | 0x20) : NULL;
    if (suffix) {
        for (const char *s = suffixes; s <= suffix; s++)
            if (__builtin_mul_overflow(value, 1024, &value))
                die_usage("%s: too large: '%s'", option, text);
        end++;
    }
    if (*end)
        die_usage("%s: not a number: '%s'", option, text);
    return value;
}

static enum layout parse_layout(const char *text, const char *option)
{
    for (int i = 0; i < LAYOUT_COUNT; i++)
        if (strcmp(text, layout_names[i]) == 0)
            return (enum layout)i;
    die_usage("%s: unknown layout '%s' (off0, seq, rnd, stride, reverse)", option, text);
}

static int parse_op(const char *text)
{
    if (strcmp(text, "read") == 0)
        return 0;
    if (strcmp(text, "write") == 0)
        return 1;
    die_usage("--op: '%s' is neither read nor write", text);
}

enum option_id {
    OPT_FILE = 256, OPT_OP, OPT_SIZE, OPT_MEM_LAYOUT, OPT_MEM_BUFFER, OPT_MEM_OFFSET, OPT_FILE_LAYOUT,
    OPT_FILE_SPAN, OPT_STRIDE, OPT_OFFSET_BASE, OPT_REPEATS, OPT_BUDGET, OPT_SEED, OPT_CREATE,
    OPT_FSYNC_END, OPT_RESIDENT, OPT_EVICT, OPT_HELP,
};

static const struct option option_table[] = {
    {"file", required_argument, NULL, OPT_FILE},
    {"op", required_argument, NULL, OPT_OP},
    {"size", required_argument, NULL, OPT_SIZE},
    {"mem-layout", required_argument, NULL, OPT_MEM_LAYOUT},
    {"mem-buffer", required_argument, NULL, OPT_MEM_BUFFER},
    {"mem-offset", required_argument, NULL, OPT_MEM_OFFSET},
    {"file-layout", required_argument, NULL, OPT_FILE_LAYOUT},
    {"file-span", required_argument, NULL, OPT_FILE_SPAN},
    {"stride", required_argument, NULL, OPT_STRIDE},
    {"offset-base", required_argument, NULL, OPT_OFFSET_BASE},
    {"repeats", required_argument, NULL, OPT_REPEATS},
    {"budget", required_argument, NULL, OPT_BUDGET},
    {"seed", required_argument, NULL, OPT_SEED},
    {"create", no_argument, NULL, OPT_CREATE},
    {"fsync-end", no_argument, NULL, OPT_FSYNC_END},
    {"resident", required_argument, NULL, OPT_RESIDENT},
    {"evict", required_argument, NULL, OPT_EVICT},
    {"help", no_argument, NULL, OPT_HELP},
    {NULL, 0, NULL, 0},
};

static void set_probe(struct options *opt, enum mode mode, const char *path)
{
    if (opt->mode != MODE_WORKLOAD)
        die_usage("give only one of --resident and --evict");
    opt->mode = mode;
    opt->path = path;
}

static void apply_option(struct options *opt, int id, const char *value)
{
    opt->workload_options_given += id < OPT_RESIDENT;
    switch (id) {
    case OPT_FILE: opt->path = value; break;
    case OPT_OP: opt->is_write = parse_op(value); break;
    case OPT_SIZE: opt->size = parse_number(value, "--size"); break;
    case OPT_MEM_LAYOUT: opt->mem_layout = parse_layout(value, "--mem-layout"); break;
    case OPT_MEM_BUFFER:
        opt->mem_buffer = parse_number(value, "--mem-buffer");
        if (opt->mem_buffer == 0)
            die_usage("--mem-buffer must hold at least one access");
        break;
    case OPT_MEM_OFFSET:
        opt->mem_offset = parse_number(value, "--mem-offset");
        if (opt->mem_offset >= 4096)
            die_usage("--mem-offset must be below 4096 (a page)");
        break;
    case OPT_FILE_LAYOUT: opt->file_layout = parse_layout(value, "--file-layout"); break;
    case OPT_FILE_SPAN:
        opt->file_span = parse_number(value, "--file-span");
        opt->file_span_given = 1;
        break;
    case OPT_STRIDE: opt->stride = parse_number(value, "--stride"); break;
    case OPT_OFFSET_BASE: opt->offset_base = parse_number(value, "--offset-base"); break;
    case OPT_REPEATS: opt->repeats = parse_number(value, "--repeats"); break;
    case OPT_BUDGET: opt->budget = parse_number(value, "--budget"); break;
    case OPT_SEED: opt->seed = parse_number(value, "--seed"); break;
    case OPT_CREATE: opt->create = 1; break;
    case OPT_FSYNC_END: opt->fsync_end = 1; break;
    case OPT_RESIDENT: set_probe(opt, MODE_RESIDENT, value); break;
    case OPT_EVICT: set_probe(opt, MODE_EVICT, value); break;
    }
}

static void check_workload_options(struct options *opt)
{
    if (!opt->path)
        die_usage("--file is required");
    if (opt->size == 0 || opt->size > SSIZE_MAX)
        die_usage("--size must be between 1 and %zd", (ssize_t)SSIZE_MAX);
    if (opt->repeats == 0)
        die_usage("--repeats must be at least 1");
    if (opt->mem_buffer == 0)
        opt->mem_buffer = opt->size > DEFAULT_MEM_BUFFER ? opt->size : DEFAULT_MEM_BUFFER;
    if (opt->mem_buffer < opt->size)
        die_usage("--mem-buffer %" PRIu64 " is smaller than --size %" PRIu64, opt->mem_buffer,
                  opt->size);
    if ((opt->create || opt->fsync_end) && !opt->is_write)
        die_usage("--create and --fsync-end are for --op write only");
    if (opt->create && opt->file_layout != LAYOUT_OFF0 && !opt->file_span_given)
        die_usage("--create starts from an empty file: give --file-span for --file-layout %s",
                  layout_names[opt->file_layout]);
    uint64_t end;
    if (__builtin_add_overflow(opt->offset_base, opt->file_span, &end) || end > INT64_MAX)
        die_usage("--offset-base + --file-span is beyond the largest file offset");
}

static void parse_options(int argc, char **argv, struct options *opt)
{
    *opt = (struct options){
        .mode = MODE_WORKLOAD, .size = DEFAULT_SIZE, .mem_layout = LAYOUT_OFF0,
        .file_layout = LAYOUT_SEQ, .stride = DEFAULT_STRIDE, .repeats = DEFAULT_REPEATS,
        .budget = DEFAULT_BUDGET, .seed = DEFAULT_SEED,
    };
    opterr = 0;
    int id;
    while ((id = getopt_long(argc, argv, ":", option_table, NULL)) != -1) {
        if (id == '?')
            die_usage("unknown option '%s'", argv[optind - 1]);
        if (id == ':')
            die_usage("option '%s' needs a value", argv[optind - 1]);
        if (id == OPT_HELP) {
            fputs(usage_text, stdout);
            exit(0);
        }
        apply_option(opt, id, optarg);
    }
    if (optind < argc)
        die_usage("unexpected argument '%s'", argv[optind]);
    if (opt->mode != MODE_WORKLOAD && opt->workload_options_given)
        die_usage("--resident and --evict take no other option");
    if (opt->mode == MODE_WORKLOAD)
        check_workload_options(opt);
}

static uint64_t splitmix64(uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static struct walk make_walk(enum layout layout, uint64_t span, const struct options *opt,
                             uint64_t rng_seed)
{
    /* A stride that is not a multiple of the access size is rounded up, so positions stay
     * aligned to the access size. */
    uint64_t step = 1 + opt->stride / opt->size + (opt->stride % opt->size != 0);
    return (struct walk){.layout = layout, .slots = span / opt->size, .step = step,
                         .rng = rng_seed};
}

/* A pseudo-random permutation of [0, n): a 4-round Feistel network on the smallest even
 * number of bits covering n, walking the cycle until the value falls below n. */
static uint64_t permute(uint64_t x, uint64_t n, uint64_t key)
{
    unsigned bits = 2;
    while (bits < 64 && (1ULL << bits) < n)
        bits += 2;
    unsigned half = bits / 2;
    uint64_t mask = (1ULL << half) - 1;
    do {
        uint64_t left = x >> half, right = x & mask;
        for (uint64_t round = 0; round < 4; round++) {
            uint64_t state = key ^ (right + (round << 56));
            uint64_t next = left ^ (splitmix64(&state) & mask);
            left = right;
            right = next;
        }
        x = (left << half) | right;
    } while (x >= n);
    return x;
}

/* The slot of access number i. rnd visits every slot once, in random order, before any slot
 * again (each pass has its own order): repeated slots would be served from the page cache
 * and spoil an uncached measurement. */
static uint64_t next_slot(struct walk *w, uint64_t i)
{
    if (w->slots == 0)
        return 0;
    switch (w->layout) {
    case LAYOUT_SEQ: return i % w->slots;
    case LAYOUT_REVERSE: return w->slots - 1 - i % w->slots;
    case LAYOUT_STRIDE: return (uint64_t)((unsigned __int128)i * w->step % w->slots);
    case LAYOUT_RND: {
        uint64_t pass = i / w->slots;
        uint64_t key = w->rng + pass * 0x9e3779b97f4a7c15ULL;
        return permute(i % w->slots, w->slots, splitmix64(&key));
    }
    default: return 0;           /* off0 */
    }
}

static int open_target(const struct options *opt)
{
    int flags = opt->is_write ? O_WRONLY : O_RDONLY;
    if (opt->create)
        flags |= O_CREAT | O_TRUNC;
    int fd = open(opt->path, flags | O_CLOEXEC, 0644);
    if (fd < 0)
        die_errno("cannot open %s", opt->path);
    return fd;
}

/* Without --file-span: the regular file's size after --offset-base; 0 for devices, where
 * every op goes to --offset-base. */
static void resolve_file_span(int fd, struct options *opt)
{
    struct stat st;
    if (fstat(fd, &st) != 0)
        die_errno("cannot stat %s", opt->path);
    int regular = S_ISREG(st.st_mode);
    if (!opt->file_span_given)
        opt->file_span = regular && (uint64_t)st.st_size > opt->offset_base
                             ? (uint64_t)st.st_size - opt->offset_base : 0;
    if (regular && opt->file_layout != LAYOUT_OFF0 && opt->file_span < opt->size)
        die_usage("the file span of %s (%" PRIu64 " bytes from offset %" PRIu64
                  ") is smaller than --size %" PRIu64 "; give --file-span",
                  opt->path, opt->file_span, opt->offset_base, opt->size);
}

/* Allocated and written in full before the timed ops, so that no page fault of the buffer
 * falls into an op; the content is pseudo-random so that writes are not all zeros and not
 * compressible. */
static char *prepared_buffer(uint64_t bytes, uint64_t offset)
{
    void *mapping = mmap(NULL, bytes + offset, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                         -1, 0);
    if (mapping == MAP_FAILED)
        die_errno("cannot allocate a memory buffer of %" PRIu64 " bytes", bytes);
    char *buffer = (char *)mapping + offset;
    uint64_t state = 0;
    uint64_t word;
    for (uint64_t at = 0; at < bytes; at += sizeof word) {
        word = splitmix64(&state);
        memcpy((char *)buffer + at, &word, bytes - at < sizeof word ? bytes - at : sizeof word);
    }
    return buffer;
}

static double monotonic_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void timed_ops(int fd, const struct options *opt, char *buffer, struct walk *memory,
                      struct walk *file, struct outcome *out)
{
    for (uint64_t i = 0; i < out->ops; i++) {
        char *data = buffer + next_slot(memory, i) * opt->size;
        off_t offset = (off_t)(opt->offset_base + next_slot(file, i) * opt->size);
        ssize_t done = opt->is_write ? pwrite(fd, data, opt->size, offset)
                                     : pread(fd, data, opt->size, offset);
        if (done < 0)
            die_errno("%s of %s at offset %jd", opt->is_write ? "pwrite" : "pread", opt->path,
                      (intmax_t)offset);
        out->bytes += (uint64_t)done;
        out->short_ops += (uint64_t)done < opt->size;
    }
}

static uint64_t op_count(const struct options *opt)
{
    uint64_t by_budget = opt->budget / opt->size;
    if (by_budget == 0)
        by_budget = 1;
    return opt->repeats < by_budget ? opt->repeats : by_budget;
}

static void print_facts(const struct options *opt, const struct outcome *out, const char *buffer)
{
    printf("ops=%" PRIu64 " bytes=%" PRIu64 " short_ops=%" PRIu64 " elapsed_s=%.9f fsync_s=%.9f"
           " op=%s size=%" PRIu64 " mem_layout=%s mem_buffer=%" PRIu64 " mem_offset=%" PRIu64
           " file_layout=%s"
           " file_span=%" PRIu64 " stride=%" PRIu64 " offset_base=%" PRIu64 " repeats=%" PRIu64
           " budget=%" PRIu64 " seed=%" PRIu64 " create=%d fsync_end=%d buffer_address=%#" PRIxPTR
           " file=%s\n",
           out->ops, out->bytes, out->short_ops, out->elapsed_s, out->fsync_s,
           opt->is_write ? "write" : "read", opt->size, layout_names[opt->mem_layout],
           opt->mem_buffer, opt->mem_offset, layout_names[opt->file_layout], opt->file_span, opt->stride,
           opt->offset_base, opt->repeats, opt->budget, opt->seed, opt->create, opt->fsync_end,
           (uintptr_t)buffer, opt->path);
}

static void run_workload(struct options *opt)
{
    int fd = open_target(opt);
    resolve_file_span(fd, opt);
    char *buffer = prepared_buffer(opt->mem_buffer, opt->mem_offset);
    struct walk memory = make_walk(opt->mem_layout, opt->mem_buffer, opt,
                                   opt->seed ^ MEMORY_STREAM_KEY);
    struct walk file = make_walk(opt->file_layout, opt->file_span, opt, opt->seed);
    struct outcome out = {.ops = op_count(opt)};
    double start = monotonic_s();
    timed_ops(fd, opt, buffer, &memory, &file, &out);
    out.elapsed_s = monotonic_s() - start;
    if (opt->fsync_end) {
        start = monotonic_s();
        if (fsync(fd) != 0)
            die_errno("fsync of %s", opt->path);
        out.fsync_s = monotonic_s() - start;
    }
    if (close(fd) != 0)
        die_errno("close of %s", opt->path);
    print_facts(opt, &out, buffer);
}

/* For a file the caller neither owns nor may write, mincore() reports every page resident
 * (Linux >= 5.2 hides page-cache state there), so its answer would be meaningless. */
static void check_residency_visible(const struct stat *st, const char *path)
{
    if (geteuid() == 0 || st->st_uid == geteuid() || faccessat(AT_FDCWD, path, W_OK, AT_EACCESS) == 0)
        return;
    errno = EACCES;
    die_errno("cannot measure the residency of %s: mincore() shows page-cache state only to "
              "the file's owner or a user who may write it", path);
}

static struct residency measure_residency(int fd, const char *path, uint64_t file_bytes)
{
    static unsigned char in_core[RESIDENCY_CHUNK_PAGES];
    uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);
    uint64_t chunk = RESIDENCY_CHUNK_PAGES * page;
    struct residency r = {.pages = (file_bytes + page - 1) / page};
    for (uint64_t at = 0; at < file_bytes; at += chunk) {
        uint64_t length = file_bytes - at < chunk ? file_bytes - at : chunk;
        void *map = mmap(NULL, length, PROT_READ, MAP_SHARED, fd, (off_t)at);
        if (map == MAP_FAILED)
            die_errno("cannot map %s at offset %" PRIu64, path, at);
        if (mincore(map, length, in_core) != 0)
            die_errno("mincore of %s at offset %" PRIu64, path, at);
        for (uint64_t i = 0; i < (length + page - 1) / page; i++)
            r.resident_pages += in_core[i] & 1;
        munmap(map, length);
    }
    return r;
}

/* Dirty pages cannot be dropped, so they are written back first. */
static void evict(int fd, const char *path)
{
    if (fdatasync(fd) != 0)
        die_errno("fdatasync of %s", path);
    int error = posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    if (error != 0) {
        errno = error;
        die_errno("posix_fadvise(DONTNEED) of %s", path);
    }
}

static void run_probe(const struct options *opt)
{
    int fd = open(opt->path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        die_errno("cannot open %s", opt->path);
    struct stat st;
    if (fstat(fd, &st) != 0)
        die_errno("cannot stat %s", opt->path);
    if (!S_ISREG(st.st_mode))
        die_usage("%s is not a regular file", opt->path);
    check_residency_visible(&st, opt->path);
    if (opt->mode == MODE_EVICT)
        evict(fd, opt->path);
    struct residency r = measure_residency(fd, opt->path, (uint64_t)st.st_size);
    close(fd);
    double fraction = r.pages ? (double)r.resident_pages / (double)r.pages : NAN;
    printf("resident_fraction=%.6f resident_pages=%" PRIu64 " pages=%" PRIu64 " file=%s\n",
           fraction, r.resident_pages, r.pages, opt->path);
}

int main(int argc, char **argv)
{
    struct options opt;
    parse_options(argc, argv, &opt);
    if (opt.mode == MODE_WORKLOAD)
        run_workload(&opt);
    else
        run_probe(&opt);
    return 0;
}
