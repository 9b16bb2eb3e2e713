// SPDX-License-Identifier: MIT
/*
 * The FUSE request loop: our own, so that requests land in pinned buffers
 * and a read or write can leave its worker.
 *
 * Each worker thread holds one buffer from the volume's pinned pool and
 * reads the next request into it (fuse_session_receive_buf with a buffer of
 * ours) at NVMEFS_DATA_OFF - 80: a WRITE's two headers (fuse_in_header and
 * fuse_write_in, 80 bytes) end there, so its payload starts on a page
 * boundary, ready for O_DIRECT. A READ or WRITE handler takes the buffer
 * (nvmefs_loop_take_buf) and hands it to the data path, which reads into
 * it or writes from it and replies from the I/O completion; the worker
 * takes a fresh buffer and goes back to the device at once. The pool's cap
 * is thus also the cap on requests in flight: with every buffer out, a
 * worker waits for a completion to give one back.
 *
 * libfuse 3.14's own loop (fuse_session_loop_mt) reads into malloc'ed
 * buffers and keeps a thread per request until it replies, so neither
 * property is available through it.
 *
 * One reader at a time (leader and followers), unless -o spin=0. Only the
 * leader reads /dev/fuse; the other idle workers wait on our condition
 * variable, not in the kernel. When /dev/fuse is empty, the leader polls it
 * for a while (up to -o spin=US, adapted as below) before it sleeps in
 * poll(2). A program making one request after another (stat, create, open
 * of small files) thus finds a running thread instead of waking a sleeping
 * one. If several workers slept in read(2), the kernel would wake one of
 * them for every request anyway, and polling gained nothing (measured:
 * docs/DATAPATH.md). The leader keeps leading while it serves requests
 * that wait for nothing but memory: metadata, and READ and WRITE, which
 * leave for the devices. It hands over to a follower before any other
 * request (fsync, truncate, ...) and whenever it is about to wait for
 * another thread (nvmefs_before_wait: a range lock, a read-ahead window; a
 * pool buffer). With -o spin=0 every worker reads /dev/fuse, as libfuse's
 * loop does. Once the io_uring queues serve the requests, /dev/fuse carries
 * only FORGETs and INTERRUPTs, and the leader gathers them instead of
 * polling (nvmefs_uring_gather; not with spin=0, which has no leader).
 *
 * The leader holds back the small writes it answers early (write-behind)
 * and sends them to the devices together (the engine's plug): see
 * "Writes held back" below.
 *
 * The poll window adapts as guest halt-polling does: it doubles (up to
 * spin) when a request came after it ran out but within spin, and halves
 * when none came within spin, so an idle or slow-paced mount stops
 * spending CPU on it.
 *
 * The session's reads and writes of /dev/fuse go through devio.c's hooks:
 * they add the INIT reply's flags libfuse 3.14 cannot express (op_init's,
 * and FUSE_OVER_IO_URING when note_init asks for it), start the io_uring
 * queues right after the kernel took that reply (init_replied), and send
 * a reply to a request of the queues back there.
 *
 * Stopping: an unmount makes every read of /dev/fuse fail with ENODEV, and
 * each worker leaves. A signal (SIGTERM, SIGINT, SIGHUP through libfuse's
 * handlers) marks the session exited and interrupts one thread; the main
 * thread then interrupts the others with SIGUSR2 until all have left.
 */
#define FUSE_USE_VERSION 314
#include <fuse_lowlevel.h>
#include <linux/fuse.h>

#include "behind_i.h"
#include "door_i.h"
#include "nvmefs/spin.h"
#include "xlayout_i.h"

#include <errno.h>
#include <numa.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <semaphore.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/uio.h>
#include <unistd.h>

#include "nvmefs/engine.h"
#include "nvmefs/util.h"

/* Bytes before a WRITE's payload in the request. */
#define WRITE_HDR (sizeof(struct fuse_in_header) + sizeof(struct fuse_write_in))
/* What libfuse 3.14 reads at once (se->bufsize): 256 pages and a header page. */
#define FUSE_READ_SIZE ((size_t)256 * 4096 + 4096)
_Static_assert(NVMEFS_POOL_BUF >= NVMEFS_DATA_OFF - WRITE_HDR + FUSE_READ_SIZE,
	       "a pool buffer must hold a whole request read at NVMEFS_DATA_OFF - WRITE_HDR");

struct loop;

struct worker {
	struct loop *lp;
	pthread_t thread;
	void *buf; /* the pool buffer the next request is read into */
	bool started;
	bool leading; /* this worker is the one reading /dev/fuse */
	atomic_bool left;
};

struct loop {
	struct fuse_session *se;
	struct nvmefs_vol *vol;
	struct worker *w;
	unsigned n;
	pthread_mutex_t mu;
	pthread_cond_t follow;	 /* a follower may lead, or the session ended */
	bool led;		 /* mu: a worker is leading */
	struct nvmefs_spin spin; /* the leader's poll window (bound: -o spin) */
	sem_t left;		 /* posted by each worker as it leaves */
	atomic_int error;	 /* the first receive error */
	void (*after_init)(void *arg);
	void *arg;
	/* FUSE over io_uring (uring.c): made before INIT, started after its
	 * reply when the kernel offered it; NULL: /dev/fuse serves alone. */
	struct nvmefs_uring *uring;
	bool uring_asked;	 /* the INIT reply carries FUSE_OVER_IO_URING */
	atomic_bool rings_serve; /* the queues are starting: nvmefs_uring_gather */
};

static __thread struct worker *self;

/*
 * Writes held back. A small write answered early (write-behind,
 * fs/core/data_io.c) still went to io_submit alone: a program making
 * small files paid, a file, the submission, the loop device's or the
 * drive's wake-up, and a completion thread's. A worker now holds them
 * (nvmefs_engine_plug: only those; any other I/O goes at once) and sends
 * what it holds once it holds HOLD_MAX, once the first of them waited
 * HOLD_NS (looked at after each request and while it polls; a long
 * request, a READDIRPLUS of a big directory, stretches that), before it
 * sleeps in poll(2), before it stops leading (a request it does not serve
 * inline, and nvmefs_wait_hook: any wait for another thread, a range lock
 * included, the lock let go around the send: nvmefs_before_wait_locked),
 * and when it leaves. A reader of their range, a commit, an fsync and the
 * unmount wait for them as for any write in flight, at most about that
 * much longer; an FSYNC through the mount is a request the leader hands
 * over, so it sends them first. Their sizes and times are the file's from
 * the answer on. As the native door's threads do (fs/native/server_io.c);
 * the numbers are theirs. On an io_uring queue the blocks go on the
 * queue's ring with its commits instead.
 *
 * One case stretches the hold to the next request: poll(2) saw a request
 * that its caller's death (a fatal signal) then took back before the
 * leader's read(2), which then sleeps, holding. Meanwhile a commit (and
 * the native door's fsync, which waits for it) waits too; any request
 * through the mount, an fsync included, ends it. A non-blocking read
 * would close it, but the io_uring queues share the descriptor's open
 * file (PERFORMANCE.md, "Halted vCPUs": the leader's read as its poll).
 */
#define HOLD_MAX NVMEFS_BEHIND_MAX /* the most answered early at once */
#define HOLD_NS	 NVMEFS_HOLD_NS

static void hold_send(struct nvmefs_vol *vol)
{
	unsigned n = nvmefs_engine_plug_send();

	if (!n)
		return;
	atomic_fetch_add_explicit(&vol->stats.held_writes, n, memory_order_relaxed);
	atomic_fetch_add_explicit(&vol->stats.held_sends, 1, memory_order_relaxed);
}

/* After a request: send what w holds if it has waited long enough, or
 * all of it when w does not lead (only the leader holds across requests). */
static void hold_send_due(struct worker *w)
{
	if (!w->leading || nvmefs_engine_plug_due(HOLD_MAX, HOLD_NS))
		hold_send(w->lp->vol);
}

/* The session being served (one per process), for notifications from any
 * thread that serves its requests: the workers and the io_uring queues. */
static _Atomic(struct fuse_session *) serving;

/* The calling worker's receive buffer, now the caller's; NULL outside a worker. */
static void *own_buf(void)
{
	void *buf = self ? self->buf : NULL;

	if (buf)
		self->buf = NULL;
	return buf;
}

void *nvmefs_loop_take_buf(struct nvmefs_vol *vol)
{
	void *buf = own_buf();

	return buf ? buf : nvmefs_bufpool_get(vol->pool);
}

void *nvmefs_loop_try_buf(struct nvmefs_vol *vol)
{
	void *buf = own_buf();

	return buf ? buf : nvmefs_bufpool_tryget(vol->pool);
}

static void on_sigusr2(int sig)
{
	(void)sig; /* only interrupts a read of /dev/fuse */
}

/* Wait until w may read /dev/fuse for everyone. False when the session ended. */
static bool lead(struct worker *w)
{
	struct loop *lp = w->lp;

	if (w->leading || !lp->spin.max_ns)
		return true; /* spin=0: no leader, every worker reads */
	pthread_mutex_lock(&lp->mu);
	while (lp->led && !fuse_session_exited(lp->se))
		pthread_cond_wait(&lp->follow, &lp->mu);
	if (!fuse_session_exited(lp->se))
		w->leading = lp->led = true;
	pthread_mutex_unlock(&lp->mu);
	return w->leading;
}

/* Let a follower read /dev/fuse instead of w. */
static void resign(struct worker *w)
{
	struct loop *lp = w->lp;

	hold_send(lp->vol);
	if (!w->leading)
		return;
	pthread_mutex_lock(&lp->mu);
	w->leading = lp->led = false;
	pthread_cond_signal(&lp->follow);
	pthread_mutex_unlock(&lp->mu);
}

static void wake_followers(struct loop *lp)
{
	pthread_mutex_lock(&lp->mu);
	pthread_cond_broadcast(&lp->follow);
	pthread_mutex_unlock(&lp->mu);
}

/* nvmefs_wait_hook of the workers. */
static void before_wait(void)
{
	if (self)
		resign(self);
}

/* Wait up to timeout_ms (-1: no limit) for /dev/fuse to have a request:
 * 1 if it has one (or the mount is gone: read(2) will say so), 0 if not,
 * -1 if a signal came. */
static int wait_readable(int fd, int timeout_ms)
{
	struct pollfd p = {.fd = fd, .events = POLLIN};
	int n = poll(&p, 1, timeout_ms);

	return n < 0 ? (errno == EINTR ? -1 : 1) : n > 0;
}

/* The leader, before its read: until a request is waiting, poll for the
 * window, then sleep in poll(2), timing the wait to adapt the window
 * (nvmefs/spin.h); once the io_uring queues serve, gather FORGETs instead
 * of polling (nvmefs_uring_gather). False if a signal interrupted it. */
static bool wait_for_request(struct loop *lp)
{
	int fd = fuse_session_fd(lp->se);
	uint64_t t0, end;
	int r;

	if (atomic_load_explicit(&lp->rings_serve, memory_order_relaxed)) {
		hold_send(lp->vol); /* FORGETs only: gather them, no polling */
		return nvmefs_uring_gather() && wait_readable(fd, -1) > 0;
	}
	if ((r = wait_readable(fd, 0))) /* the common case under load: no clock */
		return r > 0;
	t0 = nvmefs_now_ns();
	end = t0 + lp->spin.ns;
	while (!(r = wait_readable(fd, 0)) && nvmefs_now_ns() < end) {
		if (nvmefs_engine_plug_due(HOLD_MAX, HOLD_NS))
			hold_send(lp->vol); /* waited long enough, while polling */
	}
	if (!r)
		hold_send(lp->vol); /* before it sleeps */
	if (!r && (r = wait_readable(fd, -1)) > 0)
		nvmefs_spin_adapt(&lp->spin, nvmefs_now_ns() - t0);
	return r > 0;
}

/* The INIT request: ask for FUSE over io_uring if the kernel offers it. */
static void note_init(struct loop *lp)
{
	if (lp->uring && (nvmefs_devio_offered() & nvmefs_uring_init_flag())) {
		nvmefs_devio_init_flags(nvmefs_uring_init_flag());
		lp->uring_asked = true;
	}
}

/* A queue of the io_uring transport failed after INIT: requests would wait
 * for it forever, so the mount stops (the kernel then fails them). */
static void uring_failed(void *arg, int err)
{
	struct loop *lp = arg;

	atomic_store(&lp->error, err);
	fuse_session_exit(lp->se);
	sem_post(&lp->left);
}

/* Right after the INIT reply: the io_uring queues, or /dev/fuse alone. */
static void start_uring(struct loop *lp)
{
	struct nvmefs_vol *vol = lp->vol;

	if (!lp->uring)
		return;
	if (!lp->uring_asked) {
		nvmefs_warn("FUSE over io_uring: the kernel did not offer it at INIT; serving "
			    "/dev/fuse");
		nvmefs_uring_free(lp->uring);
		lp->uring = NULL;
		return;
	}
	vol->uring_queues = nvmefs_uring_queues(lp->uring, &vol->uring_depth);
	vol->uring = lp->uring;
	nvmefs_info("FUSE over io_uring: %u queue(s) of %u entries", vol->uring_queues,
		    vol->uring_depth);
	/* A failure is said there, and stops the loop. */
	nvmefs_uring_start(lp->uring, uring_failed, lp);
	/* Requests made before every queue registered still come here, each
	 * then up to a gathering later: only at the mount's start. */
	atomic_store_explicit(&lp->rings_serve, true, memory_order_relaxed);
}

/* devio.c's after_init: the kernel applied the INIT reply inside its
 * writev, so settings it overrides there (the readahead window) can be
 * changed now, and the io_uring queues registered. */
static void init_replied(void *arg)
{
	struct loop *lp = arg;

	start_uring(lp);
	if (lp->after_init)
		lp->after_init(lp->arg);
}

/*
 * Whether vol, shut down (nvmefs_vol_shutdown), answers the request of len
 * bytes at in with EIO before libfuse sees it: all but what lets the
 * kernel drop its references and unmount (FORGET, RELEASE, ...), statfs
 * (df; the unmount), an ioctl (its handler answers) and the control files
 * (nvmefs-stat says "shut down"). In one place rather than in every
 * handler, so that no request type is forgotten.
 */
static bool shut_refuses(struct nvmefs_vol *vol, const struct fuse_in_header *in, size_t len)
{
	if (!atomic_load_explicit(&vol->shut_down, memory_order_acquire))
		return false;
	switch (in->opcode) {
	case FUSE_INIT:
	case FUSE_DESTROY:
	case FUSE_FORGET:
	case FUSE_BATCH_FORGET:
	case FUSE_INTERRUPT:
	case FUSE_STATFS:
	case FUSE_RELEASE:
	case FUSE_RELEASEDIR:
	case FUSE_FLUSH:
	case FUSE_IOCTL:
		return false;
	case FUSE_LOOKUP:
		if (in->nodeid == NVMEFS_ROOT_INO && !vol->ctl_shadowed &&
		    len >= sizeof(*in) + sizeof(NVMEFS_CTL_NAME) &&
		    !memcmp(in + 1, NVMEFS_CTL_NAME, sizeof(NVMEFS_CTL_NAME)))
			return false;
		break;
	default:
		break;
	}
	return !nvmefs_ctl_ino(in->nodeid);
}

/* Answer in with EIO, on /dev/fuse or its io_uring queue. */
static void reply_eio(struct fuse_session *se, const struct fuse_in_header *in)
{
	struct fuse_out_header out = {.len = sizeof(out), .error = -EIO, .unique = in->unique};
	struct iovec iov = {.iov_base = &out, .iov_len = sizeof(out)};

	/* ENOENT when the kernel gave up on it (interrupted): nothing to do. */
	(void)nvmefs_devio_writev(fuse_session_fd(se), &iov, 1);
}

void nvmefs_loop_serve(struct fuse_session *se, struct nvmefs_vol *vol, void *req, size_t len)
{
	const struct fuse_in_header *in = req;
	struct fuse_buf fb = {.mem = req, .size = len};

	nvmefs_ctl_count(vol, in->opcode);
	nvmefs_cpulat_busy();
	if (shut_refuses(vol, in, len))
		reply_eio(se, in);
	else
		fuse_session_process_buf(se, &fb);
}

static void serve_one(struct worker *w, struct fuse_buf *fb)
{
	struct loop *lp = w->lp;

	/* The request is in our buffer (no splice: FUSE_CAP_SPLICE_READ is
	 * never asked for), its header first. */
	if (!(fb->flags & FUSE_BUF_IS_FD)) {
		const struct fuse_in_header *in = fb->mem;

		nvmefs_ctl_count(lp->vol, in->opcode);
		nvmefs_cpulat_busy();
		if (in->opcode == FUSE_INIT)
			note_init(lp);
		if (shut_refuses(lp->vol, in, fb->size)) {
			reply_eio(lp->se, in);
			return;
		}
	}
	fuse_session_process_buf(lp->se, fb);
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	struct loop *lp = w->lp;
	struct nvmefs_vol *vol = lp->vol;

	self = w;
	nvmefs_wait_hook = before_wait;
	if (vol->opts.write_behind)
		nvmefs_engine_plug(vol->eng); /* "Writes held back" */
	while (!fuse_session_exited(lp->se)) {
		struct fuse_buf fb = {.size = 0};
		int res;

		if (!w->buf && !(w->buf = nvmefs_bufpool_tryget(vol->pool))) {
			resign(w); /* every buffer is out: wait for one, not leading */
			if (!(w->buf = nvmefs_bufpool_get(vol->pool))) {
				atomic_store(&lp->error, -ENOMEM);
				break;
			}
		}
		if (!lead(w))
			break;
		fb.mem = (char *)w->buf + NVMEFS_DATA_OFF - WRITE_HDR;
		if (w->leading && !wait_for_request(lp))
			continue; /* a signal: look at the session */
		res = fuse_session_receive_buf(lp->se, &fb);
		if (res == -EINTR || res == -EAGAIN)
			continue;
		if (res <= 0) {
			if (res < 0)
				atomic_store(&lp->error, res);
			break;
		}
		if ((fb.flags & FUSE_BUF_IS_FD) || !nvmefs_serve_inline(fb.mem, fb.size))
			resign(w);
		serve_one(w, &fb);
		hold_send_due(w);
	}
	hold_send(vol);
	nvmefs_engine_unplug();
	nvmefs_wait_hook = NULL;
	fuse_session_exit(lp->se); /* over for the followers too */
	resign(w);
	wake_followers(lp);
	if (w->buf)
		nvmefs_bufpool_put(vol->pool, w->buf);
	w->buf = NULL;
	self = NULL;
	atomic_store(&w->left, true);
	sem_post(&lp->left);
	return NULL;
}

/* Interrupt the workers still in a read until all have left. */
static void stop_workers(struct loop *lp)
{
	const struct timespec tick = {.tv_nsec = 10 * 1000 * 1000};

	fuse_session_exit(lp->se);
	for (;;) {
		bool all = true;

		wake_followers(lp);
		for (unsigned i = 0; i < lp->n; i++) {
			if (lp->w[i].started && !atomic_load(&lp->w[i].left)) {
				all = false;
				pthread_kill(lp->w[i].thread, SIGUSR2);
			}
		}
		if (all)
			break;
		nanosleep(&tick, NULL);
	}
	for (unsigned i = 0; i < lp->n; i++)
		if (lp->w[i].started)
			pthread_join(lp->w[i].thread, NULL);
}

static int start_workers(struct loop *lp, const cpu_set_t *cpus)
{
	pthread_attr_t attr;
	int ret = 0;

	pthread_attr_init(&attr);
	if (cpus && pthread_attr_setaffinity_np(&attr, sizeof(*cpus), cpus))
		nvmefs_warn("cannot run the FUSE workers on the devices' NUMA node");
	for (unsigned i = 0; i < lp->n; i++) {
		char name[16];

		lp->w[i].lp = lp;
		ret = -pthread_create(&lp->w[i].thread, &attr, worker_main, &lp->w[i]);
		if (ret)
			break;
		snprintf(name, sizeof(name), "nvmefs-w%u", i % 1000);
		pthread_setname_np(lp->w[i].thread, name);
		lp->w[i].started = true;
	}
	pthread_attr_destroy(&attr);
	return ret;
}

int nvmefs_loop_run(struct fuse_session *se, struct nvmefs_vol *vol, unsigned threads,
		    void (*after_init)(void *arg), void *arg)
{
	struct loop lp = {.se = se, .vol = vol, .n = threads, .after_init = after_init, .arg = arg};
	struct sigaction sa = {.sa_handler = on_sigusr2}; /* no SA_RESTART */
	cpu_set_t cpus;
	bool pin;
	int ret;

	/* The session's I/O through devio.c's hooks; after_init below. */
	ret = nvmefs_devio_attach(se, init_replied, &lp);
	if (ret)
		return ret;
	atomic_store(&serving, se);
	if (vol->opts.uring != NVMEFS_URING_OFF) {
		/* Its queues poll from another CPU (uring.c) as the /dev/fuse
		 * leader polls (-o spin), while idle CPUs are kept awake. */
		bool awake = nvmefs_cpulat_awake(vol->opts.cpu_latency_us);

		ret = nvmefs_uring_prepare(se, vol, vol->opts.uring_depth,
					   awake ? (uint64_t)vol->opts.spin_us * 1000 : 0,
					   nvmefs_loop_serve, &lp.uring);
		if (ret && vol->opts.uring == NVMEFS_URING_ON) {
			nvmefs_err("FUSE over io_uring was asked for (-o uring) and cannot be set "
				   "up: %s",
				   strerror(-ret));
			atomic_store(&serving, NULL);
			return ret;
		}
		/* Not offered: main.c said so at the option, once (uring=auto),
		 * or nothing (direct mode's default: nobody asked). Offered
		 * but not made (io_uring_setup refused: kernel.io_uring_disabled,
		 * say): one line either way. */
		if (ret && !nvmefs_uring_offered())
			nvmefs_warn("FUSE over io_uring cannot be set up (%s): serving /dev/fuse",
				    strerror(-ret));
		ret = 0;
	}
	lp.w = calloc(threads, sizeof(*lp.w));
	if (!lp.w)
		return -ENOMEM;
	nvmefs_spin_init(&lp.spin, (uint64_t)vol->opts.spin_us * 1000);
	pthread_mutex_init(&lp.mu, NULL);
	pthread_cond_init(&lp.follow, NULL);
	sem_init(&lp.left, 0, 0);
	sigemptyset(&sa.sa_mask);
	sigaction(SIGUSR2, &sa, NULL);
	pin = nvmefs_node_cpus(nvmefs_devset_home_node(vol->set), &cpus) == 0;
	nvmefs_cpulat_start(vol->opts.cpu_latency_us);
	ret = start_workers(&lp, pin ? &cpus : NULL);
	/* Wait for the first worker to leave (unmount, signal or error); a
	 * signal handled on this thread wakes us to look at the session. */
	while (!ret) {
		if (sem_wait(&lp.left) == 0)
			break;
		if (errno == EINTR && fuse_session_exited(se))
			break;
	}
	stop_workers(&lp);
	nvmefs_uring_stop(lp.uring);
	nvmefs_cpulat_stop();
	atomic_store(&serving, NULL);
	/* Its buffers are the kernel's while it holds an entry: freed only
	 * when it holds none (after an unmount), else at the exit. */
	if (nvmefs_uring_idle(lp.uring)) {
		vol->uring = NULL;
		nvmefs_uring_free(lp.uring);
	}
	if (!ret)
		ret = atomic_load(&lp.error);
	sem_destroy(&lp.left);
	pthread_cond_destroy(&lp.follow);
	pthread_mutex_destroy(&lp.mu);
	free(lp.w);
	return ret;
}

void nvmefs_loop_inval_attr(uint64_t ino)
{
	struct fuse_session *se = atomic_load_explicit(&serving, memory_order_acquire);

	if (se)
		nvmefs_loop_inval(se, ino, -1, 0);
}

int nvmefs_loop_store(uint64_t ino, const void *data, size_t len)
{
	struct fuse_session *se = atomic_load_explicit(&serving, memory_order_acquire);
	struct fuse_bufvec bv = FUSE_BUFVEC_INIT(len);

	bv.buf[0].mem = (void *)data;
	return se ? fuse_lowlevel_notify_store(se, ino, 0, &bv, 0) : -ENOTCONN;
}

void nvmefs_loop_inval(void *se, uint64_t ino, int64_t off, int64_t len)
{
	int ret = fuse_lowlevel_notify_inval_inode(se, ino, off, len);

	/* -ENOENT: the kernel holds nothing of the file. -ENOTCONN: unmounted. */
	if (ret && ret != -ENOENT && ret != -ENOTCONN)
		nvmefs_warn("cannot drop the kernel's cache of inode %llu: %s",
			    (unsigned long long)ino, strerror(-ret));
}
