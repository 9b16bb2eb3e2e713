// SPDX-License-Identifier: MIT
/*
 * The fuzz harnesses' volume: struct nvmefs_vol set up as fs/core/volume.c's
 * vol_alloc() and vol_set_geometry() do, without devices (or with a memfd as
 * every member, for the loader and the store), plus what mount does after
 * loading and the crc re-sealing that lets mutated inputs past the
 * checksums.
 *
 * Every volume has the shadow store on (fs/store/store.h): after a load
 * and after orphan reclaim, format v2's keys must match the maps
 * (nvmefs_meta_crosscheck), or it is a bug in the record -> key
 * translation. A state v1 accepts and v2's value encoders refuse (an entry
 * of a type no file has: v1 does not check it) is not: -EINVAL passes.
 *
 * The durable state of format v2 is the store's runs plus the journal
 * (docs/FORMAT.md), so the state's own oracle is a remount: the volume is
 * flushed into the run area of the memfd as an unmount does and loaded
 * again by nvmefs_journal_load, and the second volume must hold the same
 * keys (compared through both shadow stores), counts and free space. (v1's
 * oracle reloaded a serialization of the whole state, its checkpoint, since
 * removed; it renumbered the readdir cookies that v2 keeps.)
 */
#include "fuzz_vol.h"

#include <endian.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "fuzz_obj.h"
#include "meta_i.h"
#include "runfmt_i.h"
#include "store.h"
#include "sorted_i.h"
#include "store.h"
#include "nvmefs/util.h"

const uint8_t fuzz_uuid[16] = {0x6e, 0x76, 0x6d, 0x65, 0x66, 0x73, 0x2d, 0x66,
			       0x75, 0x7a, 0x7a, 0x01, 0x02, 0x03, 0x04, 0x05};

static char member_path[FUZZ_NDEVS][16] = {"fuzz-member0", "fuzz-member1", "fuzz-member2",
					   "fuzz-member3"};

static bool verbose;

static void drop_log(enum nvmefs_log_level level, const char *msg)
{
	(void)level;
	(void)msg;
}

void fuzz_init(void)
{
	struct nvmefs_label l, back;
	uint8_t *blk = malloc(NVMEFS_BLOCK);

	verbose = getenv("FUZZ_VERBOSE") != NULL;
	if (verbose)
		nvmefs_log_set_level(NVMEFS_LOG_DEBUG);
	else
		nvmefs_log_set_sink(drop_log);
	/* The harness geometry must itself be a label mount accepts. */
	if (!blk)
		abort();
	for (unsigned i = 0; i < FUZZ_NDEVS; i++) {
		fuzz_label_init(&l, i);
		nvmefs_label_encode(&l, blk);
		if (nvmefs_label_decode(&back, blk))
			FUZZ_BUG("the harness's own label %u does not decode", i);
	}
	free(blk);
}

void fuzz_label_init(struct nvmefs_label *l, unsigned index)
{
	memset(l, 0, sizeof(*l));
	memcpy(l->uuid, fuzz_uuid, sizeof(l->uuid));
	snprintf(l->name, sizeof(l->name), "fuzz");
	l->index = index;
	l->count = FUZZ_NDEVS;
	l->chunk_size = FUZZ_CHUNK;
	l->created_ns = 1700000000000000000ull;
	for (unsigned i = 0; i < FUZZ_NDEVS; i++)
		l->dev_size[i] = FUZZ_DEV_SIZE;
	l->data_start = FUZZ_DATA_START;
	l->data_end = FUZZ_DATA_END;
	l->meta_off = FUZZ_META_OFF;
	l->meta_size = FUZZ_META_SIZE;
	l->runs_size = FUZZ_RUNS;
	l->journal_size = FUZZ_JOURNAL;
}

/* The memfd standing in for every member; only the metadata area exists. */
static int image_fd(void)
{
	static int fd = -1;

	if (fd >= 0)
		return fd;
	fd = memfd_create("nvmefs-fuzz", MFD_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (ftruncate(fd, FUZZ_META_OFF + FUZZ_META_SIZE)) {
		int err = -errno;

		close(fd);
		fd = -1;
		return err;
	}
	return fd;
}

int fuzz_image_write(const uint8_t *img, size_t len)
{
	uint8_t *buf = calloc(1, FUZZ_META_SIZE);
	int fd = image_fd(), ret = 0;

	if (!buf)
		return -ENOMEM;
	if (fd < 0) {
		free(buf);
		return fd;
	}
	memcpy(buf, img, len < FUZZ_META_SIZE ? len : FUZZ_META_SIZE);
	if (pwrite(fd, buf, FUZZ_META_SIZE, FUZZ_META_OFF) != (ssize_t)FUZZ_META_SIZE)
		ret = -EIO;
	free(buf);
	return ret;
}

int fuzz_image_zero(void)
{
	int fd = image_fd();

	if (fd < 0)
		return fd;
	/* Cheaper than writing zeros: the memfd's pages are dropped. */
	if (ftruncate(fd, 0) || ftruncate(fd, FUZZ_META_OFF + FUZZ_META_SIZE))
		return -errno;
	return 0;
}

int fuzz_image_read(uint8_t *img)
{
	int fd = image_fd();

	if (fd < 0)
		return fd;
	if (pread(fd, img, FUZZ_META_SIZE, FUZZ_META_OFF) != (ssize_t)FUZZ_META_SIZE)
		return -EIO;
	return 0;
}

static struct nvmefs_devset *image_set(void)
{
	struct nvmefs_devset *set;
	int fd = image_fd();

	if (fd < 0)
		return NULL;
	set = calloc(1, sizeof(*set) + FUZZ_NDEVS * sizeof(set->devs[0]));
	if (!set)
		return NULL;
	set->count = FUZZ_NDEVS;
	for (unsigned i = 0; i < FUZZ_NDEVS; i++) {
		set->devs[i].path = member_path[i];
		set->devs[i].fd = fd;
		set->devs[i].size = FUZZ_DEV_SIZE;
		set->devs[i].block_size = NVMEFS_BLOCK;
		set->devs[i].mem_align = NVMEFS_BLOCK;
	}
	return set;
}

/* Empty hash tables of FUZZ_HASH_SIZE buckets instead of meta_init's: their
 * growth is then reached by inputs of a few records. A fixed seed for the
 * names' hash instead of meta_init's random one: an input must take the
 * same paths on every run, or libFuzzer's coverage means nothing. */
static int shrink_tables(struct nvmefs_vol *vol)
{
	vol->name_seed = FUZZ_NAME_SEED;
	free(vol->itab);
	free(vol->dtab);
	vol->itab_size = vol->dtab_size = FUZZ_HASH_SIZE;
	vol->itab = calloc(vol->itab_size, sizeof(*vol->itab));
	vol->dtab = calloc(vol->dtab_size, sizeof(*vol->dtab));
	return vol->itab && vol->dtab ? 0 : -ENOMEM;
}

struct nvmefs_vol *fuzz_vol_create(bool with_image)
{
	struct nvmefs_devset *set = NULL;
	struct nvmefs_label labels[FUZZ_NDEVS];
	struct nvmefs_vol *vol;

	if (with_image) {
		set = image_set();
		if (!set)
			return NULL;
	}
	/* resident: the oracle compares the maps and counts after a remount */
	vol = nvmefs_vol_create(set, FUZZ_NDEVS, &(struct nvmefs_vol_opts){.resident = true});
	if (!vol || shrink_tables(vol) || nvmefs_meta_shadow_start(vol)) {
		if (vol)
			vol->set = NULL;
		nvmefs_vol_destroy(vol);
		free(set);
		return NULL;
	}
	for (unsigned i = 0; i < FUZZ_NDEVS; i++)
		fuzz_label_init(&labels[i], i);
	nvmefs_vol_set_geometry(vol, labels);
	return vol;
}

void fuzz_vol_destroy(struct nvmefs_vol *vol)
{
	struct nvmefs_devset *set;

	if (!vol)
		return;
	set = vol->set;
	nvmefs_vol_destroy(vol);
	free(set);
}

int fuzz_vol_add_root(struct nvmefs_vol *vol)
{
	struct nvmefs_rec root = {.type = NVMEFS_REC_INODE};
	bool was = vol->replaying;
	int ret;

	root.inode.ino = NVMEFS_ROOT_INO;
	root.inode.mode = S_IFDIR | 0755;
	root.inode.nlink = 2;
	root.inode.atime = root.inode.mtime = root.inode.ctime = root.inode.crtime =
		(struct nvmefs_time){1700000000, 0};
	vol->replaying = true;
	ret = nvmefs_meta_apply(vol, &root);
	vol->replaying = was;
	return ret;
}

struct nvmefs_vol *fuzz_vol_format(void)
{
	struct nvmefs_vol *vol;

	/* Nothing of the last input's image may look like this volume's. */
	if (fuzz_image_zero())
		return NULL;
	vol = fuzz_vol_create(true);
	if (!vol)
		return NULL;
	/* As mkfs: the data areas free, a FREE key each (and the superblock's
	 * flag, which the remount's load needs). */
	if (nvmefs_journal_format(vol) || nvmefs_alloc_format(vol) || fuzz_vol_add_root(vol)) {
		fuzz_vol_destroy(vol);
		return NULL;
	}
	return vol;
}

/* The shadow store against the maps (see the top). */
static void check_shadow(struct nvmefs_vol *vol, const char *when)
{
	int ret = nvmefs_meta_crosscheck(vol);

	if (ret && ret != -ENOMEM && ret != -EINVAL)
		FUZZ_BUG("%s: the shadow store differs from the maps (%d; FUZZ_VERBOSE=1 names the "
			 "key)",
			 when, ret);
}

/* Every live key of a's shadow store is in b's with the same value, and
 * b has no other. */
static void same_keys(struct nvmefs_vol *a, struct nvmefs_vol *b, const char *when)
{
	struct nvmefs_run_ent e;
	const void *pos = NULL;
	const uint8_t *got;
	size_t glen, na = 0, nb = 0;
	char name[320];

	while (nvmefs_shadow_next(a->shadow, &pos, &e)) {
		if (e.tomb)
			continue;
		na++;
		if (nvmefs_shadow_get(b->shadow, e.key, e.klen, &got, &glen) == 0 &&
		    glen == e.vlen && !memcmp(got, e.val, glen))
			continue;
		nvmefs_shadow_key_name(e.key, e.klen, name, sizeof(name));
		FUZZ_BUG("%s: after a remount %s is %s", when, name,
			 nvmefs_shadow_get(b->shadow, e.key, e.klen, &got, &glen)
				 ? "missing"
				 : "another value");
	}
	pos = NULL;
	while (nvmefs_shadow_next(b->shadow, &pos, &e))
		nb += !e.tomb;
	if (na != nb)
		FUZZ_BUG("%s: %zu keys before a remount, %zu after", when, na, nb);
}

/*
 * A transaction header in the ring with a sequence number at or past the
 * next one is from the future: nothing writes one, but the harness's
 * re-sealing gives mutated inputs such blocks. The mount that accepted the
 * image did not see it (outside the half ring it searches for damage); a
 * flush moves that window on, and the remount would refuse the image as
 * damaged, or replay it. Zero them (they are not the state's).
 */
static int drop_future_txns(struct nvmefs_vol *vol)
{
	uint8_t *img = malloc(FUZZ_META_SIZE);
	uint64_t ring = nvmefs_meta_journal_off(&vol->label);
	bool changed = false;
	int ret;

	if (!img)
		return -ENOMEM;
	ret = fuzz_image_read(img);
	for (uint64_t off = ring; !ret && off < ring + FUZZ_JOURNAL; off += NVMEFS_BLOCK) {
		struct nvmefs_txn t;

		if (!nvmefs_txn_peek(&t, vol->label.uuid, img + off) && t.seq >= vol->j.next_seq) {
			memset(img + off, 0, NVMEFS_BLOCK);
			changed = true;
		}
	}
	if (!ret && changed)
		ret = fuzz_image_write(img, FUZZ_META_SIZE);
	free(img);
	return ret;
}

/*
 * The free space as the mount takes it: a copy of the durable map the
 * FREE keys filled. The mount reads no extent and so no longer refuses
 * extents that overlap; this harness does (-EUCLEAN) as it did, since
 * what follows is undefined on such a volume (fsck's to repair).
 */
static int mount_free(struct nvmefs_vol *vol)
{
	struct nvmefs_freemap c[NVMEFS_MAX_DEVICES] = {0};
	int ret = nvmefs_alloc_complement(vol, c);

	for (unsigned d = 0; d < NVMEFS_MAX_DEVICES; d++)
		nvmefs_freemap_exit(&c[d]);
	return ret ? ret : nvmefs_alloc_start(vol);
}

/* What a remount must give back: see fuzz_vol.h. */
static void compare_remount(struct nvmefs_vol *vol, struct nvmefs_vol *v2, const char *when)
{
	struct nvmefs_mark m;

	/* The manifest's mark: what the flush saw, and what the load read. */
	nvmefs_store_mark(v2->store, &m);
	if (m.next_ino != vol->next_ino || m.ninodes != v2->ninodes)
		FUZZ_BUG("%s: the manifest says next inode %llu and %llu inodes, the volume %llu "
			 "and %zu",
			 when, (unsigned long long)m.next_ino, (unsigned long long)m.ninodes,
			 (unsigned long long)vol->next_ino, v2->ninodes);
	if (v2->free_bytes != vol->free_bytes + vol->pending_bytes)
		FUZZ_BUG("%s: free space %llu after a remount, %llu + %llu pending before", when,
			 (unsigned long long)v2->free_bytes, (unsigned long long)vol->free_bytes,
			 (unsigned long long)vol->pending_bytes);
	if (v2->ninodes != vol->ninodes || v2->ndirents != vol->ndirents ||
	    v2->norphans != vol->norphans)
		FUZZ_BUG("%s: %zu inodes %zu entries %zu orphans after a remount, was %zu %zu %zu",
			 when, v2->ninodes, v2->ndirents, v2->norphans, vol->ninodes, vol->ndirents,
			 vol->norphans);
	if (v2->next_ino != vol->next_ino)
		FUZZ_BUG("%s: the next inode is %llu after a remount, was %llu", when,
			 (unsigned long long)v2->next_ino, (unsigned long long)vol->next_ino);
	if (v2->meta_bytes != vol->meta_bytes)
		FUZZ_BUG("%s: meta_bytes is %llu after a remount, was %llu", when,
			 (unsigned long long)v2->meta_bytes, (unsigned long long)vol->meta_bytes);
	same_keys(vol, v2, when);
}

/*
 * Flush vol as an unmount does, load the image into a second volume, and
 * compare. A flush the run area has no room for (-ENOSPC), of a state
 * format v2's values refuse (-EINVAL: the shadow says so too) or out of
 * memory skips the check; so does a volume whose shadow missed a change.
 */
static void check_remount(struct nvmefs_vol *vol, const char *when)
{
	struct nvmefs_vol *v2 = NULL;
	int ret;

	if (!vol->store || !vol->shadow || nvmefs_shadow_error(vol->shadow))
		return;
	ret = nvmefs_journal_checkpoint(vol, false);
	if (ret == -ENOSPC || ret == -EINVAL || ret == -ENOMEM) {
		if (verbose)
			fprintf(stderr, "fuzz: %s: no remount, the flush failed (%d)\n", when, ret);
		return;
	}
	if (ret)
		FUZZ_BUG("%s: flushing the state failed (%d)", when, ret);
	if (drop_future_txns(vol))
		return; /* out of memory */
	v2 = fuzz_vol_create(true);
	if (!v2)
		return;
	ret = nvmefs_journal_load(v2);
	if (ret == -ENOMEM)
		goto out;
	if (ret)
		FUZZ_BUG("%s: the flushed state does not load again (%d; FUZZ_VERBOSE=1 says why)",
			 when, ret);
	/* The crosscheck also compares the durable free map loaded from the
	 * FREE keys with the complement of the extents. */
	check_shadow(v2, "remounted");
	ret = mount_free(v2);
	if (ret == -ENOMEM)
		goto out;
	if (ret)
		FUZZ_BUG("%s: after a remount the extents overlap (%d)", when, ret);
	compare_remount(vol, v2, when);
	if (verbose)
		fprintf(stderr, "fuzz: %s: the same state after a remount\n", when);
out:
	fuzz_vol_destroy(v2);
}

static int u64_cmp(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/*
 * What nvmefs_meta_verify() promises about entries, checked again on the
 * state it accepted: each names an inode that exists, is neither the root
 * nor an orphan (mount's orphan reclaim would free it under the entry), and
 * has the links to cover its entries (a directory: one), else an unlink
 * frees an inode other entries still name (regressions
 * journal/regress-orphan-still-linked, journal/regress-nlink-below-entries).
 */
static void check_links(struct nvmefs_vol *vol)
{
	uint64_t *kids = malloc((vol->ndirents + 1) * sizeof(*kids));
	size_t n = 0;

	if (!kids)
		return; /* out of memory */
	for (size_t i = 0; i < vol->dtab_size; i++) {
		for (struct nvmefs_dirent *d = vol->dtab[i]; d; d = d->hnext)
			kids[n++] = d->child;
	}
	qsort(kids, n, sizeof(*kids), u64_cmp);
	for (size_t i = 0, run; i < n; i += run) {
		struct nvmefs_inode *c = nvmefs_iget(vol, kids[i]);

		for (run = 1; i + run < n && kids[i + run] == kids[i];)
			run++;
		if (!c)
			FUZZ_BUG("verified state: an entry names missing inode %llu",
				 (unsigned long long)kids[i]);
		if (c->ino == NVMEFS_ROOT_INO)
			FUZZ_BUG("verified state: an entry names the root");
		if (c->orphan)
			FUZZ_BUG("verified state: orphan inode %llu is named by %zu entries",
				 (unsigned long long)c->ino, run);
		if (S_ISDIR(c->mode) ? run > 1 : run > c->nlink)
			FUZZ_BUG(
				"verified state: inode %llu (%s, nlink %u) is named by %zu entries",
				(unsigned long long)c->ino, S_ISDIR(c->mode) ? "directory" : "file",
				c->nlink, run);
	}
	free(kids);
}

/*
 * Inode numbers are handed out from next_ino, "after the highest in use"
 * (docs/FORMAT.md): every inode in use must be below it, or the next one
 * created collides, or (next_ino wrapped past 2^64 - 1, regression
 * journal/regress-ino-max) is inode 0, which no mount decodes again.
 */
static void check_next_ino(struct nvmefs_vol *vol)
{
	for (size_t i = 0; i < vol->itab_size; i++) {
		for (struct nvmefs_inode *in = vol->itab[i]; in; in = in->hnext) {
			if (in->ino >= vol->next_ino)
				FUZZ_BUG("inode %llu in use, but the next new one would be %llu",
					 (unsigned long long)in->ino,
					 (unsigned long long)vol->next_ino);
		}
	}
}

int fuzz_vol_mount_tail(struct nvmefs_vol *vol)
{
	size_t n;
	int ret;

	check_links(vol);
	check_next_ino(vol);
	check_shadow(vol, "loaded");
	ret = mount_free(vol);
	if (ret)
		return ret;
	/* Open unlinked files are flushed as orphans while mounted. */
	check_remount(vol, "loaded");
	ret = nvmefs_journal_reclaim_orphans(vol, &n);
	if (ret)
		return ret;
	check_shadow(vol, "orphans reclaimed");
	if (verbose)
		fprintf(stderr, "fuzz: mounted: %zu inodes, %zu entries, %llu bytes free\n",
			vol->ninodes, vol->ndirents, (unsigned long long)vol->free_bytes);
	if (n) /* else the state is the one just remounted */
		check_remount(vol, "orphans reclaimed");
	return 0;
}

void fuzz_reseal_frame(uint8_t *block)
{
	uint32_t crc;

	memset(block + 12, 0, 4);
	crc = htole32(nvmefs_crc32c(block, NVMEFS_BLOCK));
	memcpy(block + 12, &crc, 4);
}

void fuzz_reseal_txn(uint8_t *buf, size_t avail)
{
	uint32_t plen, crc;

	if (avail < NVMEFS_TXN_HDR)
		return;
	memcpy(&plen, buf + 36, 4); /* header: ... nblocks(4) @32, payload_len(4) @36 */
	plen = le32toh(plen);
	if (plen > avail - NVMEFS_TXN_HDR)
		return;
	memset(buf + 12, 0, 4);
	crc = htole32(nvmefs_crc32c(buf, NVMEFS_TXN_HDR + plen));
	memcpy(buf + 12, &crc, 4);
}

void fuzz_reseal_ring(uint8_t *ring, size_t len)
{
	for (size_t off = len / NVMEFS_BLOCK * NVMEFS_BLOCK; off;) {
		off -= NVMEFS_BLOCK;
		if (len - off >= NVMEFS_TXN_HDR && !memcmp(ring + off, FUZZ_TXN_MAGIC, 8))
			fuzz_reseal_txn(ring + off, len - off);
	}
}

/* Seal a run block's crc over the blocks its header claims, when that is
 * 1..avail blocks (sorted.c's run_crc). */
static void reseal_run_block(uint8_t *b, uint64_t avail)
{
	size_t len = nvmefs_run_peek_len(b);
	uint32_t crc;

	if (!len || len / NVMEFS_BLOCK > avail)
		return;
	crc = htole32(nvmefs_crc32c_hole(b, len, 12));
	memcpy(b + 12, &crc, 4);
}

/* The run area at area: the manifest slots, then the run space from its
 * last block to its first, so that an object's crc covers the re-sealed
 * headers inside it. */
static void reseal_runs(uint8_t *area, const struct nvmefs_runs_geom *g)
{
	uint32_t slot = g->slot_blocks;

	for (unsigned w = 0; w < 2; w++) {
		uint8_t *b = area + (uint64_t)w * slot * NVMEFS_BLOCK;

		if (!memcmp(b, NVMEFS_MANIFEST_MAGIC, 8))
			fuzz_obj_reseal(b, slot);
	}
	for (uint64_t i = g->blocks; i-- > 2ull * slot;) {
		uint8_t *b = area + i * NVMEFS_BLOCK;
		uint64_t avail = g->blocks - i;

		if (!memcmp(b, NVMEFS_RUN_MAGIC, 8))
			reseal_run_block(b, avail);
		else if (!memcmp(b, NVMEFS_INDEX_MAGIC, 8) || !memcmp(b, NVMEFS_FILTER_MAGIC, 8))
			fuzz_obj_reseal(b, (uint32_t)avail);
	}
}

void fuzz_reseal_image(uint8_t *img)
{
	struct nvmefs_runs_geom g;
	struct nvmefs_label l;

	fuzz_label_init(&l, 0);
	nvmefs_journal_runs_geom(&l, &g);
	for (unsigned w = 0; w < 2; w++) {
		uint8_t *b = img + nvmefs_meta_super_off(w);

		if (!memcmp(b, FUZZ_SUPER_MAGIC, 8))
			fuzz_reseal_frame(b);
	}
	reseal_runs(img + nvmefs_meta_runs_off(&l), &g);
	fuzz_reseal_ring(img + nvmefs_meta_journal_off(&l), FUZZ_JOURNAL);
}
