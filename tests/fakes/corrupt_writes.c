/* FAKE disk corrupting its writes, for tests only (this VM's kernel has no device-mapper, so no
 * dm-flakey). LD_PRELOADed into a lab host's probes: like dm-flakey's `corrupt_bio_byte N w V`,
 * byte N (CORRUPT_BYTE, 1-based) of every write of >= 4 KiB to a file under CORRUPT_UNDER is
 * set to V (CORRUPT_VALUE) before the kernel gets it: pwrite/pwrite64 (fio's psync, the built-in
 * writer) and libaio's io_submit (fio's libaio). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/types.h>

struct fake_iocb {  /* libaio's struct iocb on 64-bit little-endian */
    void *data; unsigned long key; short opcode; short reqprio; int fildes;
    void *buf; unsigned long nbytes; long long offset;
};

static void corrupt(int fd, const void *buf, size_t n) {
    const char *under = getenv("CORRUPT_UNDER");
    long nth = getenv("CORRUPT_BYTE") ? atol(getenv("CORRUPT_BYTE")) : 1;
    char link[64], path[PATH_MAX];
    if (!under || n < 4096 || nth < 1 || (size_t)nth > n) return;
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t k = readlink(link, path, sizeof path - 1);
    if (k <= 0) return;
    path[k] = 0;
    if (strncmp(path, under, strlen(under))) return;
    ((unsigned char *)buf)[nth - 1] = getenv("CORRUPT_VALUE") ? atoi(getenv("CORRUPT_VALUE")) : 0;
}

ssize_t pwrite64(int fd, const void *buf, size_t n, off_t off) {
    static ssize_t (*real)(int, const void *, size_t, off_t);
    if (!real) real = dlsym(RTLD_NEXT, "pwrite64");
    corrupt(fd, buf, n);
    return real(fd, buf, n, off);
}

ssize_t pwrite(int fd, const void *buf, size_t n, off_t off) { return pwrite64(fd, buf, n, off); }

int io_submit(unsigned long ctx, long nr, struct fake_iocb **iocbs) {
    static int (*real)(unsigned long, long, struct fake_iocb **);
    if (!real) real = dlsym(RTLD_NEXT, "io_submit");
    for (long i = 0; i < nr; i++)
        if (iocbs[i]->opcode == 1)  /* IO_CMD_PWRITE */
            corrupt(iocbs[i]->fildes, iocbs[i]->buf, iocbs[i]->nbytes);
    return real(ctx, nr, iocbs);
}
