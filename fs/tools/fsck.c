// SPDX-License-Identifier: MIT
/*
 * fsck.nvmefs [-n|-y] [-v] DEV...: check an unmounted volume, and with -y
 * repair it.
 *
 * The volume is loaded as the mount loads it (labels, superblock, the run
 * area's manifest and every run block, journal replay, every block's crc
 * checked by the decoders) but in check
 * mode, which stops before the mount's own refusals, so that what the mount
 * would refuse or silently tolerate is found here:
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
 */
#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "fs_i.h"
#include "alloc_i.h"
#include "extmap_i.h"
#include "journal_i.h"
#include "kv_i.h"
#include "meta_i.h"
#include "store.h"
#include "util_i.h"
#include "volume_i.h"
#include "nvmefs/util.h"

enum {
	FSCK_OK = 0,
	FSCK_FIXED = 1,
	FSCK_UNCORRECTED = 4,
	FSCK_ERROR = 8,
};

#define LOST_FOUND "lost+found"

struct fsck {
	struct nvmefs_vol *vol;
	bool repair, verbose;
	unsigned found, fixed, unfixable;
	bool changed;  /* repairs to write */
	size_t claims; /* places where two inodes claim the same bytes (pass 3) */
	/* every inode, sorted by number, and per inode: */
	struct nvmefs_inode **in;
	size_t n;
	uint32_t *links;   /* entries naming it */
	uint32_t *subdirs; /* directories: entries of subdirectories in it */
	bool *reached;
	uint64_t progress_ns, pass_start_ns;
	const char *pass;
};

/* ---- reporting ---- */

/* One problem: say what it is and whether it was fixed. fixable: -y can
 * repair it (and the caller does when f->repair). */
static void problem(struct fsck *f, bool fixable, const char *fmt, ...)
{
	va_list ap;

	f->found++;
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	if (!fixable) {
		f->unfixable++;
		printf(": cannot be repaired\n");
	} else if (f->repair) {
		f->fixed++;
		f->changed = true;
		printf(": fixed\n");
	} else {
		printf(": not fixed (-n)\n");
	}
}

static void info(struct fsck *f, const char *fmt, ...)
{
	va_list ap;

	if (!f->verbose)
		return;
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	putchar('\n');
}

static void pass_begin(struct fsck *f, const char *name)
{
	f->pass = name;
	f->pass_start_ns = f->progress_ns = nvmefs_now_ns();
	info(f, "pass: %s", name);
}

/* A progress line on a terminal, once a pass has run for a second. */
static void progress(struct fsck *f, size_t done, size_t total)
{
	uint64_t now;

	if ((done & 4095) || !total || !isatty(STDERR_FILENO))
		return;
	now = nvmefs_now_ns();
	if (now - f->progress_ns < 1000000000ull || now - f->pass_start_ns < 1000000000ull)
		return;
	f->progress_ns = now;
	fprintf(stderr, "\r%s: %zu of %zu (%.0f%%)  ", f->pass, done, total,
		100.0 * (double)done / (double)total);
}

static void progress_end(struct fsck *f)
{
	if (isatty(STDERR_FILENO) && f->progress_ns != f->pass_start_ns)
		fprintf(stderr, "\r\033[K");
}

/* ---- the inode table ---- */

static int ino_cmp(const void *a, const void *b)
{
	const struct nvmefs_inode *x = *(struct nvmefs_inode *const *)a;
	const struct nvmefs_inode *y = *(struct nvmefs_inode *const *)b;

	return x->ino < y->ino ? -1 : x->ino > y->ino;
}

/* (Re)build the sorted inode array and zero the per-inode counters. */
static int index_inodes(struct fsck *f)
{
	struct nvmefs_vol *vol = f->vol;
	size_t n = 0;

	free(f->in);
	free(f->links);
	free(f->subdirs);
	free(f->reached);
	f->in = malloc((vol->ninodes + 1) * sizeof(*f->in));
	f->links = calloc(vol->ninodes + 1, sizeof(*f->links));
	f->subdirs = calloc(vol->ninodes + 1, sizeof(*f->subdirs));
	f->reached = calloc(vol->ninodes + 1, sizeof(*f->reached));
	if (!f->in || !f->links || !f->subdirs || !f->reached)
		return -ENOMEM;
	for (size_t b = 0; b < vol->itab_size; b++) {
		for (struct nvmefs_inode *in = vol->itab[b]; in; in = in->hnext)
			f->in[n++] = in;
	}
	f->n = n;
	qsort(f->in, n, sizeof(*f->in), ino_cmp);
	return 0;
}

static size_t slot_of(const struct fsck *f, uint64_t ino)
{
	size_t lo = 0, hi = f->n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (f->in[mid]->ino < ino)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < f->n && f->in[lo]->ino == ino ? lo : SIZE_MAX;
}

/* Apply a record as replay would (no journal: the final flush writes it). */
static int apply(struct fsck *f, const struct nvmefs_rec *r)
{
	int ret;

	f->vol->replaying = true;
	ret = nvmefs_meta_apply(f->vol, r);
	f->vol->replaying = false;
	return ret;
}

static int dirent_del(struct fsck *f, const struct nvmefs_dirent *d)
{
	struct nvmefs_rec r = {.type = NVMEFS_REC_DIRENT_DEL};

	r.dirent.parent = d->parent;
	r.dirent.child = d->child;
	r.dirent.type = d->type;
	r.dirent.name = d->name;
	r.dirent.name_len = d->name_len;
	return apply(f, &r);
}

static int dirent_add(struct fsck *f, uint64_t parent, const char *name, uint64_t child,
		      uint8_t type)
{
	struct nvmefs_rec r = {.type = NVMEFS_REC_DIRENT_ADD};

	r.dirent.parent = parent;
	r.dirent.child = child;
	r.dirent.type = type;
	r.dirent.name = name;
	r.dirent.name_len = (uint16_t)strlen(name);
	return apply(f, &r);
}

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

/* ---- 3. inodes and their extents (2, the journal, is in run) ---- */

static void check_inode(struct fsck *f, struct nvmefs_inode *in)
{
	struct nvmefs_vol *vol = f->vol;
	uint64_t alloc = 0;

	if (!S_ISREG(in->mode) && !S_ISDIR(in->mode) && !S_ISLNK(in->mode) && !S_ISCHR(in->mode) &&
	    !S_ISBLK(in->mode) && !S_ISFIFO(in->mode) && !S_ISSOCK(in->mode))
		problem(f, false, "inode %" PRIu64 ": unknown file type %o", in->ino,
			in->mode & S_IFMT);
	for (unsigned s = 0; in->slots && s < in->layout.stripe_count; s++) {
		struct nvmefs_extmap *m = &in->slots[s];
		unsigned dev = in->layout.devs[s];
		uint64_t end = 0;

		for (size_t k = 0; k < m->n; k++) {
			struct nvmefs_ext *e = &m->v[k];
			bool bad = !e->len || (e->dev_off | e->len | e->comp_off) % NVMEFS_BLOCK ||
				   e->dev_off < vol->data_start[dev] ||
				   e->dev_off + e->len > vol->data_end[dev] || e->comp_off < end;

			if (bad) {
				problem(f, true,
					"inode %" PRIu64 ": slot %u extent at %" PRIu64 " (%" PRIu64
					" bytes at %" PRIu64 " on member %u) is invalid",
					in->ino, s, e->comp_off, e->len, e->dev_off, dev);
				if (f->repair) {
					memmove(e, e + 1, (m->n - k - 1) * sizeof(*e));
					m->n--;
					k--;
				}
				continue;
			}
			end = e->comp_off + e->len;
			alloc += e->len;
		}
	}
	if (in->slots && alloc != in->alloc_bytes) {
		problem(f, true,
			"inode %" PRIu64 ": %" PRIu64
			" bytes allocated, extents add up to %" PRIu64,
			in->ino, in->alloc_bytes, alloc);
		if (f->repair)
			in->alloc_bytes = alloc;
	}
	if (S_ISLNK(in->mode) && (!in->target || !*in->target))
		problem(f, false, "inode %" PRIu64 ": symbolic link with no target", in->ino);
}

/* ---- 4. extents owned once ---- */

struct claim {
	uint64_t off, len, comp_off, ino;
	unsigned dev, slot;
};

static int claim_cmp(const void *a, const void *b)
{
	const struct claim *x = a, *y = b;

	if (x->dev != y->dev)
		return x->dev < y->dev ? -1 : 1;
	if (x->off != y->off)
		return x->off < y->off ? -1 : 1;
	return x->ino < y->ino ? -1 : x->ino > y->ino;
}

/* Find bytes claimed twice; with -y the later claim (higher inode) loses
 * them: that file reads zeros there. Returns problems found or -errno. */
static long check_claims(struct fsck *f)
{
	struct claim *c = NULL;
	size_t n = 0, cap = 0;
	long found = 0;

	for (size_t i = 0; i < f->n; i++) {
		struct nvmefs_inode *in = f->in[i];

		for (unsigned s = 0; in->slots && s < in->layout.stripe_count; s++) {
			for (size_t k = 0; k < in->slots[s].n; k++) {
				const struct nvmefs_ext *e = &in->slots[s].v[k];

				if (nvmefs_grow(&c, &cap, n + 1, sizeof(*c))) {
					free(c);
					return -ENOMEM;
				}
				c[n++] = (struct claim){e->dev_off,	    e->len,
							e->comp_off,	    in->ino,
							in->layout.devs[s], s};
			}
		}
	}
	if (n)
		qsort(c, n, sizeof(*c), claim_cmp);
	for (size_t i = 1, owner = 0; i < n; i++) {
		const struct claim *o = &c[owner], *x = &c[i];
		uint64_t o_end = o->off + o->len;

		if (x->dev == o->dev && x->off < o_end) {
			uint64_t lo = x->off,
				 hi = x->off + x->len < o_end ? x->off + x->len : o_end;
			size_t at = slot_of(f, x->ino);

			found++;
			problem(f, true,
				"member %u bytes %" PRIu64 "-%" PRIu64 " belong to inode %" PRIu64
				" and to inode %" PRIu64 " (which loses them)",
				x->dev, lo, hi, o->ino, x->ino);
			if (f->repair && at != SIZE_MAX) {
				uint64_t clo = x->comp_off + (lo - x->off);

				nvmefs_extmap_remove(f->vol, f->in[at], x->slot, clo,
						     clo + (hi - lo), false);
			}
		}
		if (x->dev != o->dev || x->off + x->len > o_end)
			owner = i;
	}
	free(c);
	return found;
}

/* ---- 5. directory entries ---- */

static int check_entries(struct fsck *f)
{
	struct nvmefs_dirent **bad = NULL;
	size_t nbad = 0, cap = 0;
	int ret = 0;

	pass_begin(f, "directory entries");
	/* By directory and in readdir order, not by hash bucket: the buckets
	 * follow each run's random seed (meta.c), and -y must drop the entry
	 * that -n named (of a directory named twice, the later one). */
	for (size_t i = 0; i < f->n; i++) {
		const struct nvmefs_dir *dir = f->in[i]->dir;

		for (size_t k = 0; dir && k < dir->n; k++) {
			struct nvmefs_dirent *d = dir->v[k];
			size_t at = d ? slot_of(f, d->child) : SIZE_MAX;
			struct nvmefs_inode *c = at == SIZE_MAX ? NULL : f->in[at];
			const char *why = NULL;

			if (!d)
				continue; /* a removed entry's hole */
			if (!c || c->dead)
				why = "names no inode";
			else if (c->ino == NVMEFS_ROOT_INO)
				why = "names the root directory";
			else if (S_ISDIR(c->mode) && f->links[at])
				why = "names a directory that has another entry";
			if (why) {
				problem(f, true,
					"entry '%s' in directory %" PRIu64 " %s (inode %" PRIu64
					")",
					d->name, d->parent, why, d->child);
				if (nvmefs_grow(&bad, &cap, nbad + 1, sizeof(*bad))) {
					ret = -ENOMEM;
					goto out;
				}
				bad[nbad++] = d;
				continue;
			}
			f->links[at]++;
			if (S_ISDIR(c->mode)) {
				size_t p = slot_of(f, d->parent);

				if (p != SIZE_MAX)
					f->subdirs[p]++;
				if (f->repair)
					c->parent = d->parent; /* its one entry is its ".." */
			}
			if (d->type != IFTODT(c->mode)) {
				/* The type is a hint for readdir; the inode is right. */
				problem(f, true,
					"entry '%s' in directory %" PRIu64
					" says type %u, inode %" PRIu64 " is type %u",
					d->name, d->parent, d->type, c->ino, IFTODT(c->mode));
				if (f->repair)
					d->type = IFTODT(c->mode);
			}
		}
	}
	for (size_t i = 0; f->repair && i < nbad && !ret; i++)
		ret = dirent_del(f, bad[i]);
out:
	free(bad);
	return ret;
}

/* ---- 6. the tree ---- */

/* Mark everything reachable from directory at index `at`. */
static int reach(struct fsck *f, size_t at)
{
	size_t *stack = NULL, n = 0, cap = 0;
	int ret = 0;

	if (f->reached[at])
		return 0;
	f->reached[at] = true;
	if (nvmefs_grow(&stack, &cap, 1, sizeof(*stack)))
		return -ENOMEM;
	stack[n++] = at;
	while (n && !ret) {
		struct nvmefs_dir *dir = f->in[stack[--n]]->dir;

		for (size_t k = 0; dir && k < dir->n; k++) {
			size_t c;

			if (!dir->v[k] || (c = slot_of(f, dir->v[k]->child)) == SIZE_MAX ||
			    f->reached[c])
				continue;
			f->reached[c] = true;
			if (!S_ISDIR(f->in[c]->mode))
				continue;
			if (nvmefs_grow(&stack, &cap, n + 1, sizeof(*stack))) {
				ret = -ENOMEM;
				break;
			}
			stack[n++] = c;
		}
	}
	free(stack);
	return ret;
}

/* /lost+found, made if need be. Returns its inode number or 0. */
static uint64_t lost_found(struct fsck *f)
{
	struct nvmefs_vol *vol = f->vol;
	struct nvmefs_dirent *d = nvmefs_dir_find(vol, NVMEFS_ROOT_INO, LOST_FOUND);
	struct nvmefs_rec r = {.type = NVMEFS_REC_INODE}, root;
	struct timespec now;

	if (d) {
		struct nvmefs_inode *in = nvmefs_iget(vol, d->child);

		return in && S_ISDIR(in->mode) ? in->ino : 0;
	}
	nvmefs_timespec_now(&now);
	r.inode.ino = vol->next_ino;
	r.inode.mode = S_IFDIR | 0700;
	r.inode.nlink = 2;
	r.inode.atime = r.inode.mtime = r.inode.ctime = r.inode.crtime =
		(struct nvmefs_time){now.tv_sec, (uint32_t)now.tv_nsec};
	if (apply(f, &r) || dirent_add(f, NVMEFS_ROOT_INO, LOST_FOUND, r.inode.ino, DT_DIR))
		return 0;
	nvmefs_inode_to_rec(nvmefs_iget(vol, NVMEFS_ROOT_INO), &root);
	root.inode.nlink++; /* its ".." */
	if (apply(f, &root))
		return 0;
	printf("created /%s\n", LOST_FOUND);
	return r.inode.ino;
}

/* Give inode `at` an entry in /lost+found, cutting it loose first. */
static int reconnect(struct fsck *f, size_t at)
{
	struct nvmefs_vol *vol = f->vol;
	struct nvmefs_inode *in = f->in[at];
	uint64_t lf = lost_found(f);
	char name[32];
	int ret;

	if (!lf)
		return -EEXIST;
	/* A detached directory may still be named from inside its own subtree
	 * (a cycle): that entry goes. */
	for (size_t b = 0; S_ISDIR(in->mode) && b < vol->dtab_size; b++) {
		for (struct nvmefs_dirent *d = vol->dtab[b], *next; d; d = next) {
			next = d->hnext;
			if (d->child == in->ino && (ret = dirent_del(f, d)))
				return ret;
		}
	}
	snprintf(name, sizeof(name), "#%" PRIu64, in->ino);
	return dirent_add(f, lf, name, in->ino, IFTODT(in->mode));
}

/* Every inode reachable from the root; the detached ones to /lost+found.
 * Indexes again afterwards when anything moved. */
static int check_tree(struct fsck *f)
{
	bool moved = false;
	int ret;

	pass_begin(f, "directory tree");
	ret = reach(f, slot_of(f, NVMEFS_ROOT_INO));
	/* Directories first: reconnecting one brings back what is in it. */
	for (size_t k = 0; k < 2 * f->n && !ret; k++) {
		size_t i = k % f->n;
		struct nvmefs_inode *in = f->in[i];

		progress(f, k, 2 * f->n);
		if ((k < f->n) != S_ISDIR(in->mode))
			continue;
		/* Orphans and leaked inodes are pass 6's, unless a directory
		 * still holds entries: those come back with it. */
		if (f->reached[i] || in->dead ||
		    (in->nlink == 0 && !f->links[i] && !(S_ISDIR(in->mode) && in->dir->live)))
			continue;
		problem(f, true, "%s %" PRIu64 " is not reachable from the root (moved to /%s)",
			S_ISDIR(in->mode) ? "directory" : "inode", in->ino, LOST_FOUND);
		if (!f->repair) {
			/* Count it as reconnected, and what is under it once. */
			f->links[i] = 1;
			ret = reach(f, i);
			continue;
		}
		ret = reconnect(f, i);
		if (!ret)
			ret = reach(f, i);
		moved = true;
	}
	progress_end(f);
	if (ret == -EEXIST) {
		problem(f, false, "/%s exists and is not a directory", LOST_FOUND);
		ret = 0;
	}
	return ret ? ret : moved ? 1 : 0;
}

/* ---- 7. link counts and orphans ---- */

static int set_nlink(struct fsck *f, struct nvmefs_inode *in, uint32_t nlink)
{
	struct nvmefs_rec r;

	nvmefs_inode_to_rec(in, &r);
	r.inode.nlink = nlink;
	return apply(f, &r);
}

static int free_inode(struct fsck *f, struct nvmefs_inode *in)
{
	struct nvmefs_rec r = {.type = NVMEFS_REC_INODE_FREE};

	r.ino.ino = in->ino;
	return apply(f, &r);
}

static int check_links(struct fsck *f, size_t *orphans)
{
	struct nvmefs_rec od = {.type = NVMEFS_REC_ORPHAN_DEL};
	int ret = 0;

	pass_begin(f, "link counts");
	*orphans = 0;
	for (size_t i = 0; i < f->n && !ret; i++) {
		struct nvmefs_inode *in = f->in[i];
		bool root = in->ino == NVMEFS_ROOT_INO;
		uint32_t want = S_ISDIR(in->mode) ? 2 + f->subdirs[i] : f->links[i];

		progress(f, i, f->n);
		if (in->dead)
			continue;
		if (!root && !f->links[i]) {
			if (in->orphan) {
				(*orphans)++;
				if (f->repair)
					ret = free_inode(f, in);
				continue;
			}
			problem(f, true,
				"inode %" PRIu64
				" has no entry and no orphan record (leaked: freed)",
				in->ino);
			if (f->repair)
				ret = free_inode(f, in);
			continue;
		}
		if (in->orphan) {
			problem(f, true, "inode %" PRIu64 " has %u entries but an orphan record",
				in->ino, f->links[i]);
			od.ino.ino = in->ino;
			if (f->repair)
				ret = apply(f, &od);
		}
		if (!ret && in->nlink != want) {
			problem(f, true, "inode %" PRIu64 ": link count %u, should be %u", in->ino,
				in->nlink, want);
			if (f->repair)
				ret = set_nlink(f, in, want);
		}
	}
	progress_end(f);
	if (*orphans)
		printf("%zu file(s) unlinked while open at the last shutdown: %s\n", *orphans,
		       f->repair ? "reclaimed" : "the next mount or fsck -y reclaims them");
	return ret;
}

/* ---- 8. free space ---- */

/* The store's FREE keys of one member, as they are (they may overlap when
 * damaged), in key order: by end. */
struct fkeys {
	struct nvmefs_range *v;
	size_t n, cap;
};

/* Read every FREE key of the store into k[member]; a key that does not
 * decode or names no member is reported and, with -y, deleted. */
static int read_free_keys(struct fsck *f, struct fkeys *k)
{
	const uint8_t prefix[1] = {NVMEFS_KEY_FREE};
	struct nvmefs_vol *vol = f->vol;
	struct nvmefs_store_iter *it;
	struct nvmefs_run_ent e;
	int ret = nvmefs_store_iter_prefix(&it, vol->store, prefix, sizeof(prefix));

	while (!ret && (ret = nvmefs_store_iter_next(it, &e)) == 1) {
		struct nvmefs_val v;
		struct fkeys *m;

		ret = nvmefs_val_decode(e.key, e.klen, e.val, e.vlen, &v);
		if (ret || v.free.member >= vol->ndevs) {
			problem(f, true,
				"a FREE key of member %u does not decode or names no member",
				e.klen > 1 ? e.key[1] : 0);
			if (f->repair)
				nvmefs_kv_del(vol, e.key, e.klen);
			ret = 0;
			continue;
		}
		m = &k[v.free.member];
		ret = nvmefs_grow(&m->v, &m->cap, m->n + 1, sizeof(*m->v));
		if (!ret)
			m->v[m->n++] = (struct nvmefs_range){v.free.off, v.free.len};
	}
	nvmefs_store_iter_close(it);
	return ret < 0 ? ret : 0;
}

/* What the extents say of the bytes [off, end) of member d (free is its
 * complement, sorted): "free: A-B" of the first free range there, or "in
 * use". */
static const char *extents_say(const struct nvmefs_freemap *free, uint64_t off, uint64_t end,
			       char *buf, size_t size)
{
	for (size_t i = 0; i < free->n; i++) {
		const struct nvmefs_range *r = &free->v[i];

		if (r->off < end && r->off + r->len > off) {
			snprintf(buf, size, "the extents leave %" PRIu64 "-%" PRIu64 " free there",
				 r->off, r->off + r->len);
			return buf;
		}
	}
	return "the extents use those bytes";
}

/* One difference between the keys and the extents; the first ten by
 * name, the rest counted (reported after). */
static void free_differs(struct fsck *f, size_t *n, const char *fmt, ...)
{
	va_list ap;

	if ((*n)++ >= 10)
		return;
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	if (f->repair)
		printf(": fixed\n");
	else
		printf(": not fixed (-n)\n");
}

static void put_free_key(struct nvmefs_vol *vol, unsigned d, const struct nvmefs_range *r)
{
	struct nvmefs_val v = {.kind = NVMEFS_KEY_FREE};

	v.free.member = d;
	v.free.off = r->off;
	v.free.len = r->len;
	nvmefs_kv_put(vol, &v);
}

/*
 * The store's FREE keys against the complement of the extents (vol->free,
 * just rebuilt): each free range one key, keyed by its end, and no other
 * key. Walked by end, both sides sorted so. -y writes the keys that differ
 * (a put, or a tombstone for a key of no free range) and makes the durable
 * free map the complement. Returns the differences or -errno.
 */
static long check_free_keys(struct fsck *f)
{
	struct nvmefs_vol *vol = f->vol;
	struct fkeys k[NVMEFS_MAX_DEVICES] = {0};
	uint8_t key[NVMEFS_KEY_MAX];
	char say[96];
	size_t diffs = 0;
	int ret = read_free_keys(f, k);

	for (unsigned d = 0; !ret && d < vol->ndevs; d++) {
		const struct nvmefs_freemap *want = &vol->free[d];
		size_t i = 0, j = 0;

		while (i < k[d].n || j < want->n) {
			const struct nvmefs_range *a = i < k[d].n ? &k[d].v[i] : NULL;
			const struct nvmefs_range *b = j < want->n ? &want->v[j] : NULL;
			uint64_t aend = a ? a->off + a->len : UINT64_MAX;
			uint64_t bend = b ? b->off + b->len : UINT64_MAX;

			if (a && b && aend == bend) {
				if (a->off != b->off) {
					free_differs(f, &diffs,
						     "member %u: the FREE key of bytes %" PRIu64
						     "-%" PRIu64 " says they are free, the extents "
						     "leave %" PRIu64 "-%" PRIu64 " free",
						     d, a->off, aend, b->off, bend);
					if (f->repair)
						put_free_key(vol, d, b);
				}
				i++;
				j++;
			} else if (a && aend < bend) {
				free_differs(f, &diffs,
					     "member %u: a FREE key says bytes %" PRIu64 "-%" PRIu64
					     " are free, %s",
					     d, a->off, aend,
					     extents_say(want, a->off, aend, say, sizeof(say)));
				if (f->repair)
					nvmefs_kv_del(vol, key, nvmefs_key_free(key, d, aend));
				i++;
			} else {
				free_differs(
					f, &diffs,
					"member %u: bytes %" PRIu64 "-%" PRIu64
					" are free (no extent maps them) but no FREE key says so",
					d, b->off, bend);
				if (f->repair)
					put_free_key(vol, d, b);
				j++;
			}
		}
	}
	for (unsigned d = 0; d < NVMEFS_MAX_DEVICES; d++)
		free(k[d].v);
	if (ret)
		return ret;
	if (diffs > 10)
		printf("member(s): %zu more differences between the FREE keys and the extents\n",
		       diffs - 10);
	return (long)diffs;
}

/* -y: the durable free map becomes the complement of the extents, as the
 * keys now are, so that later changes write the right keys. */
static int reset_free_keys(struct fsck *f)
{
	struct nvmefs_vol *vol = f->vol;

	for (unsigned d = 0; d < vol->ndevs; d++) {
		struct nvmefs_freemap *m = &vol->dfree[d];

		if (nvmefs_grow(&m->v, &m->cap, vol->free[d].n + 1, sizeof(*m->v)))
			return -ENOMEM;
		memcpy(m->v, vol->free[d].v, vol->free[d].n * sizeof(*m->v));
		m->n = vol->free[d].n;
	}
	vol->free_keys = true;
	return vol->kv_err;
}

/* The FREE keys: a volume made before them has none (the mount refuses
 * it); else each difference from the extents. */
static int check_free(struct fsck *f)
{
	long diffs;

	if (!f->vol->free_keys)
		problem(f, true,
			"the volume keeps no free space in its run area (made before FREE keys); "
			"-y writes it from the extents");
	diffs = check_free_keys(f);
	if (diffs < 0)
		return (int)diffs;
	if (diffs && f->vol->free_keys)
		problem(f, true, "%ld FREE key(s) differ from the extents (above)", diffs);
	if (!f->repair || (!diffs && f->vol->free_keys))
		return 0;
	return reset_free_keys(f);
}

static int check_space(struct fsck *f)
{
	struct nvmefs_vol *vol = f->vol;
	uint64_t used = 0, files = 0, dirs = 0, used_d[NVMEFS_MAX_DEVICES] = {0};
	int ret;

	pass_begin(f, "free space");
	if (!f->repair && f->claims) {
		info(f, "free space not rebuilt: extents overlap (see above)");
		return 0;
	}
	ret = nvmefs_alloc_rebuild(vol);
	if (ret == -EUCLEAN) {
		problem(f, false, "extents still overlap");
		return 0;
	}
	if (ret)
		return ret;
	/* One pass over the inodes: bytes mapped on each member. */
	for (size_t i = 0; i < vol->itab_size; i++) {
		for (struct nvmefs_inode *in = vol->itab[i]; in; in = in->hnext) {
			files += !S_ISDIR(in->mode);
			dirs += S_ISDIR(in->mode);
			for (unsigned s = 0; in->slots && s < in->layout.stripe_count; s++) {
				for (size_t k = 0; k < in->slots[s].n; k++)
					used_d[in->layout.devs[s]] += in->slots[s].v[k].len;
			}
		}
	}
	for (unsigned d = 0; d < vol->ndevs; d++) {
		uint64_t free_d = 0, area = vol->data_end[d] - vol->data_start[d];

		for (size_t k = 0; k < vol->free[d].n; k++)
			free_d += vol->free[d].v[k].len;
		if (used_d[d] + free_d != area)
			problem(f, false,
				"member %u: %" PRIu64 " bytes used and %" PRIu64
				" free do not add up to its %" PRIu64 " byte data area",
				d, used_d[d], free_d, area);
		used += used_d[d];
	}
	printf("%" PRIu64 " files, %" PRIu64 " directories, %" PRIu64 " of %" PRIu64
	       " bytes used\n",
	       files, dirs, used, vol->total_bytes);
	return check_free(f);
}

/* ---- 9. the store ---- */

/* The store's keys against the metadata loaded from them and repaired:
 * what the load does not read back (the summaries of the INODE values,
 * DIRENT keys beside their DCOOKIE twins) or a repair changed. -y writes
 * the metadata's keys where they differ. */
static int check_store(struct fsck *f)
{
	int ret;

	pass_begin(f, "store");
	ret = nvmefs_meta_check_store(f->vol, false);
	if (ret != -EUCLEAN)
		return ret;
	problem(f, true, "the store's keys differ from the metadata (the first difference above)");
	if (!f->repair)
		return 0;
	ret = nvmefs_meta_check_store(f->vol, true);
	if (ret >= 0)
		info(f, "%d key(s) of the store rewritten", ret);
	return ret < 0 ? ret : 0;
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
