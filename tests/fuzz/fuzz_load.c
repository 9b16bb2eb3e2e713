// SPDX-License-Identifier: MIT
/*
 * libFuzzer target: the real loader, nvmefs_journal_load(), on member 0's
 * metadata area of format v2: the input is that area (superblocks A and B,
 * the run area: manifest slots A and B and the run space, the journal
 * ring; FUZZ_META_SIZE bytes, zero-padded), written to a memfd that stands
 * in for the member after every superblock, manifest, run block, index,
 * filter and transaction that carries its magic has had its crc re-sealed
 * (fuzz_reseal_image: so mutations reach the fields, not just the
 * checksums). Then what mount does after loading (free-space rebuild,
 * orphan reclaim) and the oracles of fuzz_vol.c, the remount among them.
 * This is the one target that runs journal_load.c's own read_super(), the
 * store's open (manifests, every run's index and filter), load_store()
 * (every key, through nvmefs_meta_load_val) and replay().
 */
#include <string.h>

#include "fuzz_vol.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	fuzz_init();
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t *img = calloc(1, FUZZ_META_SIZE);
	struct nvmefs_vol *vol;

	if (!img)
		abort();
	memcpy(img, data, size < FUZZ_META_SIZE ? size : FUZZ_META_SIZE);
	fuzz_reseal_image(img);
	if (fuzz_image_write(img, FUZZ_META_SIZE))
		abort();
	free(img);
	vol = fuzz_vol_create(true);
	if (!vol)
		abort();
	if (!nvmefs_journal_load(vol))
		fuzz_vol_mount_tail(vol);
	fuzz_vol_destroy(vol);
	return 0;
}
