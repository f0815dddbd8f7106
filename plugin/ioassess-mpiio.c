/*
 * libioassess-mpiio.so: the MPI-IO layer. Interposes the MPI_File_* data calls (blocking,
 * non-blocking, collective, shared-pointer, split-collective *_begin, MPI_File_sync), calls the
 * MPI library's PMPI_File_* between two clock readings and records each call into the process's
 * trace through libioassess.so (ioassess-layer.h), so one process writes one trace. While a
 * call runs, the POSIX ops the MPI library makes on this thread are marked as under MPI-IO, and
 * under collective MPI-IO for a collective call: with collective buffering those are the
 * aggregators' reads and writes. MPI_File_open / _close / _set_view are interposed to know each
 * file handle's name and view; they are not timed.
 *
 * Safe in any process: the PMPI_* functions are found with dlsym(RTLD_NEXT) at a wrapper's first
 * use, so the library has no MPI dependency (a non-MPI program, also with LD_BIND_NOW, loads it
 * and never runs it). MPI is asked only what cannot fail (a failing PMPI call could invoke an
 * error handler the application did not expect): about datatypes and statuses after the
 * application's own call succeeded with them, and about the individual file pointer of a file
 * it opened without MPI_MODE_SEQUENTIAL, never inside another MPI-IO call. Every wrapper returns
 * exactly what the MPI library returned.
 * The view and datatype facts come from MPI itself, so this file knows no implementation's
 * internals; it is compiled against the mpi.h of the MPI it is built for (its ABI: MPICH's here).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <strings.h>

#include <mpi.h>

#include "ioassess-layer.h"
#include "ioassess-trace.h"

#define EXPORT __attribute__((visibility("default")))
/* The PMPI_ name of a wrapper is the wrapper too, as Darshan's are: a tool preloaded in front of
 * this library calls the PMPI_ functions, so its wrappers lead here and both tools see every
 * call, in either preload order. Calls nested in a recorded call are not recorded again
 * (ioassess_layer_begin), and the real function is always the next library's PMPI_ one. */
#define ALSO_PMPI(name) EXPORT extern __typeof__(name) P##name __attribute__((alias(#name)));
#define likely(x) __builtin_expect(!!(x), 1)
#define unlikely(x) __builtin_expect(!!(x), 0)

/* The MPI library's PMPI_ function of an MPI_ name, found at first use; typeof names its type
 * without referring to the symbol, so nothing here needs an MPI library to load. */
#define REAL(name) static __typeof__(&P##name) real_##name
#define RESOLVE(name)                                                          \
    do {                                                                       \
        if (unlikely(!real_##name))                                            \
            real_##name = (__typeof__(real_##name))dlsym(RTLD_NEXT, "P" #name); \
    } while (0)
/* No PMPI_ function at all cannot happen in a working MPI program; fail as MPI would. */
#define CALL(name, args) (likely(real_##name != NULL) ? real_##name args : MPI_ERR_INTERN)

/* ---- open files: handle -> file id and view ---- */

#define FILE_SLOTS 4096u                       /* open files at a time: three quarters of it */
#define CACHED_FILES 4u                        /* per thread */

struct mpi_file {
    MPI_File handle;        /* key; MPI_FILE_NULL: a free slot */
    uint64_t file_id;       /* as in op records (the POSIX layer's id of the same file) */
    int64_t disp;           /* the view's displacement, bytes */
    int64_t etype_bytes;    /* etype size when the view maps offsets linearly (bytes =
                               disp + offset * etype_bytes); 0: byte offsets unknown */
    int sequential;         /* opened with MPI_MODE_SEQUENTIAL: no individual file pointer */
};

/* The open files, an open-addressing table used only under files_lock (so closing a file can
 * move the entries after it instead of leaving markers that fill the table). */
static struct mpi_file files[FILE_SLOTS];
static uint32_t files_open;
static pthread_mutex_t files_lock = PTHREAD_MUTEX_INITIALIZER;
/* Bumped under the lock whenever an entry changes or goes: a copy made before is stale. */
static uint64_t files_generation;

/* Each thread keeps copies of the entries it used last, so a data call takes no lock: one load
 * of files_generation tells whether a copy is still good. */
struct cached_file {
    MPI_File handle;        /* MPI_FILE_NULL: empty */
    uint64_t generation;    /* files_generation when copied */
    struct mpi_file file;
};
static __thread struct cached_file cached[CACHED_FILES];

static inline uint32_t slot_of(MPI_File handle)
{
    uint64_t key = (uint64_t)(uintptr_t)handle;
    return (uint32_t)((key * 0x9e3779b97f4a7c15ull) >> 52) % FILE_SLOTS;
}

/* The slot holding handle, or the free slot where it would go. Caller holds the lock. */
static struct mpi_file *slot_for(MPI_File handle)
{
    uint32_t i = slot_of(handle);
    while (files[i].handle != handle && files[i].handle != MPI_FILE_NULL)
        i = (i + 1) % FILE_SLOTS;
    return &files[i];
}

/* A copy of the open file of a handle (valid during the calling wrapper), NULL if the handle
 * is not a recorded file. */
static const struct mpi_file *find_file(MPI_File handle)
{
    struct cached_file *c = &cached[((uintptr_t)handle >> 4) % CACHED_FILES];
    uint64_t generation = __atomic_load_n(&files_generation, __ATOMIC_ACQUIRE);
    if (likely(c->handle == handle && c->generation == generation && handle != MPI_FILE_NULL))
        return &c->file;
    if (handle == MPI_FILE_NULL)
        return NULL;
    pthread_mutex_lock(&files_lock);
    const struct mpi_file *f = slot_for(handle);
    if (f->handle == handle) {
        c->handle = handle;
        c->generation = __atomic_load_n(&files_generation, __ATOMIC_RELAXED);
        c->file = *f;
    }
    pthread_mutex_unlock(&files_lock);
    return f->handle == handle ? &c->file : NULL;
}

static void remember_file(MPI_File handle, uint64_t file_id, int sequential)
{
    pthread_mutex_lock(&files_lock);
    struct mpi_file *f = slot_for(handle);
    if (f->handle == handle || files_open < FILE_SLOTS / 4 * 3) {
        files_open += f->handle != handle;
        *f = (struct mpi_file){handle, file_id, 0, sequential ? 0 : 1, sequential};  /* default
                                                                     view: bytes */
        __atomic_store_n(&files_generation, files_generation + 1, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&files_lock);
}

/* Forget a closed file; the entries after it in its run move up, so lookups stay exact. */
static void forget_file(MPI_File handle)
{
    pthread_mutex_lock(&files_lock);
    struct mpi_file *f = slot_for(handle);
    if (f->handle == handle) {
        f->handle = MPI_FILE_NULL;
        files_open--;
        for (uint32_t i = (uint32_t)(f - files + 1) % FILE_SLOTS; files[i].handle != MPI_FILE_NULL;
             i = (i + 1) % FILE_SLOTS) {
            struct mpi_file moved = files[i];
            files[i].handle = MPI_FILE_NULL;
            *slot_for(moved.handle) = moved;
        }
        __atomic_store_n(&files_generation, files_generation + 1, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&files_lock);
}

/* A new view of an open file. */
static void change_view(MPI_File handle, int64_t disp, int64_t etype_bytes)
{
    pthread_mutex_lock(&files_lock);
    struct mpi_file *f = slot_for(handle);
    if (f->handle == handle) {
        f->disp = disp;
        f->etype_bytes = f->sequential ? 0 : etype_bytes;
        __atomic_store_n(&files_generation, files_generation + 1, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&files_lock);
}

/* ROMIO's file system prefix ("ufs:", "lustre:", ...): ROMIO opens the name after the first
 * colon when the colon is past the second character (a drive letter is not a prefix). */
static const char *without_prefix(const char *name)
{
    const char *colon = strchr(name, ':');
    return colon && colon > name + 1 ? colon + 1 : name;
}

/* ---- MPI facts, asked only about arguments the MPI library just accepted ---- */

REAL(MPI_Type_size_x);
REAL(MPI_Type_get_extent_x);
REAL(MPI_Type_get_true_extent_x);
REAL(MPI_Get_count);
REAL(MPI_Error_class);
REAL(MPI_File_get_position);

static MPI_Count type_bytes(MPI_Datatype datatype)
{
    RESOLVE(MPI_Type_size_x);
    MPI_Count size = 0;
    if (CALL(MPI_Type_size_x, (datatype, &size)) != MPI_SUCCESS || size == MPI_UNDEFINED)
        return 0;
    return size;
}

/* Bytes requested (count x type size) and the op record's result: the bytes the status says
 * were moved (the bytes requested without a status, or for a call that only starts the
 * transfer), or minus the MPI error class of a failed call (its request is then 0: the
 * datatype may be what was wrong with it). */
struct amounts {
    uint64_t requested;
    int64_t result;
};

static struct amounts amounts(int rc, MPI_Count count, MPI_Datatype datatype,
                              const MPI_Status *status)
{
    if (unlikely(rc != MPI_SUCCESS)) {
        RESOLVE(MPI_Error_class);
        int class = MPI_ERR_OTHER;
        CALL(MPI_Error_class, (rc, &class));
        return (struct amounts){0, -(int64_t)class};
    }
    if (count <= 0)
        return (struct amounts){0, 0};
    MPI_Count size = type_bytes(datatype);
    struct amounts a = {(uint64_t)count * (uint64_t)size, (int64_t)(count * size)};
    if (status && status != MPI_STATUS_IGNORE) {
        RESOLVE(MPI_Get_count);
        int moved;
        if (CALL(MPI_Get_count, (status, datatype, &moved)) == MPI_SUCCESS &&
            moved != MPI_UNDEFINED)
            a.result = (int64_t)moved * size;
    }
    return a;
}

/* Byte offset of an explicit offset (in etypes of the file's view), -1 if not linear. */
static inline int64_t offset_at(const struct mpi_file *f, MPI_Offset offset)
{
    return f->etype_bytes > 0 ? f->disp + (int64_t)offset * f->etype_bytes : -1;
}

/* Byte offset of the individual file pointer, before the call that moves it. */
static inline int64_t offset_here(MPI_File fh, const struct mpi_file *f)
{
    if (f->etype_bytes <= 0)
        return -1;
    RESOLVE(MPI_File_get_position);
    MPI_Offset position;
    if (CALL(MPI_File_get_position, (fh, &position)) != MPI_SUCCESS)
        return -1;
    return offset_at(f, position);
}

#define SHARED_POINTER(fh, f) ((void)(fh), (void)(f), (int64_t)-1)  /* shared by the processes:
                                                                 not known without a lock */
#define HERE(fh, f) offset_here(fh, f)

/* The POSIX ops this thread makes inside a call with these flags carry these. */
#define NESTED(flags)                                                          \
    (IOASSESS_OP_UNDER_MPIIO | (((flags) & IOASSESS_OP_COLLECTIVE) ? IOASSESS_OP_UNDER_COLLECTIVE : 0))

/* The body of every recorded data call. `offset` is evaluated before the call, when it is to
 * be recorded (never inside another MPI-IO call); `status` is a pointer or NULL (non-blocking
 * calls). */
#define RECORDED(name, op, flags, offset, buf, count, datatype, status, args)   \
    do {                                                                       \
        RESOLVE(name);                                                         \
        const struct mpi_file *f_ = find_file(fh);                             \
        if (!f_ || unlikely(!real_##name) || !ioassess_layer_begin(NESTED(flags))) \
            return CALL(name, args);                                           \
        uint64_t file_id_ = f_->file_id;                                       \
        int64_t offset_ = offset;                                              \
        uint64_t start_ = ioassess_layer_ticks();                              \
        int rc_ = real_##name args;                                            \
        uint64_t end_ = ioassess_layer_ticks();                                \
        int errno_ = errno;                                                    \
        struct amounts a_ = amounts(rc_, (MPI_Count)(count), datatype, status); \
        ioassess_layer_end(op, flags, file_id_, offset_, a_.requested, a_.result, start_, end_, \
                           buf);                                               \
        errno = errno_;                                                        \
        return rc_;                                                            \
    } while (0)

/* (fh, buf, count, datatype, status): individual or shared file pointer, blocking. */
#define BLOCKING(name, buf_t, count_t, op, flags, where)                       \
    REAL(name);                                                                \
    EXPORT int name(MPI_File fh, buf_t buf, count_t count, MPI_Datatype datatype, \
                    MPI_Status *status)                                        \
    {                                                                          \
        RECORDED(name, op, flags, where(fh, f_), buf, count, datatype, status, \
                 (fh, buf, count, datatype, status));                          \
    }                                                                          \
    ALSO_PMPI(name)

/* (fh, offset, buf, count, datatype, status): explicit offset, blocking. */
#define BLOCKING_AT(name, buf_t, count_t, op, flags)                           \
    REAL(name);                                                                \
    EXPORT int name(MPI_File fh, MPI_Offset offset, buf_t buf, count_t count,  \
                    MPI_Datatype datatype, MPI_Status *status)                 \
    {                                                                          \
        RECORDED(name, op, flags, offset_at(f_, offset), buf, count, datatype, status, \
                 (fh, offset, buf, count, datatype, status));                  \
    }                                                                          \
    ALSO_PMPI(name)

/* (fh, buf, count, datatype, request): the call starts the transfer. */
#define STARTING(name, buf_t, count_t, op, flags, where)                       \
    REAL(name);                                                                \
    EXPORT int name(MPI_File fh, buf_t buf, count_t count, MPI_Datatype datatype, \
                    MPI_Request *request)                                      \
    {                                                                          \
        RECORDED(name, op, (flags) | IOASSESS_OP_NONBLOCKING, where(fh, f_), buf, count, \
                 datatype, NULL, (fh, buf, count, datatype, request));         \
    }                                                                          \
    ALSO_PMPI(name)

/* (fh, offset, buf, count, datatype, request) */
#define STARTING_AT(name, buf_t, count_t, op, flags)                           \
    REAL(name);                                                                \
    EXPORT int name(MPI_File fh, MPI_Offset offset, buf_t buf, count_t count,  \
                    MPI_Datatype datatype, MPI_Request *request)               \
    {                                                                          \
        RECORDED(name, op, (flags) | IOASSESS_OP_NONBLOCKING, offset_at(f_, offset), buf, \
                 count, datatype, NULL, (fh, offset, buf, count, datatype, request)); \
    }                                                                          \
    ALSO_PMPI(name)

/* Split collectives' *_begin: (fh, buf, count, datatype) */
#define SPLIT_BEGIN(name, buf_t, count_t, op, where)                           \
    REAL(name);                                                                \
    EXPORT int name(MPI_File fh, buf_t buf, count_t count, MPI_Datatype datatype) \
    {                                                                          \
        RECORDED(name, op, IOASSESS_OP_COLLECTIVE | IOASSESS_OP_NONBLOCKING, where(fh, f_), \
                 buf, count, datatype, NULL, (fh, buf, count, datatype));      \
    }                                                                          \
    ALSO_PMPI(name)

/* (fh, offset, buf, count, datatype) */
#define SPLIT_BEGIN_AT(name, buf_t, count_t, op)                               \
    REAL(name);                                                                \
    EXPORT int name(MPI_File fh, MPI_Offset offset, buf_t buf, count_t count,  \
                    MPI_Datatype datatype)                                     \
    {                                                                          \
        RECORDED(name, op, IOASSESS_OP_COLLECTIVE | IOASSESS_OP_NONBLOCKING,   \
                 offset_at(f_, offset), buf, count, datatype, NULL,            \
                 (fh, offset, buf, count, datatype));                          \
    }                                                                          \
    ALSO_PMPI(name)

#define COLL IOASSESS_OP_COLLECTIVE
#define INDEP 0
#define R void *
#define W const void *

/* Each data call, with int count and (MPI-4) with MPI_Count count: the _c form records as the
 * plain one. */
#define DATA_CALLS(suffix, count_t)                                                              \
    BLOCKING(MPI_File_read##suffix, R, count_t, IOASSESS_OP_MPI_FILE_READ, INDEP, HERE)          \
    BLOCKING(MPI_File_write##suffix, W, count_t, IOASSESS_OP_MPI_FILE_WRITE, INDEP, HERE)        \
    BLOCKING_AT(MPI_File_read_at##suffix, R, count_t, IOASSESS_OP_MPI_FILE_READ_AT, INDEP)       \
    BLOCKING_AT(MPI_File_write_at##suffix, W, count_t, IOASSESS_OP_MPI_FILE_WRITE_AT, INDEP)     \
    BLOCKING(MPI_File_read_all##suffix, R, count_t, IOASSESS_OP_MPI_FILE_READ_ALL, COLL, HERE)   \
    BLOCKING(MPI_File_write_all##suffix, W, count_t, IOASSESS_OP_MPI_FILE_WRITE_ALL, COLL, HERE) \
    BLOCKING_AT(MPI_File_read_at_all##suffix, R, count_t, IOASSESS_OP_MPI_FILE_READ_AT_ALL, COLL) \
    BLOCKING_AT(MPI_File_write_at_all##suffix, W, count_t, IOASSESS_OP_MPI_FILE_WRITE_AT_ALL,   \
                COLL)                                                                            \
    BLOCKING(MPI_File_read_shared##suffix, R, count_t, IOASSESS_OP_MPI_FILE_READ_SHARED, INDEP,  \
             SHARED_POINTER)                                                                     \
    BLOCKING(MPI_File_write_shared##suffix, W, count_t, IOASSESS_OP_MPI_FILE_WRITE_SHARED,      \
             INDEP, SHARED_POINTER)                                                              \
    BLOCKING(MPI_File_read_ordered##suffix, R, count_t, IOASSESS_OP_MPI_FILE_READ_ORDERED, COLL, \
             SHARED_POINTER)                                                                     \
    BLOCKING(MPI_File_write_ordered##suffix, W, count_t, IOASSESS_OP_MPI_FILE_WRITE_ORDERED,    \
             COLL, SHARED_POINTER)                                                               \
    STARTING(MPI_File_iread##suffix, R, count_t, IOASSESS_OP_MPI_FILE_IREAD, INDEP, HERE)        \
    STARTING(MPI_File_iwrite##suffix, W, count_t, IOASSESS_OP_MPI_FILE_IWRITE, INDEP, HERE)      \
    STARTING_AT(MPI_File_iread_at##suffix, R, count_t, IOASSESS_OP_MPI_FILE_IREAD_AT, INDEP)     \
    STARTING_AT(MPI_File_iwrite_at##suffix, W, count_t, IOASSESS_OP_MPI_FILE_IWRITE_AT, INDEP)   \
    STARTING(MPI_File_iread_all##suffix, R, count_t, IOASSESS_OP_MPI_FILE_IREAD_ALL, COLL, HERE) \
    STARTING(MPI_File_iwrite_all##suffix, W, count_t, IOASSESS_OP_MPI_FILE_IWRITE_ALL, COLL,     \
             HERE)                                                                               \
    STARTING_AT(MPI_File_iread_at_all##suffix, R, count_t, IOASSESS_OP_MPI_FILE_IREAD_AT_ALL,    \
                COLL)                                                                            \
    STARTING_AT(MPI_File_iwrite_at_all##suffix, W, count_t, IOASSESS_OP_MPI_FILE_IWRITE_AT_ALL,  \
                COLL)                                                                            \
    STARTING(MPI_File_iread_shared##suffix, R, count_t, IOASSESS_OP_MPI_FILE_IREAD_SHARED,       \
             INDEP, SHARED_POINTER)                                                              \
    STARTING(MPI_File_iwrite_shared##suffix, W, count_t, IOASSESS_OP_MPI_FILE_IWRITE_SHARED,     \
             INDEP, SHARED_POINTER)                                                              \
    SPLIT_BEGIN(MPI_File_read_all_begin##suffix, R, count_t, IOASSESS_OP_MPI_FILE_READ_ALL_BEGIN, \
                HERE)                                                                            \
    SPLIT_BEGIN(MPI_File_write_all_begin##suffix, W, count_t,                                   \
                IOASSESS_OP_MPI_FILE_WRITE_ALL_BEGIN, HERE)                                      \
    SPLIT_BEGIN_AT(MPI_File_read_at_all_begin##suffix, R, count_t,                              \
                   IOASSESS_OP_MPI_FILE_READ_AT_ALL_BEGIN)                                       \
    SPLIT_BEGIN_AT(MPI_File_write_at_all_begin##suffix, W, count_t,                             \
                   IOASSESS_OP_MPI_FILE_WRITE_AT_ALL_BEGIN)                                      \
    SPLIT_BEGIN(MPI_File_read_ordered_begin##suffix, R, count_t,                                \
                IOASSESS_OP_MPI_FILE_READ_ORDERED_BEGIN, SHARED_POINTER)                         \
    SPLIT_BEGIN(MPI_File_write_ordered_begin##suffix, W, count_t,                               \
                IOASSESS_OP_MPI_FILE_WRITE_ORDERED_BEGIN, SHARED_POINTER)

DATA_CALLS(, int)
#if MPI_VERSION >= 4
DATA_CALLS(_c, MPI_Count)
#endif

/* MPI_File_sync is collective: every process flushes (ROMIO: an fsync each). */
REAL(MPI_File_sync);
EXPORT int MPI_File_sync(MPI_File fh)
{
    RECORDED(MPI_File_sync, IOASSESS_OP_MPI_FILE_SYNC, COLL, -1, NULL, 0, MPI_DATATYPE_NULL,
             NULL, (fh));
}
ALSO_PMPI(MPI_File_sync)

/* ---- file handles: name, view ---- */

REAL(MPI_File_open);
EXPORT int MPI_File_open(MPI_Comm comm, const char *filename, int amode, MPI_Info info,
                         MPI_File *fh)
{
    RESOLVE(MPI_File_open);
    int rc = CALL(MPI_File_open, (comm, filename, amode, info, fh));
    if (rc == MPI_SUCCESS) {
        int saved_errno = errno;
        uint64_t file_id = ioassess_layer_file(without_prefix(filename));
        if (file_id)
            remember_file(*fh, file_id, (amode & MPI_MODE_SEQUENTIAL) != 0);
        errno = saved_errno;
    }
    return rc;
}
ALSO_PMPI(MPI_File_open)

REAL(MPI_File_close);
EXPORT int MPI_File_close(MPI_File *fh)
{
    RESOLVE(MPI_File_close);
    MPI_File handle = fh ? *fh : MPI_FILE_NULL;
    int rc = CALL(MPI_File_close, (fh));
    if (rc == MPI_SUCCESS)
        forget_file(handle);
    return rc;
}
ALSO_PMPI(MPI_File_close)

/* Offsets of a view are linear in its etypes when the filetype is contiguous (no holes, no
 * moved bounds) and the representation is native; anything else leaves them unknown. */
static int64_t linear_etype_bytes(MPI_Offset disp, MPI_Datatype etype, MPI_Datatype filetype,
                                  const char *datarep)
{
    RESOLVE(MPI_Type_get_extent_x);
    RESOLVE(MPI_Type_get_true_extent_x);
    MPI_Count lb, extent, true_lb, true_extent, size = type_bytes(filetype);
    if (disp == MPI_DISPLACEMENT_CURRENT || !datarep || strcasecmp(datarep, "native") != 0 ||
        CALL(MPI_Type_get_extent_x, (filetype, &lb, &extent)) != MPI_SUCCESS ||
        CALL(MPI_Type_get_true_extent_x, (filetype, &true_lb, &true_extent)) != MPI_SUCCESS ||
        lb != 0 || true_lb != 0 || extent != size || true_extent != size)
        return 0;
    return type_bytes(etype);
}

REAL(MPI_File_set_view);
EXPORT int MPI_File_set_view(MPI_File fh, MPI_Offset disp, MPI_Datatype etype,
                             MPI_Datatype filetype, const char *datarep, MPI_Info info)
{
    RESOLVE(MPI_File_set_view);
    int rc = CALL(MPI_File_set_view, (fh, disp, etype, filetype, datarep, info));
    if (rc == MPI_SUCCESS && find_file(fh)) {
        int saved_errno = errno;
        change_view(fh, disp, linear_etype_bytes(disp, etype, filetype, datarep));
        errno = saved_errno;
    }
    return rc;
}
ALSO_PMPI(MPI_File_set_view)
