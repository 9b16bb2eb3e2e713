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
 *    loop (loop.c) goes on serving it beside the queues.
 *
 * Here the handlers stay libfuse's: a queue thread lays a request out in a
 * pool buffer as read(2) would have (the payload at NVMEFS_DATA_OFF, so a
 * WRITE's data is page-aligned for O_DIRECT as before) and hands it to
 * fuse_session_process_buf(). Its reply, from whichever thread makes it
 * (a READ's from an I/O completion), reaches loop.c's writev hook, which
 * gives it to nvmefs_uring_reply(): an answer to a ring request is copied
 * into its entry and committed; anything else goes to /dev/fuse.
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

#include "door_i.h"

#include <errno.h>
#include <liburing.h>
#include <numa.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "nvmefs/bufpool.h"
#include "nvmefs/util.h"

/*
 * The protocol's structures and constants (FUSE 7.42), which Debian 12's
 * <linux/fuse.h> (Linux 6.1) predates; the same layout as the kernel's uapi.
 */
#define FUSE_OVER_IO_URING_FLAG	   (1ULL << 41)
#define URING_IN_OUT_HEADER_SZ	   128
#define URING_OP_IN_OUT_SZ	   128
#define URING_CMD_REGISTER	   1
#define URING_CMD_COMMIT_AND_FETCH 2

struct uring_ent_in_out {
	uint64_t flags;
	uint64_t commit_id;  /* to echo in the commit */
	uint32_t payload_sz; /* bytes in the payload, either way */
	uint32_t padding;
	uint64_t reserved;
};

struct uring_req_header {
	char in_out[URING_IN_OUT_HEADER_SZ]; /* fuse_in_header; fuse_out_header */
	char op_in[URING_OP_IN_OUT_SZ];	     /* the opcode's own struct */
	struct uring_ent_in_out ent;
};

struct uring_cmd_req { /* in the SQE's 80-byte command area */
	uint64_t flags;
	uint64_t commit_id;
	uint16_t qid;
	uint8_t padding[6];
};

_Static_assert(sizeof(struct uring_ent_in_out) == 32, "FUSE 7.42 layout");
_Static_assert(sizeof(struct uring_req_header) == 288, "FUSE 7.42 layout");
_Static_assert(sizeof(struct uring_cmd_req) == 24, "FUSE 7.42 layout");

/* Entries per queue: requests of one CPU served at once. */
#define DEFAULT_DEPTH 8u
/* The payload the kernel fills: max_write and max_pages (op_init) are 1 MiB. */
#define PAYLOAD_SZ ((size_t)1 << 20)

struct queue;

/* One registered pair of buffers, and the request in it. */
struct ent {
	struct queue *q;
	struct uring_req_header *hdr;
	void *payload;
	struct iovec iov[2];
	_Atomic uint64_t unique; /* the request being served (0: none) */
	uint64_t commit_id;
};

struct queue {
	struct nvmefs_uring *u;
	unsigned qid;
	pthread_t thread;
	bool started;
	struct io_uring ring;
	bool ring_ok;
	pthread_mutex_t sq_lock; /* the ring's submission side: any replier */
	struct ent *ents;
	void *buf;     /* the pool buffer the next request is laid out in */
	unsigned live; /* entries the kernel holds (queue thread) */
};

struct nvmefs_uring {
	struct fuse_session *se;
	struct nvmefs_vol *vol;
	int fd; /* /dev/fuse */
	unsigned nq, depth;
	struct queue *q;
	atomic_bool stopping;
	void (*fail)(void *arg, int err);
	void *fail_arg;
	_Atomic uint64_t served; /* requests that came through the queues */
};

/* The one session's queues (replies find them from any thread); NULL
 * before the INIT reply and once stopped. */
static pthread_rwlock_t active_lock = PTHREAD_RWLOCK_INITIALIZER;
static struct nvmefs_uring *active;
static __thread struct queue *cur_queue; /* a queue thread's own */

int nvmefs_uring_offered(void)
{
	char v = 0;
	FILE *f = fopen("/sys/module/fuse/parameters/enable_uring", "re");

	if (!f)
		return -ENOTSUP; /* a kernel without it (before 6.14) */
	if (fscanf(f, " %c", &v) != 1)
		v = 0;
	fclose(f);
	return v == 'Y' || v == 'y' || v == '1' ? 0 : -EPERM;
}

/* Possible CPUs, as the kernel counts its queues (num_possible_cpus). */
static unsigned possible_cpus(void)
{
	unsigned a, b, n = 0;
	FILE *f = fopen("/sys/devices/system/cpu/possible", "re");
	int c;

	if (!f)
		return (unsigned)sysconf(_SC_NPROCESSORS_CONF);
	while (fscanf(f, "%u", &a) == 1) {
		b = a;
		c = fgetc(f);
		if (c == '-' && fscanf(f, "%u", &b) == 1)
			c = fgetc(f);
		n += b - a + 1;
		if (c != ',')
			break;
	}
	fclose(f);
	return n ? n : 1;
}

static void *alloc_locked(size_t len)
{
	void *p = NULL;

	if (posix_memalign(&p, 4096, len))
		return NULL;
	memset(p, 0, len);
	(void)mlock(p, len); /* best effort, as the pool does */
	return p;
}

static void free_queue(struct queue *q)
{
	if (!q->u)
		return; /* never made */
	if (q->ents) {
		for (unsigned i = 0; i < q->u->depth; i++) {
			free(q->ents[i].hdr);
			free(q->ents[i].payload);
		}
		free(q->ents);
	}
	if (q->ring_ok)
		io_uring_queue_exit(&q->ring);
	if (q->buf)
		nvmefs_bufpool_put(q->u->vol->pool, q->buf);
	pthread_mutex_destroy(&q->sq_lock);
}

static int make_queue(struct nvmefs_uring *u, struct queue *q, unsigned qid)
{
	struct io_uring_params p = {.flags = IORING_SETUP_SQE128};
	int ret;

	q->u = u;
	q->qid = qid;
	pthread_mutex_init(&q->sq_lock, NULL);
	/* Room for every entry's command and a wake-up at once. */
	ret = io_uring_queue_init_params(2 * u->depth + 2, &q->ring, &p);
	if (ret)
		return ret;
	q->ring_ok = true;
	q->ents = calloc(u->depth, sizeof(*q->ents));
	if (!q->ents)
		return -ENOMEM;
	for (unsigned i = 0; i < u->depth; i++) {
		struct ent *e = &q->ents[i];

		e->q = q;
		e->hdr = alloc_locked(sizeof(*e->hdr));
		e->payload = alloc_locked(PAYLOAD_SZ);
		if (!e->hdr || !e->payload)
			return -ENOMEM;
		e->iov[0] = (struct iovec){e->hdr, sizeof(*e->hdr)};
		e->iov[1] = (struct iovec){e->payload, PAYLOAD_SZ};
	}
	return 0;
}

void nvmefs_uring_free(struct nvmefs_uring *u)
{
	if (!u)
		return;
	for (unsigned i = 0; i < u->nq; i++)
		free_queue(&u->q[i]);
	free(u->q);
	free(u);
}

int nvmefs_uring_prepare(struct fuse_session *se, struct nvmefs_vol *vol, unsigned depth,
			 struct nvmefs_uring **out)
{
	struct nvmefs_uring *u;
	int ret;

	*out = NULL;
	ret = nvmefs_uring_offered();
	if (ret)
		return ret;
	u = calloc(1, sizeof(*u));
	if (!u)
		return -ENOMEM;
	u->se = se;
	u->vol = vol;
	u->fd = fuse_session_fd(se);
	u->depth = depth ? depth : DEFAULT_DEPTH;
	u->nq = possible_cpus();
	u->q = calloc(u->nq, sizeof(*u->q));
	if (!u->q) {
		free(u);
		return -ENOMEM;
	}
	for (unsigned i = 0; i < u->nq && !ret; i++)
		ret = make_queue(u, &u->q[i], i);
	if (ret) {
		nvmefs_uring_free(u); /* free_queue copes with half-made queues */
		return ret;
	}
	*out = u;
	return 0;
}

uint64_t nvmefs_uring_init_flag(void)
{
	return FUSE_OVER_IO_URING_FLAG;
}

unsigned nvmefs_uring_queues(const struct nvmefs_uring *u, unsigned *depth)
{
	if (depth)
		*depth = u ? u->depth : 0;
	return u ? u->nq : 0;
}

uint64_t nvmefs_uring_served(const struct nvmefs_uring *u)
{
	return u ? atomic_load_explicit(&u->served, memory_order_relaxed) : 0;
}

/* Queue e's command (q->sq_lock held): REGISTER, or COMMIT_AND_FETCH. */
static int queue_cmd(struct ent *e, uint32_t op)
{
	struct queue *q = e->q;
	struct io_uring_sqe *sqe = io_uring_get_sqe(&q->ring);
	struct uring_cmd_req *req;

	if (!sqe)
		return -EBUSY; /* cannot be: the ring holds twice the entries */
	memset(sqe, 0, 128);
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

static int submit_cmd(struct ent *e, uint32_t op)
{
	struct queue *q = e->q;
	int ret;

	pthread_mutex_lock(&q->sq_lock);
	ret = queue_cmd(e, op);
	if (!ret) {
		ret = io_uring_submit(&q->ring);
		ret = ret < 0 ? ret : 0;
	}
	pthread_mutex_unlock(&q->sq_lock);
	return ret;
}

/* The entry serving request unique, or NULL (a request of /dev/fuse). */
static struct ent *find_ent(struct nvmefs_uring *u, uint64_t unique)
{
	struct queue *q = cur_queue;

	/* Most replies come from the queue thread that took the request. */
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
	struct ent *e;
	size_t len = 0;
	int ret;

	if (iov[0].iov_len < sizeof(*out) || !out->unique)
		return false; /* a notification: /dev/fuse's */
	pthread_rwlock_rdlock(&active_lock);
	u = active;
	e = u ? find_ent(u, out->unique) : NULL;
	if (!e) {
		pthread_rwlock_unlock(&active_lock);
		return false;
	}
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
	ret = submit_cmd(e, URING_CMD_COMMIT_AND_FETCH);
	pthread_rwlock_unlock(&active_lock);
	if (ret) {
		errno = -ret;
		*res = -1;
	} else {
		*res = (ssize_t)(sizeof(*out) + len);
	}
	return true;
}

void *nvmefs_uring_take_buf(void)
{
	struct queue *q = cur_queue;
	void *buf;

	if (!q)
		return NULL;
	buf = q->buf;
	q->buf = NULL;
	return buf;
}

/*
 * Lay e's request out in q->buf as /dev/fuse would have delivered it (the
 * payload at NVMEFS_DATA_OFF) and serve it. False when the request is not
 * one the protocol can send.
 */
static bool serve(struct queue *q, struct ent *e)
{
	struct nvmefs_uring *u = q->u;
	const struct fuse_in_header *in = (const void *)e->hdr->in_out;
	uint32_t psz = e->hdr->ent.payload_sz;
	size_t head, op_len;
	char *start;

	if (in->len < sizeof(*in) + psz || psz > PAYLOAD_SZ ||
	    (op_len = in->len - sizeof(*in) - psz) > URING_OP_IN_OUT_SZ ||
	    NVMEFS_DATA_OFF + (size_t)psz > u->vol->buf_size)
		return false;
	head = sizeof(*in) + op_len;
	start = (char *)q->buf + NVMEFS_DATA_OFF - head;
	memcpy(start, in, sizeof(*in));
	memcpy(start + sizeof(*in), e->hdr->op_in, op_len);
	memcpy((char *)q->buf + NVMEFS_DATA_OFF, e->payload, psz);
	e->commit_id = e->hdr->ent.commit_id;
	atomic_store_explicit(&e->unique, in->unique, memory_order_release);
	atomic_fetch_add_explicit(&u->served, 1, memory_order_relaxed);
	nvmefs_loop_serve(u->se, u->vol, start, in->len);
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

static void *queue_main(void *arg)
{
	struct queue *q = arg;
	struct nvmefs_uring *u = q->u;
	cpu_set_t one;
	int ret = 0;

	cur_queue = q;
	/* Each queue serves its CPU's requests: run there. */
	CPU_ZERO(&one);
	CPU_SET(q->qid, &one);
	(void)pthread_setaffinity_np(pthread_self(), sizeof(one), &one);
	pthread_mutex_lock(&q->sq_lock);
	for (unsigned i = 0; i < u->depth && !ret; i++)
		ret = queue_cmd(&q->ents[i], URING_CMD_REGISTER);
	if (!ret) {
		ret = io_uring_submit(&q->ring);
		ret = ret < 0 ? ret : 0;
	}
	pthread_mutex_unlock(&q->sq_lock);
	if (ret) {
		queue_fail(q, "registering its entries", ret);
		goto out;
	}
	q->live = u->depth;
	while (q->live && !atomic_load(&u->stopping)) {
		struct io_uring_cqe *cqe;
		struct ent *e;
		int res;

		ret = io_uring_wait_cqe(&q->ring, &cqe);
		if (ret == -EINTR)
			continue;
		if (ret) {
			queue_fail(q, "waiting for a request", ret);
			break;
		}
		e = io_uring_cqe_get_data(cqe);
		res = cqe->res;
		io_uring_cqe_seen(&q->ring, cqe);
		if (!e)
			continue; /* the wake-up of nvmefs_uring_stop */
		if (res < 0) {
			/* -ENOTCONN, -ECONNABORTED: unmounted or aborted. */
			q->live--;
			if (res != -ENOTCONN && res != -ECONNABORTED && res != -ENODEV)
				queue_fail(q, "the kernel refused an entry", res);
			continue;
		}
		if (!q->buf && !(q->buf = nvmefs_bufpool_get(u->vol->pool))) {
			queue_fail(q, "a buffer", -ENOMEM);
			break;
		}
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
	}
out:
	cur_queue = NULL;
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

		ret = -pthread_create(&u->q[i].thread, &attr, queue_main, &u->q[i]);
		if (ret) {
			queue_fail(&u->q[i], "starting its thread", ret);
			break;
		}
		snprintf(name, sizeof(name), "nvmefs-q%u", i % 1000);
		pthread_setname_np(u->q[i].thread, name);
		u->q[i].started = true;
	}
	pthread_attr_destroy(&attr);
	return ret;
}

void nvmefs_uring_stop(struct nvmefs_uring *u)
{
	struct timespec until;

	if (!u)
		return;
	/* At an unmount the kernel ends every entry (-ENOTCONN) and each
	 * queue thread leaves by itself, the kernel holding none of our
	 * buffers: wait a moment for that before waking them. */
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += 2;
	for (unsigned i = 0; i < u->nq; i++)
		if (u->q[i].started && !pthread_timedjoin_np(u->q[i].thread, NULL, &until))
			u->q[i].started = false;
	atomic_store(&u->stopping, true);
	for (unsigned i = 0; i < u->nq; i++) {
		struct queue *q = &u->q[i];
		struct io_uring_sqe *sqe;

		if (!q->started)
			continue;
		pthread_mutex_lock(&q->sq_lock);
		sqe = io_uring_get_sqe(&q->ring);
		if (sqe) {
			memset(sqe, 0, 128);
			io_uring_prep_nop(sqe);
			io_uring_sqe_set_data(sqe, NULL);
			io_uring_submit(&q->ring);
		}
		pthread_mutex_unlock(&q->sq_lock);
		pthread_join(q->thread, NULL);
		q->started = false;
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
	for (unsigned i = 0; u && i < u->nq; i++)
		if (u->q[i].live)
			return false;
	return true;
}
