/* An LD_PRELOAD shim that makes fdatasync fail on demand, for tests/fsync_failure.rs.
 *
 * Control files live in the directory named by FERRY_FAILSYNC_DIR (one per test, so tests
 * running in parallel never see each other's switches):
 *   fail_once    fdatasync fails once with EIO and removes the file (the next call succeeds,
 *                as a retry would on Linux after the kernel dropped the dirty pages);
 *   fail_always  fdatasync fails with EIO for as long as the file exists;
 *   slow_ms      fdatasync first sleeps this many milliseconds (the file's content), as a
 *                slow disk would; a failure switch is checked after the sleep.
 * failsync_count() returns how many times fdatasync was called in this process, and
 * failsync_max_concurrent() the most calls that were running at once.
 *
 * Build: cc -shared -fPIC -o libfailsync.so failsync.c -ldl
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static long calls = 0;
static long running = 0;
static long max_running = 0;

long failsync_count(void) { return __atomic_load_n(&calls, __ATOMIC_SEQ_CST); }

long failsync_max_concurrent(void) { return __atomic_load_n(&max_running, __ATOMIC_SEQ_CST); }

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

/* The delay in slow_ms, or 0. */
static long slow_ms(void) {
    const char *dir = getenv("FERRY_FAILSYNC_DIR");
    char path[PATH_MAX];
    if (dir == NULL) return 0;
    int n = snprintf(path, sizeof path, "%s/slow_ms", dir);
    if (n < 0 || (size_t)n >= sizeof path) return 0;
    FILE *f = fopen(path, "r");
    if (f == NULL) return 0;
    long ms = 0;
    if (fscanf(f, "%ld", &ms) != 1) ms = 0;
    fclose(f);
    return ms;
}

static void note_running(long delta) {
    long now = __atomic_add_fetch(&running, delta, __ATOMIC_SEQ_CST);
    long seen = __atomic_load_n(&max_running, __ATOMIC_SEQ_CST);
    while (now > seen &&
           !__atomic_compare_exchange_n(&max_running, &seen, now, 0, __ATOMIC_SEQ_CST,
                                        __ATOMIC_SEQ_CST)) {
    }
}

int fdatasync(int fd) {
    static int (*real)(int) = NULL;
    int (*next)(int) = __atomic_load_n(&real, __ATOMIC_ACQUIRE);
    if (next == NULL) {
        next = (int (*)(int))dlsym(RTLD_NEXT, "fdatasync");
        __atomic_store_n(&real, next, __ATOMIC_RELEASE);
    }
    __atomic_add_fetch(&calls, 1, __ATOMIC_SEQ_CST);
    note_running(1);
    int saved = errno;
    long delay = slow_ms();
    if (delay > 0) {
        struct timespec ts = {delay / 1000, (delay % 1000) * 1000000L};
        while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
        }
    }
    if (control("fail_always", 0) || control("fail_once", 1)) {
        note_running(-1);
        errno = EIO;
        return -1;
    }
    errno = saved;
    int result = next(fd);
    note_running(-1);
    return result;
}
