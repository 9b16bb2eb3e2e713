// SPDX-License-Identifier: MIT
/*
 * Test-only fault injection (built into nvmefs_striping_fi only). Faults are
 * decided when a block is queued, under the device lock, so "after N" counts
 * blocks in the order they were submitted.
 */
#include <errno.h>
#include <unistd.h>

#include "engine_i.h"
#include "nvmefs/util.h"

#ifndef NVMEFS_FAULT_INJECTION
#error "fault.c is only built with NVMEFS_FAULT_INJECTION"
#endif

static bool fault_matches(const struct nvmefs_fault *f, const struct unit *u)
{
	unsigned ops = f->ops ? f->ops : NVMEFS_FAULT_READS | NVMEFS_FAULT_WRITES;
	bool write = u->cb.aio_lio_opcode == IO_CMD_PWRITE;
	uint64_t off = (uint64_t)u->cb.u.c.offset;

	if (!(ops & (write ? NVMEFS_FAULT_WRITES : NVMEFS_FAULT_READS)))
		return false;
	if (off + u->expect <= f->off_lo)
		return false;
	return f->off_hi == 0 || off < f->off_hi;
}

void fault_apply_locked(struct edev *d, struct unit *u)
{
	struct nvmefs_fault *f = &d->fault;

	if (f->kind == NVMEFS_FAULT_NONE || !fault_matches(f, u))
		return;
	if (d->fault_seen++ < f->after)
		return;
	if (f->count && d->fault_hits >= f->count)
		return;
	d->fault_hits++;
	if (f->kind == NVMEFS_FAULT_EIO) {
		u->synthetic = true;
		u->result = -EIO;
	} else {
		/* A real short transfer: ask the kernel for one block less. */
		u->cb.u.c.nbytes -= d->dev->block_size;
	}
}

void fault_delay(struct edev *d)
{
	unsigned us;

	pthread_mutex_lock(&d->lock);
	us = d->fault.latency_us;
	pthread_mutex_unlock(&d->lock);
	if (us)
		usleep(us);
}

bool fault_refuse_submit(struct edev *d)
{
	bool refuse;

	pthread_mutex_lock(&d->lock);
	refuse = d->fault_eagain_until && nvmefs_now_ns() < d->fault_eagain_until;
	d->fault_refusals += refuse;
	pthread_mutex_unlock(&d->lock);
	return refuse;
}

int nvmefs_engine_inject(struct nvmefs_engine *eng, unsigned dev, const struct nvmefs_fault *f)
{
	struct edev *d;

	if (dev >= eng->set->count || !f)
		return -EINVAL;
	d = &eng->devs[dev];
	pthread_mutex_lock(&d->lock);
	d->fault = *f;
	d->fault_seen = 0;
	d->fault_hits = 0;
	d->fault_refusals = 0;
	d->fault_eagain_until = f->eagain_ms ? nvmefs_now_ns() + f->eagain_ms * 1000000ull : 0;
	pthread_mutex_unlock(&d->lock);
	return 0;
}

uint64_t nvmefs_engine_fault_hits(struct nvmefs_engine *eng, unsigned dev)
{
	struct edev *d = &eng->devs[dev];
	uint64_t hits;

	pthread_mutex_lock(&d->lock);
	hits = d->fault_hits;
	pthread_mutex_unlock(&d->lock);
	return hits;
}

uint64_t nvmefs_engine_fault_refusals(struct nvmefs_engine *eng, unsigned dev)
{
	struct edev *d = &eng->devs[dev];
	uint64_t n;

	pthread_mutex_lock(&d->lock);
	n = d->fault_refusals;
	pthread_mutex_unlock(&d->lock);
	return n;
}
