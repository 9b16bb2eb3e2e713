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
 * Stopping: an unmount makes every read of /dev/fuse fail with ENODEV, and
 * each worker leaves. A signal (SIGTERM, SIGINT, SIGHUP through libfuse's
 * handlers) marks the session exited and interrupts one thread; the main
 * thread then interrupts the others with SIGUSR2 until all have left.
 */
#define FUSE_USE_VERSION 314
#include <fuse_lowlevel.h>
#include <linux/fuse.h>

#include "fs_i.h"

#include <errno.h>
#include <numa.h>
#include <pthread.h>
#include <sched.h>
#include <semaphore.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

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
	atomic_bool left;
};

struct loop {
	struct fuse_session *se;
	struct nvmefs_vol *vol;
	struct worker *w;
	unsigned n;
	sem_t left;	       /* posted by each worker as it leaves */
	atomic_int error;      /* the first receive error */
	atomic_bool init_seen; /* the INIT reply has been sent */
	void (*after_init)(void *arg);
	void *arg;
};

static __thread struct worker *self;

void *nvmefs_loop_take_buf(struct nvmefs_vol *vol)
{
	void *buf;

	if (!self || !self->buf)
		return nvmefs_bufpool_get(vol->pool);
	buf = self->buf;
	self->buf = NULL;
	return buf;
}

static void on_sigusr2(int sig)
{
	(void)sig; /* only interrupts a read of /dev/fuse */
}

static void serve_one(struct worker *w, struct fuse_buf *fb)
{
	struct loop *lp = w->lp;

	/* The request is in our buffer (no splice: FUSE_CAP_SPLICE_READ is
	 * never asked for), its header first. */
	if (!(fb->flags & FUSE_BUF_IS_FD))
		nvmefs_ctl_count(lp->vol, ((const struct fuse_in_header *)fb->mem)->opcode);
	fuse_session_process_buf(lp->se, fb);
	/* The kernel applied the INIT reply inside its write(2): settings it
	 * overrides there (the readahead window) can be changed now. */
	if (!atomic_load_explicit(&lp->init_seen, memory_order_relaxed) && lp->vol->init_done &&
	    !atomic_exchange(&lp->init_seen, true) && lp->after_init)
		lp->after_init(lp->arg);
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	struct loop *lp = w->lp;
	struct nvmefs_vol *vol = lp->vol;

	self = w;
	while (!fuse_session_exited(lp->se)) {
		struct fuse_buf fb = {.size = 0};
		int res;

		if (!w->buf && !(w->buf = nvmefs_bufpool_get(vol->pool))) {
			atomic_store(&lp->error, -ENOMEM);
			break;
		}
		fb.mem = (char *)w->buf + NVMEFS_DATA_OFF - WRITE_HDR;
		res = fuse_session_receive_buf(lp->se, &fb);
		if (res == -EINTR || res == -EAGAIN)
			continue;
		if (res <= 0) {
			if (res < 0)
				atomic_store(&lp->error, res);
			break;
		}
		serve_one(w, &fb);
	}
	if (w->buf)
		nvmefs_bufpool_put(vol->pool, w->buf);
	w->buf = NULL;
	self = NULL;
	fuse_session_exit(lp->se);
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
		lp->w[i].lp = lp;
		ret = -pthread_create(&lp->w[i].thread, &attr, worker_main, &lp->w[i]);
		if (ret)
			break;
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

	lp.w = calloc(threads, sizeof(*lp.w));
	if (!lp.w)
		return -ENOMEM;
	sem_init(&lp.left, 0, 0);
	sigemptyset(&sa.sa_mask);
	sigaction(SIGUSR2, &sa, NULL);
	pin = nvmefs_node_cpus(nvmefs_devset_home_node(vol->set), &cpus) == 0;
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
	if (!ret)
		ret = atomic_load(&lp.error);
	sem_destroy(&lp.left);
	free(lp.w);
	return ret;
}
