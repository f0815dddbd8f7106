/* stdio_ops: every stdio call the recorder times, on files in DIR, with its own count of them.
 * usage: stdio_ops DIR [popen|null]
 * ("null": an fputs to a NULL stream, which crashes inside the C library, with or without the
 * recorder, and nothing else)
 * Files: DIR/a (fopen "w+": fwrite, fprintf, fputs, fputc, putc, fflush, fseek, ftell, fread,
 * fscanf, fgetc, fgets, getc, rewind, fsetpos, fclose), DIR/b (open/write/close after a's
 * fclose: the same descriptor number), DIR/c (open, then fdopen "a": fputs, fclose; fopen "r"
 * and a failed fwrite), DIR/d (freopen of the stream on c: fprintf, fclose), DIR/missing/x (a
 * failed fopen). Streams that are no files: stdout (the caller's pipe or terminal), fmemopen, open_memstream, fopencookie
 * streams, fflush(NULL), and with "popen" a popen stream (its shell is a process of its own, which
 * a Darshan run would log apart).
 * Prints what it read, errno after some successful calls (each made with errno 4321) and, per file, its own count of each stdio call kind as the recorder
 * records them: "count FILE KIND CALLS BYTES" (KIND as docs/trace-format.md names it; BYTES what
 * the calls moved), and "unwrapped-by-darshan FILE reads N writes M" for its getc/putc calls
 * (Darshan 3.5.0 wraps only _IO_getc/_IO_putc). Exit 0, or 1 with a message on a failed call. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { FILES = 4, KINDS = 13, BLOCK = 1000, INTS = 10 };
static const char *file_names[FILES] = {"a", "b", "c", "d"};
static const char *kind_names[KINDS] = {"fopen", "fclose", "fread", "fwrite", "fgets", "fputs",
                                        "fgetc", "fputc", "fprintf", "fscanf", "fflush", "fseek",
                                        "ftell"};
enum { FOPEN, FCLOSE, FREAD, FWRITE, FGETS, FPUTS, FGETC, FPUTC, FPRINTF, FSCANF, FFLUSH, FSEEK,
       FTELL };
static long calls[FILES][KINDS], bytes[FILES][KINDS];
static long darshan_unseen_reads[FILES], darshan_unseen_writes[FILES];

/* errno after some successful calls, each made with errno 4321: printed, so that a run under
 * the recorder shows the same values as a plain run. */
enum { KEPT = 6 };
static const char *kept_names[KEPT] = {"fwrite", "fflush", "ftell", "fread", "fgets", "fclose"};
static int kept_errno[KEPT];

static void errno_set(void)
{
    errno = 4321;
}

static void errno_seen(int which)
{
    kept_errno[which] = errno;
}

static void tally(int file, int kind, long moved)
{
    calls[file][kind]++;
    bytes[file][kind] += moved;
}

/* Keeps the compiler from turning calls with constant strings into others (fputs into fwrite). */
static const char *opaque(const char *s)
{
    __asm__("" : "+r"(s));
    return s;
}

static int fail(const char *what)
{
    fprintf(stderr, "stdio_ops: %s: %s\n", what, strerror(errno));
    return 1;
}

static ssize_t cookie_write(void *cookie, const char *buf, size_t size)
{
    (void)cookie;
    (void)buf;
    return (ssize_t)size;
}

/* Streams on no file: none of their calls may be recorded. */
static int not_files(int with_popen)
{
    char area[64] = {0}, *grown = NULL;
    size_t grown_size = 0;
    FILE *memory = fmemopen(area, sizeof area, "w+");
    FILE *growing = open_memstream(&grown, &grown_size);
    cookie_io_functions_t functions = {.write = cookie_write};
    FILE *cookie = fopencookie(NULL, "w", functions);
    if (!memory || !growing || !cookie)
        return fail("memory streams");
    fwrite("memory", 1, 6, memory);
    fprintf(memory, "%d", 7);
    rewind(memory);
    char back[8] = {0};
    if (fread(back, 1, 7, memory) != 7)
        return fail("fread fmemopen");
    fputs(opaque("grown"), growing);
    fwrite("cookie", 1, 6, cookie);
    fclose(memory);
    fclose(growing);
    fclose(cookie);
    char line[32] = "not piped\n";
    if (with_popen) {
        FILE *pipe = popen("echo piped", "r");
        if (!pipe || !fgets(line, sizeof line, pipe))
            return fail("popen");
        pclose(pipe);
    }
    printf("memory streams: %s %s, pipe: %s", back, grown, line);
    fwrite("stdout fwrite\n", 1, 14, stdout);
    fflush(stdout);
    fflush(NULL);   /* every stream: names no file */
    free(grown);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc != 2 && (argc != 3 || (strcmp(argv[2], "popen") != 0 && strcmp(argv[2], "null") != 0))) {
        fprintf(stderr, "usage: stdio_ops DIR [popen|null]\n");
        return 2;
    }
    if (argc == 3 && strcmp(argv[2], "null") == 0) {
        FILE *volatile no_stream = NULL;   /* volatile: the compiler does not see it is NULL */
        return fputs(opaque("lost"), no_stream) == EOF;
    }
    char path[FILES][4096], missing[4096];
    for (int i = 0; i < FILES; i++)
        snprintf(path[i], sizeof path[i], "%s/%s", argv[1], file_names[i]);
    snprintf(missing, sizeof missing, "%s/missing/x", argv[1]);

    /* a: writes, then reads back */
    FILE *a = fopen(path[0], "w+");
    if (!a)
        return fail("fopen a");
    tally(0, FOPEN, 0);
    int a_fd = a->_fileno;
    char block[BLOCK];
    int ints[INTS];
    for (int i = 0; i < BLOCK; i++)
        block[i] = (char)('a' + i % 26);
    for (int i = 0; i < INTS; i++)
        ints[i] = i * i;
    errno_set();
    tally(0, FWRITE, (long)fwrite(block, 1, BLOCK, a));
    errno_seen(0);
    tally(0, FWRITE, (long)(sizeof(int) * fwrite(ints, sizeof(int), INTS, a)));
    tally(0, FPRINTF, fprintf(a, "value %d %s\n", 42, opaque("word")));
    const char *two = opaque("line two\n");
    if (fputs(two, a) == EOF)
        return fail("fputs");
    tally(0, FPUTS, (long)strlen(two));
    tally(0, FPUTC, fputc('X', a) != EOF);
    tally(0, FPUTC, putc('\n', a) != EOF);
    darshan_unseen_writes[0]++;
    errno_set();
    if (fflush(a) != 0)
        return fail("fflush");
    errno_seen(1);
    tally(0, FFLUSH, 0);
    if (fseek(a, 0, SEEK_SET) != 0)
        return fail("fseek");
    tally(0, FSEEK, 0);
    errno_set();
    long at = ftell(a);
    errno_seen(2);
    tally(0, FTELL, 0);
    fpos_t start;
    fgetpos(a, &start);
    char back[BLOCK];
    int ints_back[INTS];
    volatile size_t block_size = BLOCK;   /* not known to fit: fortified, __fread_chk */
    errno_set();
    tally(0, FREAD, (long)fread(back, 1, block_size, a));
    errno_seen(3);
    tally(0, FREAD, (long)(sizeof(int) * fread(ints_back, sizeof(int), INTS, a)));
    long before = ftell(a);
    tally(0, FTELL, 0);
    int value = 0;
    char word[64] = {0};
    int assigned = fscanf(a, "value %d %63s", &value, word);
    long after = ftell(a);
    tally(0, FTELL, 0);
    tally(0, FSCANF, after - before);
    int newline = fgetc(a);
    tally(0, FGETC, newline != EOF);
    char line[64] = {0};
    volatile int line_size = (int)sizeof line;   /* not known to fit: fortified, __fgets_chk */
    errno_set();
    if (!fgets(line, line_size, a))
        return fail("fgets");
    errno_seen(4);
    tally(0, FGETS, (long)strlen(line));
    int x = getc(a);
    tally(0, FGETC, x != EOF);
    darshan_unseen_reads[0]++;
    rewind(a);
    tally(0, FSEEK, 0);
    if (fsetpos(a, &start) != 0)
        return fail("fsetpos");
    tally(0, FSEEK, 0);
    printf("a: at %ld, block %s, ints %s, scanned %d: %d %s, newline %d, line %s", at,
           memcmp(block, back, BLOCK) ? "differs" : "same",
           memcmp(ints, ints_back, sizeof ints) ? "differ" : "same", assigned, value, word,
           newline == '\n', line);
    printf("a: getc %c\n", x);
    errno_set();
    if (fclose(a) != 0)
        return fail("fclose a");
    errno_seen(5);
    printf("errno after successful calls:");
    for (int i = 0; i < KEPT; i++)
        printf(" %s %d", kept_names[i], kept_errno[i]);
    printf("\n");
    tally(0, FCLOSE, 0);

    /* b: a plain descriptor that takes the number a's stream had */
    int b_fd = open(path[1], O_CREAT | O_WRONLY | O_TRUNC, 0600);
    if (b_fd < 0 || write(b_fd, "bee\n", 4) != 4 || close(b_fd) != 0)
        return fail("b");
    printf("b: same descriptor number as a: %s\n", b_fd == a_fd ? "yes" : "no");

    /* c: a descriptor made a stream by fdopen */
    int c_fd = open(path[2], O_CREAT | O_WRONLY | O_TRUNC, 0600);
    FILE *c = c_fd >= 0 ? fdopen(c_fd, "a") : NULL;
    if (!c)
        return fail("fdopen c");
    tally(2, FOPEN, 0);
    const char *sea = opaque("sea\n");
    if (fputs(sea, c) == EOF)
        return fail("fputs c");
    tally(2, FPUTS, (long)strlen(sea));
    if (fclose(c) != 0)
        return fail("fclose c");
    tally(2, FCLOSE, 0);

    /* d: a stream on c reopened on d */
    FILE *reopened = fopen(path[2], "r");
    if (!reopened)
        return fail("fopen c");
    tally(2, FOPEN, 0);
    errno = 0;
    size_t none_written = fwrite("x", 1, 2, reopened);   /* a stream opened "r": fails */
    tally(2, FWRITE, (long)none_written);
    printf("fwrite to a read stream: %zu, errno %s\n", none_written, strerrorname_np(errno));
    reopened = freopen(path[3], "w", reopened);
    if (!reopened)
        return fail("freopen d");
    tally(3, FOPEN, 0);
    tally(3, FPRINTF, fprintf(reopened, "dee %d\n", 4));
    if (fclose(reopened) != 0)
        return fail("fclose d");
    tally(3, FCLOSE, 0);

    /* a failed fopen: its errno as without the recorder */
    errno = 0;
    FILE *none = fopen(missing, "r");
    printf("missing: %s, errno %s\n", none ? "opened" : "not opened", strerrorname_np(errno));

    if (not_files(argc == 3) != 0)   /* "popen" */
        return 1;
    for (int f = 0; f < FILES; f++)
        for (int k = 0; k < KINDS; k++)
            if (calls[f][k])
                printf("count %s %s %ld %ld\n", file_names[f], kind_names[k], calls[f][k],
                       bytes[f][k]);
    for (int f = 0; f < FILES; f++)
        if (darshan_unseen_reads[f] || darshan_unseen_writes[f])
            printf("unwrapped-by-darshan %s reads %ld writes %ld\n", file_names[f],
                   darshan_unseen_reads[f], darshan_unseen_writes[f]);
    return 0;
}
