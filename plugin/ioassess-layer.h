/*
 * The entry points through which a layer library (libioassess-mpiio.so) records its calls into
 * the trace that libioassess.so keeps for the process, so that one process writes one trace.
 * libioassess.so exports them; a layer library links against it. A recorded call:
 *
 *     if (!ioassess_layer_begin(IOASSESS_OP_UNDER_MPIIO | ...))
 *         return the plain call;       (not recording, or inside another layer call)
 *     uint64_t start = ioassess_layer_ticks();
 *     result = the call;               (POSIX ops it makes get the flags given to begin)
 *     uint64_t end = ioassess_layer_ticks();
 *     ioassess_layer_end(op, flags, file_id, offset, requested, result, start, end, buffer);
 *
 * Every begin that returned non-zero must be followed by its end on the same thread; between
 * the two the layer may ask its library what it needs before the call (such questions are
 * never asked inside another layer call). None of them changes errno.
 */
#ifndef IOASSESS_LAYER_H
#define IOASSESS_LAYER_H

#include <stdint.h>

/* Whether the call is to be recorded: not when the recorder is off, or this thread is already
 * inside a recorded layer call (the layer's own implementation calling its public API) or
 * inside the recorder's own bookkeeping. If it is, the POSIX ops this thread makes until the
 * matching end carry nested_flags. */
int ioassess_layer_begin(uint16_t nested_flags);

/* Clock ticks now (as op records store them). */
uint64_t ioassess_layer_ticks(void);

/* Ends the layer call begun at start_ticks and appends its op record (fields as in struct
 * ioassess_op_record; the op kind is of the layer's range). */
void ioassess_layer_end(uint8_t op, uint16_t flags, uint64_t file_id, int64_t offset,
                        uint64_t requested, int64_t result, uint64_t start_ticks,
                        uint64_t end_ticks, const void *buffer);

/* The file id of a path a layer opened (its FILE slot written once, with the canonical path:
 * the id matches the POSIX layer's for the same file); 0 when the file is not recorded: the
 * recorder is off, the path is excluded (IOASSESS_EXCLUDE), or the open is nested in another
 * layer call (a file the layer opens for its own use). */
uint64_t ioassess_layer_file(const char *path);

#endif
