// SPDX-License-Identifier: MIT
/*
 * Format v2's run objects (runs_i.h says where they sit): the header that
 * index, filter and manifest share, the bloom filter's probes, and the
 * manifest's encoder and strict decoder. No I/O: fs/store/runs.c reads and
 * writes them, tests/fuzz/fuzz_manifest.c feeds the decoder.
 */
#include <endian.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "runfmt_i.h"

/* The shared header, little-endian on disk. */
struct obj_disk {
	char magic[8];
	uint32_t version;
	uint32_t crc; /* of the whole object with this field zero */
	uint8_t jid[8];
	uint64_t id;
	uint32_t nblocks;
	uint32_t used;
	uint64_t count;
	uint64_t aux;
	uint32_t aux2;
	uint32_t reserved;
};
_Static_assert(sizeof(struct obj_disk) == NVMEFS_OBJ_HDR, "object header is 64 bytes");

/* A manifest's run, followed by its min and max keys. */
struct mrun_disk {
	uint64_t id;
	uint64_t start;
	uint64_t nentries;
	uint32_t level;
	uint32_t data_blocks;
	uint32_t index_blocks;
	uint32_t filter_blocks;
	uint16_t min_len;
	uint16_t max_len;
	uint32_t reserved;
};
_Static_assert(sizeof(struct mrun_disk) == 48, "manifest run record is 48 bytes");

/* A manifest's body starts with the committer's mark (store.h): its
 * length in u64 words, a reserved u32, the words; then the runs. */
struct mark_disk {
	uint32_t words;
	uint32_t reserved;
	uint64_t w[NVMEFS_MARK_WORDS]; /* replay, replay_seq, next_ino, ninodes, meta_bytes */
};
_Static_assert(sizeof(struct mark_disk) == 8 + 8 * NVMEFS_MARK_WORDS, "mark is packed");
#define MANIFEST_PREFIX ((uint32_t)sizeof(struct mark_disk))

#define CRC_OFF 12u

size_t nvmefs_obj_seal(void *buf, const char magic[8], const uint8_t uuid[16],
		       const struct nvmefs_obj *o)
{
	uint8_t *b = buf;
	uint32_t nb = nvmefs_obj_blocks(o->used);
	size_t len = (size_t)nb * NVMEFS_BLOCK;
	struct obj_disk d = {.version = htole32(NVMEFS_OBJ_VERSION),
			     .id = htole64(o->id),
			     .nblocks = htole32(nb),
			     .used = htole32(o->used),
			     .count = htole64(o->count),
			     .aux = htole64(o->aux),
			     .aux2 = htole32(o->aux2)};

	memcpy(d.magic, magic, 8);
	memcpy(d.jid, uuid, 8);
	memcpy(b, &d, sizeof(d));
	memset(b + NVMEFS_OBJ_HDR + o->used, 0, len - NVMEFS_OBJ_HDR - o->used);
	d.crc = htole32(nvmefs_crc32c_hole(b, len, CRC_OFF));
	memcpy(b + CRC_OFF, &d.crc, 4);
	return len;
}

/* Bytes [from, to) of b are all zero. */
static bool zeros(const uint8_t *b, size_t from, size_t to)
{
	for (size_t i = from; i < to; i++)
		if (b[i])
			return false;
	return true;
}

int nvmefs_obj_check(const void *buf, size_t len, const char magic[8], const uint8_t uuid[16],
		     struct nvmefs_obj *o)
{
	const uint8_t *b = buf;
	struct obj_disk d;
	size_t olen;

	if (len < NVMEFS_BLOCK)
		return -EINVAL;
	memcpy(&d, b, sizeof(d));
	if (memcmp(d.magic, magic, 8) != 0)
		return -EINVAL;
	*o = (struct nvmefs_obj){.id = le64toh(d.id),
				 .nblocks = le32toh(d.nblocks),
				 .used = le32toh(d.used),
				 .count = le64toh(d.count),
				 .aux = le64toh(d.aux),
				 .aux2 = le32toh(d.aux2)};
	olen = (size_t)o->nblocks * NVMEFS_BLOCK;
	if (o->nblocks == 0 || o->nblocks > len / NVMEFS_BLOCK)
		return -EINVAL;
	if (nvmefs_crc32c_hole(b, olen, CRC_OFF) != le32toh(d.crc))
		return -EINVAL;
	if (le32toh(d.version) != NVMEFS_OBJ_VERSION)
		return -EPROTO;
	if (memcmp(d.jid, uuid, 8) != 0 || d.reserved)
		return -EINVAL;
	if (o->used > olen - NVMEFS_OBJ_HDR || nvmefs_obj_blocks(o->used) != o->nblocks)
		return -EINVAL;
	return zeros(b, NVMEFS_OBJ_HDR + o->used, olen) ? 0 : -EINVAL;
}

/* ---- bloom filter ---- */

void nvmefs_filter_hash(const uint8_t *key, size_t klen, uint64_t h[2])
{
	XXH128_hash_t x = XXH3_128bits(key, klen);

	h[0] = x.low64;
	h[1] = x.high64 | 1; /* odd, nbits a multiple of 64: 7 distinct probes (probe) */
}

uint64_t nvmefs_filter_nbits(uint64_t n)
{
	uint64_t bits;

	if (n > (UINT64_MAX - 63) / NVMEFS_FILTER_BITS)
		return 0; /* n * 10, rounded up, would wrap (to 0 bits for some n) */
	bits = n * NVMEFS_FILTER_BITS;
	return bits < 64 ? 64 : (bits + 63) / 64 * 64;
}

/* Probe i of h: double hashing (Kirsch and Mitzenmacher), one XXH3 for
 * all NVMEFS_FILTER_PROBES: h0 + i * h1 computed mod 2^64 (it wraps),
 * then mod nbits. Still distinct: two probes' sums differ by (i - j) * h1
 * mod 2^64, not a multiple of 64 for h1 odd and |i - j| < 64, and 64
 * divides nbits. */
static uint64_t probe(uint64_t nbits, const uint64_t h[2], unsigned i)
{
	return (h[0] + i * h[1]) % nbits;
}

void nvmefs_filter_add(uint8_t *bits, uint64_t nbits, const uint64_t h[2])
{
	for (unsigned i = 0; i < NVMEFS_FILTER_PROBES; i++) {
		uint64_t p = probe(nbits, h, i);

		bits[p / 8] |= (uint8_t)(1u << (p % 8));
	}
}

bool nvmefs_filter_test(const uint8_t *bits, uint64_t nbits, const uint64_t h[2])
{
	for (unsigned i = 0; i < NVMEFS_FILTER_PROBES; i++) {
		uint64_t p = probe(nbits, h, i);

		if (!(bits[p / 8] & (1u << (p % 8))))
			return false;
	}
	return true;
}

/* ---- manifest ---- */

static size_t mrun_size(const struct nvmefs_run_meta *r)
{
	return sizeof(struct mrun_disk) + r->min_len + r->max_len;
}

static void mrun_put(uint8_t *p, const struct nvmefs_run_meta *r)
{
	struct mrun_disk d = {.id = htole64(r->id),
			      .start = htole64(r->start),
			      .nentries = htole64(r->nentries),
			      .level = htole32(r->level),
			      .data_blocks = htole32(r->data_blocks),
			      .index_blocks = htole32(r->index_blocks),
			      .filter_blocks = htole32(r->filter_blocks),
			      .min_len = htole16(r->min_len),
			      .max_len = htole16(r->max_len)};

	memcpy(p, &d, sizeof(d));
	memcpy(p + sizeof(d), r->min, r->min_len);
	memcpy(p + sizeof(d) + r->min_len, r->max, r->max_len);
}

ssize_t nvmefs_manifest_encode(const struct nvmefs_manifest *m, const uint8_t uuid[16], void *buf,
			       size_t cap)
{
	struct nvmefs_obj o = {.id = m->seq, .count = m->n, .aux = m->next_id};
	struct mark_disk md = {.words = htole32(NVMEFS_MARK_WORDS),
			       .w = {htole64(m->mark.replay), htole64(m->mark.replay_seq),
				     htole64(m->mark.next_ino), htole64(m->mark.ninodes),
				     htole64(m->mark.meta_bytes)}};
	uint8_t *b = buf;
	size_t used = MANIFEST_PREFIX;

	for (size_t i = 0; i < m->n; i++)
		used += mrun_size(&m->runs[i]);
	if (used > UINT32_MAX || (size_t)nvmefs_obj_blocks(used) * NVMEFS_BLOCK > cap)
		return -ENOSPC;
	memcpy(b + NVMEFS_OBJ_HDR, &md, MANIFEST_PREFIX);
	used = MANIFEST_PREFIX;
	for (size_t i = 0; i < m->n; i++) {
		mrun_put(b + NVMEFS_OBJ_HDR + used, &m->runs[i]);
		used += mrun_size(&m->runs[i]);
	}
	o.used = (uint32_t)used;
	return (ssize_t)nvmefs_obj_seal(b, NVMEFS_MANIFEST_MAGIC, uuid, &o);
}

/* One run record at p (avail bytes): its fields, checked alone. Returns
 * its size, or 0 when it is not a valid record. */
static size_t mrun_get(const uint8_t *p, size_t avail, struct nvmefs_run_meta *r)
{
	struct mrun_disk d;

	if (avail < sizeof(d))
		return 0;
	memcpy(&d, p, sizeof(d));
	*r = (struct nvmefs_run_meta){.id = le64toh(d.id),
				      .start = le64toh(d.start),
				      .nentries = le64toh(d.nentries),
				      .level = le32toh(d.level),
				      .data_blocks = le32toh(d.data_blocks),
				      .index_blocks = le32toh(d.index_blocks),
				      .filter_blocks = le32toh(d.filter_blocks),
				      .min_len = le16toh(d.min_len),
				      .max_len = le16toh(d.max_len)};
	/* An entry takes its header and a key of a byte at least: a count
	 * past that (whose filter size wraps) is not a run's. */
	if (d.reserved || r->level >= NVMEFS_RUN_LEVELS || !r->nentries || !r->data_blocks ||
	    r->nentries > (uint64_t)r->data_blocks * NVMEFS_BLOCK / (NVMEFS_RUN_ENT_HDR + 1) ||
	    !r->index_blocks || !r->filter_blocks || r->min_len > NVMEFS_KEY_MAX ||
	    r->max_len > NVMEFS_KEY_MAX || avail - sizeof(d) < (size_t)r->min_len + r->max_len)
		return 0;
	memcpy(r->min, p + sizeof(d), r->min_len);
	memcpy(r->max, p + sizeof(d) + r->min_len, r->max_len);
	if (nvmefs_key_check(r->min, r->min_len) || nvmefs_key_check(r->max, r->max_len) ||
	    nvmefs_key_cmp(r->min, r->min_len, r->max, r->max_len) > 0)
		return 0;
	return mrun_size(r);
}

int nvmefs_ext_by_start(const void *x, const void *y)
{
	const struct nvmefs_runs_ext *a = x, *b = y;

	return a->start < b->start ? -1 : a->start > b->start;
}

static int ext_by_id(const void *x, const void *y)
{
	const struct nvmefs_runs_ext *a = x, *b = y;

	return a->id < b->id ? -1 : a->id > b->id;
}

/* The runs' extents inside the run space of g, not overlapping, ids unique
 * and below next_id. */
static int check_extents(const struct nvmefs_manifest *m, const struct nvmefs_runs_geom *g)
{
	uint64_t lo = 2ull * nvmefs_runs_slot_blocks(g);
	struct nvmefs_runs_ext *e;
	int ret = 0;

	if (!m->n)
		return 0;
	e = calloc(m->n, sizeof(*e));
	if (!e)
		return -ENOMEM;
	for (size_t i = 0; i < m->n; i++) {
		const struct nvmefs_run_meta *r = &m->runs[i];

		e[i] = (struct nvmefs_runs_ext){.id = r->id,
						.start = r->start,
						.blocks = nvmefs_run_blocks(r),
						.done = true};
		if (r->id >= m->next_id || r->start < lo || r->start > g->blocks ||
		    e[i].blocks > g->blocks - r->start)
			ret = -EINVAL;
	}
	qsort(e, m->n, sizeof(*e), nvmefs_ext_by_start);
	for (size_t i = 1; i < m->n && !ret; i++)
		if (e[i - 1].start + e[i - 1].blocks > e[i].start)
			ret = -EINVAL;
	qsort(e, m->n, sizeof(*e), ext_by_id);
	for (size_t i = 1; i < m->n && !ret; i++)
		if (e[i - 1].id == e[i].id)
			ret = -EINVAL;
	free(e);
	return ret;
}

/* The mark at the body's start (o->used bytes at b + NVMEFS_OBJ_HDR). */
static int decode_mark(const uint8_t *b, const struct nvmefs_obj *o, struct nvmefs_mark *mk)
{
	struct mark_disk md;

	if (o->used < 8)
		return -EINVAL;
	memcpy(&md, b + NVMEFS_OBJ_HDR, 8);
	if (le32toh(md.words) > NVMEFS_MARK_WORDS)
		return -EPROTO; /* a newer committer's: not to be overwritten */
	if (le32toh(md.words) != NVMEFS_MARK_WORDS || md.reserved || o->used < MANIFEST_PREFIX)
		return -EINVAL;
	memcpy(&md, b + NVMEFS_OBJ_HDR, MANIFEST_PREFIX);
	*mk = (struct nvmefs_mark){.replay = le64toh(md.w[0]),
				   .replay_seq = le64toh(md.w[1]),
				   .next_ino = le64toh(md.w[2]),
				   .ninodes = le64toh(md.w[3]),
				   .meta_bytes = le64toh(md.w[4])};
	return 0;
}

/* The run records of an object o checked at b. */
static int decode_runs(const uint8_t *b, const struct nvmefs_obj *o,
		       const struct nvmefs_runs_geom *g, struct nvmefs_manifest *m)
{
	size_t pos = MANIFEST_PREFIX, sz;
	int ret = decode_mark(b, o, &m->mark);

	if (ret)
		return ret;
	if (o->count > (o->used - MANIFEST_PREFIX) / sizeof(struct mrun_disk))
		return -EINVAL;
	m->runs = o->count ? calloc(o->count, sizeof(*m->runs)) : NULL;
	if (o->count && !m->runs)
		return -ENOMEM;
	for (m->n = 0; m->n < o->count; m->n++) {
		sz = mrun_get(b + NVMEFS_OBJ_HDR + pos, o->used - pos, &m->runs[m->n]);
		if (!sz)
			return -EINVAL;
		pos += sz;
	}
	if (pos != o->used)
		return -EINVAL;
	return check_extents(m, g);
}

int nvmefs_manifest_decode(const void *buf, size_t len, const uint8_t uuid[16],
			   const struct nvmefs_runs_geom *g, struct nvmefs_manifest *m)
{
	struct nvmefs_obj o;
	int ret;

	*m = (struct nvmefs_manifest){0};
	ret = nvmefs_obj_check(buf, len, NVMEFS_MANIFEST_MAGIC, uuid, &o);
	if (ret)
		return ret;
	if (o.id == 0 || o.aux2)
		return -EINVAL;
	m->seq = o.id;
	m->next_id = o.aux;
	ret = decode_runs(buf, &o, g, m);
	if (ret)
		nvmefs_manifest_free(m);
	return ret;
}

void nvmefs_manifest_free(struct nvmefs_manifest *m)
{
	free(m->runs);
	*m = (struct nvmefs_manifest){0};
}
