// SPDX-License-Identifier: MIT
/*
 * fs/core/extmap.c through the core, on a file of a volume of two image
 * files: extents that touch on the component and on the device merge
 * (left, right, both), others stay apart in order; find returns the extent
 * holding or following an offset; removing a range keeps heads and tails,
 * splits an extent it falls inside, and drops whole ones; the file's
 * mapped bytes and the checkpoint's size follow every change. With the
 * shadow store on (NVMEFS_META_CROSSCHECK=1, set here), each change's
 * format v2 keys: a case per file, the EXTENT keys (ino, slot, comp_off)
 * the shadow holds afterwards, live and tombstones, exactly (merge left,
 * right and both; split inside; punch head, tail, across two, whole), and
 * the crosscheck clean at the end.
 *
 * usage: test_extmap BUILD_DIR   (for BUILD_DIR/mkfs.nvmefs and fsck.nvmefs)
 */
#include <endian.h>
#include <string.h>

#include "namei.h"
#include "extmap_i.h"
#include "meta_i.h"
#include "store.h"
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

/* An EXTENT key the shadow should hold: live with (dev, len), or a
 * tombstone (tomb; dev and len unused). In 4 KiB blocks. */
struct want_key {
	uint64_t comp, dev, len;
	bool tomb;
};

static uint64_t be64(const uint8_t *p)
{
	uint64_t v;

	memcpy(&v, p, 8);
	return be64toh(v);
}

/* The shadow's EXTENT keys of ino (slot 0) are exactly want[0..n), in key
 * order; each difference is reported. */
static bool keys_are(struct nvmefs_vol *vol, uint64_t ino, const struct want_key *want, size_t n)
{
	struct nvmefs_run_ent e;
	const void *pos = NULL;
	size_t k = 0;
	bool ok = true;

	while (nvmefs_shadow_next(vol->shadow, &pos, &e)) {
		struct nvmefs_val v;

		if (e.key[0] != NVMEFS_KEY_EXTENT || be64(e.key + 1) != ino)
			continue;
		if (k == n) {
			fprintf(stderr, "extra key at block %llu\n",
				(unsigned long long)(be64(e.key + 10) / K));
			ok = false;
			continue;
		}
		if (e.key[9] != 0 || be64(e.key + 10) != want[k].comp * K ||
		    e.tomb != want[k].tomb) {
			fprintf(stderr, "key %zu: block %llu%s, want %llu%s\n", k,
				(unsigned long long)(be64(e.key + 10) / K), e.tomb ? " (tomb)" : "",
				(unsigned long long)want[k].comp, want[k].tomb ? " (tomb)" : "");
			ok = false;
		} else if (!e.tomb && (nvmefs_val_decode(e.key, e.klen, e.val, e.vlen, &v) ||
				       v.rec.extent.dev_off != want[k].dev * K ||
				       v.rec.extent.len != want[k].len * K)) {
			fprintf(stderr, "key %zu (block %llu): wrong value\n", k,
				(unsigned long long)want[k].comp);
			ok = false;
		}
		k++;
	}
	if (k < n) {
		fprintf(stderr, "%zu key(s) missing\n", n - k);
		ok = false;
	}
	return ok;
}

#define KEYS(...)                                                                                  \
	(struct want_key[]){__VA_ARGS__},                                                          \
		sizeof((struct want_key[]){__VA_ARGS__}) / sizeof(struct want_key)

/* A new empty file for one case (its keys only its own). */
static struct nvmefs_inode *new_file(struct nvmefs_vol *vol, const char *name)
{
	const struct nvmefs_cred cred = {.uid = 0};
	struct nvmefs_inode *in = NULL;
	struct stat st;

	CHECK_ERR(nvmefs_ns_create(vol, &cred, NVMEFS_ROOT_INO, name, 0644, &st, &in), 0);
	if (in) {
		nvmefs_ns_release(vol, st.st_ino);
		nvmefs_ns_forget(vol, st.st_ino, 1);
	}
	return in;
}

static void insert(struct nvmefs_vol *vol, struct nvmefs_inode *in, struct nvmefs_ext e)
{
	CHECK_ERR(nvmefs_extmap_insert(vol, in, 0, &e), 0);
}

static void test_keys(struct nvmefs_vol *vol)
{
	struct nvmefs_inode *in;

	CHECK(vol->shadow != NULL);
	if (!vol->shadow)
		return;
	/* merge left: the left key re-put longer, nothing else */
	if ((in = new_file(vol, "k-left"))) {
		pthread_mutex_lock(&vol->lock);
		insert(vol, in, ext(10, 110, 2));
		insert(vol, in, ext(12, 112, 3));
		CHECK(keys_are(vol, in->ino, KEYS({10, 110, 5, false})));
		pthread_mutex_unlock(&vol->lock);
	}
	/* merge right: the right extent's start moves down, its old key goes */
	if ((in = new_file(vol, "k-right"))) {
		pthread_mutex_lock(&vol->lock);
		insert(vol, in, ext(20, 120, 2));
		insert(vol, in, ext(18, 118, 2));
		CHECK(keys_are(vol, in->ino, KEYS({18, 118, 4, false}, {20, 0, 0, true})));
		pthread_mutex_unlock(&vol->lock);
	}
	/* merge both: the left key takes all, the right one is merged away */
	if ((in = new_file(vol, "k-both"))) {
		pthread_mutex_lock(&vol->lock);
		insert(vol, in, ext(10, 110, 2));
		insert(vol, in, ext(15, 115, 3));
		insert(vol, in, ext(12, 112, 3));
		CHECK(keys_are(vol, in->ino, KEYS({10, 110, 8, false}, {15, 0, 0, true})));
		pthread_mutex_unlock(&vol->lock);
	}
	/* no merge (a gap on the device): a key of its own */
	if ((in = new_file(vol, "k-apart"))) {
		pthread_mutex_lock(&vol->lock);
		insert(vol, in, ext(10, 110, 2));
		insert(vol, in, ext(12, 500, 2));
		CHECK(keys_are(vol, in->ino, KEYS({10, 110, 2, false}, {12, 500, 2, false})));
		pthread_mutex_unlock(&vol->lock);
	}
	/* split inside: the head re-put shorter, the tail a new key */
	if ((in = new_file(vol, "k-split"))) {
		pthread_mutex_lock(&vol->lock);
		insert(vol, in, ext(10, 110, 10));
		CHECK_ERR(nvmefs_extmap_remove(vol, in, 0, 13 * K, 15 * K, false), 0);
		CHECK(keys_are(vol, in->ino, KEYS({10, 110, 3, false}, {15, 115, 5, false})));
		pthread_mutex_unlock(&vol->lock);
	}
	/* punch the head: the start moves up, the old key goes */
	if ((in = new_file(vol, "k-head"))) {
		pthread_mutex_lock(&vol->lock);
		insert(vol, in, ext(10, 110, 10));
		CHECK_ERR(nvmefs_extmap_remove(vol, in, 0, 8 * K, 13 * K, false), 0);
		CHECK(keys_are(vol, in->ino, KEYS({10, 0, 0, true}, {13, 113, 7, false})));
		pthread_mutex_unlock(&vol->lock);
	}
	/* punch the tail: the same key, shorter */
	if ((in = new_file(vol, "k-tail"))) {
		pthread_mutex_lock(&vol->lock);
		insert(vol, in, ext(10, 110, 10));
		CHECK_ERR(nvmefs_extmap_remove(vol, in, 0, 17 * K, 30 * K, false), 0);
		CHECK(keys_are(vol, in->ino, KEYS({10, 110, 7, false})));
		pthread_mutex_unlock(&vol->lock);
	}
	/* across two: the first's tail and the second's head */
	if ((in = new_file(vol, "k-across"))) {
		pthread_mutex_lock(&vol->lock);
		insert(vol, in, ext(10, 110, 4));
		insert(vol, in, ext(14, 300, 4));
		CHECK_ERR(nvmefs_extmap_remove(vol, in, 0, 12 * K, 16 * K, false), 0);
		CHECK(keys_are(vol, in->ino,
			       KEYS({10, 110, 2, false}, {14, 0, 0, true}, {16, 302, 2, false})));
		pthread_mutex_unlock(&vol->lock);
	}
	/* punch whole extents: every key a tombstone */
	if ((in = new_file(vol, "k-whole"))) {
		pthread_mutex_lock(&vol->lock);
		insert(vol, in, ext(10, 110, 2));
		insert(vol, in, ext(20, 120, 2));
		CHECK_ERR(nvmefs_extmap_remove(vol, in, 0, 0, UINT64_MAX, false), 0);
		CHECK(keys_are(vol, in->ino, KEYS({10, 0, 0, true}, {20, 0, 0, true})));
		pthread_mutex_unlock(&vol->lock);
	}
}

/* Empty every case's file again: the maps were changed directly, not by
 * apply, so their INODE keys still say "no extents"; then the shadow must
 * match the maps. */
static void test_keys_end(struct nvmefs_vol *vol)
{
	static const char *const names[] = {"k-left", "k-right", "k-both",   "k-apart", "k-split",
					    "k-head", "k-tail",	 "k-across", "k-whole"};

	if (!vol->shadow)
		return;
	pthread_mutex_lock(&vol->lock);
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		struct nvmefs_dirent *d = nvmefs_dir_find(vol, NVMEFS_ROOT_INO, names[i]);
		struct nvmefs_inode *in = d ? nvmefs_iget(vol, d->child) : NULL;

		if (in)
			CHECK_ERR(nvmefs_extmap_remove(vol, in, 0, 0, UINT64_MAX, false), 0);
	}
	CHECK_ERR(nvmefs_meta_crosscheck(vol), 0);
	pthread_mutex_unlock(&vol->lock);
}

int main(int argc, char **argv)
{
	const struct nvmefs_cred cred = {.uid = 0};
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
		test_keys(vol);
		test_keys_end(vol);
	} else {
		CHECK(!"could not make a file");
	}
	test_vol_teardown(vol);
	return test_result();
}
