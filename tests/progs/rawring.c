/* rawring N_RAW
 * io_uring instances made as liburing >= 2.2 makes them on x86-64, with raw system calls that
 * no wrapper sees (N_RAW of them, left open at exit, as many programs leave them), and one
 * through libc's syscall() (as fio makes its rings), also left open. Prints the number of rings
 * set up. The recorder is to count N_RAW + 1 instances, each once: the raw ones by its scan of
 * the descriptors at exit, the other at its setup (and not again at exit).
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef __NR_io_uring_setup
#define __NR_io_uring_setup 425
#endif

static char params[120];   /* struct io_uring_params, zeroed: the kernel fills it */

static long raw_setup(unsigned entries)
{
    long result;
    memset(params, 0, sizeof params);
    __asm__ volatile("syscall"
                     : "=a"(result)
                     : "0"((long)__NR_io_uring_setup), "D"((long)entries), "S"(params)
                     : "rcx", "r11", "memory");
    return result;
}

int main(int argc, char **argv)
{
    int raw = argc == 2 ? atoi(argv[1]) : 0;
    int made = 0;
    for (int i = 0; i < raw; i++)
        made += raw_setup(4) >= 0;
    memset(params, 0, sizeof params);
    made += syscall(__NR_io_uring_setup, 8, params) >= 0;
    printf("rings %d\n", made);
    return 0;
}
