// SPDX-License-Identifier: MIT
/*
 * FUSE over io_uring: making the queues (rings, locked entry buffers,
 * eventfds), before the INIT reply so that a failure falls back or refuses
 * instead of leaving the kernel's requests waiting; freeing them; what
 * they report (.nvmefs/stats, .nvmefs/config). How the transport works:
 * the top of uring.c.
 */
#define FUSE_USE_VERSION 314
#include <fuse_lowlevel.h>

#include "uring_i.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <unistd.h>

#include "nvmefs/util.h"

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

/* How every queue's ring is made (uring.c says why COOP_TASKRUN). */
#define RING_FLAGS (IORING_SETUP_SQE128 | IORING_SETUP_COOP_TASKRUN)

int nvmefs_uring_ring_ok(void)
{
	struct io_uring_params p = {.flags = RING_FLAGS};
	struct io_uring ring;
	int ret = io_uring_queue_init_params(2, &ring, &p);

	if (!ret)
		io_uring_queue_exit(&ring);
	return ret;
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

static unsigned default_depth(unsigned nq)
{
	unsigned d = DEFAULT_ENTRIES / nq;

	return d < MIN_DEPTH ? MIN_DEPTH : d > MAX_DEPTH ? MAX_DEPTH : d;
}

/* Whether a thread of ours may leave SCHED_IDLE once in it: an
 * unprivileged one needs RLIMIT_NICE to allow nice 0 (the kernel's
 * can_nice()). Tried on a thread of its own, which ends either way. Only
 * for a daemon under SCHED_OTHER (its queue threads inherit its policy):
 * a wait ends in SCHED_OTHER, which would lose an administrator's
 * SCHED_BATCH, real-time policy or reset-on-fork flag. */
static void *try_idle_policy(void *arg)
{
	struct sched_param sp = {0};
	bool *ok = arg;

	*ok = !sched_setscheduler(0, SCHED_IDLE, &sp) && !sched_setscheduler(0, SCHED_OTHER, &sp);
	return NULL;
}

static bool idle_policy_permitted(void)
{
	pthread_t t;
	bool ok = false;

	if (sched_getscheduler(0) != SCHED_OTHER || pthread_create(&t, NULL, try_idle_policy, &ok))
		return false;
	pthread_join(t, NULL);
	return ok;
}

static void *alloc_locked(size_t len)
{
	void *p = NULL;

	if (posix_memalign(&p, 4096, len))
		return NULL;
	memset(p, 0, len);
	(void)nvmefs_mlock(p, len); /* best effort, as the pool does */
	return p;
}

static void free_queue(struct queue *q)
{
	if (!q->u)
		return; /* never made */
	if (q->ents) {
		for (unsigned i = 0; i < q->u->depth; i++)
			free(q->ents[i].hdr);
		free(q->ents);
	}
	if (q->areas)
		munmap(q->areas, q->areas_len);
	if (q->ring_ok)
		io_uring_queue_exit(&q->ring);
	if (q->efd >= 0)
		close(q->efd);
	free(q->tids);
	pthread_cond_destroy(&q->follow);
	pthread_mutex_destroy(&q->lock);
}

static int make_queue(struct nvmefs_uring *u, struct queue *q, unsigned qid)
{
	struct io_uring_params p = {.flags = RING_FLAGS};
	bool short_payload = getenv("NVMEFS_TEST_URING_SHORT_PAYLOAD") != NULL;
	/* tests/test_uring.sh: a ring of 8 SQEs, which device blocks fill. */
	unsigned sqes = getenv("NVMEFS_TEST_URING_SMALL_RING") ? 8 : 2 * u->depth + 2;
	size_t bytes;
	int ret;

	q->u = u;
	q->qid = qid;
	pthread_mutex_init(&q->lock, NULL);
	pthread_cond_init(&q->follow, NULL);
	q->efd = eventfd(0, EFD_CLOEXEC);
	if (q->efd < 0)
		return -errno;
	q->tids = calloc(u->depth + 1, sizeof(*q->tids));
	if (!q->tids)
		return -ENOMEM;
	/* Room for every entry's command and a wake-up at once, and for
	 * device blocks (a full ring is submitted; ring_block). Completions
	 * have 8 times as much: one per entry, one per block in flight. */
	p.flags |= IORING_SETUP_CQSIZE;
	p.cq_entries = 8 * (2 * u->depth + 2);
	ret = io_uring_queue_init_params(sqes, &q->ring, &p);
	if (ret)
		return ret;
	q->ring_ok = true;
	q->ents = calloc(u->depth, sizeof(*q->ents));
	/* The payloads, one mapping on huge pages (the kernel pins them for
	 * each reply and block read: nvmefs_map_buffers), locked as the
	 * pool is, best effort. */
	bytes = u->depth * (HEAD_ROOM + PAYLOAD_SZ);
	q->areas = nvmefs_map_buffers(bytes, &q->areas_len);
	if (!q->ents || !q->areas)
		return -ENOMEM;
	(void)nvmefs_mlock(q->areas, bytes);
	for (unsigned i = 0; i < u->depth; i++) {
		struct ent *e = &q->ents[i];

		e->q = q;
		e->hdr = alloc_locked(sizeof(*e->hdr));
		e->area = q->areas + i * (HEAD_ROOM + PAYLOAD_SZ);
		if (!e->hdr)
			return -ENOMEM;
		e->payload = e->area + HEAD_ROOM;
		e->iov[0] = (struct iovec){e->hdr, sizeof(*e->hdr)};
		e->iov[1] = (struct iovec){e->payload, PAYLOAD_SZ};
		/* tests/test_uring.sh: a payload the kernel refuses at REGISTER,
		 * after INIT, the one failure that would leave requests waiting. */
		if (short_payload)
			e->iov[1].iov_len = 4096;
	}
	return 0;
}

void nvmefs_uring_free(struct nvmefs_uring *u)
{
	if (!u)
		return;
	for (unsigned i = 0; i < u->nq; i++)
		free_queue(&u->q[i]);
	if (u->loadavg_fd >= 0)
		close(u->loadavg_fd);
	free(u->q);
	free(u);
}

/* Where a spread queue's threads may run: the CPUs the daemon may, on
 * the devices' home node when it has some (the pool's buffers are there,
 * as the /dev/fuse workers are: loop.c); empty (never spread) when none. */
static void spread_cpus(const struct nvmefs_vol *vol, cpu_set_t *out)
{
	cpu_set_t home;

	if (sched_getaffinity(0, sizeof(*out), out)) {
		CPU_ZERO(out);
		return;
	}
	if (vol && !nvmefs_node_cpus(nvmefs_devset_home_node(vol->set), &home)) {
		CPU_AND(&home, &home, out);
		if (CPU_COUNT(&home))
			*out = home;
	}
}

int nvmefs_uring_prepare(struct fuse_session *se, struct nvmefs_vol *vol, unsigned depth,
			 uint64_t poll_ns, nvmefs_serve_fn *serve, struct nvmefs_uring **out)
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
	u->serve = serve;
	u->fd = fuse_session_fd(se);
	u->loadavg_fd = -1;
	u->nq = possible_cpus();
	spread_cpus(vol, &u->anywhere);
	u->poll_ns = poll_ns;
	u->depth = depth ? depth : default_depth(u->nq);
	u->q = calloc(u->nq, sizeof(*u->q));
	if (!u->q) {
		free(u);
		return -ENOMEM;
	}
	/* fuse_null (vol NULL) measures the transport as mounts get it. */
	if ((!vol || vol->opts.uring_idle_wait) && idle_policy_permitted()) {
		const char *t = getenv("NVMEFS_TEST_URING_IDLE");
		long n = sysconf(_SC_NPROCESSORS_ONLN);

		u->ncpus = n > 0 ? (unsigned)n : 1;
		u->loadavg_fd = open("/proc/loadavg", O_RDONLY | O_CLOEXEC);
		atomic_store(&u->idle_wait, u->loadavg_fd >= 0);
		if (t && !strcmp(t, "always"))
			u->idle_test = IDLE_TEST_NO_LOAD | IDLE_TEST_NO_DELAY;
		else if (t && !strcmp(t, "noload"))
			u->idle_test = IDLE_TEST_NO_LOAD;
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

uint64_t nvmefs_uring_idle_waits(const struct nvmefs_uring *u, uint64_t *backoffs)
{
	uint64_t n = 0, b = 0;

	for (unsigned i = 0; u && i < u->nq; i++) {
		n += atomic_load_explicit(&u->q[i].idle_waits, memory_order_relaxed);
		b += atomic_load_explicit(&u->q[i].idle_backoffs, memory_order_relaxed);
	}
	if (backoffs)
		*backoffs = b;
	return n;
}

bool nvmefs_uring_idle_wait(const struct nvmefs_uring *u)
{
	return u && atomic_load(&u->idle_wait);
}

unsigned nvmefs_uring_away(const struct nvmefs_uring *u, uint64_t *polled)
{
	unsigned n = 0;

	*polled = 0;
	for (unsigned i = 0; u && i < u->nq; i++) {
		n += atomic_load_explicit(&u->q[i].away, memory_order_relaxed);
		*polled += atomic_load_explicit(&u->q[i].polled, memory_order_relaxed);
	}
	return n;
}

unsigned nvmefs_uring_spread(const struct nvmefs_uring *u)
{
	unsigned n = 0;

	for (unsigned i = 0; u && i < u->nq; i++)
		n += atomic_load_explicit(&u->q[i].spread, memory_order_relaxed);
	return n;
}
