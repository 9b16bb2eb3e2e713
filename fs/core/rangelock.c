// SPDX-License-Identifier: MIT
/*
 * Byte-range locks on a file's data, so that I/O on disjoint ranges of one
 * file runs at once while truncate, hole punching and overlapping writes
 * still exclude each other.
 *
 * A lock is an entry in the file's list, kept in arrival order. An entry is
 * granted when no earlier entry overlaps it in a conflicting mode (two
 * shared entries never conflict). Waiting on earlier entries, granted or
 * not, makes the lock fair: a whole-file truncate queued behind a stream of
 * writes is served before the writes that come after it.
 *
 * Unlike a pthread rwlock, an entry may be released by any thread: a write
 * locks its range in the FUSE worker and unlocks it in the I/O completion.
 */
#include "rangelock_i.h"

#include <errno.h>

static bool conflicts(const struct nvmefs_rl_ent *a, const struct nvmefs_rl_ent *b)
{
	return a->lo < b->hi && b->lo < a->hi && (a->excl || b->excl);
}

/* Is e granted: no earlier entry conflicts with it? rl->mu held. */
static bool granted(const struct nvmefs_rangelock *rl, const struct nvmefs_rl_ent *e)
{
	for (const struct nvmefs_rl_ent *a = rl->head; a != e; a = a->next)
		if (conflicts(a, e))
			return false;
	return true;
}

void nvmefs_rl_init(struct nvmefs_rangelock *rl)
{
	pthread_mutex_init(&rl->mu, NULL);
	pthread_cond_init(&rl->cv, NULL);
	rl->head = NULL;
	rl->tail = &rl->head;
	rl->waiters = 0;
	rl->gen = 0;
	rl->pubs = NULL;
	rl->npubs = 0;
}

void nvmefs_rl_exit(struct nvmefs_rangelock *rl)
{
	pthread_cond_destroy(&rl->cv);
	pthread_mutex_destroy(&rl->mu);
}

__thread void (*nvmefs_wait_hook)(void);

void nvmefs_before_wait(void)
{
	if (nvmefs_wait_hook)
		nvmefs_wait_hook();
}

bool nvmefs_before_wait_locked(pthread_mutex_t *mu)
{
	if (!nvmefs_wait_hook)
		return false;
	pthread_mutex_unlock(mu);
	nvmefs_wait_hook();
	pthread_mutex_lock(mu);
	return true;
}

uint64_t nvmefs_rl_lock(struct nvmefs_rangelock *rl, struct nvmefs_rl_ent *e, uint64_t lo,
			uint64_t hi, bool excl)
{
	uint64_t gen;

	e->lo = lo;
	e->hi = hi > lo ? hi : lo + 1; /* an empty range still orders */
	e->excl = excl;
	e->next = NULL;
	pthread_mutex_lock(&rl->mu);
	*rl->tail = e;
	rl->tail = &e->next;
	while (!granted(rl, e)) {
		if (nvmefs_before_wait_locked(&rl->mu) && granted(rl, e))
			break;
		rl->waiters++;
		pthread_cond_wait(&rl->cv, &rl->mu);
		rl->waiters--;
	}
	if (excl) {
		rl->gen++;
		for (struct nvmefs_rl_pub *p = rl->pubs; p; p = p->next)
			atomic_store(p->word, rl->gen);
	}
	gen = rl->gen;
	pthread_mutex_unlock(&rl->mu);
	return gen;
}

int nvmefs_rl_publish(struct nvmefs_rangelock *rl, struct nvmefs_rl_pub *pub, uint64_t *gen)
{
	int ret = 0;

	pthread_mutex_lock(&rl->mu);
	if (rl->npubs >= NVMEFS_RL_MAX_PUBS) {
		ret = -EBUSY;
	} else {
		pub->next = rl->pubs;
		rl->pubs = pub;
		rl->npubs++;
		*gen = rl->gen;
		atomic_store(pub->word, rl->gen);
	}
	pthread_mutex_unlock(&rl->mu);
	return ret;
}

void nvmefs_rl_withdraw(struct nvmefs_rangelock *rl, struct nvmefs_rl_pub *pub)
{
	pthread_mutex_lock(&rl->mu);
	for (struct nvmefs_rl_pub **pp = &rl->pubs; *pp; pp = &(*pp)->next) {
		if (*pp == pub) {
			*pp = pub->next;
			rl->npubs--;
			break;
		}
	}
	/* A reader that still looks at it sees the loan gone. */
	atomic_store(pub->word, NVMEFS_RL_GONE);
	pthread_mutex_unlock(&rl->mu);
}

void nvmefs_rl_unlock(struct nvmefs_rangelock *rl, struct nvmefs_rl_ent *e)
{
	struct nvmefs_rl_ent **pp;

	pthread_mutex_lock(&rl->mu);
	for (pp = &rl->head; *pp != e; pp = &(*pp)->next)
		;
	*pp = e->next;
	if (rl->tail == &e->next)
		rl->tail = pp;
	if (rl->waiters)
		pthread_cond_broadcast(&rl->cv);
	pthread_mutex_unlock(&rl->mu);
}
