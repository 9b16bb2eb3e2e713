/* SPDX-License-Identifier: MIT */
/*
 * Minimal test harness shared by tests/test_*.c: CHECK() records a failure
 * with its location and goes on, test_result() turns the count into the exit
 * code (0 pass, 1 fail), TEST_SKIP() exits 77 as ctest's SKIP_RETURN_CODE.
 */
#ifndef NVMEFS_TEST_UTIL_H
#define NVMEFS_TEST_UTIL_H

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static unsigned test_failures;

#define CHECKF(cond, ...)                                                                          \
	do {                                                                                       \
		if (!(cond)) {                                                                     \
			if (test_failures++ < 20) {                                                \
				fprintf(stderr, "%s:%d: FAIL: %s: ", __FILE__, __LINE__, #cond);   \
				fprintf(stderr, __VA_ARGS__);                                      \
				fputc('\n', stderr);                                               \
			}                                                                          \
		}                                                                                  \
	} while (0)

#define CHECK(cond) CHECKF(cond, "%s", "")

/* Compare two -errno style values and print both on mismatch. */
#define CHECK_ERR(got, want)                                                                       \
	do {                                                                                       \
		long long g_ = (long long)(got), w_ = (long long)(want);                           \
		CHECKF(g_ == w_, "got %lld (%s), want %lld (%s)", g_, strerror((int)-g_), w_,      \
		       strerror((int)-w_));                                                        \
	} while (0)

#define TEST_SKIP(...)                                                                             \
	do {                                                                                       \
		fprintf(stderr, "SKIP: " __VA_ARGS__);                                             \
		fputc('\n', stderr);                                                               \
		exit(77);                                                                          \
	} while (0)

static inline int test_result(void)
{
	if (test_failures) {
		fprintf(stderr, "%u check(s) failed\n", test_failures);
		return 1;
	}
	printf("all checks passed\n");
	return 0;
}

/* Seed from NVMEFS_TEST_SEED or the clock; callers print it. */
static inline uint64_t test_seed(void)
{
	const char *e = getenv("NVMEFS_TEST_SEED");

	struct timespec ts;
	uint64_t z;

	if (e && *e)
		return strtoull(e, NULL, 0);
	clock_gettime(CLOCK_REALTIME, &ts);
	/* splitmix64 of the time, so nearby runs get unrelated seeds */
	z = ((uint64_t)ts.tv_sec << 30) ^ (uint64_t)ts.tv_nsec;
	z += 0x9e3779b97f4a7c15ull;
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

#endif
