// SPDX-License-Identifier: MIT
/*
 * Format v2's keys and sorted-run blocks (store.h and sorted_i.h say what they are).
 * Integers in keys are big-endian so that memcmp orders them; everything
 * else on disk is little-endian (docs/FORMAT.md).
 */
#include "sorted_i.h"

#include <endian.h>
#include <errno.h>
#include <string.h>
#include <xxhash.h>

/* ---- keys ---- */

static uint8_t *be64(uint8_t *p, uint64_t v)
{
	v = htobe64(v);
	memcpy(p, &v, 8);
	return p + 8;
}

static uint64_t get_be64(const uint8_t *p)
{
	uint64_t v;

	memcpy(&v, p, 8);
	return be64toh(v);
}

/* Kind and one 64-bit field: INODE and ORPHAN. */
static size_t key_ino(uint8_t *k, uint8_t kind, uint64_t ino)
{
	k[0] = kind;
	be64(k + 1, ino);
	return 9;
}

size_t nvmefs_key_inode(uint8_t *k, uint64_t ino)
{
	return key_ino(k, NVMEFS_KEY_INODE, ino);
}

size_t nvmefs_key_orphan(uint8_t *k, uint64_t ino)
{
	return key_ino(k, NVMEFS_KEY_ORPHAN, ino);
}

/* The name's place among its directory's entries: a fixed hash (XXH3, seed
 * 0), not the daemon's per-mount seeded one, since it is stored. */
static uint64_t name_hash(const void *name, size_t len)
{
	return XXH3_64bits(name, len);
}

size_t nvmefs_key_dirent(uint8_t *k, uint64_t parent, const char *name, size_t len)
{
	if (len == 0 || len > NVMEFS_NAME_MAX)
		return 0;
	k[0] = NVMEFS_KEY_DIRENT;
	be64(be64(k + 1, parent), name_hash(name, len));
	memcpy(k + 17, name, len);
	return 17 + len;
}

size_t nvmefs_key_dcookie(uint8_t *k, uint64_t parent, uint64_t cookie)
{
	k[0] = NVMEFS_KEY_DCOOKIE;
	be64(be64(k + 1, parent), cookie);
	return 17;
}

size_t nvmefs_key_extent(uint8_t *k, uint64_t ino, uint32_t slot, uint64_t comp_off)
{
	if (slot >= NVMEFS_MAX_DEVICES)
		return 0;
	k[0] = NVMEFS_KEY_EXTENT;
	be64(k + 1, ino);
	k[9] = (uint8_t)slot;
	be64(k + 10, comp_off);
	return 18;
}

size_t nvmefs_key_xattr(uint8_t *k, uint64_t ino, const char *name, size_t len)
{
	if (len == 0 || len > NVMEFS_XATTR_NAME_MAX)
		return 0;
	k[0] = NVMEFS_KEY_XATTR;
	be64(k + 1, ino);
	memcpy(k + 9, name, len);
	return 9 + len;
}

size_t nvmefs_key_free(uint8_t *k, uint32_t member, uint64_t end)
{
	if (member >= NVMEFS_MAX_DEVICES)
		return 0;
	k[0] = NVMEFS_KEY_FREE;
	k[1] = (uint8_t)member;
	be64(k + 2, end);
	return 10;
}

int nvmefs_key_cmp(const uint8_t *a, size_t alen, const uint8_t *b, size_t blen)
{
	int c = memcmp(a, b, alen < blen ? alen : blen);

	if (c)
		return c;
	return alen < blen ? -1 : alen > blen;
}

int nvmefs_key_check(const uint8_t *k, size_t len)
{
	if (len < 1)
		return -EINVAL;
	switch (k[0]) {
	case NVMEFS_KEY_INODE:
	case NVMEFS_KEY_ORPHAN:
		return len == 9 ? 0 : -EINVAL;
	case NVMEFS_KEY_DIRENT:
		if (len < 18 || len > 17 + NVMEFS_NAME_MAX)
			return -EINVAL;
		return get_be64(k + 9) == name_hash(k + 17, len - 17) ? 0 : -EINVAL;
	case NVMEFS_KEY_DCOOKIE:
		return len == 17 ? 0 : -EINVAL;
	case NVMEFS_KEY_EXTENT:
		return len == 18 && k[9] < NVMEFS_MAX_DEVICES ? 0 : -EINVAL;
	case NVMEFS_KEY_XATTR:
		return len >= 10 && len <= 9 + NVMEFS_XATTR_NAME_MAX ? 0 : -EINVAL;
	case NVMEFS_KEY_FREE:
		return len == 10 && k[1] < NVMEFS_MAX_DEVICES ? 0 : -EINVAL;
	default:
		return -EINVAL;
	}
}

/* ---- run blocks ---- */

/* Header fields' offsets. */
enum {
	H_VERSION = 8,
	H_CRC = 12,
	H_JID = 16,
	H_RUN = 24,
	H_INDEX = 32,
	H_LEVEL = 40,
	H_NBLOCKS = 44,
	H_NENTRIES = 48,
	H_USED = 52,
	H_END = 56, /* reserved (zero) to NVMEFS_RUN_HDR */
};

static void put32(uint8_t *p, uint32_t v)
{
	v = htole32(v);
	memcpy(p, &v, 4);
}

static void put64(uint8_t *p, uint64_t v)
{
	v = htole64(v);
	memcpy(p, &v, 8);
}

static uint32_t get32(const uint8_t *p)
{
	uint32_t v;

	memcpy(&v, p, 4);
	return le32toh(v);
}

static uint64_t get64(const uint8_t *p)
{
	uint64_t v;

	memcpy(&v, p, 8);
	return le64toh(v);
}

static uint32_t run_crc(const uint8_t *b, size_t len)
{
	return nvmefs_crc32c_hole(b, len, H_CRC);
}

/* An entry's header at p: key length, flags, value length. */
static void ent_hdr(const uint8_t *p, size_t *klen, uint8_t *flags, size_t *vlen)
{
	uint16_t k;

	memcpy(&k, p, 2);
	*klen = le16toh(k);
	*flags = p[2];
	*vlen = get32(p + 4);
}

void nvmefs_run_start(struct nvmefs_run_writer *w, void *buf, size_t cap)
{
	*w = (struct nvmefs_run_writer){.buf = buf, .cap = cap, .used = NVMEFS_RUN_HDR};
}

int nvmefs_run_add(struct nvmefs_run_writer *w, const uint8_t *key, size_t klen, const void *val,
		   size_t vlen, bool tomb)
{
	size_t need = NVMEFS_RUN_ENT_HDR + klen + vlen;
	uint8_t *p;
	uint16_t k16;

	if (nvmefs_key_check(key, klen) || vlen > NVMEFS_XATTR_VALUE_MAX || (tomb && vlen))
		return -EINVAL;
	if (w->n) {
		size_t lk, lv;
		uint8_t lf;

		ent_hdr(w->buf + w->last, &lk, &lf, &lv);
		if (nvmefs_key_cmp(w->buf + w->last + NVMEFS_RUN_ENT_HDR, lk, key, klen) >= 0)
			return -EINVAL;
	}
	if (need > w->cap - w->used)
		return -ENOSPC;
	p = w->buf + w->used;
	k16 = htole16((uint16_t)klen);
	memcpy(p, &k16, 2);
	p[2] = tomb ? NVMEFS_RUN_TOMB : 0;
	p[3] = 0;
	put32(p + 4, (uint32_t)vlen);
	memcpy(p + NVMEFS_RUN_ENT_HDR, key, klen);
	if (vlen)
		memcpy(p + NVMEFS_RUN_ENT_HDR + klen, val, vlen);
	w->last = w->used;
	w->used += need;
	w->n++;
	return 0;
}

size_t nvmefs_run_finish(struct nvmefs_run_writer *w, const uint8_t uuid[16], uint64_t run_id,
			 uint64_t index, uint32_t level)
{
	size_t len = (w->used + NVMEFS_BLOCK - 1) / NVMEFS_BLOCK * NVMEFS_BLOCK;
	uint8_t *b = w->buf;

	if (!w->n)
		return 0;
	memset(b + w->used, 0, len - w->used);
	memset(b, 0, NVMEFS_RUN_HDR);
	memcpy(b, NVMEFS_RUN_MAGIC, 8);
	put32(b + H_VERSION, NVMEFS_RUN_VERSION);
	memcpy(b + H_JID, uuid, 8);
	put64(b + H_RUN, run_id);
	put64(b + H_INDEX, index);
	put32(b + H_LEVEL, level);
	put32(b + H_NBLOCKS, (uint32_t)(len / NVMEFS_BLOCK));
	put32(b + H_NENTRIES, w->n);
	put32(b + H_USED, (uint32_t)(w->used - NVMEFS_RUN_HDR));
	put32(b + H_CRC, run_crc(b, len));
	return len;
}

size_t nvmefs_run_peek_len(const void *hdr)
{
	const uint8_t *b = hdr;
	uint32_t n;

	if (memcmp(b, NVMEFS_RUN_MAGIC, 8) != 0)
		return 0;
	n = get32(b + H_NBLOCKS);
	return n >= 1 && n <= NVMEFS_RUN_BLOCKS_MAX ? (size_t)n * NVMEFS_BLOCK : 0;
}

/* Every entry within used bytes, keys valid and increasing; the count. */
static int check_run_entries(const uint8_t *b, const struct nvmefs_run_hdr *h)
{
	const uint8_t *prev = NULL;
	size_t pos = NVMEFS_RUN_HDR, end = NVMEFS_RUN_HDR + h->used, plen = 0;
	uint32_t n = 0;

	while (pos < end) {
		size_t klen, vlen;
		uint8_t flags;

		if (end - pos < NVMEFS_RUN_ENT_HDR)
			return -EINVAL;
		ent_hdr(b + pos, &klen, &flags, &vlen);
		if ((flags & ~NVMEFS_RUN_TOMB) || b[pos + 3] || vlen > NVMEFS_XATTR_VALUE_MAX ||
		    ((flags & NVMEFS_RUN_TOMB) && vlen) ||
		    klen + vlen > end - pos - NVMEFS_RUN_ENT_HDR)
			return -EINVAL;
		pos += NVMEFS_RUN_ENT_HDR;
		if (nvmefs_key_check(b + pos, klen) ||
		    (prev && nvmefs_key_cmp(prev, plen, b + pos, klen) >= 0))
			return -EINVAL;
		prev = b + pos;
		plen = klen;
		pos += klen + vlen;
		n++;
	}
	return n == h->nentries ? 0 : -EINVAL;
}

int nvmefs_run_decode(const void *buf, size_t len, const uint8_t uuid[16], uint64_t run_id,
		      uint64_t index, struct nvmefs_run_hdr *h)
{
	const uint8_t *b = buf;
	size_t blen;

	if (len < NVMEFS_BLOCK || !(blen = nvmefs_run_peek_len(b)) || blen > len)
		return -EINVAL;
	if (run_crc(b, blen) != get32(b + H_CRC))
		return -EINVAL;
	if (get32(b + H_VERSION) != NVMEFS_RUN_VERSION)
		return -EPROTO;
	*h = (struct nvmefs_run_hdr){.run_id = get64(b + H_RUN),
				     .index = get64(b + H_INDEX),
				     .level = get32(b + H_LEVEL),
				     .nblocks = get32(b + H_NBLOCKS),
				     .nentries = get32(b + H_NENTRIES),
				     .used = get32(b + H_USED)};
	if (memcmp(b + H_JID, uuid, 8) || h->run_id != run_id || h->index != index ||
	    h->nentries == 0 || h->used > blen - NVMEFS_RUN_HDR)
		return -EINVAL;
	/* The smallest length that holds the entries: no empty block after. */
	if ((NVMEFS_RUN_HDR + h->used + NVMEFS_BLOCK - 1) / NVMEFS_BLOCK != h->nblocks)
		return -EINVAL;
	for (size_t i = H_END; i < NVMEFS_RUN_HDR; i++)
		if (b[i])
			return -EINVAL;
	for (size_t i = NVMEFS_RUN_HDR + h->used; i < blen; i++)
		if (b[i])
			return -EINVAL;
	return check_run_entries(b, h);
}

bool nvmefs_run_next(const void *buf, const struct nvmefs_run_hdr *h, size_t *pos,
		     struct nvmefs_run_ent *e)
{
	const uint8_t *b = buf;
	size_t at = *pos ? *pos : NVMEFS_RUN_HDR;
	uint8_t flags;

	if (at >= NVMEFS_RUN_HDR + h->used)
		return false;
	ent_hdr(b + at, &e->klen, &flags, &e->vlen);
	e->tomb = flags & NVMEFS_RUN_TOMB;
	e->key = b + at + NVMEFS_RUN_ENT_HDR;
	e->val = e->key + e->klen;
	*pos = at + NVMEFS_RUN_ENT_HDR + e->klen + e->vlen;
	return true;
}
