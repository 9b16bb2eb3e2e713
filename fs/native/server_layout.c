// SPDX-License-Identifier: MIT
/*
 * The native door's LAYOUT (include/nvmefs/wire.h): a file's extents lent
 * to a client, which then reads the member devices itself with O_DIRECT
 * into its own pages (the read door, client/preload_read.c). The FUSE
 * reply's copy, which binds a 1 MiB O_DIRECT read through the mount to the
 * CPUs on this kernel, is gone; the daemon serves no request at all.
 *
 * What keeps a loan honest is the file's range lock (fs/core/rangelock.c):
 * its generation moves on every exclusive grant, that is before any write,
 * truncate, fallocate, punch or layout change touches the file, and each
 * grant stores it in the word the client named (nvmefs_rl_publish). The
 * client compares the word before and after each read of the devices and
 * reads through the mount when it moved: a read that raced a change is
 * never delivered. A loan's end (UNREG_FD, UNREG_MEM, the client gone)
 * leaves the word at NVMEFS_RL_GONE; a client notices a dead daemon by
 * its connection (client/preload_read.c). The loan is made under a shared lock of the whole file,
 * so no write is in flight while the extents are copied out, and after
 * the kernel has written back what it held dirty of the file.
 */
#include "server_i.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "data_i.h"
#include "rangelock_i.h"

/* Member i as the client must find it: 0, or -errno (fenced, or a path
 * that does not fit). */
static int member(struct nvmefs_vol *vol, unsigned i, struct nvmefs_wire_member *m)
{
	const struct nvmefs_dev *d = &vol->set->devs[i];
	char link[64];
	ssize_t n;

	if (__atomic_load_n(&d->fenced, __ATOMIC_ACQUIRE))
		return -EIO;
	/* The path the daemon opened, made absolute whatever its working
	 * directory was: the kernel's name for the descriptor. */
	snprintf(link, sizeof(link), "/proc/self/fd/%d", d->fd);
	n = readlink(link, m->path, sizeof(m->path));
	if (n <= 0 || (size_t)n >= sizeof(m->path) || m->path[0] != '/')
		return -ENAMETOOLONG;
	m->path[n] = '\0';
	m->dev = d->id_dev;
	m->ino = d->id_ino;
	return 0;
}

/* End f's loan, if it has one: no grant stores into the client's memory
 * any more. */
void layout_end(struct nclient *c, struct nfile *f)
{
	if (!f->pub)
		return;
	nvmefs_rl_withdraw(&f->in->io_lock, f->pub);
	c->regions[f->lease_region].leases--;
	free(f->pub);
	f->pub = NULL;
}

/* Copy the layout, members and written extents of f into out (cap bytes):
 * the bytes written, or -ENOBUFS with *need. in->map_lock held. */
static int64_t fill(struct nvmefs_vol *vol, struct nvmefs_inode *in, uint8_t *out, uint64_t cap,
		    uint64_t *need)
{
	struct nvmefs_wire_layout h = {.size = __atomic_load_n(&in->size, __ATOMIC_ACQUIRE),
				       .chunk_size = in->layout.chunk_size,
				       .stripe_count = in->layout.stripe_count,
				       .nmembers = vol->ndevs};
	uint64_t at;
	int ret;

	for (uint32_t s = 0; s < h.stripe_count; s++)
		for (size_t i = 0; i < in->slots[s].n; i++)
			h.nexts += !(in->slots[s].v[i].flags & NVMEFS_EXT_UNWRITTEN);
	*need = sizeof(h) + (uint64_t)h.nmembers * sizeof(struct nvmefs_wire_member) +
		(uint64_t)h.nexts * sizeof(struct nvmefs_wire_extent);
	if (*need > cap)
		return -ENOBUFS;
	memcpy(h.devs, in->layout.devs, sizeof(h.devs));
	memcpy(out, &h, sizeof(h));
	at = sizeof(h);
	for (unsigned i = 0; i < h.nmembers; i++) {
		struct nvmefs_wire_member m = {0};

		ret = member(vol, i, &m);
		if (ret)
			return ret;
		memcpy(out + at, &m, sizeof(m));
		at += sizeof(m);
	}
	for (uint32_t s = 0; s < h.stripe_count; s++) {
		for (size_t i = 0; i < in->slots[s].n; i++) {
			const struct nvmefs_ext *e = &in->slots[s].v[i];
			struct nvmefs_wire_extent x = {.slot = s,
						       .comp_off = e->comp_off,
						       .dev_off = e->dev_off,
						       .len = e->len};

			if (e->flags & NVMEFS_EXT_UNWRITTEN)
				continue; /* reads as zeros: the mount's to serve */
			memcpy(out + at, &x, sizeof(x));
			at += sizeof(x);
		}
	}
	return (int64_t)at;
}

/* LAYOUT: the bytes written, *gen the loan's generation; or -errno (with
 * -ENOBUFS, *gen the bytes needed). */
int64_t do_layout(struct nclient *c, const struct nvmefs_wire_msg *m, int64_t *gen)
{
	struct nvmefs_vol *vol = c->srv->vol;
	struct nvmefs_wire_layout_req q;
	struct nvmefs_rl_ent rl;
	struct nregion *r;
	struct nfile *f;
	uint64_t need = 0;
	int64_t ret;

	memcpy(&q, m->entries, sizeof(q));
	if (q.handle >= c->nfiles || !c->files[q.handle].in ||
	    !(c->files[q.handle].may & NVMEFS_WIRE_MAY_READ))
		return -EBADF;
	/* A hugetlb region could make the daemon's store into the word fault
	 * (a punched huge page, none free): the word must be in plain shared
	 * memory. */
	if (q.region >= c->nregions || !c->regions[q.region].base || c->regions[q.region].huge)
		return -EFAULT;
	r = &c->regions[q.region];
	if ((q.mem_off | q.word_off) & 7 || q.mem_off > r->size || q.cap > r->size - q.mem_off ||
	    q.word_off > r->size - 8 ||
	    (q.word_off + 8 > q.mem_off && q.word_off < q.mem_off + q.cap))
		return -EFAULT;
	/* With the write-back cache the kernel owns the file's newest bytes
	 * and size: only the mount may read them. */
	if (vol->writeback)
		return -EOPNOTSUPP;
	f = &c->files[q.handle];
	layout_end(c, f);
	f->pub = calloc(1, sizeof(*f->pub));
	if (!f->pub)
		return -ENOMEM;
	/* What the kernel holds dirty (a shared mapping) reaches the devices
	 * first, as before the native door's reads. */
	inval(c, f->ino, 0, 0);
	nvmefs_before_wait();
	nvmefs_rl_lock(&f->in->io_lock, &rl, 0, NVMEFS_RL_ALL, false);
	pthread_rwlock_rdlock(&f->in->map_lock);
	ret = f->in->ext_loaded ? fill(vol, f->in, r->base + q.mem_off, q.cap, &need) : -EAGAIN;
	pthread_rwlock_unlock(&f->in->map_lock);
	if (ret >= 0) {
		uint64_t g = 0;

		f->pub->word = (_Atomic uint64_t *)(void *)(r->base + q.word_off);
		if (nvmefs_rl_publish(&f->in->io_lock, f->pub, &g))
			ret = -EBUSY;
		*gen = (int64_t)g;
	}
	if (ret >= 0) {
		f->lease_region = q.region;
		r->leases++;
		count(&vol->native.layouts, 1);
	} else {
		free(f->pub);
		f->pub = NULL;
		if (ret == -ENOBUFS)
			*gen = (int64_t)need;
	}
	nvmefs_rl_unlock(&f->in->io_lock, &rl);
	return ret;
}
