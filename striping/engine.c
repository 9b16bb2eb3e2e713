// SPDX-License-Identifier: MIT
/*
 * The striped libaio engine.
 *
 * Flow of one block: nvmefs_engine_submit() takes a unit per block and
 * appends it to its device's queue, then kick() moves queued units into the
 * kernel while the device has fewer than qd in flight. The device's reaper
 * thread waits in io_getevents(min_nr=1), checks each result, refills the
 * window with kick() and only then runs the completion callbacks, so the
 * device never idles while callbacks run.
 *
 * The reaper sleeps in io_getevents with no timeout. To wake it (shutdown, or
 * a unit that completes without the kernel: a hard io_submit error or an
 * injected fault) a one-shot IOCB_CMD_POLL on an eventfd is kept armed in the
 * same context; writing the eventfd completes it. Kernels without aio poll
 * (before 4.18) fall back to a 10 ms io_getevents timeout.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <numa.h>
#include <sched.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "engine_i.h"
#include "fi_i.h"
#include "nvmefs/util.h"

#define DEFAULT_QD	32
#define MAX_QD		4096
#define DEFAULT_MAX_IO	(1ull << 20)
#define SUBMIT_BATCH	64  /* iocbs per io_submit call */
#define REAP_BATCH	128 /* events per io_getevents call */
#define SLAB_UNITS	64
#define EAGAIN_SLEEP_NS 100000 /* 100 us between retries of a refused submit */

/*
 * An iocb is written by the submitting thread and read by the reaper; the
 * kernel orders the two (io_submit, then io_getevents), but ThreadSanitizer
 * cannot see through system calls. Tell it about the hand-off.
 */
#if defined(__SANITIZE_THREAD__)
#define NVMEFS_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define NVMEFS_TSAN 1
#endif
#endif
#ifdef NVMEFS_TSAN
#include <sanitizer/tsan_interface.h>
#define to_kernel(p)   __tsan_release(p)
#define from_kernel(p) __tsan_acquire(p)
#else
#define to_kernel(p)   ((void)(p))
#define from_kernel(p) ((void)(p))
#endif

static void wake(struct edev *d)
{
	uint64_t one = 1;

	/* Only fails if the counter would overflow, which means a wake is pending. */
	if (write(d->efd, &one, sizeof(one)) < 0) {
	}
}

static int arm_poll(struct edev *d)
{
	struct iocb *cbs[1] = {&d->poll_cb};

	io_prep_poll(&d->poll_cb, d->efd, POLLIN);
	return io_submit(d->ctx, 1, cbs);
}

/* Take up to n free units off d's list into *list; lock held. */
static int grab_units_locked(struct edev *d, unsigned n, struct unit **list)
{
	while (n) {
		struct unit *u = d->free_units;

		if (!u) {
			unsigned cnt = n > SLAB_UNITS ? n : SLAB_UNITS;
			struct unit_slab *s = calloc(1, sizeof(*s) + cnt * sizeof(s->units[0]));

			if (!s)
				return -ENOMEM;
			s->n = cnt;
			s->next = d->slabs;
			d->slabs = s;
			for (unsigned i = 0; i < cnt; i++) {
				s->units[i].next = d->free_units;
				d->free_units = &s->units[i];
			}
			continue;
		}
		d->free_units = u->next;
		u->next = *list;
		*list = u;
		n--;
	}
	return 0;
}

static void put_units_locked(struct edev *d, struct unit *list)
{
	while (list) {
		struct unit *next = list->next;

		list->next = d->free_units;
		d->free_units = list;
		list = next;
	}
}

/*
 * Put cbs[0..n) back at the head of the queue after io_submit refused them
 * with -EAGAIN. Returns true if nothing is in flight (no completion will come
 * to retry them, so the caller must).
 */
static bool requeue(struct edev *d, struct iocb **cbs, unsigned n)
{
	bool idle;

	pthread_mutex_lock(&d->lock);
	for (unsigned i = n; i-- > 0;) {
		struct unit *u = (struct unit *)cbs[i];

		u->next = d->qhead;
		d->qhead = u;
		if (!d->qtail)
			d->qtail = u;
	}
	d->inflight -= n;
	d->queued += n;
	idle = d->inflight == 0;
	pthread_mutex_unlock(&d->lock);
	return idle;
}

/* End u's power-loss records (test-only; fi_i.h); written: it reached the kernel. */
static void fi_end_writes(struct nvmefs_dev *dev, struct unit *u, bool written)
{
	if (!u->write)
		return;
	for (unsigned i = 0; i < UNIT_IOV; i++) {
		if (u->fi_rec[i])
			fi_write_end(dev, u->fi_rec[i], written);
		u->fi_rec[i] = 0;
	}
}

/* Fail the unit behind cb without the kernel (io_submit refused it hard). */
static void fail_submitted(struct edev *d, struct iocb *cb, int err)
{
	struct unit *u = (struct unit *)cb;

	nvmefs_err("%s: io_submit failed: %s", d->dev->path, strerror(-err));
	fi_end_writes(d->dev, u, false);
	u->result = err;
	u->synthetic = true;
	pthread_mutex_lock(&d->lock);
	d->inflight--;
	u->next = d->synth;
	d->synth = u;
	pthread_mutex_unlock(&d->lock);
	wake(d);
}

/* What submit_batch() did with a batch. */
enum submit_outcome {
	SUBMIT_ALL,   /* every iocb went to the kernel (or failed hard) */
	SUBMIT_WAIT,  /* refused for now; a completion will retry */
	SUBMIT_RETRY, /* refused for now and nothing in flight: retry */
};

/* io_submit cbs[0..n), all already counted in flight. */
static enum submit_outcome submit_batch(struct edev *d, struct iocb **cbs, unsigned n)
{
	uint64_t now = nvmefs_now_ns();
	unsigned done = 0;

	for (unsigned i = 0; i < n; i++) {
		((struct unit *)cbs[i])->t_submit = now;
		to_kernel(cbs[i]);
	}
	while (done < n) {
		int r = fi_refuse_submit(d->dev) ? -EAGAIN
						 : io_submit(d->ctx, (long)(n - done), cbs + done);

		if (r > 0) {
			done += (unsigned)r;
		} else if (r == -EAGAIN || r == 0) {
			return requeue(d, cbs + done, n - done) ? SUBMIT_RETRY : SUBMIT_WAIT;
		} else if (r != -EINTR) {
			fail_submitted(d, cbs[done], r);
			done++;
		}
	}
	return SUBMIT_ALL;
}

/* Move queued units of d into the kernel until the window is full. */
static void kick(struct edev *d)
{
	const struct timespec pause = {0, EAGAIN_SLEEP_NS};
	struct iocb *cbs[SUBMIT_BATCH];

	for (;;) {
		bool synth = false;
		unsigned n = 0;

		pthread_mutex_lock(&d->lock);
		while (n < SUBMIT_BATCH && d->qhead && d->inflight < d->eng->qd) {
			struct unit *u = d->qhead;

			d->qhead = u->next;
			if (!d->qhead)
				d->qtail = NULL;
			d->queued--;
			/* Fenced (a shutdown): what is queued fails here, as
			 * the cut's refused blocks do, without the kernel. */
			if (!u->synthetic && nvmefs_dev_fenced(d->dev)) {
				fi_end_writes(d->dev, u, false);
				u->result = -EIO;
				u->synthetic = true;
			}
			if (u->synthetic) {
				u->next = d->synth;
				d->synth = u;
				synth = true;
				continue;
			}
			d->inflight++;
			cbs[n++] = &u->cb;
		}
		pthread_mutex_unlock(&d->lock);
		if (synth)
			wake(d);
		if (n == 0)
			return;
		switch (submit_batch(d, cbs, n)) {
		case SUBMIT_ALL:
			break;
		case SUBMIT_WAIT:
			return;
		case SUBMIT_RETRY:
			nanosleep(&pause, NULL);
			break;
		}
	}
}

/* Record u's result and complete its request if u was the last block. */
static void finish_unit(struct nvmefs_engine *eng, struct unit *u)
{
	struct nvmefs_io_req *req = u->req;
	int zero = 0;

	if (u->result)
		atomic_compare_exchange_strong(&req->error, &zero, u->result);
	if (atomic_fetch_sub(&req->pending, 1) == 1) {
		req->done(req, atomic_load(&req->error));
		atomic_fetch_sub(&eng->outstanding, 1);
	}
}

/* Check one kernel completion: a failure or a short transfer is an error. */
static void reap_one(struct edev *d, struct unit *u, long res, uint64_t now)
{
	bool write = u->write;

	if (res < 0) {
		u->result = (int)res;
	} else if ((uint64_t)res != u->expect) {
		nvmefs_err("%s: short %s at offset %llu: %ld of %llu bytes", d->dev->path,
			   write ? "write" : "read", (unsigned long long)u->off, res,
			   (unsigned long long)u->expect);
		u->result = -EIO;
	} else {
		u->result = 0;
	}
	if (u->result) {
		atomic_fetch_add_explicit(&d->errors, 1, memory_order_relaxed);
		return;
	}
	atomic_fetch_add_explicit(write ? &d->write_ops : &d->read_ops, 1, memory_order_relaxed);
	atomic_fetch_add_explicit(write ? &d->write_bytes : &d->read_bytes, u->expect,
				  memory_order_relaxed);
	atomic_fetch_add_explicit(&d->busy_ns, now - u->t_submit, memory_order_relaxed);
}

/*
 * Thread attributes that start a reaper on the CPUs of its device's NUMA node.
 * Computed on the creating thread: libnuma's node-to-CPU cache is filled
 * lazily without a lock, so reapers must not call into it concurrently
 * (ThreadSanitizer caught exactly that with numa_run_on_node()).
 */
static void node_affinity(const struct edev *d, pthread_attr_t *attr)
{
	cpu_set_t set;

	if (nvmefs_node_cpus(d->dev->numa_node, &set) == 0 &&
	    pthread_attr_setaffinity_np(attr, sizeof(set), &set) != 0)
		nvmefs_warn("%s: cannot run on NUMA node %d", d->dev->path, d->dev->numa_node);
}

/* After a wake: reset the eventfd, re-arm the poll, collect synthetic units. */
static struct unit *handle_wake(struct edev *d, struct unit *done, bool *stopping)
{
	uint64_t cnt;
	struct unit *s;

	if (d->poll_ok) {
		if (read(d->efd, &cnt, sizeof(cnt)) < 0) {
			/* EAGAIN: already reset by an earlier wake; nothing to do. */
		}
		if (arm_poll(d) != 1)
			d->poll_ok = false;
	}
	pthread_mutex_lock(&d->lock);
	s = d->synth;
	d->synth = NULL;
	*stopping = d->stopping;
	pthread_mutex_unlock(&d->lock);
	while (s) {
		struct unit *next = s->next;

		atomic_fetch_add_explicit(&d->errors, 1, memory_order_relaxed);
		s->next = done;
		done = s;
		s = next;
	}
	return done;
}

static __thread bool reaping;

bool nvmefs_engine_reaping(void)
{
	return reaping;
}

static void *reaper(void *arg)
{
	struct edev *d = arg;
	struct io_event ev[REAP_BATCH];
	const struct timespec tick = {0, 10000000};
	bool stopping = false;

	reaping = true;
	for (;;) {
		struct unit *done = NULL;
		unsigned nk = 0;
		bool woke = !d->poll_ok;
		bool idle;
		uint64_t now;
		int n;

		n = io_getevents(d->ctx, 1, REAP_BATCH, ev,
				 d->poll_ok ? NULL : (struct timespec *)&tick);
		if (n < 0 && n != -EINTR)
			nvmefs_err("%s: io_getevents failed: %s", d->dev->path, strerror(-n));
		if (fi_latency_us(d->dev))
			usleep(fi_latency_us(d->dev));
		now = nvmefs_now_ns();
		for (int i = 0; i < n; i++) {
			struct unit *u = ev[i].data;

			from_kernel(ev[i].obj);
			if (ev[i].obj == &d->poll_cb) {
				woke = true;
				continue;
			}
			reap_one(d, u, (long)ev[i].res, now);
			fi_end_writes(d->dev, u, true);
			u->next = done;
			done = u;
			nk++;
		}
		if (nk) {
			pthread_mutex_lock(&d->lock);
			d->inflight -= nk;
			pthread_mutex_unlock(&d->lock);
		}
		if (woke)
			done = handle_wake(d, done, &stopping);
		kick(d);
		for (struct unit *u = done; u; u = u->next)
			finish_unit(d->eng, u);
		pthread_mutex_lock(&d->lock);
		put_units_locked(d, done);
		idle = !d->inflight && !d->qhead && !d->synth;
		stopping = d->stopping;
		pthread_mutex_unlock(&d->lock);
		if (stopping && idle)
			break;
	}
	/* Here rather than in edev_exit: io_destroy waits for an RCU grace
	 * period (tens of ms), and the reapers of all devices wait at once. */
	io_destroy(d->ctx);
	d->ctx = 0;
	return NULL;
}

/* Check a segment against its device; logs and returns -EINVAL if bad. */
static int check_seg(const struct nvmefs_engine *eng, const struct nvmefs_io_seg *s)
{
	const struct nvmefs_dev *dev;

	if (s->dev >= eng->set->count) {
		nvmefs_err("I/O to device %u of %u", s->dev, eng->set->count);
		return -EINVAL;
	}
	dev = &eng->set->devs[s->dev];
	if (s->len == 0 || (s->off | s->len) % dev->block_size ||
	    (uintptr_t)s->buf % dev->mem_align || s->off > dev->size ||
	    s->len > dev->size - s->off) {
		nvmefs_err("%s: bad I/O segment: offset %llu, length %llu, buffer %p "
			   "(device size %llu, alignment %u/%u)",
			   dev->path, (unsigned long long)s->off, (unsigned long long)s->len,
			   s->buf, (unsigned long long)dev->size, dev->block_size, dev->mem_align);
		return -EINVAL;
	}
	return 0;
}

/*
 * Cut req's segments on device di into blocks. A segment is cut into pieces
 * of at most max_io; a piece that starts on the device where the block before
 * it ended joins that block while the block stays within max_io bytes and
 * UNIT_IOV buffers (a buffer that also continues in memory just grows). With
 * list NULL this only counts; otherwise it fills the blocks from list (which
 * must hold the count) and returns them through head and tail.
 */
static uint64_t cut_blocks(const struct nvmefs_engine *eng, struct nvmefs_io_req *req, unsigned di,
			   struct unit *list, struct unit **head, struct unit **tail)
{
	struct unit *last = NULL;
	uint64_t n = 0, end = 0, len = 0;
	char *bend = NULL;
	unsigned niov = 0;

	for (unsigned i = 0; i < req->nr_segs; i++) {
		const struct nvmefs_io_seg *s = &req->segs[i];

		if (s->dev != di)
			continue;
		for (uint64_t o = 0; o < s->len; o += eng->max_io) {
			uint64_t plen = s->len - o < eng->max_io ? s->len - o : eng->max_io;
			char *buf = (char *)s->buf + o;
			struct unit *u;

			bool in_mem = buf == bend;

			bend = buf + plen;
			if (n && s->off + o == end && len + plen <= eng->max_io &&
			    (in_mem || niov < UNIT_IOV)) {
				if (in_mem && last)
					last->iov[last->niov - 1].iov_len += plen;
				else if (!in_mem && last)
					last->iov[last->niov++] = (struct iovec){buf, plen};
				niov += !in_mem;
				len += plen;
				end += plen;
				if (last)
					last->expect += plen;
				continue;
			}
			n++;
			len = plen;
			niov = 1;
			end = s->off + o + plen;
			if (!list)
				continue;
			u = list;
			list = u->next;
			*u = (struct unit){.req = req,
					   .off = s->off + o,
					   .expect = plen,
					   .write = req->op == NVMEFS_IO_WRITE,
					   .niov = 1,
					   .iov = {{buf, plen}}};
			if (last)
				last->next = u;
			else
				*head = u;
			last = u;
		}
	}
	if (tail)
		*tail = last;
	return n;
}

/* Test-only faults and power-loss recording (fi_i.h); nothing otherwise. */
static void fi_prepare(struct nvmefs_dev *dev, struct unit *u)
{
	switch (fi_check(dev, u->write ? NVMEFS_FAULT_WRITES : NVMEFS_FAULT_READS, u->off,
			 u->expect)) {
	case FI_FAIL:
		u->synthetic = true;
		u->result = -EIO;
		return;
	case FI_SHORT: /* a real short transfer: ask the kernel for a block less */
		u->iov[u->niov - 1].iov_len -= dev->block_size;
		break;
	case FI_GO:
		break;
	}
	if (!u->write)
		return;
	for (uint64_t i = 0, at = 0; i < u->niov; at += u->iov[i].iov_len, i++) {
		uint64_t id =
			fi_write_begin(dev, u->off + at, u->iov[i].iov_base, u->iov[i].iov_len);

		if (id == FI_WRITE_DROPPED) { /* the power is cut: none of it goes */
			fi_end_writes(dev, u, false);
			u->synthetic = true;
			u->result = -EIO;
			return;
		}
		u->fi_rec[i] = id;
	}
}

/* Point u's iocb at its buffers: one is a plain pread/pwrite, more a vector. */
static void prep_iocb(struct edev *d, struct unit *u)
{
	int fd = d->dev->fd;
	long long off = (long long)u->off;

	if (u->niov == 1 && u->write)
		io_prep_pwrite(&u->cb, fd, u->iov[0].iov_base, u->iov[0].iov_len, off);
	else if (u->niov == 1)
		io_prep_pread(&u->cb, fd, u->iov[0].iov_base, u->iov[0].iov_len, off);
	else if (u->write)
		io_prep_pwritev(&u->cb, fd, u->iov, (int)u->niov, off);
	else
		io_prep_preadv(&u->cb, fd, u->iov, (int)u->niov, off);
	u->cb.data = u;
}

__thread const struct nvmefs_engine_ring *nvmefs_engine_ring;

/* The calling thread's plug (nvmefs_engine_plug): what it holds back. */
_Static_assert(NVMEFS_MAX_DEVICES <= 32, "the plug keeps a bit per device in devs");
static __thread struct {
	struct nvmefs_engine *eng; /* NULL: not plugged */
	uint32_t devs;		   /* devices with blocks held: bit i, device i */
	unsigned held;		   /* requests held */
	uint64_t since;		   /* when the first of them was */
} plug;

/*
 * Put d's blocks (the list head) on the calling thread's ring where it
 * takes them; returns those left for d's queue, the last in *tail. A block
 * is counted in flight under the lock, as kick() does, so that a fence
 * waits for it; once fenced, none goes to the ring. The test build keeps
 * every block on its own path, where its faults and records are.
 */
static struct unit *ring_queue(struct edev *d, const struct nvmefs_engine_ring *ring,
			       struct unit *head, struct unit **tail)
{
	struct unit *left = NULL, **end = &left;
	uint64_t now = nvmefs_now_ns();

	*tail = NULL;
	for (struct unit *u = head, *next; u; u = next) {
		bool taken = false;

		next = u->next;
#ifndef NVMEFS_FAULT_INJECTION
		pthread_mutex_lock(&d->lock);
		taken = !u->synthetic && !nvmefs_dev_fenced(d->dev);
		if (taken)
			d->inflight++;
		pthread_mutex_unlock(&d->lock);
		if (taken) {
			u->ed = d;
			u->t_submit = now;
			if (ring->queue(ring->arg, d->dev->fd, u->write, u->iov, u->niov, u->off,
					u)) {
				pthread_mutex_lock(&d->lock);
				d->inflight--;
				pthread_mutex_unlock(&d->lock);
				u->ed = NULL;
				taken = false;
			}
		}
#else
		(void)ring;
		(void)now;
#endif
		if (taken)
			continue;
		u->next = NULL;
		*end = u;
		end = &u->next;
		*tail = u;
	}
	return left;
}

void nvmefs_engine_ring_done(void *token, long res)
{
	struct unit *u = token;
	struct edev *d = u->ed;

	reap_one(d, u, res, nvmefs_now_ns());
	pthread_mutex_lock(&d->lock);
	d->inflight--;
	pthread_mutex_unlock(&d->lock);
	/* The window may have room again for blocks queued meanwhile. */
	kick(d);
	u->ed = NULL;
	u->next = NULL;
	finish_unit(d->eng, u);
	pthread_mutex_lock(&d->lock);
	put_units_locked(d, u);
	pthread_mutex_unlock(&d->lock);
}

/* Queue req's blocks on their devices and send them, or leave them queued
 * for the caller's plug to send (held). */
static int submit(struct nvmefs_engine *eng, struct nvmefs_io_req *req,
		  const struct nvmefs_engine_ring *ring, bool held)
{
	uint64_t per_dev[NVMEFS_MAX_DEVICES] = {0};
	struct unit *lists[NVMEFS_MAX_DEVICES] = {0};
	uint64_t total = 0;
	unsigned ndev = eng->set->count;
	int err = 0;

	if (req->nr_segs == 0 || !req->segs || !req->done)
		return -EINVAL;
	for (unsigned i = 0; i < req->nr_segs; i++) {
		const struct nvmefs_io_seg *s = &req->segs[i];

		err = check_seg(eng, s);
		if (err)
			return err;
		if (fi_refuse_request(&eng->set->devs[s->dev],
				      req->op == NVMEFS_IO_WRITE ? NVMEFS_FAULT_WRITES
								 : NVMEFS_FAULT_READS,
				      s->off, s->len))
			return -ENOMEM; /* test builds: the NOMEM fault */
	}
	for (unsigned di = 0; di < ndev; di++)
		per_dev[di] = cut_blocks(eng, req, di, NULL, NULL, NULL);
	/* Take every unit first, so a shortage fails the request cleanly. */
	for (unsigned di = 0; di < ndev && !err; di++) {
		struct edev *d = &eng->devs[di];

		if (!per_dev[di])
			continue;
		total += per_dev[di];
		pthread_mutex_lock(&d->lock);
		err = grab_units_locked(d, (unsigned)per_dev[di], &lists[di]);
		pthread_mutex_unlock(&d->lock);
	}
	if (err) {
		for (unsigned di = 0; di < ndev; di++) {
			pthread_mutex_lock(&eng->devs[di].lock);
			put_units_locked(&eng->devs[di], lists[di]);
			pthread_mutex_unlock(&eng->devs[di].lock);
		}
		return err;
	}
	/* Count every block before any is queued: none may finish the request early. */
	atomic_store(&req->pending, total);
	atomic_store(&req->error, 0);
	atomic_fetch_add(&eng->outstanding, 1);
	for (unsigned di = 0; di < ndev; di++) {
		struct edev *d = &eng->devs[di];
		struct unit *head, *tail;
		unsigned nq;

		if (!per_dev[di])
			continue;
		cut_blocks(eng, req, di, lists[di], &head, &tail);
		for (struct unit *u = head; u; u = u->next) {
			fi_prepare(d->dev, u);
			prep_iocb(d, u);
		}
		nq = (unsigned)per_dev[di];
		if (ring) {
			head = ring_queue(d, ring, head, &tail);
			nq = 0;
			for (struct unit *u = head; u; u = u->next)
				nq++;
		}
		if (!head)
			continue;
		pthread_mutex_lock(&d->lock);
		if (d->qtail)
			d->qtail->next = head;
		else
			d->qhead = head;
		d->qtail = tail;
		d->queued += nq;
		pthread_mutex_unlock(&d->lock);
		if (held)
			plug.devs |= 1u << di;
		else
			kick(d);
	}
	if (held && !plug.held++)
		plug.since = nvmefs_now_ns();
	fi_submit_done();
	return 0;
}

int nvmefs_engine_submit(struct nvmefs_engine *eng, struct nvmefs_io_req *req)
{
	return submit(eng, req, nvmefs_engine_ring, false);
}

int nvmefs_engine_submit_held(struct nvmefs_engine *eng, struct nvmefs_io_req *req)
{
	return submit(eng, req, nvmefs_engine_ring, plug.eng == eng && !nvmefs_engine_ring);
}

void nvmefs_engine_plug(struct nvmefs_engine *eng)
{
	nvmefs_engine_unplug();
	plug.eng = eng;
}

unsigned nvmefs_engine_plug_send(void)
{
	unsigned n = plug.held;
	uint32_t devs = plug.devs;

	plug.devs = 0;
	plug.held = 0;
	for (unsigned di = 0; devs; di++, devs >>= 1)
		if (devs & 1)
			kick(&plug.eng->devs[di]);
	return n;
}

unsigned nvmefs_engine_plug_held(uint64_t *since_ns)
{
	*since_ns = plug.since;
	return plug.held;
}

bool nvmefs_engine_plug_due(unsigned max, uint64_t max_ns)
{
	return plug.held && (plug.held >= max || nvmefs_now_ns() - plug.since >= max_ns);
}

void nvmefs_engine_unplug(void)
{
	if (plug.eng)
		(void)nvmefs_engine_plug_send();
	plug.eng = NULL;
}

struct waiter {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool done;
	int res;
};

static void waiter_done(struct nvmefs_io_req *req, int res)
{
	struct waiter *w = req->priv;

	pthread_mutex_lock(&w->lock);
	w->res = res;
	w->done = true;
	pthread_cond_signal(&w->cond);
	pthread_mutex_unlock(&w->lock);
}

int nvmefs_engine_run(struct nvmefs_engine *eng, struct nvmefs_io_req *req)
{
	struct waiter w = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, false, 0};
	void *priv = req->priv;
	int err;

	req->done = waiter_done;
	req->priv = &w;
	/* It waits: nothing of its own may stay held meanwhile. */
	if (plug.eng == eng)
		(void)nvmefs_engine_plug_send();
	err = submit(eng, req, NULL, false); /* never on the caller's ring: it waits here */
	if (!err) {
		pthread_mutex_lock(&w.lock);
		while (!w.done)
			pthread_cond_wait(&w.cond, &w.lock);
		pthread_mutex_unlock(&w.lock);
		err = w.res;
	}
	req->priv = priv;
	pthread_cond_destroy(&w.cond);
	pthread_mutex_destroy(&w.lock);
	return err;
}

int nvmefs_engine_flush(struct nvmefs_engine *eng, unsigned dev)
{
	if (dev >= eng->set->count)
		return -EINVAL;
	return nvmefs_dev_flush(&eng->set->devs[dev]);
}

void nvmefs_engine_fence(struct nvmefs_engine *eng)
{
	const struct timespec ms = {0, 1000000};

	nvmefs_devset_fence(eng->set);
	/* A block is counted in flight under the lock before it goes to
	 * io_submit, and one taken from the queue after the fence is failed
	 * instead: once each member was seen with none in flight, nothing
	 * more reaches any. */
	for (unsigned i = 0; i < eng->set->count; i++) {
		struct edev *d = &eng->devs[i];

		for (;;) {
			unsigned n;

			pthread_mutex_lock(&d->lock);
			n = d->inflight;
			pthread_mutex_unlock(&d->lock);
			if (!n)
				break;
			nanosleep(&ms, NULL);
		}
	}
}

void nvmefs_engine_dev_stats(struct nvmefs_engine *eng, unsigned dev,
			     struct nvmefs_engine_dev_stats *st)
{
	struct edev *d = &eng->devs[dev];

	st->read_ops = atomic_load_explicit(&d->read_ops, memory_order_relaxed);
	st->read_bytes = atomic_load_explicit(&d->read_bytes, memory_order_relaxed);
	st->write_ops = atomic_load_explicit(&d->write_ops, memory_order_relaxed);
	st->write_bytes = atomic_load_explicit(&d->write_bytes, memory_order_relaxed);
	st->errors = atomic_load_explicit(&d->errors, memory_order_relaxed);
	st->busy_ns = atomic_load_explicit(&d->busy_ns, memory_order_relaxed);
	pthread_mutex_lock(&d->lock);
	st->in_flight = d->inflight;
	st->queued = d->queued;
	pthread_mutex_unlock(&d->lock);
}

unsigned nvmefs_engine_queue_depth(const struct nvmefs_engine *eng)
{
	return eng->qd;
}

uint64_t nvmefs_engine_max_io(const struct nvmefs_engine *eng)
{
	return eng->max_io;
}

/* Set up device d's context, eventfd and reaper thread. */
static int edev_init(struct nvmefs_engine *eng, unsigned i)
{
	struct edev *d = &eng->devs[i];
	pthread_attr_t attr;
	char name[16];
	int err;

	d->eng = eng;
	d->idx = i;
	d->dev = &eng->set->devs[i];
	d->efd = -1;
	pthread_mutex_init(&d->lock, NULL);
	/* One slot more than the window for the wake-up poll. */
	err = io_setup((int)eng->qd + 1, &d->ctx);
	if (err) {
		nvmefs_err("%s: io_setup(%u) failed: %s%s", d->dev->path, eng->qd + 1,
			   strerror(-err),
			   err == -EAGAIN ? " (raise /proc/sys/fs/aio-max-nr or the queue depth)"
					  : "");
		d->ctx = 0;
		return err;
	}
	d->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (d->efd < 0)
		return -errno;
	d->poll_ok = arm_poll(d) == 1;
	pthread_attr_init(&attr);
	node_affinity(d, &attr);
	err = -pthread_create(&d->thread, &attr, reaper, d);
	pthread_attr_destroy(&attr);
	if (err)
		return err;
	d->thread_started = true;
	snprintf(name, sizeof(name), "nvmefs-cq%u", (unsigned char)i); /* i < 32 */
	pthread_setname_np(d->thread, name);
	return 0;
}

/* Tell device d's reaper to stop once its queue is empty. */
static void edev_stop(struct edev *d)
{
	if (!d->thread_started)
		return;
	pthread_mutex_lock(&d->lock);
	d->stopping = true;
	pthread_mutex_unlock(&d->lock);
	wake(d);
}

/* Stop device d's reaper (its queue must be empty) and free its state. */
static void edev_exit(struct edev *d)
{
	if (d->thread_started) {
		edev_stop(d);
		pthread_join(d->thread, NULL);
	}
	if (d->ctx)
		io_destroy(d->ctx);
	if (d->efd >= 0)
		close(d->efd);
	while (d->slabs) {
		struct unit_slab *s = d->slabs;

		d->slabs = s->next;
		free(s);
	}
	pthread_mutex_destroy(&d->lock);
}

int nvmefs_engine_create(struct nvmefs_engine **out, struct nvmefs_devset *set,
			 const struct nvmefs_engine_opts *opts)
{
	struct nvmefs_engine_opts o = {0};
	struct nvmefs_engine *eng;
	unsigned i;
	int err = 0;

	if (opts)
		o = *opts;
	if (!o.queue_depth)
		o.queue_depth = DEFAULT_QD;
	if (!o.max_io)
		o.max_io = DEFAULT_MAX_IO;
	if (set->count > NVMEFS_MAX_DEVICES || o.queue_depth > MAX_QD) {
		nvmefs_err("engine: %u devices / queue depth %u out of range (max %u / %u)",
			   set->count, o.queue_depth, NVMEFS_MAX_DEVICES, MAX_QD);
		return -EINVAL;
	}
	for (i = 0; i < set->count; i++) {
		if (o.max_io % set->devs[i].block_size) {
			nvmefs_err("engine: block size %llu is not a multiple of %s's %u",
				   (unsigned long long)o.max_io, set->devs[i].path,
				   set->devs[i].block_size);
			return -EINVAL;
		}
	}
	eng = calloc(1, sizeof(*eng) + set->count * sizeof(eng->devs[0]));
	if (!eng)
		return -ENOMEM;
	eng->set = set;
	eng->qd = o.queue_depth;
	eng->max_io = o.max_io;
	for (i = 0; i < set->count && !err; i++)
		err = edev_init(eng, i);
	if (err) {
		for (unsigned j = 0; j < i; j++)
			edev_exit(&eng->devs[j]);
		free(eng);
		return err;
	}
	*out = eng;
	return 0;
}

void nvmefs_engine_destroy(struct nvmefs_engine *eng)
{
	const struct timespec ms = {0, 1000000};

	if (!eng)
		return;
	/* A callback on one device may submit to another: wait for quiet first. */
	while (atomic_load(&eng->outstanding))
		nanosleep(&ms, NULL);
	/* All reapers stop together: each destroys its own context. */
	for (unsigned i = 0; i < eng->set->count; i++)
		edev_stop(&eng->devs[i]);
	for (unsigned i = 0; i < eng->set->count; i++)
		edev_exit(&eng->devs[i]);
	free(eng);
}
