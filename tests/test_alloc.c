// SPDX-License-Identifier: MIT
/*
 * fs/core/alloc.c through the core, on a volume of two image files: an
 * empty volume's free space is each member's data area; an allocation
 * takes its goal when the goal is free, else the first range that holds
 * it all; a full member gives 0; freed ranges coalesce back into one,
 * whatever the order they come back in; space released by the open
 * transaction (defer) is not allocatable until that transaction commits;
 * the durable free map and its FREE keys follow a model through random
 * puts and takes.
 *
 * usage: test_alloc BUILD_DIR   (for BUILD_DIR/mkfs.nvmefs and fsck.nvmefs)
 */
#include "alloc_i.h"
#include "journal_i.h"
#include "store.h"
#include "test_vol.h"

#define MiB (1ull << 20)

static uint64_t free_on(struct nvmefs_vol *vol, unsigned dev)
{
	uint64_t sum = 0;

	for (size_t i = 0; i < vol->free[dev].n; i++)
		sum += vol->free[dev].v[i].len;
	return sum;
}

static void test_empty(struct nvmefs_vol *vol)
{
	uint64_t total = 0;

	for (unsigned d = 0; d < vol->ndevs; d++) {
		CHECK(vol->free[d].n == 1);
		CHECK(free_on(vol, d) == vol->data_end[d] - vol->data_start[d]);
		CHECK(vol->free[d].v[0].off == vol->data_start[d]);
		total += free_on(vol, d);
	}
	CHECK(vol->free_bytes == total && total == vol->total_bytes);
}

static void test_goal(struct nvmefs_vol *vol)
{
	uint64_t goal = vol->data_start[0] + 3 * MiB, off = 0, before = vol->free_bytes;

	CHECK(nvmefs_alloc_get(vol, 0, goal, 64 * 1024, &off) == 64 * 1024 && off == goal);
	CHECK(vol->free_bytes == before - 64 * 1024);
	CHECK(vol->free[0].n == 2); /* the range split around it */
	/* The goal taken: the next free range that holds it all. */
	CHECK(nvmefs_alloc_get(vol, 0, goal, 4096, &off) == 4096 && off == goal + 64 * 1024);
	nvmefs_alloc_put(vol, 0, goal + 64 * 1024, 4096);
	nvmefs_alloc_put(vol, 0, goal, 64 * 1024);
	CHECK(vol->free[0].n == 1 && vol->free_bytes == before);
}

/* Take a member whole in 1 MiB pieces, then give them back out of order. */
static void test_fill_and_coalesce(struct nvmefs_vol *vol)
{
	uint64_t size = free_on(vol, 1), got, off, *offs, *lens, n = 0, sum = 0, seed = 12345;

	offs = calloc(size / MiB + 2, sizeof(*offs));
	lens = calloc(size / MiB + 2, sizeof(*lens));
	CHECK(offs && lens);
	if (!offs || !lens)
		goto out;
	while ((got = nvmefs_alloc_get(vol, 1, 0, MiB, &off))) {
		CHECK(off >= vol->data_start[1] && off + got <= vol->data_end[1]);
		offs[n] = off;
		lens[n++] = got;
		sum += got;
	}
	CHECK(sum == size && free_on(vol, 1) == 0 && vol->free[1].n == 0);
	CHECK(nvmefs_alloc_get(vol, 1, 0, 4096, &off) == 0); /* full */
	for (uint64_t i = n; i > 1; i--) {		     /* shuffle */
		uint64_t j, t;

		seed = seed * 6364136223846793005ull + 1442695040888963407ull;
		j = (seed >> 33) % i;
		t = offs[i - 1], offs[i - 1] = offs[j], offs[j] = t;
		t = lens[i - 1], lens[i - 1] = lens[j], lens[j] = t;
	}
	for (uint64_t i = 0; i < n; i++)
		nvmefs_alloc_put(vol, 1, offs[i], lens[i]);
	CHECK(vol->free[1].n == 1 && free_on(vol, 1) == size);
out:
	free(offs);
	free(lens);
}

/* Released space waits for the commit of the transaction that released it. */
static void test_defer(struct nvmefs_vol *vol)
{
	uint64_t off, before, got;

	pthread_mutex_lock(&vol->lock);
	got = nvmefs_alloc_get(vol, 0, 0, 2 * MiB, &off);
	before = vol->free_bytes;
	CHECK_ERR(nvmefs_alloc_defer(vol, 0, off, got), 0);
	CHECK(vol->free_bytes == before && vol->pending_bytes == got);
	pthread_mutex_unlock(&vol->lock);
	CHECK_ERR(nvmefs_journal_commit(vol), 0);
	CHECK(vol->free_bytes == before + got && vol->pending_bytes == 0);
}

/* Member 1's FREE keys in the shadow: each range of the durable map has
 * its key (by end) with its length, and there is no other. */
static bool keys_match(struct nvmefs_vol *vol)
{
	const struct nvmefs_freemap *m = &vol->dfree[1];
	const void *pos = NULL;
	struct nvmefs_run_ent e;
	uint8_t key[NVMEFS_KEY_MAX];
	size_t live = 0;

	for (size_t i = 0; i < m->n; i++) {
		uint64_t end = m->v[i].off + m->v[i].len;
		size_t klen = nvmefs_key_free(key, 1, end), vlen;
		const uint8_t *val;
		struct nvmefs_val v;

		if (nvmefs_shadow_get(vol->shadow, key, klen, &val, &vlen) ||
		    nvmefs_val_decode(key, klen, val, vlen, &v) || v.free.off != m->v[i].off)
			return false;
	}
	while (nvmefs_shadow_next(vol->shadow, &pos, &e))
		live += !e.tomb && e.key[0] == NVMEFS_KEY_FREE && e.key[1] == 1;
	return live == m->n;
}

/* The durable map's ranges inside [lo, lo + n blocks) against used[]: the
 * same blocks free, coalesced (no two ranges touch). */
static bool map_matches(const struct nvmefs_freemap *m, uint64_t lo, const bool *used, size_t n)
{
	size_t b = 0, i = 0;

	while (i < m->n && m->v[i].off + m->v[i].len <= lo)
		i++;
	for (; b < n; i++) {
		uint64_t start, end;

		while (b < n && used[b])
			b++;
		if (b == n)
			break;
		start = lo + b * NVMEFS_BLOCK;
		while (b < n && !used[b])
			b++;
		end = lo + b * NVMEFS_BLOCK;
		/* The last free run may go on past the window. */
		if (i >= m->n || m->v[i].off != start ||
		    (b < n ? m->v[i].off + m->v[i].len != end : m->v[i].off + m->v[i].len < end))
			return false;
		if (i + 1 < m->n && m->v[i].off + m->v[i].len >= m->v[i + 1].off)
			return false;
	}
	return i >= m->n || m->v[i].off >= lo + n * NVMEFS_BLOCK;
}

/*
 * The durable free map and its FREE keys (applied_put, applied_take)
 * against a model, a block map of a window of member 1: ranges put back
 * and taken out at random (over free, used and mixed blocks: set
 * semantics), the map coalesced and equal to the model, and the shadow's
 * keys exactly its ranges. Taking the start of a range (an append) keeps
 * its key. The window is given back whole at the end (the commits'
 * crosscheck compares the map with the extents).
 */
static void test_applied(struct nvmefs_vol *vol)
{
	enum { N = 96 };
	const uint64_t lo = vol->data_start[1];
	bool used[N];
	uint64_t seed = 42;
	size_t n;

	pthread_mutex_lock(&vol->lock);
	CHECK(vol->dfree[1].n == 1 && vol->dfree[1].v[0].off == lo);
	nvmefs_alloc_applied_take(vol, 1, lo, N * NVMEFS_BLOCK);
	for (size_t b = 0; b < N; b++)
		used[b] = true;
	CHECK(map_matches(&vol->dfree[1], lo, used, N) && keys_match(vol));
	for (unsigned op = 0; op < 2000; op++) {
		size_t a, len;
		bool put;

		seed = seed * 6364136223846793005ull + 1442695040888963407ull;
		a = (size_t)(seed >> 33) % N;
		len = 1 + (size_t)(seed >> 20) % (op % 7 ? 4 : 24);
		put = (seed >> 11) & 1;
		if (a + len > N)
			len = N - a;
		if (put)
			nvmefs_alloc_applied_put(vol, 1, lo + a * NVMEFS_BLOCK, len * NVMEFS_BLOCK);
		else
			nvmefs_alloc_applied_take(vol, 1, lo + a * NVMEFS_BLOCK,
						  len * NVMEFS_BLOCK);
		for (size_t b = a; b < a + len; b++)
			used[b] = !put;
		CHECKF(map_matches(&vol->dfree[1], lo, used, N), "op %u: %s %zu+%zu", op,
		       put ? "put" : "take", a, len);
		CHECKF(keys_match(vol), "op %u: the FREE keys differ from the map", op);
		if (test_failures)
			break;
	}
	/* An append: the start of a free range taken, its key kept. */
	nvmefs_alloc_applied_put(vol, 1, lo, N * NVMEFS_BLOCK);
	n = vol->dfree[1].n;
	nvmefs_alloc_applied_take(vol, 1, lo, 3 * NVMEFS_BLOCK);
	CHECK(vol->dfree[1].n == n && vol->dfree[1].v[0].off == lo + 3 * NVMEFS_BLOCK);
	CHECK(keys_match(vol));
	nvmefs_alloc_applied_put(vol, 1, lo, 3 * NVMEFS_BLOCK);
	CHECK(vol->dfree[1].n == 1 && vol->dfree[1].v[0].off == lo &&
	      vol->dfree[1].v[0].len == vol->data_end[1] - lo && keys_match(vol));
	pthread_mutex_unlock(&vol->lock);
}

int main(int argc, char **argv)
{
	struct nvmefs_vol *vol;

	if (argc < 2)
		TEST_SKIP("usage: test_alloc BUILD_DIR");
	vol = test_vol_setup(argv[1]);
	if (vol) {
		test_empty(vol);
		test_goal(vol);
		test_fill_and_coalesce(vol);
		test_defer(vol);
		test_empty(vol); /* all of it back */
		test_applied(vol);
	}
	test_vol_teardown(vol);
	return test_result();
}
