// SPDX-License-Identifier: MIT
/*
 * Unit test of fs/core/rangelock.c, the byte-range lock on a file's data:
 *  - disjoint exclusive ranges are held at once (writers of one file at
 *    different offsets do not wait for each other);
 *  - overlapping shared ranges are held at once, an overlapping exclusive
 *    one waits until the holder unlocks;
 *  - arrival order is kept: a shared request behind a waiting exclusive one
 *    waits too (a truncate is not starved by a stream of reads);
 *  - any thread may unlock (the I/O completion releases a write's range).
 * "Waits" is checked by a waiter that the lock has refused (it called the
 * wait hook, nvmefs_before_wait, which the lock calls only when an earlier
 * entry conflicts) and that has not returned while the holder still holds;
 * no sleep stands in for that, so a loaded machine cannot pass a broken
 * lock. "Does not wait" is checked by the lock returning at all while the
 * other range is held, in this thread.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <time.h>

#include "fs_i.h"
#include "test_util.h"

struct waiter {
	struct nvmefs_rangelock *rl;
	struct nvmefs_rl_ent e;
	uint64_t lo, hi;
	bool excl;
	atomic_bool got;
	pthread_t t;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	unsigned refused; /* mu: times the lock found a conflict and waited */
	unsigned slow_ms; /* the hook takes this long after counting (an io_submit) */
};

static __thread struct waiter *self;

/* The wait hook (fs_i.h), called by the lock with rl->mu held right
 * before it sleeps because an earlier entry conflicts. */
static void refused(void)
{
	pthread_mutex_lock(&self->mu);
	self->refused++;
	pthread_cond_broadcast(&self->cv);
	pthread_mutex_unlock(&self->mu);
	if (self->slow_ms)
		nanosleep(&(struct timespec){.tv_nsec = self->slow_ms * 1000000L}, NULL);
}

static void *wait_main(void *arg)
{
	struct waiter *w = arg;

	self = w;
	nvmefs_wait_hook = refused;
	nvmefs_rl_lock(w->rl, &w->e, w->lo, w->hi, w->excl);
	pthread_mutex_lock(&w->mu);
	atomic_store(&w->got, true);
	pthread_cond_broadcast(&w->cv);
	pthread_mutex_unlock(&w->mu);
	return NULL;
}

static void start_slow(struct waiter *w, struct nvmefs_rangelock *rl, uint64_t lo, uint64_t hi,
		       bool excl, unsigned slow_ms)
{
	w->rl = rl;
	w->lo = lo;
	w->hi = hi;
	w->excl = excl;
	atomic_store(&w->got, false);
	pthread_mutex_init(&w->mu, NULL);
	pthread_cond_init(&w->cv, NULL);
	w->refused = 0;
	w->slow_ms = slow_ms;
	pthread_create(&w->t, NULL, wait_main, w);
}

static void start(struct waiter *w, struct nvmefs_rangelock *rl, uint64_t lo, uint64_t hi,
		  bool excl)
{
	start_slow(w, rl, lo, hi, excl, 0);
}

/* After join: the waiter's own lock and condition go. */
static void finish(struct waiter *w)
{
	pthread_cond_destroy(&w->cv);
	pthread_mutex_destroy(&w->mu);
}

static unsigned refusals(struct waiter *w)
{
	unsigned n;

	pthread_mutex_lock(&w->mu);
	n = w->refused;
	pthread_mutex_unlock(&w->mu);
	return n;
}

/* Until the lock has refused w more than `seen` times in all, or granted
 * it (which the caller's checks then catch). A minute at most: a lock that
 * neither refuses nor grants is a failure, not a hang. */
static void refused_after(struct waiter *w, unsigned seen)
{
	struct timespec end;
	int ret = 0;

	clock_gettime(CLOCK_REALTIME, &end);
	end.tv_sec += 60;
	pthread_mutex_lock(&w->mu);
	while (w->refused <= seen && !atomic_load(&w->got) && ret != ETIMEDOUT)
		ret = pthread_cond_timedwait(&w->cv, &w->mu, &end);
	pthread_mutex_unlock(&w->mu);
	CHECKF(ret != ETIMEDOUT, "no answer from the lock in 60 s");
}

/* Until n waiters sleep on rl's condition. A refused waiter runs the hook
 * with the lock let go (nvmefs_before_wait_locked) and looks once more
 * before it sleeps; an unlock in between is seen by that look, and the
 * waiter may then sleep without calling the hook again. Only a waiter
 * already asleep is sure to be woken, look again and be refused again. */
static void asleep(struct nvmefs_rangelock *rl, unsigned n)
{
	unsigned now = 0;

	for (int ms = 0; ms < 60000; ms++) {
		pthread_mutex_lock(&rl->mu);
		now = rl->waiters;
		pthread_mutex_unlock(&rl->mu);
		if (now >= n)
			break;
		nanosleep(&(struct timespec){.tv_nsec = 1000000}, NULL);
	}
	CHECKF(now >= n, "%u of %u waiters asleep after 60 s", now, n);
}

static void test_disjoint_and_shared(void)
{
	struct nvmefs_rangelock rl;
	struct nvmefs_rl_ent a, b, c, d;

	nvmefs_rl_init(&rl);
	/* The generation counts exclusive grants only (fs/core/prefetch.c). */
	CHECK(nvmefs_rl_lock(&rl, &a, 0, 4096, true) == 1);
	CHECK(nvmefs_rl_lock(&rl, &b, 4096, 8192, true) == 2); /* returns: no overlap */
	nvmefs_rl_unlock(&rl, &a);
	nvmefs_rl_unlock(&rl, &b);
	CHECK(nvmefs_rl_lock(&rl, &c, 0, 1 << 20, false) == 2);
	CHECK(nvmefs_rl_lock(&rl, &d, 4096, 8192, false) == 2); /* returns: both shared */
	nvmefs_rl_unlock(&rl, &d);
	nvmefs_rl_unlock(&rl, &c);
	CHECK(rl.head == NULL);
	nvmefs_rl_exit(&rl);
}

static void test_overlap_waits(void)
{
	struct nvmefs_rangelock rl;
	struct nvmefs_rl_ent a;
	struct waiter w;

	nvmefs_rl_init(&rl);
	nvmefs_rl_lock(&rl, &a, 0, 8192, false);
	start(&w, &rl, 4096, 12288, true);
	refused_after(&w, 0);
	CHECKF(!atomic_load(&w.got), "exclusive granted over a shared holder");
	nvmefs_rl_unlock(&rl, &a);
	pthread_join(w.t, NULL);
	finish(&w);
	CHECK(atomic_load(&w.got));
	nvmefs_rl_unlock(&rl, &w.e);
	CHECK(rl.head == NULL);
	nvmefs_rl_exit(&rl);
}

static void test_fifo(unsigned slow_ms)
{
	struct nvmefs_rangelock rl;
	struct nvmefs_rl_ent a;
	struct waiter trunc, rd;
	unsigned seen;

	nvmefs_rl_init(&rl);
	nvmefs_rl_lock(&rl, &a, 0, 4096, false);
	start(&trunc, &rl, 0, NVMEFS_RL_ALL, true);
	refused_after(&trunc, 0);
	start_slow(&rd, &rl, 0, 4096, false, slow_ms); /* compatible with a, not with trunc */
	refused_after(&rd, 0);
	CHECKF(!atomic_load(&trunc.got), "exclusive granted over a shared holder");
	CHECKF(!atomic_load(&rd.got), "a later reader overtook a waiting truncate");
	/* The unlock wakes both; rd must look again and be refused again,
	 * now by the truncate that holds the file. With slow_ms the hook
	 * outlasts the unlock unless both sleep first. */
	asleep(&rl, 2);
	seen = refusals(&rd);
	nvmefs_rl_unlock(&rl, &a);
	pthread_join(trunc.t, NULL);
	refused_after(&rd, seen);
	CHECKF(!atomic_load(&rd.got), "reader granted while the truncate holds the file");
	nvmefs_rl_unlock(&rl, &trunc.e);
	pthread_join(rd.t, NULL);
	finish(&trunc);
	finish(&rd);
	nvmefs_rl_unlock(&rl, &rd.e);
	CHECK(rl.head == NULL);
	nvmefs_rl_exit(&rl);
}

/* Writers at disjoint offsets of one file, each unlocking from another
 * thread (as a completion does), all get in while each other hold. */
struct cross {
	struct nvmefs_rangelock *rl;
	struct nvmefs_rl_ent *e;
};

static void *unlock_main(void *arg)
{
	struct cross *c = arg;

	nvmefs_rl_unlock(c->rl, c->e);
	return NULL;
}

static void test_cross_thread_unlock(void)
{
	enum { N = 16 };
	struct nvmefs_rangelock rl;
	struct nvmefs_rl_ent e[N];
	struct cross c[N];
	pthread_t t[N];
	struct waiter w;

	nvmefs_rl_init(&rl);
	for (unsigned i = 0; i < N; i++)
		nvmefs_rl_lock(&rl, &e[i], i * 4096ull, (i + 1) * 4096ull, true);
	start(&w, &rl, 0, NVMEFS_RL_ALL, true);
	refused_after(&w, 0);
	CHECK(!atomic_load(&w.got));
	for (unsigned i = 0; i < N; i++) {
		c[i] = (struct cross){.rl = &rl, .e = &e[i]};
		pthread_create(&t[i], NULL, unlock_main, &c[i]);
	}
	for (unsigned i = 0; i < N; i++)
		pthread_join(t[i], NULL);
	pthread_join(w.t, NULL);
	finish(&w);
	CHECK(atomic_load(&w.got));
	nvmefs_rl_unlock(&rl, &w.e);
	CHECK(rl.head == NULL && rl.tail == &rl.head);
	nvmefs_rl_exit(&rl);
}

int main(void)
{
	test_disjoint_and_shared();
	test_overlap_waits();
	test_fifo(0);
	test_fifo(50);
	test_cross_thread_unlock();
	return test_result();
}
