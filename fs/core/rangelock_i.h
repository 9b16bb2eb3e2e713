/* SPDX-License-Identifier: MIT */
/*
 * rangelock_i.h: byte-range locks on one file's data (fs/core/rangelock.c), and
 * the hook a thread calls before it waits for another one. The lock's
 * internals (its mutex, list and generation) are its own; fs/core/prefetch.c
 * reads the generation only through what nvmefs_rl_lock returns.
 */
#ifndef NVMEFS_RANGELOCK_I_H
#define NVMEFS_RANGELOCK_I_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

/*
 * A byte-range lock on one file's data (fs/core/rangelock.c). Each holder owns
 * an entry from lock to unlock; entries may be unlocked by another thread.
 */
struct nvmefs_rl_ent {
	struct nvmefs_rl_ent *next;
	uint64_t lo, hi; /* [lo, hi) */
	bool excl;
};

/*
 * A word outside the daemon that shows the lock's generation: the read
 * door's lease (fs/native/server_layout.c). Each exclusive grant stores
 * the new generation in every published word before the holder may
 * change a byte, so a reader that finds its word unchanged after its own
 * read of the devices read the file's content (as prefetch.c trusts gen).
 */
struct nvmefs_rl_pub {
	struct nvmefs_rl_pub *next;
	_Atomic uint64_t *word;
};

struct nvmefs_rangelock {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct nvmefs_rl_ent *head, **tail; /* mu: entries in arrival order */
	unsigned waiters;		    /* mu */
	/* mu: bumped each time an exclusive entry is granted, i.e. whenever
	 * the data or the size may change. What was read while it stayed the
	 * same is still the file's content (fs/core/prefetch.c). */
	uint64_t gen;
	struct nvmefs_rl_pub *pubs; /* mu: the words showing gen */
	unsigned npubs;		    /* mu */
};

void nvmefs_rl_init(struct nvmefs_rangelock *rl);
void nvmefs_rl_exit(struct nvmefs_rangelock *rl); /* no entry may be held */
/* Lock [lo, hi) shared or exclusive with entry e (the caller's until
 * unlock), waiting for every earlier conflicting entry: FIFO, no starvation.
 * NVMEFS_RL_ALL as hi locks to the end of any file. Returns the lock's
 * generation once granted (this grant counted, if exclusive). */
uint64_t nvmefs_rl_lock(struct nvmefs_rangelock *rl, struct nvmefs_rl_ent *e, uint64_t lo,
			uint64_t hi, bool excl);
/*
 * Publish gen in pub->word from now on, as a shared lock of the whole file
 * holds still: the caller holds one (so no exclusive grant is pending).
 * Returns 0 and *gen, the generation it stored, or -EBUSY when the file
 * has NVMEFS_RL_MAX_PUBS words already (each costs every writer a store).
 * Withdraw before the word's memory goes: the word is then left at
 * NVMEFS_RL_GONE, which no generation reaches.
 */
#define NVMEFS_RL_MAX_PUBS 64u
#define NVMEFS_RL_GONE	   UINT64_MAX
int nvmefs_rl_publish(struct nvmefs_rangelock *rl, struct nvmefs_rl_pub *pub, uint64_t *gen);
void nvmefs_rl_withdraw(struct nvmefs_rangelock *rl, struct nvmefs_rl_pub *pub);
/* Release e; any thread may. */
void nvmefs_rl_unlock(struct nvmefs_rangelock *rl, struct nvmefs_rl_ent *e);
#define NVMEFS_RL_ALL UINT64_MAX

/*
 * A thread about to wait for another one or for the devices (a range lock,
 * a read-ahead window, a synchronous I/O, a journal commit) calls
 * nvmefs_before_wait(): the request loop's worker that is reading
 * /dev/fuse for everyone sets the hook, to hand that job to another worker
 * first (fs/fuse/loop.c). Nothing otherwise.
 */
extern __thread void (*nvmefs_wait_hook)(void);
void nvmefs_before_wait(void);
/*
 * The same for a thread about to wait on a condition variable under mu,
 * which it holds: the hook runs with mu let go around it, as it may send
 * the worker's held writes (an io_submit, under no lock). True when it let
 * go of mu: the caller then checks its condition again before waiting.
 */
bool nvmefs_before_wait_locked(pthread_mutex_t *mu);

#endif
