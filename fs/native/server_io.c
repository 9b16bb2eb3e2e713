// SPDX-License-Identifier: MIT
/*
 * The native door's sending and requests (server.c has the socket, the
 * control messages and the client's thread; server_i.h what both share).
 * Messages to a client are queued and sent as its socket takes them;
 * completions are gathered into COMPLETE messages. A checked READ or
 * WRITE is cut into pieces, each one call of nvmefs_data_read_into /
 * nvmefs_data_write_from on the client's shared memory; the engine's
 * threads finish the pieces and hand the request to the client's thread
 * (or send a read's completion themselves), which reaps it: counters, the
 * kernel's caches dropped for what was written, then the completion.
 */
#include "server_i.h"
#include "behind_i.h"
#include "data_i.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "nvmefs/util.h"

/* ---- sending ---- */

static struct nvmefs_wire_hdr msg_hdr(uint16_t type, uint32_t cnt, int64_t arg, int64_t arg2)
{
	return (struct nvmefs_wire_hdr){.magic = NVMEFS_WIRE_MAGIC,
					.version = NVMEFS_WIRE_VERSION,
					.type = type,
					.count = cnt,
					.arg = arg,
					.arg2 = arg2};
}

/* Queue a message: the header and len bytes of body (cnt entries). */
int queue_msg(struct nclient *c, uint16_t type, int64_t arg, int64_t arg2, const void *body,
	      uint32_t cnt, size_t len)
{
	struct nvmefs_wire_hdr h = msg_hdr(type, cnt, arg, arg2);
	struct nmsg *m;

	if (c->nout == MAX_OUT)
		return -ENOBUFS;
	m = malloc(sizeof(*m) + sizeof(h) + len);
	if (!m)
		return -ENOMEM;
	m->len = sizeof(h) + len;
	memcpy(m->data, &h, sizeof(h));
	if (len)
		memcpy(m->data + sizeof(h), body, len);
	c->out[c->nout++] = m;
	return 0;
}

int reply(struct nclient *c, int64_t arg, int64_t arg2)
{
	return queue_msg(c, NVMEFS_WIRE_REPLY, arg, arg2, NULL, 0, 0);
}

/* Completions gathered so far, into COMPLETE messages while there is room. */
static int queue_cq(struct nclient *c)
{
	unsigned i = 0;
	int ret = 0;

	while (i < c->ncq && c->nout < MAX_OUT) {
		unsigned n = c->ncq - i;

		if (n > NVMEFS_WIRE_MAX_BATCH)
			n = NVMEFS_WIRE_MAX_BATCH;
		ret = queue_msg(c, NVMEFS_WIRE_COMPLETE, 0, 0, c->cq + i, n, n * sizeof(*c->cq));
		if (ret)
			break;
		i += n;
	}
	if (i) /* before the first completion c->cq is NULL */
		memmove(c->cq, c->cq + i, (c->ncq - i) * sizeof(*c->cq));
	c->ncq -= i;
	return ret;
}

/* Send what the socket takes now. Returns 0, or -errno: the client is gone. */
int flush(struct nclient *c)
{
	int ret = queue_cq(c);

	while (!ret && c->nout) {
		ssize_t n =
			send(c->sock, c->out[0]->data, c->out[0]->len, MSG_DONTWAIT | MSG_NOSIGNAL);

		if (n < 0)
			return errno == EAGAIN ? 0 : -errno;
		free(c->out[0]);
		memmove(c->out, c->out + 1, --c->nout * sizeof(c->out[0]));
		ret = queue_cq(c);
	}
	return ret;
}

/* Note a completion for user_data (sent by the next flush). The test
 * daemon after its emulated power cut answers nothing, as a dead machine. */
int complete(struct nclient *c, uint64_t user_data, int64_t res)
{
	struct nvmefs_vol *vol = c->srv->vol;

	if (vol->test_mute && vol->test_mute())
		return 0;
	if (c->ncq == c->cqcap) {
		unsigned cap = c->cqcap ? 2 * c->cqcap : 64;
		void *v = realloc(c->cq, cap * sizeof(*c->cq));

		if (!v)
			return -ENOMEM;
		c->cq = v;
		c->cqcap = cap;
	}
	c->cq[c->ncq++] = (struct nvmefs_wire_cqe){.user_data = user_data, .res = res};
	return 0;
}

/* ---- requests ---- */

/*
 * The result of a request from its pieces': the first error, else the
 * bytes moved from its start up to the first short piece (a read at the
 * end of the file), so that what is reported is all in the buffer.
 */
static int64_t req_result(const struct nreq *r)
{
	int64_t sum = 0;

	for (unsigned i = 0; i < r->npieces; i++)
		if (r->p[i].res < 0)
			return r->p[i].res;
	for (unsigned i = 0; i < r->npieces; i++) {
		sum += r->p[i].res;
		if ((uint64_t)r->p[i].res < r->p[i].len)
			break;
	}
	return sum;
}

/* The counters of a request done with res. */
static void count_done(struct nvmefs_vol *vol, const struct nreq *r, int64_t res)
{
	bool wr = r->e.op == NVMEFS_WIRE_WRITE;

	if (res > 0) {
		count(wr ? &vol->native.writes : &vol->native.reads, 1);
		count(wr ? &vol->native.write_bytes : &vol->native.read_bytes, (uint64_t)res);
	}
}

/*
 * A read's completion sent from the engine's thread that finished it (c->mu
 * held): one hand-off less than waking the client's thread to send it
 * (docs/NATIVE.md, "Completions"). Only reads, which need nothing done
 * after them (a write's pages must be dropped from the kernel's cache
 * first); never while the client's thread is finishing, or while the test
 * daemon plays dead. The send does not block: a full socket, or any error,
 * leaves the request to the client's thread as before. The client's thread
 * still does the bookkeeping (counters, in-flight counts) when it next
 * reaps: before it acts on any message, so the next SUBMIT finds the slots
 * free.
 */
static bool send_now(struct nclient *c, struct nreq *r)
{
	struct nvmefs_vol *vol = c->srv->vol;
	struct {
		struct nvmefs_wire_hdr h;
		struct nvmefs_wire_cqe e;
	} m;

	if (c->closing || (vol->test_mute && vol->test_mute()))
		return false;
	/* A write needs the kernel told before its completion, unless the
	 * kernel holds nothing of the file (a file the door created and no
	 * one looked up since): asked after the write changed the size, so a
	 * lookup that comes later reads the new one. */
	if (r->e.op == NVMEFS_WIRE_WRITE && nvmefs_ns_kernel_holds(vol, r->ino))
		return false;
	m.h = msg_hdr(NVMEFS_WIRE_COMPLETE, 1, 0, 0);
	m.e = (struct nvmefs_wire_cqe){.user_data = r->e.user_data, .res = req_result(r)};
	if (send(c->sock, &m, sizeof(m), MSG_DONTWAIT | MSG_NOSIGNAL) != (ssize_t)sizeof(m))
		return false;
	count_done(vol, r, m.e.res); /* before the client can look at them */
	count(&vol->native.direct_completions, 1);
	return true;
}

/* A request's last reference went: its completion goes out now (a read),
 * or it goes to its client's thread. */
static void req_put(struct nreq *r)
{
	struct nclient *c = r->c;
	uint64_t one = 1;
	bool wake;

	if (atomic_fetch_sub(&r->left, 1) != 1)
		return;
	pthread_mutex_lock(&c->mu);
	r->sent = send_now(c, r);
	if (r->sent)
		atomic_fetch_add(&c->answered, 1);
	r->next = c->done;
	c->done = r;
	/* One wake-up per batch: none while one is coming (the client's
	 * thread reads the eventfd before it takes the list); none for a
	 * request already answered. */
	wake = !r->sent && !c->wake_pending;
	if (wake)
		c->wake_pending = true;
	pthread_mutex_unlock(&c->mu);
	if (wake && write(c->wake, &one, sizeof(one)) < 0)
		nvmefs_err("native: cannot wake a client's thread: %s", strerror(errno));
}

/* A piece is done: on an engine thread, or the client's when it ends early. */
static void piece_done(void *ctx, ssize_t res, const void *data)
{
	struct npiece *p = ctx;

	(void)data;
	p->res = res;
	req_put(p->r);
}

/*
 * Cut [off, off + len) into what the core moves in one call each. A
 * block-aligned range (buffer, offset and length) is one piece and no
 * copy. When buffer and offset are misaligned alike, the unaligned head
 * and tail go through pool buffers and the middle is still zero copy;
 * otherwise pieces of NVMEFS_IO_MAX, each through a pool buffer.
 * Fills p (room for max) and returns the count.
 */
static unsigned plan(uint64_t mem, uint64_t off, uint64_t len, struct npiece *p, unsigned max)
{
	unsigned n = 0;

	if ((mem & (NVMEFS_BLOCK - 1)) == (off & (NVMEFS_BLOCK - 1))) {
		uint64_t head = aligned(off) ? 0 : NVMEFS_BLOCK - (off & (NVMEFS_BLOCK - 1));
		uint64_t mid, tail;

		if (head > len)
			head = len;
		mid = (len - head) & ~(uint64_t)(NVMEFS_BLOCK - 1);
		tail = len - head - mid;
		if (head)
			p[n++] = (struct npiece){.off = off, .len = head, .mem_off = mem};
		if (mid)
			p[n++] = (struct npiece){
				.off = off + head, .len = mid, .mem_off = mem + head};
		if (tail)
			p[n++] = (struct npiece){
				.off = off + head + mid, .len = tail, .mem_off = mem + head + mid};
		return n;
	}
	for (uint64_t at = 0; at < len && n < max; at += NVMEFS_IO_MAX) {
		uint64_t l = len - at < NVMEFS_IO_MAX ? len - at : NVMEFS_IO_MAX;

		p[n++] = (struct npiece){.off = off + at, .len = l, .mem_off = mem + at};
	}
	return n;
}

/* Pieces plan() may make for a request of len bytes. */
static unsigned plan_max(uint64_t len)
{
	uint64_t n = (len + NVMEFS_IO_MAX - 1) / NVMEFS_IO_MAX;

	return n < 3 ? 3 : (unsigned)n;
}

/*
 * A piece of a write that may complete early (NVMEFS_WIRE_SQE_BEHIND):
 * its bytes copied into a pool buffer, so that the client may reuse its
 * region once answered, and the core answers it as a small write through
 * the mount is (NVMEFS_WRITE_BEHIND, data_i.h: before the devices have
 * it, unless too many such writes are in flight). Without a free buffer
 * now, it goes from the region as any write, and completes with the devices.
 */
static void write_piece_early(struct nvmefs_vol *vol, struct nvmefs_inode *in, const uint8_t *src,
			      struct npiece *p)
{
	void *buf = nvmefs_bufpool_tryget(vol->pool);

	if (buf) {
		nvmefs_data_write_async(vol, in, buf, src, p->len, p->off, NVMEFS_WRITE_BEHIND,
					piece_done, p);
		return;
	}
	/* An unaligned write waits for a buffer there, which the writes this
	 * thread holds keep: they go first. */
	hold_send();
	nvmefs_data_write_from(vol, in, src, p->len, p->off, 0, piece_done, p);
}

/* Start a checked READ or WRITE e on the client's file and region. */
void start_io(struct nclient *c, const struct nvmefs_wire_sqe *e)
{
	struct nvmefs_vol *vol = c->srv->vol;
	struct nfile *f = &c->files[e->handle];
	uint8_t *mem = c->regions[e->region].base;
	bool wr = e->op == NVMEFS_WIRE_WRITE;
	/* HELLO offered it only with write_behind set; checked again, as a
	 * client may ask regardless. */
	bool behind = wr && (e->flags & NVMEFS_WIRE_SQE_BEHIND) && e->len <= vol->opts.write_behind;
	unsigned max = plan_max(e->len);
	struct nreq *r = calloc(1, sizeof(*r) + max * sizeof(r->p[0]));
	int ret = 0;

	/* Only writes answered early are held. Any other I/O may wait for a
	 * pool buffer (an unaligned piece), which those keep: they go first. */
	if (!behind)
		hold_send();
	if (!r) {
		complete(c, e->user_data, -ENOMEM);
		return;
	}
	if (wr)
		ret = nvmefs_ns_may_change(vol) ?: nvmefs_ns_kill_privs(vol, f->in, &c->cred);
	if (ret > 0) { /* the mode changed: the kernel's copy is stale */
		inval(c, f->ino, -1, 0);
		ret = 0;
	}
	if (ret) {
		free(r);
		complete(c, e->user_data, ret);
		return;
	}
	r->c = c;
	r->e = *e;
	r->ino = f->ino;
	r->npieces = plan((uint64_t)(uintptr_t)mem + e->mem_off, e->off, e->len, r->p, max);
	for (unsigned i = 0; i < r->npieces; i++) {
		r->p[i].r = r;
		r->p[i].mem_off -= (uint64_t)(uintptr_t)mem;
	}
	atomic_init(&r->left, r->npieces + 1);
	c->inflight++;
	f->inflight++;
	c->regions[e->region].inflight++;
	for (unsigned i = 0; i < r->npieces; i++) {
		struct npiece *p = &r->p[i];

		/* Regions are page-aligned mappings: the offsets tell. */
		if (!aligned(p->off | p->len | p->mem_off)) {
			count(&vol->native.copied_requests, 1);
			count(&vol->native.copied_bytes, p->len);
		}
		if (wr && behind)
			write_piece_early(vol, f->in, mem + p->mem_off, p);
		else if (wr)
			nvmefs_data_write_from(vol, f->in, mem + p->mem_off, p->len, p->off, 0,
					       piece_done, p);
		else
			nvmefs_data_read_into(vol, f->in, mem + p->mem_off, p->len, p->off,
					      piece_done, p);
	}
	req_put(r);
}

/* ---- writes held back ---- */

/*
 * A client's small writes answered early (NVMEFS_WIRE_SQE_BEHIND) are
 * held back by its thread and sent to the devices together: a program
 * that makes small files sends a create, a write and a close a file, and
 * each write sent alone woke the loop device's worker on the program's
 * CPU and the engine's reaper on the other (docs/PERFORMANCE.md, "The
 * create door's writes, gathered"). The thread holds them (the engine's
 * plug, nvmefs_engine_plug) while messages keep coming, and sends them
 * once it holds HOLD_MAX, once the first waited HOLD_NS, before it waits
 * for anything (nvmefs_before_wait: a range lock, a commit, a synchronous
 * I/O) or for its socket, before it asks the kernel to drop a file's cached
 * pages (inval: a reader through the mount may hold one while it waits for
 * a held write), before any other I/O of its client, and when the client
 * goes. Meanwhile a reader of their range through the mount, a commit
 * and the unmount wait for them, as for any write in flight, about that
 * much longer. Their sizes, times and range locks are theirs from the
 * answer on (data_i.h): nobody sees the bytes missing. As the wait hook,
 * the send runs inside the range lock's wait, its mutex let go around it
 * (nvmefs_before_wait_locked): an io_submit there, only when something
 * is held.
 */
#define HOLD_MAX NVMEFS_BEHIND_MAX
#define HOLD_NS	 NVMEFS_HOLD_NS

static __thread struct nclient *holder; /* the thread's client, while it may hold */

void hold_begin(struct nclient *c)
{
	if (!c->srv->vol->opts.write_behind)
		return; /* none is answered early: nothing to hold */
	holder = c;
	nvmefs_engine_plug(c->srv->vol->eng);
	nvmefs_wait_hook = hold_send;
}

void hold_send(void)
{
	struct nvmefs_vol *vol;
	unsigned n;

	if (!holder || !(n = nvmefs_engine_plug_send()))
		return;
	vol = holder->srv->vol;
	count(&vol->native.held_writes, n);
	count(&vol->native.held_sends, 1);
}

void hold_send_due(void)
{
	if (nvmefs_engine_plug_due(HOLD_MAX, HOLD_NS))
		hold_send();
}

void hold_end(void)
{
	hold_send();
	nvmefs_engine_unplug();
	if (holder)
		nvmefs_wait_hook = NULL;
	holder = NULL;
}

/* Ask the kernel to drop what it caches of the file (native_i.h). */
void inval(struct nclient *c, uint64_t ino, int64_t off, int64_t len)
{
	/* The kernel locks the range's pages to drop them (off >= 0; -1:
	 * the attributes only, no page); a reader through the mount may hold
	 * one while it waits for a held write's range. */
	if (off >= 0)
		hold_send();
	count(&c->srv->vol->native.invals, 1);
	c->srv->inval(c->srv->inval_arg, ino, off, len);
}

/* Add a range (written, or about to be read: before_reads in server.c) to
 * v (n of MAX_SPANS): merged with its file's; a file beyond MAX_SPANS is
 * invalidated whole now. */
void span_add(struct nclient *c, struct span *v, unsigned *n, uint32_t handle, uint64_t off,
	      uint64_t len)
{
	for (unsigned i = 0; i < *n; i++) {
		if (v[i].handle == handle) {
			v[i].start = off < v[i].start ? off : v[i].start;
			v[i].end = off + len > v[i].end ? off + len : v[i].end;
			return;
		}
	}
	if (*n < MAX_SPANS)
		v[(*n)++] = (struct span){handle, off, off + len};
	else
		inval(c, c->files[handle].ino, 0, 0);
}

/*
 * Finish the requests the engine completed: counters, and for the files
 * written, the kernel's pages and attributes dropped before the client
 * hears of it, so that a reader through the mount who starts after the
 * completion sees the bytes, the size and the mtime.
 */
void reap(struct nclient *c)
{
	struct nvmefs_vol *vol = c->srv->vol;
	struct span spans[MAX_SPANS];
	unsigned nspans = 0;
	struct nreq *r, *next, *list;

	pthread_mutex_lock(&c->mu);
	list = c->done;
	c->done = NULL;
	c->wake_pending = false;
	pthread_mutex_unlock(&c->mu);
	for (r = list; r; r = r->next)
		if (r->e.op == NVMEFS_WIRE_WRITE && !r->sent)
			span_add(c, spans, &nspans, r->e.handle, r->e.off, r->e.len);
	for (unsigned i = 0; i < nspans; i++)
		inval(c, c->files[spans[i].handle].ino, (int64_t)spans[i].start,
		      (int64_t)(spans[i].end - spans[i].start));
	for (r = list; r; r = next) {
		next = r->next;
		c->inflight--;
		c->files[r->e.handle].inflight--;
		c->regions[r->e.region].inflight--;
		if (!r->sent) {
			int64_t res = req_result(r);

			count_done(vol, r, res);
			complete(c, r->e.user_data, res);
		} else {
			atomic_fetch_sub(&c->answered, 1);
		}
		free(r);
	}
}
