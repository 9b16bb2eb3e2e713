// SPDX-License-Identifier: MIT
/*
 * Layout math against a brute-force model.
 *
 * The model walks a range one byte at a time: byte o is in unit o / chunk,
 * slot unit % count, row unit / count, component offset
 * row * chunk + o % chunk. nvmefs_layout_map() must produce, in order,
 * maximal per-chunk pieces whose every byte agrees with the model, covering
 * the range exactly; file_off() must invert the map for every byte, and
 * comp_size() must equal the model's highest component byte + 1.
 *
 * Grid: devices 1,2,3,4,8,16 x chunks 4K,64K,1M,4M x ranges that are
 * aligned, unaligned, empty, one byte, crossing chunk and stripe boundaries.
 * Then random cases; the seed is printed and can be forced with
 * NVMEFS_TEST_SEED.
 */
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "nvmefs/layout.h"
#include "test_util.h"

struct model {
	uint32_t slot;
	uint64_t comp_off;
};

static struct model model_byte(const struct nvmefs_layout *l, uint64_t o)
{
	uint64_t unit = o / l->chunk_size;
	struct model m = {
		.slot = (uint32_t)(unit % l->stripe_count),
		.comp_off = unit / l->stripe_count * l->chunk_size + o % l->chunk_size,
	};
	return m;
}

/* Byte k of segment s (which starts at file offset pos) against the model. */
static void check_byte(const struct nvmefs_layout *l, const struct nvmefs_segment *s, uint64_t pos,
		       uint64_t k)
{
	struct model m = model_byte(l, pos + k);

	CHECKF(m.slot == s->slot && m.comp_off == s->comp_off + k,
	       "byte %" PRIu64 ": model slot %u comp %" PRIu64 ", map slot %u comp %" PRIu64,
	       pos + k, m.slot, m.comp_off, s->slot, s->comp_off + k);
	CHECK(nvmefs_layout_file_off(l, s->slot, s->comp_off + k) == pos + k);
}

/*
 * Check one range. The byte walk is exact for ranges up to 2 MiB; for
 * longer ones every byte of each segment is checked only at the segment's
 * ends and one interior point (the segment is contiguous by construction
 * if its ends agree with the model and it does not cross a chunk).
 */
static void check_range(const struct nvmefs_layout *l, uint64_t off, uint64_t len)
{
	uint64_t need = nvmefs_layout_nsegs(l, off, len);
	struct nvmefs_segment *segs = calloc(need + 1, sizeof(*segs));
	uint64_t n, pos = off;
	bool bytewalk = len <= (2u << 20);

	CHECK(segs);
	n = nvmefs_layout_map(l, off, len, segs, need + 1);
	CHECKF(n == need,
	       "nsegs %" PRIu64 " != map %" PRIu64 " (off %" PRIu64 " len %" PRIu64
	       " chunk %u count %u)",
	       need, n, off, len, l->chunk_size, l->stripe_count);
	/* Too small an array: the count is still right and nothing overflows. */
	if (need > 1)
		CHECK(nvmefs_layout_map(l, off, len, segs, 1) == need);
	n = nvmefs_layout_map(l, off, len, segs, need + 1);
	for (uint64_t i = 0; i < n; i++) {
		const struct nvmefs_segment *s = &segs[i];
		uint64_t probes[3] = {0, s->len / 2, s->len - 1};

		CHECKF(s->len > 0, "empty segment %" PRIu64, i);
		CHECKF(s->buf_off == pos - off,
		       "segment %" PRIu64 " buf_off %" PRIu64 " expected %" PRIu64, i, s->buf_off,
		       pos - off);
		CHECK(s->dev == l->devs[s->slot]);
		/* Never crosses a chunk, and is maximal: ends at a chunk end or the range end. */
		CHECK(s->comp_off / l->chunk_size == (s->comp_off + s->len - 1) / l->chunk_size);
		CHECK((pos + s->len) % l->chunk_size == 0 || pos + s->len == off + len);
		if (bytewalk) {
			for (uint64_t k = 0; k < s->len; k++)
				check_byte(l, s, pos, k);
		} else {
			for (unsigned p = 0; p < 3; p++)
				check_byte(l, s, pos, probes[p]);
		}
		pos += s->len;
	}
	CHECK(pos == off + len);
	free(segs);
}

/* comp_size against the model: highest component byte + 1 per slot. */
static void check_comp_size(const struct nvmefs_layout *l, uint64_t size)
{
	uint64_t want[NVMEFS_MAX_DEVICES] = {0};

	/* The last byte of each chunk (and of the file) is the highest in its row. */
	for (uint64_t o = 0; o < size; o += l->chunk_size) {
		uint64_t last = o + l->chunk_size - 1 < size ? o + l->chunk_size - 1 : size - 1;
		struct model m = model_byte(l, last);

		if (m.comp_off + 1 > want[m.slot])
			want[m.slot] = m.comp_off + 1;
	}
	for (uint32_t s = 0; s < l->stripe_count; s++)
		CHECKF(nvmefs_layout_comp_size(l, s, size) == want[s],
		       "comp_size(slot %u, size %" PRIu64 ") = %" PRIu64 ", model %" PRIu64, s,
		       size, nvmefs_layout_comp_size(l, s, size), want[s]);
}

static void test_check_and_init(void)
{
	struct nvmefs_layout l;

	CHECK(nvmefs_layout_init(&l, 1 << 20, 4, 1) == 0);
	CHECK(l.devs[0] == 1 && l.devs[1] == 2 && l.devs[2] == 3 && l.devs[3] == 0);
	CHECK(nvmefs_layout_init(&l, 3 << 20, 4, 0) == -EINVAL); /* not a power of two */
	CHECK(nvmefs_layout_init(&l, 2048, 4, 0) == -EINVAL);	 /* below the minimum */
	CHECK(nvmefs_layout_init(&l, 1 << 20, 0, 0) == -EINVAL);
	CHECK(nvmefs_layout_init(&l, 1 << 20, NVMEFS_MAX_DEVICES + 1, 0) == -EINVAL);
	CHECK(nvmefs_layout_init(&l, 1 << 20, 4, 0) == 0);
	l.devs[2] = l.devs[1];
	CHECK(nvmefs_layout_check(&l, 4) == -EINVAL); /* device used twice */
	l.devs[2] = 7;
	CHECK(nvmefs_layout_check(&l, 4) == -EINVAL); /* device out of range */
	l.devs[2] = 2;
	l.stripe_count = 5;
	CHECK(nvmefs_layout_check(&l, 4) == -EINVAL); /* more slots than devices */
	l.stripe_count = 2;
	CHECK(nvmefs_layout_check(&l, 4) == 0); /* 2 of 4 devices */
}

static void test_grid(void)
{
	static const unsigned devs[] = {1, 2, 3, 4, 8, 16};
	static const uint32_t chunks[] = {4u << 10, 64u << 10, 1u << 20, 4u << 20};
	unsigned cases = 0;

	for (unsigned di = 0; di < sizeof(devs) / sizeof(devs[0]); di++) {
		for (unsigned ci = 0; ci < sizeof(chunks) / sizeof(chunks[0]); ci++) {
			struct nvmefs_layout l;
			uint64_t c = chunks[ci], stripe = c * devs[di];
			/* Aligned, unaligned, empty, 1 byte, across chunk and stripe ends. */
			const uint64_t ranges[][2] = {
				{0, 0},
				{0, 1},
				{c - 1, 1},
				{c - 1, 2},
				{c, c},
				{0, stripe},
				{stripe - 1, 2},
				{stripe, stripe * 2},
				{4096, 4096},
				{7, 8193},
				{c / 2, c},
				{c / 2, stripe + 3},
				{stripe * 3 + 5, stripe - 10},
				{12345, 262144},
				{c * 5 - 1, c * 2 + 2},
			};

			CHECK(nvmefs_layout_init(&l, chunks[ci], devs[di], di) == 0);
			for (unsigned r = 0; r < sizeof(ranges) / sizeof(ranges[0]); r++) {
				check_range(&l, ranges[r][0], ranges[r][1]);
				cases++;
			}
			for (uint64_t sz = 0; sz <= 3 * stripe + 1; sz += c / 2 + 1)
				check_comp_size(&l, sz);
			check_comp_size(&l, stripe);
			check_comp_size(&l, stripe * 2 - 1);
		}
	}
	printf("grid: %u ranges checked\n", cases);
}

static uint64_t rnd(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

static void test_random(void)
{
	uint64_t seed = test_seed(), s = seed | 1; /* xorshift must not start at 0 */

	printf("random: seed %" PRIu64 " (rerun with NVMEFS_TEST_SEED=%" PRIu64 ")\n", seed, seed);
	for (unsigned i = 0; i < 400; i++) {
		struct nvmefs_layout l;
		unsigned ndev = 1 + (unsigned)(rnd(&s) % 16);
		unsigned count = 1 + (unsigned)(rnd(&s) % ndev);
		uint32_t chunk = NVMEFS_CHUNK_MIN << (rnd(&s) % 11);
		uint64_t off = rnd(&s) % (64ull << 20);
		uint64_t len = rnd(&s) % (rnd(&s) % 4 ? (256u << 10) : (6u << 20));

		if (rnd(&s) % 4 == 0)
			off = off / chunk * chunk;
		CHECK(nvmefs_layout_init(&l, chunk, ndev, (unsigned)rnd(&s)) == 0);
		/* A random subset of the devices in random order. */
		for (unsigned k = ndev - 1; k > 0; k--) {
			unsigned j = (unsigned)(rnd(&s) % (k + 1));
			uint8_t t = l.devs[k];

			l.devs[k] = l.devs[j];
			l.devs[j] = t;
		}
		l.stripe_count = count;
		CHECK(nvmefs_layout_check(&l, ndev) == 0);
		check_range(&l, off, len);
		check_comp_size(&l, off + len);
	}
}

int main(void)
{
	test_check_and_init();
	test_grid();
	test_random();
	return test_result();
}
