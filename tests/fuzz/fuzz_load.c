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
#include <errno.h>
#include <string.h>

#include "alloc_i.h"
#include "fuzz_vol.h"

/*
 * Whether a loaded image's FREE keys, each well formed (inside its member's
 * data area, after the key before it: what the loader checks), are not
 * where the extents leave free space. The mount cannot see that: it trusts
 * the FREE keys, since its inodes (and so their extents) are loaded only as
 * they are used; fsck's space pass finds and rewrites them. Such an input
 * stands for a damaged volume, not for a loader bug, and is refused here,
 * before the oracles, the first of which compares the free map with the
 * extents. fuzz_journal, whose records land on a consistent volume, keeps
 * that comparison.
 */
static bool free_damaged(struct nvmefs_vol *vol)
{
	return nvmefs_alloc_check(vol) == -EUCLEAN;
}

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
	if (!nvmefs_journal_load(vol) && !free_damaged(vol))
		fuzz_vol_mount_tail(vol);
	fuzz_vol_destroy(vol);
	return 0;
}
