// SPDX-License-Identifier: MIT
/*
 * Pinned buffer pool. Buffers are carved on demand out of slabs, each one
 * anonymous mapping (bound to the pool's NUMA node when libnuma sees
 * NUMA) whose buffers are mlock'ed, and recycled through a LIFO stack so
 * the hottest buffer (most likely still in cache) is reused first.
 *
 * Slabs grow with the pool: the first holds one buffer, each next one as
 * many as the pool already has (up to SLAB_MAX bytes), so a pool that
 * needs few buffers holds few, and a busy one gets slabs of SLAB_MAX. A
 * slab is mapped by nvmefs_map_buffers: from 2 MiB on huge pages, which
 * make the kernel's pinning of a buffer for each transfer cheap
 * (docs/PERFORMANCE.md, "Huge pages for the pool"), its buffers' bytes
 * locked in one call. Known cost: a slab is
 * mapped and locked under the pool's lock, up to 16 MiB, which may
 * compact memory for its huge pages; slabs are made only while the pool
 * grows to what its users need.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <numa.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include "nvmefs/bufpool.h"
#include "nvmefs/util.h"

/* One mapping the buffers are carved from. */
struct slab {
	char *base;
	size_t len;    /* mapped */
	size_t locked; /* its buffers' bytes, from base (mlock'ed while pinned) */
};

struct nvmefs_bufpool {
	size_t buf_size;
	size_t max_bufs;
	int numa_node;
	bool use_numa;
	bool pinned; /* protected by lock */
	pthread_mutex_t lock;
	pthread_cond_t freed;
	size_t allocated;   /* protected by lock: buffers carved */
	size_t nfree;	    /* protected by lock */
	size_t nslabs;	    /* protected by lock */
	struct slab *slabs; /* [0, nslabs); at most max_bufs */
	void **free;	    /* stack of free buffers, [0, nfree) */
};

#define SLAB_MAX ((size_t)16 << 20) /* bytes of buffers a slab holds at most */

/* Map a slab of n buffers (lock held); false when out of memory. */
static bool map_slab(struct nvmefs_bufpool *p, size_t n, struct slab *sl)
{
	size_t bytes = n * p->buf_size, len;
	char *b = nvmefs_map_buffers(bytes, &len);

	if (!b)
		return false;
	if (p->use_numa)
		numa_tonode_memory(b, len, p->numa_node);
	*sl = (struct slab){.base = b, .len = len, .locked = bytes};
	return true;
}

/* The memlock warning is said once per process, however many pools. */
static atomic_bool memlock_warned;

/* Pin a new slab; on the first refusal stop pinning this pool's buffers. */
static void pin_slab(struct nvmefs_bufpool *p, const struct slab *sl)
{
	struct rlimit rl = {0};
	char lim[32], want[32];
	int err;

	if (!p->pinned)
		return;
	err = -nvmefs_mlock(sl->base, sl->locked);
	if (!err)
		return;
	/* A lock that failed part way (EAGAIN, ENOMEM while faulting) may
	 * have locked some of the slab. */
	nvmefs_munlock(sl->base, sl->locked);
	p->pinned = false;
	/* Unpin what was pinned so every buffer is in the same state. */
	for (size_t i = 0; i < p->nslabs; i++)
		nvmefs_munlock(p->slabs[i].base, p->slabs[i].locked);
	if (atomic_exchange(&memlock_warned, true))
		return;
	getrlimit(RLIMIT_MEMLOCK, &rl);
	nvmefs_warn("cannot pin I/O buffers (%s): RLIMIT_MEMLOCK is %s, the pool needs up to %s; "
		    "continuing with unpinned buffers (raise it with ulimit -l or LimitMEMLOCK=)",
		    strerror(err),
		    rl.rlim_cur == RLIM_INFINITY ? "unlimited"
						 : nvmefs_fmt_size(rl.rlim_cur, lim, sizeof(lim)),
		    nvmefs_fmt_size(p->max_bufs * p->buf_size, want, sizeof(want)));
}

int nvmefs_bufpool_create(struct nvmefs_bufpool **out, const struct nvmefs_bufpool_opts *o)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	struct nvmefs_bufpool *p;

	if (!o || o->buf_size == 0)
		return -EINVAL;
	p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	p->buf_size = (o->buf_size + page - 1) / page * page;
	p->max_bufs = o->max_bytes ? o->max_bytes / p->buf_size : 64;
	if (p->max_bufs == 0) {
		free(p);
		return -EINVAL;
	}
	p->numa_node = o->numa_node;
	p->use_numa = o->numa_node >= 0 && numa_available() >= 0 && o->numa_node <= numa_max_node();
	p->pinned = !o->no_pin;
	p->slabs = calloc(p->max_bufs, sizeof(*p->slabs));
	p->free = calloc(p->max_bufs, sizeof(void *));
	if (!p->slabs || !p->free) {
		free(p->slabs);
		free(p->free);
		free(p);
		return -ENOMEM;
	}
	pthread_mutex_init(&p->lock, NULL);
	pthread_cond_init(&p->freed, NULL);
	*out = p;
	return 0;
}

void nvmefs_bufpool_destroy(struct nvmefs_bufpool *p)
{
	if (!p)
		return;
	/* Putting back every buffer is the caller's duty; a leak is a bug. */
	if (p->nfree != p->allocated)
		nvmefs_err("buffer pool destroyed with %zu buffers still in use",
			   p->allocated - p->nfree);
	for (size_t i = 0; i < p->nslabs; i++) {
		if (p->pinned)
			nvmefs_munlock(p->slabs[i].base, p->slabs[i].locked);
		munmap(p->slabs[i].base, p->slabs[i].len);
	}
	pthread_cond_destroy(&p->freed);
	pthread_mutex_destroy(&p->lock);
	free(p->slabs);
	free(p->free);
	free(p);
}

/* Pop a free buffer or allocate a new one; lock held. NULL: none to be had. */
static void *take_locked(struct nvmefs_bufpool *p)
{
	struct slab *sl;
	size_t n;

	if (p->nfree)
		return p->free[--p->nfree];
	if (p->allocated == p->max_bufs)
		return NULL;
	/* A new slab, as many buffers as the pool has (one at first). */
	n = p->allocated ? p->allocated : 1;
	if (n * p->buf_size > SLAB_MAX)
		n = SLAB_MAX / p->buf_size ? SLAB_MAX / p->buf_size : 1;
	if (n > p->max_bufs - p->allocated)
		n = p->max_bufs - p->allocated;
	sl = &p->slabs[p->nslabs];
	/* Short of memory for a slab, one buffer may still fit. */
	if (!map_slab(p, n, sl) && (n == 1 || !map_slab(p, n = 1, sl)))
		return NULL;
	pin_slab(p, sl);
	p->nslabs++;
	/* Pushed last first, so that they are handed out in address order. */
	for (size_t i = n; i-- > 1;)
		p->free[p->nfree++] = sl->base + i * p->buf_size;
	p->allocated += n;
	return sl->base;
}

void *nvmefs_bufpool_tryget(struct nvmefs_bufpool *p)
{
	void *b;

	pthread_mutex_lock(&p->lock);
	b = take_locked(p);
	pthread_mutex_unlock(&p->lock);
	return b;
}

void *nvmefs_bufpool_get(struct nvmefs_bufpool *p)
{
	void *b;

	pthread_mutex_lock(&p->lock);
	while (!(b = take_locked(p))) {
		/* Out of memory with nothing outstanding: waiting would hang. */
		if (p->allocated < p->max_bufs && p->nfree == p->allocated)
			break;
		pthread_cond_wait(&p->freed, &p->lock);
	}
	pthread_mutex_unlock(&p->lock);
	return b;
}

void nvmefs_bufpool_put(struct nvmefs_bufpool *p, void *b)
{
	if (!b)
		return;
	pthread_mutex_lock(&p->lock);
	p->free[p->nfree++] = b;
	pthread_cond_signal(&p->freed);
	pthread_mutex_unlock(&p->lock);
}

void nvmefs_bufpool_stats(struct nvmefs_bufpool *p, struct nvmefs_bufpool_stats *st)
{
	pthread_mutex_lock(&p->lock);
	st->buf_size = p->buf_size;
	st->max_bufs = p->max_bufs;
	st->allocated = p->allocated;
	st->in_use = p->allocated - p->nfree;
	st->pinned = p->pinned && p->allocated > 0;
	pthread_mutex_unlock(&p->lock);
}
