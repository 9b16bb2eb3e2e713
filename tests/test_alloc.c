// SPDX-License-Identifier: MIT
/*
 * fs/core/alloc.c through the core, on a volume of two image files: an
 * empty volume's free space is each member's data area; an allocation
 * takes its goal when the goal is free, else the first range that holds
 * it all; a full member gives 0; freed ranges coalesce back into one,
 * whatever the order they come back in; space released by the open
 * transaction (defer) is not allocatable until that transaction commits.
 *
 * usage: test_alloc BUILD_DIR   (for BUILD_DIR/mkfs.nvmefs and fsck.nvmefs)
 */
#include "alloc_i.h"
#include "journal_i.h"
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
	}
	test_vol_teardown(vol);
	return test_result();
}
