/*
 * Overhead probe for stdio: CALLS fwrite calls of 8 bytes to a stream on FILE (opened "w"), in
 * the main thread, timed in batches of BATCH calls. glibc copies each into the stream's buffer
 * and writes the buffer (4 KiB) to the file every 512 calls, with or without the recorder.
 * Prints one line: the median batch's cost per call and the mean cost per call over all
 * batches, in nanoseconds; then the process's peak resident memory (VmHWM) in KiB. Run it with
 * and without the recorder; the difference is the recorder's added cost per call.
 * usage: stdio-loop FILE CALLS BATCH
 */
#include <stdio.h>
#include <stdlib.h>

#include "probe.h"

enum { RECORD = 8 };

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: %s FILE CALLS BATCH\n", argv[0]);
        return 2;
    }
    long calls = atol(argv[2]), batch = atol(argv[3]);
    FILE *out = fopen(argv[1], "w");
    if (!out || batch < 1 || calls < batch)
        return 3;
    char record[RECORD] = "12345678";
    for (long i = 0; i < batch; i++)                 /* warm the buffer and the code */
        fwrite(record, 1, RECORD, out);
    long batches = calls / batch;
    double *per_call = malloc(sizeof *per_call * batches);
    for (long b = 0; b < batches; b++) {
        double start = now_ns();
        for (long i = 0; i < batch; i++)
            if (fwrite(record, 1, RECORD, out) != RECORD)
                return 3;
        per_call[b] = (now_ns() - start) / batch;
    }
    if (fclose(out) != 0)
        return 3;
    double median, mean;
    summarise_batches(per_call, batches, &median, &mean);
    printf("%.2f %.2f\n", median, mean);
    print_peak_memory();
    return 0;
}
