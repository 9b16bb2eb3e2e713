// SPDX-License-Identifier: MIT
/*
 * libnvmefs-preload.so's read door: O_DIRECT reads of a file on an nvmefs
 * mount served from the member devices by the program itself, into its own
 * pages, with no request to the daemon and no FUSE copy (docs/NATIVE.md,
 * "The read door").
 *
 * An open(O_RDONLY | O_DIRECT) of a regular file on a mount with a native
 * door goes to the kernel as always; then the file is registered with the
 * daemon and its extents are borrowed (LAYOUT, include/nvmefs/wire.h). A
 * read that lies in written extents inside the file's size is then split
 * into pieces, one a member and stripe unit (contiguous ones merged), read
 * at once from the members by the calls the program made: pread here (on
 * a ring of the thread's), read through preload_rd_pread (preload.c's
 * read, at the file offset), libaio's io_submit in preload_aio.c.
 * Everything else goes to the mount unchanged: reads of holes or of the
 * tail, reads of more than PRELOAD_MAX_PIECES pieces, writes.
 *
 * The loan's word (the file's range-lock generation, which the daemon
 * stores before any change of the file's bytes, size or extents) is
 * checked before a read of the members and again once every piece is in:
 * a read that raced a change is done again through the mount, and its
 * result is that one (tests/read_door.c's race sees torn reads without
 * the second check). A change ends the loan; the next read borrows anew.
 *
 * What it needs: read access to the member devices (the program opens
 * them itself: the kernel's permission check, not the daemon's), memory
 * it may lock for the loans (LOAN_BUF), and no write-back cache on the
 * mount. NVMEFS_PRELOAD_READ=0 turns it off.
 */
#undef _FILE_OFFSET_BITS
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/aio_abi.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <poll.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

#include "client_i.h"
#include "preload_i.h"
#include "sys_i.h"

#define LOAN_BUF    (1u << 20)	 /* per connection: the words, then the loan's bytes */
#define WORDS	    4096u	 /* files open through the door at once, per connection */
#define WORDS_BYTES (WORDS * 8u) /* 32 KiB */
#define MAX_FDS	    PRELOAD_MAX_FDS
#define MAX_LOANS   16u /* loans one file keeps while reads are in flight */
#define MAX_PIECES  PRELOAD_MAX_PIECES
#define NDEV	    NVMEFS_WIRE_LAYOUT_DEVS

/* A connection's side of the door: the members, opened by the program. */
struct rconn {
	struct rconn *next;
	struct nvmefs_client *c;
	uint8_t *buf;			     /* LOAN_BUF, shared: WORDS words, then the loan */
	unsigned char used[WORDS];	     /* words lent */
	int devfd[NDEV];		     /* -1: not opened yet; -2: not ours to open */
	struct nvmefs_wire_member mem[NDEV]; /* what the daemon said of them */
	uint64_t alive_ns;		     /* when the connection was last seen open */
};

/* What one LAYOUT lent: never freed while its file is open (a reader may
 * hold it), replaced whole by the next loan. */
struct loan {
	struct loan *prev;
	uint64_t gen, size;
	uint32_t shift, count; /* chunk = 1 << shift */
	struct rconn *rc;
	uint8_t mem[NDEV]; /* by slot: the member (rc->devfd) */
	unsigned users;	   /* reads in flight that use it (preload_mu) */
	struct nvmefs_wire_extent *ext[NDEV];
	uint32_t next[NDEV];
};

struct rfile {
	struct rconn *rc;
	int kfd;   /* our own descriptor of the file: the mount's reads, the registration */
	dev_t dev; /* the file's st_dev and st_ino: that the number still is it */
	ino_t ino;
	unsigned word;	  /* its index in rc->buf */
	unsigned loans;	  /* kept (cur and its prev chain) */
	unsigned refs;	  /* the table's entries, and one per read in flight (preload_mu) */
	struct loan *cur; /* atomic: the newest; NULL: none holds */
	bool failed;	  /* a loan was refused: the mount's from now on (preload_mu) */
};

static struct rconn *conns;
static struct rfile **rfiles; /* by descriptor number, like preload.c's table */
static bool door_off;	      /* NVMEFS_PRELOAD_READ=0 */
static ssize_t (*real_pread)(int, void *, size_t, off_t);

/* Whether fd is what the daemon said of member m: the same device or
 * image, not what the path names in another namespace, or names now. */
static bool same_member(int fd, const struct nvmefs_wire_member *m)
{
	struct stat st;

	if (syscall(SYS_fstat, fd, &st))
		return false;
	return S_ISBLK(st.st_mode)
		       ? st.st_rdev == m->dev && !m->ino
		       : S_ISREG(st.st_mode) && st.st_dev == m->dev && st.st_ino == m->ino;
}

/* ---- the loans ---- */

static _Atomic uint64_t *word_of(const struct rfile *f)
{
	return (_Atomic uint64_t *)(void *)(f->rc->buf + (size_t)f->word * 8);
}

/* Whether loan l still holds. */
static bool holds(const struct rfile *f, const struct loan *l)
{
	return l && __atomic_load_n(word_of(f), __ATOMIC_SEQ_CST) == l->gen;
}

static void loan_free(struct loan *l)
{
	while (l) {
		struct loan *p = l->prev;

		for (unsigned s = 0; s < NDEV; s++)
			free(l->ext[s]);
		free(l);
		l = p;
	}
}

/* Our descriptor of member i of rc (preload_mu held), or -1. Checked at every
 * loan: a number the program closed behind our back (a raw system call)
 * and the kernel gave out again is not the member any more. */
static int member_fd(struct rconn *rc, unsigned i)
{
	const struct nvmefs_wire_member *m = &rc->mem[i];
	long fd;

	if (rc->devfd[i] >= 0 &&
	    (!preload_fd_ours(rc->devfd[i]) || !same_member(rc->devfd[i], m))) {
		preload_fd_mark(rc->devfd[i], false); /* not ours: not to close */
		preload_fd_moved();
		rc->devfd[i] = -1;
	}
	if (rc->devfd[i] != -1)
		return rc->devfd[i] >= 0 ? rc->devfd[i] : -1;
	rc->devfd[i] = -2;
	if (memchr(m->path, '\0', sizeof(m->path)) == NULL)
		return -1;
	fd = syscall(SYS_openat, AT_FDCWD, m->path, O_RDONLY | O_DIRECT | O_CLOEXEC);
	if (fd < 0)
		return -1; /* no read access to the devices: the mount serves */
	if (!same_member((int)fd, m)) {
		sys_close((int)fd);
		return -1;
	}
	rc->devfd[i] = preload_fd_hide((int)fd);
	return rc->devfd[i] >= 0 ? rc->devfd[i] : -1;
}

/* Check the loan in rc->buf (bytes long) and make it a struct loan. */
static struct loan *parse(struct rconn *rc, const uint8_t *b, uint64_t bytes, uint64_t gen)
{
	struct nvmefs_wire_layout h;
	const struct nvmefs_wire_extent *x;
	struct loan *l;
	uint64_t need;

	if (bytes < sizeof(h))
		return NULL;
	memcpy(&h, b, sizeof(h));
	need = sizeof(h) + (uint64_t)h.nmembers * sizeof(struct nvmefs_wire_member) +
	       (uint64_t)h.nexts * sizeof(*x);
	if (need != bytes || !h.nmembers || h.nmembers > NDEV || !h.stripe_count ||
	    h.stripe_count > NDEV || h.chunk_size < 4096 || (h.chunk_size & (h.chunk_size - 1)))
		return NULL;
	l = calloc(1, sizeof(*l));
	if (!l)
		return NULL;
	l->gen = gen;
	l->rc = rc;
	l->size = h.size;
	l->shift = (uint32_t)__builtin_ctz(h.chunk_size);
	l->count = h.stripe_count;
	for (unsigned i = 0; i < h.nmembers; i++) {
		const struct nvmefs_wire_member *m =
			(const void *)(b + sizeof(h) + i * sizeof(struct nvmefs_wire_member));

		if (memcmp(&rc->mem[i], m, sizeof(*m))) {
			/* Another path or identity: opened anew. The old
			 * descriptor stays open (another file's read may be
			 * using it) and ours, as a rare leak. */
			rc->devfd[i] = -1;
			memcpy(&rc->mem[i], m, sizeof(*m));
		}
	}
	for (unsigned s = 0; s < l->count; s++) {
		if (h.devs[s] >= h.nmembers || member_fd(rc, h.devs[s]) < 0)
			goto bad;
		l->mem[s] = h.devs[s];
	}
	x = (const void *)(b + sizeof(h) + h.nmembers * sizeof(struct nvmefs_wire_member));
	for (uint32_t i = 0; i < h.nexts; i++) {
		uint32_t s = x[i].slot;
		void *v;

		if (s >= l->count || !x[i].len ||
		    (l->next[s] &&
		     l->ext[s][l->next[s] - 1].comp_off + l->ext[s][l->next[s] - 1].len >
			     x[i].comp_off))
			goto bad; /* sorted, not overlapping, or not a loan */
		v = realloc(l->ext[s], (l->next[s] + 1) * sizeof(*x));
		if (!v)
			goto bad;
		l->ext[s] = v;
		l->ext[s][l->next[s]++] = x[i];
	}
	return l;
bad:
	loan_free(l);
	return NULL;
}

/* Borrow f's extents anew (preload_mu held): 0, or -1: the mount serves the
 * file from now on (a refused loan would be refused again: a full
 * volume's worth of extents, a file lent 64 times, a member fenced). */
static int borrow(struct rfile *f)
{
	struct rconn *rc = f->rc;
	struct loan *l, **pp;
	int64_t gen = 0, n;

	/* The loans before stay while a read uses one, up to MAX_LOANS. */
	if (f->failed || f->loans >= MAX_LOANS)
		return -1;
	n = nvmefs_cl_layout(rc->c, f->kfd, rc->buf + WORDS_BYTES, LOAN_BUF - WORDS_BYTES,
			     word_of(f), &gen);
	l = n < 0 ? NULL : parse(rc, rc->buf + WORDS_BYTES, (uint64_t)n, (uint64_t)gen);
	if (!l) {
		f->failed = true;
		return -1;
	}
	l->prev = f->cur;
	__atomic_store_n(&f->cur, l, __ATOMIC_RELEASE);
	f->loans++;
	/* The old ones no read uses go now. */
	for (pp = &l->prev; *pp;) {
		struct loan *o = *pp;

		if (o->users) {
			pp = &o->prev;
			continue;
		}
		*pp = o->prev;
		o->prev = NULL;
		loan_free(o);
		f->loans--;
	}
	return 0;
}

/* Whether rc's daemon is gone (its connection closed): its loans' words
 * will never move again, whatever happens to the files. Asked of the
 * socket at most once a millisecond (preload_mu held): not a system call per
 * read, and no daemon is restarted and writing within a millisecond of
 * its death. */
#define ALIVE_NS 1000000ull
static bool gone(struct rconn *rc)
{
	struct nvmefs_client *c = rc->c;
	struct pollfd p = {.fd = c->sock, .events = POLLRDHUP};
	struct timespec now;
	uint64_t ns;

	if (c->dead)
		return true;
	clock_gettime(CLOCK_MONOTONIC, &now);
	ns = (uint64_t)now.tv_sec * 1000000000ull + (uint64_t)now.tv_nsec;
	if (ns - rc->alive_ns < ALIVE_NS)
		return false;
	if (poll(&p, 1, 0) == 1 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)))
		c->dead = true;
	else
		rc->alive_ns = ns;
	return c->dead;
}

/* rc of client c, made on first use (preload_mu held). */
static struct rconn *conn_of(struct nvmefs_client *c)
{
	struct rconn *rc;

	for (rc = conns; rc; rc = rc->next)
		if (rc->c == c)
			return rc;
	rc = calloc(1, sizeof(*rc));
	if (!rc)
		return NULL;
	if (nvmefs_buf_alloc(c, LOAN_BUF, -1, (void **)&rc->buf)) {
		free(rc);
		return NULL;
	}
	for (unsigned i = 0; i < NDEV; i++)
		rc->devfd[i] = -1;
	rc->c = c;
	rc->next = conns;
	conns = rc;
	return rc;
}

/* Let f go (preload_mu held, no reference left). */
static void rfile_free(struct rfile *f)
{
	/* A word the daemon may still store into is never lent again. */
	if (f->rc->c->dead || !nvmefs_unreg_fd(f->rc->c, f->kfd))
		f->rc->used[f->word] = 0;
	if (f->kfd >= 0)
		preload_fd_close_ours(f->kfd);
	loan_free(f->cur);
	free(f);
}

static void rfile_put(struct rfile *f)
{
	if (!--f->refs)
		rfile_free(f);
}

/* ---- the table ---- */

static struct rfile *rfile_at(int fd)
{
	return fd >= 0 && fd < MAX_FDS && rfiles ? __atomic_load_n(&rfiles[fd], __ATOMIC_ACQUIRE)
						 : NULL;
}

/* fd's entry taken from the table (preload_mu held). */
static void unlist(int fd)
{
	struct rfile *f = rfile_at(fd);

	if (!f)
		return;
	__atomic_store_n(&rfiles[fd], NULL, __ATOMIC_RELEASE);
	rfile_put(f);
}

/* Whether fd still is f's file: a number closed behind our back (a raw
 * system call) and given out again is not. */
static bool same_file(int fd, const struct rfile *f)
{
	return sys_ident_is(fd, f->dev, f->ino);
}

void preload_read_open(int fd, int flags)
{
	struct nvmefs_client *c;
	struct statfs sf;
	struct rconn *rc;
	struct rfile *f;
	mode_t mode;
	dev_t dev;
	ino_t ino;
	unsigned w;

	if (door_off || (flags & O_ACCMODE) != O_RDONLY || !(flags & O_DIRECT) || fd < 0 ||
	    fd >= MAX_FDS || fstatfs(fd, &sf) || sf.f_type != PRELOAD_FUSE_MAGIC ||
	    sys_ident_mode(fd, &dev, &ino, &mode) || !S_ISREG(mode))
		return;
	pthread_mutex_lock(&preload_mu);
	unlist(fd); /* a number closed behind our back */
	if (!rfiles)
		__atomic_store_n(&rfiles, calloc(MAX_FDS, sizeof(*rfiles)), __ATOMIC_RELEASE);
	c = rfiles ? preload_client(dev, fd) : NULL;
	rc = c ? conn_of(c) : NULL;
	f = rc ? calloc(1, sizeof(*f)) : NULL;
	if (!f)
		goto out;
	for (w = 0; w < WORDS && rc->used[w]; w++)
		;
	f->kfd = w < WORDS ? (int)syscall(SYS_fcntl, fd, F_DUPFD_CLOEXEC, 3l) : -1;
	if (f->kfd >= 0)
		f->kfd = preload_fd_hide(f->kfd);
	if (f->kfd < 0 || nvmefs_reg_fd(c, f->kfd)) {
		if (f->kfd >= 0)
			preload_fd_close_ours(f->kfd);
		free(f);
		goto out;
	}
	rc->used[w] = 1;
	f->rc = rc;
	f->word = w;
	f->dev = dev;
	f->ino = ino;
	f->refs = 1;
	if (borrow(f)) {
		rfile_free(f);
		goto out;
	}
	__atomic_store_n(&rfiles[fd], f, __ATOMIC_RELEASE);
out:
	pthread_mutex_unlock(&preload_mu);
}

void preload_read_dup(int fd, int to)
{
	struct rfile *f;

	if (!rfile_at(fd) || to < 0 || to >= MAX_FDS)
		return;
	pthread_mutex_lock(&preload_mu);
	unlist(to);
	f = rfile_at(fd);
	if (f && same_file(to, f)) {
		f->refs++;
		__atomic_store_n(&rfiles[to], f, __ATOMIC_RELEASE);
	}
	pthread_mutex_unlock(&preload_mu);
}

int preload_rd_evict_locked(int fd)
{
	int to;

	if (!preload_fd_ours(fd))
		return fd;
	preload_fd_mark(fd, false);
	to = preload_fd_hide(fd); /* closes fd */
	preload_fd_moved();
	for (struct rconn *rc = conns; rc; rc = rc->next)
		for (unsigned i = 0; i < NDEV; i++)
			if (rc->devfd[i] == fd)
				__atomic_store_n(&rc->devfd[i], to, __ATOMIC_RELEASE);
	for (int i = 0; rfiles && i < MAX_FDS; i++) {
		struct rfile *f = rfiles[i];

		if (f && f->kfd == fd) {
			if (to >= 0)
				nvmefs_cl_reg_renumber(f->rc->c, fd, to);
			f->kfd = to;
			f->failed |= to < 0;
		}
	}
	return to;
}

void preload_read_close(int fd)
{
	if (!rfile_at(fd))
		return;
	pthread_mutex_lock(&preload_mu);
	unlist(fd);
	pthread_mutex_unlock(&preload_mu);
}

/* The child of a fork has none of our connections, reads or rings: every
 * entry goes, its descriptors closed (they are ours), nothing sent
 * (preload_mu held). */
void preload_read_fork_child(void)
{
	for (int fd = 0; rfiles && fd < MAX_FDS; fd++) {
		struct rfile *f = rfiles[fd];

		if (f) {
			rfiles[fd] = NULL;
			/* A number the table holds twice (dup) is closed once. */
			if (preload_fd_marked(f->kfd))
				preload_fd_close_ours(f->kfd);
		}
	}
	for (struct rconn *rc = conns; rc; rc = rc->next)
		for (unsigned i = 0; i < NDEV; i++)
			if (rc->devfd[i] >= 0 && preload_fd_marked(rc->devfd[i]))
				preload_fd_close_ours(rc->devfd[i]);
	conns = NULL; /* their memory stays: the parent's loans were in it */
}

/* ---- mapping ---- */

/* One piece of a read: bytes of one member. */
struct piece {
	int dfd;
	uint64_t doff, len, boff;
};

/* The written extent of slot s holding comp, or NULL. */
static const struct nvmefs_wire_extent *find(const struct loan *l, uint32_t s, uint64_t comp)
{
	uint32_t lo = 0, hi = l->next[s];

	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;

		if (l->ext[s][mid].comp_off <= comp)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (!lo || comp >= l->ext[s][lo - 1].comp_off + l->ext[s][lo - 1].len)
		return NULL;
	return &l->ext[s][lo - 1];
}

/* Split [off, off + len) into pieces of members (p, at most MAX_PIECES)
 * when all of it lies in written extents inside the loan's size: their
 * count, or 0 (the mount's: a hole, the tail, an unwritten extent). */
static unsigned map(const struct loan *l, uint64_t off, uint64_t len, struct piece *p)
{
	uint64_t end = off + len, chunk = 1ull << l->shift, boff = 0;
	unsigned n = 0;
	int dfd;

	if (!len || end < off || end > l->size)
		return 0;
	while (off < end) {
		uint64_t u = off >> l->shift, in = off & (chunk - 1);
		uint32_t s = (uint32_t)(u % l->count);
		uint64_t comp = ((u / l->count) << l->shift) + in, take = chunk - in, doff;
		const struct nvmefs_wire_extent *e = find(l, s, comp);

		if (!e)
			return 0;
		if (take > end - off)
			take = end - off;
		if (take > e->comp_off + e->len - comp)
			take = e->comp_off + e->len - comp;
		doff = e->dev_off + (comp - e->comp_off);
		dfd = __atomic_load_n(&l->rc->devfd[l->mem[s]], __ATOMIC_ACQUIRE);
		if (dfd < 0)
			return 0;
		if (n && p[n - 1].dfd == dfd && p[n - 1].doff + p[n - 1].len == doff) {
			p[n - 1].len += take; /* the buffer is contiguous too */
		} else {
			if (n == MAX_PIECES)
				return 0;
			p[n++] =
				(struct piece){.dfd = dfd, .doff = doff, .len = take, .boff = boff};
		}
		off += take;
		boff += take;
	}
	return n;
}

/* fd's door file, with a reference for the caller, and its loan when it
 * holds (borrowed anew when a change ended it); NULL: the mount's. */
static struct rfile *get(int fd, struct loan **lp)
{
	struct rfile *f = rfile_at(fd);
	struct loan *l = NULL;

	if (!f)
		return NULL;
	pthread_mutex_lock(&preload_mu);
	f = rfile_at(fd);
	if (f && !same_file(fd, f)) {
		unlist(fd);
		f = NULL;
	}
	if (f && (f->failed || gone(f->rc)))
		f = NULL;
	if (f) {
		l = __atomic_load_n(&f->cur, __ATOMIC_ACQUIRE);
		if (!holds(f, l) && (borrow(f) || !holds(f, l = f->cur))) {
			f = NULL;
		} else {
			f->refs++;
			l->users++;
		}
	}
	pthread_mutex_unlock(&preload_mu);
	*lp = l;
	return f;
}

static void put(struct rfile *f, struct loan *l)
{
	pthread_mutex_lock(&preload_mu);
	l->users--;
	rfile_put(f);
	pthread_mutex_unlock(&preload_mu);
}

/* ---- one read through the door ---- */

static struct preload_rd *dreq_new(struct rfile *f, struct loan *l, const struct piece *p,
				   unsigned n, uint64_t pos, uint64_t len, uint64_t buf)
{
	struct preload_rd *d = calloc(1, sizeof(*d) + n * sizeof(d->sub[0]));

	if (!d)
		return NULL;
	*d = (struct preload_rd){
		.f = f, .l = l, .pos = pos, .len = len, .buf = buf, .n = n, .left = n};
	for (unsigned i = 0; i < n; i++) {
		d->sub[i].aio_data = (uint64_t)(uintptr_t)d;
		d->sub[i].aio_lio_opcode = IOCB_CMD_PREAD;
		d->sub[i].aio_fildes = (uint32_t)p[i].dfd;
		d->sub[i].aio_buf = buf + p[i].boff;
		d->sub[i].aio_nbytes = p[i].len;
		d->sub[i].aio_offset = (int64_t)p[i].doff;
	}
	return d;
}

/* Piece sub of d read res bytes: whether it was the last. pmu held for
 * a context's read. */
bool preload_rd_piece_done(struct preload_rd *d, const struct iocb *sub, int64_t res)
{
	if (res != (int64_t)sub->aio_nbytes)
		d->failed = true;
	return !--d->left;
}

/* The pieces from i on, read here one after another (the ring took no
 * more of them). */
void preload_rd_pieces_sync(struct preload_rd *d, unsigned i)
{
	for (; i < d->n; i++) {
		const struct iocb *b = &d->sub[i];
		ssize_t r = REAL(pread)((int)b->aio_fildes, (void *)(uintptr_t)b->aio_buf,
					b->aio_nbytes, b->aio_offset);

		preload_rd_piece_done(d, b, r < 0 ? -errno : r);
	}
}

struct preload_rd *preload_rd_new(int fd, uint64_t pos, uint64_t len, uint64_t buf)
{
	/* Before the members' numbers are read: a move of one after it is seen. */
	unsigned long mv = preload_fd_moves();
	struct piece p[MAX_PIECES];
	struct preload_rd *d = NULL;
	struct loan *l;
	struct rfile *f = get(fd, &l);
	unsigned n = f ? map(l, pos, len, p) : 0;

	if (n)
		d = dreq_new(f, l, p, n, pos, len, buf);
	if (!d && f)
		put(f, l);
	if (d) {
		d->pfd = fd;
		d->moves = mv;
	}
	return d;
}

void preload_rd_free(struct preload_rd *d)
{
	put(d->f, d->l);
	free(d);
}

bool preload_rd_fd(int fd)
{
	return rfile_at(fd) != NULL;
}

bool preload_rd_any(void)
{
	return __atomic_load_n(&rfiles, __ATOMIC_ACQUIRE) != NULL;
}

/* Every piece of d read: the read's result, the mount's when a piece
 * failed, the file changed meanwhile (the loan's word moved) or one of
 * our descriptors did. Through the program's descriptor while it is the
 * file's, else ours. */
int64_t preload_rd_result(const struct preload_rd *d)
{
	int fd = same_file(d->pfd, d->f) ? d->pfd : d->f->kfd;
	ssize_t n;

	if (!d->failed && holds(d->f, d->l) && preload_fd_moves() == d->moves)
		return (int64_t)d->len;
	if (fd != d->pfd && (fd < 0 || !preload_fd_ours(fd) || !same_file(fd, d->f)))
		return -EBADF;
	n = REAL(pread)(fd, (void *)(uintptr_t)d->buf, d->len, (off_t)d->pos);
	return n < 0 ? -errno : n;
}

/* A thread's own ring for the pieces of its preads (0: none yet). */
static __thread aio_context_t tctx;
static pthread_key_t tctx_key;

static void tctx_free(void *v)
{
	(void)v;
	if (tctx)
		syscall(SYS_io_destroy, tctx);
	tctx = 0;
}

/* The pieces of a pread, read at once on the thread's ring. */
static void pieces_run(struct preload_rd *d)
{
	struct iocb *v[MAX_PIECES];
	struct io_event ev[MAX_PIECES];
	int r = -1, got = 0;

	if (!tctx && !syscall(SYS_io_setup, MAX_PIECES, &tctx))
		pthread_setspecific(tctx_key, &tctx);
	for (unsigned i = 0; i < d->n; i++)
		v[i] = &d->sub[i];
	if (tctx)
		r = (int)syscall(SYS_io_submit, tctx, d->n, v);
	if (r < 0)
		r = 0;
	preload_rd_pieces_sync(d, (unsigned)r);
	while (got < r) {
		int k = (int)syscall(SYS_io_getevents, tctx, r - got, r - got, ev, NULL);

		if (k < 0 && errno != EINTR)
			abort(); /* the ring is ours: it cannot fail */
		for (int i = 0; i < k; i++)
			preload_rd_piece_done(d, (const struct iocb *)(uintptr_t)ev[i].obj,
					      ev[i].res);
		got += k > 0 ? k : 0;
	}
}

/* Read through the door: the bytes, -1 with errno, or -2 (not the door's:
 * the mount's then). */
static ssize_t door_pread(int fd, void *buf, size_t len, uint64_t pos)
{
	struct preload_rd *d = preload_rd_new(fd, pos, len, (uint64_t)(uintptr_t)buf);
	int64_t res;

	if (!d)
		return -2;
	pieces_run(d);
	res = preload_rd_result(d);
	preload_rd_free(d);
	if (res < 0) {
		errno = (int)-res;
		return -1;
	}
	return res;
}

ssize_t preload_rd_pread(int fd, void *buf, size_t len, off_t pos)
{
	return pos >= 0 && rfile_at(fd) ? door_pread(fd, buf, len, (uint64_t)pos) : -2;
}

EXPORT ssize_t pread(int fd, void *buf, size_t len, off_t pos)
{
	ssize_t n = preload_rd_pread(fd, buf, len, pos);

	return n != -2 ? n : REAL(pread)(fd, buf, len, pos);
}

EXPORT ssize_t pread64(int fd, void *buf, size_t len, off_t pos) __attribute__((alias("pread")));

void preload_read_init(void)
{
	const char *e = getenv("NVMEFS_PRELOAD_READ");

	door_off = e && !strcmp(e, "0");
	RESOLVE(pread);
	pthread_key_create(&tctx_key, tctx_free);
}
