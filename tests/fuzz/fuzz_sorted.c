// SPDX-License-Identifier: MIT
/*
 * libFuzzer target: a run block of format v2 (fs/store/sorted_i.h), the input
 * zero-padded to the largest run block, through nvmefs_run_decode(): as it
 * is, then with its crc re-sealed over the length its header claims, so
 * that mutations reach the structural checks. The run id and index are
 * taken from the header (the volume's id is the harness's). Whatever
 * decodes must come out of nvmefs_run_next() entry by entry, each accepted
 * by the writer in that order, and the block the writer then seals must be
 * the input's bytes. The input's first bytes also go through
 * nvmefs_key_check(): a key it accepts must sort where its kind's keys do
 * and compare equal to itself only.
 */
#include <endian.h>
#include <stdint.h>
#include <string.h>

#include "fuzz_bug.h"
#include "sorted_i.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CAP (NVMEFS_RUN_BLOCKS_MAX * NVMEFS_BLOCK)

static const uint8_t uuid[16] = {0x6e, 0x76, 0x6d, 0x65, 0x66, 0x73, 0x2d, 0x66,
				 0x75, 0x7a, 0x7a, 0x2d, 0x72, 0x75, 0x6e, 0x21};
static uint8_t in[CAP], out[CAP];

static uint64_t le64_at(const uint8_t *p)
{
	uint64_t v;

	memcpy(&v, p, 8);
	return le64toh(v);
}

static void check_block(const uint8_t *b)
{
	uint64_t run = le64_at(b + 24), index = le64_at(b + 32);
	struct nvmefs_run_writer w;
	struct nvmefs_run_hdr h;
	struct nvmefs_run_ent e;
	size_t pos = 0, len;
	uint32_t n = 0;

	if (nvmefs_run_decode(b, CAP, uuid, run, index, &h))
		return;
	nvmefs_run_start(&w, out, CAP);
	while (nvmefs_run_next(b, &h, &pos, &e)) {
		if (nvmefs_run_add(&w, e.key, e.klen, e.val, e.vlen, e.tomb))
			FUZZ_BUG("entry %u of an accepted block refused by the writer", n);
		n++;
	}
	if (n != h.nentries)
		FUZZ_BUG("%u entries read, the header says %u", n, h.nentries);
	len = nvmefs_run_finish(&w, uuid, run, index, h.level);
	if (len != (size_t)h.nblocks * NVMEFS_BLOCK || memcmp(out, b, len))
		FUZZ_BUG("an accepted block of %u blocks does not re-encode to itself", h.nblocks);
}

/* Seal the crc over the length the header claims (what a writer can do). */
static void reseal(uint8_t *b)
{
	size_t len = nvmefs_run_peek_len(b);
	uint32_t crc;

	if (!len)
		return;
	memset(b + 12, 0, 4);
	crc = htole32(nvmefs_crc32c(b, len));
	memcpy(b + 12, &crc, 4);
}

static void check_key(const uint8_t *k, size_t len)
{
	if (len > NVMEFS_KEY_MAX || nvmefs_key_check(k, len))
		return;
	if (nvmefs_key_cmp(k, len, k, len) != 0)
		FUZZ_BUG("a key differs from itself");
	/* Kinds sort first: every key of kind K sorts before kind K+1's. */
	uint8_t next = (uint8_t)(k[0] + 1);
	if (nvmefs_key_cmp(k, len, &next, 1) >= 0)
		FUZZ_BUG("a key of kind %u sorts after kind %u", k[0], next);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	size_t n = size < CAP ? size : CAP;

	for (size_t l = 1; l <= (size < NVMEFS_KEY_MAX ? size : NVMEFS_KEY_MAX); l++)
		check_key(data, l);
	memset(in, 0, CAP);
	memcpy(in, data, n);
	check_block(in);
	reseal(in);
	check_block(in);
	return 0;
}
