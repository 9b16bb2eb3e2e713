// SPDX-License-Identifier: MIT
/*
 * libnvmefs's shared memory (client.c has the connection, client_io.c the
 * requests; client_i.h what they share): the process's buffers
 * (nvmefs_buf_alloc, nvmefs_buf_free), each a sealed memfd, mapped,
 * placed on a NUMA node and locked, registered with a client's daemon at
 * its first use; and the bounce regions a request outside every buffer
 * is copied through, up to BOUNCE_CAP per client.
 */
#include "client_i.h"
#include "sys_i.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <numa.h>
#include <numaif.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define BOUNCE_MIN (1ull << 20) /* smallest bounce region */

/* ---- shared memory ---- */

/*
 * The process's shared buffers (nvmefs_buf_alloc), for every client: a
 * client registers one with its daemon the first time a request of its
 * uses it. serial names a buffer for good (an address may come back after
 * a free); gen changes at every free, so that clients drop registrations
 * of freed buffers before they look an address up again.
 */
struct shbuf {
	struct shbuf *next;
	uint8_t *base;
	size_t size;
	int memfd; /* kept to register it with each client: see fd_is_memfd */
	dev_t dev; /* what memfd was made as (sys_ident) */
	ino_t ino;
	uint64_t serial;
};

/* Whether fd is b's memfd. The number b keeps is an ordinary descriptor
 * of the process's, which the program may close behind us (closefrom,
 * close_range, dup2 over it) and the kernel give to another file: that
 * file is never sent to a daemon or closed here. */
static bool fd_is_memfd(const struct shbuf *b, int fd)
{
	return sys_ident_is(fd, b->dev, b->ino);
}

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static struct shbuf *g_bufs;   /* g_mu */
static uint64_t g_serial;      /* g_mu */
static _Atomic uint64_t g_gen; /* bumped under g_mu */

static size_t page_round(size_t size)
{
	size_t pg = (size_t)sysconf(_SC_PAGESIZE);

	return (size + pg - 1) & ~(pg - 1);
}

/* A sealed memfd of size bytes (a page multiple), mapped, placed on node
 * (-1: anywhere) and locked: 0 with *base and *memfd, or -errno. */
static int shm_create(struct nvmefs_client *c, size_t size, int node, uint8_t **base, int *memfd)
{
	int fd = memfd_create("nvmefs-buf", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	void *p;
	int ret;

	if (fd < 0 || sys_ftruncate(fd, (off_t)size) ||
	    sys_fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL)) {
		ret = -errno;
		goto err;
	}
	p = sys_mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED) {
		ret = -errno;
		goto err;
	}
	/* Placed before it is touched; mlock then faults every page in. */
	if (node >= 0)
		numa_tonode_memory(p, size, node);
	if (mlock(p, size)) {
		ret = -errno;
		munmap(p, size);
		nvmefs_cl_fail(c, ret,
			       "cannot lock %zu bytes in RAM (RLIMIT_MEMLOCK, ulimit -l): %s", size,
			       strerror(-ret));
		if (fd >= 0)
			sys_close(fd);
		return ret;
	}
	*base = p;
	*memfd = fd;
	return 0;
err:
	nvmefs_cl_fail(c, ret, "cannot make %zu bytes of shared memory: %s", size, strerror(-ret));
	if (fd >= 0)
		sys_close(fd);
	return ret;
}

/* Register memfd (mapped here at base, size bytes) with c's daemon as a
 * region; serial 0 for the client's own bounce memory. */
static int region_add(struct nvmefs_client *c, uint8_t *base, size_t size, int memfd,
		      uint64_t serial, struct region **out)
{
	struct region *r = calloc(1, sizeof(*r)), **v;
	int64_t id;

	v = r ? realloc(c->regions, (c->nregions + 1) * sizeof(*v)) : NULL;
	if (!v) {
		free(r);
		return nvmefs_cl_fail(c, -ENOMEM, "out of memory");
	}
	c->regions = v;
	id = nvmefs_cl_control(c, NVMEFS_WIRE_REG_MEM, (int64_t)size, memfd);
	if (id < 0) {
		free(r);
		return nvmefs_cl_fail(c, (int)id,
				      "the daemon refused %zu bytes of shared memory: %s", size,
				      strerror((int)-id));
	}
	*r = (struct region){.base = base,
			     .size = size,
			     .id = (uint32_t)id,
			     .serial = serial,
			     .bounce = !serial};
	c->regions[c->nregions++] = r;
	c->st.shared_bytes += size;
	*out = r;
	return 0;
}

/* Forget region i: given back to the daemon; bounce memory unmapped. */
static void region_drop(struct nvmefs_client *c, size_t i)
{
	struct region *r = c->regions[i];

	if (!c->dead)
		nvmefs_cl_control(c, NVMEFS_WIRE_UNREG_MEM, r->id, -1);
	if (r->bounce) {
		munmap(r->base, r->size);
		c->bounce_held -= r->size;
	}
	c->st.shared_bytes -= r->size;
	c->regions[i] = c->regions[--c->nregions];
	free(r);
}

static struct shbuf *shbuf_find(uint64_t serial)
{
	for (struct shbuf *b = g_bufs; b; b = b->next)
		if (b->serial == serial)
			return b;
	return NULL;
}

/* Drop the registrations of buffers freed since c last looked. */
static void regions_sync(struct nvmefs_client *c)
{
	uint64_t gen = atomic_load(&g_gen);
	bool kept = false;

	if (gen == c->gen)
		return;
	pthread_mutex_lock(&g_mu);
	for (size_t i = c->nregions; i-- > 0;)
		if (!c->regions[i]->bounce && !shbuf_find(c->regions[i]->serial))
			c->regions[i]->stale = true;
	pthread_mutex_unlock(&g_mu);
	/* A region freed under a request of c's (no client was given to the
	 * free) stays until that request is reaped, stale: no buffer, not even
	 * a new one mmap puts at its address, is ever found in it again. It
	 * is looked at again at each call until then. */
	for (size_t i = c->nregions; i-- > 0;) {
		if (!c->regions[i]->stale)
			continue;
		if (c->regions[i]->inflight)
			kept = true;
		else
			region_drop(c, i);
	}
	if (!kept)
		c->gen = gen;
}

int nvmefs_buf_alloc(struct nvmefs_client *c, size_t size, int numa_node, void **out)
{
	struct shbuf *b;
	struct region *r;
	int ret;

	if (c)
		c->err[0] = '\0';
	if (!size || size > NVMEFS_WIRE_MAX_REGION)
		return nvmefs_cl_fail(c, -EINVAL, "buffer size %zu: give 1 byte to 1 TiB", size);
	if (numa_node >= 0 && (numa_available() < 0 || numa_node > numa_max_node()))
		return nvmefs_cl_fail(c, -EINVAL, "NUMA node %d: no such node", numa_node);
	b = calloc(1, sizeof(*b));
	if (!b)
		return nvmefs_cl_fail(c, -ENOMEM, "out of memory");
	b->size = page_round(size);
	ret = shm_create(c, b->size, numa_node, &b->base, &b->memfd);
	if (ret) {
		free(b);
		return ret;
	}
	if (sys_ident(b->memfd, &b->dev, &b->ino)) {
		ret = -errno;
		munmap(b->base, b->size);
		sys_close(b->memfd);
		free(b);
		return nvmefs_cl_fail(c, ret, "statx of a new memfd: %s", strerror(-ret));
	}
	pthread_mutex_lock(&g_mu);
	b->serial = ++g_serial;
	b->next = g_bufs;
	g_bufs = b;
	pthread_mutex_unlock(&g_mu);
	/* Registered now with the client given, so that a refusal shows here. */
	if (c) {
		ret = region_add(c, b->base, b->size, b->memfd, b->serial, &r);
		if (ret) {
			nvmefs_buf_free(NULL, b->base);
			return ret;
		}
	}
	*out = b->base;
	return 0;
}

int nvmefs_buf_free(struct nvmefs_client *c, void *buf)
{
	struct shbuf **pp, *b = NULL;

	if (c) {
		for (size_t i = 0; i < c->nregions; i++) {
			struct region *r = c->regions[i];

			if (r->bounce || r->stale || r->base != buf)
				continue;
			if (r->inflight)
				return nvmefs_cl_fail(
					c, -EBUSY, "buffer %p: a request in flight uses it", buf);
			region_drop(c, i);
			break;
		}
	}
	pthread_mutex_lock(&g_mu);
	for (pp = &g_bufs; *pp; pp = &(*pp)->next) {
		if ((*pp)->base == buf) {
			b = *pp;
			*pp = b->next;
			atomic_fetch_add(&g_gen, 1);
			break;
		}
	}
	pthread_mutex_unlock(&g_mu);
	if (!b)
		return nvmefs_cl_fail(c, -EINVAL, "%p: not a buffer of nvmefs_buf_alloc", buf);
	/* Checked while the mapping still holds the memfd's inode. */
	if (fd_is_memfd(b, b->memfd))
		sys_close(b->memfd);
	munmap(b->base, b->size);
	free(b);
	return 0;
}

/* c's region holding [buf, buf + len), registering a shared buffer of the
 * process on its first use by c; NULL when the range is in none. */
struct region *nvmefs_cl_region_of(struct nvmefs_client *c, const void *buf, size_t len)
{
	const uint8_t *p = buf;
	struct region *r = NULL;
	uint8_t *base = NULL;
	uint64_t serial = 0;
	size_t size = 0;
	int memfd = -1;

	regions_sync(c);
	for (size_t i = 0; i < c->nregions; i++) {
		r = c->regions[i];
		if (!r->bounce && !r->stale && p >= r->base && len <= r->size &&
		    (size_t)(p - r->base) <= r->size - len)
			return r;
	}
	pthread_mutex_lock(&g_mu);
	for (struct shbuf *b = g_bufs; b; b = b->next) {
		if (p >= b->base && len <= b->size && (size_t)(p - b->base) <= b->size - len) {
			/* Another thread may free it meanwhile: our own descriptor,
			 * checked once it is ours. One the program closed leaves the
			 * buffer to bounces. */
			memfd = sys_fcntl(b->memfd, F_DUPFD_CLOEXEC, 3);
			if (memfd >= 0 && !fd_is_memfd(b, memfd)) {
				sys_close(memfd);
				memfd = -1;
			}
			base = b->base;
			size = b->size;
			serial = b->serial;
			break;
		}
	}
	pthread_mutex_unlock(&g_mu);
	if (memfd < 0)
		return NULL;
	if (region_add(c, base, size, memfd, serial, &r))
		r = NULL;
	sys_close(memfd);
	return r;
}

/* A new bounce region of size bytes, counted in bounce_held: 0 with *out,
 * or -errno. */
static int bounce_new(struct nvmefs_client *c, size_t size, struct region **out)
{
	uint8_t *base;
	int memfd, ret = shm_create(c, size, -1, &base, &memfd);

	if (ret)
		return ret;
	ret = region_add(c, base, size, memfd, 0, out);
	/* The daemon holds its own copy, and the mapping the memory: a
	 * descriptor kept open would sit at a low number, which a program's
	 * closefrom or dup2 can take, and a later close of ours would then
	 * close the program's file. */
	sys_close(memfd);
	if (ret) {
		munmap(base, size);
		return ret;
	}
	c->bounce_held += size;
	return 0;
}

/* A free bounce region of at least len bytes: -EAGAIN when the cap is
 * reached while others are lent (they come back with completions). */
int nvmefs_cl_bounce_get(struct nvmefs_client *c, size_t len, struct region **out)
{
	struct region *best = NULL;
	size_t size = BOUNCE_MIN;
	int ret;

	for (size_t i = 0; i < c->nregions; i++) {
		struct region *r = c->regions[i];

		if (r->bounce && !r->busy && r->size >= len && (!best || r->size < best->size))
			best = r;
	}
	if (!best) {
		while (size < len)
			size *= 2;
		/* Room for it: idle bounce regions go first. */
		for (size_t i = c->nregions; i-- > 0 && c->bounce_held + size > BOUNCE_CAP;)
			if (c->regions[i]->bounce && !c->regions[i]->busy)
				region_drop(c, i);
		if (c->bounce_held + size > BOUNCE_CAP && c->bounce_held)
			return -EAGAIN;
		ret = bounce_new(c, size, &best);
		if (ret)
			return ret;
	}
	best->busy = true;
	*out = best;
	return 0;
}
