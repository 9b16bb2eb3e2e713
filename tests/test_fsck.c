// SPDX-License-Identifier: MIT
/*
 * fsck.nvmefs against damage made on purpose: on a fresh 2-member volume
 * per case, records that the live code would never log (a wrong link
 * count, an inode with no entry, an entry naming a freed inode, a
 * directory cycle cut off from the root, two files claiming the same
 * bytes, a leaked inode), or a damaged label, superblock or journal
 * transaction (with whole ones after it), or keys of the store that the
 * metadata does not call for (a stale INODE summary, a DIRENT key without
 * its DCOOKIE), or FREE keys that differ from the extents, are committed
 * through the library. Then `fsck.nvmefs -n` must report the damage by
 * name and exit 4, `-y` must repair it and exit 1, a second `-n` must exit
 * 0, and the volume must then load with the mount's own checks. Also: a
 * clean volume exits 0, orphans are not errors, a volume in use and bad
 * usage exit 8, both superblocks damaged exits 4; a member left out, an
 * unformatted file, a wrong path or a directory given exit 8 (the caller's
 * mistake, not damage) with a message naming the path.
 *
 * usage: test_fsck BUILD_DIR   (for BUILD_DIR/mkfs.nvmefs and fsck.nvmefs)
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fs_i.h"
#include "journal_i.h"
#include "meta_i.h"
#include "store.h"
#include "volume_i.h"
#include "nvmefs/util.h"
#include "test_util.h"

/* The mount reads inodes on demand and checks each as it reads it; the
 * whole load (fsck's, the tests') checks every entry and link count first
 * and refuses what these tests damage. */
static const struct nvmefs_vol_opts whole_load = {.resident = true};

static char dir[256], img[2][300], mkfs[512], fsck[512], out[300];

static void format(void)
{
	char cmd[2048];

	snprintf(cmd, sizeof(cmd), "%s -q -f %s %s >/dev/null", mkfs, img[0], img[1]);
	CHECK(system(cmd) == 0);
}

static struct nvmefs_vol *open_vol(void)
{
	const char *paths[2] = {img[0], img[1]};
	struct nvmefs_vol *vol = NULL;
	/* whole: the checks below read the maps (nvmefs_dir_find) directly */
	int ret = nvmefs_vol_open(&vol, paths, 2, &whole_load);

	CHECK_ERR(ret, 0);
	CHECK(ret || vol->shadow); /* main: NVMEFS_META_CROSSCHECK=1 */
	return ret ? NULL : vol;
}

/* Run fsck.nvmefs with args on both members; its exit status. Its output
 * is kept in `out` for has(). */
static int run_fsck(const char *args)
{
	char cmd[2048];
	int st;

	snprintf(cmd, sizeof(cmd), "%s %s %s %s >%s 2>&1", fsck, args, img[1], img[0], out);
	st = system(cmd);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* fsck's last output contains s (quietly). */
static bool output_has(const char *s, char *buf, size_t size)
{
	FILE *fp = fopen(out, "r");
	size_t n = fp ? fread(buf, 1, size - 1, fp) : 0;

	if (fp)
		fclose(fp);
	buf[n] = 0;
	return strstr(buf, s) != NULL;
}

/* The same, showing the output when it does not. */
static bool has(const char *s)
{
	char buf[16384];

	if (!output_has(s, buf, sizeof(buf))) {
		fprintf(stderr, "fsck output lacks '%s':\n%s", s, buf);
		return false;
	}
	return true;
}

static int log_rec(struct nvmefs_vol *vol, struct nvmefs_rec *r)
{
	int ret;

	pthread_mutex_lock(&vol->lock);
	ret = nvmefs_journal_log(vol, r);
	pthread_mutex_unlock(&vol->lock);
	return ret;
}

static uint64_t make_inode(struct nvmefs_vol *vol, mode_t mode, uint32_t nlink)
{
	struct nvmefs_rec r = {.type = NVMEFS_REC_INODE};

	r.inode.ino = vol->next_ino;
	r.inode.mode = mode;
	r.inode.nlink = nlink;
	if (S_ISREG(mode))
		nvmefs_layout_init(&r.inode.layout, vol->label.chunk_size, vol->ndevs, 0);
	CHECK_ERR(log_rec(vol, &r), 0);
	return r.inode.ino;
}

static void link_to(struct nvmefs_vol *vol, uint64_t parent, const char *name, uint64_t child,
		    bool add)
{
	struct nvmefs_rec r = {.type = add ? NVMEFS_REC_DIRENT_ADD : NVMEFS_REC_DIRENT_DEL};

	r.dirent.parent = parent;
	r.dirent.child = child;
	r.dirent.type =
		nvmefs_iget(vol, child) && S_ISDIR(nvmefs_iget(vol, child)->mode) ? DT_DIR : DT_REG;
	r.dirent.name = name;
	r.dirent.name_len = (uint16_t)strlen(name);
	CHECK_ERR(log_rec(vol, &r), 0);
}

static uint64_t make_file(struct nvmefs_vol *vol, uint64_t parent, const char *name)
{
	uint64_t ino = make_inode(vol, S_IFREG | 0644, 1);

	link_to(vol, parent, name, ino, true);
	return ino;
}

static uint64_t make_dir(struct nvmefs_vol *vol, uint64_t parent, const char *name)
{
	uint64_t ino = make_inode(vol, S_IFDIR | 0755, 2);
	struct nvmefs_inode *p = nvmefs_iget(vol, parent);
	struct nvmefs_rec r;

	link_to(vol, parent, name, ino, true);
	nvmefs_inode_to_rec(p, &r);
	r.inode.nlink++;
	CHECK_ERR(log_rec(vol, &r), 0);
	return ino;
}

static void map(struct nvmefs_vol *vol, uint64_t ino, uint64_t dev_off)
{
	struct nvmefs_rec r = {.type = NVMEFS_REC_EXTENT};

	r.extent.ino = ino;
	r.extent.slot = 0;
	r.extent.comp_off = 0;
	r.extent.dev_off = dev_off;
	r.extent.len = 8 * NVMEFS_BLOCK;
	CHECK_ERR(log_rec(vol, &r), 0);
}

static void set_nlink(struct nvmefs_vol *vol, uint64_t ino, uint32_t nlink)
{
	struct nvmefs_rec r;

	nvmefs_inode_to_rec(nvmefs_iget(vol, ino), &r);
	r.inode.nlink = nlink;
	CHECK_ERR(log_rec(vol, &r), 0);
}

/* Commit and drop the volume as a crash would (the journal holds it). */
static void commit_abandon(struct nvmefs_vol *vol)
{
	CHECK_ERR(nvmefs_journal_commit(vol), 0);
	nvmefs_vol_abandon(vol);
}

/* -n finds `what` (exit 4), -y fixes it (1), -n then is clean (0), and
 * the volume loads with the mount's checks. */
static void expect_repair(const char *name, const char *what)
{
	struct nvmefs_vol *vol;

	CHECKF(run_fsck("-n") == 4, "%s: -n", name);
	CHECKF(has(what), "%s", name);
	CHECKF(has("not fixed"), "%s", name);
	CHECKF(run_fsck("-y") == 1, "%s: -y", name);
	CHECKF(has("fixed"), "%s", name);
	CHECKF(run_fsck("-n") == 0, "%s: -n after -y", name);
	CHECKF(has("clean"), "%s", name);
	vol = open_vol();
	if (vol)
		CHECK_ERR(nvmefs_vol_close(vol), 0);
}

static void test_clean(void)
{
	struct nvmefs_vol *vol;

	format();
	vol = open_vol();
	if (!vol)
		return;
	make_file(vol, make_dir(vol, NVMEFS_ROOT_INO, "d"), "f");
	CHECK_ERR(nvmefs_vol_close(vol), 0);
	CHECK(run_fsck("-n") == 0 && has("clean"));
	CHECK(run_fsck("") == 0 && has("clean")); /* -n is the default */
	CHECK(run_fsck("-y") == 0 && has("clean"));
}

static void test_link_count(void)
{
	struct nvmefs_vol *vol;

	format();
	vol = open_vol();
	if (!vol)
		return;
	set_nlink(vol, make_file(vol, NVMEFS_ROOT_INO, "f"), 3);
	commit_abandon(vol);
	CHECK(run_fsck("-n") == 4 && has("replayed 1 transaction"));
	expect_repair("link count", "link count 3, should be 1");
}

static void test_dangling_entry(void)
{
	struct nvmefs_rec r = {.type = NVMEFS_REC_INODE_FREE};
	struct nvmefs_vol *vol;

	format();
	vol = open_vol();
	if (!vol)
		return;
	r.ino.ino = make_file(vol, NVMEFS_ROOT_INO, "gone");
	CHECK_ERR(log_rec(vol, &r), 0);
	commit_abandon(vol);
	vol = NULL;
	{
		const char *paths[2] = {img[0], img[1]};

		/* The mount refuses it. */
		CHECK_ERR(nvmefs_vol_open(&vol, paths, 2, &whole_load), -EUCLEAN);
	}
	expect_repair("dangling entry", "entry 'gone' in directory 1 names no inode");
}

static void test_detached_cycle(void)
{
	struct nvmefs_vol *vol;
	uint64_t a, b, f;

	format();
	vol = open_vol();
	if (!vol)
		return;
	a = make_dir(vol, NVMEFS_ROOT_INO, "a");
	b = make_dir(vol, a, "b");
	f = make_file(vol, b, "f");
	/* a/b/a: cut a from the root and hang it under its own child. */
	link_to(vol, NVMEFS_ROOT_INO, "a", a, false);
	link_to(vol, b, "a", a, true);
	make_inode(vol, S_IFREG | 0600, 1); /* a file with no entry at all */
	commit_abandon(vol);
	expect_repair("cycle", "is not reachable from the root");
	vol = open_vol();
	if (!vol)
		return;
	{
		struct nvmefs_dirent *lf = nvmefs_dir_find(vol, NVMEFS_ROOT_INO, "lost+found");
		char name[32];

		CHECK(lf != NULL);
		snprintf(name, sizeof(name), "#%llu", (unsigned long long)a);
		CHECKF(lf && nvmefs_dir_find(vol, lf->child, name), "a in lost+found");
		CHECKF(nvmefs_dir_find(vol, b, "f") && nvmefs_dir_find(vol, b, "f")->child == f,
		       "a/b/f kept");
		CHECKF(!nvmefs_dir_find(vol, b, "a"), "the cycle's entry is gone");
		CHECK(lf && nvmefs_iget(vol, a)->parent == lf->child);
	}
	CHECK_ERR(nvmefs_vol_close(vol), 0);
}

/*
 * Two files mapping the same blocks. Still in the journal, the mount's
 * replay refuses the second extent: a punch of either would free the
 * other's blocks (the fuzzer's journal/regress-extent-double-mapped).
 * Flushed into the store, the mount cannot see it: it takes the free
 * space from the FREE keys and reads no extent. fsck sees both.
 */
static void test_shared_extent(void)
{
	const char *paths[2] = {img[0], img[1]};

	for (int flushed = 0; flushed < 2; flushed++) {
		struct nvmefs_vol *vol;
		uint64_t x, y, dev_off;

		format();
		vol = open_vol();
		if (!vol)
			return;
		x = make_file(vol, NVMEFS_ROOT_INO, "x");
		y = make_file(vol, NVMEFS_ROOT_INO, "y");
		dev_off = vol->data_start[0] + 64 * NVMEFS_BLOCK;
		map(vol, x, dev_off);
		map(vol, y, dev_off + 4 * NVMEFS_BLOCK); /* half of it is x's */
		if (flushed)
			CHECK_ERR(nvmefs_vol_close(vol), 0);
		else
			commit_abandon(vol);
		vol = NULL;
		/* As the mount loads (inodes on demand), then all of them. */
		for (int whole = 0; whole < 2; whole++) {
			vol = NULL;
			CHECKF(nvmefs_vol_open(&vol, paths, 2, whole ? &whole_load : NULL) ==
				       (flushed ? 0 : -EUCLEAN),
			       "flushed %d, whole %d", flushed, whole);
			if (vol)
				nvmefs_vol_abandon(vol);
		}
		expect_repair("shared extent", "belong to inode");
		vol = open_vol();
		if (!vol)
			return;
		CHECK(nvmefs_iget(vol, x)->alloc_bytes == 8 * NVMEFS_BLOCK);
		CHECK(nvmefs_iget(vol, y)->alloc_bytes == 4 * NVMEFS_BLOCK);
		CHECK_ERR(nvmefs_vol_close(vol), 0);
	}
}

static void test_leaked_and_orphan(void)
{
	struct nvmefs_rec r = {.type = NVMEFS_REC_ORPHAN_ADD};
	struct nvmefs_vol *vol;

	format();
	vol = open_vol();
	if (!vol)
		return;
	make_inode(vol, S_IFREG | 0644, 0); /* no link, no orphan record */
	r.ino.ino = make_inode(vol, S_IFREG | 0644, 0);
	CHECK_ERR(log_rec(vol, &r), 0); /* an orphan: fine */
	commit_abandon(vol);
	expect_repair("leaked", "has no entry and no orphan record");

	format();
	vol = open_vol();
	if (!vol)
		return;
	r.ino.ino = make_inode(vol, S_IFREG | 0644, 0);
	CHECK_ERR(log_rec(vol, &r), 0);
	commit_abandon(vol);
	CHECK(run_fsck("-n") == 0 && has("unlinked while open"));
	CHECK(run_fsck("-y") == 0 && has("reclaimed"));
	{
		char buf[16384];

		CHECK(run_fsck("-n") == 0 && !output_has("unlinked", buf, sizeof(buf)));
	}
}

static void scribble(int i, off_t off, size_t len);

/* A damaged transaction with whole ones after it is not a torn tail: the
 * mount refuses, fsck -y keeps the state before it. */
static void test_damaged_journal(void)
{
	const char *paths[2] = {img[0], img[1]};
	struct nvmefs_vol *vol;
	uint64_t jbase;

	format();
	vol = open_vol();
	if (!vol)
		return;
	jbase = vol->label.meta_off + nvmefs_meta_journal_off(&vol->label);
	make_file(vol, NVMEFS_ROOT_INO, "t1");
	CHECK_ERR(nvmefs_journal_commit(vol), 0); /* the first transaction, at the ring's start */
	make_file(vol, NVMEFS_ROOT_INO, "t2");
	CHECK_ERR(nvmefs_journal_commit(vol), 0);
	make_file(vol, NVMEFS_ROOT_INO, "t3");
	commit_abandon(vol);
	scribble(0, (off_t)jbase + 100, 8);
	vol = NULL;
	CHECK_ERR(nvmefs_vol_open(&vol, paths, 2, &whole_load), -EUCLEAN);
	expect_repair("damaged transaction",
		      "is damaged; transactions 2 to 3 after it are discarded");
	vol = open_vol();
	if (!vol)
		return;
	CHECK(!nvmefs_dir_find(vol, NVMEFS_ROOT_INO, "t1") &&
	      !nvmefs_dir_find(vol, NVMEFS_ROOT_INO, "t3"));
	make_file(vol, NVMEFS_ROOT_INO, "t4"); /* the journal goes on */
	commit_abandon(vol);
	vol = open_vol();
	CHECK(vol && nvmefs_dir_find(vol, NVMEFS_ROOT_INO, "t4"));
	if (vol)
		CHECK_ERR(nvmefs_vol_close(vol), 0);
}

/* States the mount used to accept and then crash on (found by fuzzing):
 * it now refuses them, and fsck repairs them. */
/* What the load does not read back: an INODE value's summary (a
 * directory's entry count) and a DIRENT key with no DCOOKIE twin. The
 * mount refuses the second; fsck finds both in its store pass, and -y
 * rewrites the store from the metadata. */
static void test_store_keys(void)
{
	struct nvmefs_rec r;
	struct nvmefs_inode_sum sum = {0};
	struct nvmefs_val v;
	struct nvmefs_vol *vol;
	uint8_t key[NVMEFS_KEY_MAX], *val = malloc(NVMEFS_VAL_MAX);
	size_t klen = 0;
	ssize_t vlen;
	uint64_t d;

	format();
	vol = open_vol();
	if (!vol || !val)
		goto out;
	d = make_dir(vol, NVMEFS_ROOT_INO, "d");
	make_file(vol, d, "f");
	nvmefs_inode_to_rec(nvmefs_iget(vol, d), &r);
	sum.parent = NVMEFS_ROOT_INO;
	sum.nentries = 0; /* it has one */
	sum.next_cookie = 4;
	nvmefs_val_inode(&v, &r, &sum);
	vlen = nvmefs_val_encode(&v, key, &klen, val);
	CHECK(vlen > 0);
	CHECK_ERR(nvmefs_store_put(vol->store, key, klen, val, (size_t)vlen), 0);
	nvmefs_meta_shadow_stop(vol); /* its crosscheck would see the difference first */
	CHECK_ERR(nvmefs_vol_close(vol), 0);
	expect_repair("stale summary", "the store's keys differ from the metadata");

	vol = open_vol();
	if (!vol)
		goto out;
	memset(&r, 0, sizeof(r));
	r.type = NVMEFS_REC_DIRENT_ADD;
	r.dirent.parent = NVMEFS_ROOT_INO;
	r.dirent.child = d;
	r.dirent.type = DT_DIR;
	r.dirent.name = "stray";
	r.dirent.name_len = 5;
	nvmefs_val_dirent(&v, NVMEFS_KEY_DIRENT, &r, 99);
	vlen = nvmefs_val_encode(&v, key, &klen, val);
	CHECK(vlen > 0);
	CHECK_ERR(nvmefs_store_put(vol->store, key, klen, val, (size_t)vlen), 0);
	nvmefs_meta_shadow_stop(vol);
	CHECK_ERR(nvmefs_vol_close(vol), 0);
	vol = NULL;
	{
		const char *paths[2] = {img[0], img[1]};

		CHECK_ERR(nvmefs_vol_open(&vol, paths, 2, &whole_load), -EUCLEAN);
	}
	expect_repair("stray entry key", "the store's keys differ from the metadata");
	vol = open_vol();
	if (vol) {
		CHECK(nvmefs_dir_find(vol, NVMEFS_ROOT_INO, "d") &&
		      !nvmefs_dir_find(vol, NVMEFS_ROOT_INO, "stray"));
		CHECK_ERR(nvmefs_vol_close(vol), 0);
	}
out:
	free(val);
}

/* Put a FREE key of member 0 saying bytes [off, off + len) are free,
 * straight into the store (no record: a key that lies). */
static void put_free_key(struct nvmefs_vol *vol, uint64_t off, uint64_t len)
{
	struct nvmefs_val v = {.kind = NVMEFS_KEY_FREE};
	uint8_t key[NVMEFS_KEY_MAX], val[NVMEFS_VAL_FREE];
	size_t klen = 0;
	ssize_t vlen;

	v.free.member = 0;
	v.free.off = off;
	v.free.len = len;
	vlen = nvmefs_val_encode(&v, key, &klen, val);
	CHECK(vlen == NVMEFS_VAL_FREE);
	CHECK_ERR(nvmefs_store_put(vol->store, key, klen, val, (size_t)vlen), 0);
}

/*
 * FREE keys that differ from the extents: one that leaks a free range's
 * first blocks (the mount cannot tell), one that says a file's blocks are
 * free (it overlaps the next key: the mount refuses), and a volume with no
 * FREE key and no flag saying it has them (made before they existed: the
 * mount refuses). fsck names member and bytes, -y rewrites the keys.
 */
static void test_free_keys(void)
{
	const char *paths[2] = {img[0], img[1]};
	struct nvmefs_vol *vol;
	uint64_t f, start, used;
	uint8_t key[NVMEFS_KEY_MAX];

	format();
	vol = open_vol();
	if (!vol)
		return;
	f = make_file(vol, NVMEFS_ROOT_INO, "f");
	start = vol->data_start[0];
	used = start + 64 * NVMEFS_BLOCK;
	map(vol, f, used); /* member 0: free [start, used), used..+8 blocks, free after */
	CHECK(vol->dfree[0].n == 2);
	/* The first range's key (its end: used), 4 blocks short. */
	put_free_key(vol, start + 4 * NVMEFS_BLOCK, 60 * NVMEFS_BLOCK);
	nvmefs_meta_shadow_stop(vol); /* its crosscheck would see the difference first */
	CHECK_ERR(nvmefs_vol_close(vol), 0);
	vol = open_vol(); /* the mount trusts the keys */
	if (vol) {
		CHECK(vol->free[0].n == 2 && vol->free[0].v[0].off == start + 4 * NVMEFS_BLOCK);
		nvmefs_vol_abandon(vol);
	}
	expect_repair("short FREE key", "member 0: the FREE key of bytes");
	vol = open_vol();
	if (!vol)
		return;
	CHECK(vol->free[0].n == 2 && vol->free[0].v[0].off == start);
	put_free_key(vol, used, 8 * NVMEFS_BLOCK); /* the file's blocks */
	nvmefs_meta_shadow_stop(vol);
	CHECK_ERR(nvmefs_vol_close(vol), 0);
	vol = NULL;
	CHECK_ERR(nvmefs_vol_open(&vol, paths, 2, NULL), -EUCLEAN);
	expect_repair("FREE key over a file", "the extents use those bytes");

	/* As made before FREE keys: none, and no flag. */
	vol = open_vol();
	if (!vol)
		return;
	for (unsigned d = 0; d < vol->ndevs; d++) {
		for (size_t i = 0; i < vol->dfree[d].n; i++) {
			const struct nvmefs_range *r = &vol->dfree[d].v[i];

			CHECK_ERR(nvmefs_store_del(vol->store, key,
						   nvmefs_key_free(key, d, r->off + r->len)),
				  0);
		}
	}
	vol->free_keys = false;
	nvmefs_meta_shadow_stop(vol);
	CHECK_ERR(nvmefs_vol_close(vol), 0);
	vol = NULL;
	CHECK_ERR(nvmefs_vol_open(&vol, paths, 2, NULL), -EUCLEAN);
	expect_repair("no FREE keys", "keeps no free space");
	vol = open_vol();
	if (!vol)
		return;
	CHECK(vol->free[0].n == 2 && vol->free[0].v[0].off == start && vol->free[1].n == 1);
	CHECK_ERR(nvmefs_vol_close(vol), 0);
}

static void test_mount_refusals(void)
{
	const char *paths[2] = {img[0], img[1]};
	struct nvmefs_rec r = {.type = NVMEFS_REC_ORPHAN_ADD};
	struct nvmefs_vol *vol;
	uint64_t f, d;

	/* An orphan still named by an entry: reclaim would leave the entry
	 * dangling and a later unlink crash the daemon. */
	format();
	vol = open_vol();
	if (!vol)
		return;
	r.ino.ino = make_file(vol, NVMEFS_ROOT_INO, "still-named");
	CHECK_ERR(log_rec(vol, &r), 0);
	commit_abandon(vol);
	vol = NULL;
	CHECK_ERR(nvmefs_vol_open(&vol, paths, 2, &whole_load), -EUCLEAN);
	expect_repair("linked orphan", "has 1 entries but an orphan record");

	/* A file named by more entries than its links, a directory twice. */
	format();
	vol = open_vol();
	if (!vol)
		return;
	f = make_file(vol, NVMEFS_ROOT_INO, "one");
	link_to(vol, NVMEFS_ROOT_INO, "two", f, true);
	commit_abandon(vol);
	vol = NULL;
	CHECK_ERR(nvmefs_vol_open(&vol, paths, 2, &whole_load), -EUCLEAN);
	expect_repair("entries over links", "link count 1, should be 2");
	format();
	vol = open_vol();
	if (!vol)
		return;
	d = make_dir(vol, NVMEFS_ROOT_INO, "d1");
	link_to(vol, NVMEFS_ROOT_INO, "d2", d, true);
	commit_abandon(vol);
	vol = NULL;
	CHECK_ERR(nvmefs_vol_open(&vol, paths, 2, &whole_load), -EUCLEAN);
	/* The later entry, every run: -n names the one -y removes, whatever
	 * each run's hash seed (fsck walks entries in readdir order). */
	expect_repair("directory named twice",
		      "entry 'd2' in directory 1 names a directory that has another entry");
	vol = open_vol();
	if (vol) {
		CHECK(nvmefs_dir_find(vol, NVMEFS_ROOT_INO, "d1") &&
		      !nvmefs_dir_find(vol, NVMEFS_ROOT_INO, "d2"));
		CHECK_ERR(nvmefs_vol_close(vol), 0);
	}

	/* An inode number that would wrap the next one to 0. */
	format();
	vol = open_vol();
	if (!vol)
		return;
	r = (struct nvmefs_rec){.type = NVMEFS_REC_INODE};
	r.inode.ino = NVMEFS_INO_MAX + 1;
	r.inode.mode = S_IFDIR | 0755;
	r.inode.nlink = 2;
	CHECK_ERR(log_rec(vol, &r), -EIO);
	CHECK(vol->next_ino <= NVMEFS_INO_MAX);
	CHECK_ERR(nvmefs_vol_close(vol), 0);
}

/* A directory with no link and no entry that still holds a file: it
 * comes back in /lost+found with the file (fsck -y used to stop with
 * "Structure needs cleaning" here, writing nothing). */
static void test_leaked_dir(void)
{
	struct nvmefs_vol *vol;
	uint64_t d, f;

	format();
	vol = open_vol();
	if (!vol)
		return;
	d = make_dir(vol, NVMEFS_ROOT_INO, "d");
	f = make_file(vol, d, "f");
	link_to(vol, NVMEFS_ROOT_INO, "d", d, false);
	set_nlink(vol, d, 0);
	commit_abandon(vol);
	expect_repair("leaked directory", "directory 2 is not reachable from the root");
	vol = open_vol();
	if (!vol)
		return;
	CHECK(nvmefs_iget(vol, d) && nvmefs_iget(vol, d)->nlink == 2);
	CHECK(nvmefs_dir_find(vol, d, "f") && nvmefs_dir_find(vol, d, "f")->child == f);
	CHECK(nvmefs_iget(vol, NVMEFS_ROOT_INO)->nlink == 3); /* lost+found's ".." */
	CHECK_ERR(nvmefs_vol_close(vol), 0);
}

/* Overwrite len bytes at off of image i with garbage. */
static void scribble(int i, off_t off, size_t len)
{
	int fd = open(img[i], O_WRONLY);
	char junk[4096];

	memset(junk, 0x5a, sizeof(junk));
	CHECK(fd >= 0 && len <= sizeof(junk) && pwrite(fd, junk, len, off) == (ssize_t)len);
	if (fd >= 0)
		close(fd);
}

static void test_labels_and_super(void)
{
	struct nvmefs_vol *vol;
	uint64_t meta_off;
	int fd;

	format();
	scribble(1, 100, 16); /* member 1's primary label */
	expect_repair("label", "primary label is damaged");

	vol = open_vol();
	if (!vol)
		return;
	meta_off = vol->label.meta_off;
	CHECK_ERR(nvmefs_vol_close(vol), 0);
	scribble(0, (off_t)meta_off + 100, 16);
	scribble(0, (off_t)meta_off + NVMEFS_BLOCK + 100, 16);
	CHECK(run_fsck("-n") == 4 && has("no valid superblock"));
	CHECK(run_fsck("-y") == 4);

	/* In use: another process holds the member. */
	format();
	fd = open(img[0], O_RDONLY);
	CHECK(fd >= 0 && flock(fd, LOCK_EX) == 0);
	CHECK(run_fsck("-n") == 8 && has("is it mounted?"));
	close(fd);
	CHECK(run_fsck("-n -y") == 8);
	{
		char cmd[1024];
		int st;

		snprintf(cmd, sizeof(cmd), "%s >/dev/null 2>&1", fsck);
		st = system(cmd);
		CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 8);
	}
}

/* fsck.nvmefs on the paths args (a string for the shell): its exit status,
 * its output kept for has(). */
static int run_fsck_on(const char *args)
{
	char cmd[2048];
	int st;

	snprintf(cmd, sizeof(cmd), "%s %s >%s 2>&1", fsck, args, out);
	st = system(cmd);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* Members that are not (all of) the volume are the caller's mistake, not
 * damage: exit 8 and a message naming the path, not exit 4. */
static void test_not_the_volume(void)
{
	char args[1024], other[300], fmt[400], buf[4096];

	format();
	snprintf(other, sizeof(other), "%s/other.img", dir);
	snprintf(fmt, sizeof(fmt), "truncate -s 64M %s", other);
	CHECK(system(fmt) == 0);
	/* A member left out. */
	CHECK(run_fsck_on(img[1]) == 8 && has("member 0 is missing") && has(img[1]) &&
	      !output_has("damaged", buf, sizeof(buf)));
	/* A wrong path: an unformatted file in place of member 1. */
	snprintf(args, sizeof(args), "%s %s", img[0], other);
	CHECK(run_fsck_on(args) == 8 && has(other) && has("not an nvmefs member"));
	/* A path that does not exist. */
	snprintf(args, sizeof(args), "%s %s/nope.img", img[0], dir);
	CHECK(run_fsck_on(args) == 8 && has("nope.img") && has("no such file"));
	/* The unformatted file alone. */
	CHECK(run_fsck_on(other) == 8 && has(other) && has("not an nvmefs member"));
	/* A directory. */
	CHECK(run_fsck_on(dir) == 8 && has(dir) && has("not a block device or regular file"));
	/* And the members themselves are still clean. */
	CHECK(run_fsck("-n") == 0 && has("clean"));
	unlink(other);
}

int main(int argc, char **argv)
{
	const char *base = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
	char cmd[2048];

	if (argc < 2)
		TEST_SKIP("usage: test_fsck BUILD_DIR");
	/* The shadow store on in every volume opened here: format v2's keys
	 * checked against the maps at every commit and close (a difference
	 * aborts). */
	setenv("NVMEFS_META_CROSSCHECK", "1", 1);
	snprintf(mkfs, sizeof(mkfs), "%s/mkfs.nvmefs", argv[1]);
	snprintf(fsck, sizeof(fsck), "%s/fsck.nvmefs", argv[1]);
	if (access(mkfs, X_OK) || access(fsck, X_OK))
		TEST_SKIP("%s or %s not built", mkfs, fsck);
	snprintf(dir, sizeof(dir), "%s/test_fsck.XXXXXX", base);
	if (!mkdtemp(dir))
		TEST_SKIP("mkdtemp in %s failed", base);
	snprintf(out, sizeof(out), "%s/fsck.out", dir);
	for (int i = 0; i < 2; i++) {
		snprintf(img[i], sizeof(img[i]), "%s/d%d.img", dir, i);
		snprintf(cmd, sizeof(cmd), "truncate -s 64M %s", img[i]);
		CHECK(system(cmd) == 0);
	}
	nvmefs_log_set_level(NVMEFS_LOG_ERR);
	test_clean();
	test_link_count();
	test_dangling_entry();
	test_detached_cycle();
	test_shared_extent();
	test_leaked_and_orphan();
	test_damaged_journal();
	test_store_keys();
	test_free_keys();
	test_mount_refusals();
	test_leaked_dir();
	test_labels_and_super();
	test_not_the_volume();
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	CHECK(system(cmd) == 0);
	return test_result();
}
