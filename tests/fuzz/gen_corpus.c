// SPDX-License-Identifier: MIT
/*
 * Writes the fuzzers' seed corpus with the real encoders (and, for the
 * loader's images, the real journal and store writers on the harness's
 * memfd: format v2's metadata area): valid labels and superblocks, and the
 * label checks' regressions in format v2; transactions whose records cover
 * every record type (an inode of each file type, a symlink target, entries
 * added and removed, extents written, unwritten, merged, split and punched,
 * xattrs set, replaced and removed, orphans added and removed, inodes
 * freed) and apply cleanly, which is checked here against a model volume.
 * Block-structured inputs are cut after their last non-zero byte (the
 * harnesses pad with zeros), so the corpus stays small.
 *
 * For fuzz_wire: messages of the native protocol, each after a table of
 * registrations (fuzz_wire.h): every message type either side receives,
 * true requests of each op, one entry failing each check, a full batch.
 *
 * For fuzz_values: a key and value of every kind of format v2, with the
 * longest name, symlink target and xattr value.
 *
 * usage: gen_corpus OUTDIR
 *   (creates OUTDIR/{label,journal,load,wire,sorted,manifest,runr,values}/)
 */
#include <dirent.h>
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "fuzz_vol.h"
#include "fuzz_wire.h"
#include "runs_i.h"
#include "sorted_i.h"
#include "store.h"
#include "store.h"

#define MAX_RECS    256
#define MANY_FILES  12
#define CHURN_NAMES 20
#define KIB	    1024ull
#define MIB	    (1024 * KIB)

static const char *outdir;

static void die(const char *what, int err)
{
	fprintf(stderr, "gen_corpus: %s: %s\n", what, strerror(err < 0 ? -err : err));
	exit(1);
}

/* Write OUTDIR/sub/name; with trim, cut after its last non-zero byte (for
 * block-structured inputs, which the harnesses pad with zeros). */
static void save_file(const char *sub, const char *name, const uint8_t *buf, size_t len, bool trim)
{
	char path[4096];
	int fd;

	while (trim && len > 1 && buf[len - 1] == 0)
		len--;
	snprintf(path, sizeof(path), "%s/%s", outdir, sub);
	if (mkdir(path, 0755) && errno != EEXIST)
		die(path, errno);
	snprintf(path, sizeof(path), "%s/%s/%s", outdir, sub, name);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd < 0)
		die(path, errno);
	if (write(fd, buf, len) != (ssize_t)len)
		die(path, EIO);
	close(fd);
}

static void save(const char *sub, const char *name, const uint8_t *buf, size_t len)
{
	save_file(sub, name, buf, len, true);
}

/* ---- records ---- */

struct recs {
	struct nvmefs_rec v[MAX_RECS];
	size_t n;
};

static struct nvmefs_rec *add(struct recs *rs, uint16_t type)
{
	struct nvmefs_rec *r;

	if (rs->n == MAX_RECS)
		die("too many records", ENOSPC);
	r = &rs->v[rs->n++];
	memset(r, 0, sizeof(*r));
	r->type = type;
	return r;
}

static void inode(struct recs *rs, uint64_t ino, uint32_t mode, uint32_t nlink, uint64_t size)
{
	struct nvmefs_rec *r = add(rs, NVMEFS_REC_INODE);
	struct nvmefs_time t = {1700000000 + (int64_t)ino, (uint32_t)ino * 1000};

	r->inode.ino = ino;
	r->inode.mode = mode;
	r->inode.uid = 1000;
	r->inode.gid = 1000;
	r->inode.nlink = nlink;
	r->inode.size = size;
	r->inode.atime = r->inode.mtime = r->inode.ctime = r->inode.crtime = t;
}

/* A regular file striped over count members from first, or a change of
 * one's attributes (same layout). */
static void file(struct recs *rs, uint64_t ino, uint32_t nlink, uint64_t size, uint32_t chunk,
		 unsigned count, unsigned first)
{
	struct nvmefs_rec *r;

	inode(rs, ino, S_IFREG | 0644, nlink, size);
	r = &rs->v[rs->n - 1];
	r->inode.layout.chunk_size = chunk;
	r->inode.layout.stripe_count = count;
	for (unsigned s = 0; s < count; s++)
		r->inode.layout.devs[s] = (uint8_t)((first + s) % FUZZ_NDEVS);
}

static void symlink_(struct recs *rs, uint64_t ino, const char *target)
{
	struct nvmefs_rec *r;

	inode(rs, ino, S_IFLNK | 0777, 1, strlen(target));
	r = &rs->v[rs->n - 1];
	r->inode.target = target;
	r->inode.target_len = (uint16_t)strlen(target);
}

static void dirent(struct recs *rs, uint16_t type, uint64_t parent, const char *name,
		   uint64_t child, uint8_t dt)
{
	struct nvmefs_rec *r = add(rs, type);

	r->dirent.parent = parent;
	r->dirent.child = child;
	r->dirent.type = dt;
	r->dirent.name = name;
	r->dirent.name_len = (uint16_t)strlen(name);
}

static void extent(struct recs *rs, uint64_t ino, uint32_t slot, uint64_t comp_off,
		   uint64_t dev_off, uint64_t len, uint32_t flags)
{
	struct nvmefs_rec *r = add(rs, NVMEFS_REC_EXTENT);

	r->extent.ino = ino;
	r->extent.slot = slot;
	r->extent.comp_off = comp_off;
	r->extent.dev_off = dev_off;
	r->extent.len = len;
	r->extent.flags = flags;
}

static void punch(struct recs *rs, uint64_t ino, uint64_t off, uint64_t len)
{
	struct nvmefs_rec *r = add(rs, NVMEFS_REC_PUNCH);

	r->punch.ino = ino;
	r->punch.off = off;
	r->punch.len = len;
}

static void xattr(struct recs *rs, uint16_t type, uint64_t ino, const char *name, const void *value,
		  uint32_t value_len)
{
	struct nvmefs_rec *r = add(rs, type);

	r->xattr.ino = ino;
	r->xattr.name = name;
	r->xattr.name_len = (uint16_t)strlen(name);
	r->xattr.value = value;
	r->xattr.value_len = value_len;
}

static void ino_rec(struct recs *rs, uint16_t type, uint64_t ino)
{
	add(rs, type)->ino.ino = ino;
}

/* Every record type, on top of the root mkfs creates. Leaves inode 9 an
 * orphan (unlinked while open) for mount to reclaim. */
static void scenario_all(struct recs *rs)
{
	const uint64_t d0 = FUZZ_DATA_START;

	inode(rs, 1, S_IFDIR | 0755, 3, 0);
	inode(rs, 2, S_IFDIR | 0750, 2, 0);
	dirent(rs, NVMEFS_REC_DIRENT_ADD, 1, "sub", 2, DT_DIR);
	file(rs, 3, 1, 300 * KIB, 64 * KIB, 4, 0);
	dirent(rs, NVMEFS_REC_DIRENT_ADD, 2, "file", 3, DT_REG);
	extent(rs, 3, 0, 0, d0, 64 * KIB, 0);
	extent(rs, 3, 0, 64 * KIB, d0 + 64 * KIB, 64 * KIB, 0); /* merges */
	extent(rs, 3, 1, 0, d0, 64 * KIB, 0);
	extent(rs, 3, 2, 0, d0, 64 * KIB, 0);
	extent(rs, 3, 3, 0, d0, 64 * KIB, NVMEFS_EXT_UNWRITTEN);
	extent(rs, 3, 3, 0, d0, 4 * KIB, 0); /* written over unwritten */
	punch(rs, 3, 4 * KIB, 8 * KIB);	     /* splits slot 0's extent */
	symlink_(rs, 4, "sub/file");
	dirent(rs, NVMEFS_REC_DIRENT_ADD, 1, "link", 4, DT_LNK);
	inode(rs, 5, S_IFIFO | 0600, 1, 0);
	dirent(rs, NVMEFS_REC_DIRENT_ADD, 1, "fifo", 5, DT_FIFO);
	inode(rs, 6, S_IFSOCK | 0755, 1, 0);
	dirent(rs, NVMEFS_REC_DIRENT_ADD, 1, "sock", 6, DT_SOCK);
	inode(rs, 7, S_IFCHR | 0666, 1, 0);
	rs->v[rs->n - 1].inode.rdev = makedev(1, 3);
	dirent(rs, NVMEFS_REC_DIRENT_ADD, 1, "null", 7, DT_CHR);
	inode(rs, 8, S_IFBLK | 0660, 1, 0);
	rs->v[rs->n - 1].inode.rdev = makedev(7, 0);
	dirent(rs, NVMEFS_REC_DIRENT_ADD, 2, "loop0", 8, DT_BLK);
	xattr(rs, NVMEFS_REC_XATTR_SET, 3, "user.note", "hello", 5);
	xattr(rs, NVMEFS_REC_XATTR_SET, 2, "user.empty", "", 0);
	xattr(rs, NVMEFS_REC_XATTR_SET, 3, "user.note", "replaced", 8);
	xattr(rs, NVMEFS_REC_XATTR_SET, 3, "trusted.gone", "x", 1);
	xattr(rs, NVMEFS_REC_XATTR_DEL, 3, "trusted.gone", NULL, 0);
	dirent(rs, NVMEFS_REC_DIRENT_ADD, 1, "hard", 3, DT_REG);
	file(rs, 3, 2, 300 * KIB, 64 * KIB, 4, 0);
	dirent(rs, NVMEFS_REC_DIRENT_DEL, 1, "fifo", 5, DT_FIFO);
	inode(rs, 5, S_IFIFO | 0600, 0, 0);
	ino_rec(rs, NVMEFS_REC_INODE_FREE, 5);
	/* Unlinked while open: an orphan at the crash. */
	file(rs, 9, 1, 8 * KIB, 4 * KIB, 2, 2);
	dirent(rs, NVMEFS_REC_DIRENT_ADD, 1, "open", 9, DT_REG);
	extent(rs, 9, 0, 0, 2 * MIB, 4 * KIB, 0);
	extent(rs, 9, 1, 0, 2 * MIB, 4 * KIB, 0);
	dirent(rs, NVMEFS_REC_DIRENT_DEL, 1, "open", 9, DT_REG);
	file(rs, 9, 0, 8 * KIB, 4 * KIB, 2, 2);
	ino_rec(rs, NVMEFS_REC_ORPHAN_ADD, 9);
	/* Unlinked while open and closed again. */
	file(rs, 10, 0, 0, 64 * KIB, 1, 1);
	xattr(rs, NVMEFS_REC_XATTR_SET, 10, "user.tag", "t", 1);
	ino_rec(rs, NVMEFS_REC_ORPHAN_ADD, 10);
	ino_rec(rs, NVMEFS_REC_ORPHAN_DEL, 10);
	ino_rec(rs, NVMEFS_REC_INODE_FREE, 10);
	/* Truncate: punch to the end, then the size. */
	punch(rs, 3, 128 * KIB, UINT64_MAX);
	file(rs, 3, 2, 128 * KIB, 64 * KIB, 4, 0);
}

static char many_names[MANY_FILES][8];
static char churn_names[CHURN_NAMES][8];

/* Files f000... in sub/, 64 KiB each on one member, rotating. */
static void scenario_many(struct recs *rs, unsigned from, unsigned to)
{
	for (unsigned k = from; k < to; k++) {
		uint64_t ino = 100 + k;

		snprintf(many_names[k], sizeof(many_names[k]), "f%03u", k);
		file(rs, ino, 1, 64 * KIB, 64 * KIB, FUZZ_NDEVS, k);
		dirent(rs, NVMEFS_REC_DIRENT_ADD, 2, many_names[k], ino, DT_REG);
		extent(rs, ino, 0, 0, 8 * MIB + k * 64 * KIB, 64 * KIB, 0);
	}
}

static size_t encode(const struct recs *rs, size_t from, size_t to, uint8_t *buf)
{
	size_t len = 0;

	for (size_t i = from; i < to; i++)
		len += nvmefs_rec_encode(&rs->v[i], buf + len);
	return len;
}

/* Apply records [from, to) to vol as replay would; they must all apply. */
static void apply(struct nvmefs_vol *vol, const struct recs *rs, size_t from, size_t to)
{
	vol->replaying = true;
	for (size_t i = from; i < to; i++) {
		int ret = nvmefs_meta_apply(vol, &rs->v[i]);

		if (ret) {
			fprintf(stderr, "gen_corpus: record %zu (type %u) does not apply\n", i,
				rs->v[i].type);
			die("scenario", ret);
		}
	}
	vol->replaying = false;
}

static struct nvmefs_vol *model(void)
{
	struct nvmefs_vol *vol = fuzz_vol_create(false);

	if (!vol || fuzz_vol_add_root(vol))
		die("model volume", ENOMEM);
	return vol;
}

/* The model must verify and rebuild as a mount would. */
static void check_model(struct nvmefs_vol *vol)
{
	int ret = nvmefs_meta_verify(vol);

	if (!ret)
		ret = nvmefs_alloc_rebuild(vol);
	if (ret)
		die("model volume does not verify", ret);
}

/* ---- label/ ---- */

static void gen_labels(void)
{
	uint8_t blk[NVMEFS_BLOCK];
	struct nvmefs_label l;
	struct nvmefs_super s = {0};

	fuzz_label_init(&l, 0);
	nvmefs_label_encode(&l, blk);
	save("label", "member0", blk, sizeof(blk));
	fuzz_label_init(&l, 3);
	nvmefs_label_encode(&l, blk);
	save("label", "member3", blk, sizeof(blk));
	/* Another shape: 3 members, 4 KiB chunks, a longer name. */
	fuzz_label_init(&l, 1);
	snprintf(l.name, sizeof(l.name), "scratch volume");
	l.count = 3;
	l.chunk_size = 4096;
	l.dev_size[3] = 0;
	nvmefs_label_encode(&l, blk);
	save("label", "member1_of_3", blk, sizeof(blk));

	/* The label checks' regressions (README.md), in format v2: a run
	 * area and journal whose sum wraps around to meta_size; a metadata
	 * area at 0, over the label. Both must be refused. */
	fuzz_label_init(&l, 0);
	l.journal_size = (uint64_t)0 - 8 * NVMEFS_BLOCK;
	l.runs_size = l.meta_size - 2 * NVMEFS_BLOCK + 8 * NVMEFS_BLOCK;
	nvmefs_label_encode(&l, blk);
	if (nvmefs_label_decode(&l, blk) != -EINVAL)
		die("regress-runs-size-overflow is accepted", EINVAL);
	save("label", "regress-runs-size-overflow", blk, sizeof(blk));
	fuzz_label_init(&l, 0);
	l.meta_off = 0;
	nvmefs_label_encode(&l, blk);
	if (nvmefs_label_decode(&l, blk) != -EINVAL)
		die("regress-area-over-label is accepted", EINVAL);
	save("label", "regress-area-over-label", blk, sizeof(blk));

	memcpy(s.uuid, fuzz_uuid, 16);
	s.seq = 1;
	s.manifest_floor = 1;
	s.clean = 1;
	nvmefs_super_encode(&s, blk);
	save("label", "super_clean", blk, sizeof(blk));
	s.seq = 7;
	s.manifest_floor = 5;
	s.clean = 0;
	nvmefs_super_encode(&s, blk);
	save("label", "super_unclean", blk, sizeof(blk));
}

/* ---- journal/ ---- */

/* Encode a transaction of payload [p, p + plen) at ring + off; returns its
 * size in bytes. */
static size_t put_txn(uint8_t *ring, size_t off, uint64_t seq, const uint8_t *p, size_t plen)
{
	struct nvmefs_txn t = {.seq = seq};
	size_t bytes = (NVMEFS_TXN_HDR + plen + NVMEFS_BLOCK - 1) / NVMEFS_BLOCK * NVMEFS_BLOCK;

	t.nblocks = (uint32_t)(bytes / NVMEFS_BLOCK);
	t.payload_len = (uint32_t)plen;
	memset(ring + off, 0, bytes);
	memcpy(ring + off + NVMEFS_TXN_HDR, p, plen);
	nvmefs_txn_encode(&t, fuzz_uuid, ring + off);
	return bytes;
}

static size_t put_pad(uint8_t *ring, size_t off, uint64_t seq)
{
	struct nvmefs_txn t = {.seq = seq, .nblocks = 1, .pad = 1};

	memset(ring + off, 0, NVMEFS_BLOCK);
	nvmefs_txn_encode(&t, fuzz_uuid, ring + off);
	return NVMEFS_BLOCK;
}

/* Save records as one mode-2 (bare stream) input. */
static void save_stream(const char *sub, const char *name, uint8_t mode, const struct recs *rs,
			size_t from, size_t to)
{
	static uint8_t buf[1 + 64 * KIB];

	buf[0] = mode;
	save_file(sub, name, buf, 1 + encode(rs, from, to, buf + 1), false);
}

static void gen_journal(void)
{
	static uint8_t in[1 + 8 * NVMEFS_BLOCK], pay[4 * NVMEFS_BLOCK];
	uint8_t *ring = in + 1;
	struct nvmefs_vol *vol = model();
	struct recs rs = {.n = 0};
	size_t third, off = 0, plen;
	uint64_t seq = FUZZ_FIRST_TXN;

	scenario_all(&rs);
	apply(vol, &rs, 0, rs.n);
	check_model(vol);
	fuzz_vol_destroy(vol);
	third = rs.n / 3;

	/* A ring from block 0: three transactions, then a pad to the end. */
	memset(in, 0, sizeof(in));
	in[0] = 0;
	plen = encode(&rs, 0, third, pay);
	off += put_txn(ring, off, seq++, pay, plen);
	plen = encode(&rs, third, 2 * third, pay);
	off += put_txn(ring, off, seq++, pay, plen);
	plen = encode(&rs, 2 * third, rs.n, pay);
	off += put_txn(ring, off, seq++, pay, plen);
	off += put_pad(ring, off, seq++);
	save("journal", "ring_all", in, 1 + off);

	/* A ring of 4 blocks starting at block 2: one transaction, a pad at
	 * the ring's end, the rest wrapped to its start. */
	memset(in, 0, sizeof(in));
	in[0] = 2 << 2;
	seq = FUZZ_FIRST_TXN;
	plen = encode(&rs, 0, third, pay);
	if (put_txn(ring, 2 * NVMEFS_BLOCK, seq++, pay, plen) != NVMEFS_BLOCK)
		die("ring_wrap: first transaction is not one block", EINVAL);
	put_pad(ring, 3 * NVMEFS_BLOCK, seq++);
	plen = encode(&rs, third, rs.n, pay);
	if (put_txn(ring, 0, seq++, pay, plen) > 2 * NVMEFS_BLOCK)
		die("ring_wrap: second transaction is over two blocks", EINVAL);
	save("journal", "ring_wrap", in, 1 + 4 * NVMEFS_BLOCK);

	/* Bare streams: the whole scenario, and small ones per feature. */
	save_stream("journal", "stream_all", 2, &rs, 0, rs.n);
	rs.n = 0;
	inode(&rs, 2, S_IFDIR | 0755, 2, 0);
	dirent(&rs, NVMEFS_REC_DIRENT_ADD, 1, "d", 2, DT_DIR);
	save_stream("journal", "stream_mkdir", 2, &rs, 0, rs.n);
	rs.n = 0;
	file(&rs, 2, 1, 12 * KIB, 4 * KIB, 3, 1);
	dirent(&rs, NVMEFS_REC_DIRENT_ADD, 1, "f", 2, DT_REG);
	extent(&rs, 2, 0, 0, FUZZ_DATA_START, 4 * KIB, 0);
	extent(&rs, 2, 1, 0, FUZZ_DATA_START, 4 * KIB, NVMEFS_EXT_UNWRITTEN);
	extent(&rs, 2, 2, 0, FUZZ_DATA_START, 4 * KIB, 0);
	punch(&rs, 2, 4 * KIB, 4 * KIB);
	save_stream("journal", "stream_extents", 2, &rs, 0, rs.n);
	rs.n = 0;
	symlink_(&rs, 2, "/etc/passwd");
	dirent(&rs, NVMEFS_REC_DIRENT_ADD, 1, "l", 2, DT_LNK);
	xattr(&rs, NVMEFS_REC_XATTR_SET, 1, "user.a", "1", 1);
	xattr(&rs, NVMEFS_REC_XATTR_SET, 2, "user.b", "22", 2);
	xattr(&rs, NVMEFS_REC_XATTR_DEL, 1, "user.a", NULL, 0);
	save_stream("journal", "stream_symlink_xattr", 2, &rs, 0, rs.n);
	rs.n = 0;
	file(&rs, 2, 1, 4 * KIB, 4 * KIB, 1, 0);
	dirent(&rs, NVMEFS_REC_DIRENT_ADD, 1, "o", 2, DT_REG);
	extent(&rs, 2, 0, 0, FUZZ_DATA_START, 4 * KIB, 0);
	dirent(&rs, NVMEFS_REC_DIRENT_DEL, 1, "o", 2, DT_REG);
	ino_rec(&rs, NVMEFS_REC_ORPHAN_ADD, 2);
	save_stream("journal", "stream_orphan", 2, &rs, 0, rs.n);
	/* Directory churn: 16 names (one inode, hard links), 12 removed, more
	 * added: the entry array compacts instead of growing. */
	rs.n = 0;
	file(&rs, 2, 16, 0, 4 * KIB, 1, 0);
	for (unsigned k = 0; k < CHURN_NAMES; k++) {
		snprintf(churn_names[k], sizeof(churn_names[k]), "n%02u", k);
		if (k >= 16)
			continue;
		dirent(&rs, NVMEFS_REC_DIRENT_ADD, 1, churn_names[k], 2, DT_REG);
	}
	for (unsigned k = 0; k < 12; k++)
		dirent(&rs, NVMEFS_REC_DIRENT_DEL, 1, churn_names[k], 2, DT_REG);
	for (unsigned k = 16; k < CHURN_NAMES; k++)
		dirent(&rs, NVMEFS_REC_DIRENT_ADD, 1, churn_names[k], 2, DT_REG);
	vol = model();
	apply(vol, &rs, 0, rs.n);
	check_model(vol);
	fuzz_vol_destroy(vol);
	save_stream("journal", "stream_dir_churn", 2, &rs, 0, rs.n);
}

/* ---- load/ ---- */

/* Log records [from, to) as live operations do, then commit. */
static void commit(struct nvmefs_vol *vol, const struct recs *rs, size_t from, size_t to)
{
	int ret = 0;

	pthread_mutex_lock(&vol->lock);
	for (size_t i = from; i < to && !ret; i++)
		ret = nvmefs_journal_log(vol, &rs->v[i]);
	pthread_mutex_unlock(&vol->lock);
	if (!ret)
		ret = nvmefs_journal_commit(vol);
	if (ret)
		die("commit", ret);
}

static void save_image(const char *name)
{
	static uint8_t img[FUZZ_META_SIZE];
	int ret = fuzz_image_read(img);

	if (ret)
		die("reading the image back", ret);
	save("load", name, img, sizeof(img));
}

/* Flush the store as an unmount does (clean: as mkfs and an unmount
 * leave it). */
static void flush(struct nvmefs_vol *vol, bool clean)
{
	int ret = nvmefs_journal_checkpoint(vol, clean);

	if (ret)
		die("flush", ret);
}

static unsigned live_runs(struct nvmefs_vol *vol)
{
	struct nvmefs_store_stats st;

	nvmefs_store_stats(vol->store, &st);
	return st.runs;
}

/* One file a one-block transaction until the head is at block `at` of the
 * ring (the flushes that pass half of it come on their own); k counts the
 * files. */
static void commit_to(struct nvmefs_vol *vol, unsigned *k, uint64_t at)
{
	struct recs rs = {.n = 0};

	while (vol->j.head % FUZZ_JOURNAL != at * NVMEFS_BLOCK) {
		if (*k == MANY_FILES)
			die("out of files before the head got there", EINVAL);
		rs.n = 0;
		scenario_many(&rs, *k, *k + 1);
		commit(vol, &rs, 0, rs.n);
		(*k)++;
	}
}

/*
 * Images of format v2's metadata area made by the real writers (a
 * formatted memfd volume, records logged and committed, the store
 * flushed): mkfs's (the root's run, clean); two transactions to replay on
 * it; two runs (the second from a commit that passed half the ring) and a
 * transaction after them; and a ring wrapped with a pad, replayed on three
 * runs that hold an orphan (scenario_all's inode 9) for the mount to
 * reclaim. (No compaction: it reserves more run space than the harness's
 * area has, nvmefs_store_cfg's run_blocks.)
 */
static void gen_load(void)
{
	static char big[5000];
	struct nvmefs_vol *vol = fuzz_vol_format();
	struct recs rs = {.n = 0};
	const uint64_t jsize = FUZZ_JOURNAL;
	unsigned k = 0;
	size_t third;
	int ret;

	if (!vol)
		die("formatting the image", ENOMEM);
	flush(vol, true);
	ret = nvmefs_alloc_rebuild(vol);
	if (ret)
		die("format", ret);
	save_image("mkfs");
	scenario_all(&rs);
	third = rs.n / 3;
	commit(vol, &rs, 0, third);
	commit(vol, &rs, third, 2 * third);
	if (vol->j.tail != 0 || vol->j.head == 0 || live_runs(vol) != 1)
		die("mkfs_2txn: not two transactions after the root's run", EINVAL);
	save_image("mkfs_2txn");
	commit(vol, &rs, 2 * third, rs.n);
	while (vol->j.tail == 0) {
		rs.n = 0;
		scenario_many(&rs, k, k + 1);
		commit(vol, &rs, 0, rs.n);
		k++;
	}
	rs.n = 0;
	scenario_many(&rs, k, k + 1);
	commit(vol, &rs, 0, rs.n);
	k++;
	if (live_runs(vol) != 2 || vol->j.head == vol->j.tail)
		die("runs_replay: not two runs and a transaction", EINVAL);
	save_image("runs_replay");
	/* The tail at 6/8 of the ring; a one-block transaction there; a
	 * two-block one, which no longer fits before the ring's end: a pad,
	 * then it at the ring's start. Replay walks both. */
	commit_to(vol, &k, jsize / NVMEFS_BLOCK / 4 * 3);
	flush(vol, false);
	rs.n = 0;
	scenario_many(&rs, k, k + 1);
	commit(vol, &rs, 0, rs.n);
	memset(big, 'w', sizeof(big));
	rs.n = 0;
	xattr(&rs, NVMEFS_REC_XATTR_SET, 2, "user.big", big, sizeof(big));
	commit(vol, &rs, 0, rs.n);
	if (vol->j.tail % jsize != jsize / 4 * 3 || vol->j.head - vol->j.tail != 4 * NVMEFS_BLOCK)
		die("the journal did not wrap as planned", EINVAL);
	save_image("wrapped_orphan");
	fuzz_vol_destroy(vol);
}

/* ---- format v2's run blocks (fuzz_sorted) ---- */

/* The harness's volume id (tests/fuzz/fuzz_sorted.c). */
static const uint8_t sorted_uuid[16] = {0x6e, 0x76, 0x6d, 0x65, 0x66, 0x73, 0x2d, 0x66,
					0x75, 0x7a, 0x7a, 0x2d, 0x72, 0x75, 0x6e, 0x21};

/* A block of every key kind (a tombstone among them), one whose xattr value
 * takes 17 blocks, and one of a single DIRENT. */
static void gen_sorted(void)
{
	static uint8_t buf[NVMEFS_RUN_BLOCKS_MAX * NVMEFS_BLOCK], big[NVMEFS_XATTR_VALUE_MAX];
	uint8_t k[NVMEFS_KEY_MAX], v[64];
	struct nvmefs_run_writer w;
	size_t n, len;

	memset(v, 'v', sizeof(v));
	nvmefs_run_start(&w, buf, NVMEFS_BLOCK);
	n = nvmefs_key_inode(k, 1);
	nvmefs_run_add(&w, k, n, v, sizeof(v), false);
	n = nvmefs_key_dirent(k, 1, "hello", 5);
	nvmefs_run_add(&w, k, n, v, 16, false);
	n = nvmefs_key_dcookie(k, 1, 2);
	nvmefs_run_add(&w, k, n, v, 16, false);
	n = nvmefs_key_extent(k, 2, 1, 1 << 20);
	nvmefs_run_add(&w, k, n, v, 32, false);
	n = nvmefs_key_xattr(k, 2, "user.a", 6);
	nvmefs_run_add(&w, k, n, NULL, 0, true);
	n = nvmefs_key_orphan(k, 3);
	nvmefs_run_add(&w, k, n, NULL, 0, false);
	n = nvmefs_key_free(k, 3, 4096);
	nvmefs_run_add(&w, k, n, v, 8, false);
	len = nvmefs_run_finish(&w, sorted_uuid, 7, 0, 1);
	save("sorted", "every_kind", buf, len);

	memset(big, 'b', sizeof(big));
	nvmefs_run_start(&w, buf, sizeof(buf));
	n = nvmefs_key_xattr(k, 9, "user.big", 8);
	nvmefs_run_add(&w, k, n, big, sizeof(big), false);
	len = nvmefs_run_finish(&w, sorted_uuid, 8, 3, 2);
	save("sorted", "big_xattr", buf, len);

	nvmefs_run_start(&w, buf, NVMEFS_BLOCK);
	n = nvmefs_key_dirent(k, 5, "x", 1);
	nvmefs_run_add(&w, k, n, NULL, 0, true);
	len = nvmefs_run_finish(&w, sorted_uuid, 1, 1, 0);
	save("sorted", "one_dirent", buf, len);
}

/* ---- format v2's values (fuzz_values) ---- */

/* fuzz_values's input: the key's length (u16 little-endian), key, value. */
static void save_val(const char *name, const struct nvmefs_val *v)
{
	static uint8_t buf[2 + NVMEFS_KEY_MAX + NVMEFS_VAL_MAX];
	size_t klen;
	ssize_t vlen = nvmefs_val_encode(v, buf + 2, &klen, buf + 2 + NVMEFS_KEY_MAX);

	if (vlen < 0)
		die(name, (int)vlen);
	buf[0] = (uint8_t)klen;
	buf[1] = (uint8_t)(klen >> 8);
	memmove(buf + 2 + klen, buf + 2 + NVMEFS_KEY_MAX, (size_t)vlen);
	save_file("values", name, buf, 2 + klen + (size_t)vlen, false);
}

static void gen_values(void)
{
	static char name[NVMEFS_NAME_MAX], target[NVMEFS_SYMLINK_MAX], big[NVMEFS_XATTR_VALUE_MAX];
	struct nvmefs_rec r = {.type = NVMEFS_REC_INODE};
	struct nvmefs_inode_sum sum = {.nxattrs = 1, .alloc_bytes = 2 * MIB, .nextents = 2};
	struct nvmefs_val v;

	memset(name, 'n', sizeof(name));
	memset(target, 't', sizeof(target));
	memset(big, 'b', sizeof(big));
	r.inode.ino = 2;
	r.inode.mode = S_IFREG | 0644;
	r.inode.nlink = 1;
	r.inode.size = 2 * MIB;
	nvmefs_layout_init(&r.inode.layout, MIB, 4, 1);
	nvmefs_val_inode(&v, &r, &sum);
	save_val("inode_file", &v);
	r.inode.mode = S_IFDIR | 0755;
	r.inode.layout = (struct nvmefs_layout){
		.chunk_size = MIB, .stripe_count = 2, .devs = {NVMEFS_LAYOUT_ANY_DEV}};
	sum = (struct nvmefs_inode_sum){.parent = 1, .nentries = 5, .next_cookie = 9};
	nvmefs_val_inode(&v, &r, &sum);
	save_val("inode_dir", &v);
	r.inode.mode = S_IFLNK | 0777;
	r.inode.layout = (struct nvmefs_layout){0};
	r.inode.target = target;
	r.inode.target_len = NVMEFS_SYMLINK_MAX;
	sum = (struct nvmefs_inode_sum){0};
	nvmefs_val_inode(&v, &r, &sum);
	save_val("inode_symlink", &v);

	r = (struct nvmefs_rec){.type = NVMEFS_REC_DIRENT_ADD};
	r.dirent.parent = 1;
	r.dirent.child = 2;
	r.dirent.type = DT_REG;
	r.dirent.name = name;
	r.dirent.name_len = NVMEFS_NAME_MAX;
	nvmefs_val_dirent(&v, NVMEFS_KEY_DIRENT, &r, 3);
	save_val("dirent", &v);
	nvmefs_val_dirent(&v, NVMEFS_KEY_DCOOKIE, &r, 3);
	save_val("dcookie", &v);

	r = (struct nvmefs_rec){.type = NVMEFS_REC_EXTENT};
	r.extent.ino = 2;
	r.extent.slot = 1;
	r.extent.comp_off = MIB;
	r.extent.dev_off = 64 * MIB;
	r.extent.len = MIB;
	r.extent.flags = NVMEFS_EXT_UNWRITTEN;
	nvmefs_val_rec(&v, &r);
	save_val("extent", &v);
	r = (struct nvmefs_rec){.type = NVMEFS_REC_XATTR_SET};
	r.xattr.ino = 2;
	r.xattr.name = "user.big";
	r.xattr.name_len = 8;
	r.xattr.value = big;
	r.xattr.value_len = sizeof(big);
	nvmefs_val_rec(&v, &r);
	save_val("xattr_big", &v);
	r = (struct nvmefs_rec){.type = NVMEFS_REC_ORPHAN_ADD};
	r.ino.ino = 7;
	nvmefs_val_rec(&v, &r);
	save_val("orphan", &v);
	v = (struct nvmefs_val){.kind = NVMEFS_KEY_FREE};
	v.free.member = 3;
	v.free.off = 64 * MIB;
	v.free.len = MIB;
	save_val("free", &v);
}

/* ---- the native protocol (fuzz_wire) ---- */

/* Handles 0-3: read-write, write-only, read-only, read-write; regions 0-2
 * of 64 KiB, 4 KiB and 1 MiB (cut to 64 KiB by the harness), region 3 of
 * 1 TiB. */
static const unsigned wire_may[FUZZ_WIRE_HANDLES] = {3, 2, 1, 3};
static const uint64_t wire_size[FUZZ_WIRE_REGIONS] = {64 * KIB, 4 * KIB, MIB, 1ull << 40};

static void save_wire(const char *name, uint8_t flags, uint16_t type, int64_t arg, const void *body,
		      uint32_t count, size_t blen)
{
	static uint8_t buf[FUZZ_WIRE_PREFIX + NVMEFS_WIRE_MAX_MSG];
	struct nvmefs_wire_hdr h = {.magic = NVMEFS_WIRE_MAGIC,
				    .version = NVMEFS_WIRE_VERSION,
				    .type = type,
				    .count = count,
				    .arg = arg};

	fuzz_wire_prefix(buf, flags, wire_may, wire_size);
	memcpy(buf + FUZZ_WIRE_PREFIX, &h, sizeof(h));
	if (blen)
		memcpy(buf + FUZZ_WIRE_PREFIX + sizeof(h), body, blen);
	save_file("wire", name, buf, FUZZ_WIRE_PREFIX + sizeof(h) + blen, false);
}

static struct nvmefs_wire_sqe sqe(uint32_t op, uint32_t handle, uint32_t region, uint64_t off,
				  uint64_t len, uint64_t mem_off)
{
	return (struct nvmefs_wire_sqe){.user_data = off ^ len,
					.off = off,
					.len = len,
					.mem_off = mem_off,
					.handle = handle,
					.region = region,
					.op = op};
}

static void gen_wire(void)
{
	const uint8_t d = FUZZ_WIRE_TO_DAEMON;
	struct nvmefs_wire_sqe ok[] = {
		sqe(NVMEFS_WIRE_READ, 0, 0, 0, 4096, 0),
		sqe(NVMEFS_WIRE_WRITE, 1, 1, 4096, 4096, 0),
		sqe(NVMEFS_WIRE_READ, 2, 0, 7, 8193, 4096 + 7),
		sqe(NVMEFS_WIRE_WRITE, 3, 3, 1ull << 40, 1 * MIB, (1ull << 40) - MIB),
		sqe(NVMEFS_WIRE_FSYNC, 2, 0, 0, 0, 0),
	};
	struct nvmefs_wire_sqe bad[] = {
		sqe(NVMEFS_WIRE_WRITE, 2, 0, 0, 4096, 0),		/* read-only handle */
		sqe(NVMEFS_WIRE_READ, 1, 0, 0, 4096, 0),		/* write-only handle */
		sqe(NVMEFS_WIRE_READ, 7, 0, 0, 4096, 0),		/* no such handle */
		sqe(NVMEFS_WIRE_READ, 0, 0, 0, 4096, 64 * KIB - 4095),	/* past the region */
		sqe(NVMEFS_WIRE_READ, 0, 0, 0, 4096, UINT64_MAX - 10),	/* mem_off + len wraps */
		sqe(NVMEFS_WIRE_WRITE, 0, 0, UINT64_MAX - 10, 4096, 0), /* off + len wraps */
		sqe(NVMEFS_WIRE_WRITE, 0, 3, 0, (1ull << 40) + 1, 0),	/* above max_len */
		sqe(NVMEFS_WIRE_READ, 0, 9, 0, 4096, 0),		/* no such region */
		sqe(9, 0, 0, 0, 4096, 0),				/* no such op */
	};
	struct nvmefs_wire_sqe full[NVMEFS_WIRE_MAX_BATCH];
	struct nvmefs_wire_cqe cq[3] = {{1, 4096}, {2, -EBADF}, {3, 0}};
	struct nvmefs_wire_layout_req layout = {
		.handle = 0, .region = 0, .mem_off = 4096, .cap = 8192, .word_off = 0};
	struct nvmefs_wire_hello hello = {.block = 4096,
					  .max_inflight = NVMEFS_WIRE_MAX_INFLIGHT,
					  .max_batch = NVMEFS_WIRE_MAX_BATCH,
					  .max_len = NVMEFS_WIRE_MAX_REGION};

	for (unsigned i = 0; i < NVMEFS_WIRE_MAX_BATCH; i++)
		full[i] = sqe(NVMEFS_WIRE_READ, i % 4 == 1 ? 0 : i % 4, 0, i * 4096ull, 4096,
			      (i % 16) * 4096ull);
	save_wire("hello", d, NVMEFS_WIRE_HELLO, 0, NULL, 0, 0);
	save_wire("reg_fd", d, NVMEFS_WIRE_REG_FD, 0, NULL, 0, 0);
	save_wire("unreg_fd", d, NVMEFS_WIRE_UNREG_FD, 3, NULL, 0, 0);
	save_wire("reg_mem", d, NVMEFS_WIRE_REG_MEM, (int64_t)MIB, NULL, 0, 0);
	save_wire("unreg_mem", d, NVMEFS_WIRE_UNREG_MEM, 1, NULL, 0, 0);
	save_wire("submit_ok", d, NVMEFS_WIRE_SUBMIT, 0, ok, 5, sizeof(ok));
	save_wire("submit_bad", d, NVMEFS_WIRE_SUBMIT, 0, bad, 9, sizeof(bad));
	save_wire("submit_full", d | FUZZ_WIRE_MAX_LEN_SMALL, NVMEFS_WIRE_SUBMIT, 0, full,
		  NVMEFS_WIRE_MAX_BATCH, sizeof(full));
	save_wire("submit_max_off", d | FUZZ_WIRE_MAX_OFF_2_64, NVMEFS_WIRE_SUBMIT, 0, bad + 5, 1,
		  sizeof(bad[0]));
	save_wire("layout", d, NVMEFS_WIRE_LAYOUT, 0, &layout, 1, sizeof(layout));
	save_wire("reply", 0, NVMEFS_WIRE_REPLY, -EBADMSG, NULL, 0, 0);
	save_wire("reply_hello", 0, NVMEFS_WIRE_REPLY, 0, &hello, 0, sizeof(hello));
	save_wire("complete", 0, NVMEFS_WIRE_COMPLETE, 0, cq, 3, sizeof(cq));
}

/* ---- format v2's manifests (fuzz_manifest) ---- */

/* The harness's volume id (tests/fuzz/fuzz_manifest.c). */
static const uint8_t manifest_uuid[16] = {0x6e, 0x76, 0x6d, 0x65, 0x66, 0x73, 0x2d, 0x66,
					  0x75, 0x7a, 0x7a, 0x2d, 0x6d, 0x61, 0x6e, 0x21};

/* Run i of n: levels 0..2, extents one after the other from block 8 (the
 * harness's slots take 8), INODE or, with long, XATTR keys of long names. */
static void manifest_run(struct nvmefs_run_meta *r, uint32_t i, bool long_keys)
{
	char name[200];

	memset(name, 'n', sizeof(name));
	*r = (struct nvmefs_run_meta){.id = 2 * i + 1,
				      .start = 8 + 20ull * i,
				      .nentries = 100 + i,
				      .level = i % 3,
				      .data_blocks = 15,
				      .index_blocks = 1,
				      .filter_blocks = 1};
	if (long_keys) {
		r->min_len = (uint16_t)nvmefs_key_xattr(r->min, i, name, sizeof(name));
		name[0] = 'z';
		r->max_len = (uint16_t)nvmefs_key_xattr(r->max, i, name, sizeof(name));
	} else {
		r->min_len = (uint16_t)nvmefs_key_inode(r->min, 10 * i);
		r->max_len = (uint16_t)nvmefs_key_dirent(r->max, 10 * i, "last", 4);
	}
}

/* Empty (what a fresh area holds), three runs, and 24 runs of long keys
 * (three blocks). */
static void gen_manifest(void)
{
	static uint8_t buf[4 * NVMEFS_BLOCK];
	static struct nvmefs_run_meta r[24];
	struct nvmefs_manifest m = {.seq = 1, .next_id = 1};
	ssize_t len;

	len = nvmefs_manifest_encode(&m, manifest_uuid, buf, sizeof(buf));
	save("manifest", "empty", buf, (size_t)len);
	for (uint32_t i = 0; i < 24; i++)
		manifest_run(&r[i], i, i >= 3 || i == 1);
	m = (struct nvmefs_manifest){
		.seq = 7,
		.next_id = 9,
		.mark = {.replay = 4096, .replay_seq = 17, .next_ino = 1000, .ninodes = 998},
		.n = 3,
		.runs = r};
	len = nvmefs_manifest_encode(&m, manifest_uuid, buf, sizeof(buf));
	save("manifest", "three_runs", buf, (size_t)len);
	m = (struct nvmefs_manifest){.seq = 8, .next_id = 60, .n = 24, .runs = r};
	len = nvmefs_manifest_encode(&m, manifest_uuid, buf, sizeof(buf));
	if (len < 0)
		die("manifest of 24 runs", (int)len);
	save("manifest", "long_keys", buf, (size_t)len);
}

/* ---- format v2's run index and filter (fuzz_runr) ---- */

/* The harness's volume id (tests/fuzz/fuzz_runr.c). */
static const uint8_t runr_uuid[16] = {0x6e, 0x76, 0x6d, 0x65, 0x66, 0x73, 0x2d, 0x66,
				      0x75, 0x7a, 0x7a, 0x2d, 0x72, 0x75, 0x6e, 0x21};

/* Run 1 (the first of a fresh area) of n entries, every fifth a
 * tombstone, written by the real writer on a memfd: the harness's header
 * for its meta, then its index and filter as written. */
static void save_run(const char *name, uint32_t n, bool long_keys)
{
	static const struct nvmefs_runs_geom g = {.blocks = 4096, .slot_blocks = 4};
	struct nvmefs_dev dev = {.path = "gen_corpus-runr",
				 .size = 4096 * NVMEFS_BLOCK,
				 .block_size = NVMEFS_BLOCK,
				 .mem_align = NVMEFS_BLOCK};
	uint8_t k[NVMEFS_KEY_MAX], val[64] = {7}, *buf;
	struct nvmefs_run_meta m;
	struct nvmefs_runs *a;
	struct nvmefs_runw w;
	char xname[200];
	uint64_t ne;
	uint32_t db;
	size_t tl;
	int ret;

	memset(xname, 'x', sizeof(xname));
	dev.fd = memfd_create("gen_corpus-runr", MFD_CLOEXEC);
	if (dev.fd < 0 || ftruncate(dev.fd, (off_t)dev.size))
		die(name, errno);
	ret = nvmefs_runs_format(&dev, &g, runr_uuid);
	if (!ret)
		ret = nvmefs_runs_open(&a, &dev, &g, runr_uuid);
	if (!ret)
		ret = nvmefs_runw_begin(&w, a, 2, 0);
	for (uint32_t i = 0; i < n && !ret; i++) {
		size_t kl = long_keys ? nvmefs_key_xattr(k, i, xname, sizeof(xname))
				      : nvmefs_key_inode(k, 2ull * i + 2);
		bool tomb = i % 5 == 4;

		ret = nvmefs_runw_add(&w, k, kl, val, tomb ? 0 : sizeof(val), tomb);
	}
	if (!ret)
		ret = nvmefs_runw_end(&w, &m);
	if (ret)
		die(name, ret);
	tl = ((size_t)m.index_blocks + m.filter_blocks) * NVMEFS_BLOCK;
	buf = calloc(1, 16 + tl);
	if (!buf)
		die(name, ENOMEM);
	ne = htole64(m.nentries);
	db = htole32(m.data_blocks);
	memcpy(buf, &ne, 8);
	memcpy(buf + 8, &db, 4);
	buf[12] = (uint8_t)m.index_blocks;
	buf[13] = (uint8_t)m.filter_blocks;
	buf[14] = (uint8_t)m.level;
	if (m.id != 1 || pread(dev.fd, buf + 16, tl,
			       (off_t)((m.start + m.data_blocks) * NVMEFS_BLOCK)) != (ssize_t)tl)
		die(name, EIO);
	save("runr", name, buf, 16 + tl);
	free(buf);
	nvmefs_runs_close(a);
	close(dev.fd);
}

/* One entry; 4,000 over many run blocks (a filter of two blocks); 400 of
 * long xattr keys (an index of two blocks). */
static void gen_runr(void)
{
	save_run("one_entry", 1, false);
	save_run("many_blocks", 4000, false);
	save_run("long_keys", 400, true);
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: gen_corpus OUTDIR\n");
		return 2;
	}
	outdir = argv[1];
	if (mkdir(outdir, 0755) && errno != EEXIST)
		die(outdir, errno);
	fuzz_init();
	gen_labels();
	gen_journal();
	gen_wire();
	gen_sorted();
	gen_manifest();
	gen_runr();
	gen_values();
	gen_load();
	return 0;
}
