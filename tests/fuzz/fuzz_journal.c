// SPDX-License-Identifier: MIT
/*
 * libFuzzer target: journal replay onto a freshly formatted volume (just
 * the root directory, its store on the harness's memfd: every record
 * replayed is written through into the memtable, as at mount), then what
 * mount does after it (verify, free-space rebuild, orphan reclaim) and the
 * oracles of fuzz_vol.c, the remount among them (the state flushed as a
 * run and loaded again).
 *
 * Input: one mode byte, then the bytes replayed. Mode bits 0-1:
 *   0  a journal ring as on disk: transactions walked as journal_load.c's
 *      replay() does, from the block (mode >> 2) modulo the ring's blocks,
 *      expecting sequence FUZZ_FIRST_TXN there, until the first one that is
 *      not whole, valid and next in sequence
 *   1  the same after re-sealing every transaction's crc (fuzz_vol.c), so
 *      mutations get past the checksum to the headers and records
 *   2, 3  a bare record stream, as a transaction's payload
 * The ring is the rest of the input zero-padded to whole blocks.
 */
#include <errno.h>
#include <string.h>

#include "fuzz_vol.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	fuzz_init();
	return 0;
}

/* journal_load.c's replay() over a ring held in memory; 0 at the end of the log,
 * -errno when a transaction's records do not apply. */
static int replay(struct nvmefs_vol *vol, const uint8_t *ring, size_t jsize, uint64_t tail)
{
	uint64_t head = tail, next_seq = FUZZ_FIRST_TXN;

	while (head - tail < jsize) {
		uint64_t phys = head % jsize;
		struct nvmefs_txn t;
		uint32_t nb = nvmefs_txn_nblocks(ring + phys);
		int ret;

		if (nb == 0 || phys + (uint64_t)nb * NVMEFS_BLOCK > jsize)
			break;
		if (nvmefs_txn_decode(&t, fuzz_uuid, ring + phys, (size_t)nb * NVMEFS_BLOCK) ||
		    t.seq != next_seq)
			break;
		if (t.pad) {
			head += jsize - phys;
		} else {
			ret = nvmefs_journal_apply(vol, ring + phys + NVMEFS_TXN_HDR, t.payload_len,
						   "fuzz");
			if (ret)
				return ret;
			head += (uint64_t)nb * NVMEFS_BLOCK;
		}
		next_seq++;
	}
	return 0;
}

static int replay_ring(struct nvmefs_vol *vol, unsigned mode, const uint8_t *data, size_t size)
{
	size_t jsize = (size + NVMEFS_BLOCK - 1) / NVMEFS_BLOCK * NVMEFS_BLOCK;
	uint8_t *ring;
	int ret;

	if (!jsize)
		jsize = NVMEFS_BLOCK;
	ring = calloc(1, jsize);
	if (!ring)
		return -ENOMEM;
	memcpy(ring, data, size);
	if (mode & 1)
		fuzz_reseal_ring(ring, jsize);
	ret = replay(vol, ring, jsize,
		     (uint64_t)(mode >> 2) % (jsize / NVMEFS_BLOCK) * NVMEFS_BLOCK);
	free(ring);
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
	vol = fuzz_vol_format();
	if (!vol)
		abort();
	/* As nvmefs_journal_load(): replay, verify; then nvmefs_vol_open(). */
	vol->replaying = true;
	if ((mode & 3) < 2)
		ret = replay_ring(vol, mode, data + 1, size - 1);
	else
		ret = nvmefs_journal_apply(vol, data + 1, size - 1, "fuzz");
	vol->replaying = false;
	if (!ret)
		ret = nvmefs_meta_verify(vol);
	if (!ret)
		fuzz_vol_mount_tail(vol);
	fuzz_vol_destroy(vol);
	return 0;
}
