/* hugesizes FILE
 * Calls whose byte counts wrap or saturate 64 bits, on FILE (created): fwrite of 2 items of
 * SIZE_MAX / 2 + 2 bytes (size x items wraps to 2: glibc writes 2 bytes and returns 2), then
 * the same fread from the start (2 bytes read), then two reads of SIZE_MAX bytes at the end of
 * the file (0 each). The requests add up to more than 2^64 bytes, the bytes moved to 4. Prints
 * each call's result, one per line. */
#include <stdint.h>
#include <stdio.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    static char buffer[16] = "ab";
    volatile size_t most = SIZE_MAX;     /* unknown to the compiler, which would refuse it */
    FILE *f = argc == 2 ? fopen(argv[1], "w+") : NULL;
    if (!f)
        return 2;
    printf("fwrite %zu\n", fwrite(buffer, most / 2 + 2, 2, f));
    if (fflush(f) != 0)
        return 1;
    rewind(f);
    printf("fread %zu\n", fread(buffer, most / 2 + 2, 2, f));
    for (int i = 0; i < 2; i++)
        printf("read %zd\n", read(fileno(f), buffer, most));
    return fclose(f) != 0;
}
