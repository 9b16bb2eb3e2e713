// SPDX-License-Identifier: MIT
/*
 * The in-memory metadata of a mounted volume: the inode table, directory
 * entries (one volume-wide hash on (parent, name) plus a cookie-ordered list
 * per directory for readdir), extent maps and xattrs; and the one function
 * that changes them, nvmefs_meta_apply(), used both to replay records read
 * from disk and for live operations (which then log the same record), so the
 * journal can never describe a state the code did not produce; and the
 * mount's load of the store's keys into them (nvmefs_meta_load_val).
 *
 * Apply also writes every change through to the store as keys and values
 * (meta_keys.c, kv.c; extmap.c does the extents' keys). The checks of the
 * loaded state, the crosscheck of the maps against the shadow and fsck's
 * check of the store are in meta_check.c.
 */
#include "fs_i.h"
#include "alloc_i.h"
#include "extmap_i.h"
#include "kv_i.h"
#include "lookups_i.h"
#include "meta_i.h"
#include "meta_keys_i.h"
#include "store.h"
#include "util_i.h"

#include <dirent.h>
#include <endian.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <xxhash.h>

#include "nvmefs/util.h"

static uint64_t hash_ino(uint64_t ino)
{
	ino ^= ino >> 33;
	ino *= 0xff51afd7ed558ccdull;
	return ino ^ (ino >> 33);
}

/* Users choose the names: with an unkeyed hash (FNV-1a here before) they
 * can pick names that all share one chain, and then every lookup and create
 * walks the whole set. Keyed with the mount's random seed, such a set can
 * only be guessed. */
static uint64_t hash_name(const struct nvmefs_vol *vol, uint64_t parent, const char *name,
			  size_t len)
{
	return XXH3_64bits_withSeed(name, len, vol->name_seed ^ hash_ino(parent));
}

/*
 * Buckets of the inode and entry tables at the start: what the metadata
 * cache holds when full, about one inode or entry for each 512 bytes of
 * it (2^18 for the default 128 MiB: 2 MiB a table), so that a mount's
 * tables do not grow while it fills. A growth rehashes every chain under
 * meta: 29 ms at 2^17 inodes, a create's stall. What loads everything
 * (fsck, -o meta_cache larger than memory allows) still grows them.
 */
static size_t table_size(const struct nvmefs_vol *vol)
{
	uint64_t cache = nvmefs_meta_cache_limit(vol);
	size_t n = 1024;

	while (n < (1u << 20) && (uint64_t)n * 512 < cache)
		n *= 2;
	return n;
}

int nvmefs_meta_init(struct nvmefs_vol *vol)
{
	/* hash_name's key. Blocks only until the kernel's generator is seeded,
	 * which is early boot at the latest. */
	if (getrandom(&vol->name_seed, sizeof(vol->name_seed), 0) != sizeof(vol->name_seed))
		return -errno;
	vol->itab_size = vol->opts.check ? 1024 : table_size(vol);
	vol->dtab_size = vol->itab_size;
	vol->itab = calloc(vol->itab_size, sizeof(*vol->itab));
	vol->dtab = calloc(vol->dtab_size, sizeof(*vol->dtab));
	vol->kv_val = malloc(NVMEFS_VAL_MAX);
	if (!vol->itab || !vol->dtab || !vol->kv_val)
		return -ENOMEM;
	vol->next_ino = NVMEFS_ROOT_INO + 1;
	/* A checker's volume (fsck) may hold what apply refuses and is
	 * repaired in place: never shadowed. */
	if (!vol->opts.check && getenv("NVMEFS_META_CROSSCHECK") &&
	    !strcmp(getenv("NVMEFS_META_CROSSCHECK"), "1"))
		return nvmefs_meta_shadow_start(vol);
	return 0;
}

int nvmefs_meta_shadow_start(struct nvmefs_vol *vol)
{
	if (vol->shadow)
		return 0;
	if (vol->ninodes)
		return -EBUSY; /* it would miss what is applied already */
	return nvmefs_shadow_create(&vol->shadow);
}

void nvmefs_meta_shadow_stop(struct nvmefs_vol *vol)
{
	nvmefs_shadow_destroy(vol->shadow);
	vol->shadow = NULL;
}

static void inode_free_mem(struct nvmefs_inode *in)
{
	if (in->slots) {
		for (unsigned s = 0; s < in->layout.stripe_count; s++)
			free(in->slots[s].v);
		free(in->slots);
	}
	if (in->dir) {
		free(in->dir->v);
		free(in->dir);
	}
	for (unsigned i = 0; i < in->nxattrs; i++) {
		free(in->xattrs[i].name);
		free(in->xattrs[i].value);
	}
	free(in->xattrs);
	free(in->target);
	nvmefs_rl_exit(&in->io_lock);
	pthread_rwlock_destroy(&in->map_lock);
	free(in);
}

void nvmefs_meta_exit(struct nvmefs_vol *vol)
{
	for (size_t i = 0; vol->dtab && i < vol->dtab_size; i++) {
		for (struct nvmefs_dirent *d = vol->dtab[i], *n; d; d = n) {
			n = d->hnext;
			free(d);
		}
	}
	for (size_t i = 0; vol->itab && i < vol->itab_size; i++) {
		for (struct nvmefs_inode *in = vol->itab[i], *n; in; in = n) {
			n = in->hnext;
			inode_free_mem(in);
		}
	}
	free(vol->dtab);
	free(vol->itab);
	free(vol->kv_val);
	vol->dtab = NULL;
	vol->itab = NULL;
	vol->kv_val = NULL;
	nvmefs_meta_shadow_stop(vol);
}

struct nvmefs_inode *nvmefs_iget(struct nvmefs_vol *vol, uint64_t ino)
{
	struct nvmefs_inode *in = vol->itab[hash_ino(ino) & (vol->itab_size - 1)];

	while (in && in->ino != ino)
		in = in->hnext;
	return in;
}

static void itab_grow(struct nvmefs_vol *vol)
{
	size_t size = vol->itab_size * 2;
	struct nvmefs_inode **t = calloc(size, sizeof(*t));

	if (!t)
		return; /* stay at the old size: longer chains, still correct */
	for (size_t i = 0; i < vol->itab_size; i++) {
		for (struct nvmefs_inode *in = vol->itab[i], *n; in; in = n) {
			size_t b = hash_ino(in->ino) & (size - 1);

			n = in->hnext;
			in->hnext = t[b];
			t[b] = in;
		}
	}
	free(vol->itab);
	vol->itab = t;
	vol->itab_size = size;
}

static void dtab_grow(struct nvmefs_vol *vol)
{
	size_t size = vol->dtab_size * 2;
	struct nvmefs_dirent **t = calloc(size, sizeof(*t));

	if (!t)
		return;
	for (size_t i = 0; i < vol->dtab_size; i++) {
		for (struct nvmefs_dirent *d = vol->dtab[i], *n; d; d = n) {
			size_t b = hash_name(vol, d->parent, d->name, d->name_len) & (size - 1);

			n = d->hnext;
			d->hnext = t[b];
			t[b] = d;
		}
	}
	free(vol->dtab);
	vol->dtab = t;
	vol->dtab_size = size;
}

struct nvmefs_dirent **nvmefs_meta_dir_slot(struct nvmefs_vol *vol, uint64_t parent,
					    const char *name, size_t len)
{
	struct nvmefs_dirent **pp =
		&vol->dtab[hash_name(vol, parent, name, len) & (vol->dtab_size - 1)];

	while (*pp && !((*pp)->parent == parent && (*pp)->name_len == len &&
			memcmp((*pp)->name, name, len) == 0))
		pp = &(*pp)->hnext;
	return pp;
}

struct nvmefs_dirent *nvmefs_dir_find(struct nvmefs_vol *vol, uint64_t parent, const char *name)
{
	return *nvmefs_meta_dir_slot(vol, parent, name, strlen(name));
}

uint64_t nvmefs_meta_cost_inode(size_t name_len)
{
	/* INODE record, DIRENT_ADD record: what a new file adds to meta_bytes. */
	return 8 + 150 + 8 + 20 + name_len;
}

/* ---- inodes ---- */

static void ts_from(struct timespec *ts, struct nvmefs_time t)
{
	ts->tv_sec = t.sec;
	ts->tv_nsec = t.nsec;
}

static int inode_create(struct nvmefs_vol *vol, const struct nvmefs_rec *r,
			struct nvmefs_inode **out)
{
	struct nvmefs_inode *in = calloc(1, sizeof(*in));
	size_t b;

	if (!in)
		return -ENOMEM;
	if (r->inode.ino > NVMEFS_INO_MAX) { /* next_ino must not wrap */
		free(in);
		return -EUCLEAN;
	}
	in->ino = r->inode.ino;
	in->mode = r->inode.mode;
	nvmefs_rl_init(&in->io_lock);
	pthread_rwlock_init(&in->map_lock, NULL);
	if (S_ISDIR(in->mode)) {
		if (!nvmefs_dir_layout_ok(&r->inode.layout, vol->ndevs))
			goto err_free;
		in->layout = r->inode.layout; /* the default of its new files */
		in->dir = calloc(1, sizeof(*in->dir));
		if (!in->dir)
			goto err_free;
		in->dir->next_cookie = 3; /* 1 and 2 are "." and ".." */
		in->dir->loaded = true;	  /* a fill says otherwise */
		in->parent = in->ino;	  /* until an entry names it */
	} else if (S_ISREG(in->mode)) {
		for (unsigned s = 0; s < r->inode.layout.stripe_count; s++) {
			if (r->inode.layout.devs[s] >= vol->ndevs)
				goto err_free;
		}
		in->layout = r->inode.layout;
		in->slots = calloc(in->layout.stripe_count, sizeof(*in->slots));
		if (!in->slots)
			goto err_free;
		in->ext_loaded = true; /* a fill says otherwise */
	} else if (S_ISLNK(in->mode)) {
		in->target = strndup(r->inode.target, r->inode.target_len);
		if (!in->target)
			goto err_free;
	}
	if (vol->ncached >= vol->itab_size)
		itab_grow(vol);
	b = hash_ino(in->ino) & (vol->itab_size - 1);
	in->hnext = vol->itab[b];
	vol->itab[b] = in;
	if (in->ino >= vol->next_ino)
		vol->next_ino = in->ino + 1;
	vol->ncached++;
	if (!vol->filling) { /* a fill reads what the mark counted already */
		vol->ninodes++;
		vol->meta_bytes += nvmefs_rec_size(r);
	}
	*out = in;
	return 0;
err_free:
	inode_free_mem(in);
	return -EUCLEAN;
}

/*
 * A new layout for an existing inode: a directory's default, or the layout
 * of a file that holds no data yet (fixed from its first extent on).
 */
static int relayout(struct nvmefs_vol *vol, struct nvmefs_inode *in, const struct nvmefs_layout *l)
{
	struct nvmefs_extmap *slots;

	if (S_ISDIR(in->mode)) {
		if (!nvmefs_dir_layout_ok(l, vol->ndevs))
			return -EUCLEAN;
		in->layout = *l;
		return 0;
	}
	if (!S_ISREG(in->mode) || in->alloc_bytes || !in->ext_loaded ||
	    nvmefs_layout_check(l, vol->ndevs))
		return -EUCLEAN;
	for (unsigned s = 0; s < in->layout.stripe_count; s++)
		if (in->slots[s].n)
			return -EUCLEAN;
	slots = calloc(l->stripe_count, sizeof(*slots));
	if (!slots)
		return -ENOMEM;
	/* A READ walks the maps holding only map_lock. */
	pthread_rwlock_wrlock(&in->map_lock);
	for (unsigned s = 0; s < in->layout.stripe_count; s++)
		free(in->slots[s].v);
	free(in->slots);
	in->slots = slots;
	in->layout = *l;
	pthread_rwlock_unlock(&in->map_lock);
	return 0;
}

static int apply_inode(struct nvmefs_vol *vol, const struct nvmefs_rec *r)
{
	struct nvmefs_inode *in = nvmefs_iget(vol, r->inode.ino);
	int ret;

	if (!in) {
		ret = inode_create(vol, r, &in);
		if (ret)
			return ret;
	} else if ((in->mode & S_IFMT) != (r->inode.mode & S_IFMT) || in->dead) {
		return -EUCLEAN;
	} else if ((S_ISREG(in->mode) || S_ISDIR(in->mode)) &&
		   memcmp(&in->layout, &r->inode.layout, sizeof(in->layout))) {
		ret = relayout(vol, in, &r->inode.layout);
		if (ret)
			return ret;
	}
	in->mode = r->inode.mode;
	in->uid = r->inode.uid;
	in->gid = r->inode.gid;
	in->nlink = r->inode.nlink;
	/* READs read the size, and WRITEs the flags, without meta
	 * (fs/core/data_io.c). */
	__atomic_store_n(&in->flags, r->inode.flags, __ATOMIC_RELAXED);
	__atomic_store_n(&in->size, r->inode.size, __ATOMIC_RELEASE);
	in->rdev = r->inode.rdev;
	ts_from(&in->atime, r->inode.atime);
	ts_from(&in->mtime, r->inode.mtime);
	ts_from(&in->ctime, r->inode.ctime);
	ts_from(&in->crtime, r->inode.crtime);
	nvmefs_inode_note_privs(in);
	nvmefs_meta_kv_inode(vol, in);
	return 0;
}

void nvmefs_inode_undirty(struct nvmefs_vol *vol, struct nvmefs_inode *in)
{
	/* Off the list: the next overwrite queues it again (before its time
	 * is folded, see note_overwrite in fs/core/data_io.c). */
	atomic_store(&in->wtime_queued, false);
	if (!in->dirty_pprev)
		return;
	vol->ndirty--;
	*in->dirty_pprev = in->dirty_next;
	if (in->dirty_next)
		in->dirty_next->dirty_pprev = in->dirty_pprev;
	in->dirty_next = NULL;
	in->dirty_pprev = NULL;
}

void nvmefs_inode_dirty(struct nvmefs_vol *vol, struct nvmefs_inode *in)
{
	atomic_fetch_add_explicit(&in->attr_gen, 1, memory_order_release);
	if (in->dirty_pprev || in->dead || vol->replaying)
		return;
	in->dirty_next = vol->dirty;
	if (in->dirty_next)
		in->dirty_next->dirty_pprev = &in->dirty_next;
	in->dirty_pprev = &vol->dirty;
	vol->dirty = in;
	vol->ndirty++;
}

void nvmefs_inode_drop(struct nvmefs_vol *vol, struct nvmefs_inode *in)
{
	struct nvmefs_inode **pp = &vol->itab[hash_ino(in->ino) & (vol->itab_size - 1)];

	nvmefs_inode_undirty(vol, in);
	while (*pp && *pp != in)
		pp = &(*pp)->hnext;
	if (*pp)
		*pp = in->hnext;
	vol->ncached--;
	inode_free_mem(in);
}

static int apply_inode_free(struct nvmefs_vol *vol, const struct nvmefs_rec *r)
{
	struct nvmefs_inode *in = nvmefs_iget(vol, r->ino.ino);
	struct nvmefs_rec tmp;

	/* nlink is not checked: during replay the last INODE record may predate
	 * the unlink that led here. */
	if (!in || in->dead || r->ino.ino == NVMEFS_ROOT_INO || (in->dir && in->dir->live) ||
	    (in->slots && !in->ext_loaded))
		return -EUCLEAN;
	if (in->slots) {
		for (unsigned s = 0; s < in->layout.stripe_count; s++) {
			int ret = nvmefs_extmap_remove(vol, in, s, 0, UINT64_MAX, true);

			if (ret)
				return ret;
		}
	}
	for (unsigned i = 0; i < in->nxattrs; i++) {
		vol->meta_bytes -= 16 + 8 + in->xattrs[i].name_len + in->xattrs[i].value_len;
		nvmefs_meta_kv_xattr(vol, in->ino, &in->xattrs[i], false);
	}
	nvmefs_inode_to_rec(in, &tmp);
	vol->meta_bytes -= nvmefs_rec_size(&tmp);
	if (nvmefs_kv_on(vol)) { /* its extents' keys went in nvmefs_extmap_remove */
		uint8_t key[NVMEFS_KEY_MAX];

		nvmefs_kv_del(vol, key, nvmefs_key_inode(key, in->ino));
	}
	if (in->orphan) {
		nvmefs_meta_kv_orphan(vol, in->ino, false);
		in->orphan = false;
		vol->norphans--;
		vol->meta_bytes -= 16;
	}
	in->dead = true;
	vol->ninodes--;
	nvmefs_inode_undirty(vol, in);
	/* The kernel (lookup count) or an operation may still hold it; the
	 * forget or the put that lets it go drops it (icache.c). */
	if (!nvmefs_inode_held(vol, in))
		nvmefs_inode_drop(vol, in);
	return 0;
}

static int apply_orphan(struct nvmefs_vol *vol, const struct nvmefs_rec *r, bool add)
{
	struct nvmefs_inode *in = nvmefs_iget(vol, r->ino.ino);

	if (!in || in->dead || in->orphan == add)
		return -EUCLEAN;
	in->orphan = add;
	nvmefs_meta_kv_orphan(vol, in->ino, add);
	vol->norphans += add ? 1 : (size_t)-1; /* in memory */
	if (!vol->filling)		       /* the mark counted a filled one already */
		vol->meta_bytes += add ? 16 : (uint64_t)-16;
	return 0;
}

/* ---- directory entries ---- */

/* Append d with cookie (0: the directory's next one). */
static int dir_push(struct nvmefs_dir *dir, struct nvmefs_dirent *d, uint64_t cookie)
{
	/* When full, compact instead of growing if half the slots are holes. */
	if (dir->n == dir->cap && dir->live * 2 < dir->n) {
		size_t k = 0;

		for (size_t i = 0; i < dir->n; i++) {
			if (dir->v[i])
				dir->v[k++] = dir->v[i];
		}
		dir->n = k;
	} else if (nvmefs_grow(&dir->v, &dir->cap, dir->n + 1, sizeof(*dir->v))) {
		return -ENOMEM;
	}
	d->cookie = cookie ? cookie : dir->next_cookie;
	if (d->cookie >= dir->next_cookie)
		dir->next_cookie = d->cookie + 1;
	dir->v[dir->n++] = d;
	dir->live++;
	return 0;
}

/* Index of the first live-or-hole slot whose entry has cookie >= c. Holes
 * keep no cookie, so search over the live ones around them. */
static size_t dir_lower_bound(const struct nvmefs_dir *dir, uint64_t c)
{
	size_t lo = 0, hi = dir->n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2, m = mid;

		while (m < hi && !dir->v[m])
			m++;
		if (m == hi) {
			hi = mid;
			continue;
		}
		if (dir->v[m]->cookie < c)
			lo = m + 1;
		else
			hi = mid;
	}
	return lo;
}

size_t nvmefs_dir_index(const struct nvmefs_dir *dir, uint64_t cookie)
{
	return dir_lower_bound(dir, cookie);
}

static void dir_remove(struct nvmefs_dir *dir, struct nvmefs_dirent *d)
{
	size_t i = dir_lower_bound(dir, d->cookie);

	while (i < dir->n && dir->v[i] != d)
		i++;
	if (i < dir->n) {
		dir->v[i] = NULL;
		dir->live--;
	}
	/* Trailing holes can go at once. */
	while (dir->n && !dir->v[dir->n - 1])
		dir->n--;
}

/* cookie: the entry's (loading from the store), or 0 for the directory's
 * next (a record). */
static int apply_dirent_add(struct nvmefs_vol *vol, const struct nvmefs_rec *r, uint64_t cookie)
{
	struct nvmefs_inode *p = nvmefs_iget(vol, r->dirent.parent);
	struct nvmefs_inode *c = nvmefs_iget(vol, r->dirent.child);
	struct nvmefs_dirent **pp, *d;
	int ret;

	/* A fill of the parent's entries reads them without their children. */
	if (!p || !p->dir || p->dead || (!vol->filling && (!p->dir->loaded || !c || c->dead)))
		return -EUCLEAN;
	/* Loaded entries come in cookie order, each below the next cookie the
	 * directory's INODE value gave. */
	if (cookie &&
	    (cookie < NVMEFS_COOKIE_FIRST || cookie >= p->dir->next_cookie ||
	     (p->dir->n && p->dir->v[p->dir->n - 1] && p->dir->v[p->dir->n - 1]->cookie >= cookie)))
		return -EUCLEAN;
	pp = nvmefs_meta_dir_slot(vol, r->dirent.parent, r->dirent.name, r->dirent.name_len);
	if (*pp)
		return -EUCLEAN;
	d = malloc(sizeof(*d) + r->dirent.name_len + 1);
	if (!d)
		return -ENOMEM;
	d->parent = r->dirent.parent;
	d->child = r->dirent.child;
	d->type = r->dirent.type;
	d->name_len = r->dirent.name_len;
	memcpy(d->name, r->dirent.name, d->name_len);
	d->name[d->name_len] = 0;
	ret = dir_push(p->dir, d, cookie);
	if (ret) {
		free(d);
		return ret;
	}
	d->hnext = NULL;
	*pp = d;
	if (c && c->dir)
		c->parent = p->ino;
	nvmefs_meta_kv_dirent(vol, d, true);
	nvmefs_meta_kv_inode(vol, p); /* nentries, next_cookie */
	if (c && c->dir)
		nvmefs_meta_kv_inode(vol, c); /* parent */
	vol->ndirents++;
	if (!vol->filling)
		vol->meta_bytes += nvmefs_rec_size(r);
	if (vol->ndirents >= vol->dtab_size)
		dtab_grow(vol);
	return 0;
}

static int apply_dirent_del(struct nvmefs_vol *vol, const struct nvmefs_rec *r)
{
	struct nvmefs_inode *p = nvmefs_iget(vol, r->dirent.parent);
	struct nvmefs_dirent **pp, *d;

	if (!p || !p->dir || !p->dir->loaded)
		return -EUCLEAN;
	pp = nvmefs_meta_dir_slot(vol, r->dirent.parent, r->dirent.name, r->dirent.name_len);
	d = *pp;
	if (!d || d->child != r->dirent.child)
		return -EUCLEAN;
	*pp = d->hnext;
	dir_remove(p->dir, d);
	nvmefs_meta_kv_dirent(vol, d, false);
	nvmefs_meta_kv_inode(vol, p); /* nentries */
	vol->ndirents--;
	vol->meta_bytes -= nvmefs_rec_size(r);
	free(d);
	return 0;
}

/* Take a directory's entries out of memory (meta held): a fill that
 * failed half way. live and next_cookie stay as the summary has them. */
void nvmefs_meta_unload_entries(struct nvmefs_vol *vol, struct nvmefs_inode *in, size_t live)
{
	struct nvmefs_dir *dir = in->dir;

	for (size_t i = 0; i < dir->n; i++) {
		struct nvmefs_dirent *d = dir->v[i], **pp;

		if (!d)
			continue;
		pp = nvmefs_meta_dir_slot(vol, d->parent, d->name, d->name_len);
		if (*pp == d)
			*pp = d->hnext;
		vol->ndirents--;
		free(d);
	}
	free(dir->v);
	dir->v = NULL;
	dir->n = dir->cap = 0;
	dir->live = live;
	dir->loaded = false;
}

/* ---- extents ---- */

int nvmefs_meta_fill_extents(struct nvmefs_vol *vol, struct nvmefs_inode *in,
			     const struct nvmefs_rec *ext, size_t n)
{
	unsigned count = in->layout.stripe_count;
	struct nvmefs_extmap *slots = calloc(count, sizeof(*slots));
	uint64_t bytes = 0;
	size_t i;

	if (!slots)
		return -ENOMEM;
	/* Each slot's array at its exact size, counted first: one allocation
	 * each (a cache of a million one-extent files holds them all). */
	for (i = 0; i < n; i++)
		if (ext[i].extent.slot < count)
			slots[ext[i].extent.slot].cap++;
	for (unsigned s = 0; s < count; s++) {
		if (slots[s].cap && !(slots[s].v = malloc(slots[s].cap * sizeof(*slots[s].v)))) {
			for (unsigned t = 0; t < s; t++)
				free(slots[t].v);
			free(slots);
			return -ENOMEM;
		}
	}
	/* In key order: by slot, then component offset, none overlapping. */
	for (i = 0; i < n; i++) {
		const struct nvmefs_rec *r = &ext[i];
		struct nvmefs_extmap *m;
		unsigned dev;

		if (r->extent.ino != in->ino || r->extent.slot >= count)
			break;
		m = &slots[r->extent.slot];
		dev = in->layout.devs[r->extent.slot];
		if (!r->extent.len || r->extent.dev_off < vol->data_start[dev] ||
		    r->extent.dev_off + r->extent.len > vol->data_end[dev] ||
		    (m->n && m->v[m->n - 1].comp_off + m->v[m->n - 1].len > r->extent.comp_off))
			break;
		m->v[m->n++] = (struct nvmefs_ext){.comp_off = r->extent.comp_off,
						   .dev_off = r->extent.dev_off,
						   .len = r->extent.len,
						   .flags = r->extent.flags};
		bytes += r->extent.len;
	}
	if (i < n || n != in->nextents || bytes != in->alloc_bytes) {
		nvmefs_err("%s: metadata: inode %llu's extents in the store (%zu read, %llu "
			   "bytes) are not what its inode says (%llu, %llu bytes) or overlap "
			   "(fsck.nvmefs repairs this)",
			   nvmefs_meta_where(vol), (unsigned long long)in->ino, n,
			   (unsigned long long)bytes, (unsigned long long)in->nextents,
			   (unsigned long long)in->alloc_bytes);
		for (unsigned s = 0; s < count; s++)
			free(slots[s].v);
		free(slots);
		return -EUCLEAN;
	}
	/* A READ walks the maps holding only map_lock: none can yet, as
	 * nothing could open the file before its extents were in memory. */
	pthread_rwlock_wrlock(&in->map_lock);
	for (unsigned s = 0; s < count; s++)
		free(in->slots[s].v);
	free(in->slots);
	in->slots = slots;
	in->ext_loaded = true;
	pthread_rwlock_unlock(&in->map_lock);
	return 0;
}

/*
 * Blocks that an EXTENT record's range mapped elsewhere on the member
 * than where e maps them: free by the records once e replaces them, as the
 * complement of the extents says. No live caller does this (they map
 * holes or convert in place: nothing to do), but a record may.
 */
/* The part of x (an extent of e's slot that overlaps e's range of the
 * slot) that e replaces, as a device range: its start in *off, its
 * length returned. */
static uint64_t replaced_part(const struct nvmefs_ext *x, const struct nvmefs_ext *e, uint64_t *off)
{
	uint64_t end = e->comp_off + e->len;
	uint64_t lo = x->comp_off > e->comp_off ? x->comp_off : e->comp_off;
	uint64_t hi = x->comp_off + x->len < end ? x->comp_off + x->len : end;

	*off = x->dev_off + (lo - x->comp_off);
	return hi - lo;
}

static void extent_moved(struct nvmefs_vol *vol, struct nvmefs_inode *in, unsigned slot,
			 const struct nvmefs_ext *e)
{
	const struct nvmefs_extmap *m = &in->slots[slot];
	uint64_t end = e->comp_off + e->len, off, len;

	for (size_t i = nvmefs_extmap_find(m, e->comp_off); i < m->n && m->v[i].comp_off < end;
	     i++) {
		const struct nvmefs_ext *x = &m->v[i];

		len = replaced_part(x, e, &off);
		if (x->dev_off - x->comp_off != e->dev_off - e->comp_off)
			nvmefs_alloc_applied_put(vol, in->layout.devs[slot], off, len);
	}
}

/*
 * Whether the device range e maps is the record's to take: each byte free
 * by the records applied (the durable map), or mapped now by the part of
 * the slot e replaces (converted in place, or moved and put back first).
 * A range another extent holds would be mapped twice, and a later punch
 * of either would free the other's blocks. Checked on what a replay reads
 * (the live allocator only hands out free space, and the crosscheck
 * compares the maps at commits); not by the checker, whose space pass
 * reports overlapping extents, nor on a volume without FREE keys or
 * whose durable map stopped following the records (out of memory).
 */
static bool extent_space_ok(struct nvmefs_vol *vol, struct nvmefs_inode *in, unsigned slot,
			    const struct nvmefs_ext *e)
{
	const struct nvmefs_extmap *m = &in->slots[slot];
	unsigned dev = in->layout.devs[slot];
	uint64_t end = e->comp_off + e->len, dend = e->dev_off + e->len;
	uint64_t have;

	/* kv_err: a change to the durable map failed for memory (dfree_room);
	 * it no longer follows the records, and the volume goes read-only. */
	if (!vol->replaying || vol->opts.check || !vol->free_keys || vol->kv_err)
		return true;
	have = nvmefs_alloc_applied_free(vol, dev, e->dev_off, e->len);
	for (size_t i = nvmefs_extmap_find(m, e->comp_off); i < m->n && m->v[i].comp_off < end;
	     i++) {
		uint64_t xlo, xhi;

		xhi = replaced_part(&m->v[i], e, &xlo);
		xhi += xlo;
		if (xlo < dend && xhi > e->dev_off)
			have += (xhi < dend ? xhi : dend) - (xlo > e->dev_off ? xlo : e->dev_off);
	}
	if (have >= e->len)
		return true;
	nvmefs_err("%s: metadata: an extent of inode %llu maps bytes %llu-%llu of member %u, "
		   "which another extent holds",
		   nvmefs_meta_where(vol), (unsigned long long)in->ino,
		   (unsigned long long)e->dev_off, (unsigned long long)dend, dev);
	return false;
}

static int apply_extent(struct nvmefs_vol *vol, const struct nvmefs_rec *r)
{
	struct nvmefs_inode *in = nvmefs_iget(vol, r->extent.ino);
	struct nvmefs_ext e = {.comp_off = r->extent.comp_off,
			       .dev_off = r->extent.dev_off,
			       .len = r->extent.len,
			       .flags = r->extent.flags};
	unsigned dev;
	int ret;

	if (!in || in->dead || !in->slots || !in->ext_loaded ||
	    r->extent.slot >= in->layout.stripe_count)
		return -EUCLEAN;
	dev = in->layout.devs[r->extent.slot];
	if (e.dev_off < vol->data_start[dev] || e.dev_off + e.len > vol->data_end[dev] ||
	    !extent_space_ok(vol, in, r->extent.slot, &e))
		return -EUCLEAN;
	/* Replace whatever the range held; live callers only ever map holes or
	 * convert unwritten blocks in place, so nothing is freed here. */
	extent_moved(vol, in, r->extent.slot, &e);
	ret = nvmefs_extmap_remove(vol, in, r->extent.slot, e.comp_off, e.comp_off + e.len, false);
	if (!ret)
		ret = nvmefs_extmap_insert(vol, in, r->extent.slot, &e);
	if (!ret) {
		/* In use by the records now (the FREE keys, alloc.c). */
		nvmefs_alloc_applied_take(vol, dev, e.dev_off, e.len);
		/* the extents' keys went in extmap.c */
		nvmefs_meta_kv_inode(vol, in); /* alloc_bytes, nextents */
	}
	return ret;
}

static int apply_punch(struct nvmefs_vol *vol, const struct nvmefs_rec *r)
{
	struct nvmefs_inode *in = nvmefs_iget(vol, r->punch.ino);
	uint64_t end;

	if (!in || in->dead || !in->slots || !in->ext_loaded)
		return -EUCLEAN;
	end = r->punch.len > UINT64_MAX - r->punch.off ? UINT64_MAX : r->punch.off + r->punch.len;
	for (unsigned s = 0; s < in->layout.stripe_count; s++) {
		uint64_t lo = nvmefs_layout_comp_size(&in->layout, s, r->punch.off);
		uint64_t hi = end == UINT64_MAX ? UINT64_MAX
						: nvmefs_layout_comp_size(&in->layout, s, end);
		int ret;

		/* Only whole blocks are punched; the edges were zeroed by writes. */
		lo = (lo + NVMEFS_BLOCK - 1) & ~(uint64_t)(NVMEFS_BLOCK - 1);
		if (hi != UINT64_MAX)
			hi &= ~(uint64_t)(NVMEFS_BLOCK - 1);
		if (lo >= hi)
			continue;
		ret = nvmefs_extmap_remove(vol, in, s, lo, hi, true);
		if (ret)
			return ret;
	}
	nvmefs_meta_kv_inode(vol, in); /* alloc_bytes, nextents */
	return 0;
}

/* ---- xattrs ---- */

struct nvmefs_xattr *nvmefs_meta_xattr_find(struct nvmefs_inode *in, const char *name, size_t len)
{
	for (unsigned i = 0; i < in->nxattrs; i++) {
		if (in->xattrs[i].name_len == len && !memcmp(in->xattrs[i].name, name, len))
			return &in->xattrs[i];
	}
	return NULL;
}

void nvmefs_inode_note_privs(struct nvmefs_inode *in)
{
	static const char caps[] = "security.capability";
	bool p = (in->mode & (S_ISUID | S_ISGID)) ||
		 (in->nxattrs && nvmefs_meta_xattr_find(in, caps, sizeof(caps) - 1));

	atomic_store_explicit(&in->privs, p, memory_order_release);
}

static int apply_xattr_set(struct nvmefs_vol *vol, const struct nvmefs_rec *r)
{
	struct nvmefs_inode *in = nvmefs_iget(vol, r->xattr.ino);
	struct nvmefs_xattr *x;
	void *value;

	if (!in || in->dead)
		return -EUCLEAN;
	value = malloc(r->xattr.value_len ? r->xattr.value_len : 1);
	if (!value)
		return -ENOMEM;
	if (r->xattr.value_len)
		memcpy(value, r->xattr.value, r->xattr.value_len);
	x = nvmefs_meta_xattr_find(in, r->xattr.name, r->xattr.name_len);
	if (!x) {
		void *v = realloc(in->xattrs, (in->nxattrs + 1) * sizeof(*in->xattrs));

		if (!v)
			goto err_value;
		in->xattrs = v;
		x = &in->xattrs[in->nxattrs];
		x->name = strndup(r->xattr.name, r->xattr.name_len);
		if (!x->name)
			goto err_value;
		x->name_len = r->xattr.name_len;
		x->value = NULL;
		x->value_len = 0;
		in->nxattrs++;
		if (!vol->filling)
			vol->meta_bytes += 16 + 8 + x->name_len;
	}
	if (!vol->filling) {
		vol->meta_bytes += r->xattr.value_len;
		vol->meta_bytes -= x->value_len;
	}
	free(x->value);
	x->value = value;
	x->value_len = r->xattr.value_len;
	nvmefs_inode_note_privs(in);
	nvmefs_meta_kv_xattr(vol, in->ino, x, true);
	nvmefs_meta_kv_inode(vol, in); /* nxattrs */
	return 0;
err_value:
	free(value);
	return -ENOMEM;
}

static int apply_xattr_del(struct nvmefs_vol *vol, const struct nvmefs_rec *r)
{
	struct nvmefs_inode *in = nvmefs_iget(vol, r->xattr.ino);
	struct nvmefs_xattr *x;

	if (!in || in->dead)
		return -EUCLEAN;
	x = nvmefs_meta_xattr_find(in, r->xattr.name, r->xattr.name_len);
	if (!x)
		return -EUCLEAN;
	vol->meta_bytes -= 16 + 8 + x->name_len + x->value_len;
	nvmefs_meta_kv_xattr(vol, in->ino, x, false);
	free(x->name);
	free(x->value);
	*x = in->xattrs[--in->nxattrs];
	nvmefs_inode_note_privs(in);
	nvmefs_meta_kv_inode(vol, in); /* nxattrs */
	return 0;
}

int nvmefs_meta_apply(struct nvmefs_vol *vol, const struct nvmefs_rec *r)
{
	switch (r->type) {
	case NVMEFS_REC_INODE:
		return apply_inode(vol, r);
	case NVMEFS_REC_INODE_FREE:
		return apply_inode_free(vol, r);
	case NVMEFS_REC_DIRENT_ADD:
		return apply_dirent_add(vol, r, 0);
	case NVMEFS_REC_DIRENT_DEL:
		return apply_dirent_del(vol, r);
	case NVMEFS_REC_EXTENT:
		return apply_extent(vol, r);
	case NVMEFS_REC_PUNCH:
		return apply_punch(vol, r);
	case NVMEFS_REC_XATTR_SET:
		return apply_xattr_set(vol, r);
	case NVMEFS_REC_XATTR_DEL:
		return apply_xattr_del(vol, r);
	case NVMEFS_REC_ORPHAN_ADD:
		return apply_orphan(vol, r, true);
	case NVMEFS_REC_ORPHAN_DEL:
		return apply_orphan(vol, r, false);
	}
	return -EUCLEAN;
}

int nvmefs_meta_load_val(struct nvmefs_vol *vol, const struct nvmefs_val *v)
{
	struct nvmefs_inode *in;
	int ret;

	switch (v->kind) {
	case NVMEFS_KEY_INODE:
		ret = apply_inode(vol, &v->rec);
		if (ret)
			return ret;
		in = nvmefs_iget(vol, v->rec.inode.ino);
		/* Cookies are never reused in a directory, so its next one is
		 * kept, not derived from its entries (the last may be gone). */
		if (in->dir)
			in->dir->next_cookie = v->sum.next_cookie;
		if (vol->filling) {
			/* One inode read on demand: what the whole load derives
			 * from the other keys comes from the summary, and its
			 * entries and extents stay in the store until asked for
			 * (icache.c). */
			if (in->dir) {
				in->parent = v->sum.parent;
				in->dir->live = v->sum.nentries;
				in->dir->loaded = !v->sum.nentries;
			} else if (in->slots) {
				in->alloc_bytes = v->sum.alloc_bytes;
				in->nextents = v->sum.nextents;
				in->ext_loaded = !v->sum.nextents;
			}
		} else if (in->dir) {
			nvmefs_meta_kv_inode(vol, in); /* the shadow's copy has it too */
		}
		return 0;
	case NVMEFS_KEY_DIRENT:
		return 0; /* the same entry as its DCOOKIE, which keeps readdir order */
	case NVMEFS_KEY_DCOOKIE:
		return apply_dirent_add(vol, &v->rec, v->cookie);
	case NVMEFS_KEY_EXTENT:
	case NVMEFS_KEY_XATTR:
	case NVMEFS_KEY_ORPHAN:
		return nvmefs_meta_apply(vol, &v->rec);
	}
	return -EUCLEAN;
}
