/* loadlib LIB FILE
 * Loads LIB with dlopen (its constructors run, as for any library a program loads itself),
 * then writes "written\n" to FILE (created, truncated) and reads it back. Prints "loaded" and
 * the line read; exits 1 if LIB cannot be loaded or FILE cannot be written and read. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    if (argc != 3) { fprintf(stderr, "usage: %s LIB FILE\n", argv[0]); return 2; }
    if (!dlopen(argv[1], RTLD_NOW)) { fprintf(stderr, "%s\n", dlerror()); return 1; }
    printf("loaded\n");
    int fd = open(argv[2], O_RDWR | O_CREAT | O_TRUNC, 0644);
    char line[16] = "";
    if (fd < 0 || pwrite(fd, "written\n", 8, 0) != 8 || pread(fd, line, 8, 0) != 8) {
        perror(argv[2]);
        return 1;
    }
    close(fd);
    printf("%s", line);
    return 0;
}
