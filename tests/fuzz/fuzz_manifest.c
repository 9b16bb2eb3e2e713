// SPDX-License-Identifier: MIT
/*
 * libFuzzer target: a manifest slot of format v2's run area
 * (fs/store/runs_i.h), the input zero-padded to the slot's 4 blocks, through
 * nvmefs_manifest_decode(): as it is, then with its crc re-sealed over the
 * length its header claims, so that mutations reach the structural checks.
 * Whatever decodes must describe runs that fit the harness's area (inside
 * the run space, not overlapping, ids unique and below next_id, no more
 * entries than their run blocks hold, keys valid and ordered: checked
 * again here, pairwise), and must re-encode to the input's bytes (the
 * committer's mark included: replay position, next inode, inode count).
 */
#include <endian.h>
#include <stdint.h>
#include <string.h>

#include "fuzz_bug.h"
#include "fuzz_obj.h"
#include "runs_i.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define SLOT 4u
#define CAP  (SLOT * NVMEFS_BLOCK)

static const uint8_t uuid[16] = {0x6e, 0x76, 0x6d, 0x65, 0x66, 0x73, 0x2d, 0x66,
				 0x75, 0x7a, 0x7a, 0x2d, 0x6d, 0x61, 0x6e, 0x21};
static const struct nvmefs_runs_geom geom = {.blocks = 4096, .slot_blocks = SLOT};
static uint8_t in[CAP], out[CAP];

static void check_run(const struct nvmefs_manifest *m, size_t i)
{
	const struct nvmefs_run_meta *r = &m->runs[i];
	uint64_t end = r->start + nvmefs_run_blocks(r);

	if (r->start < 2 * SLOT || end > geom.blocks || r->id >= m->next_id ||
	    r->level >= NVMEFS_RUN_LEVELS || !r->nentries ||
	    r->nentries > (uint64_t)r->data_blocks * NVMEFS_BLOCK / (NVMEFS_RUN_ENT_HDR + 1))
		FUZZ_BUG("run %zu: fields out of bounds", i);
	if (nvmefs_key_check(r->min, r->min_len) || nvmefs_key_check(r->max, r->max_len) ||
	    nvmefs_key_cmp(r->min, r->min_len, r->max, r->max_len) > 0)
		FUZZ_BUG("run %zu: key range", i);
	for (size_t j = 0; j < i; j++) {
		const struct nvmefs_run_meta *o = &m->runs[j];

		if (o->id == r->id)
			FUZZ_BUG("runs %zu and %zu share an id", j, i);
		if (o->start < end && r->start < o->start + nvmefs_run_blocks(o))
			FUZZ_BUG("runs %zu and %zu overlap", j, i);
	}
}

static void check_slot(const uint8_t *b)
{
	struct nvmefs_manifest m;
	ssize_t len;

	if (nvmefs_manifest_decode(b, CAP, uuid, &geom, &m))
		return;
	for (size_t i = 0; i < m.n; i++)
		check_run(&m, i);
	len = nvmefs_manifest_encode(&m, uuid, out, CAP);
	if (len <= 0 || memcmp(out, b, (size_t)len))
		FUZZ_BUG("an accepted manifest of %zu runs does not re-encode to itself", m.n);
	nvmefs_manifest_free(&m);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	memset(in, 0, CAP);
	memcpy(in, data, size < CAP ? size : CAP);
	check_slot(in);
	fuzz_obj_reseal(in, SLOT);
	check_slot(in);
	return 0;
}
