// SPDX-License-Identifier: MIT
/*
 * Logging and size parsing shared by the engine, the tools and the daemon.
 */
#include <ctype.h>
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "nvmefs/util.h"

static void (*log_sink)(enum nvmefs_log_level, const char *);
static enum nvmefs_log_level log_max = NVMEFS_LOG_INFO;
static const char *log_ident = "nvmefs";
static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;

void nvmefs_log_set_sink(void (*sink)(enum nvmefs_log_level, const char *))
{
	log_sink = sink;
}

void nvmefs_log_set_level(enum nvmefs_log_level max)
{
	log_max = max;
}

void nvmefs_log_set_ident(const char *ident)
{
	log_ident = ident;
}

void nvmefs_log(enum nvmefs_log_level level, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;

	if (level > log_max)
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (log_sink) {
		log_sink(level, msg);
		return;
	}
	/* One fprintf per line, serialized so threads' lines never interleave. */
	pthread_mutex_lock(&log_lock);
	fprintf(stderr, "%s: %s\n", log_ident, msg);
	pthread_mutex_unlock(&log_lock);
}

int nvmefs_parse_size(const char *s, uint64_t *out)
{
	unsigned long long v;
	unsigned shift = 0;
	char *end;

	if (!s || !isdigit((unsigned char)*s))
		return -EINVAL;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno == ERANGE)
		return -ERANGE;
	switch (toupper((unsigned char)*end)) {
	case '\0':
		break;
	case 'K':
		shift = 10;
		break;
	case 'M':
		shift = 20;
		break;
	case 'G':
		shift = 30;
		break;
	case 'T':
		shift = 40;
		break;
	case 'P':
		shift = 50;
		break;
	default:
		return -EINVAL;
	}
	if (*end) {
		end++;
		/* Accept K, KB, KiB (all binary). */
		if (*end == 'i')
			end++;
		if (*end == 'B' || *end == 'b')
			end++;
		if (*end)
			return -EINVAL;
	}
	if (shift && v > (UINT64_MAX >> shift))
		return -ERANGE;
	*out = (uint64_t)v << shift;
	return 0;
}

const char *nvmefs_fmt_size(uint64_t bytes, char *buf, unsigned buflen)
{
	static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
	unsigned u = 0;
	double v = (double)bytes;

	while (v >= 1024 && u < 5) {
		v /= 1024;
		u++;
	}
	if (u == 0 || v == (double)(uint64_t)v)
		snprintf(buf, buflen, "%llu %s", (unsigned long long)v, units[u]);
	else
		snprintf(buf, buflen, "%.2f %s", v, units[u]);
	return buf;
}

uint64_t nvmefs_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

#define HUGE_PAGE ((size_t)2 << 20)

int nvmefs_mlock(const void *addr, size_t len)
{
	return syscall(SYS_mlock, addr, len) ? -errno : 0;
}

int nvmefs_munlock(const void *addr, size_t len)
{
	return syscall(SYS_munlock, addr, len) ? -errno : 0;
}

void *nvmefs_map_buffers(size_t bytes, size_t *len)
{
	bool huge = bytes >= HUGE_PAGE;
	size_t sz = huge ? (bytes + HUGE_PAGE - 1) & ~(HUGE_PAGE - 1) : bytes;
	size_t extra = huge ? HUGE_PAGE : 0;
	char *m =
		mmap(NULL, sz + extra, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	char *b;

	if (m == MAP_FAILED)
		return NULL;
	b = m;
	if (huge) { /* keep the aligned sz bytes inside */
		b = (char *)(((uintptr_t)m + HUGE_PAGE - 1) & ~(uintptr_t)(HUGE_PAGE - 1));
		if (b > m)
			munmap(m, (size_t)(b - m));
		munmap(b + sz, (size_t)(m + sz + extra - (b + sz)));
		(void)madvise(b, bytes & ~(HUGE_PAGE - 1), MADV_HUGEPAGE);
	}
	*len = sz;
	return b;
}
