/* SPDX-License-Identifier: MIT */
/*
 * Small helpers shared by every nvmefs program: logging with a switchable
 * sink, and parsing of human sizes ("4K", "1M", "2G").
 */
#ifndef NVMEFS_UTIL_H
#define NVMEFS_UTIL_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

enum nvmefs_log_level {
	NVMEFS_LOG_ERR = 3,
	NVMEFS_LOG_WARN = 4,
	NVMEFS_LOG_INFO = 6,
	NVMEFS_LOG_DEBUG = 7,
};

/*
 * Log one line (no trailing newline needed) at level. Goes to stderr as
 * "nvmefs: <msg>" unless a sink was set. Messages above the current maximum
 * level (default INFO) are dropped. Thread-safe.
 */
void nvmefs_log(enum nvmefs_log_level level, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* Send log lines to sink instead of stderr (NULL restores stderr). */
void nvmefs_log_set_sink(void (*sink)(enum nvmefs_log_level level, const char *msg));

/* Drop messages above max (e.g. NVMEFS_LOG_DEBUG enables everything). */
void nvmefs_log_set_level(enum nvmefs_log_level max);

/* Prefix for stderr lines, normally the program name (default "nvmefs"). */
void nvmefs_log_set_ident(const char *ident);

#define nvmefs_err(...)	  nvmefs_log(NVMEFS_LOG_ERR, __VA_ARGS__)
#define nvmefs_warn(...)  nvmefs_log(NVMEFS_LOG_WARN, __VA_ARGS__)
#define nvmefs_info(...)  nvmefs_log(NVMEFS_LOG_INFO, __VA_ARGS__)
#define nvmefs_debug(...) nvmefs_log(NVMEFS_LOG_DEBUG, __VA_ARGS__)

/*
 * Parse a size: decimal digits with an optional binary suffix K, M, G, T, P
 * (powers of 1024; "KiB", "k" and "KB" are accepted and mean the same).
 * Returns 0 and sets *out, or -EINVAL (not a size) / -ERANGE (overflows).
 */
int nvmefs_parse_size(const char *s, uint64_t *out);

/* Format bytes as "512 B", "4 KiB", "1.50 GiB" into buf; returns buf. */
const char *nvmefs_fmt_size(uint64_t bytes, char *buf, unsigned buflen);

/* Monotonic clock in nanoseconds. */
uint64_t nvmefs_now_ns(void);

/*
 * Map bytes of anonymous memory for I/O buffers, on huge pages where the
 * kernel gives them: at least 2 MiB is aligned to 2 MiB and asked for
 * transparent huge pages (MADV_HUGEPAGE), but for the last partial huge
 * page, which the buffers share with nothing and which would otherwise
 * hold memory past them. The kernel pins a buffer's pages for every
 * O_DIRECT transfer and every FUSE reply copied from it: one or two
 * page-table leaves a MiB on huge pages, 256 entries on small ones
 * (docs/PERFORMANCE.md, "Huge pages for the io_uring payloads"). Lock it,
 * if at all, in one call over bytes: a lock ending inside a huge page
 * splits the mapping and leaves that page small. Returns the mapping and
 * its length in *len (munmap both), or NULL.
 */
void *nvmefs_map_buffers(size_t bytes, size_t *len);

/*
 * mlock(2) and munlock(2) by system call: AddressSanitizer turns the libc
 * calls into no-ops, which would leave the sanitizer build's buffers
 * silently unlocked (and blind to RLIMIT_MEMLOCK) while the release
 * build's are not. 0 or -errno.
 */
int nvmefs_mlock(const void *addr, size_t len);
int nvmefs_munlock(const void *addr, size_t len);

#endif
