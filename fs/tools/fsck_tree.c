// SPDX-License-Identifier: MIT
/*
 * fsck.nvmefs's passes over the namespace (fsck.c lists them all and runs
 * them; fsck_space.c has 8 and 9): 3. inodes and their extents, 4.
 * extents owned once, 5. directory entries, 6. the tree (what cannot be
 * reached goes to /lost+found), 7. link counts and orphans. Repairs go
 * through apply (fsck.c), as replayed records would.
 */
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fsck_i.h"
#include "extmap_i.h"
#include "meta_i.h"
#include "util_i.h"
#include "nvmefs/util.h"

/* ---- 3. inodes and their extents (2, the journal, is in run(), fsck.c) ---- */

void check_inode(struct fsck *f, struct nvmefs_inode *in)
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
long check_claims(struct fsck *f)
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

int check_entries(struct fsck *f)
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
int reach(struct fsck *f, size_t at)
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
 * Returns 1 when anything moved (run() then indexes again), 0 or -errno. */
int check_tree(struct fsck *f)
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
		/* Orphans and leaked inodes are pass 7's, unless a directory
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

int check_links(struct fsck *f, size_t *orphans)
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
