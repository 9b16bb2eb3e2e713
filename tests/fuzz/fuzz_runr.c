// SPDX-License-Identifier: MIT
/*
 * libFuzzer target: a run's index and bloom filter (format v2's run area,
 * fs/store/runs_i.h) through nvmefs_runr_open(), which decodes both and
 * checks them against the run's meta, then lookups. The input is a
 * 16-byte header (struct in_hdr: the meta's entry count, run blocks,
 * index and filter blocks, level, a mode byte) and the index and filter
 * blocks, zero-padded; they are written to a memfd member right after
 * the run's run blocks, which stay zeros. With mode bit 0 both objects'
 * crcs are re-sealed over the lengths their headers claim, so that
 * mutations reach the structural checks. The meta is not one the manifest
 * decoder checked (the reader must not trust its caller's counts either):
 * its id is RUN_ID, its min key the index's first key as the input's
 * bytes give it (the writer's), its max above every key.
 *
 * A run the reader accepts must be as runs_i.h describes it: run blocks
 * from 0, increasing, each at most NVMEFS_RUN_BLOCKS_MAX long and inside
 * the run, with valid, increasing keys inside the index, the first being
 * min; a filter of the bits nvmefs_filter_nbits gives for the entry
 * count (at least 64), inside the filter. Then every index key goes
 * through nvmefs_runr_may_hold, and the first few through nvmefs_runr_get,
 * whose run block (zeros) must be refused, not read.
 */
#include <endian.h>
#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "fuzz_obj.h"
#include "fuzz_vol.h"
#include "runfmt_i.h"
#include "runs_i.h"
#include "util_i.h"

#define SLOT	 4u
#define TAIL_MAX 8u /* index and filter blocks */
/* Where every input's index goes: room for 2^32 - 1 run blocks before it. */
#define TAIL_AT (2ull * SLOT + UINT32_MAX)
#define AREA	(TAIL_AT + TAIL_MAX)
#define RUN_ID	1u
#define GETS	4u

/* The input's header, little-endian. */
struct in_hdr {
	uint64_t nentries;
	uint32_t data_blocks;
	uint8_t index_blocks; /* both at least 1, together at most TAIL_MAX */
	uint8_t filter_blocks;
	uint8_t level; /* modulo NVMEFS_RUN_LEVELS */
	uint8_t mode;  /* bit 0: re-seal both crcs */
};
_Static_assert(sizeof(struct in_hdr) == 16, "the input's header is 16 bytes");

/* "nvmefs-fuzz-run!": the volume id gen_corpus writes the seeds with. */
static const uint8_t uuid[16] = {0x6e, 0x76, 0x6d, 0x65, 0x66, 0x73, 0x2d, 0x66,
				 0x75, 0x7a, 0x7a, 0x2d, 0x72, 0x75, 0x6e, 0x21};
static const struct nvmefs_runs_geom geom = {.blocks = AREA, .slot_blocks = SLOT};
static struct nvmefs_dev dev = {.path = "fuzz_runr",
				.size = AREA * NVMEFS_BLOCK,
				.block_size = NVMEFS_BLOCK,
				.mem_align = NVMEFS_BLOCK};
static struct nvmefs_runs *area;
static uint8_t *tail; /* TAIL_MAX blocks */
static uint8_t *rb;   /* NVMEFS_RUN_BUF, for lookups */

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	fuzz_init();
	dev.fd = memfd_create("nvmefs-fuzz-runr", MFD_CLOEXEC); /* sparse: 16 TiB */
	tail = nvmefs_aligned_alloc((size_t)TAIL_MAX * NVMEFS_BLOCK);
	rb = nvmefs_aligned_alloc(NVMEFS_RUN_BUF);
	if (dev.fd < 0 || ftruncate(dev.fd, (off_t)dev.size) || !tail || !rb ||
	    nvmefs_runs_format(&dev, &geom, uuid) || nvmefs_runs_open(&area, &dev, &geom, uuid))
		FUZZ_BUG("the harness's run area cannot be set up");
	return 0;
}

static void make_meta(const struct in_hdr *h, struct nvmefs_run_meta *m)
{
	const uint8_t *e = tail + NVMEFS_OBJ_HDR; /* the index's first entry */
	uint16_t kl;

	*m = (struct nvmefs_run_meta){.id = RUN_ID,
				      .start = TAIL_AT - le32toh(h->data_blocks),
				      .nentries = le64toh(h->nentries),
				      .level = h->level % NVMEFS_RUN_LEVELS,
				      .data_blocks = le32toh(h->data_blocks),
				      .index_blocks = h->index_blocks,
				      .filter_blocks = h->filter_blocks};
	memcpy(&kl, e + 4, 2);
	kl = le16toh(kl);
	if (kl <= NVMEFS_KEY_MAX && NVMEFS_OBJ_HDR + 6u + kl <= h->index_blocks * NVMEFS_BLOCK) {
		memcpy(m->min, e + 6, kl);
		m->min_len = kl;
	}
	memset(m->max, 0xff, NVMEFS_KEY_MAX);
	m->max_len = NVMEFS_KEY_MAX;
}

static void check_index(const struct nvmefs_runr *r)
{
	const uint8_t *lo = r->buf + NVMEFS_OBJ_HDR;
	const uint8_t *hi = r->buf + (size_t)r->meta.index_blocks * NVMEFS_BLOCK;
	uint32_t last;

	if (!r->nrb || r->nrb > r->meta.data_blocks || r->off[0])
		FUZZ_BUG("%u run blocks of %u, the first at %u", r->nrb, r->meta.data_blocks,
			 r->nrb ? r->off[0] : 0);
	for (uint32_t i = 0; i < r->nrb; i++) {
		if (r->key[i] < lo || r->key[i] + r->klen[i] > hi ||
		    nvmefs_key_check(r->key[i], r->klen[i]))
			FUZZ_BUG("run block %u: its key is outside the index or invalid", i);
		if (i &&
		    (r->off[i] <= r->off[i - 1] ||
		     r->off[i] - r->off[i - 1] > NVMEFS_RUN_BLOCKS_MAX ||
		     nvmefs_key_cmp(r->key[i - 1], r->klen[i - 1], r->key[i], r->klen[i]) >= 0))
			FUZZ_BUG("run block %u: out of order after %u", i, i - 1);
	}
	last = r->off[r->nrb - 1];
	if (last >= r->meta.data_blocks || r->meta.data_blocks - last > NVMEFS_RUN_BLOCKS_MAX)
		FUZZ_BUG("the last run block at %u of %u", last, r->meta.data_blocks);
	if (nvmefs_key_cmp(r->key[0], r->klen[0], r->meta.min, r->meta.min_len))
		FUZZ_BUG("the first key is not the run's min");
}

static void check_filter(const struct nvmefs_runr *r)
{
	const uint8_t *f = r->buf + (size_t)r->meta.index_blocks * NVMEFS_BLOCK;

	if (r->bits != f + NVMEFS_OBJ_HDR || r->nbits < 64 || r->nbits % 64 ||
	    r->nbits != nvmefs_filter_nbits(r->meta.nentries) ||
	    r->nbits / 8 > (size_t)r->meta.filter_blocks * NVMEFS_BLOCK - NVMEFS_OBJ_HDR)
		FUZZ_BUG("a filter of %" PRIu64 " bits for %" PRIu64 " entries in %u blocks",
			 r->nbits, r->meta.nentries, r->meta.filter_blocks);
}

static void lookups(struct nvmefs_runr *r)
{
	struct nvmefs_run_ent e;

	for (uint32_t i = 0; i < r->nrb; i++)
		(void)nvmefs_runr_may_hold(r, r->key[i], r->klen[i]);
	for (uint32_t i = 0; i < r->nrb && i < GETS; i++) {
		int ret = nvmefs_runr_get(r, r->key[i], r->klen[i], rb, &e);

		if (ret != -ENOENT && ret != -EINVAL)
			FUZZ_BUG("a lookup in run block %u (zeros) returned %d", i, ret);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	size_t len = (size_t)TAIL_MAX * NVMEFS_BLOCK;
	struct nvmefs_run_meta m;
	struct nvmefs_runr r;
	struct in_hdr h;

	if (size < sizeof(h))
		return 0;
	memcpy(&h, data, sizeof(h));
	if (!h.index_blocks || !h.filter_blocks || h.index_blocks + h.filter_blocks > TAIL_MAX)
		return 0;
	memset(tail, 0, len);
	memcpy(tail, data + sizeof(h), size - sizeof(h) < len ? size - sizeof(h) : len);
	if (h.mode & 1) {
		fuzz_obj_reseal(tail, h.index_blocks);
		fuzz_obj_reseal(tail + (size_t)h.index_blocks * NVMEFS_BLOCK, h.filter_blocks);
	}
	if (pwrite(dev.fd, tail, len, (off_t)(TAIL_AT * NVMEFS_BLOCK)) != (ssize_t)len)
		FUZZ_BUG("the harness's memfd refused a write");
	make_meta(&h, &m);
	if (nvmefs_runr_open(&r, area, &m))
		return 0;
	check_index(&r);
	check_filter(&r);
	lookups(&r);
	nvmefs_runr_close(&r);
	return 0;
}
