// SPDX-License-Identifier: MIT
/*
 * fsck.nvmefs [-n|-y] [-v] DEV...: check an unmounted volume, and with -y
 * repair it.
 *
 * The volume is loaded whole (every inode resident, every run block read,
 * where a mount reads inodes on demand) with the mount's checks (labels,
 * superblock, the run area's manifest, journal replay, every block's crc
 * checked by the decoders), but in check mode, which stops before the
 * mount's own refusals, so that what the mount would refuse or silently
 * tolerate is found here:
 *   1. labels: both copies on every member decode and agree;
 *   2. the journal: a damaged transaction with whole ones after it;
 *   3. inodes: extents inside their member's data area, block aligned,
 *      sorted, the allocated bytes they add up to;
 *   4. extents: no two claim the same bytes of a member;
 *   5. entries: every entry names a live inode of the type it says, no
 *      directory is named twice, the root by none;
 *   6. the tree: every inode is reachable from the root (no cycles, no
 *      detached subtrees), else it goes to /lost+found;
 *   7. link counts, orphans (files unlinked while open at a crash: normal,
 *      not an error) and inodes with no link and no orphan record (leaked);
 *   8. free space: rebuilt from the extents, used + free = the data areas,
 *      and the store's FREE keys say exactly that free space (one key per
 *      free range, keyed by its end); a volume made before FREE keys
 *      existed has none (the mount refuses it), and -y writes them;
 *   9. the store: its keys and values are exactly what the metadata calls
 *      for (an INODE's summary fields, an entry's key by name and by
 *      readdir cookie), and every run block read back whole.
 * Repairs change the in-memory state the way replayed records would (and
 * are written through into the store), and a flush of the store (which
 * also retires the journal) makes them durable.
 *
 * Exit status as e2fsck's: 0 no errors, 1 errors fixed, 4 errors left
 * uncorrected, 8 operational error (usage, cannot open, in use).
 *
 * This file holds pass 1 and the program; passes 3 to 7 are in
 * fsck_tree.c, 8 and 9 in fsck_space.c, what every pass uses (the
 * reporting, the inode table) in fsck_base.c, and fsck_i.h declares what
 * the four share.
 */
#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "fsck_i.h"
#include "journal_i.h"
#include "util_i.h"
#include "volume_i.h"
#include "nvmefs/util.h"

enum {
	FSCK_OK = 0,
	FSCK_FIXED = 1,
	FSCK_UNCORRECTED = 4,
	FSCK_ERROR = 8,
};

/* ---- 1. labels ---- */

static int check_labels(struct fsck *f)
{
	struct nvmefs_vol *vol = f->vol;
	uint8_t *want = nvmefs_aligned_alloc(NVMEFS_BLOCK),
		*blk = nvmefs_aligned_alloc(NVMEFS_BLOCK);
	int ret = -ENOMEM;

	pass_begin(f, "labels");
	if (!want || !blk)
		goto out;
	for (unsigned i = 0; i < vol->ndevs; i++) {
		struct nvmefs_dev *d = &vol->set->devs[i];
		uint64_t where[2] = {0, vol->label.dev_size[i] - NVMEFS_BLOCK};
		struct nvmefs_label good, other;
		bool have = false;

		/* The copy that decodes (the primary first) is this member's label. */
		for (unsigned c = 0; c < 2 && !have; c++) {
			ret = nvmefs_vol_pio(vol, i, false, where[c], blk, NVMEFS_BLOCK);
			if (ret)
				goto out;
			have = nvmefs_label_decode(&good, blk) == 0;
		}
		if (!have) { /* the mount read it a moment ago */
			problem(f, false, "%s: no label decodes any more", d->path);
			continue;
		}
		nvmefs_label_encode(&good, want);
		for (unsigned c = 0; c < 2; c++) {
			ret = nvmefs_vol_pio(vol, i, false, where[c], blk, NVMEFS_BLOCK);
			if (ret)
				goto out;
			if (!memcmp(blk, want, NVMEFS_BLOCK))
				continue;
			problem(f, true, "%s: %s label %s", d->path, c ? "backup" : "primary",
				nvmefs_label_decode(&other, blk) ? "is damaged"
								 : "differs from the other copy");
			if (f->repair) {
				ret = nvmefs_vol_pio(vol, i, true, where[c], want, NVMEFS_BLOCK);
				if (!ret)
					ret = nvmefs_dev_flush(d);
				if (ret)
					goto out;
			}
		}
	}
	ret = 0;
out:
	free(want);
	free(blk);
	return ret;
}

/* ---- the program ---- */

static void usage(FILE *out)
{
	fprintf(out, "usage: fsck.nvmefs [-n|-y] [-v] DEV...\n"
		     "Check an unmounted nvmefs volume given by all its members (any order).\n"
		     "  -n  check only, change nothing (the default)\n"
		     "  -y  repair what can be repaired\n"
		     "  -v  say what each pass does\n"
		     "  -V  print the version\n"
		     "Exit status: 0 no errors, 1 errors fixed, 4 errors left uncorrected,\n"
		     "8 operational error (cannot open a member, volume in use...).\n");
}

static int run(struct fsck *f)
{
	size_t orphans = 0;
	long claims;
	int ret;

	ret = check_labels(f);
	if (ret)
		return ret;
	if (f->vol->j.damaged) {
		problem(f, true,
			"journal: transaction %" PRIu64 " is damaged; transactions %" PRIu64
			" to %" PRIu64 " after it are discarded",
			f->vol->j.next_seq, f->vol->j.next_seq + 1, f->vol->j.damaged);
		/* Number on past them, so they never look newer again. */
		f->vol->j.next_seq = f->vol->j.damaged + 1;
	}
	if (f->vol->j.loaded_clean && !f->vol->j.replayed)
		info(f, "journal: clean, manifest %" PRIu64, f->vol->j.loaded_manifest);
	else
		printf("journal: %s; replayed %" PRIu64 " transaction(s)\n",
		       f->vol->j.loaded_clean ? "changes after the last flush"
					      : "not cleanly unmounted",
		       f->vol->j.replayed);
	ret = index_inodes(f);
	if (ret)
		return ret;
	if (slot_of(f, NVMEFS_ROOT_INO) == SIZE_MAX ||
	    !S_ISDIR(f->in[slot_of(f, NVMEFS_ROOT_INO)]->mode)) {
		problem(f, false, "the root directory is missing");
		return 0;
	}
	pass_begin(f, "inodes");
	for (size_t i = 0; i < f->n; i++) {
		progress(f, i, f->n);
		check_inode(f, f->in[i]);
	}
	progress_end(f);
	pass_begin(f, "extents");
	claims = check_claims(f);
	if (claims < 0)
		return (int)claims;
	f->claims = (size_t)claims;
	ret = check_entries(f);
	if (!ret)
		ret = check_tree(f);
	if (ret == 1) {
		/* Entries moved: count them again. */
		ret = index_inodes(f);
		if (!ret)
			ret = check_entries(f);
		if (!ret)
			ret = reach(f, slot_of(f, NVMEFS_ROOT_INO));
	}
	if (!ret)
		ret = check_links(f, &orphans);
	if (!ret)
		ret = check_space(f);
	if (!ret)
		ret = check_store(f);
	if (!ret && f->repair && (f->changed || orphans || !f->vol->j.loaded_clean)) {
		info(f, "writing the metadata to the run area");
		ret = nvmefs_journal_checkpoint(f->vol, true);
	}
	return ret;
}

int main(int argc, char **argv)
{
	struct nvmefs_vol_opts vo = {
		.check = true, .read_only = true, .busy_wait_ms = NVMEFS_BUSY_WAIT_MS};
	struct fsck f = {0};
	bool no = false;
	int c, ret;

	nvmefs_log_set_ident("fsck.nvmefs");
	while ((c = getopt(argc, argv, "nyvVh")) != -1) {
		switch (c) {
		case 'n':
			no = true;
			break;
		case 'y':
			f.repair = true;
			break;
		case 'v':
			f.verbose = true;
			break;
		case 'V':
			printf("fsck.nvmefs %s (on-disk format %u)\n", NVMEFS_VERSION,
			       NVMEFS_FORMAT_VERSION);
			return FSCK_OK;
		case 'h':
			usage(stdout);
			return FSCK_OK;
		default:
			usage(stderr);
			return FSCK_ERROR;
		}
	}
	if (no && f.repair) {
		fprintf(stderr, "fsck.nvmefs: -n and -y exclude each other\n");
		return FSCK_ERROR;
	}
	if (optind >= argc) {
		fprintf(stderr, "fsck.nvmefs: give every member of the volume\n");
		usage(stderr);
		return FSCK_ERROR;
	}
	vo.read_only = !f.repair;
	ret = nvmefs_vol_open(&f.vol, (const char *const *)argv + optind, (unsigned)(argc - optind),
			      &vo);
	if (ret == -EUCLEAN) {
		fprintf(stderr,
			"fsck.nvmefs: the metadata is damaged beyond what fsck.nvmefs repairs "
			"(see the message above)\n");
		return FSCK_UNCORRECTED;
	}
	/* Not damage: the members given are not (all of) one volume, or
	 * one was made by another version of nvmefs. */
	if (ret == -ENODEV || ret == -EPROTO) {
		fprintf(stderr,
			"fsck.nvmefs: cannot check: %s (see the message above); give every member "
			"of the volume, by path\n",
			ret == -EPROTO ? "a member of another on-disk format version"
				       : "a member is missing, or a path is not a member");
		return FSCK_ERROR;
	}
	if (ret) {
		fprintf(stderr, "fsck.nvmefs: cannot open the volume: %s%s\n", strerror(-ret),
			ret == -EBUSY ? " (is it mounted?)" : "");
		return FSCK_ERROR;
	}
	ret = run(&f);
	free(f.in);
	free(f.links);
	free(f.subdirs);
	free(f.reached);
	nvmefs_vol_abandon(f.vol); /* anything to write is written */
	if (ret == -EUCLEAN) {	   /* a repair the model refused: none written */
		fprintf(stderr, "fsck.nvmefs: a repair contradicts the metadata; nothing was "
				"written\n");
		return FSCK_UNCORRECTED;
	}
	if (ret) {
		fprintf(stderr, "fsck.nvmefs: %s\n", strerror(-ret));
		return FSCK_ERROR;
	}
	if (f.unfixable || (f.found && !f.repair)) {
		printf("%u error(s) found, %u left uncorrected\n", f.found, f.found - f.fixed);
		return FSCK_UNCORRECTED;
	}
	if (f.found) {
		printf("%u error(s) found and fixed\n", f.found);
		return FSCK_FIXED;
	}
	printf("clean\n");
	return FSCK_OK;
}
