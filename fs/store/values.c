// SPDX-License-Identifier: MIT
/*
 * Format v2's values (store.h says what they are; docs/FORMAT.md
 * gives each one's bytes). The decoders read bytes from a device: each
 * checks the value's length against its fixed part and explicit lengths
 * before it reads a field, and every field before it is trusted, with the
 * same checks as the journal's record decoder (format.c) where a record
 * has the field.
 * The encoders run the same checks first, so that what they write decodes.
 */
#include "store.h"

#include <dirent.h>
#include <endian.h>
#include <errno.h>
#include <string.h>
#include <sys/stat.h>

/* The values' fixed parts on disk, little-endian, every field at its
 * natural alignment with the padding explicit (reserved: zero), as
 * runfmt.c's objects. Each starts with the version byte. */

/* INODE: then devs[stripe_count] and the symlink target. sum[] is
 * (alloc_bytes, nextents, 0) for a regular file, (parent, nentries,
 * next_cookie) for a directory, 0 otherwise. */
struct inode_disk {
	uint8_t version;
	uint8_t reserved;
	uint16_t target_len;
	uint32_t mode, uid, gid, nlink, flags;
	uint64_t size, rdev;
	int64_t sec[4];	  /* atime, mtime, ctime, crtime */
	uint32_t nsec[4]; /* the same, < 10^9 */
	uint32_t chunk_size, stripe_count;
	uint32_t nxattrs;
	uint32_t reserved2;
	uint64_t sum[3];
};
_Static_assert(sizeof(struct inode_disk) == NVMEFS_VAL_INODE_FIXED, "INODE value's fixed part");

/* DIRENT: the whole value. */
struct dirent_disk {
	uint8_t version;
	uint8_t type; /* DT_* */
	uint8_t reserved[6];
	uint64_t child;
	uint64_t cookie;
};
_Static_assert(sizeof(struct dirent_disk) == NVMEFS_VAL_DIRENT, "DIRENT value");

/* DCOOKIE: then the name. */
struct dcookie_disk {
	uint8_t version;
	uint8_t type;
	uint8_t name_len; /* 1..NVMEFS_NAME_MAX */
	uint8_t reserved[5];
	uint64_t child;
};
_Static_assert(sizeof(struct dcookie_disk) == NVMEFS_VAL_DCOOKIE_FIXED, "DCOOKIE fixed part");
_Static_assert(NVMEFS_NAME_MAX <= UINT8_MAX, "a name's length fits DCOOKIE's u8");

struct extent_disk {
	uint8_t version;
	uint8_t reserved[3];
	uint32_t flags; /* NVMEFS_EXT_UNWRITTEN */
	uint64_t dev_off, len;
};
_Static_assert(sizeof(struct extent_disk) == NVMEFS_VAL_EXTENT, "EXTENT value");

struct free_disk {
	uint8_t version;
	uint8_t reserved[7];
	uint64_t len;
};
_Static_assert(sizeof(struct free_disk) == NVMEFS_VAL_FREE, "FREE value");
_Static_assert(NVMEFS_VAL_INODE_MAX <= NVMEFS_VAL_MAX && NVMEFS_VAL_DCOOKIE_MAX <= NVMEFS_VAL_MAX,
	       "every value fits a run entry");

/* Keys' integers are big-endian (store.h). */
static uint64_t key64(const uint8_t *p)
{
	uint64_t v;

	memcpy(&v, p, 8);
	return be64toh(v);
}

static bool zero(const void *p, size_t n)
{
	const uint8_t *b = p;

	for (size_t i = 0; i < n; i++) {
		if (b[i])
			return false;
	}
	return true;
}

/* ---- the checks, shared by encode and decode ---- */

static bool dt_ok(uint8_t t)
{
	return t == DT_REG || t == DT_DIR || t == DT_LNK || t == DT_FIFO || t == DT_SOCK ||
	       t == DT_CHR || t == DT_BLK;
}

static bool layout_zero(const struct nvmefs_layout *l)
{
	static const struct nvmefs_layout zero;

	return !memcmp(l, &zero, sizeof(zero));
}

/* An INODE's summary for its type: a file's extents are whole blocks (so
 * no more of them than blocks, and none iff no bytes); a directory's
 * cookies start after "." and "..", and it has no more live entries than
 * cookies given. */
static bool sum_ok(uint32_t mode, const struct nvmefs_inode_sum *s)
{
	switch (mode & S_IFMT) {
	case S_IFREG:
		return !s->parent && !s->nentries && !s->next_cookie &&
		       s->alloc_bytes % NVMEFS_BLOCK == 0 &&
		       s->nextents <= s->alloc_bytes / NVMEFS_BLOCK &&
		       (s->nextents == 0) == (s->alloc_bytes == 0);
	case S_IFDIR:
		return !s->alloc_bytes && !s->nextents && s->parent &&
		       s->next_cookie >= NVMEFS_COOKIE_FIRST &&
		       s->nentries <= s->next_cookie - NVMEFS_COOKIE_FIRST;
	default:
		return !s->alloc_bytes && !s->nextents && !s->parent && !s->nentries &&
		       !s->next_cookie;
	}
}

static bool inode_ok(const struct nvmefs_val *v)
{
	const struct nvmefs_rec *r = &v->rec;
	uint32_t fmt = r->inode.mode & S_IFMT;

	if (r->type != NVMEFS_REC_INODE || !nvmefs_rec_inode_ok(r))
		return false;
	/* As the record decoder reads a time (format.c get_time). */
	if (r->inode.atime.nsec >= 1000000000u || r->inode.mtime.nsec >= 1000000000u ||
	    r->inode.ctime.nsec >= 1000000000u || r->inode.crtime.nsec >= 1000000000u)
		return false;
	/* The record decoder ignores the layout of the other types; a value
	 * stores none. */
	if (fmt != S_IFREG && fmt != S_IFDIR && !layout_zero(&r->inode.layout))
		return false;
	return sum_ok(v->rec.inode.mode, &v->sum);
}

static bool dirent_ok(const struct nvmefs_val *v)
{
	const struct nvmefs_rec *r = &v->rec;

	return r->type == NVMEFS_REC_DIRENT_ADD && r->dirent.parent && r->dirent.child &&
	       dt_ok(r->dirent.type) && nvmefs_dirent_name_ok(r->dirent.name, r->dirent.name_len) &&
	       v->cookie >= NVMEFS_COOKIE_FIRST;
}

/* As an EXTENT record: whole blocks, not wrapping around. */
static bool extent_ok(const struct nvmefs_rec *r)
{
	const uint64_t c = r->extent.comp_off, d = r->extent.dev_off, n = r->extent.len;

	return r->type == NVMEFS_REC_EXTENT && r->extent.ino &&
	       r->extent.slot < NVMEFS_MAX_DEVICES && !(r->extent.flags & ~NVMEFS_EXT_UNWRITTEN) &&
	       n && !((c | d | n) % NVMEFS_BLOCK) && c + n > c && d + n > d;
}

static bool xattr_ok(const struct nvmefs_rec *r)
{
	return r->type == NVMEFS_REC_XATTR_SET && r->xattr.ino &&
	       nvmefs_name_ok(r->xattr.name, r->xattr.name_len, NVMEFS_XATTR_NAME_MAX) &&
	       r->xattr.value_len <= NVMEFS_XATTR_VALUE_MAX;
}

static bool free_ok(const struct nvmefs_val *v)
{
	const uint64_t o = v->free.off, n = v->free.len;

	return v->free.member < NVMEFS_MAX_DEVICES && n && !((o | n) % NVMEFS_BLOCK) && o + n > o;
}

static bool val_ok(const struct nvmefs_val *v)
{
	switch (v->kind) {
	case NVMEFS_KEY_INODE:
		return inode_ok(v);
	case NVMEFS_KEY_DIRENT:
	case NVMEFS_KEY_DCOOKIE:
		return dirent_ok(v);
	case NVMEFS_KEY_EXTENT:
		return extent_ok(&v->rec);
	case NVMEFS_KEY_XATTR:
		return xattr_ok(&v->rec);
	case NVMEFS_KEY_ORPHAN:
		return v->rec.type == NVMEFS_REC_ORPHAN_ADD && v->rec.ino.ino;
	case NVMEFS_KEY_FREE:
		return free_ok(v);
	}
	return false;
}

/* ---- encoding ---- */

static size_t inode_encode(const struct nvmefs_val *v, uint8_t *val)
{
	const struct nvmefs_rec *r = &v->rec;
	const bool dir = S_ISDIR(r->inode.mode);
	const uint32_t count = r->inode.layout.stripe_count;
	struct inode_disk d = {.version = NVMEFS_VAL_VERSION,
			       .target_len = htole16(r->inode.target_len),
			       .mode = htole32(r->inode.mode),
			       .uid = htole32(r->inode.uid),
			       .gid = htole32(r->inode.gid),
			       .nlink = htole32(r->inode.nlink),
			       .flags = htole32(r->inode.flags),
			       .size = htole64(r->inode.size),
			       .rdev = htole64(r->inode.rdev),
			       .chunk_size = htole32(r->inode.layout.chunk_size),
			       .stripe_count = htole32(count),
			       .nxattrs = htole32(v->sum.nxattrs),
			       .sum = {htole64(dir ? v->sum.parent : v->sum.alloc_bytes),
				       htole64(dir ? v->sum.nentries : v->sum.nextents),
				       htole64(v->sum.next_cookie)}};
	const struct nvmefs_time *t[4] = {&r->inode.atime, &r->inode.mtime, &r->inode.ctime,
					  &r->inode.crtime};

	for (unsigned i = 0; i < 4; i++) {
		d.sec[i] = (int64_t)htole64((uint64_t)t[i]->sec);
		d.nsec[i] = htole32(t[i]->nsec);
	}
	memcpy(val, &d, sizeof(d));
	memcpy(val + sizeof(d), r->inode.layout.devs, count);
	if (r->inode.target_len)
		memcpy(val + sizeof(d) + count, r->inode.target, r->inode.target_len);
	return sizeof(d) + count + r->inode.target_len;
}

/* DIRENT and DCOOKIE: the key and the value. */
static size_t dirent_encode(const struct nvmefs_val *v, uint8_t *key, size_t *klen, uint8_t *val)
{
	const struct nvmefs_rec *r = &v->rec;
	struct dirent_disk de = {.version = NVMEFS_VAL_VERSION,
				 .type = r->dirent.type,
				 .child = htole64(r->dirent.child),
				 .cookie = htole64(v->cookie)};
	struct dcookie_disk dc = {.version = NVMEFS_VAL_VERSION,
				  .type = r->dirent.type,
				  .name_len = (uint8_t)r->dirent.name_len,
				  .child = htole64(r->dirent.child)};

	if (v->kind == NVMEFS_KEY_DIRENT) {
		*klen = nvmefs_key_dirent(key, r->dirent.parent, r->dirent.name,
					  r->dirent.name_len);
		memcpy(val, &de, sizeof(de));
		return sizeof(de);
	}
	*klen = nvmefs_key_dcookie(key, r->dirent.parent, v->cookie);
	memcpy(val, &dc, sizeof(dc));
	memcpy(val + sizeof(dc), r->dirent.name, r->dirent.name_len);
	return sizeof(dc) + r->dirent.name_len;
}

static size_t extent_encode(const struct nvmefs_rec *r, uint8_t *key, size_t *klen, uint8_t *val)
{
	struct extent_disk d = {.version = NVMEFS_VAL_VERSION,
				.flags = htole32(r->extent.flags),
				.dev_off = htole64(r->extent.dev_off),
				.len = htole64(r->extent.len)};

	*klen = nvmefs_key_extent(key, r->extent.ino, r->extent.slot, r->extent.comp_off);
	memcpy(val, &d, sizeof(d));
	return sizeof(d);
}

ssize_t nvmefs_val_encode(const struct nvmefs_val *v, uint8_t *key, size_t *klen, uint8_t *val)
{
	const struct nvmefs_rec *r = &v->rec;
	struct free_disk f = {.version = NVMEFS_VAL_VERSION, .len = htole64(v->free.len)};

	if (!val_ok(v))
		return -EINVAL;
	switch (v->kind) {
	case NVMEFS_KEY_INODE:
		*klen = nvmefs_key_inode(key, r->inode.ino);
		return (ssize_t)inode_encode(v, val);
	case NVMEFS_KEY_DIRENT:
	case NVMEFS_KEY_DCOOKIE:
		return (ssize_t)dirent_encode(v, key, klen, val);
	case NVMEFS_KEY_EXTENT:
		return (ssize_t)extent_encode(r, key, klen, val);
	case NVMEFS_KEY_XATTR:
		*klen = nvmefs_key_xattr(key, r->xattr.ino, r->xattr.name, r->xattr.name_len);
		if (r->xattr.value_len)
			memcpy(val, r->xattr.value, r->xattr.value_len);
		return (ssize_t)r->xattr.value_len;
	case NVMEFS_KEY_ORPHAN:
		*klen = nvmefs_key_orphan(key, r->ino.ino);
		val[0] = NVMEFS_VAL_VERSION;
		return NVMEFS_VAL_ORPHAN;
	case NVMEFS_KEY_FREE:
		*klen = nvmefs_key_free(key, v->free.member, v->free.off + v->free.len);
		memcpy(val, &f, sizeof(f));
		return sizeof(f);
	}
	return -EINVAL;
}

/* ---- decoding ---- */

/* The fields of a key nvmefs_key_check accepted, into v. */
static void key_fields(const uint8_t *key, size_t klen, struct nvmefs_val *v)
{
	struct nvmefs_rec *r = &v->rec;

	v->kind = key[0];
	switch (v->kind) {
	case NVMEFS_KEY_INODE:
		r->type = NVMEFS_REC_INODE;
		r->inode.ino = key64(key + 1);
		break;
	case NVMEFS_KEY_DIRENT:
		r->type = NVMEFS_REC_DIRENT_ADD;
		r->dirent.parent = key64(key + 1);
		r->dirent.name = (const char *)key + 17;
		r->dirent.name_len = (uint16_t)(klen - 17);
		break;
	case NVMEFS_KEY_DCOOKIE:
		r->type = NVMEFS_REC_DIRENT_ADD;
		r->dirent.parent = key64(key + 1);
		v->cookie = key64(key + 9);
		break;
	case NVMEFS_KEY_EXTENT:
		r->type = NVMEFS_REC_EXTENT;
		r->extent.ino = key64(key + 1);
		r->extent.slot = key[9];
		r->extent.comp_off = key64(key + 10);
		break;
	case NVMEFS_KEY_XATTR:
		r->type = NVMEFS_REC_XATTR_SET;
		r->xattr.ino = key64(key + 1);
		r->xattr.name = (const char *)key + 9;
		r->xattr.name_len = (uint16_t)(klen - 9);
		break;
	case NVMEFS_KEY_ORPHAN:
		r->type = NVMEFS_REC_ORPHAN_ADD;
		r->ino.ino = key64(key + 1);
		break;
	case NVMEFS_KEY_FREE:
		v->free.member = key[1];
		v->free.off = key64(key + 2); /* the end, until the length is read */
		break;
	}
}

/* The INODE value's fields; 0 or -EINVAL when its length is not what its
 * explicit lengths say or a reserved byte is set. */
static int inode_decode(const uint8_t *val, size_t vlen, struct nvmefs_val *v)
{
	struct nvmefs_rec *r = &v->rec;
	struct nvmefs_time *t[4] = {&r->inode.atime, &r->inode.mtime, &r->inode.ctime,
				    &r->inode.crtime};
	struct inode_disk d;
	uint32_t count;

	if (vlen < sizeof(d))
		return -EINVAL;
	memcpy(&d, val, sizeof(d));
	r->inode.target_len = le16toh(d.target_len);
	count = le32toh(d.stripe_count);
	if (d.reserved || d.reserved2 || count > NVMEFS_MAX_DEVICES ||
	    vlen != sizeof(d) + count + r->inode.target_len)
		return -EINVAL;
	r->inode.mode = le32toh(d.mode);
	r->inode.uid = le32toh(d.uid);
	r->inode.gid = le32toh(d.gid);
	r->inode.nlink = le32toh(d.nlink);
	r->inode.flags = le32toh(d.flags);
	r->inode.size = le64toh(d.size);
	r->inode.rdev = le64toh(d.rdev);
	for (unsigned i = 0; i < 4; i++) {
		t[i]->sec = (int64_t)le64toh((uint64_t)d.sec[i]);
		t[i]->nsec = le32toh(d.nsec[i]);
	}
	r->inode.layout.chunk_size = le32toh(d.chunk_size);
	r->inode.layout.stripe_count = count;
	memcpy(r->inode.layout.devs, val + sizeof(d), count);
	r->inode.target = r->inode.target_len ? (const char *)val + sizeof(d) + count : NULL;
	v->sum.nxattrs = le32toh(d.nxattrs);
	if (S_ISDIR(r->inode.mode)) {
		v->sum.parent = le64toh(d.sum[0]);
		v->sum.nentries = le64toh(d.sum[1]);
	} else {
		v->sum.alloc_bytes = le64toh(d.sum[0]);
		v->sum.nextents = le64toh(d.sum[1]);
	}
	v->sum.next_cookie = le64toh(d.sum[2]);
	return 0;
}

/* DIRENT and DCOOKIE values' fields. */
static int dirent_decode(const uint8_t *val, size_t vlen, struct nvmefs_val *v)
{
	struct nvmefs_rec *r = &v->rec;
	struct dcookie_disk dc;
	struct dirent_disk de;

	if (v->kind == NVMEFS_KEY_DIRENT) {
		if (vlen != sizeof(de))
			return -EINVAL;
		memcpy(&de, val, sizeof(de));
		r->dirent.type = de.type;
		r->dirent.child = le64toh(de.child);
		v->cookie = le64toh(de.cookie);
		return zero(de.reserved, sizeof(de.reserved)) ? 0 : -EINVAL;
	}
	if (vlen < sizeof(dc))
		return -EINVAL;
	memcpy(&dc, val, sizeof(dc));
	if (vlen != sizeof(dc) + dc.name_len || !zero(dc.reserved, sizeof(dc.reserved)))
		return -EINVAL;
	r->dirent.type = dc.type;
	r->dirent.child = le64toh(dc.child);
	r->dirent.name_len = dc.name_len;
	r->dirent.name = (const char *)val + sizeof(dc);
	return 0;
}

/* The value's fields by kind (XATTR aside); its length and reserved bytes
 * checked. */
static int fields_decode(const uint8_t *val, size_t vlen, struct nvmefs_val *v)
{
	struct extent_disk e;
	struct free_disk f;

	switch (v->kind) {
	case NVMEFS_KEY_INODE:
		return inode_decode(val, vlen, v);
	case NVMEFS_KEY_DIRENT:
	case NVMEFS_KEY_DCOOKIE:
		return dirent_decode(val, vlen, v);
	case NVMEFS_KEY_EXTENT:
		if (vlen != sizeof(e))
			return -EINVAL;
		memcpy(&e, val, sizeof(e));
		v->rec.extent.dev_off = le64toh(e.dev_off);
		v->rec.extent.len = le64toh(e.len);
		v->rec.extent.flags = le32toh(e.flags);
		return zero(e.reserved, sizeof(e.reserved)) ? 0 : -EINVAL;
	case NVMEFS_KEY_ORPHAN:
		return vlen == NVMEFS_VAL_ORPHAN ? 0 : -EINVAL;
	case NVMEFS_KEY_FREE:
		if (vlen != sizeof(f))
			return -EINVAL;
		memcpy(&f, val, sizeof(f));
		v->free.len = le64toh(f.len);
		if (v->free.len > v->free.off) /* the key has the end */
			return -EINVAL;
		v->free.off -= v->free.len;
		return zero(f.reserved, sizeof(f.reserved)) ? 0 : -EINVAL;
	}
	return -EINVAL;
}

int nvmefs_val_decode(const uint8_t *key, size_t klen, const uint8_t *val, size_t vlen,
		      struct nvmefs_val *v)
{
	int ret;

	memset(v, 0, sizeof(*v));
	if (nvmefs_key_check(key, klen))
		return -EINVAL;
	key_fields(key, klen, v);
	if (v->kind == NVMEFS_KEY_XATTR) {
		/* Raw bytes: only the length to check. */
		v->rec.xattr.value = vlen ? (const char *)val : NULL;
		v->rec.xattr.value_len = (uint32_t)vlen;
		if (vlen > NVMEFS_XATTR_VALUE_MAX)
			return -EINVAL;
		return xattr_ok(&v->rec) ? 0 : -EINVAL;
	}
	if (vlen < 1)
		return -EINVAL;
	if (val[0] != NVMEFS_VAL_VERSION)
		return -EPROTO;
	ret = fields_decode(val, vlen, v);
	if (ret)
		return ret;
	return val_ok(v) ? 0 : -EINVAL;
}

void nvmefs_val_inode(struct nvmefs_val *v, const struct nvmefs_rec *inode,
		      const struct nvmefs_inode_sum *sum)
{
	memset(v, 0, sizeof(*v));
	v->kind = NVMEFS_KEY_INODE;
	v->rec = *inode;
	v->sum = *sum;
}

void nvmefs_val_dirent(struct nvmefs_val *v, uint8_t kind, const struct nvmefs_rec *dirent_add,
		       uint64_t cookie)
{
	memset(v, 0, sizeof(*v));
	v->kind = kind;
	v->rec = *dirent_add;
	v->cookie = cookie;
}

int nvmefs_val_rec(struct nvmefs_val *v, const struct nvmefs_rec *rec)
{
	static const uint8_t kind[] = {
		[NVMEFS_REC_EXTENT] = NVMEFS_KEY_EXTENT,
		[NVMEFS_REC_XATTR_SET] = NVMEFS_KEY_XATTR,
		[NVMEFS_REC_ORPHAN_ADD] = NVMEFS_KEY_ORPHAN,
	};

	memset(v, 0, sizeof(*v));
	if (rec->type >= sizeof(kind) || !kind[rec->type])
		return -EINVAL;
	v->kind = kind[rec->type];
	v->rec = *rec;
	return 0;
}
