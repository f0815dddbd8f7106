/*
 * The interposed C stdio calls: the STDIO layer (ioassess-trace.h, IOASSESS_OP_FOPEN ..
 * IOASSESS_OP_FTELL). glibc's stdio moves its buffers with its own internal read and write,
 * which LD_PRELOAD cannot reach, so a program that writes with fwrite or fprintf is seen only
 * here. Each call on a stream is timed and recorded as one op of its call family, as Darshan's
 * STDIO module counts them (docs/trace-format.md, "stdio ops"); fopen and fclose also keep the
 * descriptor table true, since glibc opens and closes the stream's descriptor out of our sight.
 *
 * Which streams: those whose descriptor (the FILE's _fileno, read directly: fileno() is a call
 * Darshan counts) is a recorded regular file in the descriptor table (ioassess-fd.c: outside the
 * excluded prefixes). stdout or stderr on a terminal or a pipe, memory streams (fmemopen,
 * open_memstream: _fileno -1), cookie streams and popen's pipes are never recorded.
 *
 * Records have offset -1: a stream's position moves with calls not wrapped here (ungetc,
 * getline, the wide-character calls, putw/getw, printf on a redirected stdout), and glibc keeps
 * the kernel's offset only after a seek; a position kept here would be wrong after any of them.
 *
 * The hot path of fwrite on a recorded stream: the stream's descriptor slot (ioassess_tracked),
 * its flags, the next definition between the two clock reads, one op record. A thread flag
 * keeps the stdio calls made inside a recorded one (a stacked Darshan's ftell around fscanf
 * and after fseek) from being recorded as the application's. errno is read only when a call
 * failed and never changed.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>

#include "ioassess-internal.h"

/* glibc's optimising headers make some of these calls macros; here they are the functions. */
#undef fread_unlocked
#undef fwrite_unlocked
#undef fgetc
#undef getc
#undef fputc
#undef putc

/* GCC knows these calls' streams as nonnull and would drop our tests of them; an application
 * may still pass NULL (the call then fails or crashes as without us, never in our code). */
#define OPAQUE(p) ({ __typeof__(p) p_ = (p); __asm__("" : "+r"(p_)); p_; })

#define STDIO_CALLS(X)                                                              \
    X(fopen, FILE *, (const char *, const char *))                                  \
    X(fopen64, FILE *, (const char *, const char *))                                \
    X(fdopen, FILE *, (int, const char *))                                          \
    X(freopen, FILE *, (const char *, const char *, FILE *))                        \
    X(freopen64, FILE *, (const char *, const char *, FILE *))                      \
    X(fclose, int, (FILE *))                                                        \
    X(fread, size_t, (void *, size_t, size_t, FILE *))                              \
    X(fread_unlocked, size_t, (void *, size_t, size_t, FILE *))                     \
    X(__fread_chk, size_t, (void *, size_t, size_t, size_t, FILE *))                \
    X(__fread_unlocked_chk, size_t, (void *, size_t, size_t, size_t, FILE *))       \
    X(fwrite, size_t, (const void *, size_t, size_t, FILE *))                       \
    X(fwrite_unlocked, size_t, (const void *, size_t, size_t, FILE *))              \
    X(fgets, char *, (char *, int, FILE *))                                         \
    X(fgets_unlocked, char *, (char *, int, FILE *))                                \
    X(__fgets_chk, char *, (char *, size_t, int, FILE *))                           \
    X(fputs, int, (const char *, FILE *))                                           \
    X(fputs_unlocked, int, (const char *, FILE *))                                  \
    X(fgetc, int, (FILE *))                                                         \
    X(getc, int, (FILE *))                                                          \
    X(_IO_getc, int, (FILE *))                                                      \
    X(fputc, int, (int, FILE *))                                                    \
    X(putc, int, (int, FILE *))                                                     \
    X(_IO_putc, int, (int, FILE *))                                                 \
    X(vfprintf, int, (FILE *, const char *, va_list))                               \
    X(__vfprintf_chk, int, (FILE *, int, const char *, va_list))                    \
    X(vfscanf, int, (FILE *, const char *, va_list))                                \
    X(__isoc99_vfscanf, int, (FILE *, const char *, va_list))                       \
    X(fflush, int, (FILE *))                                                        \
    X(fseek, int, (FILE *, long, int))                                              \
    X(fseeko, int, (FILE *, off_t, int))                                            \
    X(fseeko64, int, (FILE *, off64_t, int))                                        \
    X(fsetpos, int, (FILE *, const fpos_t *))                                       \
    X(fsetpos64, int, (FILE *, const fpos64_t *))                                   \
    X(rewind, void, (FILE *))                                                       \
    X(ftell, long, (FILE *))                                                        \
    X(ftello, off_t, (FILE *))                                                      \
    X(ftello64, off64_t, (FILE *))

#define DECLARE_REAL(name, ret, params) static ret (*real_##name) params;
STDIO_CALLS(DECLARE_REAL)

/* ---- which streams ---- */

/* Whether a stdio call is to be recorded at all: the recorder is on, not busy on this thread
 * (a signal handler interrupting it), and not inside a recorded stdio call. */
static inline int stdio_on(void)
{
    return ioassess_active() && !ioassess_self.busy && !ioassess_self.stdio_nested;
}

/* The file description of a stream on a recorded regular file, else NULL. */
static inline struct ioassess_ofd *stream_file(FILE *stream)
{
    stream = OPAQUE(stream);
    if (unlikely(!stream) || unlikely(ioassess_self.stdio_nested))
        return NULL;
    struct ioassess_ofd *o = ioassess_tracked(stream->_fileno);
    return o && (__atomic_load_n(&o->flags, __ATOMIC_RELAXED) & IOASSESS_OFD_REGULAR) ? o : NULL;
}

/* ---- recording ---- */

static inline void record(uint8_t op, struct ioassess_ofd *o, uint64_t requested, int64_t result,
                          uint64_t start, uint64_t end, const void *buffer)
{
    ioassess_record(op, 0, __atomic_load_n(&o->file_id, __ATOMIC_RELAXED), -1, requested,
                    result, start, end, buffer);
}

/* The call on a recorded stream between the two clock reads; result_ is what it returned,
 * error_before_ the stream's error indicator before it (read from the FILE as ferror does).
 * stdio_nested is set meanwhile: a stacked library's stdio calls inside it pass through. */
#define STREAM_TIMED(type, stream, call)                                       \
    struct ioassess_thread *t_ = &ioassess_self;                               \
    int error_before_ = (stream)->_flags & _IO_ERR_SEEN;                       \
    t_->stdio_nested = 1;                                                      \
    int tsc_ = ioassess_config.use_tsc;                                        \
    uint64_t start_ = ioassess_ticks_start(tsc_);                              \
    type result_ = (call);                                                     \
    uint64_t end_ = ioassess_ticks_end(tsc_);                                  \
    t_->stdio_nested = 0

/* A read's or write's result: the bytes it moved; one that moved none, -errno if it set the
 * stream's error indicator, else 0 (the end of the file). */
static inline int64_t moved(uint64_t bytes, FILE *stream, int error_before)
{
    if (bytes > 0)
        return bytes > INT64_MAX ? INT64_MAX : (int64_t)bytes;
    return !error_before && (stream->_flags & _IO_ERR_SEEN) ? -(int64_t)errno : 0;
}

/* size x items, saturated: the request as the program made it. */
static inline uint64_t items_bytes(size_t size, size_t items)
{
    uint64_t bytes;
    return __builtin_mul_overflow(size, items, &bytes) ? UINT64_MAX : bytes;
}

/* The bytes fread or fwrite moved when it returned `done` of `items` items: glibc moves
 * size x items computed modulo 2^64 and returns `items` when all of that moved, else the whole
 * items moved. So a product that wraps (fwrite(buf, SIZE_MAX / 2 + 2, 2, f) writes 2 bytes)
 * moved the wrapped product, not a saturated one. */
static inline uint64_t items_moved(size_t size, size_t items, size_t done)
{
    return done == items ? (uint64_t)size * items : (uint64_t)size * done;
}

/* ---- reads and writes ---- */

/* fread, fwrite: requested size x nmemb, result size x the items moved. */
#define ITEMS(op, name, ptr, size, nmemb, stream, ...)                         \
    do {                                                                       \
        RESOLVE_OR_FAIL(name, 0);                                                \
        struct ioassess_ofd *o_ = stream_file(stream);                         \
        if (!o_)                                                               \
            return real_##name(__VA_ARGS__);                                   \
        STREAM_TIMED(size_t, stream, real_##name(__VA_ARGS__));                \
        record(op, o_, items_bytes(size, nmemb),                               \
               moved(items_moved(size, nmemb, result_), stream, error_before_), start_, end_, ptr); \
        return result_;                                                        \
    } while (0)

IOASSESS_EXPORT size_t fread(void *ptr, size_t size, size_t nmemb, FILE *stream)
{
    ITEMS(IOASSESS_OP_FREAD, fread, ptr, size, nmemb, stream, ptr, size, nmemb, stream);
}

IOASSESS_EXPORT size_t fread_unlocked(void *ptr, size_t size, size_t nmemb, FILE *stream)
{
    ITEMS(IOASSESS_OP_FREAD, fread_unlocked, ptr, size, nmemb, stream, ptr, size, nmemb, stream);
}

IOASSESS_EXPORT size_t __fread_chk(void *ptr, size_t ptrlen, size_t size, size_t nmemb,
                                   FILE *stream)
{
    ITEMS(IOASSESS_OP_FREAD, __fread_chk, ptr, size, nmemb, stream, ptr, ptrlen, size, nmemb,
          stream);
}

IOASSESS_EXPORT size_t __fread_unlocked_chk(void *ptr, size_t ptrlen, size_t size, size_t nmemb,
                                            FILE *stream)
{
    ITEMS(IOASSESS_OP_FREAD, __fread_unlocked_chk, ptr, size, nmemb, stream, ptr, ptrlen, size,
          nmemb, stream);
}

IOASSESS_EXPORT size_t fwrite(const void *ptr, size_t size, size_t nmemb, FILE *stream)
{
    ITEMS(IOASSESS_OP_FWRITE, fwrite, ptr, size, nmemb, stream, ptr, size, nmemb, stream);
}

IOASSESS_EXPORT size_t fwrite_unlocked(const void *ptr, size_t size, size_t nmemb, FILE *stream)
{
    ITEMS(IOASSESS_OP_FWRITE, fwrite_unlocked, ptr, size, nmemb, stream, ptr, size, nmemb,
          stream);
}

/* fgets: requested the buffer's size, result the length of the line it stored. */
#define FGETS(name, s, size, stream, ...)                                      \
    do {                                                                       \
        RESOLVE_OR_FAIL(name, NULL);                                             \
        struct ioassess_ofd *o_ = stream_file(stream);                         \
        if (!o_)                                                               \
            return real_##name(__VA_ARGS__);                                   \
        STREAM_TIMED(char *, stream, real_##name(__VA_ARGS__));                \
        record(IOASSESS_OP_FGETS, o_, (size) > 0 ? (uint64_t)(size) : 0,       \
               moved(result_ ? strlen(result_) : 0, stream, error_before_), start_, end_, s); \
        return result_;                                                        \
    } while (0)

IOASSESS_EXPORT char *fgets(char *s, int size, FILE *stream)
{
    FGETS(fgets, s, size, stream, s, size, stream);
}

IOASSESS_EXPORT char *fgets_unlocked(char *s, int size, FILE *stream)
{
    FGETS(fgets_unlocked, s, size, stream, s, size, stream);
}

IOASSESS_EXPORT char *__fgets_chk(char *s, size_t slen, int size, FILE *stream)
{
    FGETS(__fgets_chk, s, size, stream, s, slen, size, stream);
}

/* fputs: the string's length (measured after the call, which read it whole), or -errno. */
#define FPUTS(name, s, stream)                                                 \
    do {                                                                       \
        RESOLVE_OR_FAIL(name, EOF);                                              \
        struct ioassess_ofd *o_ = stream_file(stream);                         \
        if (!o_)                                                               \
            return real_##name(s, stream);                                     \
        STREAM_TIMED(int, stream, real_##name(s, stream));                     \
        int err_ = result_ == EOF ? errno : 0;                                 \
        uint64_t length_ = strlen(s);                                          \
        record(IOASSESS_OP_FPUTS, o_, length_, err_ ? -(int64_t)err_ : (int64_t)length_, \
               start_, end_, s);                                               \
        (void)error_before_;                                                   \
        return result_;                                                        \
    } while (0)

IOASSESS_EXPORT int fputs(const char *s, FILE *stream)
{
    FPUTS(fputs, s, stream);
}

IOASSESS_EXPORT int fputs_unlocked(const char *s, FILE *stream)
{
    FPUTS(fputs_unlocked, s, stream);
}

/* fgetc, getc: one byte, 0 at the end of the file, or -errno. */
#define GETC(name)                                                             \
    do {                                                                       \
        RESOLVE_OR_FAIL(name, EOF);                                              \
        struct ioassess_ofd *o_ = stream_file(stream);                         \
        if (!o_)                                                               \
            return real_##name(stream);                                        \
        STREAM_TIMED(int, stream, real_##name(stream));                        \
        record(IOASSESS_OP_FGETC, o_, 1, moved(result_ != EOF, stream, error_before_), \
               start_, end_, NULL);                                            \
        return result_;                                                        \
    } while (0)

IOASSESS_EXPORT int fgetc(FILE *stream)
{
    GETC(fgetc);
}

IOASSESS_EXPORT int getc(FILE *stream)
{
    GETC(getc);
}

IOASSESS_EXPORT int _IO_getc(FILE *stream)
{
    GETC(_IO_getc);
}

/* fputc, putc: one byte, or -errno (EOF is returned only on an error). */
#define PUTC(name)                                                             \
    do {                                                                       \
        RESOLVE_OR_FAIL(name, EOF);                                              \
        struct ioassess_ofd *o_ = stream_file(stream);                         \
        if (!o_)                                                               \
            return real_##name(c, stream);                                     \
        STREAM_TIMED(int, stream, real_##name(c, stream));                     \
        record(IOASSESS_OP_FPUTC, o_, 1, result_ != EOF ? 1 : -(int64_t)errno, start_, end_, \
               NULL);                                                          \
        (void)error_before_;                                                   \
        return result_;                                                        \
    } while (0)

IOASSESS_EXPORT int fputc(int c, FILE *stream)
{
    PUTC(fputc);
}

IOASSESS_EXPORT int putc(int c, FILE *stream)
{
    PUTC(putc);
}

IOASSESS_EXPORT int _IO_putc(int c, FILE *stream)
{
    PUTC(_IO_putc);
}

/* fprintf and its forms, through the v* form of the next definition: requested and result the
 * bytes written (what it returned), or -errno. */
#define PRINTF(call)                                                           \
    do {                                                                       \
        struct ioassess_ofd *o_ = stream_file(stream);                         \
        if (!o_)                                                               \
            return call;                                                       \
        STREAM_TIMED(int, stream, call);                                       \
        int64_t outcome_ = ioassess_outcome(result_, result_ < 0 ? errno : 0); \
        record(IOASSESS_OP_FPRINTF, o_, result_ > 0 ? (uint64_t)result_ : 0, outcome_, \
               start_, end_, NULL);                                            \
        (void)error_before_;                                                   \
        return result_;                                                        \
    } while (0)

static int printed(FILE *stream, const char *format, va_list args)
{
    PRINTF(real_vfprintf(stream, format, args));
}

static int printed_chk(FILE *stream, int flag, const char *format, va_list args)
{
    PRINTF(real___vfprintf_chk(stream, flag, format, args));
}

#define VARIADIC(last, call)                                                   \
    do {                                                                       \
        va_list args;                                                          \
        va_start(args, last);                                                  \
        int result = call;                                                     \
        va_end(args);                                                          \
        return result;                                                         \
    } while (0)

IOASSESS_EXPORT int fprintf(FILE *stream, const char *format, ...)
{
    RESOLVE_OR_FAIL(vfprintf, -1);
    VARIADIC(format, printed(stream, format, args));
}

IOASSESS_EXPORT int vfprintf(FILE *stream, const char *format, va_list args)
{
    RESOLVE_OR_FAIL(vfprintf, -1);
    return printed(stream, format, args);
}

IOASSESS_EXPORT int __fprintf_chk(FILE *stream, int flag, const char *format, ...)
{
    RESOLVE_OR_FAIL(__vfprintf_chk, -1);
    VARIADIC(format, printed_chk(stream, flag, format, args));
}

IOASSESS_EXPORT int __vfprintf_chk(FILE *stream, int flag, const char *format, va_list args)
{
    RESOLVE_OR_FAIL(__vfprintf_chk, -1);
    return printed_chk(stream, flag, format, args);
}

/* The stream's position from the next ftell (errno kept), -1 if it has none. */
static inline long position(FILE *stream)
{
    int saved_errno = errno;
    long at = real_ftell ? real_ftell(stream) : -1;
    errno = saved_errno;
    return at;
}

/* fscanf and its forms: requested and result the bytes it consumed, the stream's position
 * (ftell, as Darshan measures them) before and after it, outside the timed interval; -errno if
 * it set the stream's error indicator. What it assigned is not recorded. */
static int scanned(FILE *stream, const char *format, va_list args,
                   int (*real)(FILE *, const char *, va_list))
{
    struct ioassess_ofd *o_ = stream_file(stream);
    if (!o_)
        return real(stream, format, args);
    long before = position(stream);
    STREAM_TIMED(int, stream, real(stream, format, args));
    long after = position(stream);
    uint64_t bytes = before >= 0 && after > before ? (uint64_t)(after - before) : 0;
    int64_t outcome = moved(bytes, stream, error_before_);
    record(IOASSESS_OP_FSCANF, o_, bytes, outcome, start_, end_, NULL);
    return result_;
}

/* glibc's headers name the ISO C99 forms fscanf and vfscanf (an asm label): the plain symbols,
 * which binaries built with older headers or without _GNU_SOURCE-like modes call, are defined
 * under other C names. */
IOASSESS_EXPORT int plain_fscanf(FILE *stream, const char *format, ...) __asm__("fscanf");
IOASSESS_EXPORT int plain_vfscanf(FILE *stream, const char *format, va_list args)
    __asm__("vfscanf");

IOASSESS_EXPORT int plain_fscanf(FILE *stream, const char *format, ...)
{
    RESOLVE_OR_FAIL(vfscanf, EOF);
    VARIADIC(format, scanned(stream, format, args, real_vfscanf));
}

IOASSESS_EXPORT int plain_vfscanf(FILE *stream, const char *format, va_list args)
{
    RESOLVE_OR_FAIL(vfscanf, EOF);
    return scanned(stream, format, args, real_vfscanf);
}

IOASSESS_EXPORT int __isoc99_fscanf(FILE *stream, const char *format, ...)
{
    RESOLVE_OR_FAIL(__isoc99_vfscanf, EOF);
    VARIADIC(format, scanned(stream, format, args, real___isoc99_vfscanf));
}

IOASSESS_EXPORT int __isoc99_vfscanf(FILE *stream, const char *format, va_list args)
{
    RESOLVE_OR_FAIL(__isoc99_vfscanf, EOF);
    return scanned(stream, format, args, real___isoc99_vfscanf);
}

/* ---- flush, seek, tell ---- */

/* A call that returns 0 or, failing, -1 or EOF with errno: recorded as 0 or -errno. */
#define STATUS_CALL(op, name, type, failure, ...)                              \
    do {                                                                       \
        RESOLVE_OR_FAIL(name, failure);                                          \
        struct ioassess_ofd *o_ = stream_file(stream);                         \
        if (!o_)                                                               \
            return real_##name(__VA_ARGS__);                                   \
        STREAM_TIMED(type, stream, real_##name(__VA_ARGS__));                  \
        record(op, o_, 0, ioassess_outcome(result_, result_ < 0 ? errno : 0), start_, end_, \
               NULL);                                                          \
        (void)error_before_;                                                   \
        return result_;                                                        \
    } while (0)

/* fflush of one stream: a write (its buffer reaches the kernel). fflush(NULL) flushes every
 * stream at once and is not recorded (it names no file). */
IOASSESS_EXPORT int fflush(FILE *stream)
{
    STATUS_CALL(IOASSESS_OP_FFLUSH, fflush, int, EOF, stream);
}

IOASSESS_EXPORT int fseek(FILE *stream, long offset, int whence)
{
    STATUS_CALL(IOASSESS_OP_FSEEK, fseek, int, -1, stream, offset, whence);
}

IOASSESS_EXPORT int fseeko(FILE *stream, off_t offset, int whence)
{
    STATUS_CALL(IOASSESS_OP_FSEEK, fseeko, int, -1, stream, offset, whence);
}

IOASSESS_EXPORT int fseeko64(FILE *stream, off64_t offset, int whence)
{
    STATUS_CALL(IOASSESS_OP_FSEEK, fseeko64, int, -1, stream, offset, whence);
}

IOASSESS_EXPORT int fsetpos(FILE *stream, const fpos_t *pos)
{
    STATUS_CALL(IOASSESS_OP_FSEEK, fsetpos, int, -1, stream, pos);
}

IOASSESS_EXPORT int fsetpos64(FILE *stream, const fpos64_t *pos)
{
    STATUS_CALL(IOASSESS_OP_FSEEK, fsetpos64, int, -1, stream, pos);
}

/* ftell: the position it returned, or -errno. */
IOASSESS_EXPORT long ftell(FILE *stream)
{
    STATUS_CALL(IOASSESS_OP_FTELL, ftell, long, -1, stream);
}

IOASSESS_EXPORT off_t ftello(FILE *stream)
{
    STATUS_CALL(IOASSESS_OP_FTELL, ftello, off_t, -1, stream);
}

IOASSESS_EXPORT off64_t ftello64(FILE *stream)
{
    STATUS_CALL(IOASSESS_OP_FTELL, ftello64, off64_t, -1, stream);
}

/* rewind returns nothing: recorded as a seek with result 0. */
IOASSESS_EXPORT void rewind(FILE *stream)
{
    RESOLVE(rewind);
    if (unlikely(!real_rewind))
        return;
    struct ioassess_ofd *o_ = stream_file(stream);
    if (!o_) {
        real_rewind(stream);
        return;
    }
    STREAM_TIMED(int, stream, (real_rewind(stream), 0));
    record(IOASSESS_OP_FSEEK, o_, 0, result_, start_, end_, NULL);
    (void)error_before_;
}

/* ---- open and close ---- */

/* The open flags a stream's mode gives its descriptor that the table keeps (O_APPEND). */
static inline int mode_flags(const char *mode)
{
    return mode[0] == 'a' ? O_APPEND : 0;
}

/* A stream's descriptor closed inside libc (fclose, freopen): forgotten by both tables, so
 * that a later descriptor with its number is looked up afresh. */
static inline void stream_fd_closed(int fd)
{
    if (fd >= 0) {
        ioassess_fd_closed(fd);
        ioassess_meta_fd_closed(fd);
    }
}

/* After a timed open of a stream (fopen, freopen): its new descriptor entered in the table and
 * the op recorded on its file when that is a recorded regular file; a failed open is
 * recorded on its path (ioassess-meta.c), as a failed open() is. */
static FILE *stream_opened(FILE *stream, const char *path, const char *mode, int err,
                           uint64_t start, uint64_t end)
{
    if (!stream) {
        ioassess_meta_opened(IOASSESS_OP_FOPEN, AT_FDCWD, path, 0, -1, err, start, end);
        return stream;
    }
    ioassess_fd_opened(stream->_fileno, mode_flags(mode));
    struct ioassess_ofd *o = stream_file(stream);
    if (o)
        record(IOASSESS_OP_FOPEN, o, 0, stream->_fileno, start, end, NULL);
    return stream;
}

#define TIMED_OPEN(call)                                                       \
    ioassess_self.stdio_nested = 1;                                            \
    int tsc_ = ioassess_config.use_tsc;                                        \
    uint64_t start_ = ioassess_ticks_start(tsc_);                              \
    FILE *result_ = (call);                                                    \
    uint64_t end_ = ioassess_ticks_end(tsc_);                                  \
    ioassess_self.stdio_nested = 0;                                            \
    int err_ = result_ ? 0 : errno

#define FOPEN(name)                                                            \
    do {                                                                       \
        RESOLVE_OR_FAIL(name, NULL);                                             \
        if (!stdio_on())                                                       \
            return real_##name(path, mode);                                    \
        TIMED_OPEN(real_##name(path, mode));                                   \
        return stream_opened(result_, path, mode, err_, start_, end_);         \
    } while (0)

IOASSESS_EXPORT FILE *fopen(const char *path, const char *mode)
{
    FOPEN(fopen);
}

IOASSESS_EXPORT FILE *fopen64(const char *path, const char *mode)
{
    FOPEN(fopen64);
}

/* freopen closes the stream's descriptor (also when it fails) and opens another, perhaps with
 * the same number: the old one is forgotten first. A NULL path reopens the same file. */
#define FREOPEN(name)                                                          \
    do {                                                                       \
        RESOLVE_OR_FAIL(name, NULL);                                             \
        int old_fd_ = OPAQUE(stream) ? stream->_fileno : -1;                   \
        if (!stdio_on()) {                                                     \
            FILE *reopened_ = real_##name(path, mode, stream);                 \
            stream_fd_closed(old_fd_);                                         \
            if (reopened_)                                                     \
                ioassess_fd_opened(reopened_->_fileno, mode_flags(mode));      \
            return reopened_;                                                  \
        }                                                                      \
        TIMED_OPEN(real_##name(path, mode, stream));                           \
        stream_fd_closed(old_fd_);                                             \
        return stream_opened(result_, path, mode, err_, start_, end_);         \
    } while (0)

IOASSESS_EXPORT FILE *freopen(const char *path, const char *mode, FILE *stream)
{
    FREOPEN(freopen);
}

IOASSESS_EXPORT FILE *freopen64(const char *path, const char *mode, FILE *stream)
{
    FREOPEN(freopen64);
}

/* fdopen makes a stream of a descriptor the table may know already; mode "a" sets O_APPEND on
 * it inside libc, so its status flags are read again then. */
IOASSESS_EXPORT FILE *fdopen(int fd, const char *mode)
{
    RESOLVE_OR_FAIL(fdopen, NULL);
    struct ioassess_ofd *o = stdio_on() ? ioassess_tracked(fd) : NULL;
    if (!o || !(__atomic_load_n(&o->flags, __ATOMIC_RELAXED) & IOASSESS_OFD_REGULAR))
        return real_fdopen(fd, mode);
    TIMED_OPEN(real_fdopen(fd, mode));
    if (result_ && mode_flags(mode)) {
        int saved_errno = errno;
        ioassess_fd_set_status(fd, (int)syscall(SYS_fcntl, fd, F_GETFL));
        errno = saved_errno;
    }
    record(IOASSESS_OP_FOPEN, o, 0, ioassess_outcome(result_ ? fd : -1, err_), start_, end_,
           NULL);
    return result_;
}

/* fclose closes its descriptor inside libc: the descriptor (read from the FILE before the
 * call) is forgotten after it, whatever the call returned (glibc closes it even when the last
 * flush fails). */
IOASSESS_EXPORT int fclose(FILE *stream)
{
    RESOLVE_OR_FAIL(fclose, EOF);
    int fd = OPAQUE(stream) ? stream->_fileno : -1;
    struct ioassess_ofd *o_ = stream_file(stream);
    if (!o_) {
        int result = real_fclose(stream);
        stream_fd_closed(fd);
        return result;
    }
    uint64_t file_id = __atomic_load_n(&o_->file_id, __ATOMIC_RELAXED);
    STREAM_TIMED(int, stream, real_fclose(stream));
    int err_ = result_ == EOF ? errno : 0;
    stream_fd_closed(fd);
    ioassess_record(IOASSESS_OP_FCLOSE, 0, file_id, -1, 0, err_ ? -(int64_t)err_ : 0, start_,
                    end_, NULL);
    (void)error_before_;
    return result_;
}

/* ---- start-up ---- */

void ioassess_stdio_resolve(void)
{
#define RESOLVE_REAL(name, ret, params) RESOLVE(name);
    STDIO_CALLS(RESOLVE_REAL)
#undef RESOLVE_REAL
}
