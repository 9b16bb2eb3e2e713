// SPDX-License-Identifier: MIT
/*
 * fs/core/journal.c, journal_load.c and meta.c through the library, on image files formatted
 * by mkfs.nvmefs: committed records survive an abandoned (killed) volume,
 * uncommitted ones do not; a torn last transaction ends the log without
 * harm and later commits continue after it; enough commits to wrap the
 * journal ring flush the store and lose nothing; space released by a
 * transaction is allocatable only after it commits; the free space a mount
 * takes from the FREE keys after a crash is the complement of the extents;
 * names are hashed with a key of each open's own, and readdir order
 * survives a flush.
 *
 * usage: test_journal BUILD_DIR   (for BUILD_DIR/mkfs.nvmefs)
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
#include "namei.h"
#include "alloc_i.h"
#include "journal_i.h"
#include "meta_i.h"
#include "volume_i.h"
#include "fault_i.h"
#include "nvmefs/util.h"
#include "icache_i.h"
#include "test_util.h"

static char dir[256], img[2][300], mkfs[512];

/* opts NULL: as the daemon mounts, reading inodes on demand. */
static struct nvmefs_vol *open_vol_opts(const struct nvmefs_vol_opts *opts)
{
	const char *paths[2] = {img[1], img[0]}; /* any order */
	struct nvmefs_vol *vol = NULL;
	int ret = nvmefs_vol_open(&vol, paths, 2, opts);

	CHECK_ERR(ret, 0);
	CHECK(ret || vol->shadow); /* main: NVMEFS_META_CROSSCHECK=1 */
	return ret ? NULL : vol;
}

static struct nvmefs_vol *open_vol(void)
{
	return open_vol_opts(NULL);
}

/* Every inode in memory: for checks that read the maps whole. */
static struct nvmefs_vol *open_vol_whole(void)
{
	return open_vol_opts(&(struct nvmefs_vol_opts){.resident = true});
}

/* Create a regular file named name in the root through the core's API
 * (closed at once; its reference given back). */
static int create(struct nvmefs_vol *vol, const char *name, uint64_t *ino)
{
	const struct nvmefs_cred root = {.uid = 0};
	struct nvmefs_inode *in;
	struct stat st;
	int ret = nvmefs_ns_create(vol, &root, NVMEFS_ROOT_INO, name, 0644, &st, &in);

	if (ret)
		return ret;
	*ino = st.st_ino;
	nvmefs_ns_release(vol, st.st_ino);
	nvmefs_ns_forget(vol, st.st_ino, 1);
	return 0;
}

static bool exists(struct nvmefs_vol *vol, const char *name)
{
	bool found;

	pthread_mutex_lock(&vol->lock);
	found = nvmefs_dir_find(vol, NVMEFS_ROOT_INO, name) != NULL;
	pthread_mutex_unlock(&vol->lock);
	return found;
}

static void test_commit_and_abandon(void)
{
	struct nvmefs_vol *vol = open_vol();
	uint64_t ino;

	if (!vol)
		return;
	CHECK_ERR(create(vol, "durable", &ino), 0);
	CHECK_ERR(nvmefs_journal_commit(vol), 0);
	CHECK_ERR(create(vol, "volatile", &ino), 0);
	nvmefs_vol_abandon(vol); /* kill -9: the open transaction is lost */
	vol = open_vol();
	if (!vol)
		return;
	CHECK(exists(vol, "durable"));
	CHECK(!exists(vol, "volatile"));
	CHECK_ERR(nvmefs_vol_close(vol), 0);
}

/* The entry hash as it was before it took a key (fs/core/meta.c): FNV-1a from
 * an offset basis mixed with the parent, the same for every volume. */
static uint64_t unkeyed_hash(uint64_t parent, const char *name)
{
	uint64_t h;

	parent ^= parent >> 33;
	parent *= 0xff51afd7ed558ccdull;
	h = 0xcbf29ce484222325ull ^ parent ^ (parent >> 33);
	for (; *name; name++) {
		h ^= (uint8_t)*name;
		h *= 0x100000001b3ull;
	}
	return h;
}

/* Names in readdir order of the root that start with 'k', at most max. */
static unsigned root_k_names(struct nvmefs_vol *vol, char (*out)[16], unsigned max)
{
	const struct nvmefs_dir *rd = nvmefs_iget(vol, NVMEFS_ROOT_INO)->dir;
	unsigned n = 0;

	for (size_t i = 0; i < rd->n && n < max; i++) {
		if (rd->v[i] && rd->v[i]->name[0] == 'k')
			snprintf(out[n++], sizeof(out[0]), "%s", rd->v[i]->name);
	}
	return n;
}

/* Names users choose are hashed with a key of the volume open's own: names
 * that all share one bucket under the unkeyed hash spread out, two opens
 * draw different keys, and readdir order, which a checkpoint keeps
 * whatever the key, survives a remount. */
static void test_name_hash(void)
{
	enum { N = 64 };
	struct nvmefs_vol *vol = open_vol();
	char names[N][16], again[N][16];
	unsigned *per_bucket, most = 0, n = 0;
	uint64_t seed, mask, ino;

	if (!vol)
		return;
	seed = vol->name_seed;
	mask = vol->dtab_size - 1;
	CHECKF(vol->ndirents + N < vol->dtab_size, "%zu buckets", vol->dtab_size);
	for (unsigned i = 0; n < N && i < 1u << 26; i++) {
		snprintf(names[n], sizeof(names[n]), "k%u", i);
		if ((unkeyed_hash(NVMEFS_ROOT_INO, names[n]) & mask) == 0)
			CHECK_ERR(create(vol, names[n++], &ino), 0);
	}
	CHECK(n == N);
	per_bucket = calloc(vol->dtab_size, sizeof(*per_bucket));
	for (size_t b = 0; per_bucket && b < vol->dtab_size; b++) {
		for (const struct nvmefs_dirent *d = vol->dtab[b]; d; d = d->hnext) {
			if (d->parent == NVMEFS_ROOT_INO && d->name[0] == 'k' &&
			    ++per_bucket[b] > most)
				most = per_bucket[b];
		}
	}
	free(per_bucket);
	/* Random keys: 9 or more of 64 in one of 1024 buckets is ~1e-14. */
	CHECKF(most >= 1 && most <= 8, "%u of %u names in one bucket", most, n);
	CHECK_ERR(nvmefs_vol_close(vol), 0); /* a checkpoint */
	vol = open_vol();
	if (!vol)
		return;
	CHECK(vol->name_seed != seed);
	CHECK(root_k_names(vol, again, N) == n);
	for (unsigned i = 0; i < n; i++)
		CHECKF(!strcmp(again[i], names[i]), "readdir: %s where %s was", again[i], names[i]);
	CHECK_ERR(nvmefs_vol_close(vol), 0);
}

/* Flip a byte inside the last transaction written, as a torn write would. */
static void tear(const struct nvmefs_label *l, uint64_t head_before)
{
	uint64_t off = l->meta_off + nvmefs_meta_journal_off(l) + head_before % l->journal_size;
	int fd = open(img[0], O_RDWR);
	uint8_t b;

	CHECK(fd >= 0);
	CHECK(pread(fd, &b, 1, (off_t)off + 100) == 1);
	b ^= 0x5a;
	CHECK(pwrite(fd, &b, 1, (off_t)off + 100) == 1);
	close(fd);
}

static void test_torn_tail(void)
{
	struct nvmefs_vol *vol = open_vol();
	struct nvmefs_label label;
	uint64_t ino, head;

	if (!vol)
		return;
	CHECK_ERR(create(vol, "a", &ino), 0);
	CHECK_ERR(nvmefs_journal_commit(vol), 0);
	head = vol->j.head;
	CHECK_ERR(create(vol, "b", &ino), 0);
	CHECK_ERR(nvmefs_journal_commit(vol), 0);
	CHECK(vol->j.head > head);
	label = vol->label;
	nvmefs_vol_abandon(vol);
	tear(&label, head);
	vol = open_vol();
	if (!vol)
		return;
	CHECK(exists(vol, "a"));
	CHECK(!exists(vol, "b")); /* the torn transaction is the end of the log */
	/* Later commits go where the torn one was and are found again. */
	CHECK_ERR(create(vol, "c", &ino), 0);
	CHECK_ERR(nvmefs_journal_commit(vol), 0);
	nvmefs_vol_abandon(vol);
	vol = open_vol();
	if (!vol)
		return;
	CHECK(exists(vol, "a") && exists(vol, "c") && !exists(vol, "b"));
	CHECK_ERR(nvmefs_vol_close(vol), 0);
}

static void test_wrap(void)
{
	struct nvmefs_vol *vol = open_vol();
	uint64_t ino, ckpt0, jsize;
	char name[32];
	unsigned n = 0;

	if (!vol)
		return;
	ckpt0 = vol->j.manifest_seq;
	jsize = vol->label.journal_size;
	/* Commit small transactions until the ring has gone round twice. */
	while (vol->j.head < 2 * jsize + 4096 && n < 200000) {
		snprintf(name, sizeof(name), "w%u", n++);
		CHECK_ERR(create(vol, name, &ino), 0);
		if (n % 8 == 0)
			CHECK_ERR(nvmefs_journal_commit(vol), 0);
	}
	CHECK_ERR(nvmefs_journal_commit(vol), 0);
	CHECKF(vol->j.manifest_seq >= ckpt0 + 3, "%llu flushes",
	       (unsigned long long)(vol->j.manifest_seq - ckpt0));
	nvmefs_vol_abandon(vol);
	vol = open_vol();
	if (!vol)
		return;
	for (unsigned i = 0; i < n; i += 97) {
		snprintf(name, sizeof(name), "w%u", i);
		CHECKF(exists(vol, name), "%s lost after %u files", name, n);
	}
	snprintf(name, sizeof(name), "w%u", n - 1);
	CHECK(exists(vol, name));
	CHECK_ERR(nvmefs_vol_close(vol), 0);
}

/* Released space is not reused before the release is durable. */
static void test_free_after_commit(void)
{
	struct nvmefs_vol *vol = open_vol();
	struct nvmefs_rec r = {.type = NVMEFS_REC_EXTENT};
	uint64_t ino, off, free0;

	if (!vol)
		return;
	CHECK_ERR(create(vol, "f", &ino), 0);
	pthread_mutex_lock(&vol->lock);
	free0 = vol->free_bytes;
	CHECK(nvmefs_alloc_get(vol, 0, 0, 1 << 20, &off) == 1 << 20);
	r.extent.ino = ino;
	r.extent.dev_off = off;
	r.extent.len = 1 << 20;
	CHECK_ERR(nvmefs_journal_log(vol, &r), 0);
	r = (struct nvmefs_rec){.type = NVMEFS_REC_PUNCH};
	r.punch.ino = ino;
	r.punch.len = UINT64_MAX;
	CHECK_ERR(nvmefs_journal_log(vol, &r), 0);
	CHECK(vol->free_bytes == free0 - (1 << 20)); /* still held */
	CHECK(vol->pending_bytes == 1 << 20);
	pthread_mutex_unlock(&vol->lock);
	CHECK_ERR(nvmefs_journal_commit(vol), 0);
	pthread_mutex_lock(&vol->lock);
	CHECK(vol->free_bytes == free0 && vol->pending_bytes == 0);
	pthread_mutex_unlock(&vol->lock);
	CHECK_ERR(nvmefs_vol_close(vol), 0);
}

/* Map len bytes at comp_off of slot of ino on fresh space (its member's
 * goal: right after what it holds), as a completed write logs it. */
static void map_ext(struct nvmefs_vol *vol, uint64_t ino, unsigned slot, uint64_t comp_off,
		    uint64_t len)
{
	struct nvmefs_rec r = {.type = NVMEFS_REC_EXTENT};
	struct nvmefs_inode *in;
	uint64_t off = 0, got;

	pthread_mutex_lock(&vol->lock);
	in = nvmefs_iget(vol, ino);
	got = nvmefs_alloc_get(vol, in->layout.devs[slot], 0, len, &off);
	CHECK(got == len);
	r.extent.ino = ino;
	r.extent.slot = slot;
	r.extent.comp_off = comp_off;
	r.extent.dev_off = off;
	r.extent.len = got;
	CHECK_ERR(nvmefs_journal_log(vol, &r), 0);
	pthread_mutex_unlock(&vol->lock);
}

static void punch(struct nvmefs_vol *vol, uint64_t ino, uint64_t off, uint64_t len)
{
	struct nvmefs_rec r = {.type = NVMEFS_REC_PUNCH};

	r.punch.ino = ino;
	r.punch.off = off;
	r.punch.len = len;
	pthread_mutex_lock(&vol->lock);
	CHECK_ERR(nvmefs_journal_log(vol, &r), 0);
	pthread_mutex_unlock(&vol->lock);
}

/* The free space the mount took from the FREE keys (vol->free, and the
 * durable map beside it) is the complement of every extent, range for
 * range: what nvmefs_alloc_rebuild would have built. */
static void check_free_is_complement(struct nvmefs_vol *vol, const char *when)
{
	struct nvmefs_freemap want[NVMEFS_MAX_DEVICES] = {0};
	uint64_t sum = 0;

	pthread_mutex_lock(&vol->lock);
	CHECK_ERR(nvmefs_alloc_complement(vol, want), 0);
	for (unsigned d = 0; d < vol->ndevs; d++) {
		const struct nvmefs_freemap *f = &vol->free[d], *k = &vol->dfree[d];

		CHECKF(f->n == want[d].n && !memcmp(f->v, want[d].v, f->n * sizeof(*f->v)),
		       "%s: member %u: %zu free ranges loaded, %zu from the extents", when, d, f->n,
		       want[d].n);
		CHECKF(k->n == want[d].n && !memcmp(k->v, want[d].v, k->n * sizeof(*k->v)),
		       "%s: member %u: durable map of %zu ranges, %zu from the extents", when, d,
		       k->n, want[d].n);
		for (size_t i = 0; i < want[d].n; i++)
			sum += want[d].v[i].len;
		nvmefs_freemap_exit(&want[d]);
	}
	CHECKF(vol->free_bytes == sum && vol->pending_bytes == 0, "%s: %llu free bytes, %llu", when,
	       (unsigned long long)vol->free_bytes, (unsigned long long)sum);
	pthread_mutex_unlock(&vol->lock);
}

/*
 * The free space survives a crash as FREE keys: files are created,
 * written (extents on both members, appends that extend a range's start
 * and files that interleave), punched, truncated and unlinked, one
 * unlinked while open (an orphan, reclaimed by the mount); part of it
 * flushed into a run, part only in the journal, part never committed.
 * After an abandon (kill -9) and a reopen, which replays the journal over
 * the keys, the free space is exactly the complement of the extents; and
 * again after the mount's own changes and a clean close.
 */
static void test_free_keys(void)
{
	const struct nvmefs_cred cred = {.uid = 0};
	struct nvmefs_vol *vol = open_vol();
	const uint64_t K = NVMEFS_BLOCK;
	uint64_t ino[6], orphan;
	struct nvmefs_inode *oin;
	struct stat st;
	char name[16];

	if (!vol)
		return;
	for (unsigned i = 0; i < 6; i++) {
		snprintf(name, sizeof(name), "free%u", i);
		CHECK_ERR(create(vol, name, &ino[i]), 0);
	}
	for (unsigned round = 0; round < 3; round++) { /* interleaved appends */
		for (unsigned i = 0; i < 6; i++) {
			map_ext(vol, ino[i], 0, round * 16 * K, (i + 1) * 4 * K);
			map_ext(vol, ino[i], 1, round * 16 * K, 8 * K);
		}
	}
	punch(vol, ino[0], 4 * K, 64 * K);	/* a hole */
	punch(vol, ino[1], 16 * K, UINT64_MAX); /* a truncate */
	CHECK_ERR(nvmefs_ns_unlink(vol, NVMEFS_ROOT_INO, "free2"), 0);
	CHECK_ERR(nvmefs_journal_checkpoint(vol, false), 0); /* into a run */
	map_ext(vol, ino[3], 0, 48 * K, 12 * K);
	punch(vol, ino[4], 0, 8 * K);
	CHECK_ERR(nvmefs_ns_unlink(vol, NVMEFS_ROOT_INO, "free5"), 0);
	CHECK_ERR(nvmefs_ns_create(vol, &cred, NVMEFS_ROOT_INO, "open", 0644, &st, &oin), 0);
	orphan = st.st_ino;
	map_ext(vol, orphan, 0, 0, 20 * K);
	map_ext(vol, orphan, 1, 0, 12 * K);
	CHECK_ERR(nvmefs_ns_unlink(vol, NVMEFS_ROOT_INO, "open"), 0); /* open: an orphan */
	CHECK_ERR(nvmefs_journal_commit(vol), 0);		      /* in the journal only */
	map_ext(vol, ino[3], 1, 48 * K, 4 * K);			      /* lost in the crash */
	punch(vol, ino[0], 0, UINT64_MAX);
	nvmefs_vol_abandon(vol);

	vol = open_vol_whole(); /* the complement needs every extent in memory */
	if (!vol)
		return;
	CHECK(nvmefs_iget(vol, orphan) == NULL); /* reclaimed by the mount */
	check_free_is_complement(vol, "after the crash");
	punch(vol, ino[3], 0, UINT64_MAX);
	map_ext(vol, ino[4], 0, 0, 8 * K);
	CHECK_ERR(nvmefs_vol_close(vol), 0);
	vol = open_vol_whole();
	if (!vol)
		return;
	check_free_is_complement(vol, "after a clean close");
	CHECK_ERR(nvmefs_vol_close(vol), 0);
}

/*
 * Attributes changed in memory (nvmefs_inode_dirty) go out at the next
 * commit, except for inodes freed before it. The dirty list is doubly
 * linked; free the newest, a middle and the oldest of six dirty inodes, and
 * the other three must still reach the journal (their new mtime survives
 * an abandon) while the freed ones are gone.
 */
static void test_dirty_list(void)
{
	struct nvmefs_vol *vol = open_vol();
	const unsigned n = 6, freed[] = {0, 2, 5}; /* oldest, middle, newest */
	uint64_t ino[6];
	char name[16];

	if (!vol)
		return;
	for (unsigned i = 0; i < n; i++) {
		snprintf(name, sizeof(name), "d%u", i);
		CHECK_ERR(create(vol, name, &ino[i]), 0);
	}
	CHECK_ERR(nvmefs_journal_commit(vol), 0);
	pthread_mutex_lock(&vol->lock);
	for (unsigned i = 0; i < n; i++) {
		struct nvmefs_inode *in = nvmefs_iget(vol, ino[i]);

		in->mtime.tv_sec = 1000 + i;
		nvmefs_inode_dirty(vol, in);
		nvmefs_inode_dirty(vol, in); /* twice: still once on the list */
	}
	for (unsigned k = 0; k < sizeof(freed) / sizeof(freed[0]); k++) {
		struct nvmefs_rec r = {.type = NVMEFS_REC_DIRENT_DEL};

		snprintf(name, sizeof(name), "d%u", freed[k]);
		r.dirent.parent = NVMEFS_ROOT_INO;
		r.dirent.child = ino[freed[k]];
		r.dirent.name = name;
		r.dirent.name_len = (uint16_t)strlen(name);
		CHECK_ERR(nvmefs_journal_log(vol, &r), 0);
		r = (struct nvmefs_rec){.type = NVMEFS_REC_INODE_FREE};
		r.ino.ino = ino[freed[k]];
		CHECK_ERR(nvmefs_journal_log(vol, &r), 0);
	}
	pthread_mutex_unlock(&vol->lock);
	CHECK_ERR(nvmefs_journal_commit(vol), 0);
	CHECK(vol->dirty == NULL);
	nvmefs_vol_abandon(vol);
	vol = open_vol();
	if (!vol)
		return;
	pthread_mutex_lock(&vol->lock);
	for (unsigned i = 0; i < n; i++) {
		struct nvmefs_inode *in = nvmefs_iget(vol, ino[i]);
		bool gone = i == freed[0] || i == freed[1] || i == freed[2];

		snprintf(name, sizeof(name), "d%u", i);
		CHECKF(gone == !nvmefs_dir_find(vol, NVMEFS_ROOT_INO, name), "%s", name);
		if (!gone)
			CHECKF(in && in->mtime.tv_sec == 1000 + i, "%s: mtime %lld", name,
			       in ? (long long)in->mtime.tv_sec : -1LL);
	}
	pthread_mutex_unlock(&vol->lock);
	CHECK_ERR(nvmefs_vol_close(vol), 0);
}

static int pad_pipe[2];

static void pad_report(const struct nvmefs_powerloss_report *r)
{
	CHECK(write(pad_pipe[1], r, sizeof(*r)) == (ssize_t)sizeof(*r));
	_exit(0);
}

/*
 * A transaction that must wrap goes to the ring's start after a pad block,
 * and replay reaches it only through the pad: when the transaction's write
 * starts, the pad must already be durable, or a power cut could keep the
 * transaction without the pad, which the loader takes for damage. Checked
 * with the power-loss recorder (in a child: the cut ends it): cut at the
 * write after the pad, and nothing may be unflushed.
 */
static void test_pad_durable(void)
{
	struct nvmefs_powerloss_report r = {.unflushed = 99};
	pid_t pid;
	int st;

	CHECK(pipe(pad_pipe) == 0);
	pid = fork();
	if (pid == 0) {
		struct nvmefs_powerloss o = {.seed = 1};
		struct nvmefs_vol *vol = open_vol();
		uint64_t jsize, ino;
		char name[32];
		unsigned n = 0;

		close(pad_pipe[0]);
		if (!vol || nvmefs_powerloss_record(vol->set))
			_exit(2);
		jsize = vol->label.journal_size;
		/* One-block transactions until one block is left before the end. */
		while (vol->j.head % jsize != jsize - NVMEFS_BLOCK) {
			snprintf(name, sizeof(name), "p%u", n++);
			if (create(vol, name, &ino) || nvmefs_journal_commit(vol))
				_exit(3);
		}
		/* A flush now, so that the next commit is a transaction alone
		 * (no flush after it) of several blocks: the pad, then it. */
		if (nvmefs_journal_checkpoint(vol, false))
			_exit(7);
		for (unsigned k = 0; k < 64; k++) {
			snprintf(name, sizeof(name), "q%u", k);
			if (create(vol, name, &ino))
				_exit(4);
		}
		if (nvmefs_powerloss_after(1, &o, pad_report))
			_exit(5);
		nvmefs_journal_commit(vol);
		_exit(6); /* no cut: the pad was not written? */
	}
	close(pad_pipe[1]);
	CHECK(read(pad_pipe[0], &r, sizeof(r)) == (ssize_t)sizeof(r));
	close(pad_pipe[0]);
	CHECK(waitpid(pid, &st, 0) == pid);
	CHECKF(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child status %#x", st);
	CHECKF(r.unflushed == 0,
	       "%llu write(s) unflushed when the transaction after the pad started",
	       (unsigned long long)r.unflushed);
}

static bool count_entry(void *arg, const char *name, uint64_t ino, mode_t mode, off_t next,
			const struct stat *st)
{
	(void)ino, (void)mode, (void)next, (void)st;
	if (name[0] != '.')
		(*(unsigned *)arg)++;
	return true;
}

/* A mount reads only the root; inodes, a directory's entries and a file's
 * extents come from the store when first asked for, as they were. */
static void test_on_demand(void)
{
	const struct nvmefs_cred root = {.uid = 0};
	struct nvmefs_vol *vol = open_vol();
	struct stat st, big;
	struct nvmefs_inode *in;
	uint64_t od, ino = 0;
	unsigned n = 0;
	uint64_t free0;
	size_t ninodes;

	if (!vol)
		return;
	free0 = vol->free_bytes;
	CHECK_ERR(nvmefs_ns_mknod(vol, &root, NVMEFS_ROOT_INO, "od", S_IFDIR | 0755, 0, NULL, &st),
		  0);
	od = st.st_ino;
	for (int i = 0; i < 40; i++) {
		char name[16];

		snprintf(name, sizeof(name), "f%d", i);
		CHECK_ERR(nvmefs_ns_create(vol, &root, od, name, 0644, &st, &in), 0);
		if (i == 7) {
			ino = st.st_ino;
			CHECK_ERR(nvmefs_ns_fallocate(vol, ino, 0, 0, 1 << 20), 0);
		}
		nvmefs_ns_release(vol, st.st_ino);
	}
	CHECK_ERR(nvmefs_ns_getattr(vol, ino, &big), 0);
	CHECK(big.st_blocks == (1 << 20) / 512);
	ninodes = vol->ninodes;
	CHECK_ERR(nvmefs_vol_close(vol), 0);

	vol = open_vol();
	if (!vol)
		return;
	CHECK(!vol->resident && vol->ncached == 1 && vol->ninodes == ninodes);
	/* tables sized for a full cache: no growth (a rehash of every chain
	 * under meta) while it fills */
	CHECK(vol->itab_size * 512 >= NVMEFS_META_CACHE_DEFAULT &&
	      vol->dtab_size == vol->itab_size);
	CHECK_ERR(nvmefs_ns_lookup(vol, NVMEFS_ROOT_INO, "od", &st), 0);
	CHECK(st.st_ino == od && vol->ncached == 2);
	CHECK(!nvmefs_iget(vol, od)->dir->loaded && nvmefs_iget(vol, od)->dir->live == 40);
	CHECK_ERR(nvmefs_ns_lookup(vol, od, "f7", &st), 0);
	CHECK(nvmefs_iget(vol, od)->dir->loaded && vol->ncached == 3);
	CHECK(st.st_ino == ino && st.st_blocks == big.st_blocks && st.st_size == big.st_size);
	CHECK(!nvmefs_iget(vol, ino)->ext_loaded);
	CHECK_ERR(nvmefs_ns_open(vol, ino, O_RDONLY, &in), 0);
	CHECK(in->ext_loaded && in->alloc_bytes == 1 << 20);
	/* Each slot's map as large as what it holds: a million cached files
	 * keep theirs (nvmefs_grow's first 16 were 512 bytes a slot). */
	for (unsigned s = 0; s < in->layout.stripe_count; s++)
		CHECK(in->slots[s].cap == in->slots[s].n);
	nvmefs_ns_release(vol, ino);
	CHECK_ERR(nvmefs_ns_readdir(vol, od, 0, false, NULL, count_entry, &n), 0);
	CHECK(n == 40);
	CHECK_ERR(nvmefs_ns_lookup(vol, od, "nope", &st), -ENOENT);
	CHECK_ERR(nvmefs_ns_unlink(vol, od, "f3"), 0);
	CHECK_ERR(nvmefs_ns_unlink(vol, od, "f7"), 0); /* frees its extents */
	pthread_mutex_lock(&vol->lock);
	CHECK_ERR(nvmefs_meta_crosscheck(vol), 0);
	pthread_mutex_unlock(&vol->lock);
	CHECK_ERR(nvmefs_journal_commit(vol), 0);
	nvmefs_vol_abandon(vol); /* replay reads what each record needs */

	vol = open_vol();
	if (!vol)
		return;
	CHECK(!vol->resident && vol->ninodes == ninodes - 2);
	CHECK_ERR(nvmefs_ns_lookup(vol, od, "f7", &st), -ENOENT);
	n = 0;
	CHECK_ERR(nvmefs_ns_readdir(vol, od, 0, true, NULL, count_entry, &n), 0);
	CHECK(n == 38);
	CHECK(vol->free_bytes == free0); /* the fallocated MiB is free again */
	CHECK_ERR(nvmefs_vol_close(vol), 0);

	/* -o meta_cache=0: nothing unused stays; all of it reads again. */
	vol = open_vol_opts(&(struct nvmefs_vol_opts){.meta_cache = 1});
	if (!vol)
		return;
	for (int round = 0; round < 2; round++) {
		n = 0;
		CHECK_ERR(nvmefs_ns_lookup(vol, NVMEFS_ROOT_INO, "od", &st), 0);
		CHECK_ERR(nvmefs_ns_readdir(vol, od, 0, true, NULL, count_entry, &n), 0);
		CHECK(n == 38u + (unsigned)round);
		CHECK_ERR(nvmefs_ns_create(vol, &root, od, round ? "new1" : "new0", 0644, &st, &in),
			  0);
		CHECK_ERR(nvmefs_ns_fallocate(vol, st.st_ino, 0, 0, 1 << 16), 0);
		nvmefs_ns_release(vol, st.st_ino);
		CHECK_ERR(nvmefs_journal_commit(vol), 0); /* nothing dirty pins it now */
		pthread_mutex_lock(&vol->lock);
		CHECK_ERR(nvmefs_meta_crosscheck(vol), 0);
		nvmefs_icache_shrink(vol, vol->itab_size);
		/* the root and its entries */
		CHECKF(vol->ncached == 1 &&
			       vol->ndirents == nvmefs_iget(vol, NVMEFS_ROOT_INO)->dir->live,
		       "%zu inodes, %zu entries in memory", vol->ncached, vol->ndirents);
		pthread_mutex_unlock(&vol->lock);
	}
	CHECK(vol->cache.evictions > 0 && vol->cache.loads > 3);
	CHECK_ERR(nvmefs_ns_lookup(vol, od, "new1", &st), 0);
	CHECK(st.st_blocks == (1 << 16) / 512);
	CHECK_ERR(nvmefs_ns_unlink(vol, od, "new0"), 0);
	CHECK_ERR(nvmefs_vol_close(vol), 0);
}

int main(int argc, char **argv)
{
	const char *base = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
	char cmd[2048];

	if (argc < 2)
		TEST_SKIP("usage: test_journal BUILD_DIR");
	/* The shadow store on in every volume opened here: format v2's keys
	 * checked against the maps at every commit and close (a difference
	 * aborts). */
	setenv("NVMEFS_META_CROSSCHECK", "1", 1);
	snprintf(mkfs, sizeof(mkfs), "%s/mkfs.nvmefs", argv[1]);
	if (access(mkfs, X_OK))
		TEST_SKIP("%s not built", mkfs);
	snprintf(dir, sizeof(dir), "%s/test_journal.XXXXXX", base);
	if (!mkdtemp(dir))
		TEST_SKIP("mkdtemp in %s failed", base);
	for (int i = 0; i < 2; i++) {
		snprintf(img[i], sizeof(img[i]), "%s/d%d.img", dir, i);
		snprintf(cmd, sizeof(cmd), "truncate -s 64M %s", img[i]);
		CHECK(system(cmd) == 0);
	}
	snprintf(cmd, sizeof(cmd), "%s -q %s %s >/dev/null", mkfs, img[0], img[1]);
	CHECK(system(cmd) == 0);
	nvmefs_log_set_level(NVMEFS_LOG_WARN);
	test_name_hash(); /* first: on a near-empty root */
	test_commit_and_abandon();
	test_torn_tail();
	test_wrap();
	test_free_after_commit();
	test_free_keys();
	test_dirty_list();
	test_pad_durable();
	test_on_demand();
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	CHECK(system(cmd) == 0);
	return test_result();
}
