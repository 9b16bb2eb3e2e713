// SPDX-License-Identifier: MIT
/*
 * Format v2's values (fs/store/store.h), without a volume, over a table of
 * values of every kind with their edge cases (a 255-byte name, a 4095-byte
 * symlink target, a 64 KiB xattr, 32 devices, zero and largest fields):
 *  - each encodes, decodes, and re-encodes to the same key and bytes; a
 *    record's value decodes to a record that v1 encodes as the original;
 *  - every truncation of a value, and a byte more, is refused;
 *  - every single-byte change of the value or the key is refused or
 *    decodes to something that re-encodes to the changed bytes (nothing
 *    is misread silently); a bumped version byte gives -EPROTO;
 *  - values that break a rule are refused by the encoder.
 * XATTR values are raw bytes: any length up to 64 KiB is one.
 */
#include <dirent.h>
#include <errno.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include "test_util.h"
#include "store.h"

#define NVALS 40

static struct nvmefs_val vals[NVALS];
static unsigned nvals;
static char name255[NVMEFS_NAME_MAX + 1], target[NVMEFS_SYMLINK_MAX + 1];
static uint8_t big[NVMEFS_XATTR_VALUE_MAX];

static struct nvmefs_val *add(uint8_t kind, uint16_t rec_type)
{
	struct nvmefs_val *v = &vals[nvals++];

	memset(v, 0, sizeof(*v));
	v->kind = kind;
	v->rec.type = rec_type;
	return v;
}

static struct nvmefs_rec *add_inode(uint64_t ino, uint32_t mode)
{
	struct nvmefs_val *v = add(NVMEFS_KEY_INODE, NVMEFS_REC_INODE);

	v->rec.inode.ino = ino;
	v->rec.inode.mode = mode;
	v->rec.inode.nlink = 1;
	if (S_ISDIR(mode)) {
		v->sum.parent = 1;
		v->sum.next_cookie = NVMEFS_COOKIE_FIRST;
	}
	return &v->rec;
}

static void add_inodes(void)
{
	const struct nvmefs_time tmin = {INT64_MIN, 0}, tmax = {INT64_MAX, 999999999};
	struct nvmefs_rec *r;
	struct nvmefs_val *v;

	r = add_inode(2, S_IFREG | 0644);
	nvmefs_layout_init(&r->inode.layout, 1 << 20, 4, 1);
	r->inode.size = 12345;
	r->inode.mtime = (struct nvmefs_time){1700000000, 5};
	vals[nvals - 1].sum =
		(struct nvmefs_inode_sum){.nxattrs = 1, .alloc_bytes = 8192, .nextents = 2};
	/* Zero and largest fields, 32 devices. */
	r = add_inode(UINT64_MAX, S_IFREG | 07777);
	nvmefs_layout_init(&r->inode.layout, NVMEFS_CHUNK_MAX, NVMEFS_MAX_DEVICES, 31);
	r->inode.uid = r->inode.gid = r->inode.nlink = UINT32_MAX;
	r->inode.flags = NVMEFS_IFL_ALL; /* every chattr flag nvmefs has */
	r->inode.size = INT64_MAX;
	r->inode.rdev = UINT64_MAX;
	r->inode.atime = r->inode.ctime = tmax;
	r->inode.mtime = r->inode.crtime = tmin;
	v = &vals[nvals - 1];
	v->sum = (struct nvmefs_inode_sum){.nxattrs = UINT32_MAX,
					   .alloc_bytes = UINT64_MAX - (NVMEFS_BLOCK - 1),
					   .nextents = UINT64_MAX / NVMEFS_BLOCK};
	r = add_inode(3, S_IFREG);
	nvmefs_layout_init(&r->inode.layout, NVMEFS_CHUNK_MIN, 1, 0);
	r->inode.nlink = 0;
	/* Directories: no default layout; per-file members; largest summary. */
	add_inode(NVMEFS_ROOT_INO, S_IFDIR | 0755);
	r = add_inode(4, S_IFDIR | 01777);
	r->inode.layout = (struct nvmefs_layout){
		.chunk_size = 65536, .stripe_count = 3, .devs = {NVMEFS_LAYOUT_ANY_DEV}};
	vals[nvals - 1].sum =
		(struct nvmefs_inode_sum){.nxattrs = 7,
					  .parent = UINT64_MAX,
					  .next_cookie = UINT64_MAX,
					  .nentries = UINT64_MAX - NVMEFS_COOKIE_FIRST};
	r = add_inode(5, S_IFDIR | 0700);
	nvmefs_layout_init(&r->inode.layout, 1 << 16, NVMEFS_MAX_DEVICES, 0);
	/* Symlinks: the longest target and the shortest; the other types. */
	r = add_inode(6, S_IFLNK | 0777);
	r->inode.target = target;
	r->inode.target_len = NVMEFS_SYMLINK_MAX;
	r = add_inode(7, S_IFLNK | 0777);
	r->inode.target = "x";
	r->inode.target_len = 1;
	add_inode(8, S_IFCHR | 0600)->inode.rdev = makedev(1, 3);
	add_inode(9, S_IFBLK | 0600)->inode.rdev = UINT64_MAX;
	add_inode(10, S_IFIFO | 0600);
	add_inode(11, S_IFSOCK | 0600);
}

static void add_dirents(uint8_t kind)
{
	struct nvmefs_val *v;

	v = add(kind, NVMEFS_REC_DIRENT_ADD);
	v->rec.dirent = (typeof(v->rec.dirent)){.parent = 1,
						.child = UINT64_MAX,
						.type = DT_REG,
						.name_len = NVMEFS_NAME_MAX,
						.name = name255};
	v->cookie = NVMEFS_COOKIE_FIRST;
	v = add(kind, NVMEFS_REC_DIRENT_ADD);
	v->rec.dirent = (typeof(v->rec.dirent)){
		.parent = UINT64_MAX, .child = 2, .type = DT_DIR, .name_len = 1, .name = "a"};
	v->cookie = UINT64_MAX;
	v = add(kind, NVMEFS_REC_DIRENT_ADD);
	v->rec.dirent = (typeof(v->rec.dirent)){
		.parent = 5, .child = 9, .type = DT_LNK, .name_len = 3, .name = "..."};
	v->cookie = 1000;
}

static void add_others(void)
{
	struct nvmefs_val *v;

	v = add(NVMEFS_KEY_EXTENT, NVMEFS_REC_EXTENT);
	v->rec.extent = (typeof(v->rec.extent)){
		.ino = 2, .slot = 0, .comp_off = 0, .dev_off = 1 << 20, .len = NVMEFS_BLOCK};
	v = add(NVMEFS_KEY_EXTENT, NVMEFS_REC_EXTENT);
	v->rec.extent = (typeof(v->rec.extent)){.ino = UINT64_MAX,
						.slot = NVMEFS_MAX_DEVICES - 1,
						.comp_off = UINT64_MAX - 2 * NVMEFS_BLOCK + 1,
						.dev_off = 0,
						.len = NVMEFS_BLOCK,
						.flags = NVMEFS_EXT_UNWRITTEN};
	v = add(NVMEFS_KEY_XATTR, NVMEFS_REC_XATTR_SET);
	v->rec.xattr = (typeof(v->rec.xattr)){.ino = 2,
					      .name_len = NVMEFS_XATTR_NAME_MAX,
					      .name = name255,
					      .value_len = sizeof(big),
					      .value = (const char *)big};
	v = add(NVMEFS_KEY_XATTR, NVMEFS_REC_XATTR_SET);
	v->rec.xattr = (typeof(v->rec.xattr)){.ino = 3, .name_len = 6, .name = "user.e"};
	add(NVMEFS_KEY_ORPHAN, NVMEFS_REC_ORPHAN_ADD)->rec.ino.ino = 1;
	add(NVMEFS_KEY_ORPHAN, NVMEFS_REC_ORPHAN_ADD)->rec.ino.ino = UINT64_MAX;
	v = add(NVMEFS_KEY_FREE, 0);
	v->free.member = NVMEFS_MAX_DEVICES - 1;
	v->free.off = UINT64_MAX - 2 * NVMEFS_BLOCK + 1;
	v->free.len = NVMEFS_BLOCK;
	v = add(NVMEFS_KEY_FREE, 0);
	v->free.len = UINT64_MAX - (NVMEFS_BLOCK - 1);
}

static uint8_t key[NVMEFS_KEY_MAX], key2[NVMEFS_KEY_MAX];
static uint8_t val[NVMEFS_VAL_MAX + 1], val2[NVMEFS_VAL_MAX + 1];
static uint8_t rec1[NVMEFS_REC_MAX], rec2[NVMEFS_REC_MAX];

/* Decode (k, v) and re-encode what it gives: true when it was accepted and
 * came back as the same bytes. */
static bool same_again(const uint8_t *k, size_t klen, const uint8_t *v, size_t vlen)
{
	struct nvmefs_val d;
	size_t klen2;
	ssize_t n;

	if (nvmefs_val_decode(k, klen, v, vlen, &d))
		return false;
	n = nvmefs_val_encode(&d, key2, &klen2, val2);
	return n == (ssize_t)vlen && klen2 == klen && !memcmp(key2, k, klen) &&
	       !memcmp(val2, v, vlen);
}

/* A record's value decodes to a record v1 encodes as the original. */
static void check_rec(const struct nvmefs_val *v, const struct nvmefs_val *d)
{
	size_t n;

	if (!v->rec.type)
		return;
	n = nvmefs_rec_encode(&v->rec, rec1);
	CHECK(nvmefs_rec_size(&d->rec) == n);
	if (nvmefs_rec_size(&d->rec) == n) {
		nvmefs_rec_encode(&d->rec, rec2);
		CHECKF(!memcmp(rec1, rec2, n), "kind %u: the record differs", v->kind);
	}
	if (v->kind == NVMEFS_KEY_INODE)
		CHECK(!memcmp(&v->sum, &d->sum, sizeof(v->sum)));
	if (v->kind == NVMEFS_KEY_DIRENT || v->kind == NVMEFS_KEY_DCOOKIE)
		CHECK(d->cookie == v->cookie);
}

/* Change each of the first n bytes at b (in key or val) in turn: refused,
 * or read back as the changed bytes. */
static void flip_each(uint8_t *b, size_t n, const struct nvmefs_val *v, size_t klen, size_t vlen)
{
	static const uint8_t masks[] = {0x01, 0x80, 0xff};
	struct nvmefs_val d;

	for (size_t i = 0; i < n; i++) {
		for (unsigned m = 0; m < sizeof(masks); m++) {
			b[i] ^= masks[m];
			if (!nvmefs_val_decode(key, klen, val, vlen, &d))
				CHECKF(same_again(key, klen, val, vlen),
				       "kind %u: %s byte %zu ^ %#x misread", v->kind,
				       b == key ? "key" : "value", i, masks[m]);
			b[i] ^= masks[m];
		}
	}
}

/* Every truncation and a byte more refused; every byte of the value (an
 * xattr's first 64: raw bytes) and of the key changed. */
static void check_damage(const struct nvmefs_val *v, size_t klen, size_t vlen)
{
	struct nvmefs_val d;

	if (v->kind != NVMEFS_KEY_XATTR) {
		for (size_t n = 0; n < vlen; n++)
			CHECKF(nvmefs_val_decode(key, klen, val, n, &d), "kind %u cut to %zu",
			       v->kind, n);
		val[vlen] = 0;
		CHECKF(nvmefs_val_decode(key, klen, val, vlen + 1, &d), "kind %u with a byte more",
		       v->kind);
	}
	flip_each(val, v->kind == NVMEFS_KEY_XATTR && vlen > 64 ? 64 : vlen, v, klen, vlen);
	flip_each(key, klen, v, klen, vlen);
}

static void check_one(const struct nvmefs_val *v)
{
	struct nvmefs_val d;
	size_t klen = 0;
	ssize_t vlen = nvmefs_val_encode(v, key, &klen, val);

	CHECKF(vlen >= 0 && klen > 0, "kind %u: encode %zd", v->kind, vlen);
	if (vlen < 0)
		return;
	CHECK_ERR(nvmefs_key_check(key, klen), 0);
	CHECK_ERR(nvmefs_val_decode(key, klen, val, (size_t)vlen, &d), 0);
	CHECK(d.kind == v->kind);
	check_rec(v, &d);
	CHECKF(same_again(key, klen, val, (size_t)vlen), "kind %u: not the same again", v->kind);
	if (v->kind != NVMEFS_KEY_XATTR) {
		val[0]++;
		CHECK_ERR(nvmefs_val_decode(key, klen, val, (size_t)vlen, &d), -EPROTO);
		val[0]--;
	}
	check_damage(v, klen, (size_t)vlen);
}

/* Values that break a rule: the encoder refuses each. */
static void check_refused(void)
{
	struct nvmefs_val v;
	size_t klen;

#define REFUSED(i, change)                                                                         \
	do {                                                                                       \
		v = vals[i];                                                                       \
		change;                                                                            \
		CHECKF(nvmefs_val_encode(&v, key, &klen, val) == -EINVAL, "%s", #change);          \
	} while (0)
	REFUSED(0, v.sum.alloc_bytes = 100);		      /* not whole blocks */
	REFUSED(0, v.sum.nextents = 3);			      /* more extents than blocks */
	REFUSED(0, v.sum.parent = 1);			      /* a directory's field */
	REFUSED(2, v.sum.nextents = 1);			      /* extents without bytes */
	REFUSED(0, v.rec.inode.layout.stripe_count = 0);      /* v1's layout check */
	REFUSED(0, v.rec.inode.atime.nsec = 1000000000);      /* v1's time check */
	REFUSED(0, v.rec.inode.ino = 0);		      /* no inode 0 */
	REFUSED(0, v.rec.inode.flags = 0x4);		      /* a flag nvmefs has not */
	REFUSED(6, v.rec.inode.flags = NVMEFS_IFL_NODUMP);    /* flags on a symlink */
	REFUSED(3, v.sum.next_cookie = 2);		      /* "..": not an entry's */
	REFUSED(3, v.sum.nentries = 1);			      /* more entries than cookies */
	REFUSED(3, v.sum.parent = 0);			      /* no parent */
	REFUSED(3, v.sum.alloc_bytes = NVMEFS_BLOCK);	      /* a file's field */
	REFUSED(6, v.rec.inode.target_len = 0);		      /* a symlink without target */
	REFUSED(7, v.rec.inode.layout.chunk_size = 4096);     /* a layout on a symlink */
	REFUSED(7, v.sum.nxattrs = 1; v.sum.next_cookie = 3); /* a directory's field */
	REFUSED(12, v.rec.dirent.name = "a/b");		      /* a name with a slash */
	REFUSED(12, v.rec.dirent.name = "..");		      /* ".." */
	REFUSED(12, v.rec.dirent.name_len = 256);	      /* too long */
	REFUSED(12, v.rec.dirent.type = DT_UNKNOWN);	      /* no type */
	REFUSED(12, v.rec.dirent.child = 0);		      /* no child */
	REFUSED(12, v.cookie = 2);			      /* ".."'s cookie */
	REFUSED(15, v.cookie = 1);			      /* "."'s cookie */
	REFUSED(15, v.rec.dirent.parent = 0);		      /* no parent */
	REFUSED(18, v.rec.extent.len = 0);		      /* empty */
	REFUSED(18, v.rec.extent.dev_off = 512);	      /* not a block */
	REFUSED(18, v.rec.extent.flags = 2);		      /* unknown flag */
	REFUSED(19, v.rec.extent.len = 2 * NVMEFS_BLOCK);     /* wraps around */
	REFUSED(20, v.rec.xattr.value_len = NVMEFS_XATTR_VALUE_MAX + 1);  /* too long */
	REFUSED(21, v.rec.xattr.name = "a\0b"; v.rec.xattr.name_len = 3); /* a NUL in the name */
	REFUSED(22, v.rec.ino.ino = 0);					  /* no inode 0 */
	REFUSED(24, v.free.len = 0);					  /* empty */
	REFUSED(24, v.free.member = NVMEFS_MAX_DEVICES);		  /* no such member */
	REFUSED(25, v.free.off = NVMEFS_BLOCK);				  /* wraps around */
	REFUSED(25, v.kind = 0);					  /* no such kind */
#undef REFUSED
}

/* The conversions: a DIRENT_ADD record to both its keys, one-key records
 * to theirs, anything else refused. */
static void check_conversions(void)
{
	struct nvmefs_rec r = {.type = NVMEFS_REC_DIRENT_ADD};
	struct nvmefs_val v, d;
	size_t klen;
	ssize_t n;

	r.dirent = (typeof(r.dirent)){
		.parent = 7, .child = 8, .type = DT_REG, .name_len = 2, .name = "hi"};
	for (uint8_t kind = NVMEFS_KEY_DIRENT; kind <= NVMEFS_KEY_DCOOKIE; kind++) {
		nvmefs_val_dirent(&v, kind, &r, 42);
		n = nvmefs_val_encode(&v, key, &klen, val);
		CHECK(n > 0 && key[0] == kind);
		CHECK(n > 0 && !nvmefs_val_decode(key, klen, val, (size_t)n, &d));
		CHECK(d.cookie == 42 && d.rec.dirent.child == 8 && d.rec.dirent.name_len == 2 &&
		      !memcmp(d.rec.dirent.name, "hi", 2));
	}
	CHECK_ERR(nvmefs_val_rec(&v, &vals[18].rec), 0);
	CHECK(v.kind == NVMEFS_KEY_EXTENT);
	CHECK_ERR(nvmefs_val_rec(&v, &vals[20].rec), 0);
	CHECK(v.kind == NVMEFS_KEY_XATTR);
	CHECK_ERR(nvmefs_val_rec(&v, &vals[22].rec), 0);
	CHECK(v.kind == NVMEFS_KEY_ORPHAN);
	CHECK_ERR(nvmefs_val_rec(&v, &r), -EINVAL);
	nvmefs_val_inode(&v, &vals[0].rec, &vals[0].sum);
	CHECK(nvmefs_val_encode(&v, key, &klen, val) > 0 && key[0] == NVMEFS_KEY_INODE);
}

int main(void)
{
	memset(name255, 'n', NVMEFS_NAME_MAX);
	memset(target, 't', NVMEFS_SYMLINK_MAX);
	for (size_t i = 0; i < sizeof(big); i++)
		big[i] = (uint8_t)(i * 7);
	add_inodes();			 /* 0..11 */
	add_dirents(NVMEFS_KEY_DIRENT);	 /* 12..14 */
	add_dirents(NVMEFS_KEY_DCOOKIE); /* 15..17 */
	add_others();			 /* 18..25 */
	for (unsigned i = 0; i < nvals; i++)
		check_one(&vals[i]);
	check_refused();
	check_conversions();
	printf("%u values\n", nvals);
	return test_result();
}
