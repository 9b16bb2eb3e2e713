// SPDX-License-Identifier: MIT
/*
 * FUSE over io_uring (Linux 6.14+, FUSE 7.42): the kernel hands requests to
 * the daemon through io_uring commands on /dev/fuse instead of read(2), and
 * takes each reply with the fetch of the next request in one command.
 *
 * The protocol (the kernel's fs/fuse/dev_uring.c, include/uapi/linux/fuse.h;
 * libfuse 3.18 lib/fuse_uring.c is another implementation of it):
 *  - the INIT reply sets FUSE_OVER_IO_URING (flags2); the kernel honours it
 *    only with its module parameter enable_uring on. From then on every new
 *    request waits until each queue (one per possible CPU) has an entry
 *    registered, and a request goes to the queue of the CPU that issued it;
 *  - an entry is a header buffer (struct fuse_uring_req_header: the
 *    fuse_in_header, the opcode's own struct, then sizes) and a payload
 *    buffer (names, WRITE data: everything after the opcode's struct),
 *    registered with IORING_OP_URING_CMD FUSE_IO_URING_CMD_REGISTER on an
 *    SQE128 ring; its CQE comes when a request is in the buffers;
 *  - the reply goes back in the same buffers (fuse_out_header in the header,
 *    every reply argument in the payload) with COMMIT_AND_FETCH, which also
 *    waits for the entry's next request;
 *  - FORGET, INTERRUPT and notifications stay on /dev/fuse, so the request
 *    loop (loop.c; its copy in tests/fuse_null) goes on serving it beside
 *    the queues, gathering FORGETs instead of polling (nvmefs_uring_gather).
 *
 * Here the handlers stay libfuse's: a queue's leader copies the request's
 * headers into the page just before its payload (ours, outside what the
 * kernel was given), so that the request lies as read(2) would have laid
 * it out, and hands it to the loop's serve function (libfuse's
 * fuse_session_process_buf). A queue has several threads, one leading at
 * a time, as the /dev/fuse loop's workers do: a leader about to wait
 * hands the ring on (resign), so that one slow request holds up no other
 * of its CPU. A WRITE's data stays where the kernel put it, page-aligned:
 * the devices write straight from it (nvmefs_uring_payload); an aligned
 * READ of a handle without read-ahead is read straight into the payload it
 * is answered from. Its reply, from whichever thread makes it
 * (a READ's from an I/O completion), reaches devio.c's writev hook, which
 * gives it to nvmefs_uring_reply(): an answer to a ring request is copied
 * into its entry (nothing to copy when it is there already) and committed;
 * anything else goes to /dev/fuse.
 *
 * Where a queue's threads run. The kernel gives a queue the requests of
 * the CPUs its issuers run on, so a program's stream of requests (fio at
 * QD32) lands on one queue, whose thread, pinned to that CPU, then shares
 * it with the program while the other CPUs idle. A lone synchronous
 * caller is served best by the pinned thread (each request and reply stay
 * on one CPU); a stream, by a thread the scheduler may move elsewhere. So
 * each queue watches its requests (place_note): when at least a quarter
 * of a window's requests came while another of the queue's was still
 * being served, its threads may run on any CPU the daemon may; when fewer
 * did, they go back to the queue's CPU (the devices' home node's CPUs
 * only: spread_cpus), or, while idle CPUs are kept awake, away from it
 * ("Polling from another CPU" below). The rings are made with IORING_SETUP_COOP_TASKRUN:
 * the kernel's task work (a request copied into an entry, a device
 * block's completion) runs when the thread that submitted the command
 * next enters the kernel, instead of interrupting it with an IPI. That
 * thread is the leader, which enters the kernel to wait, or one that
 * resigned to serve a request that may wait: asleep in a lock or a
 * condition (interruptible) it is woken to run it, as it was without the
 * flag; running its handler, it runs it at its next system call or tick;
 * in an uninterruptible wait (a device flush), after it, as it did
 * without the flag too (docs/PERFORMANCE.md, "Where a queue runs").
 *
 * Where the caller wakes. A commit wakes its caller while the leader still
 * runs on the caller's CPU, on its way to wait; the scheduler then puts
 * the caller on another, idle CPU (select_idle_sibling), whose queue takes
 * its next request: a lone synchronous caller crossed CPUs twice a round
 * trip, each time into an idle CPU. A CPU that runs only SCHED_IDLE tasks
 * counts as idle there (sched_idle_cpu), so a leader that waits as
 * SCHED_IDLE keeps the caller on its CPU, and the caller runs at once.
 * Only with nothing in flight (no request of the queue being served, no
 * device block on its ring, at most one command to submit): then what
 * wakes it is a new request, whose sender, a synchronous caller, leaves
 * the CPU to it (or the stop, or the unmount's ends of the entries). A
 * device completion or a hand-over waking a SCHED_IDLE leader while
 * another task runs on its CPU would wait for that task's slice to end
 * (an open with a read on the ring took 4 ms, not 0.1, with two busy
 * loops on the CPU); a second commit in the same submission would wait
 * behind the first one's caller. And only while some CPU is idle
 * (idle_gate: fewer threads runnable than CPUs): when none is, the caller
 * has nowhere to be moved, and the two policy changes (a system call
 * each, about 2 us on this VM) buy nothing (unlinks, whose FORGETs keep a
 * /dev/fuse worker busy on the other CPU, took 8 us longer). A task that
 * computes on the caller's CPU while others idle, of the daemon's own
 * scheduling group (no autogroup or cgroup between them), keeps even a
 * new request's leader waiting at idle weight (2.7 ms a lookup against
 * 20 us): so each thread watches its run delay (idle_probe) and stops its
 * idle waits for a while (1 s, doubled up to 32 s while it recurs) when
 * it waited to run more than 200 us a wait. The leader goes back to
 * SCHED_OTHER as soon as it wakes. -o uring_idle_wait=0 turns it off;
 * docs/PERFORMANCE.md, "Where the caller wakes".
 *
 * Polling from another CPU. While the daemon keeps idle CPUs awake (-o
 * cpu_latency=0: cpulat.c), a wake-up costs little, and the /dev/fuse
 * leader, polling /dev/fuse from the CPU the caller is not on, answers a
 * lone caller's small requests faster than a queue whose thread the
 * caller's CPU must switch to and back (a create, a stat). So a queue
 * whose window (place_note) had no stream and few device reads on its
 * ring (fewer than one request in PLACE_SHARE: lookups, stats, creates
 * whose writes are answered early) is led "away": its threads run on
 * any CPU but the queue's, and a leader about to wait submits, then
 * polls its ring for up to u->poll_ns (-o spin; adapted as the /dev/fuse
 * leader's window is, nvmefs/spin.h) before it sleeps. Each poll is an
 * io_uring_get_events: a request's arrival is task work (its copy into
 * an entry) that runs only when the thread enters the kernel, as the
 * /dev/fuse leader's poll(2) does. (IORING_SETUP_TASKRUN_FLAG would say
 * when to enter, but it also makes liburing's every peek of the ring
 * enter the kernel, at home and spread too; measured alike.) A queue
 * whose requests read the devices, or move data (PLACE_AWAY_BYTES a
 * window or more), goes home at once, where the copies (the
 * device's, the reply's, a WRITE's into its entry) run on the caller's
 * CPU (dd's 1 MiB reads: 6.2 GB/s at home, 5.3 away; its writes 0.63 x
 * `/dev/fuse` away); docs/PERFORMANCE.md, "Polling from another CPU".
 * Never when the daemon does not keep idle CPUs awake (cpu_latency off
 * or above 0, or not allowed) or with -o spin=0: a wake-up into a halted
 * CPU is what staying home avoids. Whether the caller's CPU is free is
 * judged per queue, as the /dev/fuse leader's polling does not judge it
 * at all: with a lone caller on every CPU, each queue's leader polls on
 * another caller's CPU for up to its window. And a queue stays away
 * through a quiet spell in which the CPU latency request was given back:
 * the spell's first request then wakes a halted CPU.
 *
 * Negotiation cannot hang the mount: the rings and buffers are made before
 * the INIT reply (nvmefs_uring_prepare), and only then is the flag set. A
 * queue whose registration the kernel refuses after INIT would leave every
 * request waiting: the failure stops the daemon, and the kernel then fails
 * the mount's requests with ENOTCONN.
 */
#define FUSE_USE_VERSION 314
#include <fuse_lowlevel.h>
#include <linux/fuse.h>

#include "uring_i.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "nvmefs/bufpool.h"
#include "nvmefs/spin.h"
#include "nvmefs/util.h"

/* The one session's queues (replies find them from any thread); NULL
 * before the INIT reply and once stopped. */
static pthread_rwlock_t active_lock = PTHREAD_RWLOCK_INITIALIZER;
static struct nvmefs_uring *active;
static __thread struct queue *cur_queue; /* a queue thread's own */
static __thread bool leading;		 /* this queue thread leads */
static __thread struct ent *cur_ent;	 /* the request its handler serves */
/* Where a queue's thread runs (place): on the queue's CPU, on any CPU
 * the daemon may, or on any of those but the queue's. */
enum { PLACE_HOME, PLACE_SPREAD, PLACE_AWAY };
static __thread int placed = -1;	     /* a PLACE_*: where it runs now (place) */
static __thread struct nvmefs_spin poll_win; /* its poll window, away */

static void queue_fail(struct queue *q, const char *what, int err);

/* An SQE of q's ring (its leader), zeroed; a full ring is submitted first
 * (device blocks can fill it). NULL only when that submit failed. */
static struct io_uring_sqe *get_sqe(struct queue *q)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(&q->ring);

	if (!sqe) {
		io_uring_submit(&q->ring);
		sqe = io_uring_get_sqe(&q->ring);
	}
	if (sqe)
		memset(sqe, 0, 128);
	return sqe;
}

/* A device block's CQE: its user data is the engine's token, tagged. */
#define RING_IO_TAG ((uintptr_t)1)

/* nvmefs_engine_ring's queue(): a block of a request served by q's leader,
 * submitted with the leader's next wait. */
static int ring_block(void *arg, int fd, bool write, const struct iovec *iov, unsigned iovcnt,
		      uint64_t off, void *token)
{
	struct queue *q = arg;
	struct io_uring_sqe *sqe;

	if (cur_queue != q || !leading)
		return -EAGAIN; /* resigned: the I/O threads complete it */
	if (!(sqe = get_sqe(q)))
		return -EBUSY;
	/* A queue that reads the devices goes home at once, not at the
	 * window's end (place_note): a stream of 1 MiB READs is 4 device
	 * reads a request. */
	if (!write && atomic_fetch_add_explicit(&q->win_reads, 1, memory_order_relaxed) + 1 ==
			      PLACE_WINDOW / PLACE_SHARE)
		atomic_store_explicit(&q->away, false, memory_order_relaxed);
	if (iovcnt == 1 && write)
		io_uring_prep_write(sqe, fd, iov[0].iov_base, (unsigned)iov[0].iov_len, off);
	else if (iovcnt == 1)
		io_uring_prep_read(sqe, fd, iov[0].iov_base, (unsigned)iov[0].iov_len, off);
	else if (write)
		io_uring_prep_writev(sqe, fd, iov, iovcnt, off);
	else
		io_uring_prep_readv(sqe, fd, iov, iovcnt, off);
	io_uring_sqe_set_data(sqe, (void *)((uintptr_t)token | RING_IO_TAG));
	atomic_fetch_add(&q->ring_io, 1);
	return 0;
}

/* Queue e's command (q's leader): REGISTER, or COMMIT_AND_FETCH.
 * Submitted when the thread next waits. */
static int queue_cmd(struct ent *e, uint32_t op)
{
	struct queue *q = e->q;
	struct io_uring_sqe *sqe = get_sqe(q);
	struct uring_cmd_req *req;

	if (!sqe)
		return -EBUSY;
	sqe->opcode = IORING_OP_URING_CMD;
	sqe->fd = q->u->fd;
	sqe->cmd_op = op;
	sqe->addr = (uint64_t)(uintptr_t)e->iov;
	sqe->len = 2;
	io_uring_sqe_set_data(sqe, e);
	req = (struct uring_cmd_req *)sqe->cmd;
	req->qid = (uint16_t)q->qid;
	req->commit_id = op == URING_CMD_COMMIT_AND_FETCH ? e->commit_id : 0;
	return 0;
}

/* Keep a read on q's eventfd: its completion is a wake-up (user data q). */
static int arm_wake(struct queue *q)
{
	struct io_uring_sqe *sqe = get_sqe(q);

	if (!sqe)
		return -EBUSY;
	io_uring_prep_read(sqe, q->efd, &q->efd_val, sizeof(q->efd_val), 0);
	io_uring_sqe_set_data(sqe, q);
	return 0;
}

/* Hand e (NULL: nothing) to q's thread and wake it, to look at its
 * handoff list and its stop flag. One eventfd write until it looks. */
static void hand_over(struct queue *q, struct ent *e)
{
	bool write_it;

	pthread_mutex_lock(&q->lock);
	if (e) {
		e->next = q->handoff;
		q->handoff = e;
	}
	write_it = !q->woken;
	q->woken = true;
	pthread_mutex_unlock(&q->lock);
	if (write_it)
		(void)eventfd_write(q->efd, 1);
}

/* Commit e's reply: at once on its queue's leader, else handed over. */
static void commit(struct ent *e)
{
	struct queue *q = e->q;

	if (cur_queue != q || !leading) {
		hand_over(q, e);
		return;
	}
	if (queue_cmd(e, URING_CMD_COMMIT_AND_FETCH))
		queue_fail(q, "queueing a reply", -EBUSY);
}

/* The leader, woken: commit what was handed over, read on. */
static void take_handoff(struct queue *q)
{
	struct ent *e;

	pthread_mutex_lock(&q->lock);
	e = q->handoff;
	q->handoff = NULL;
	q->woken = false;
	pthread_mutex_unlock(&q->lock);
	for (; e; e = e->next)
		if (queue_cmd(e, URING_CMD_COMMIT_AND_FETCH))
			queue_fail(q, "queueing a reply", -EBUSY);
	if (arm_wake(q))
		queue_fail(q, "waiting for replies", -EBUSY);
}

/* The entry serving request unique, or NULL (a request of /dev/fuse). */
static struct ent *find_ent(struct nvmefs_uring *u, uint64_t unique)
{
	struct queue *q = cur_queue;

	/* A metadata reply comes from the handler serving it. */
	if (cur_ent && cur_ent->q->u == u &&
	    atomic_load_explicit(&cur_ent->unique, memory_order_acquire) == unique)
		return cur_ent;
	/* Most others from a thread of the queue that took the request. */
	if (q && q->u == u) {
		for (unsigned i = 0; i < u->depth; i++)
			if (atomic_load_explicit(&q->ents[i].unique, memory_order_acquire) ==
			    unique)
				return &q->ents[i];
	}
	for (unsigned k = 0; k < u->nq; k++) {
		q = &u->q[k];
		for (unsigned i = 0; i < u->depth; i++)
			if (atomic_load_explicit(&q->ents[i].unique, memory_order_acquire) ==
			    unique)
				return &q->ents[i];
	}
	return NULL;
}

bool nvmefs_uring_reply(const struct iovec *iov, int count, ssize_t *res)
{
	const struct fuse_out_header *out = iov[0].iov_base;
	struct nvmefs_uring *u;
	struct queue *q;
	struct ent *e;
	size_t len = 0;

	if (iov[0].iov_len < sizeof(*out) || !out->unique)
		return false; /* a notification: /dev/fuse's */
	pthread_rwlock_rdlock(&active_lock);
	u = active;
	e = u ? find_ent(u, out->unique) : NULL;
	if (!e) {
		pthread_rwlock_unlock(&active_lock);
		return false;
	}
	q = e->q;
	for (int i = 1; i < count; i++)
		len += iov[i].iov_len;
	if (len > PAYLOAD_SZ) {
		/* Never: the kernel sized the buffer for its largest reply. */
		nvmefs_err("FUSE over io_uring: a reply of %zu bytes to request %llu does not fit",
			   len, (unsigned long long)out->unique);
		struct fuse_out_header err = {
			.len = sizeof(err), .error = -EIO, .unique = out->unique};

		memcpy(e->hdr->in_out, &err, sizeof(err));
		len = 0;
	} else {
		char *p = e->payload;

		memcpy(e->hdr->in_out, out, sizeof(*out));
		for (int i = 1; i < count; i++) {
			if (iov[i].iov_base != p) /* a READ laid out in place needs none */
				memmove(p, iov[i].iov_base, iov[i].iov_len);
			p += iov[i].iov_len;
		}
	}
	e->hdr->ent.payload_sz = (uint32_t)len;
	atomic_store_explicit(&e->unique, 0, memory_order_release);
	/* Counted off only once committed or handed over: a leader that saw
	 * nothing being served in between would wait as SCHED_IDLE for the
	 * hand-over's wake-up ("Where the caller wakes"). */
	commit(e);
	atomic_fetch_sub_explicit(&q->serving, 1, memory_order_relaxed);
	pthread_rwlock_unlock(&active_lock);
	*res = (ssize_t)(sizeof(*out) + len);
	return true;
}

void *nvmefs_uring_payload(size_t *cap)
{
	if (!cur_ent)
		return NULL;
	*cap = PAYLOAD_SZ;
	return cur_ent->payload;
}

/* ---- Leading: one thread of a queue at a time waits on its ring ---- */

static void *follower_main(void *arg);

/* Wait until the calling thread leads q: false when q is done. */
static bool lead(struct queue *q)
{
	pthread_mutex_lock(&q->lock);
	while (q->led && !q->done && !atomic_load(&q->u->stopping)) {
		q->idle++;
		pthread_cond_wait(&q->follow, &q->lock);
		q->idle--;
	}
	if (!q->done && !atomic_load(&q->u->stopping))
		leading = q->led = true;
	pthread_mutex_unlock(&q->lock);
	return leading;
}

/*
 * The leader of q, about to wait for another thread or to serve a request
 * that may: an idle thread of q leads on, or a new one. With every thread
 * busy (depth + 1: each entry's handler and one more), none is needed: no
 * request can come before a handler finishes, and that thread leads on.
 */
static void resign(struct queue *q)
{
	if (!leading)
		return;
	leading = false;
	pthread_mutex_lock(&q->lock);
	q->led = false;
	if (q->idle)
		pthread_cond_signal(&q->follow);
	else if (!q->done && q->nthreads < q->u->depth + 1 &&
		 !pthread_create(&q->tids[q->nthreads], NULL, follower_main, q))
		q->nthreads++;
	pthread_mutex_unlock(&q->lock);
}

/* nvmefs_wait_hook of the queue threads (a range lock, a buffer). */
static void before_wait(void)
{
	if (cur_queue)
		resign(cur_queue);
}

/* q serves no more: its leader says so, and the idle threads leave. */
static void finish(struct queue *q)
{
	leading = false;
	pthread_mutex_lock(&q->lock);
	q->led = false;
	q->done = true;
	pthread_cond_broadcast(&q->follow);
	pthread_mutex_unlock(&q->lock);
}

/* A request came to q, while another of q's was being served (busy) or
 * not, moving bytes of data (a READ's size, a WRITE's): at the end of
 * each window, where q's threads should run (the top). A window's data
 * past PLACE_AWAY_BYTES brings the queue home at once (dd's 1 MiB
 * writes: the kernel's copy into the entry and the device's copy run on
 * the leader's CPU, faster on the caller's). */
static void place_note(struct queue *q, bool busy, uint64_t bytes)
{
	unsigned n = atomic_fetch_add_explicit(&q->win_n, 1, memory_order_relaxed) + 1;
	uint64_t d = atomic_fetch_add_explicit(&q->win_bytes, bytes, memory_order_relaxed) + bytes;
	unsigned b, r;
	bool many;

	if (busy)
		atomic_fetch_add_explicit(&q->win_busy, 1, memory_order_relaxed);
	if (d >= PLACE_AWAY_BYTES && d - bytes < PLACE_AWAY_BYTES)
		atomic_store_explicit(&q->away, false, memory_order_relaxed);
	if (n != PLACE_WINDOW)
		return;
	many = CPU_COUNT(&q->u->anywhere) > 1; /* at a window's end, not each request */
	b = atomic_exchange_explicit(&q->win_busy, 0, memory_order_relaxed);
	r = atomic_exchange_explicit(&q->win_reads, 0, memory_order_relaxed);
	d = atomic_exchange_explicit(&q->win_bytes, 0, memory_order_relaxed);
	atomic_store_explicit(&q->win_n, 0, memory_order_relaxed);
	busy = b * PLACE_SHARE >= PLACE_WINDOW && many;
	atomic_store_explicit(&q->spread, busy, memory_order_relaxed);
	atomic_store_explicit(&q->away,
			      !busy && many && q->u->poll_ns && r * PLACE_SHARE < PLACE_WINDOW &&
				      d < PLACE_AWAY_BYTES,
			      memory_order_relaxed);
}

/* The data e's request moves: a READ's size, a WRITE's payload. */
static uint64_t data_bytes(const struct ent *e)
{
	const struct fuse_in_header *in = (const void *)e->hdr->in_out;
	struct fuse_read_in rd;

	if (in->opcode == FUSE_WRITE)
		return e->hdr->ent.payload_sz;
	if (in->opcode != FUSE_READ)
		return 0;
	memcpy(&rd, e->hdr->op_in, sizeof(rd)); /* op_in is bytes */
	return rd.size;
}

/* Run the calling thread of q where q's requests say (place_note): on
 * the queue's CPU, on any, or on any but the queue's. */
static void place(struct queue *q)
{
	int want = atomic_load_explicit(&q->spread, memory_order_relaxed) ? PLACE_SPREAD
		   : atomic_load_explicit(&q->away, memory_order_relaxed) ? PLACE_AWAY
									  : PLACE_HOME;
	cpu_set_t set;

	if (want == placed)
		return;
	placed = want;
	if (want == PLACE_HOME) {
		CPU_ZERO(&set);
		CPU_SET(q->qid, &set);
	} else {
		set = q->u->anywhere;
		if (want == PLACE_AWAY)
			CPU_CLR(q->qid, &set); /* place_note: anywhere has two or more */
	}
	if (CPU_COUNT(&set))
		(void)pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
}

/* Submit what q's leader queued, then poll its ring for a CQE for up to
 * the thread's window (PLACE_AWAY: "Polling from another CPU" at the
 * top). 1 when a CQE came while polling (counted in q->polled), 0 when
 * none did (the caller then waits), or the submission's error. */
static int poll_ring(struct queue *q)
{
	uint64_t t0 = nvmefs_now_ns(), end = t0 + poll_win.ns;
	int ret = io_uring_submit(&q->ring);

	if (ret < 0)
		return ret;
	while (!io_uring_cq_ready(&q->ring)) {
		(void)io_uring_get_events(&q->ring); /* runs the task work that brings it */
		if (nvmefs_now_ns() >= end)
			break;
	}
	if (io_uring_cq_ready(&q->ring)) {
		atomic_fetch_add_explicit(&q->polled, 1, memory_order_relaxed);
		return 1;
	}
	return 0;
}

/*
 * Lay e's request out as /dev/fuse would have delivered it, its headers
 * just before its payload, and serve it. False when the request is not one
 * the protocol can send.
 */
static bool serve(struct queue *q, struct ent *e)
{
	struct nvmefs_uring *u = q->u;
	const struct fuse_in_header *in = (const void *)e->hdr->in_out;
	uint32_t psz = e->hdr->ent.payload_sz;
	size_t head, op_len;
	char *start;

	if (in->len < sizeof(*in) + psz || psz > PAYLOAD_SZ ||
	    (op_len = in->len - sizeof(*in) - psz) > URING_OP_IN_OUT_SZ)
		return false;
	head = sizeof(*in) + op_len;
	start = e->payload - head;
	memcpy(start, in, sizeof(*in));
	memcpy(start + sizeof(*in), e->hdr->op_in, op_len);
	e->commit_id = e->hdr->ent.commit_id;
	atomic_store_explicit(&e->unique, in->unique, memory_order_release);
	atomic_fetch_add_explicit(&u->served, 1, memory_order_relaxed);
	if (!nvmefs_serve_inline((const struct fuse_in_header *)start, in->len))
		resign(q);
	cur_ent = e;
	u->serve(u->se, u->vol, start, in->len);
	cur_ent = NULL;
	return true;
}

static void queue_fail(struct queue *q, const char *what, int err)
{
	struct nvmefs_uring *u = q->u;

	if (atomic_exchange(&u->stopping, true))
		return;
	nvmefs_err("FUSE over io_uring: queue %u: %s: %s; stopping the mount", q->qid, what,
		   strerror(-err));
	u->fail(u->fail_arg, err);
}

/* What a CQE of q brought: a request in an entry, an entry ended, or a
 * wake-up. False when the queue is done. */
static bool on_cqe(struct queue *q, void *data, int res)
{
	struct nvmefs_uring *u = q->u;
	struct ent *e = data;

	if ((uintptr_t)data & RING_IO_TAG) {
		atomic_fetch_sub(&q->ring_io, 1);
		nvmefs_engine_ring_done((void *)((uintptr_t)data & ~RING_IO_TAG), res);
		return q->live > 0 || atomic_load(&q->ring_io);
	}
	if (data == q) {
		take_handoff(q);
		return !atomic_load(&u->stopping);
	}
	if (res < 0) {
		/* -ENOTCONN, -ECONNABORTED, -ENODEV: unmounted or aborted. */
		q->live--;
		if (res != -ENOTCONN && res != -ECONNABORTED && res != -ENODEV)
			queue_fail(q, "the kernel refused an entry", res);
		return q->live > 0 || atomic_load(&q->ring_io);
	}
	/* Counted before it is served: every request has one reply, through
	 * nvmefs_uring_reply, which takes it off (the malformed one too). */
	place_note(q, atomic_fetch_add_explicit(&q->serving, 1, memory_order_relaxed) > 0,
		   data_bytes(e));
	if (!serve(q, e)) {
		const struct fuse_in_header *in = (const void *)e->hdr->in_out;
		struct fuse_out_header err = {
			.len = sizeof(err), .error = -EIO, .unique = in->unique};
		struct iovec iov = {&err, sizeof(err)};
		ssize_t r;

		nvmefs_err("FUSE over io_uring: a malformed request (opcode %u, %u bytes)",
			   in->opcode, in->len);
		e->commit_id = e->hdr->ent.commit_id;
		atomic_store(&e->unique, in->unique);
		nvmefs_uring_reply(&iov, 1, &r);
	}
	return true;
}

/* How often a thread asks /proc/loadavg whether a CPU is idle. */
#define IDLE_GATE_NS (50u * 1000 * 1000)

/* A small /proc file's text at fd, NUL-terminated in buf: false when
 * unreadable. */
static bool read_proc(int fd, char *buf, size_t cap)
{
	ssize_t n = pread(fd, buf, cap - 1, 0);

	if (n <= 0)
		return false;
	buf[n] = '\0';
	return true;
}

/* Whether a leader may wait as SCHED_IDLE: only while fewer threads are
 * runnable than there are CPUs online (the fourth field of /proc/loadavg,
 * "runnable/total", counts the calling thread too), so that a CPU is idle
 * for the scheduler to move the caller to. Read once per IDLE_GATE_NS a
 * thread. */
static bool idle_gate(const struct nvmefs_uring *u, uint64_t now)
{
	static __thread uint64_t next_ns;
	static __thread bool open_;
	char buf[128];
	unsigned running;

	if (u->idle_test & IDLE_TEST_NO_LOAD)
		return true;
	if (now < next_ns)
		return open_;
	next_ns = now + IDLE_GATE_NS;
	open_ = read_proc(u->loadavg_fd, buf, sizeof(buf)) &&
		sscanf(buf, "%*s %*s %*s %u/", &running) == 1 && running < u->ncpus;
	return open_;
}

/* A thread that could not leave SCHED_IDLE, trying again at each wait. */
static __thread bool stuck_idle;

/*
 * Idle waits a thread makes before it looks at how long it waited to run,
 * the mean wait above which it stops (a new request found a thread of
 * its caller's group computing on the CPU: 2.7 ms a lookup, measured),
 * and for how long: 1 s, doubled each time the next try fails too, up to
 * 32 s. A lone caller's own turn (it runs between its requests while the
 * leader waits to sleep) is a few microseconds.
 */
#define IDLE_PROBE	  8u
#define IDLE_DELAY_MAX_NS (200u * 1000)
#define IDLE_BACKOFF_NS	  (1000ull * 1000 * 1000)
#define IDLE_BACKOFF_MAX  (32 * IDLE_BACKOFF_NS)

/* Idle waits less than this apart are one run, measured together. */
#define IDLE_RUN_GAP_NS (10u * 1000 * 1000)

static __thread uint64_t last_idle_ns; /* when its last idle wait ended (0: none) */
static __thread unsigned probe_n;      /* idle waits of the run since probe_delay */
static __thread uint64_t probe_delay;  /* run_delay then, ns */
static __thread uint64_t backoff_until, backoff_ns;

/* The calling thread's time spent runnable but not running (ns), from
 * schedstat's second field; false when unreadable. Opened each time (once
 * every IDLE_PROBE idle waits, or at a run's start): a descriptor kept
 * per thread would add to the daemon's as its threads come and go. */
static bool run_delay(uint64_t *ns)
{
	char buf[96];
	unsigned long long d;
	int fd = open("/proc/thread-self/schedstat", O_RDONLY | O_CLOEXEC);
	bool ok = fd >= 0 && read_proc(fd, buf, sizeof(buf)) && sscanf(buf, "%*u %llu", &d) == 1;

	if (fd >= 0)
		close(fd);
	if (ok)
		*ns = d;
	return ok;
}

/* Whether the calling thread's idle waits are allowed now: not backing
 * off, and (the first of a run of them) its run delay read, from which
 * the run's waits are measured. A run is idle waits less than
 * IDLE_RUN_GAP_NS apart: what the thread did in a longer gap (serving a
 * stream under load, say) is not counted against them. */
static bool idle_allowed(const struct nvmefs_uring *u, uint64_t now)
{
	if (u->idle_test & IDLE_TEST_NO_DELAY)
		return true;
	if (backoff_until) {
		if (now < backoff_until)
			return false;
		backoff_until = 0;
		last_idle_ns = 0;
	}
	if (last_idle_ns && now - last_idle_ns < IDLE_RUN_GAP_NS)
		return true;
	probe_n = 0;
	return run_delay(&probe_delay);
}

/* After an idle wait of q that ended at now: every IDLE_PROBE, stop for a
 * while if the thread waited too long to run. */
static void idle_probe(struct queue *q, uint64_t now)
{
	uint64_t d;

	if ((q->u->idle_test & IDLE_TEST_NO_DELAY) || ++probe_n < IDLE_PROBE)
		return;
	probe_n = 0;
	if (!run_delay(&d))
		return;
	if (d - probe_delay > (uint64_t)IDLE_PROBE * IDLE_DELAY_MAX_NS) {
		backoff_ns = backoff_ns ? backoff_ns * 2 : IDLE_BACKOFF_NS;
		if (backoff_ns > IDLE_BACKOFF_MAX)
			backoff_ns = IDLE_BACKOFF_MAX;
		backoff_until = now + backoff_ns;
		atomic_fetch_add_explicit(&q->idle_backoffs, 1, memory_order_relaxed);
	} else {
		backoff_ns = 0;
	}
	probe_delay = d;
}

/* Set the calling thread's policy for its wait; false when that failed.
 * Leaving SCHED_IDLE was tried when the queues were made
 * (idle_policy_permitted), but a lowered RLIMIT_NICE or a lost
 * CAP_SYS_NICE can refuse it later: then no leader goes idle again, and
 * this one tries to leave at each wait until it can. */
static bool wait_policy(struct nvmefs_uring *u, int policy)
{
	struct sched_param sp = {0};
	bool ok = !sched_setscheduler(0, policy, &sp);

	if (policy == SCHED_OTHER) {
		if (!ok && atomic_exchange(&u->idle_wait, false))
			nvmefs_warn("FUSE over io_uring: a queue thread cannot leave SCHED_IDLE "
				    "(%s); no queue waits as SCHED_IDLE from now on",
				    strerror(errno));
		stuck_idle = !ok;
	}
	return ok;
}

/* Lead q: wait on its ring and serve what it brings, until the calling
 * thread resigns (true) or the queue is done (false). */
static bool lead_ring(struct queue *q)
{
	struct nvmefs_uring *u = q->u;

	last_idle_ns = 0; /* a new lead: a new run of idle waits */
	while (leading) {
		struct io_uring_cqe *cqe;
		bool idle;
		int ret;

		/* Stopping, its blocks in flight still complete here. */
		if (atomic_load(&u->stopping) && !atomic_load(&q->ring_io))
			return false;
		place(q);
		/* The commits queued since, then wait for the next CQE: as
		 * SCHED_IDLE when nothing is in flight ("Where the caller
		 * wakes", at the top). */
		if (stuck_idle)
			(void)wait_policy(u, SCHED_OTHER);
		idle = placed != PLACE_AWAY &&
		       atomic_load_explicit(&u->idle_wait, memory_order_relaxed) &&
		       !atomic_load(&q->serving) && !atomic_load(&q->ring_io) &&
		       io_uring_sq_ready(&q->ring) <= 1;
		if (idle) { /* one clock reading for both checks */
			uint64_t now = nvmefs_now_ns();

			idle = idle_gate(u, now) && idle_allowed(u, now) &&
			       wait_policy(u, SCHED_IDLE);
		}
		if (idle)
			atomic_fetch_add_explicit(&q->idle_waits, 1, memory_order_relaxed);
		if (placed == PLACE_AWAY) {
			uint64_t t0 = nvmefs_now_ns();

			ret = poll_win.ns ? poll_ring(q) : 0;
			if (!ret) { /* nothing came while polling: sleep */
				ret = io_uring_submit_and_wait(&q->ring, 1);
				if (ret >= 0)
					nvmefs_spin_adapt(&poll_win, nvmefs_now_ns() - t0);
			}
		} else {
			ret = io_uring_submit_and_wait(&q->ring, 1);
		}
		if (idle) {
			(void)wait_policy(u, SCHED_OTHER);
			last_idle_ns = nvmefs_now_ns();
			idle_probe(q, last_idle_ns);
		}
		if (ret == -EINTR)
			continue;
		if (ret < 0) {
			queue_fail(q, "waiting for a request", ret);
			return false;
		}
		/* Each CQE is consumed before it is served: a thread that leads
		 * on from inside a handler starts at the next. */
		while (leading && !io_uring_peek_cqe(&q->ring, &cqe)) {
			void *data = io_uring_cqe_get_data(cqe);
			int res = cqe->res;

			io_uring_cqe_seen(&q->ring, cqe);
			if (!on_cqe(q, data, res))
				return false;
		}
	}
	return true;
}

/* The calling thread becomes one of q's, on its CPU. */
static void enter(struct queue *q)
{
	cur_queue = q;
	nvmefs_wait_hook = before_wait;
	nvmefs_engine_ring = &q->hook;
	/* Each queue serves its CPU's requests: run there, anywhere while
	 * they come in a stream, or away from it (place). */
	placed = -1;
	nvmefs_spin_init(&poll_win, q->u->poll_ns);
	place(q);
	/* Its idle waits ("Where the caller wakes"): a follower made by a
	 * leader that could not leave SCHED_IDLE starts in it, and leaves it
	 * at its first wait. */
	stuck_idle = sched_getscheduler(0) == SCHED_IDLE;
}

/* A thread of q: leads by turns until q is done, then leaves it. */
static void serve_queue(struct queue *q)
{
	while (leading || lead(q)) {
		if (!lead_ring(q)) {
			finish(q);
			break;
		}
	}
	nvmefs_wait_hook = NULL;
	nvmefs_engine_ring = NULL;
	cur_queue = NULL;
}

/* The first thread of q: registers its entries, then serves. */
static void *queue_main(void *arg)
{
	struct queue *q = arg;
	struct nvmefs_uring *u = q->u;
	int ret = 0;

	enter(q);
	if (!lead(q)) {
		serve_queue(q); /* stopped before it began: leaves */
		return NULL;
	}
	for (unsigned i = 0; i < u->depth && !ret; i++)
		ret = queue_cmd(&q->ents[i], URING_CMD_REGISTER);
	if (!ret)
		ret = arm_wake(q);
	if (ret) {
		queue_fail(q, "registering its entries", ret);
		finish(q);
	} else {
		q->live = u->depth;
	}
	serve_queue(q);
	return NULL;
}

/* A later thread of q, made when its leader resigned with none idle. */
static void *follower_main(void *arg)
{
	struct queue *q = arg;
	char name[16];

	snprintf(name, sizeof(name), "nvmefs-q%u", q->qid % 1000);
	pthread_setname_np(pthread_self(), name);
	enter(q);
	serve_queue(q);
	return NULL;
}

int nvmefs_uring_start(struct nvmefs_uring *u, void (*fail)(void *arg, int err), void *arg)
{
	pthread_attr_t attr;
	int ret = 0;

	u->fail = fail;
	u->fail_arg = arg;
	pthread_rwlock_wrlock(&active_lock);
	active = u;
	pthread_rwlock_unlock(&active_lock);
	pthread_attr_init(&attr);
	for (unsigned i = 0; i < u->nq; i++) {
		char name[16];

		struct queue *q = &u->q[i];

		q->hook = (struct nvmefs_engine_ring){.queue = ring_block, .arg = q};
		pthread_mutex_lock(&q->lock);
		ret = -pthread_create(&q->tids[0], &attr, queue_main, q);
		if (!ret)
			q->nthreads = 1;
		pthread_mutex_unlock(&q->lock);
		if (ret) {
			queue_fail(q, "starting its thread", ret);
			break;
		}
		snprintf(name, sizeof(name), "nvmefs-q%u", i % 1000);
		pthread_setname_np(q->tids[0], name);
	}
	pthread_attr_destroy(&attr);
	return ret;
}

/* Join q's threads by until: true when every one has left. */
static bool join_threads(struct queue *q, const struct timespec *until)
{
	for (;;) {
		unsigned n;

		pthread_mutex_lock(&q->lock);
		n = q->nthreads;
		pthread_mutex_unlock(&q->lock);
		if (q->joined == n)
			return true;
		if (pthread_timedjoin_np(q->tids[q->joined], NULL, until))
			return false;
		q->joined++;
	}
}

void nvmefs_uring_stop(struct nvmefs_uring *u)
{
	struct timespec until;

	if (!u)
		return;
	/* At an unmount the kernel ends every entry (-ENOTCONN) and each
	 * queue's threads leave by themselves, the kernel holding none of our
	 * buffers: wait a moment for that before waking them. */
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += 2;
	for (unsigned i = 0; i < u->nq; i++)
		(void)join_threads(&u->q[i], &until);
	atomic_store(&u->stopping, true);
	for (unsigned i = 0; i < u->nq; i++) {
		struct queue *q = &u->q[i];

		hand_over(q, NULL); /* the leader, waiting on its ring */
		pthread_mutex_lock(&q->lock);
		pthread_cond_broadcast(&q->follow); /* the idle ones */
		pthread_mutex_unlock(&q->lock);
		/* A thread held up in a handler (a buffer, a lock) must not keep
		 * the daemon from its last flush: say so and leave it. */
		clock_gettime(CLOCK_REALTIME, &until);
		until.tv_sec += 5;
		if (!join_threads(q, &until))
			nvmefs_warn("FUSE over io_uring: a thread of queue %u does not stop; "
				    "leaving it",
				    q->qid); /* nothing of the queue is freed */
	}
	/* Replies from here on (I/O completions still draining) find no
	 * entry and go to /dev/fuse, which has ended too. */
	pthread_rwlock_wrlock(&active_lock);
	if (active == u)
		active = NULL;
	pthread_rwlock_unlock(&active_lock);
}

bool nvmefs_uring_idle(const struct nvmefs_uring *u)
{
	for (unsigned i = 0; u && i < u->nq; i++) {
		struct queue *q = (struct queue *)&u->q[i]; /* its lock */
		bool busy;

		pthread_mutex_lock(&q->lock);
		/* live only once every thread has left: the leader changes it unlocked. */
		busy = q->joined < q->nthreads || q->live;
		pthread_mutex_unlock(&q->lock);
		if (busy)
			return false;
	}
	return true;
}
