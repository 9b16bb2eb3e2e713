// SPDX-License-Identifier: MIT
/*
 * libFuzzer target: one 4 KiB block (the input, zero-padded or cut to 4096
 * bytes) through nvmefs_label_decode() and nvmefs_super_decode(), first as
 * it is, then with its crc re-sealed so that mutations reach the field
 * checks behind it. Whatever decodes must re-encode to the same block (up
 * to the reserved bytes, which the encoders write as zeros and the decoders
 * ignore) and decode again to the same structure; an accepted label must
 * also describe a layout that fits (checked here without overflow).
 */
#include <string.h>

#include "fuzz_vol.h"

/* Bytes of each block the encoders write; the rest is reserved (zero). */
#define LABEL_RSVD_OFF 108u /* the u32 after chunk_size */
#define LABEL_END      424u
#define SUPER_END      56u /* uuid, seq, manifest floor, clean, features */

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	fuzz_init();
	return 0;
}

/* The block as the encoder would write it: reserved bytes zero, crc fresh. */
static void expected(uint8_t *out, const uint8_t *blk, size_t end, size_t rsvd)
{
	memcpy(out, blk, NVMEFS_BLOCK);
	memset(out + end, 0, NVMEFS_BLOCK - end);
	if (rsvd)
		memset(out + rsvd, 0, 4);
	fuzz_reseal_frame(out);
}

static void first_diff(const char *what, const uint8_t *a, const uint8_t *b)
{
	for (size_t i = 0; i < NVMEFS_BLOCK; i++) {
		if (a[i] != b[i])
			FUZZ_BUG("%s round trip differs at byte %zu: %02x, re-encoded %02x", what,
				 i, a[i], b[i]);
	}
}

/* What label_sane() promises, in arithmetic that cannot wrap (regression
 * label/regress-slot-size-overflow); and that no area covers the member's
 * label in block 0 (label/regress-area-over-label). */
static void label_fits(const struct nvmefs_label *l)
{
	unsigned __int128 parts = 2 * (unsigned __int128)NVMEFS_BLOCK +
				  (unsigned __int128)l->runs_size + l->journal_size;
	unsigned __int128 meta_end = (unsigned __int128)l->meta_off + l->meta_size;

	if (parts != l->meta_size)
		FUZZ_BUG("label accepted: 2 superblocks + %llu + %llu != meta_size %llu",
			 (unsigned long long)l->runs_size, (unsigned long long)l->journal_size,
			 (unsigned long long)l->meta_size);
	if (meta_end > l->dev_size[0] - NVMEFS_BLOCK)
		FUZZ_BUG("label accepted: metadata area ends past member 0's backup label");
	if ((unsigned __int128)l->data_end > l->dev_size[l->index] - NVMEFS_BLOCK)
		FUZZ_BUG("label accepted: data area ends past the backup label");
	if (l->runs_size < NVMEFS_RUNS_MIN)
		FUZZ_BUG("label accepted: a run area of %llu bytes, under the smallest",
			 (unsigned long long)l->runs_size);
	if (l->data_start < NVMEFS_BLOCK || l->meta_off < NVMEFS_BLOCK)
		FUZZ_BUG("label accepted: data area at %llu or metadata area at %llu covers the "
			 "label in block 0",
			 (unsigned long long)l->data_start, (unsigned long long)l->meta_off);
}

static void check_label(const uint8_t *blk, uint8_t *tmp, uint8_t *enc)
{
	struct nvmefs_label l, l2;

	if (nvmefs_label_decode(&l, blk))
		return;
	label_fits(&l);
	nvmefs_label_encode(&l, enc);
	expected(tmp, blk, LABEL_END, LABEL_RSVD_OFF);
	first_diff("label", tmp, enc);
	if (nvmefs_label_decode(&l2, enc) || memcmp(&l, &l2, sizeof(l)))
		FUZZ_BUG("label: re-encoded block decodes differently");
	if (!nvmefs_label_magic(enc))
		FUZZ_BUG("label: nvmefs_label_magic() refuses an encoded label");
}

static void check_super(const uint8_t *blk, uint8_t *tmp, uint8_t *enc)
{
	struct nvmefs_super s, s2;

	/* The decoder sets fields only: zero the padding for memcmp. */
	memset(&s, 0, sizeof(s));
	memset(&s2, 0, sizeof(s2));
	if (nvmefs_super_decode(&s, blk))
		return;
	nvmefs_super_encode(&s, enc);
	expected(tmp, blk, SUPER_END, 0);
	first_diff("superblock", tmp, enc);
	if (nvmefs_super_decode(&s2, enc) || memcmp(&s, &s2, sizeof(s)))
		FUZZ_BUG("superblock: re-encoded block decodes differently");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	/* Exactly one block each, so ASan sees any read past its end. */
	uint8_t *blk = calloc(1, NVMEFS_BLOCK), *tmp = malloc(NVMEFS_BLOCK);
	uint8_t *enc = malloc(NVMEFS_BLOCK);

	if (!blk || !tmp || !enc)
		abort();
	memcpy(blk, data, size < NVMEFS_BLOCK ? size : NVMEFS_BLOCK);
	for (int pass = 0; pass < 2; pass++) {
		check_label(blk, tmp, enc);
		check_super(blk, tmp, enc);
		(void)nvmefs_label_magic(blk);
		fuzz_reseal_frame(blk);
	}
	free(enc);
	free(tmp);
	free(blk);
	return 0;
}
