/*
 * Mount points: which file system each recorded file is on, as the report names it (the mount
 * point and the kernel's name of its type), for the files whose FILE slot this process writes.
 * The mount table (/proc/self/mountinfo) is read when the trace starts, in the helper that
 * creates it (ioassess-writer.c: no process of its own, which would cost a process's start
 * about as much again as the trace's creation), and parsed at the process's first FILE slot; a
 * file's mount point is the longest mount point that is a prefix of its name (at a '/'), the
 * last one listed among equals (it is the one on top). A MOUNT slot is written once per mount
 * point used, before the FILE slot of the first file under it. Everything here runs under
 * ioassess_lock (or in a process with one thread, where the descriptor table takes no lock),
 * with the thread's busy flag set.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sysmacros.h>

#include "ioassess-internal.h"

#define MOUNTINFO_BYTES (256 * 1024)      /* mount tables longer than this are cut there */
#define MOUNTS_MAX 2048

struct mount {
    const char *point;                    /* into mountinfo, unescaped, NUL-terminated */
    const char *fs_type;                  /* into mountinfo, NUL-terminated */
    size_t point_bytes;
    uint64_t device;                      /* makedev(major, minor) */
};

static char mountinfo[MOUNTINFO_BYTES];
static long mountinfo_bytes;              /* read into mountinfo, 0 if none */
static struct mount mounts[MOUNTS_MAX];
static int mount_count = -1;              /* -1: the table not parsed yet */
static uint8_t mount_written[MOUNTS_MAX]; /* its MOUNT slot is in this process's trace */

/* In the helper, as the trace starts: raw system calls only. */
void ioassess_mounts_read(void)
{
    mountinfo_bytes = 0;
    int fd = (int)ioassess_sys_open("/proc/self/mountinfo", O_RDONLY | O_CLOEXEC, 0);
    if (fd < 0)
        return;
    long n;
    while (mountinfo_bytes < MOUNTINFO_BYTES - 1 &&
           (n = syscall(SYS_read, fd, mountinfo + mountinfo_bytes,
                        MOUNTINFO_BYTES - 1 - mountinfo_bytes)) > 0)
        mountinfo_bytes += n;
    ioassess_sys_close(fd);
}

/* The next space-separated field of a line from *p, NUL-terminated in place; NULL at the line's
 * end. mountinfo escapes space, tab, newline and backslash in paths as \ooo (octal): undone in
 * place (the text only shrinks). */
static char *field(char **p)
{
    char *start = *p;
    if (!*start || *start == '\n')
        return NULL;
    char *in = start, *out = start;
    while (*in && *in != ' ' && *in != '\n') {
        if (in[0] == '\\' && in[1] >= '0' && in[1] <= '3' && in[2] >= '0' && in[2] <= '7' &&
            in[3] >= '0' && in[3] <= '7') {
            *out++ = (char)((in[1] - '0') << 6 | (in[2] - '0') << 3 | (in[3] - '0'));
            in += 4;
        } else {
            *out++ = *in++;
        }
    }
    *p = *in == ' ' ? in + 1 : in;
    *out = '\0';
    return start;
}

/* "36 35 98:0 /mnt1 /mnt/parent rw,noatime master:1 - ext3 /dev/root rw": the 3rd field is
 * major:minor, the 5th the mount point, the one after "-" the type. */
static void parse_mountinfo(void)
{
    mount_count = 0;
    mountinfo[mountinfo_bytes] = '\0';
    char *line = mountinfo;
    while (*line && mount_count < MOUNTS_MAX) {
        char *next = strchr(line, '\n');
        if (next)
            *next++ = '\0';
        else
            next = line + strlen(line);  /* the last line, maybe cut short: parsed if whole */
        char *p = line, *fields[5] = {0}, *f = NULL, *fs_type = NULL;
        int i = 0;
        while (i < 5 && (fields[i] = field(&p)))
            i++;
        while (i == 5 && (f = field(&p)) && strcmp(f, "-") != 0)
            ;
        if (i == 5 && f)
            fs_type = field(&p);
        char *colon = NULL, *end = NULL;
        unsigned long major = fs_type ? strtoul(fields[2], &colon, 10) : 0;
        unsigned long minor = colon && *colon == ':' ? strtoul(colon + 1, &end, 10) : 0;
        if (fs_type && end && *end == '\0' && fields[4][0] == '/')
            mounts[mount_count++] = (struct mount){fields[4], fs_type, strlen(fields[4]),
                                                   makedev(major, minor)};
        line = next;
    }
}

/* The index of name's mount point, -1 if none (a name that is not absolute: a hash, a
 * descriptor's placeholder). */
static int mount_of(const char *name)
{
    int best = -1;
    if (name[0] != '/')
        return best;
    for (int i = 0; i < mount_count; i++) {
        const struct mount *m = &mounts[i];
        size_t n = m->point_bytes;
        if (strncmp(name, m->point, n) == 0 && (n == 1 || name[n] == '/' || name[n] == '\0') &&
            (best < 0 || n >= mounts[best].point_bytes))
            best = i;
    }
    return best;
}

void ioassess_mounts_note(const char *name)
{
    if (name[0] != '/')
        return;
    if (mount_count < 0)
        parse_mountinfo();
    int i = mount_of(name);
    if (i < 0 || mount_written[i])
        return;
    mount_written[i] = 1;
    ioassess_writer_mount(mounts[i].point, mounts[i].fs_type, mounts[i].device);
}

/* A fork child writes its own trace, its MOUNT slots again, from the table its start reads. */
void ioassess_mounts_fork_child(void)
{
    mount_count = -1;
    memset(mount_written, 0, sizeof mount_written);
}
