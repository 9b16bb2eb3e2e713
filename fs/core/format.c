// SPDX-License-Identifier: MIT
/*
 * Encoding and checking of nvmefs's on-disk structures (fs/core/format.h). The
 * decoders are the first thing that touches bytes read from a device, so
 * they check bounds before every read and accept nothing they cannot prove
 * well formed; a fuzzer drives them directly.
 */
#include "format.h"

#include <endian.h>
#include <errno.h>
#include <isa-l/crc.h>
#include <string.h>
#include <sys/stat.h>
#include <uuid/uuid.h>

#define LABEL_MAGIC "NVMEFSL1"
#define SUPER_MAGIC "NVMEFSS1"
#define TXN_MAGIC   "NVMEFSJ1"
#define CRC_SEED    0x6e766d65u /* "nvme": an all-zero block never checks out */

uint32_t nvmefs_crc32c(const void *buf, size_t len)
{
	return crc32_iscsi((unsigned char *)buf, (int)len, CRC_SEED);
}

uint32_t nvmefs_crc32c_hole(const void *buf, size_t len, size_t crc_off)
{
	static const uint8_t zero[4];
	const uint8_t *b = buf;
	uint32_t crc = nvmefs_crc32c(b, crc_off);

	crc = crc32_iscsi((unsigned char *)zero, 4, crc);
	return crc32_iscsi((unsigned char *)b + crc_off + 4, (int)(len - crc_off - 4), crc);
}

/* Little-endian cursor over a bounded buffer: writes never overflow by
 * construction (callers size the buffer), reads fail once past the end. */
struct cur {
	uint8_t *p;
	size_t len, pos;
	bool bad;
};

static void put(struct cur *c, const void *v, size_t n)
{
	if (n)
		memcpy(c->p + c->pos, v, n);
	c->pos += n;
}
static void put16(struct cur *c, uint16_t v)
{
	v = htole16(v);
	put(c, &v, 2);
}
static void put32(struct cur *c, uint32_t v)
{
	v = htole32(v);
	put(c, &v, 4);
}
static void put64(struct cur *c, uint64_t v)
{
	v = htole64(v);
	put(c, &v, 8);
}
static const void *get(struct cur *c, size_t n)
{
	const void *r;

	if (c->bad || n > c->len - c->pos) {
		c->bad = true;
		return NULL;
	}
	r = c->p + c->pos;
	c->pos += n;
	return r;
}
static uint16_t get16(struct cur *c)
{
	uint16_t v = 0;
	const void *p = get(c, 2);

	if (p)
		memcpy(&v, p, 2);
	return le16toh(v);
}
static uint32_t get32(struct cur *c)
{
	uint32_t v = 0;
	const void *p = get(c, 4);

	if (p)
		memcpy(&v, p, 4);
	return le32toh(v);
}
static uint64_t get64(struct cur *c)
{
	uint64_t v = 0;
	const void *p = get(c, 8);

	if (p)
		memcpy(&v, p, 8);
	return le64toh(v);
}

/* Common block frame: magic(8) version(4) crc(4), crc over the whole block
 * with the crc field zeroed. */
static void frame_seal(void *block, size_t len, const char *magic)
{
	uint8_t *b = block;
	uint32_t v = htole32(NVMEFS_FORMAT_VERSION), crc;

	memcpy(b, magic, 8);
	memcpy(b + 8, &v, 4);
	memset(b + 12, 0, 4);
	crc = htole32(nvmefs_crc32c(b, len));
	memcpy(b + 12, &crc, 4);
}

static int frame_check(const void *block, size_t len, const char *magic)
{
	uint8_t tmp[NVMEFS_BLOCK];
	uint32_t ver, crc;

	if (len > sizeof(tmp) || memcmp(block, magic, 8) != 0)
		return -EINVAL;
	memcpy(&ver, (const uint8_t *)block + 8, 4);
	memcpy(&crc, (const uint8_t *)block + 12, 4);
	memcpy(tmp, block, len);
	memset(tmp + 12, 0, 4);
	if (nvmefs_crc32c(tmp, len) != le32toh(crc))
		return -EINVAL;
	if (le32toh(ver) != NVMEFS_FORMAT_VERSION)
		return -EPROTO;
	return 0;
}

/* libuuid's text form and parser, not code of our own: those util-linux
 * uses, so a UUID printed here is one they accept and the other way round.
 * The label holds the bytes in text order (RFC 4122), so the on-disk bytes
 * and the printed text are what the hand-written code made. */
void nvmefs_uuid_str(const uint8_t u[16], char out[NVMEFS_UUID_STR])
{
	uuid_unparse_lower(u, out);
}

int nvmefs_uuid_parse(const char *s, uint8_t u[16])
{
	uuid_t tmp;

	/* Exactly 36 characters, hyphens at 8, 13, 18, 23, hex digits of
	 * either case elsewhere; u is left alone when s is not one. */
	if (uuid_parse(s, tmp))
		return -EINVAL;
	memcpy(u, tmp, sizeof(tmp));
	return 0;
}

unsigned nvmefs_label_version(const void *block)
{
	uint32_t v;

	if (!nvmefs_label_magic(block))
		return 0;
	memcpy(&v, (const uint8_t *)block + 8, 4);
	return le32toh(v);
}

bool nvmefs_label_magic(const void *block)
{
	return memcmp(block, LABEL_MAGIC, 8) == 0;
}

void nvmefs_label_encode(const struct nvmefs_label *l, void *block)
{
	struct cur c = {.p = block, .len = NVMEFS_BLOCK, .pos = 16};

	memset(block, 0, NVMEFS_BLOCK);
	put(&c, l->uuid, 16);
	put(&c, l->name, 64);
	put32(&c, l->index);
	put32(&c, l->count);
	put32(&c, l->chunk_size);
	put32(&c, 0);
	put64(&c, l->created_ns);
	for (unsigned i = 0; i < NVMEFS_MAX_DEVICES; i++)
		put64(&c, l->dev_size[i]);
	put64(&c, l->data_start);
	put64(&c, l->data_end);
	put64(&c, l->meta_off);
	put64(&c, l->meta_size);
	put64(&c, l->runs_size);
	put64(&c, l->journal_size);
	frame_seal(block, NVMEFS_BLOCK, LABEL_MAGIC);
}

static bool label_sane(const struct nvmefs_label *l)
{
	uint64_t meta_end = l->meta_off + l->meta_size, parts;

	if (l->count == 0 || l->count > NVMEFS_MAX_DEVICES || l->index >= l->count)
		return false;
	if (l->chunk_size < NVMEFS_CHUNK_MIN || l->chunk_size > NVMEFS_CHUNK_MAX ||
	    (l->chunk_size & (l->chunk_size - 1)))
		return false;
	if (memchr(l->name, 0, sizeof(l->name)) == NULL)
		return false;
	for (unsigned i = 0; i < NVMEFS_MAX_DEVICES; i++) {
		uint64_t s = l->dev_size[i];

		if ((i < l->count) != (s != 0) || s % NVMEFS_BLOCK)
			return false;
	}
	/* Block 0 is the label: no area may start there. */
	if (l->data_start % NVMEFS_BLOCK || l->data_end % NVMEFS_BLOCK ||
	    l->data_start < NVMEFS_BLOCK || l->data_start >= l->data_end ||
	    l->data_end > l->dev_size[l->index] - NVMEFS_BLOCK)
		return false;
	if (l->meta_off % NVMEFS_BLOCK || l->runs_size % NVMEFS_BLOCK ||
	    l->journal_size % NVMEFS_BLOCK || l->runs_size < NVMEFS_RUNS_MIN ||
	    l->journal_size == 0 || l->meta_off < NVMEFS_BLOCK || meta_end < l->meta_off ||
	    meta_end > l->dev_size[0] - NVMEFS_BLOCK)
		return false;
	/* The parts must add up to the area, without wrapping around. */
	if (__builtin_add_overflow(l->runs_size, l->journal_size, &parts) ||
	    __builtin_add_overflow(parts, 2 * NVMEFS_BLOCK, &parts) || parts != l->meta_size)
		return false;
	/* The metadata area precedes member 0's data area. */
	if (l->index == 0 && l->data_start < meta_end)
		return false;
	return true;
}

int nvmefs_label_decode(struct nvmefs_label *l, const void *block)
{
	struct cur c = {.p = (uint8_t *)block, .len = NVMEFS_BLOCK, .pos = 16};
	int ret = frame_check(block, NVMEFS_BLOCK, LABEL_MAGIC);

	if (ret)
		return ret;
	memset(l, 0, sizeof(*l));
	memcpy(l->uuid, get(&c, 16), 16);
	memcpy(l->name, get(&c, 64), 64);
	l->index = get32(&c);
	l->count = get32(&c);
	l->chunk_size = get32(&c);
	get32(&c);
	l->created_ns = get64(&c);
	for (unsigned i = 0; i < NVMEFS_MAX_DEVICES; i++)
		l->dev_size[i] = get64(&c);
	l->data_start = get64(&c);
	l->data_end = get64(&c);
	l->meta_off = get64(&c);
	l->meta_size = get64(&c);
	l->runs_size = get64(&c);
	l->journal_size = get64(&c);
	return label_sane(l) ? 0 : -EINVAL;
}

void nvmefs_super_encode(const struct nvmefs_super *s, void *block)
{
	struct cur c = {.p = block, .len = NVMEFS_BLOCK, .pos = 16};

	memset(block, 0, NVMEFS_BLOCK);
	put(&c, s->uuid, 16);
	put64(&c, s->seq);
	put64(&c, s->manifest_floor);
	put32(&c, s->clean);
	put32(&c, s->features);
	frame_seal(block, NVMEFS_BLOCK, SUPER_MAGIC);
}

int nvmefs_super_decode(struct nvmefs_super *s, const void *block)
{
	struct cur c = {.p = (uint8_t *)block, .len = NVMEFS_BLOCK, .pos = 16};
	int ret = frame_check(block, NVMEFS_BLOCK, SUPER_MAGIC);

	if (ret)
		return ret;
	memcpy(s->uuid, get(&c, 16), 16);
	s->seq = get64(&c);
	s->manifest_floor = get64(&c);
	s->clean = get32(&c);
	s->features = get32(&c); /* zero in a superblock that predates it */
	if (s->clean > 1)
		return -EINVAL;
	return s->features & ~NVMEFS_SUPER_KNOWN ? -EPROTO : 0;
}

/* Transaction header: magic version crc | journal id(8) seq(8) nblocks(4)
 * payload_len(4) pad(4); crc over header and payload. */
void nvmefs_txn_encode(const struct nvmefs_txn *t, const uint8_t uuid[16], void *buf)
{
	struct cur c = {.p = buf, .len = NVMEFS_TXN_HDR, .pos = 16};
	uint8_t *b = buf;
	uint32_t v = htole32(NVMEFS_FORMAT_VERSION), crc;

	memset(b + 16, 0, NVMEFS_TXN_HDR - 16);
	put(&c, uuid, 8);
	put64(&c, t->seq);
	put32(&c, t->nblocks);
	put32(&c, t->payload_len);
	put32(&c, t->pad);
	memcpy(b, TXN_MAGIC, 8);
	memcpy(b + 8, &v, 4);
	memset(b + 12, 0, 4);
	crc = htole32(nvmefs_crc32c(b, NVMEFS_TXN_HDR + t->payload_len));
	memcpy(b + 12, &crc, 4);
}

int nvmefs_txn_decode(struct nvmefs_txn *t, const uint8_t uuid[16], const void *buf, size_t len)
{
	struct cur c = {.p = (uint8_t *)buf, .len = NVMEFS_TXN_HDR, .pos = 16};
	const uint8_t *b = buf;
	uint32_t ver, crc, got;
	uint8_t hdr[NVMEFS_TXN_HDR];

	if (len < NVMEFS_TXN_HDR || memcmp(b, TXN_MAGIC, 8) != 0)
		return -EINVAL;
	if (memcmp(get(&c, 8), uuid, 8) != 0)
		return -EINVAL;
	t->seq = get64(&c);
	t->nblocks = get32(&c);
	t->payload_len = get32(&c);
	t->pad = get32(&c);
	if (t->pad > 1 || t->nblocks == 0 || (uint64_t)t->nblocks * NVMEFS_BLOCK > len ||
	    NVMEFS_TXN_HDR + (uint64_t)t->payload_len > (uint64_t)t->nblocks * NVMEFS_BLOCK)
		return -EINVAL;
	memcpy(&ver, b + 8, 4);
	memcpy(&crc, b + 12, 4);
	/* crc over the header with the crc zeroed, then the payload. */
	memcpy(hdr, b, sizeof(hdr));
	memset(hdr + 12, 0, 4);
	got = crc32_iscsi(hdr, sizeof(hdr), CRC_SEED);
	got = crc32_iscsi((unsigned char *)b + NVMEFS_TXN_HDR, (int)t->payload_len, got);
	if (got != le32toh(crc))
		return -EINVAL;
	if (le32toh(ver) != NVMEFS_FORMAT_VERSION)
		return -EPROTO;
	return 0;
}

int nvmefs_txn_peek(struct nvmefs_txn *t, const uint8_t uuid[16], const void *hdr)
{
	struct cur c = {.p = (uint8_t *)hdr, .len = NVMEFS_TXN_HDR, .pos = 16};

	if (memcmp(hdr, TXN_MAGIC, 8) != 0 || memcmp(get(&c, 8), uuid, 8) != 0)
		return -EINVAL;
	t->seq = get64(&c);
	t->nblocks = get32(&c);
	t->payload_len = get32(&c);
	t->pad = get32(&c);
	return t->nblocks ? 0 : -EINVAL;
}

uint32_t nvmefs_txn_nblocks(const void *hdr)
{
	struct cur c = {.p = (uint8_t *)hdr, .len = NVMEFS_TXN_HDR, .pos = 32};

	return get32(&c);
}

/* Records: type(2) reserved(2) length(4), then the body. */
#define REC_HDR	    8u
#define INODE_FIXED (8 + 5 * 4 + 2 * 8 + 4 * 12 + 8 + NVMEFS_MAX_DEVICES + 2)

size_t nvmefs_rec_size(const struct nvmefs_rec *r)
{
	switch (r->type) {
	case NVMEFS_REC_INODE:
		return REC_HDR + INODE_FIXED + r->inode.target_len;
	case NVMEFS_REC_INODE_FREE:
	case NVMEFS_REC_ORPHAN_ADD:
	case NVMEFS_REC_ORPHAN_DEL:
		return REC_HDR + 8;
	case NVMEFS_REC_DIRENT_ADD:
	case NVMEFS_REC_DIRENT_DEL:
		return REC_HDR + 20 + r->dirent.name_len;
	case NVMEFS_REC_EXTENT:
		return REC_HDR + 40;
	case NVMEFS_REC_PUNCH:
		return REC_HDR + 24;
	case NVMEFS_REC_XATTR_SET:
	case NVMEFS_REC_XATTR_DEL:
		return REC_HDR + 16 + r->xattr.name_len + r->xattr.value_len;
	}
	return 0;
}

static void put_time(struct cur *c, struct nvmefs_time t)
{
	put64(c, (uint64_t)t.sec);
	put32(c, t.nsec);
}

static struct nvmefs_time get_time(struct cur *c)
{
	struct nvmefs_time t;

	t.sec = (int64_t)get64(c);
	t.nsec = get32(c);
	if (t.nsec >= 1000000000u)
		c->bad = true;
	return t;
}

size_t nvmefs_rec_encode(const struct nvmefs_rec *r, void *buf)
{
	size_t size = nvmefs_rec_size(r);
	struct cur c = {.p = buf, .len = size};

	put16(&c, r->type);
	put16(&c, 0);
	put32(&c, (uint32_t)size);
	switch (r->type) {
	case NVMEFS_REC_INODE:
		put64(&c, r->inode.ino);
		put32(&c, r->inode.mode);
		put32(&c, r->inode.uid);
		put32(&c, r->inode.gid);
		put32(&c, r->inode.nlink);
		put32(&c, r->inode.flags);
		put64(&c, r->inode.size);
		put64(&c, r->inode.rdev);
		put_time(&c, r->inode.atime);
		put_time(&c, r->inode.mtime);
		put_time(&c, r->inode.ctime);
		put_time(&c, r->inode.crtime);
		put32(&c, r->inode.layout.chunk_size);
		put32(&c, r->inode.layout.stripe_count);
		put(&c, r->inode.layout.devs, NVMEFS_MAX_DEVICES);
		put16(&c, r->inode.target_len);
		put(&c, r->inode.target, r->inode.target_len);
		break;
	case NVMEFS_REC_INODE_FREE:
	case NVMEFS_REC_ORPHAN_ADD:
	case NVMEFS_REC_ORPHAN_DEL:
		put64(&c, r->ino.ino);
		break;
	case NVMEFS_REC_DIRENT_ADD:
	case NVMEFS_REC_DIRENT_DEL:
		put64(&c, r->dirent.parent);
		put64(&c, r->dirent.child);
		put16(&c, r->dirent.type);
		put16(&c, r->dirent.name_len);
		put(&c, r->dirent.name, r->dirent.name_len);
		break;
	case NVMEFS_REC_EXTENT:
		put64(&c, r->extent.ino);
		put32(&c, r->extent.slot);
		put32(&c, r->extent.flags);
		put64(&c, r->extent.comp_off);
		put64(&c, r->extent.dev_off);
		put64(&c, r->extent.len);
		break;
	case NVMEFS_REC_PUNCH:
		put64(&c, r->punch.ino);
		put64(&c, r->punch.off);
		put64(&c, r->punch.len);
		break;
	case NVMEFS_REC_XATTR_SET:
	case NVMEFS_REC_XATTR_DEL:
		put64(&c, r->xattr.ino);
		put16(&c, r->xattr.name_len);
		put16(&c, 0);
		put32(&c, r->xattr.value_len);
		put(&c, r->xattr.name, r->xattr.name_len);
		put(&c, r->xattr.value, r->xattr.value_len);
		break;
	}
	return size;
}

bool nvmefs_name_ok(const char *name, size_t len, size_t max)
{
	if (len == 0 || len > max || memchr(name, 0, len))
		return false;
	return true;
}

bool nvmefs_dirent_name_ok(const char *name, size_t len)
{
	if (!nvmefs_name_ok(name, len, NVMEFS_NAME_MAX) || memchr(name, '/', len))
		return false;
	return !(len == 1 && name[0] == '.') && !(len == 2 && name[0] == '.' && name[1] == '.');
}

bool nvmefs_dir_layout_ok(const struct nvmefs_layout *l, unsigned ndevs)
{
	struct nvmefs_layout probe;

	if (!l->chunk_size) /* none: every field zero */
		return !l->stripe_count &&
		       !memcmp(l->devs, (uint8_t[NVMEFS_MAX_DEVICES]){0}, sizeof(l->devs));
	if (l->devs[0] != NVMEFS_LAYOUT_ANY_DEV)
		return nvmefs_layout_check(l, ndevs) == 0;
	probe = *l;
	for (unsigned s = 0; s < NVMEFS_MAX_DEVICES; s++)
		probe.devs[s] = (uint8_t)s;
	return l->stripe_count <= ndevs && nvmefs_layout_check(&probe, ndevs) == 0;
}

bool nvmefs_rec_inode_ok(const struct nvmefs_rec *r)
{
	uint32_t fmt = r->inode.mode & S_IFMT;
	const struct nvmefs_layout *l = &r->inode.layout;

	if (r->inode.ino == 0 || r->inode.mode & ~(S_IFMT | 07777))
		return false;
	if (fmt != S_IFREG && fmt != S_IFDIR && fmt != S_IFLNK && fmt != S_IFIFO &&
	    fmt != S_IFSOCK && fmt != S_IFCHR && fmt != S_IFBLK)
		return false;
	if ((fmt == S_IFLNK) != (r->inode.target_len != 0) ||
	    r->inode.target_len > NVMEFS_SYMLINK_MAX)
		return false;
	if (r->inode.target_len && memchr(r->inode.target, 0, r->inode.target_len))
		return false;
	if (r->inode.size > (uint64_t)INT64_MAX)
		return false;
	if (r->inode.flags & ~NVMEFS_IFL_ALL ||
	    (r->inode.flags && fmt != S_IFREG && fmt != S_IFDIR))
		return false;
	if (fmt == S_IFREG)
		return nvmefs_layout_check(l, NVMEFS_MAX_DEVICES) == 0;
	if (fmt == S_IFDIR)
		return nvmefs_dir_layout_ok(l, NVMEFS_MAX_DEVICES);
	return true;
}

long nvmefs_rec_decode(struct nvmefs_rec *r, const void *buf, size_t len)
{
	struct cur c = {.p = (uint8_t *)buf, .len = len};
	const void *devs;
	uint32_t size;

	memset(r, 0, sizeof(*r));
	r->type = get16(&c);
	get16(&c);
	size = get32(&c);
	if (c.bad || size < REC_HDR || size > len || size > NVMEFS_REC_MAX)
		return -EINVAL;
	c.len = size; /* the body may not read past its own length */
	switch (r->type) {
	case NVMEFS_REC_INODE:
		r->inode.ino = get64(&c);
		r->inode.mode = get32(&c);
		r->inode.uid = get32(&c);
		r->inode.gid = get32(&c);
		r->inode.nlink = get32(&c);
		r->inode.flags = get32(&c);
		r->inode.size = get64(&c);
		r->inode.rdev = get64(&c);
		r->inode.atime = get_time(&c);
		r->inode.mtime = get_time(&c);
		r->inode.ctime = get_time(&c);
		r->inode.crtime = get_time(&c);
		r->inode.layout.chunk_size = get32(&c);
		r->inode.layout.stripe_count = get32(&c);
		devs = get(&c, NVMEFS_MAX_DEVICES);
		if (devs) /* NULL when the record ends inside it */
			memcpy(r->inode.layout.devs, devs, NVMEFS_MAX_DEVICES);
		r->inode.target_len = get16(&c);
		r->inode.target = get(&c, r->inode.target_len);
		if (c.bad || !nvmefs_rec_inode_ok(r))
			return -EINVAL;
		break;
	case NVMEFS_REC_INODE_FREE:
	case NVMEFS_REC_ORPHAN_ADD:
	case NVMEFS_REC_ORPHAN_DEL:
		r->ino.ino = get64(&c);
		if (r->ino.ino == 0)
			return -EINVAL;
		break;
	case NVMEFS_REC_DIRENT_ADD:
	case NVMEFS_REC_DIRENT_DEL:
		r->dirent.parent = get64(&c);
		r->dirent.child = get64(&c);
		r->dirent.type = (uint8_t)get16(&c);
		r->dirent.name_len = get16(&c);
		r->dirent.name = get(&c, r->dirent.name_len);
		if (c.bad || !nvmefs_dirent_name_ok(r->dirent.name, r->dirent.name_len) ||
		    r->dirent.parent == 0 || r->dirent.child == 0)
			return -EINVAL;
		break;
	case NVMEFS_REC_EXTENT:
		r->extent.ino = get64(&c);
		r->extent.slot = get32(&c);
		r->extent.flags = get32(&c);
		r->extent.comp_off = get64(&c);
		r->extent.dev_off = get64(&c);
		r->extent.len = get64(&c);
		if (r->extent.slot >= NVMEFS_MAX_DEVICES ||
		    r->extent.flags & ~NVMEFS_EXT_UNWRITTEN || r->extent.len == 0 ||
		    (r->extent.comp_off | r->extent.dev_off | r->extent.len) % NVMEFS_BLOCK ||
		    r->extent.comp_off + r->extent.len < r->extent.comp_off ||
		    r->extent.dev_off + r->extent.len < r->extent.dev_off)
			return -EINVAL;
		break;
	case NVMEFS_REC_PUNCH:
		r->punch.ino = get64(&c);
		r->punch.off = get64(&c);
		r->punch.len = get64(&c);
		if (r->punch.off % NVMEFS_BLOCK || r->punch.len == 0)
			return -EINVAL;
		break;
	case NVMEFS_REC_XATTR_SET:
	case NVMEFS_REC_XATTR_DEL:
		r->xattr.ino = get64(&c);
		r->xattr.name_len = get16(&c);
		get16(&c);
		r->xattr.value_len = get32(&c);
		r->xattr.name = get(&c, r->xattr.name_len);
		r->xattr.value = get(&c, r->xattr.value_len);
		if (c.bad ||
		    !nvmefs_name_ok(r->xattr.name, r->xattr.name_len, NVMEFS_XATTR_NAME_MAX) ||
		    r->xattr.value_len > NVMEFS_XATTR_VALUE_MAX ||
		    (r->type == NVMEFS_REC_XATTR_DEL && r->xattr.value_len))
			return -EINVAL;
		break;
	default:
		return -EINVAL;
	}
	if (c.bad || c.pos != size)
		return -EINVAL;
	return (long)size;
}
