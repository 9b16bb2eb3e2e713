// SPDX-License-Identifier: MIT
/*
 * Format v2's keys and run blocks (fs/store/sorted_i.h), without a volume:
 *  - every key kind: built, checked, and ordered by nvmefs_key_cmp exactly
 *    as its fields (random tuples sorted both ways must agree);
 *  - names and slots out of limits refused; a DIRENT whose hash does not
 *    match its name refused;
 *  - run blocks: random sorted entries of every kind (tombstones, empty and
 *    64 KiB values) written, sealed, decoded and read back in order, across
 *    several blocks when one fills; out-of-order keys and bad entries
 *    refused by the writer;
 *  - the decoder refuses every single-byte change (crc), and with the crc
 *    re-sealed, keys out of order, entries past the used bytes, a wrong run
 *    or index, bytes after the entries, a length that is not the smallest.
 */
#include <endian.h>
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "sorted_i.h"
#include "test_util.h"

static uint64_t rng;

static uint64_t rnd(void)
{
	rng = rng * 6364136223846793005ull + 1442695040888963407ull;
	return rng >> 17;
}

static const uint8_t uuid[16] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};

/* A random key of a random kind, with its fields for the order check. */
struct tkey {
	uint8_t k[NVMEFS_KEY_MAX];
	size_t len;
	uint64_t a, b; /* kind-specific fields, in order of significance */
	char name[NVMEFS_NAME_MAX + 1];
	size_t nlen;
};

static void rand_name(struct tkey *t, size_t max)
{
	t->nlen = 1 + rnd() % (rnd() % 4 ? 12 : max);
	for (size_t i = 0; i < t->nlen; i++)
		t->name[i] = (char)('a' + rnd() % 3); /* few letters: shared prefixes */
}

static void rand_key(struct tkey *t)
{
	unsigned kind = 1 + rnd() % 7;

	memset(t, 0, sizeof(*t));
	t->a = rnd() % 5;
	t->b = rnd() % 5 ? rnd() % 40 : rnd() << 20;
	switch (kind) {
	case NVMEFS_KEY_INODE:
		t->len = nvmefs_key_inode(t->k, t->a);
		break;
	case NVMEFS_KEY_DIRENT:
		rand_name(t, NVMEFS_NAME_MAX);
		t->len = nvmefs_key_dirent(t->k, t->a, t->name, t->nlen);
		break;
	case NVMEFS_KEY_DCOOKIE:
		t->len = nvmefs_key_dcookie(t->k, t->a, t->b);
		break;
	case NVMEFS_KEY_EXTENT:
		t->len = nvmefs_key_extent(t->k, t->a, (uint32_t)(t->b % NVMEFS_MAX_DEVICES), t->b);
		break;
	case NVMEFS_KEY_XATTR:
		rand_name(t, NVMEFS_XATTR_NAME_MAX);
		t->len = nvmefs_key_xattr(t->k, t->a, t->name, t->nlen);
		break;
	case NVMEFS_KEY_ORPHAN:
		t->len = nvmefs_key_orphan(t->k, t->a);
		break;
	default:
		t->len = nvmefs_key_free(t->k, (uint32_t)(t->a % NVMEFS_MAX_DEVICES), t->b);
		break;
	}
}

static int sign(int v)
{
	return (v > 0) - (v < 0);
}

static int cmp_u64(uint64_t x, uint64_t y)
{
	return (x > y) - (x < y);
}

static int cmp_bytes(const char *x, size_t xl, const char *y, size_t yl)
{
	int c = memcmp(x, y, xl < yl ? xl : yl);

	return c ? sign(c) : cmp_u64(xl, yl);
}

/* The order the fields say (what nvmefs_key_cmp must agree with). */
static int field_cmp(const struct tkey *x, const struct tkey *y)
{
	uint8_t kx = x->k[0], ky = y->k[0];
	int c = cmp_u64(kx, ky);

	if (c)
		return c;
	switch (kx) {
	case NVMEFS_KEY_DIRENT: {
		uint64_t hx, hy;

		memcpy(&hx, x->k + 9, 8);
		memcpy(&hy, y->k + 9, 8);
		if ((c = cmp_u64(x->a, y->a)) || (c = cmp_u64(be64toh(hx), be64toh(hy))))
			return c;
		return cmp_bytes(x->name, x->nlen, y->name, y->nlen);
	}
	case NVMEFS_KEY_XATTR:
		if ((c = cmp_u64(x->a, y->a)))
			return c;
		return cmp_bytes(x->name, x->nlen, y->name, y->nlen);
	case NVMEFS_KEY_EXTENT:
		if ((c = cmp_u64(x->a, y->a)) ||
		    (c = cmp_u64(x->b % NVMEFS_MAX_DEVICES, y->b % NVMEFS_MAX_DEVICES)))
			return c;
		return cmp_u64(x->b, y->b);
	case NVMEFS_KEY_FREE:
		if ((c = cmp_u64(x->a % NVMEFS_MAX_DEVICES, y->a % NVMEFS_MAX_DEVICES)))
			return c;
		return cmp_u64(x->b, y->b);
	default:
		if ((c = cmp_u64(x->a, y->a)))
			return c;
		return cmp_u64(x->b, y->b) * (kx == NVMEFS_KEY_DCOOKIE);
	}
}

static void test_keys(void)
{
	uint8_t k[NVMEFS_KEY_MAX];
	char long_name[NVMEFS_NAME_MAX + 2];
	unsigned pairs = 0;

	for (unsigned i = 0; i < 200000; i++) {
		struct tkey x, y;

		rand_key(&x);
		rand_key(&y);
		CHECKF(x.len && nvmefs_key_check(x.k, x.len) == 0, "kind %u key refused", x.k[0]);
		CHECKF(sign(nvmefs_key_cmp(x.k, x.len, y.k, y.len)) == field_cmp(&x, &y),
		       "kinds %u/%u: the bytes' order is not the fields'", x.k[0], y.k[0]);
		pairs++;
	}
	memset(long_name, 'x', sizeof(long_name));
	CHECK(nvmefs_key_dirent(k, 1, long_name, NVMEFS_NAME_MAX + 1) == 0);
	CHECK(nvmefs_key_dirent(k, 1, long_name, 0) == 0);
	CHECK(nvmefs_key_xattr(k, 1, long_name, NVMEFS_XATTR_NAME_MAX + 1) == 0);
	CHECK(nvmefs_key_extent(k, 1, NVMEFS_MAX_DEVICES, 0) == 0);
	CHECK(nvmefs_key_free(k, NVMEFS_MAX_DEVICES, 0) == 0);
	/* A DIRENT's hash must be its name's. */
	size_t n = nvmefs_key_dirent(k, 7, "name", 4);
	CHECK(nvmefs_key_check(k, n) == 0);
	k[n - 1] ^= 1;
	CHECK_ERR(nvmefs_key_check(k, n), -EINVAL);
	/* Lengths and kinds that no builder makes. */
	n = nvmefs_key_inode(k, 3);
	CHECK_ERR(nvmefs_key_check(k, n + 1), -EINVAL);
	CHECK_ERR(nvmefs_key_check(k, 0), -EINVAL);
	k[0] = 0;
	CHECK_ERR(nvmefs_key_check(k, n), -EINVAL);
	k[0] = 8;
	CHECK_ERR(nvmefs_key_check(k, n), -EINVAL);
	printf("keys: %u random pairs ordered as their fields\n", pairs);
}

static int qsort_tkey(const void *a, const void *b)
{
	const struct tkey *x = a, *y = b;

	return nvmefs_key_cmp(x->k, x->len, y->k, y->len);
}

#define NKEYS 3000

/* Random keys, sorted and deduplicated; returns the count. */
static unsigned sorted_keys(struct tkey *keys)
{
	unsigned n = 0;

	for (unsigned i = 0; i < NKEYS; i++)
		rand_key(&keys[i]);
	qsort(keys, NKEYS, sizeof(keys[0]), qsort_tkey);
	for (unsigned i = 0; i < NKEYS; i++)
		if (!n || nvmefs_key_cmp(keys[n - 1].k, keys[n - 1].len, keys[i].k, keys[i].len))
			keys[n++] = keys[i];
	return n;
}

/* Entry i's value: empty for tombstones, else vlen(i) bytes of a pattern. */
static size_t vlen_of(unsigned i)
{
	return i % 97 == 5 ? NVMEFS_XATTR_VALUE_MAX : i % 3 ? (i * 37) % 300 : 0;
}

static bool tomb_of(unsigned i)
{
	return i % 3 == 0;
}

static void fill_val(uint8_t *v, unsigned i, size_t len)
{
	for (size_t j = 0; j < len; j++)
		v[j] = (uint8_t)(i * 131 + j);
}

static void test_runs(void)
{
	struct tkey *keys = calloc(NKEYS, sizeof(*keys));
	size_t cap = NVMEFS_RUN_BLOCKS_MAX * NVMEFS_BLOCK;
	uint8_t *buf = malloc(cap), *val = malloc(NVMEFS_XATTR_VALUE_MAX);
	unsigned n, at = 0, blocks = 0, multi = 0;

	CHECK(keys && buf && val);
	n = sorted_keys(keys);
	while (at < n) {
		struct nvmefs_run_writer w;
		struct nvmefs_run_hdr h;
		struct nvmefs_run_ent e;
		unsigned first = at;
		size_t len, pos = 0;
		int ret;

		/* Blocks of 1 to 4 KiB blocks, or the largest for big values. */
		nvmefs_run_start(&w, buf,
				 vlen_of(at) > 8192 ? cap : (1 + rnd() % 4) * NVMEFS_BLOCK);
		while (at < n) {
			fill_val(val, at, vlen_of(at));
			ret = nvmefs_run_add(&w, keys[at].k, keys[at].len, val,
					     tomb_of(at) ? 0 : vlen_of(at), tomb_of(at));
			if (ret == -ENOSPC)
				break;
			CHECK_ERR(ret, 0);
			at++;
		}
		CHECKF(at > first, "entry %u fits no block", at);
		if (at < n && at > first) /* the writer keeps the order */
			CHECK_ERR(nvmefs_run_add(&w, keys[first].k, keys[first].len, NULL, 0, true),
				  -EINVAL);
		len = nvmefs_run_finish(&w, uuid, 42, blocks, 1);
		CHECK(len && len % NVMEFS_BLOCK == 0 && len == nvmefs_run_peek_len(buf));
		multi += len > NVMEFS_BLOCK;
		CHECK_ERR(nvmefs_run_decode(buf, cap, uuid, 42, blocks, &h), 0);
		CHECK(h.nentries == at - first && h.level == 1 && h.nblocks * NVMEFS_BLOCK == len);
		for (unsigned i = first; i < at; i++) {
			size_t vl = tomb_of(i) ? 0 : vlen_of(i);

			CHECK(nvmefs_run_next(buf, &h, &pos, &e));
			CHECK(e.klen == keys[i].len && !memcmp(e.key, keys[i].k, e.klen));
			CHECK(e.tomb == tomb_of(i) && e.vlen == vl);
			fill_val(val, i, vl);
			CHECK(!memcmp(e.val, val, vl));
		}
		CHECK(!nvmefs_run_next(buf, &h, &pos, &e));
		blocks++;
	}
	printf("runs: %u entries in %u blocks (%u longer than 4 KiB)\n", n, blocks, multi);
	CHECK(multi > 0);
	free(keys);
	free(buf);
	free(val);
}

/* What the writer refuses. */
static void test_writer_refuses(void)
{
	uint8_t buf[NVMEFS_BLOCK], k[NVMEFS_KEY_MAX], v[8] = {0};
	struct nvmefs_run_writer w;
	size_t n = nvmefs_key_inode(k, 5);

	nvmefs_run_start(&w, buf, sizeof(buf));
	CHECK(nvmefs_run_finish(&w, uuid, 1, 0, 0) == 0);	       /* empty: nothing to seal */
	CHECK_ERR(nvmefs_run_add(&w, k, n, v, 8, true), -EINVAL);      /* tombstone with a value */
	CHECK_ERR(nvmefs_run_add(&w, k, n + 1, v, 8, false), -EINVAL); /* bad key */
	CHECK_ERR(nvmefs_run_add(&w, k, n, v, NVMEFS_XATTR_VALUE_MAX + 1, false), -EINVAL);
	CHECK_ERR(nvmefs_run_add(&w, k, n, v, 8, false), 0);
	CHECK_ERR(nvmefs_run_add(&w, k, n, v, 8, false), -EINVAL); /* the same key again */
	n = nvmefs_key_inode(k, 4);
	CHECK_ERR(nvmefs_run_add(&w, k, n, v, 8, false), -EINVAL); /* a smaller one */
}

/* Re-seal the crc of a run block of len bytes (what a hostile writer can). */
static void reseal(uint8_t *b, size_t len)
{
	uint32_t crc;

	memset(b + 12, 0, 4);
	crc = htole32(nvmefs_crc32c(b, len));
	memcpy(b + 12, &crc, 4);
}

/* A two-entry block: INODE 1 and INODE 2 with 8-byte values. */
static size_t small_block(uint8_t *buf)
{
	uint8_t k[NVMEFS_KEY_MAX], v[8] = {1, 2, 3, 4, 5, 6, 7, 8};
	struct nvmefs_run_writer w;
	size_t n;

	nvmefs_run_start(&w, buf, NVMEFS_BLOCK);
	n = nvmefs_key_inode(k, 1);
	CHECK_ERR(nvmefs_run_add(&w, k, n, v, 8, false), 0);
	n = nvmefs_key_inode(k, 2);
	CHECK_ERR(nvmefs_run_add(&w, k, n, v, 8, false), 0);
	return nvmefs_run_finish(&w, uuid, 9, 3, 0);
}

static void test_decoder_refuses(void)
{
	uint8_t buf[NVMEFS_BLOCK], bad[NVMEFS_BLOCK];
	struct nvmefs_run_hdr h;
	size_t len = small_block(buf);
	unsigned flips = 0;

	CHECK(len == NVMEFS_BLOCK);
	CHECK_ERR(nvmefs_run_decode(buf, len, uuid, 9, 3, &h), 0);
	/* Any byte changed: the crc (or the magic, for peeking) refuses it. */
	for (size_t i = 0; i < len; i++) {
		memcpy(bad, buf, len);
		bad[i] ^= (uint8_t)(1 + rnd() % 255);
		CHECKF(nvmefs_run_decode(bad, len, uuid, 9, 3, &h) != 0,
		       "byte %zu changed: accepted", i);
		flips++;
	}
	/* Not this volume, run or place. */
	{
		uint8_t other[16];

		memcpy(other, uuid, 16);
		other[3] ^= 0x40;
		CHECK_ERR(nvmefs_run_decode(buf, len, other, 9, 3, &h), -EINVAL);
	}
	CHECK_ERR(nvmefs_run_decode(buf, len, uuid, 8, 3, &h), -EINVAL);
	CHECK_ERR(nvmefs_run_decode(buf, len, uuid, 9, 4, &h), -EINVAL);
	CHECK_ERR(nvmefs_run_decode(buf, len - 1, uuid, 9, 3, &h), -EINVAL);
	/* Re-sealing what the writer sealed changes nothing (so the refusals
	 * below are the structure's, not the crc's). */
	memcpy(bad, buf, len);
	reseal(bad, len);
	CHECK(memcmp(bad, buf, len) == 0);
	/* Re-sealed, the structure is still checked. Header: 64 bytes; first
	 * entry at 64 (8 + 9 + 8 bytes), second at 89, used 50. */
	memcpy(bad, buf, len);
	bad[64 + 8 + 8] = 3; /* the first key becomes INODE 3: out of order */
	reseal(bad, len);
	CHECK_ERR(nvmefs_run_decode(bad, len, uuid, 9, 3, &h), -EINVAL);
	memcpy(bad, buf, len);
	bad[89 + 4] = 40; /* the second value runs past the used bytes */
	reseal(bad, len);
	CHECK_ERR(nvmefs_run_decode(bad, len, uuid, 9, 3, &h), -EINVAL);
	memcpy(bad, buf, len);
	bad[200] = 1; /* a byte after the entries */
	reseal(bad, len);
	CHECK_ERR(nvmefs_run_decode(bad, len, uuid, 9, 3, &h), -EINVAL);
	memcpy(bad, buf, len);
	bad[48] = 3; /* three entries claimed */
	reseal(bad, len);
	CHECK_ERR(nvmefs_run_decode(bad, len, uuid, 9, 3, &h), -EINVAL);
	memcpy(bad, buf, len);
	bad[64 + 2] = 0x80; /* an unknown flag */
	reseal(bad, len);
	CHECK_ERR(nvmefs_run_decode(bad, len, uuid, 9, 3, &h), -EINVAL);
	memcpy(bad, buf, len);
	bad[8] = 3; /* a later version */
	reseal(bad, len);
	CHECK_ERR(nvmefs_run_decode(bad, len, uuid, 9, 3, &h), -EPROTO);
	{
		uint8_t two[2 * NVMEFS_BLOCK];

		memcpy(two, buf, len); /* two blocks claimed for 50 bytes */
		memset(two + len, 0, NVMEFS_BLOCK);
		two[44] = 2;
		reseal(two, sizeof(two));
		CHECK_ERR(nvmefs_run_decode(two, sizeof(two), uuid, 9, 3, &h), -EINVAL);
	}
	printf("decoder: %u single-byte changes refused\n", flips);
}

int main(void)
{
	rng = test_seed();
	printf("seed %" PRIu64 " (rerun with NVMEFS_TEST_SEED=%" PRIu64 ")\n", rng, rng);
	test_keys();
	test_runs();
	test_writer_refuses();
	test_decoder_refuses();
	return test_result();
}
