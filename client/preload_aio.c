// SPDX-License-Identifier: MIT
/*
 * The read door's libaio side (client/preload_read.c has the rest):
 * io_submit, io_getevents and io_destroy of libaio, interposed. A read of
 * a door file becomes its pieces on a ring of the door's own beside the
 * program's (the shadow ring: the program's was sized for one entry a
 * read, a read here may be one piece a member); io_getevents takes their
 * completions there with the program's own and gives the program one
 * event a read, with its iocb and data, once every piece is in and the
 * loan's word says the file did not change meanwhile (else the read is
 * done again through the mount).
 *
 * A context's reads go to the door only once the program has called
 * io_getevents on it: a program that reaps its ring itself would never
 * see the door's completions.
 */
#undef _FILE_OFFSET_BITS
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <linux/aio_abi.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "preload_i.h"

#define SHADOW_DEPTH 1024u /* pieces in flight on a context's shadow ring */
#define MAX_CTX	     64u   /* the program's aio contexts the door serves */

static int (*real_io_submit)(aio_context_t, long, struct iocb **);
static int (*real_io_getevents)(aio_context_t, long, long, struct io_event *, struct timespec *);
static int (*real_io_destroy)(aio_context_t);

struct actx;
static pthread_mutex_t pmu = PTHREAD_MUTEX_INITIALIZER; /* the state below */
static struct actx *actxs[MAX_CTX];
static unsigned nactx;

/* ---- libaio's own, or the kernel's ---- */

static int sys_io_submit(aio_context_t ctx, long nr, struct iocb **v)
{
	long r;

	if (real_io_submit)
		return REAL(io_submit)(ctx, nr, v);
	r = syscall(SYS_io_submit, ctx, nr, v);
	return r < 0 ? -errno : (int)r;
}

static int sys_io_getevents(aio_context_t ctx, long min, long nr, struct io_event *ev,
			    struct timespec *ts)
{
	long r;

	if (real_io_getevents)
		return REAL(io_getevents)(ctx, min, nr, ev, ts);
	r = syscall(SYS_io_getevents, ctx, min, nr, ev, ts);
	return r < 0 ? -errno : (int)r;
}

/* ---- libaio ---- */

/*
 * A program's aio context the door has seen. Its reads served by the
 * door are pieces on a ring of the door's own (shadow), deep enough for
 * every piece of every read the program may have in flight (the
 * program's ring was sized for one entry a read); io_getevents takes
 * their completions there, beside the program's own.
 */
struct actx {
	aio_context_t ctx, shadow;
	bool reaped;		 /* io_getevents was called on it */
	unsigned own;		 /* the program's iocbs the kernel holds, as far as we know */
	unsigned door;		 /* its reads the door holds */
	unsigned waiting;	 /* threads in io_getevents on the program's ring alone */
	struct preload_rd *reqs; /* those in the shadow ring */
	struct io_event *ready;	 /* done, not yet returned */
	unsigned nready, cap;
};

/* libaio's calls (its libaio.h is not needed: the kernel's types are
 * the same words). */
int io_submit(aio_context_t ctx, long nr, struct iocb **v);
int io_getevents(aio_context_t ctx, long min, long nr, struct io_event *ev, struct timespec *ts);
int io_destroy(aio_context_t ctx);

/* ctx's entry, made when make (pmu held); NULL without room. */
static struct actx *actx_of(aio_context_t ctx, bool make)
{
	struct actx *a;

	for (unsigned i = 0; i < nactx; i++)
		if (actxs[i]->ctx == ctx)
			return actxs[i];
	if (!make || nactx == MAX_CTX || !(a = calloc(1, sizeof(*a))))
		return NULL;
	a->ctx = ctx;
	actxs[nactx++] = a;
	return a;
}

/* d is done: its event for the program, in ev[*count] when below nr,
 * else kept for the next call (room was made at the submit). pmu held. */
static void finish(struct actx *a, struct preload_rd *d, struct io_event *ev, int *count, long nr)
{
	struct io_event e = {.data = d->data, .obj = d->iocb, .res = preload_rd_result(d)};

	if (d->next)
		d->next->prev = d->prev;
	if (d->prev)
		d->prev->next = d->next;
	else
		a->reqs = d->next;
	a->door--;
	if (*count < nr)
		ev[(*count)++] = e;
	else
		a->ready[a->nready++] = e;
	preload_rd_free(d);
}

/* Serve b through the door when it is a read of a door file the door can
 * split (pmu held): 1 when it is the door's now (on the shadow ring, or
 * already done), 0 when the program's ring must take it. */
static int aim(struct actx *a, struct iocb *b)
{
	struct iocb *v[PRELOAD_MAX_PIECES];
	struct preload_rd *d;
	int r;

	if (b->aio_lio_opcode != IOCB_CMD_PREAD || b->aio_offset < 0 || b->aio_flags ||
	    b->aio_rw_flags || !preload_rd_fd((int)b->aio_fildes))
		return 0;
	/* A thread waits on the program's ring alone: a read the door took
	 * now would not wake it. The ring's own then. */
	if (a->waiting)
		return 0;
	if (!a->shadow && syscall(SYS_io_setup, SHADOW_DEPTH, &a->shadow))
		return 0;
	/* Room for every read the door holds to be ready at once. */
	if (a->door + a->nready + 1 > a->cap) {
		struct io_event *ne = realloc(a->ready, (a->cap + 64) * sizeof(*ne));

		if (!ne)
			return 0;
		a->ready = ne;
		a->cap += 64;
	}
	d = preload_rd_new((int)b->aio_fildes, (uint64_t)b->aio_offset, b->aio_nbytes, b->aio_buf);
	if (!d)
		return 0;
	d->iocb = (uint64_t)(uintptr_t)b;
	d->data = b->aio_data;
	for (unsigned i = 0; i < d->n; i++)
		v[i] = &d->sub[i];
	r = sys_io_submit(a->shadow, d->n, v);
	d->next = a->reqs;
	if (a->reqs)
		a->reqs->prev = d;
	a->reqs = d;
	a->door++;
	/* What the ring did not take is read here: the read is the door's
	 * from now on, whatever happens. */
	preload_rd_pieces_sync(d, r < 0 ? 0 : (unsigned)r);
	if (!d->left) {
		int none = 0;

		finish(a, d, NULL, &none, 0);
	}
	return 1;
}

/* Whether b may be the door's (aim decides). */
static bool candidate(const struct actx *a, const struct iocb *b)
{
	return a->reaped && !a->waiting && b->aio_lio_opcode == IOCB_CMD_PREAD &&
	       preload_rd_fd((int)b->aio_fildes);
}

EXPORT int io_submit(aio_context_t ctx, long nr, struct iocb **v)
{
	struct actx *a;
	long i = 0;
	int ret = 0;

	if (!preload_rd_any() || nr <= 0)
		return sys_io_submit(ctx, nr, v);
	pthread_mutex_lock(&pmu);
	a = actx_of(ctx, true);
	if (!a) {
		pthread_mutex_unlock(&pmu);
		return sys_io_submit(ctx, nr, v);
	}
	while (i < nr) {
		long k = 0;

		/* The program's own, as many in a row as there are, in one call;
		 * a read the door takes only once those before it are in (the
		 * count io_submit returns is of the iocbs taken, in order). */
		while (i + k < nr && !candidate(a, v[i + k]))
			k++;
		if (k) {
			ret = sys_io_submit(ctx, k, v + i);
			if (ret > 0)
				a->own += (unsigned)ret;
			if (ret < k) {
				i += ret > 0 ? ret : 0;
				break;
			}
			i += k;
			continue;
		}
		if (aim(a, v[i])) {
			i++;
			continue;
		}
		ret = sys_io_submit(ctx, 1, v + i); /* not the door's after all */
		if (ret < 1)
			break;
		a->own++;
		i++;
	}
	pthread_mutex_unlock(&pmu);
	return i ? (int)i : ret;
}

/* Reap the shadow ring of a, waiting up to ts (NULL: no limit) for one
 * piece when wait: the reads it finishes go to ev (pmu not held). */
static int reap_shadow(struct actx *a, bool wait, struct timespec *ts, struct io_event *ev,
		       int *count, long nr)
{
	struct io_event got[64];
	struct timespec zero = {0, 0};
	int k = sys_io_getevents(a->shadow, wait ? 1 : 0, 64, got, wait ? ts : &zero);

	pthread_mutex_lock(&pmu);
	for (int i = 0; i < k; i++) {
		struct preload_rd *d = (struct preload_rd *)(uintptr_t)got[i].data;

		if (preload_rd_piece_done(d, (const struct iocb *)(uintptr_t)got[i].obj,
					  got[i].res))
			finish(a, d, ev, count, nr);
	}
	pthread_mutex_unlock(&pmu);
	return k;
}

static int64_t ns_left(const struct timespec *end)
{
	struct timespec now;

	clock_gettime(CLOCK_MONOTONIC, &now);
	return (end->tv_sec - now.tv_sec) * 1000000000ll + (end->tv_nsec - now.tv_nsec);
}

EXPORT int io_getevents(aio_context_t ctx, long min, long nr, struct io_event *ev,
			struct timespec *ts)
{
	struct timespec end, left, *lp = NULL;
	struct actx *a;
	int count = 0;

	if (min < 0 || nr <= 0 || min > nr)
		return sys_io_getevents(ctx, min, nr, ev, ts); /* the kernel's EINVAL */
	pthread_mutex_lock(&pmu);
	a = preload_rd_any() ? actx_of(ctx, true) : NULL;
	if (a)
		a->reaped = true;
	if (!a || (!a->door && !a->nready)) {
		if (a)
			a->waiting++;
		pthread_mutex_unlock(&pmu);
		count = sys_io_getevents(ctx, min, nr, ev, ts);
		if (a) {
			pthread_mutex_lock(&pmu);
			a->waiting--;
			if (count > 0)
				a->own -= a->own < (unsigned)count ? a->own : (unsigned)count;
			pthread_mutex_unlock(&pmu);
		}
		return count;
	}
	pthread_mutex_unlock(&pmu);
	if (ts) {
		clock_gettime(CLOCK_MONOTONIC, &end);
		end.tv_sec += ts->tv_sec;
		end.tv_nsec += ts->tv_nsec;
		if (end.tv_nsec >= 1000000000) {
			end.tv_sec++;
			end.tv_nsec -= 1000000000;
		}
	}
	for (;;) {
		unsigned own, door;
		int64_t ns = 0;
		int k;

		pthread_mutex_lock(&pmu);
		while (a->nready && count < nr)
			ev[count++] = a->ready[--a->nready];
		own = a->own;
		door = a->door;
		/* Waiting on the program's ring alone is decided with the door's
		 * count under the lock: a read the door took after it would not
		 * wake this thread, so aim() takes none meanwhile. */
		if (!door)
			a->waiting++;
		pthread_mutex_unlock(&pmu);
		if (count >= nr || (count >= min && count)) {
			if (!door) {
				pthread_mutex_lock(&pmu);
				a->waiting--;
				pthread_mutex_unlock(&pmu);
			}
			break;
		}
		if (ts) {
			ns = ns_left(&end);
			if (ns < 0)
				ns = 0;
			left = (struct timespec){ns / 1000000000, ns % 1000000000};
			lp = &left;
		}
		if (door) {
			/* The door's ring for a while (100 us when the program's
			 * may complete too, else 10 ms: a read the program sends
			 * meanwhile may go to either), then the program's without
			 * waiting. */
			struct timespec slice = {0, own ? 100000 : 10000000};
			int r = reap_shadow(a, min > count, lp && ns < slice.tv_nsec ? lp : &slice,
					    ev, &count, nr);

			if (r == -EINTR && !count)
				return r;
			k = own && count < nr ? sys_io_getevents(ctx, 0, nr - count, ev + count,
								 &(struct timespec){0, 0})
					      : 0;
		} else {
			k = sys_io_getevents(ctx, min > count ? min - count : 0, nr - count,
					     ev + count, lp);
			pthread_mutex_lock(&pmu);
			a->waiting--;
			pthread_mutex_unlock(&pmu);
		}
		if (k > 0) {
			count += k;
			pthread_mutex_lock(&pmu);
			a->own -= a->own < (unsigned)k ? a->own : (unsigned)k;
			pthread_mutex_unlock(&pmu);
		} else if (k < 0 && !count) {
			return k;
		}
		if (count >= min && (count || !min))
			break;
		if (ts && ns_left(&end) <= 0)
			break;
	}
	return count;
}

/* io_destroy waits for the program's reads; the door's shadow ring goes
 * too, once its pieces are in, and what nobody reaped with it. */
EXPORT int io_destroy(aio_context_t ctx)
{
	int ret = real_io_destroy ? REAL(io_destroy)(ctx)
				  : (syscall(SYS_io_destroy, ctx) < 0 ? -errno : 0);
	struct actx *a;

	pthread_mutex_lock(&pmu);
	a = actx_of(ctx, false);
	if (a) {
		if (a->shadow)
			syscall(SYS_io_destroy, a->shadow);
		while (a->reqs) {
			struct preload_rd *d = a->reqs;

			a->reqs = d->next;
			preload_rd_free(d);
		}
		free(a->ready);
		for (unsigned i = 0; i < nactx; i++)
			if (actxs[i] == a)
				actxs[i] = actxs[--nactx];
		free(a);
	}
	pthread_mutex_unlock(&pmu);
	return ret;
}

/* The child of fork has none of the parent's contexts. */
static void fork_child(void)
{
	pthread_mutex_init(&pmu, NULL);
	nactx = 0;
}

/* Its own constructor: REAL() resolves a call made before it ran. */
__attribute__((constructor)) static void aio_init(void)
{
	RESOLVE(io_submit);
	RESOLVE(io_getevents);
	RESOLVE(io_destroy);
	pthread_atfork(NULL, NULL, fork_child);
}
