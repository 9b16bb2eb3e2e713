// SPDX-License-Identifier: MIT
/*
 * fs/core/extmap.c through the core, on a file of a volume of two image
 * files: extents that touch on the component and on the device merge
 * (left, right, both), others stay apart in order; find returns the extent
 * holding or following an offset; removing a range keeps heads and tails,
 * splits an extent it falls inside, and drops whole ones; the file's
 * mapped bytes and the checkpoint's size follow every change.
 *
 * usage: test_extmap BUILD_DIR   (for BUILD_DIR/mkfs.nvmefs and fsck.nvmefs)
 */
#include "namei.h"
#include "extmap_i.h"
#include "test_vol.h"

#define K 4096ull

static struct nvmefs_ext ext(uint64_t comp, uint64_t dev, uint64_t len)
{
	return (struct nvmefs_ext){.comp_off = comp * K, .dev_off = dev * K, .len = len * K};
}

/* The slot's extents are exactly want[0..n), in order. */
static bool map_is(const struct nvmefs_extmap *m, const struct nvmefs_ext *want, size_t n)
{
	if (m->n != n)
		return false;
	for (size_t i = 0; i < n; i++)
		if (m->v[i].comp_off != want[i].comp_off || m->v[i].dev_off != want[i].dev_off ||
		    m->v[i].len != want[i].len)
			return false;
	return true;
}

static void test_insert_merge(struct nvmefs_vol *vol, struct nvmefs_inode *in)
{
	const struct nvmefs_extmap *m = &in->slots[0];
	uint64_t bytes = vol->meta_bytes;
	struct nvmefs_ext e;

	pthread_mutex_lock(&vol->lock);
	e = ext(10, 110, 2);
	CHECK_ERR(nvmefs_extmap_insert(vol, in, 0, &e), 0);
	e = ext(20, 120, 2);
	CHECK_ERR(nvmefs_extmap_insert(vol, in, 0, &e), 0);
	CHECK(map_is(m, (struct nvmefs_ext[]){ext(10, 110, 2), ext(20, 120, 2)}, 2));
	CHECK(vol->meta_bytes == bytes + 2 * NVMEFS_EXT_COST);
	e = ext(12, 112, 3); /* joins the left one */
	CHECK_ERR(nvmefs_extmap_insert(vol, in, 0, &e), 0);
	e = ext(18, 118, 2); /* joins the right one */
	CHECK_ERR(nvmefs_extmap_insert(vol, in, 0, &e), 0);
	CHECK(map_is(m, (struct nvmefs_ext[]){ext(10, 110, 5), ext(18, 118, 4)}, 2));
	e = ext(15, 500, 3); /* fills the gap, elsewhere on the device: no merge */
	CHECK_ERR(nvmefs_extmap_insert(vol, in, 0, &e), 0);
	CHECK(map_is(m, (struct nvmefs_ext[]){ext(10, 110, 5), ext(15, 500, 3), ext(18, 118, 4)},
		     3));
	CHECK_ERR(nvmefs_extmap_remove(vol, in, 0, 15 * K, 18 * K, false), 0);
	e = ext(15, 115, 3); /* joins both */
	CHECK_ERR(nvmefs_extmap_insert(vol, in, 0, &e), 0);
	CHECK(map_is(m, (struct nvmefs_ext[]){ext(10, 110, 12)}, 1));
	CHECK(vol->meta_bytes == bytes + NVMEFS_EXT_COST);
	CHECK(in->alloc_bytes == 12 * K);
	pthread_mutex_unlock(&vol->lock);
}

static void test_find(struct nvmefs_inode *in)
{
	const struct nvmefs_extmap *m = &in->slots[0];

	CHECK(nvmefs_extmap_find(m, 0) == 0);	       /* before: the first */
	CHECK(nvmefs_extmap_find(m, 10 * K) == 0);     /* its start */
	CHECK(nvmefs_extmap_find(m, 22 * K - 1) == 0); /* its last byte */
	CHECK(nvmefs_extmap_find(m, 22 * K) == 1);     /* after: none (n) */
}

static void test_remove(struct nvmefs_vol *vol, struct nvmefs_inode *in)
{
	const struct nvmefs_extmap *m = &in->slots[0];

	pthread_mutex_lock(&vol->lock);
	/* inside: split */
	CHECK_ERR(nvmefs_extmap_remove(vol, in, 0, 13 * K, 15 * K, false), 0);
	CHECK(map_is(m, (struct nvmefs_ext[]){ext(10, 110, 3), ext(15, 115, 7)}, 2));
	/* a tail of one and a head of the next */
	CHECK_ERR(nvmefs_extmap_remove(vol, in, 0, 12 * K, 16 * K, false), 0);
	CHECK(map_is(m, (struct nvmefs_ext[]){ext(10, 110, 2), ext(16, 116, 6)}, 2));
	CHECK(in->alloc_bytes == 8 * K);
	/* a hole: nothing */
	CHECK_ERR(nvmefs_extmap_remove(vol, in, 0, 12 * K, 16 * K, false), 0);
	CHECK(m->n == 2);
	/* everything */
	CHECK_ERR(nvmefs_extmap_remove(vol, in, 0, 0, UINT64_MAX, false), 0);
	CHECK(m->n == 0 && in->alloc_bytes == 0);
	pthread_mutex_unlock(&vol->lock);
}

int main(int argc, char **argv)
{
	const struct nvmefs_cred cred = {0, 0};
	struct nvmefs_inode *in = NULL;
	struct nvmefs_vol *vol;
	struct stat st;

	if (argc < 2)
		TEST_SKIP("usage: test_extmap BUILD_DIR");
	vol = test_vol_setup(argv[1]);
	if (vol && !nvmefs_ns_create(vol, &cred, NVMEFS_ROOT_INO, "f", 0644, &st, &in)) {
		/* The maps are changed directly: nothing reaches the journal,
		 * and the file is emptied again before the volume closes. */
		test_insert_merge(vol, in);
		test_find(in);
		test_remove(vol, in);
		nvmefs_ns_release(vol, st.st_ino);
		nvmefs_ns_forget(vol, st.st_ino, 1);
	} else {
		CHECK(!"could not make a file");
	}
	test_vol_teardown(vol);
	return test_result();
}
