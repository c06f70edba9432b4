/* A wall-clock shim for a process libfaketime cannot start: redis-server's jemalloc reads
 * the clock while libfaketime is still initialising, and libfaketime 0.9.10 gives up
 * ("Unexpected recursive calls to clock_gettime()"). Preloaded (LD_PRELOAD), this shifts
 * CLOCK_REALTIME (and its coarse variant), gettimeofday and time by the offset written in
 * the file $ROW_FENCE_TEST_CLOCK_OFFSET names, in libfaketime's spelling ("+0", "+1h",
 * "-3s", "+90m", "+1d"; no unit: seconds), read again on every call, so a test steps the
 * clock of a running server by rewriting the file. Monotonic clocks are left alone.
 *
 * Only raw system calls: no malloc, no dlsym, no stdio, nothing that could read the clock
 * itself and recurse. Linux only (tests/e2e/clock_floor.rs compiles it with cc). */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

static long long offset_ns(void) {
  const char *path = getenv("ROW_FENCE_TEST_CLOCK_OFFSET");
  if (!path) return 0;
  long fd = syscall(SYS_openat, AT_FDCWD, path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  char buf[64];
  long n = syscall(SYS_read, fd, buf, sizeof buf - 1);
  syscall(SYS_close, fd);
  if (n <= 0) return 0;
  buf[n] = 0;
  const char *p = buf;
  while (*p == ' ' || *p == '\t') p++;
  long long sign = 1;
  if (*p == '+') p++;
  else if (*p == '-') { sign = -1; p++; }
  long long value = 0;
  while (*p >= '0' && *p <= '9') value = value * 10 + (*p++ - '0');
  long long unit = 1;
  switch (*p) {
    case 'm': unit = 60; break;
    case 'h': unit = 3600; break;
    case 'd': unit = 86400; break;
    default: unit = 1;
  }
  return sign * value * unit * 1000000000LL;
}

static int real_clock_gettime(clockid_t id, struct timespec *ts) {
  return (int)syscall(SYS_clock_gettime, id, ts);
}

static void shift(struct timespec *ts) {
  long long ns = (long long)ts->tv_sec * 1000000000LL + ts->tv_nsec + offset_ns();
  ts->tv_sec = ns / 1000000000LL;
  ts->tv_nsec = ns % 1000000000LL;
}

int clock_gettime(clockid_t id, struct timespec *ts) {
  int r = real_clock_gettime(id, ts);
  if (r == 0 && (id == CLOCK_REALTIME || id == CLOCK_REALTIME_COARSE)) shift(ts);
  return r;
}

int gettimeofday(struct timeval *tv, void *tz) {
  (void)tz;
  struct timespec ts;
  if (real_clock_gettime(CLOCK_REALTIME, &ts) != 0) return -1;
  shift(&ts);
  if (tv) {
    tv->tv_sec = ts.tv_sec;
    tv->tv_usec = ts.tv_nsec / 1000;
  }
  return 0;
}

time_t time(time_t *out) {
  struct timespec ts;
  if (real_clock_gettime(CLOCK_REALTIME, &ts) != 0) return (time_t)-1;
  shift(&ts);
  if (out) *out = ts.tv_sec;
  return ts.tv_sec;
}
