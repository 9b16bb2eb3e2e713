// SPDX-License-Identifier: MIT
/*
 * libnvmefs's requests (client.c has the connection, client_buf.c the
 * shared memory; client_i.h what they share): a request's slot and wire
 * entry, SUBMIT in batches, the wait for completions
 * (nvmefs_submit, nvmefs_wait), and the synchronous calls made of them
 * (nvmefs_pread, nvmefs_pwrite, nvmefs_fsync); and the read door's LAYOUT,
 * which names a region too (nvmefs_cl_layout).
 */
#include "client_i.h"

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

#define SYNC_CHUNK (64ull << 20) /* a synchronous bounced request, per piece */

/* ---- requests ---- */

/*
 * Turn io into the wire entry e with its slot: 0, -errno for a request
 * that is wrong (it completes with it), or -EAGAIN when it cannot be
 * taken now.
 */
static int prepare(struct nvmefs_client *c, const struct nvmefs_io *io, bool sync, uint32_t flags,
		   struct nvmefs_wire_sqe *e)
{
	struct reg *reg = nvmefs_cl_reg_of(c, io->fd);
	struct region *r = NULL;
	struct slot *s;

	/* Room first: a wrong request taken completes at once, in ready. */
	if (c->free_slot >= c->hello.max_inflight || c->sent + c->nready >= c->hello.max_inflight)
		return -EAGAIN;
	if (!reg)
		return nvmefs_cl_fail(c, -EBADF, "fd %d: not registered (nvmefs_reg_fd)", io->fd);
	if (io->op != NVMEFS_OP_READ && io->op != NVMEFS_OP_WRITE && io->op != NVMEFS_OP_FSYNC)
		return nvmefs_cl_fail(c, -EINVAL, "op %d: not NVMEFS_OP_READ, _WRITE or _FSYNC",
				      io->op);
	if (io->op != NVMEFS_OP_FSYNC && io->len) {
		r = nvmefs_cl_region_of(c, io->buf, io->len);
		if (!r) {
			int ret;

			if (io->len > BOUNCE_CAP)
				return nvmefs_cl_fail(c, -EINVAL,
						      "%zu bytes outside shared memory: at most "
						      "256 MiB per request (nvmefs_buf_alloc)",
						      io->len);
			ret = nvmefs_cl_bounce_get(c, io->len, &r);
			if (ret)
				return ret;
			c->st.bounced++;
			if (io->op == NVMEFS_OP_WRITE) {
				memcpy(r->base, io->buf, io->len);
				c->st.bounce_bytes += io->len;
			}
		}
	}
	s = &c->slots[c->free_slot];
	c->free_slot = s->next_free;
	*s = (struct slot){.used = true,
			   .sync = sync,
			   .op = io->op,
			   .user_data = io->user_data,
			   .ubuf = io->buf,
			   .len = io->len,
			   .region = r,
			   .reg = reg};
	reg->inflight++;
	if (r)
		r->inflight++;
	*e = (struct nvmefs_wire_sqe){.user_data = (uint64_t)(s - c->slots),
				      .off = io->off,
				      .len = io->op == NVMEFS_OP_FSYNC ? 0 : io->len,
				      .mem_off = r ? (uint64_t)((uint8_t *)io->buf - r->base) : 0,
				      .handle = reg->handle,
				      .region = r ? r->id : 0,
				      .op = (uint32_t)io->op,
				      .flags = flags};
	if (r && r->bounce)
		e->mem_off = 0;
	c->st.requests++;
	return 0;
}

static int submit(struct nvmefs_client *c, const struct nvmefs_io *ios, unsigned n, bool sync,
		  uint32_t flags)
{
	struct nvmefs_wire_sqe batch[NVMEFS_WIRE_MAX_BATCH];
	unsigned nb = 0, taken = 0;
	int ret = 0;

	if (c->dead)
		return nvmefs_cl_fail(c, -ENOTCONN, "the daemon is gone");
	while (taken < n) {
		ret = prepare(c, &ios[taken], sync, flags, &batch[nb]);
		if (ret == -EAGAIN)
			break;
		if (ret && !taken) /* the first is wrong: nothing taken */
			break;
		if (ret) /* taken, and completed with its error at once */
			c->ready[c->nready++] =
				(struct nvmefs_cqe){.user_data = ios[taken].user_data, .res = ret};
		else
			nb++;
		taken++;
		ret = 0;
		if (nb == c->hello.max_batch || nb == NVMEFS_WIRE_MAX_BATCH || taken == n) {
			if (nb && nvmefs_cl_send_msg(c, NVMEFS_WIRE_SUBMIT, 0, 0, batch, nb,
						     nb * sizeof(batch[0]), -1)) {
				c->sent += nb;
				nvmefs_cl_lose(c);
				return -ENOTCONN;
			}
			c->sent += nb;
			nb = 0;
		}
	}
	if (nb) {
		if (nvmefs_cl_send_msg(c, NVMEFS_WIRE_SUBMIT, 0, 0, batch, nb,
				       nb * sizeof(batch[0]), -1)) {
			c->sent += nb;
			nvmefs_cl_lose(c);
			return -ENOTCONN;
		}
		c->sent += nb;
	}
	if (taken)
		return (int)taken;
	return ret ? ret : -EAGAIN;
}

int nvmefs_submit(struct nvmefs_client *c, const struct nvmefs_io *ios, unsigned n)
{
	c->err[0] = '\0';
	if (!n)
		return 0;
	return submit(c, ios, n, false, 0);
}

int nvmefs_wait(struct nvmefs_client *c, struct nvmefs_cqe *cqes, unsigned max, unsigned min,
		int timeout_ms)
{
	struct timespec now;
	int64_t deadline = -1;
	unsigned n;

	if (min > c->sent + c->nready)
		min = c->sent + c->nready;
	if (timeout_ms > 0) {
		clock_gettime(CLOCK_MONOTONIC, &now);
		deadline = now.tv_sec * 1000 + now.tv_nsec / 1000000 + timeout_ms;
	}
	while (c->nready < min) {
		int left = timeout_ms, ret;

		if (deadline >= 0) {
			clock_gettime(CLOCK_MONOTONIC, &now);
			left = (int)(deadline - (now.tv_sec * 1000 + now.tv_nsec / 1000000));
			if (left < 0)
				left = 0;
		}
		ret = nvmefs_cl_pump(c, left);

		if (ret == -ENOTCONN && c->nready)
			break; /* the failed requests first */
		if (ret < 0)
			return ret;
		if (!ret && left == 0)
			break; /* the timeout */
	}
	n = c->nready < max ? c->nready : max;
	memcpy(cqes, c->ready, n * sizeof(*cqes));
	memmove(c->ready, c->ready + n, (c->nready - n) * sizeof(*cqes));
	c->nready -= n;
	return (int)n;
}

/* One synchronous request (flags: its entry's NVMEFS_WIRE_SQE_*): its result. */
static int64_t sync_io(struct nvmefs_client *c, int op, uint32_t flags, int fd, void *buf,
		       size_t len, uint64_t off)
{
	struct nvmefs_io io = {.fd = fd, .op = op, .buf = buf, .len = len, .off = off};
	int ret;

	c->sync_done = false;
	for (;;) {
		ret = submit(c, &io, 1, true, flags);
		if (ret != -EAGAIN)
			break;
		/* Room comes with a completion, unless every slot holds one
		 * already: then only the caller's nvmefs_wait makes room. */
		if (!c->sent)
			return nvmefs_cl_fail(
				c, -EAGAIN,
				"%u completions wait to be reaped (nvmefs_wait): no room for "
				"a synchronous request",
				c->nready);
		ret = nvmefs_cl_pump(c, -1);
		if (ret < 0)
			return ret;
	}
	if (ret < 0)
		return ret;
	while (!c->sync_done) {
		ret = nvmefs_cl_pump(c, -1);
		if (ret < 0 && !c->sync_done)
			return ret;
	}
	return c->sync_res;
}

/* A synchronous read or write: in pieces of SYNC_CHUNK when bounced (the
 * bounce region a piece takes is no larger), whole when the buffer is
 * shared. */
static ssize_t sync_rw(struct nvmefs_client *c, int op, uint32_t flags, int fd, void *buf,
		       size_t len, uint64_t off)
{
	size_t done = 0;

	c->err[0] = '\0';
	if (nvmefs_cl_region_of(c, buf, len) || len <= SYNC_CHUNK)
		return (ssize_t)sync_io(c, op, flags, fd, buf, len, off);
	while (done < len) {
		size_t n = len - done < SYNC_CHUNK ? len - done : SYNC_CHUNK;
		int64_t ret = sync_io(c, op, flags, fd, (uint8_t *)buf + done, n, off + done);

		if (ret < 0)
			return done ? (ssize_t)done : (ssize_t)ret;
		done += (size_t)ret;
		if ((size_t)ret < n)
			break; /* the end of the file */
	}
	return (ssize_t)done;
}

ssize_t nvmefs_pread(struct nvmefs_client *c, int fd, void *buf, size_t len, uint64_t off)
{
	return sync_rw(c, NVMEFS_OP_READ, 0, fd, buf, len, off);
}

ssize_t nvmefs_pwrite(struct nvmefs_client *c, int fd, const void *buf, size_t len, uint64_t off)
{
	return sync_rw(c, NVMEFS_OP_WRITE, 0, fd, (void *)buf, len, off);
}

ssize_t nvmefs_cl_pwrite_behind(struct nvmefs_client *c, int fd, const void *buf, size_t len,
				uint64_t off)
{
	uint32_t flags = c->hello.flags & NVMEFS_WIRE_HELLO_BEHIND ? NVMEFS_WIRE_SQE_BEHIND : 0;

	return sync_rw(c, NVMEFS_OP_WRITE, flags, fd, (void *)buf, len, off);
}

int nvmefs_fsync(struct nvmefs_client *c, int fd)
{
	c->err[0] = '\0';
	return (int)sync_io(c, NVMEFS_OP_FSYNC, 0, fd, NULL, 0, 0);
}

int64_t nvmefs_cl_layout(struct nvmefs_client *c, int fd, const void *blob, size_t cap,
			 const void *word, int64_t *arg2)
{
	const uint8_t *lo = (const uint8_t *)(blob < word ? blob : word);
	const uint8_t *hi = (const uint8_t *)blob + cap > (const uint8_t *)word + 8
				    ? (const uint8_t *)blob + cap
				    : (const uint8_t *)word + 8;
	struct reg *g = nvmefs_cl_reg_of(c, fd);
	struct region *r = g ? nvmefs_cl_region_of(c, lo, (size_t)(hi - lo)) : NULL;
	struct nvmefs_wire_layout_req q;
	int64_t ret;

	if (!r)
		return g ? -EFAULT : -EBADF;
	q = (struct nvmefs_wire_layout_req){.handle = g->handle,
					    .region = r->id,
					    .mem_off = (uint64_t)((const uint8_t *)blob - r->base),
					    .cap = cap,
					    .word_off =
						    (uint64_t)((const uint8_t *)word - r->base)};
	ret = nvmefs_cl_call_n(c, NVMEFS_WIRE_LAYOUT, 0, 0, &q, 1, sizeof(q), -1);
	*arg2 = c->reply_arg2;
	return ret;
}
