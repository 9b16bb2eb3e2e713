// SPDX-License-Identifier: MIT
/*
 * Pinned buffer pool: alignment, the cap, reuse, blocking get, NUMA
 * placement (checked with get_mempolicy on hosts with 2+ nodes, reported
 * skipped on others), pinning (checked in VmLck, as util.h's lock calls
 * are), slabs of 2 MiB and more
 * asked for huge pages (checked in smaps where the kernel's policy is
 * "madvise"), and the
 * fallback to unpinned buffers when RLIMIT_MEMLOCK is too low, which must be
 * announced exactly once per process and never fail an allocation.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <numa.h>
#include <numaif.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "nvmefs/bufpool.h"
#include "nvmefs/util.h"
#include "test_util.h"

#define MiB (1u << 20)

/* Locked memory of this process in KiB, from /proc/self/status. */
static long vm_locked_kb(void)
{
	char line[256];
	long kb = -1;
	FILE *f = fopen("/proc/self/status", "r");

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "VmLck: %ld kB", &kb) == 1)
			break;
	fclose(f);
	return kb;
}

static void test_bad_options(void)
{
	struct nvmefs_bufpool *p;
	struct nvmefs_bufpool_opts o = {.buf_size = 0, .numa_node = -1};

	CHECK_ERR(nvmefs_bufpool_create(&p, &o), -EINVAL);
	o.buf_size = 2 * MiB;
	o.max_bytes = MiB; /* not even one buffer */
	CHECK_ERR(nvmefs_bufpool_create(&p, &o), -EINVAL);
	CHECK_ERR(nvmefs_bufpool_create(&p, NULL), -EINVAL);
}

static void test_cap_align_reuse(void)
{
	struct nvmefs_bufpool_opts o = {.buf_size = MiB, .max_bytes = 8 * MiB, .numa_node = -1};
	struct nvmefs_bufpool_stats st;
	struct nvmefs_bufpool *p;
	void *bufs[8];
	long lck0 = vm_locked_kb();

	CHECK(nvmefs_bufpool_create(&p, &o) == 0);
	nvmefs_bufpool_stats(p, &st);
	CHECK(st.allocated == 0 && st.max_bufs == 8); /* lazy: nothing yet */
	for (int i = 0; i < 8; i++) {
		bufs[i] = nvmefs_bufpool_tryget(p);
		CHECKF(bufs[i] != NULL, "buffer %d", i);
		if (!bufs[i])
			return;
		CHECK(((uintptr_t)bufs[i] & 4095) == 0);
		memset(bufs[i], i, MiB); /* writable, all of it */
		for (int j = 0; j < i; j++)
			CHECK(bufs[i] != bufs[j]);
	}
	CHECK(nvmefs_bufpool_tryget(p) == NULL); /* at the cap */
	nvmefs_bufpool_stats(p, &st);
	CHECK(st.allocated == 8 && st.in_use == 8 && st.buf_size == MiB);
	if (geteuid() == 0) {
		CHECK(st.pinned);
		CHECKF(vm_locked_kb() - lck0 >= 8 * 1024, "VmLck grew by %ld kB",
		       vm_locked_kb() - lck0);
	}
	nvmefs_bufpool_put(p, bufs[3]);
	CHECK(nvmefs_bufpool_tryget(p) == bufs[3]); /* reused, not a new one */
	nvmefs_bufpool_stats(p, &st);
	CHECK(st.allocated == 8);
	for (int i = 0; i < 8; i++)
		nvmefs_bufpool_put(p, bufs[i]);
	nvmefs_bufpool_stats(p, &st);
	CHECK(st.in_use == 0);
	nvmefs_bufpool_destroy(p);
	CHECKF(vm_locked_kb() <= lck0, "VmLck %ld kB after destroy, %ld before", vm_locked_kb(),
	       lck0);
}

static void test_rounding(void)
{
	struct nvmefs_bufpool_opts o = {.buf_size = 5000, .max_bytes = 3 * 8192, .numa_node = -1};
	struct nvmefs_bufpool_stats st;
	struct nvmefs_bufpool *p;

	CHECK(nvmefs_bufpool_create(&p, &o) == 0);
	nvmefs_bufpool_stats(p, &st);
	CHECK(st.buf_size == 8192 && st.max_bufs == 3);
	nvmefs_bufpool_destroy(p);
}

struct blocker {
	struct nvmefs_bufpool *pool;
	void *got;
	atomic_bool done;
};

static void *blocked_get(void *arg)
{
	struct blocker *b = arg;

	b->got = nvmefs_bufpool_get(b->pool);
	atomic_store(&b->done, true);
	return NULL;
}

/* get() at the cap waits until a buffer comes back, then returns that one. */
static void test_blocking_get(void)
{
	struct nvmefs_bufpool_opts o = {.buf_size = 4096, .max_bytes = 2 * 4096, .numa_node = -1};
	struct blocker b = {0};
	pthread_t t;
	void *a, *c;

	CHECK(nvmefs_bufpool_create(&b.pool, &o) == 0);
	a = nvmefs_bufpool_get(b.pool);
	c = nvmefs_bufpool_get(b.pool);
	CHECK(a && c);
	pthread_create(&t, NULL, blocked_get, &b);
	usleep(100 * 1000);
	CHECK(!atomic_load(&b.done)); /* still waiting */
	nvmefs_bufpool_put(b.pool, c);
	pthread_join(t, NULL);
	CHECK(atomic_load(&b.done) && b.got == c);
	nvmefs_bufpool_put(b.pool, a);
	nvmefs_bufpool_put(b.pool, b.got);
	nvmefs_bufpool_destroy(b.pool);
}

/* Pages of a pool's buffers for node that, once touched, sit on another
 * node (get_mempolicy per page): 0 when all are on node; UINT_MAX when the
 * pool fails. */
static unsigned pages_off_node(int node)
{
	struct nvmefs_bufpool_opts o = {
		.buf_size = 64 << 10, .max_bytes = 256 << 10, .numa_node = node};
	struct nvmefs_bufpool *p;
	unsigned off = 0, n = 0;
	void *b[2];

	if (nvmefs_bufpool_create(&p, &o))
		return UINT_MAX;
	for (; n < 2; n++) {
		b[n] = nvmefs_bufpool_get(p);
		if (!b[n]) {
			off = UINT_MAX;
			goto out_put;
		}
		memset(b[n], 1, 64 << 10);
		for (size_t at = 0; at < 64 << 10; at += 4096) {
			int got = -1;

			if (get_mempolicy(&got, NULL, 0, (char *)b[n] + at,
					  MPOL_F_NODE | MPOL_F_ADDR) ||
			    got != node)
				off++;
		}
	}
	printf("numa: pool for node %d: %u of 32 pages elsewhere\n", node, off);
out_put:
	while (n--)
		nvmefs_bufpool_put(p, b[n]);
	nvmefs_bufpool_destroy(p);
	return off;
}

/* Buffers asked for on a node really sit on it once touched, for each node
 * this process may allocate on. That takes two nodes: on one, every page is
 * on node 0 whatever the pool does. So with one node or no NUMA the check
 * is reported skipped (the rest of this program still runs and counts). */
static void test_numa_node(void)
{
	struct bitmask *mems;
	int count = 0;

	if (numa_available() < 0) {
		printf("SKIP: numa placement: libnuma sees no NUMA here\n");
		return;
	}
	mems = numa_get_mems_allowed();
	for (int n = 0; mems && n <= numa_max_node(); n++)
		count += numa_bitmask_isbitset(mems, n);
	if (count < 2) {
		printf("SKIP: numa placement: %d node(s) to allocate on, 2 needed to tell\n",
		       count);
		numa_bitmask_free(mems);
		return;
	}
	for (int n = 0; n <= numa_max_node(); n++) {
		if (numa_bitmask_isbitset(mems, n))
			CHECKF(pages_off_node(n) == 0, "buffers asked for on node %d", n);
	}
	numa_bitmask_free(mems);
}

/* Whether a file's first line has "[word]": the selected policy. */
static bool policy_is(const char *path, const char *word)
{
	char line[256], want[32];
	FILE *f = fopen(path, "r");
	bool is = false;

	if (!f)
		return false;
	snprintf(want, sizeof(want), "[%s]", word);
	if (fgets(line, sizeof(line), f))
		is = strstr(line, want) != NULL;
	fclose(f);
	return is;
}

/* The THPeligible line of the mapping of this process that holds addr:
 * 1 or 0, -1 if not found. */
static int thp_eligible(const void *addr)
{
	char line[256];
	unsigned long lo, hi;
	bool in = false;
	int v = -1;
	FILE *f = fopen("/proc/self/smaps", "r");

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2 &&
		    strchr(line, '-') < strchr(line, ' '))
			in = (uintptr_t)addr >= lo && (uintptr_t)addr < hi;
		else if (in && sscanf(line, "THPeligible: %d", &v) == 1)
			break;
	}
	fclose(f);
	return v;
}

/* The pool's slabs double (1, 1, 2, 4 buffers of 1 MiB here); one of 2 MiB
 * or more is aligned to 2 MiB and asked for huge pages. Only under the
 * kernel's "madvise" policy does the ask show: under "always" every
 * mapping is eligible, under "never" none (and kernels before 5.0 have no
 * THPeligible line). */
static void test_huge_slabs(void)
{
	const char *thp = "/sys/kernel/mm/transparent_hugepage";
	struct nvmefs_bufpool_opts o = {.buf_size = MiB, .max_bytes = 8 * MiB, .numa_node = -1};
	struct nvmefs_bufpool *p;
	void *bufs[8];

	CHECK(nvmefs_bufpool_create(&p, &o) == 0);
	for (int i = 0; i < 8; i++)
		CHECKF((bufs[i] = nvmefs_bufpool_get(p)) != NULL, "buffer %d", i);
	/* The third and fifth open slabs of 2 and 4 MiB. */
	CHECKF(((uintptr_t)bufs[2] & (2 * MiB - 1)) == 0, "a 2 MiB slab at %p", bufs[2]);
	CHECKF(((uintptr_t)bufs[4] & (2 * MiB - 1)) == 0, "a 4 MiB slab at %p", bufs[4]);
	if (policy_is("/sys/kernel/mm/transparent_hugepage/enabled", "madvise") &&
	    !policy_is("/sys/kernel/mm/transparent_hugepage/hugepages-2048kB/enabled", "always") &&
	    !policy_is("/sys/kernel/mm/transparent_hugepage/hugepages-2048kB/enabled", "never") &&
	    thp_eligible(bufs[0]) >= 0) {
		CHECKF(thp_eligible(bufs[4]) == 1, "a 4 MiB slab may have huge pages (%d)",
		       thp_eligible(bufs[4]));
		CHECKF(thp_eligible(bufs[0]) == 0, "a slab of one buffer is left alone (%d)",
		       thp_eligible(bufs[0]));
	} else {
		printf("SKIP: huge pages: %s is not \"madvise\" for 2 MiB pages, or no "
		       "THPeligible in smaps\n",
		       thp);
	}
	for (int i = 0; i < 8; i++)
		nvmefs_bufpool_put(p, bufs[i]);
	nvmefs_bufpool_destroy(p);
}

static atomic_int memlock_warnings;

static void count_sink(enum nvmefs_log_level level, const char *msg)
{
	if (level == NVMEFS_LOG_WARN && strstr(msg, "RLIMIT_MEMLOCK"))
		atomic_fetch_add(&memlock_warnings, 1);
	fprintf(stderr, "(logged) %s\n", msg);
}

/* In a child: low memlock limit, no CAP_IPC_LOCK; pools must still work. */
static int unpinned_child(void)
{
	struct rlimit rl = {64 << 10, 64 << 10};
	struct nvmefs_bufpool_opts o = {.buf_size = MiB, .max_bytes = 4 * MiB, .numa_node = -1};
	struct nvmefs_bufpool_stats st;
	struct nvmefs_bufpool *p1, *p2;
	void *b[4];

	if (setrlimit(RLIMIT_MEMLOCK, &rl) < 0)
		return 2;
	/* Root ignores the limit (CAP_IPC_LOCK): become nobody. */
	if (geteuid() == 0 && (setgid(65534) < 0 || setuid(65534) < 0))
		return 3;
	nvmefs_log_set_sink(count_sink);
	if (nvmefs_bufpool_create(&p1, &o) || nvmefs_bufpool_create(&p2, &o))
		return 4;
	for (int i = 0; i < 4; i++) {
		b[i] = nvmefs_bufpool_get(i % 2 ? p2 : p1);
		if (!b[i])
			return 5;
		memset(b[i], 0x5a, MiB);
	}
	nvmefs_bufpool_stats(p1, &st);
	if (st.pinned || st.allocated != 2)
		return 6;
	if (atomic_load(&memlock_warnings) != 1)
		return 7; /* said once, for both pools */
	for (int i = 0; i < 4; i++)
		nvmefs_bufpool_put(i % 2 ? p2 : p1, b[i]);
	nvmefs_bufpool_destroy(p1);
	nvmefs_bufpool_destroy(p2);
	return 0;
}

static void test_unpinned_fallback(void)
{
	int status = 0;
	pid_t pid = fork();

	if (pid == 0)
		_exit(unpinned_child());
	CHECK(pid > 0 && waitpid(pid, &status, 0) == pid);
	CHECKF(WIFEXITED(status) && WEXITSTATUS(status) == 0,
	       "child exit %d (2 setrlimit, 3 setuid, 4 create, 5 get, 6 pinned/count, 7 warnings)",
	       WIFEXITED(status) ? WEXITSTATUS(status) : -1);
}

/* util.h's lock calls (the pool's and the io_uring payloads'): by system
 * call, so VmLck moves under AddressSanitizer too, whose libc mlock does
 * nothing. Skipped where this process may not lock 16 KiB. */
static void test_mlock_calls(void)
{
	const size_t len = 16 << 10;
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	long before = vm_locked_kb(), held;
	int err;

	CHECK(p != MAP_FAILED && before >= 0);
	if (p == MAP_FAILED)
		return;
	err = nvmefs_mlock(p, len);
	if (err) {
		printf("SKIP: mlock of 16 KiB: %s\n", strerror(-err));
		munmap(p, len);
		return;
	}
	held = vm_locked_kb();
	CHECKF(held - before >= 16, "nvmefs_mlock locked 16 KiB (VmLck %ld -> %ld kB)", before,
	       held);
	CHECK(nvmefs_munlock(p, len) == 0);
	CHECKF(vm_locked_kb() <= held - 16, "nvmefs_munlock unlocked them (VmLck %ld -> %ld kB)",
	       held, vm_locked_kb());
	munmap(p, len);
}

int main(void)
{
	test_bad_options();
	test_cap_align_reuse();
	test_rounding();
	test_blocking_get();
	test_numa_node();
	test_huge_slabs();
	test_unpinned_fallback();
	test_mlock_calls();
	return test_result();
}
