/* stdio_copy: copies IN to OUT through stdio only (fopen, fread, fwrite, fclose), then reads IN
 * again with open/read/close, which gets the descriptor number the stdio stream had.
 * usage: stdio_copy IN OUT
 * Prints "copied B bytes in N freads, read B bytes in M reads" (M counts the final read that
 * returns 0); exit 0, or 1 with a message on a failed call. */
#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>

enum { CHUNK = 4096 };

static int fail(const char *what, const char *path)
{
    perror(path);
    fprintf(stderr, "stdio_copy: %s failed\n", what);
    return 1;
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: stdio_copy IN OUT\n");
        return 2;
    }
    char buffer[CHUNK];
    FILE *in = fopen(argv[1], "r"), *out = fopen(argv[2], "w");
    if (!in || !out)
        return fail("fopen", in ? argv[2] : argv[1]);
    size_t copied = 0, freads = 0, n;
    while ((n = fread(buffer, 1, sizeof buffer, in)) > 0) {
        freads++;
        if (fwrite(buffer, 1, n, out) != n)
            return fail("fwrite", argv[2]);
        copied += n;
    }
    if (fclose(in) != 0 || fclose(out) != 0)
        return fail("fclose", argv[1]);
    int fd = open(argv[1], O_RDONLY);
    if (fd < 0)
        return fail("open", argv[1]);
    size_t bytes = 0, reads = 0;
    ssize_t got;
    do {
        got = read(fd, buffer, sizeof buffer);
        reads++;
        bytes += got > 0 ? (size_t)got : 0;
    } while (got > 0);
    if (got < 0 || close(fd) != 0)
        return fail("read", argv[1]);
    printf("copied %zu bytes in %zu freads, read %zu bytes in %zu reads\n", copied, freads, bytes, reads);
    return 0;
}
