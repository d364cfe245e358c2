/* An LD_PRELOAD shim that makes fdatasync fail on demand, for tests/fsync_failure.rs.
 *
 * Control files live in the directory named by FERRY_FAILSYNC_DIR (one per test, so tests
 * running in parallel never see each other's switches):
 *   fail_once    fdatasync fails once with EIO and removes the file (the next call succeeds,
 *                as a retry would on Linux after the kernel dropped the dirty pages);
 *   fail_always  fdatasync fails with EIO for as long as the file exists.
 * failsync_count() returns how many times fdatasync was called in this process.
 *
 * Build: cc -shared -fPIC -o libfailsync.so failsync.c -ldl
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static long calls = 0;

long failsync_count(void) { return __atomic_load_n(&calls, __ATOMIC_SEQ_CST); }

/* Whether the control file `name` exists; with `consume`, also removes it (atomically: only
 * one caller can remove it). */
static int control(const char *name, int consume) {
    const char *dir = getenv("FERRY_FAILSYNC_DIR");
    char path[PATH_MAX];
    if (dir == NULL) return 0;
    int n = snprintf(path, sizeof path, "%s/%s", dir, name);
    if (n < 0 || (size_t)n >= sizeof path) return 0;
    return consume ? unlink(path) == 0 : access(path, F_OK) == 0;
}

int fdatasync(int fd) {
    static int (*real)(int) = NULL;
    int (*next)(int) = __atomic_load_n(&real, __ATOMIC_ACQUIRE);
    if (next == NULL) {
        next = (int (*)(int))dlsym(RTLD_NEXT, "fdatasync");
        __atomic_store_n(&real, next, __ATOMIC_RELEASE);
    }
    __atomic_add_fetch(&calls, 1, __ATOMIC_SEQ_CST);
    int saved = errno;
    if (control("fail_always", 0) || control("fail_once", 1)) {
        errno = EIO;
        return -1;
    }
    errno = saved;
    return next(fd);
}
