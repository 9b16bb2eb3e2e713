// SPDX-License-Identifier: MIT
/*
 * Pinned buffer pool. Buffers are allocated one at a time on first demand
 * (numa_alloc_onnode() when libnuma sees NUMA, else an anonymous mmap, both
 * page aligned), mlock'ed, and recycled through a LIFO stack so the hottest
 * buffer (most likely still in cache) is reused first.
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
#include <sys/syscall.h>
#include <unistd.h>

#include "nvmefs/bufpool.h"
#include "nvmefs/util.h"

struct nvmefs_bufpool {
	size_t buf_size;
	size_t max_bufs;
	int numa_node;
	bool use_numa;
	bool pinned; /* protected by lock */
	pthread_mutex_t lock;
	pthread_cond_t freed;
	size_t allocated; /* protected by lock */
	size_t nfree;	  /* protected by lock */
	void **all;	  /* every buffer allocated, [0, allocated) */
	void **free;	  /* stack of free buffers, [0, nfree) */
};

/*
 * mlock/munlock by system call: AddressSanitizer turns the libc calls into
 * no-ops, which would make the sanitizer build silently unpinned (and blind
 * to RLIMIT_MEMLOCK) while the release build is not.
 */
static int sys_mlock(const void *addr, size_t len)
{
	return (int)syscall(SYS_mlock, addr, len);
}

static int sys_munlock(const void *addr, size_t len)
{
	return (int)syscall(SYS_munlock, addr, len);
}

static void *alloc_buf(struct nvmefs_bufpool *p)
{
	void *b;

	if (p->use_numa)
		return numa_alloc_onnode(p->buf_size, p->numa_node);
	b = mmap(NULL, p->buf_size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	return b == MAP_FAILED ? NULL : b;
}

static void free_buf(struct nvmefs_bufpool *p, void *b)
{
	if (p->pinned)
		sys_munlock(b, p->buf_size);
	if (p->use_numa)
		numa_free(b, p->buf_size);
	else
		munmap(b, p->buf_size);
}

/* The memlock warning is said once per process, however many pools. */
static atomic_bool memlock_warned;

/* Pin b; on the first refusal stop pinning this pool's buffers. */
static void pin_buf(struct nvmefs_bufpool *p, void *b)
{
	struct rlimit rl = {0};
	char lim[32], want[32];
	int err;

	if (!p->pinned)
		return;
	if (sys_mlock(b, p->buf_size) == 0)
		return;
	err = errno;
	p->pinned = false;
	/* Unpin what was pinned so every buffer is in the same state. */
	for (size_t i = 0; i < p->allocated; i++)
		sys_munlock(p->all[i], p->buf_size);
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
	p->all = calloc(p->max_bufs, sizeof(void *));
	p->free = calloc(p->max_bufs, sizeof(void *));
	if (!p->all || !p->free) {
		free(p->all);
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
	for (size_t i = 0; i < p->allocated; i++)
		free_buf(p, p->all[i]);
	pthread_cond_destroy(&p->freed);
	pthread_mutex_destroy(&p->lock);
	free(p->all);
	free(p->free);
	free(p);
}

/* Pop a free buffer or allocate a new one; lock held. NULL: none to be had. */
static void *take_locked(struct nvmefs_bufpool *p)
{
	void *b;

	if (p->nfree)
		return p->free[--p->nfree];
	if (p->allocated == p->max_bufs)
		return NULL;
	b = alloc_buf(p);
	if (!b)
		return NULL;
	pin_buf(p, b);
	p->all[p->allocated++] = b;
	return b;
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
