// SPDX-License-Identifier: MIT
/*
 * libFuzzer target: checkpoint loading into an empty volume (the checkpoint
 * brings the root itself), then what mount does after it (verify,
 * free-space rebuild, orphan reclaim) and the checkpoint oracle of
 * fuzz_vol.c.
 *
 * Input: one mode byte, then:
 *   mode bit 0 clear: the superblock's ckpt_len (32-bit little-endian here;
 *     the full 64 bits are fuzz_load's business) and the slot's blocks,
 *     zero-padded to the slot size, put back together as journal.c's
 *     load_checkpoint() does: every block must decode (this checkpoint
 *     sequence, its index) and hold exactly the bytes the length implies.
 *     Mode bit 1 set: every block's crc is re-sealed first, so mutations
 *     get past the checksum.
 *   mode bit 0 set: the rest is the record stream itself.
 */
#include <endian.h>
#include <errno.h>
#include <string.h>

#include "fuzz_vol.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	fuzz_init();
	return 0;
}

/* journal.c's load_checkpoint() reading from memory instead of member 0. */
static int load_blocks(struct nvmefs_vol *vol, unsigned mode, const uint8_t *data, size_t size)
{
	uint64_t slot_size = vol->label.ckpt_slot_size, ckpt_len, nblocks;
	uint8_t *slot = NULL, *stream = NULL;
	uint32_t len32 = 0;
	size_t pos = 0;
	int ret = -ENOMEM;

	memcpy(&len32, data, size < 4 ? size : 4);
	data += size < 4 ? size : 4;
	size -= size < 4 ? size : 4;
	ckpt_len = le32toh(len32);
	nblocks = (ckpt_len + NVMEFS_CKPT_PAYLOAD - 1) / NVMEFS_CKPT_PAYLOAD;
	if (nblocks * NVMEFS_BLOCK > slot_size)
		return -EUCLEAN;
	slot = calloc(1, slot_size);
	stream = malloc(ckpt_len + 1);
	if (!slot || !stream)
		goto out;
	memcpy(slot, data, size < slot_size ? size : slot_size);
	for (uint64_t b = 0; b < nblocks; b++) {
		uint8_t *blk = slot + b * NVMEFS_BLOCK;
		size_t want =
			ckpt_len - pos < NVMEFS_CKPT_PAYLOAD ? ckpt_len - pos : NVMEFS_CKPT_PAYLOAD;
		uint32_t used;

		if (mode & 2)
			fuzz_reseal_frame(blk);
		if (nvmefs_ckpt_decode(blk, fuzz_uuid, FUZZ_CKPT_SEQ, b, &used) || used != want) {
			ret = -EUCLEAN;
			goto out;
		}
		memcpy(stream + pos, blk + NVMEFS_CKPT_HDR, used);
		pos += used;
	}
	ret = nvmefs_journal_apply(vol, stream, ckpt_len, "fuzz");
out:
	free(stream);
	free(slot);
	return ret;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct nvmefs_vol *vol;
	unsigned mode;
	int ret;

	if (size < 1)
		return 0;
	mode = data[0];
	vol = fuzz_vol_create(false);
	if (!vol)
		abort();
	vol->replaying = true;
	if (mode & 1)
		ret = nvmefs_journal_apply(vol, data + 1, size - 1, "fuzz");
	else
		ret = load_blocks(vol, mode, data + 1, size - 1);
	vol->replaying = false;
	if (!ret)
		ret = nvmefs_meta_verify(vol);
	if (!ret)
		fuzz_vol_mount_tail(vol);
	fuzz_vol_destroy(vol);
	return 0;
}
