// SPDX-License-Identifier: MIT
/*
 * Read-ahead in direct mode.
 *
 * In direct mode the kernel keeps no page cache and does no readahead: a
 * sequential reader (dd, cp, torch.load) sends one READ, waits for the
 * reply, and only then sends the next, so the drives idle while each reply
 * crosses FUSE. For a file read sequentially, nvmefs reads up to
 * -o prefetch=N requests ahead into pool buffers ("windows"). The next READ
 * at the expected offset is answered from its window: at once when the
 * window is in, or from the window's I/O completion when it is still being
 * read (the READ waits there, not in a worker).
 *
 * Coherence. A window reads under a shared range lock like any read, and
 * records the file's range-lock generation (bumped each time an exclusive
 * lock is granted: write, truncate, punch, fallocate, relayout) while it
 * holds that lock. An overlapping change must wait for the window's lock,
 * so it bumps the generation after the window recorded it. A window that
 * is in is served only while the generation is unchanged; otherwise it is
 * dropped and the READ goes to the devices. A READ that waits on a window
 * still being read is answered with what the window read: any change that
 * would overlap it is still waiting behind the window's lock, so it had not
 * returned to its writer when the READ was sent.
 *
 * The end of the file is not under the range lock: a write past a window's
 * range can extend the file while the window reads, and be answered first.
 * So a window records the size it read at, and one that reached that end
 * before its own is not served once the file is longer than that, in or
 * still being read; the READ goes to the devices.
 *
 * Not for a reader with a queue of its own, where a READ is read in place
 * (into: the payload of an io_uring entry, which a window's bytes would be
 * copied into). A reader that keeps READs in flight (fio at QD32, a libaio
 * or io_uring program) keeps the devices busy without windows; each
 * handle counts its READs read in place and not yet answered to tell
 * (note_queue). On /dev/fuse a window's bytes are answered without a
 * copy, and stay.
 *
 * State is per open file handle (nvmefs_prefetch_open at OPEN and CREATE):
 * two readers of one file, each with its own descriptor, are each read
 * ahead, and one handle's close leaves the others' windows alone.
 *
 * Bounds: at most N windows per handle, and at most a quarter of the pool
 * for all windows together, taken without waiting (nvmefs_bufpool_tryget);
 * a handle's windows go at its close, every handle's before the pool goes.
 *
 * Locking: a handle's windows, and the file's list of handles (in->pfs),
 * are guarded by the file's range-lock mutex (in->io_lock.mu), never held
 * while calling into the data path.
 */
#include "fs_i.h"
#include "data_i.h"
#include "prefetch_i.h"

#include <stdlib.h>

#include "nvmefs/bufpool.h"

#define PF_MAX 16 /* -o prefetch= at most */

struct win {
	struct win *next;
	struct nvmefs_prefetch *pf;
	struct nvmefs_vol *vol;
	uint64_t off;
	struct nvmefs_read_view view; /* gen: read once the window is in */
	size_t len;
	void *buf;
	const uint8_t *data;
	ssize_t res;
	bool busy;   /* being read: its completion owns it if it leaves the list */
	bool orphan; /* left the list while busy: the completion frees it */
	/* A READ waiting for this window (done != NULL). */
	nvmefs_data_done_fn done;
	void *ctx;
	size_t want;
};

struct nvmefs_prefetch {
	struct nvmefs_prefetch *next; /* the file's other handles (in->pfs) */
	pthread_mutex_t *mu;	      /* the file's in->io_lock.mu */
	struct win *wins;	      /* in file order */
	unsigned n;		      /* on the list */
	unsigned busy;		      /* being read, orphans included */
	atomic_uint reading;	      /* READs read in place, not yet answered */
	bool queued;		      /* its reader keeps READs in flight (note_queue) */
	unsigned alone;		      /* READs in a row that came with none in flight */
	uint64_t expect;	      /* where a sequential reader reads next */
	pthread_cond_t idle;	      /* busy fell to 0 */
};

static void win_free(struct win *w)
{
	struct nvmefs_vol *vol = w->vol;

	nvmefs_bufpool_put(vol->pool, w->buf);
	atomic_fetch_sub_explicit(&vol->pf_bufs, 1, memory_order_relaxed);
	free(w);
}

/* Free a list of windows taken off a file's (outside its mutex). */
static void win_free_list(struct win *w)
{
	while (w) {
		struct win *next = w->next;

		win_free(w);
		w = next;
	}
}

/* Take *pp off the list. Returns it when the caller must free it (after
 * unlocking); a busy one becomes its completion's to free. mu held. */
static struct win *unlink_win(struct nvmefs_prefetch *pf, struct win **pp, bool wasted)
{
	struct win *w = *pp;

	*pp = w->next;
	pf->n--;
	w->next = NULL;
	if (wasted)
		atomic_fetch_add_explicit(&w->vol->stats.prefetch_wasted, 1, memory_order_relaxed);
	if (w->busy) {
		w->orphan = true;
		return NULL;
	}
	return w;
}

/* May w still answer a READ, the file being size bytes long when the READ
 * came? Not if the window stopped at an end of file that has moved since.
 * Otherwise one being read may (see the top); one that is in, only if
 * nothing changed the file since and its read succeeded (a failed window is
 * dropped, and the READ tries the devices itself). mu held. */
static bool usable(const struct win *w, const struct nvmefs_inode *in, uint64_t size)
{
	uint64_t seen = atomic_load(&w->view.size);

	if (seen != NVMEFS_SIZE_UNSEEN && seen < w->off + w->len && size > seen)
		return false;
	return w->busy || (w->view.gen == in->io_lock.gen && w->res >= 0);
}

static ssize_t serve_len(const struct win *w, size_t want)
{
	if (w->res < 0)
		return w->res;
	return (size_t)w->res < want ? w->res : (ssize_t)want;
}

/* A window's read completed (an I/O completion thread, or the caller's
 * thread when it ended early). */
static void win_done(void *ctx, ssize_t res, const void *data)
{
	struct win *w = ctx;
	struct nvmefs_prefetch *pf = w->pf;
	bool waiter, orphan;

	pthread_mutex_lock(pf->mu);
	w->busy = false;
	w->res = res;
	w->data = data;
	waiter = w->done != NULL;
	orphan = w->orphan;
	if (!--pf->busy)
		pthread_cond_broadcast(&pf->idle);
	pthread_mutex_unlock(pf->mu);
	/* pf may be gone from here on (nvmefs_prefetch_close), but for a
	 * waiting READ's read_answered: the READ, unanswered until then,
	 * keeps the handle open. */
	if (waiter) {
		w->done(w->ctx, serve_len(w, w->want), res > 0 ? data : NULL);
		win_free(w);
	} else if (orphan) {
		win_free(w);
	}
}

/* Queue windows after the last one (or after from) while the file, the
 * per-file depth and the volume's share of the pool allow, into todo[] (at
 * most PF_MAX): the caller reads them once mu is dropped, and only it (a
 * READ on another worker may queue more behind them meanwhile). Returns
 * how many. mu held. */
static unsigned plan_windows(struct nvmefs_vol *vol, struct nvmefs_prefetch *pf, uint64_t from,
			     size_t len, uint64_t size, struct win **todo)
{
	struct win **tail = &pf->wins;
	uint64_t off = from;
	unsigned n = 0;

	for (struct win *w = pf->wins; w; w = w->next) {
		off = w->off + w->len;
		tail = &w->next;
	}
	while (pf->n < vol->opts.prefetch && n < PF_MAX && off < size) {
		struct win *w;
		void *buf;

		if (atomic_fetch_add_explicit(&vol->pf_bufs, 1, memory_order_relaxed) >=
		    vol->pf_max_bufs) {
			atomic_fetch_sub_explicit(&vol->pf_bufs, 1, memory_order_relaxed);
			break;
		}
		buf = nvmefs_bufpool_tryget(vol->pool);
		w = buf ? calloc(1, sizeof(*w)) : NULL;
		if (!w) {
			if (buf)
				nvmefs_bufpool_put(vol->pool, buf);
			atomic_fetch_sub_explicit(&vol->pf_bufs, 1, memory_order_relaxed);
			break;
		}
		w->pf = pf;
		w->vol = vol;
		atomic_init(&w->view.size, NVMEFS_SIZE_UNSEEN);
		w->buf = buf;
		w->off = off;
		w->len = len;
		w->busy = true;
		pf->busy++;
		pf->n++;
		*tail = w;
		tail = &w->next;
		todo[n++] = w;
		off += len;
	}
	return n;
}

/* Read the windows plan_windows queued. Each is busy, so only its own
 * completion can free it, and that cannot come before it is sent. */
static void start_windows(struct nvmefs_vol *vol, struct nvmefs_inode *in, struct win **todo,
			  unsigned n)
{
	for (unsigned i = 0; i < n; i++) {
		atomic_fetch_add_explicit(&vol->stats.prefetch_reads, 1, memory_order_relaxed);
		nvmefs_data_prefetch_async(vol, in, todo[i]->buf, todo[i]->len, todo[i]->off,
					   &todo[i]->view, win_done, todo[i]);
	}
}

struct nvmefs_prefetch *nvmefs_prefetch_open(struct nvmefs_inode *in)
{
	struct nvmefs_prefetch *pf = calloc(1, sizeof(*pf));

	if (!pf)
		return NULL;
	pf->mu = &in->io_lock.mu;
	pthread_cond_init(&pf->idle, NULL);
	pthread_mutex_lock(pf->mu);
	pf->next = in->pfs;
	in->pfs = pf;
	pthread_mutex_unlock(pf->mu);
	return pf;
}

/* A READ of a handle, counted in its reading until answered. */
struct pf_read {
	struct nvmefs_prefetch *pf;
	nvmefs_data_done_fn done;
	void *ctx;
};

/* Counted off before the answer: the handle, which the kernel releases
 * only after its READs are answered, may go right after it. */
static void read_answered(void *ctx, ssize_t res, const void *data)
{
	struct pf_read r = *(struct pf_read *)ctx;

	free(ctx);
	atomic_fetch_sub_explicit(&r.pf->reading, 1, memory_order_relaxed);
	r.done(r.ctx, res, data);
}

/* Before planning: does pf's reader keep READs of its own in flight? Yes
 * once a READ came while another was unanswered; no again after
 * QUEUE_ALONE READs in a row came alone, so that the end of a burst (fio
 * draining its queue, then starting over) does not count. mu held. */
#define QUEUE_ALONE 8
static bool note_queue(struct nvmefs_prefetch *pf, bool alone)
{
	if (!alone) {
		pf->queued = true;
		pf->alone = 0;
	} else if (pf->queued && ++pf->alone >= QUEUE_ALONE) {
		pf->queued = false;
	}
	return pf->queued;
}

/* A READ no window answers: read from the devices. */
static void read_miss(struct nvmefs_vol *vol, struct nvmefs_inode *in, void *buf, void *into,
		      size_t len, uint64_t off, nvmefs_data_done_fn done, void *ctx)
{
	if (into)
		nvmefs_data_read_into(vol, in, into, len, off, done, ctx);
	else
		nvmefs_data_read_async(vol, in, buf, len, off, done, ctx);
}

void nvmefs_prefetch_read(struct nvmefs_vol *vol, struct nvmefs_inode *in,
			  struct nvmefs_prefetch *pf, void *buf, void *into, size_t len,
			  uint64_t off, nvmefs_data_done_fn done, void *ctx)
{
	struct win *hit = NULL, *drop = NULL, *todo[PF_MAX], **pp;
	bool sequential, alone, queued, served = false;
	unsigned nfresh = 0;
	struct pf_read *r;
	uint64_t size;

	if (!pf) {
		read_miss(vol, in, buf, into, len, off, done, ctx);
		return;
	}
	/* A READ read in place is counted until answered (out of memory: not
	 * counted), to tell whether its reader keeps a queue of its own. */
	alone = true;
	if (into) {
		alone = atomic_fetch_add_explicit(&pf->reading, 1, memory_order_relaxed) == 0;
		if ((r = malloc(sizeof(*r)))) {
			*r = (struct pf_read){.pf = pf, .done = done, .ctx = ctx};
			done = read_answered;
			ctx = r;
		} else {
			atomic_fetch_sub_explicit(&pf->reading, 1, memory_order_relaxed);
		}
	}
	/* Read after the READ came, so it covers every write answered before
	 * (see usable). */
	size = __atomic_load_n(&in->size, __ATOMIC_ACQUIRE);
	pthread_mutex_lock(pf->mu);
	sequential = off == pf->expect;
	queued = into && note_queue(pf, alone);
	/* Find the window at off; drop those behind it, the unusable ones,
	 * and all of them when the reader jumped. */
	for (pp = &pf->wins; *pp;) {
		struct win *w = *pp, *f;

		if (!hit && w->off == off && len <= w->len && usable(w, in, size)) {
			hit = w;
			*pp = w->next;
			pf->n--;
			w->next = NULL;
			continue;
		}
		if (!sequential || w->off < off + len || !usable(w, in, size)) {
			f = unlink_win(pf, pp, true);
			if (f) {
				f->next = drop;
				drop = f;
			}
			continue;
		}
		pp = &w->next;
	}
	if (hit) {
		atomic_fetch_add_explicit(&vol->stats.prefetch_hits, 1, memory_order_relaxed);
		if (hit->busy) { /* its completion answers */
			hit->done = done;
			hit->ctx = ctx;
			hit->want = len;
		} else {
			served = true;
		}
	}
	pf->expect = off + len;
	/* A READ read in place (into) that a window answers costs a copy
	 * from the window; a reader with READs of its own in flight keeps
	 * the devices busy without windows, so none is planned for it
	 * (docs/DATAPATH.md, "Read-ahead in direct mode"). */
	if ((hit || sequential) && !queued)
		nfresh = plan_windows(vol, pf, off + len, len, size, todo);
	pthread_mutex_unlock(pf->mu);

	win_free_list(drop);
	if (hit) {
		if (served) {
			done(ctx, serve_len(hit, len), hit->res > 0 ? hit->data : NULL);
			win_free(hit);
		}
		if (buf)
			nvmefs_bufpool_put(vol->pool, buf);
	} else {
		read_miss(vol, in, buf, into, len, off, done, ctx);
	}
	start_windows(vol, in, todo, nfresh);
}

/* Take all of pf's windows off, onto *drop (the caller frees them after
 * unlocking), and wait for those being read: their completions free them,
 * or answer the READ waiting on them. mu held; dropped while waiting. */
static void drop_all(struct nvmefs_prefetch *pf, struct win **drop)
{
	while (pf->wins) {
		struct win *f = unlink_win(pf, &pf->wins, true);

		if (f) {
			f->next = *drop;
			*drop = f;
		}
	}
	while (pf->busy) {
		if (nvmefs_before_wait_locked(pf->mu) && !pf->busy)
			break;
		pthread_cond_wait(&pf->idle, pf->mu);
	}
}

static void pf_free(struct nvmefs_prefetch *pf)
{
	pthread_cond_destroy(&pf->idle);
	free(pf);
}

void nvmefs_prefetch_close(struct nvmefs_inode *in, struct nvmefs_prefetch *pf)
{
	struct nvmefs_prefetch **pp;
	struct win *drop = NULL;

	if (!pf)
		return;
	pthread_mutex_lock(pf->mu);
	for (pp = &in->pfs; *pp != pf; pp = &(*pp)->next)
		;
	*pp = pf->next;
	drop_all(pf, &drop);
	pthread_mutex_unlock(pf->mu);
	win_free_list(drop);
	pf_free(pf);
}

void nvmefs_prefetch_forget_all(struct nvmefs_vol *vol)
{
	/* The request loop has stopped: no handle is used again, and those
	 * the kernel never released go with their windows. */
	pthread_mutex_lock(&vol->lock);
	for (size_t i = 0; vol->itab && i < vol->itab_size; i++) {
		for (struct nvmefs_inode *in = vol->itab[i]; in; in = in->hnext) {
			while (in->pfs)
				nvmefs_prefetch_close(in, in->pfs);
		}
	}
	pthread_mutex_unlock(&vol->lock);
}
