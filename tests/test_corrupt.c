// SPDX-License-Identifier: MIT
/*
 * Bad input on the members: a populated 2-member volume (files with
 * extents, directories, symlinks, xattrs, an orphan; a flush of the store
 * and then journal transactions left unreplayed, as after a crash) gets
 * random bit flips in one structure at a time: a member's primary or
 * backup label, either superblock, the manifest slots, a block of a live
 * run, a block of the journal in use, and also a member cut short. Each time the volume is
 * loaded as the mount loads it and as fsck.nvmefs loads it: it must either
 * load (the damage was in a copy it does not need, or is repairable) or be
 * refused with a message that names the member; never crash (the suite
 * runs this under ASan and UBSan too). Every tenth trial also runs
 * fsck.nvmefs -n, which must exit 0, 4 or 8 and never die of a signal.
 *
 * usage: test_corrupt BUILD_DIR [TRIALS [SEED]]
 */
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fs_i.h"
#include "alloc_i.h"
#include "journal_i.h"
#include "store_i.h"
#include "volume_i.h"
#include "nvmefs/util.h"
#include "test_util.h"

#define IMG_SIZE (64ull << 20)

static char dir[256], img[2][300], fsck[512];
static char last_err[1024];
static unsigned nerr;

static void sink(enum nvmefs_log_level level, const char *msg)
{
	if (level <= NVMEFS_LOG_ERR) {
		snprintf(last_err, sizeof(last_err), "%s", msg);
		nerr++;
	}
}

static struct nvmefs_vol *open_vol(bool check, int *err)
{
	const char *paths[2] = {img[0], img[1]};
	struct nvmefs_vol_opts o = {.read_only = true, .check = check};
	struct nvmefs_vol *vol = NULL;

	*err = nvmefs_vol_open(&vol, paths, 2, &o);
	return *err ? NULL : vol;
}

static int log_rec(struct nvmefs_vol *vol, struct nvmefs_rec *r)
{
	int ret;

	pthread_mutex_lock(&vol->lock);
	ret = nvmefs_journal_log(vol, r);
	pthread_mutex_unlock(&vol->lock);
	return ret;
}

/* A mix of every kind of record, n_files files in a directory. */
static void populate(struct nvmefs_vol *vol, unsigned base, unsigned n_files)
{
	struct nvmefs_rec r = {.type = NVMEFS_REC_INODE};
	uint64_t d = vol->next_ino;
	char name[32];

	r.inode.ino = d;
	r.inode.mode = S_IFDIR | 0755;
	r.inode.nlink = 2;
	CHECK_ERR(log_rec(vol, &r), 0);
	snprintf(name, sizeof(name), "dir%u", base);
	r = (struct nvmefs_rec){.type = NVMEFS_REC_DIRENT_ADD};
	r.dirent = (typeof(r.dirent)){NVMEFS_ROOT_INO, d, DT_DIR, (uint16_t)strlen(name), name};
	CHECK_ERR(log_rec(vol, &r), 0);
	for (unsigned i = 0; i < n_files; i++) {
		uint64_t ino = vol->next_ino, off;
		struct nvmefs_rec x;

		r = (struct nvmefs_rec){.type = NVMEFS_REC_INODE};
		r.inode.ino = ino;
		r.inode.nlink = 1;
		if (i % 7 == 3) {
			r.inode.mode = S_IFLNK | 0777;
			r.inode.target = "../some/target";
			r.inode.target_len = 14;
		} else {
			r.inode.mode = S_IFREG | 0644;
			r.inode.size = 3 * NVMEFS_BLOCK;
			nvmefs_layout_init(&r.inode.layout, vol->label.chunk_size, vol->ndevs, i);
		}
		CHECK_ERR(log_rec(vol, &r), 0);
		snprintf(name, sizeof(name), "f%u", i);
		x = (struct nvmefs_rec){.type = NVMEFS_REC_DIRENT_ADD};
		x.dirent = (typeof(x.dirent)){d, ino, S_ISLNK(r.inode.mode) ? DT_LNK : DT_REG,
					      (uint16_t)strlen(name), name};
		CHECK_ERR(log_rec(vol, &x), 0);
		if (S_ISLNK(r.inode.mode))
			continue;
		pthread_mutex_lock(&vol->lock);
		CHECK(nvmefs_alloc_get(vol, r.inode.layout.devs[0], 0, 4 * NVMEFS_BLOCK, &off) ==
		      4 * NVMEFS_BLOCK);
		pthread_mutex_unlock(&vol->lock);
		x = (struct nvmefs_rec){.type = NVMEFS_REC_EXTENT};
		x.extent.ino = ino;
		x.extent.dev_off = off;
		x.extent.len = 4 * NVMEFS_BLOCK;
		CHECK_ERR(log_rec(vol, &x), 0);
		x = (struct nvmefs_rec){.type = NVMEFS_REC_XATTR_SET};
		x.xattr.ino = ino;
		x.xattr.name = "user.k";
		x.xattr.name_len = 6;
		x.xattr.value = name;
		x.xattr.value_len = (uint32_t)strlen(name);
		CHECK_ERR(log_rec(vol, &x), 0);
		if (i % 5 == 4) { /* unlinked while open: an orphan */
			x = (struct nvmefs_rec){.type = NVMEFS_REC_DIRENT_DEL};
			x.dirent = (typeof(x.dirent)){d, ino, DT_REG, (uint16_t)strlen(name), name};
			CHECK_ERR(log_rec(vol, &x), 0);
			r.inode.nlink = 0;
			CHECK_ERR(log_rec(vol, &r), 0);
			x = (struct nvmefs_rec){.type = NVMEFS_REC_ORPHAN_ADD};
			x.ino.ino = ino;
			CHECK_ERR(log_rec(vol, &x), 0);
		}
		if (i % 4 == 0)
			CHECK_ERR(nvmefs_journal_commit(vol), 0);
	}
	CHECK_ERR(nvmefs_journal_commit(vol), 0);
}

/* A structure on a member: [off, off + len). */
struct region {
	const char *what;
	int dev;
	uint64_t off, len;
};

static int nregions;
static struct region regions[32];

static void add_region(const char *what, int dev, uint64_t off, uint64_t len)
{
	if (nregions < (int)(sizeof(regions) / sizeof(regions[0])))
		regions[nregions++] = (struct region){what, dev, off, len};
}

/* The whole of both members, to put back between trials. */
static uint8_t *saved[2];

static void io(int dev, bool write, uint64_t off, void *buf, size_t len)
{
	int fd = open(img[dev], write ? O_WRONLY : O_RDONLY);

	CHECK(fd >= 0);
	if (fd < 0)
		return;
	CHECK((size_t)(write ? pwrite(fd, buf, len, (off_t)off)
			     : pread(fd, buf, len, (off_t)off)) == len);
	close(fd);
}

/* What the last trial changed, to put back: [lo, hi) of member dirty_dev. */
static int dirty_dev = -1;
static uint64_t dirty_lo, dirty_hi;

static void restore(void)
{
	if (dirty_dev < 0)
		return;
	CHECK(truncate(img[dirty_dev], IMG_SIZE) == 0);
	io(dirty_dev, true, dirty_lo, saved[dirty_dev] + dirty_lo, dirty_hi - dirty_lo);
	dirty_dev = -1;
}

static bool names_member(const char *msg)
{
	return strstr(msg, img[0]) || strstr(msg, img[1]);
}

/* Load both ways; a refusal must name the member. */
static void load_both(const char *what, unsigned trial)
{
	for (int check = 0; check < 2; check++) {
		struct nvmefs_vol *vol;
		int err;

		last_err[0] = 0;
		vol = open_vol(check, &err);
		if (vol) {
			nvmefs_vol_abandon(vol);
			continue;
		}
		CHECKF(err == -EUCLEAN || err == -ENODEV || err == -EPROTO || err == -EINVAL ||
			       err == -ENOSPC,
		       "trial %u (%s): load returned %s", trial, what, strerror(-err));
		CHECKF(names_member(last_err),
		       "trial %u (%s): refused without naming the member: '%s'", trial, what,
		       last_err);
	}
}

static void run_fsck(const char *what, unsigned trial)
{
	char cmd[2048];
	int st;

	snprintf(cmd, sizeof(cmd), "%s -n %s %s >/dev/null 2>&1", fsck, img[0], img[1]);
	st = system(cmd);
	CHECKF(WIFEXITED(st) &&
		       (WEXITSTATUS(st) == 0 || WEXITSTATUS(st) == 4 || WEXITSTATUS(st) == 8),
	       "trial %u (%s): fsck.nvmefs -n ended with status %#x", trial, what, st);
}

int main(int argc, char **argv)
{
	const char *base = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
	unsigned trials = argc > 2 ? (unsigned)atoi(argv[2]) : 400;
	uint64_t seed = argc > 3 ? strtoull(argv[3], NULL, 0) : test_seed();
	unsigned refused = 0, loaded = 0;
	char cmd[2048], mkfs[600];
	struct nvmefs_vol *vol;
	int err;

	if (argc < 2)
		TEST_SKIP("usage: test_corrupt BUILD_DIR [TRIALS [SEED]]");
	snprintf(mkfs, sizeof(mkfs), "%s/mkfs.nvmefs", argv[1]);
	snprintf(fsck, sizeof(fsck), "%s/fsck.nvmefs", argv[1]);
	if (access(mkfs, X_OK) || access(fsck, X_OK))
		TEST_SKIP("%s or %s not built", mkfs, fsck);
	printf("seed %llu, %u trials (repeat: test_corrupt %s %u %llu)\n", (unsigned long long)seed,
	       trials, argv[1], trials, (unsigned long long)seed);
	srandom((unsigned)seed);
	snprintf(dir, sizeof(dir), "%s/test_corrupt.XXXXXX", base);
	if (!mkdtemp(dir))
		TEST_SKIP("mkdtemp in %s failed", base);
	for (int i = 0; i < 2; i++) {
		snprintf(img[i], sizeof(img[i]), "%s/d%d.img", dir, i);
		snprintf(cmd, sizeof(cmd), "truncate -s %llu %s", IMG_SIZE, img[i]);
		CHECK(system(cmd) == 0);
	}
	snprintf(cmd, sizeof(cmd), "%s -q %s %s >/dev/null", mkfs, img[0], img[1]);
	CHECK(system(cmd) == 0);
	nvmefs_log_set_sink(sink);

	/* Runs holding some, then the journal holding more. */
	{
		const char *paths[2] = {img[0], img[1]};

		CHECK_ERR(nvmefs_vol_open(&vol, paths, 2, NULL), 0);
		populate(vol, 0, 40);
		CHECK_ERR(nvmefs_vol_close(vol), 0);
		CHECK_ERR(nvmefs_vol_open(&vol, paths, 2, NULL), 0);
		populate(vol, 1, 30);
		nvmefs_vol_abandon(vol);
	}
	vol = open_vol(true, &err);
	CHECK_ERR(err, 0);
	if (!vol)
		return test_result();
	{
		const struct nvmefs_label *l = &vol->label;
		uint64_t jbase = l->meta_off + nvmefs_meta_journal_off(l);
		const struct nvmefs_manifest *m =
			nvmefs_runs_current(nvmefs_store_area(vol->store));
		struct nvmefs_runs_geom g;

		CHECK(vol->j.head > vol->j.tail && vol->j.replayed > 0);
		add_region("label", 0, 0, NVMEFS_BLOCK);
		add_region("label", 1, 0, NVMEFS_BLOCK);
		add_region("backup label", 1, IMG_SIZE - NVMEFS_BLOCK, NVMEFS_BLOCK);
		add_region("superblock", 0, l->meta_off, 2 * NVMEFS_BLOCK);
		nvmefs_journal_runs_geom(l, &g);
		add_region("manifest", 0, g.off, 2ull * g.slot_blocks * NVMEFS_BLOCK);
		CHECK(m->n > 0);
		for (size_t i = 0; i < m->n; i++)
			add_region("run", 0, g.off + m->runs[i].start * NVMEFS_BLOCK,
				   nvmefs_run_blocks(&m->runs[i]) * NVMEFS_BLOCK);
		add_region("journal", 0, jbase + vol->j.tail % l->journal_size,
			   vol->j.head - vol->j.tail);
	}
	nvmefs_vol_abandon(vol);
	for (int i = 0; i < 2; i++) {
		saved[i] = malloc(IMG_SIZE);
		CHECK(saved[i] != NULL);
		if (!saved[i])
			return test_result();
		io(i, false, 0, saved[i], IMG_SIZE);
	}

	for (unsigned t = 0; t < trials; t++) {
		unsigned kind = (unsigned)random() % (unsigned)(nregions + 1);
		const char *what;

		restore();
		if (kind == (unsigned)nregions) { /* a member cut short */
			int dev = (int)(random() % 2);
			uint64_t len =
				((uint64_t)random() % (IMG_SIZE / NVMEFS_BLOCK)) * NVMEFS_BLOCK;

			CHECK(truncate(img[dev], (off_t)len) == 0);
			dirty_dev = dev;
			dirty_lo = len;
			dirty_hi = IMG_SIZE;
			what = "truncated member";
		} else {
			const struct region *r = &regions[kind];
			unsigned flips = 1 + (unsigned)random() % 8;
			uint64_t at = r->off + (uint64_t)random() % r->len;
			uint8_t b;

			at -= at % NVMEFS_BLOCK; /* flips within one block */
			dirty_dev = r->dev;
			dirty_lo = at;
			dirty_hi = at + NVMEFS_BLOCK;
			for (unsigned k = 0; k < flips; k++) {
				uint64_t o = at + (uint64_t)random() % NVMEFS_BLOCK;

				io(r->dev, false, o, &b, 1);
				b ^= (uint8_t)(1u << (random() % 8));
				io(r->dev, true, o, &b, 1);
			}
			what = r->what;
		}
		nerr = 0;
		load_both(what, t);
		if (nerr)
			refused++;
		else
			loaded++;
		if (t % 10 == 0)
			run_fsck(what, t);
	}
	printf("%u trials: %u refused naming the member, %u loaded\n", trials, refused, loaded);
	restore();
	for (int i = 0; i < 2; i++)
		free(saved[i]);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	CHECK(system(cmd) == 0);
	return test_result();
}
