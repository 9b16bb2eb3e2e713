// SPDX-License-Identifier: MIT
/*
 * The native door: the daemon's side of libnvmefs (include/libnvmefs.h,
 * protocol in include/nvmefs/wire.h, design in docs/NATIVE.md).
 *
 * One thread accepts connections on an abstract Unix socket; each client
 * gets a thread of its own that receives its messages, checks them, calls
 * the core (nvmefs_data_read_into / nvmefs_data_write_from on the client's
 * shared memory, nvmefs_journal_commit for fsync) and sends completions.
 * I/O completions arrive on the engine's threads: they only queue the
 * request and wake the client's thread, which does everything that may
 * block (asking the kernel to drop cached pages, sending).
 *
 * What a client reaches, and why it may:
 *  - files it proved it opened through the mount: it sends the descriptor
 *    (SCM_RIGHTS); the descriptor must be of this mount (st_dev), a regular
 *    file, not O_PATH; its access mode decides reads and writes. The door
 *    then holds the file open itself (nvmefs_ns_open) until it is
 *    unregistered or the client goes.
 *  - memory it shares: a memfd sealed against shrinking (else the client
 *    could truncate it under the daemon's mapping and fault the daemon),
 *    mapped here; every request's range is checked against its size.
 * A message that breaks the protocol fails alone (a -errno reply or
 * completion); a client that cannot be answered is disconnected. A client
 * that goes away has its requests in flight finished before its files and
 * mappings are given back.
 */
#include "native_i.h"
#include "data_i.h"
#include "journal_i.h"
#include "namei.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <unistd.h>

#include "nvmefs/util.h"
#include "nvmefs/wire.h"

#define MAX_CLIENTS 1024u
#define MAX_OUT	    64u /* messages queued for a client before it is read no more */
#define RELAXED	    memory_order_relaxed

struct nfile {
	struct nvmefs_inode *in; /* held open (nvmefs_ns_open); NULL: slot free */
	uint64_t ino;
	unsigned may;		      /* NVMEFS_WIRE_MAY_* */
	struct nvmefs_read_note note; /* relatime, as a handle of the mount keeps it */
	unsigned inflight;	      /* requests naming it (client thread) */
};

struct nregion {
	uint8_t *base; /* mapping; NULL: slot free */
	uint64_t size;
	unsigned inflight;
};

struct nclient;

struct nreq;

/* One piece of a request: what the core is asked in one call. */
struct npiece {
	struct nreq *r;
	uint64_t off, len, mem_off;
	int64_t res;
};

/* One request of a SUBMIT, from its check to its completion. */
struct nreq {
	struct nclient *c;
	struct nreq *next; /* the client's list of completed requests */
	bool sent;	   /* its completion went out from the engine's thread */
	struct nvmefs_wire_sqe e;
	atomic_uint left; /* pieces not yet done, and one for the issuer */
	unsigned npieces;
	struct npiece p[];
};

struct nmsg {
	size_t len;
	uint8_t data[];
};

struct nclient {
	struct nvmefs_native *srv;
	struct nclient *next; /* srv->clients (srv->mu) */
	int sock, wake;
	pthread_t thread;
	atomic_bool exited;
	struct nvmefs_cred cred; /* SO_PEERCRED's, at the connect */
	/* The client thread's own. */
	struct nfile *files;
	uint32_t nfiles;
	struct nregion *regions;
	uint32_t nregions;
	unsigned inflight;
	struct nmsg *out[MAX_OUT]; /* messages not yet sent, oldest first */
	unsigned nout;
	struct nvmefs_wire_cqe *cq; /* completions not yet in a message */
	unsigned ncq, cqcap;
	/* mu: requests the engine completed, newest first; whether the
	 * client's thread has a wake-up coming for them; whether it is
	 * finishing (no completion goes out but through it then). */
	pthread_mutex_t mu;
	struct nreq *done;
	bool wake_pending, closing;
};

struct nvmefs_native {
	struct nvmefs_vol *vol;
	char *mountpoint;
	nvmefs_native_inval_fn inval;
	void *inval_arg;
	int lfd, stop; /* listening socket; eventfd, readable once stopping */
	pthread_t acceptor;
	pthread_mutex_t mu;
	struct nclient *clients; /* mu */
	unsigned nclients;	 /* mu */
	dev_t dev;		 /* mu: st_dev of the mount, once known */
	bool dev_known;		 /* mu */
};

static void count(atomic_uint_fast64_t *c, uint64_t n)
{
	atomic_fetch_add_explicit(c, n, RELAXED);
}

/* ---- sending ---- */

static struct nvmefs_wire_hdr msg_hdr(uint16_t type, uint32_t cnt, int64_t arg, int64_t arg2)
{
	return (struct nvmefs_wire_hdr){.magic = NVMEFS_WIRE_MAGIC,
					.version = NVMEFS_WIRE_VERSION,
					.type = type,
					.count = cnt,
					.arg = arg,
					.arg2 = arg2};
}

/* Queue a message: the header and len bytes of body (cnt entries). */
static int queue_msg(struct nclient *c, uint16_t type, int64_t arg, int64_t arg2, const void *body,
		     uint32_t cnt, size_t len)
{
	struct nvmefs_wire_hdr h = msg_hdr(type, cnt, arg, arg2);
	struct nmsg *m;

	if (c->nout == MAX_OUT)
		return -ENOBUFS;
	m = malloc(sizeof(*m) + sizeof(h) + len);
	if (!m)
		return -ENOMEM;
	m->len = sizeof(h) + len;
	memcpy(m->data, &h, sizeof(h));
	if (len)
		memcpy(m->data + sizeof(h), body, len);
	c->out[c->nout++] = m;
	return 0;
}

static int reply(struct nclient *c, int64_t arg, int64_t arg2)
{
	return queue_msg(c, NVMEFS_WIRE_REPLY, arg, arg2, NULL, 0, 0);
}

/* Completions gathered so far, into COMPLETE messages while there is room. */
static int queue_cq(struct nclient *c)
{
	unsigned i = 0;
	int ret = 0;

	while (i < c->ncq && c->nout < MAX_OUT) {
		unsigned n = c->ncq - i;

		if (n > NVMEFS_WIRE_MAX_BATCH)
			n = NVMEFS_WIRE_MAX_BATCH;
		ret = queue_msg(c, NVMEFS_WIRE_COMPLETE, 0, 0, c->cq + i, n, n * sizeof(*c->cq));
		if (ret)
			break;
		i += n;
	}
	if (i) /* before the first completion c->cq is NULL */
		memmove(c->cq, c->cq + i, (c->ncq - i) * sizeof(*c->cq));
	c->ncq -= i;
	return ret;
}

/* Send what the socket takes now. Returns 0, or -errno: the client is gone. */
static int flush(struct nclient *c)
{
	int ret = queue_cq(c);

	while (!ret && c->nout) {
		ssize_t n =
			send(c->sock, c->out[0]->data, c->out[0]->len, MSG_DONTWAIT | MSG_NOSIGNAL);

		if (n < 0)
			return errno == EAGAIN ? 0 : -errno;
		free(c->out[0]);
		memmove(c->out, c->out + 1, --c->nout * sizeof(c->out[0]));
		ret = queue_cq(c);
	}
	return ret;
}

/* Note a completion for user_data (sent by the next flush). The test
 * daemon after its emulated power cut answers nothing, as a dead machine. */
static int complete(struct nclient *c, uint64_t user_data, int64_t res)
{
	struct nvmefs_vol *vol = c->srv->vol;

	if (vol->test_mute && vol->test_mute())
		return 0;
	if (c->ncq == c->cqcap) {
		unsigned cap = c->cqcap ? 2 * c->cqcap : 64;
		void *v = realloc(c->cq, cap * sizeof(*c->cq));

		if (!v)
			return -ENOMEM;
		c->cq = v;
		c->cqcap = cap;
	}
	c->cq[c->ncq++] = (struct nvmefs_wire_cqe){.user_data = user_data, .res = res};
	return 0;
}

/* ---- requests ---- */

/*
 * The result of a request from its pieces': the first error, else the
 * bytes moved from its start up to the first short piece (a read at the
 * end of the file), so that what is reported is all in the buffer.
 */
static int64_t req_result(const struct nreq *r)
{
	int64_t sum = 0;

	for (unsigned i = 0; i < r->npieces; i++)
		if (r->p[i].res < 0)
			return r->p[i].res;
	for (unsigned i = 0; i < r->npieces; i++) {
		sum += r->p[i].res;
		if ((uint64_t)r->p[i].res < r->p[i].len)
			break;
	}
	return sum;
}

/* The counters of a request done with res. */
static void count_done(struct nvmefs_vol *vol, const struct nreq *r, int64_t res)
{
	bool wr = r->e.op == NVMEFS_WIRE_WRITE;

	if (res > 0) {
		count(wr ? &vol->native.writes : &vol->native.reads, 1);
		count(wr ? &vol->native.write_bytes : &vol->native.read_bytes, (uint64_t)res);
	}
}

/*
 * A read's completion sent from the engine's thread that finished it (c->mu
 * held): one hand-off less than waking the client's thread to send it
 * (docs/NATIVE.md, "Completions"). Only reads, which need nothing done
 * after them (a write's pages must be dropped from the kernel's cache
 * first); never while the client's thread is finishing, or while the test
 * daemon plays dead. The send does not block: a full socket, or any error,
 * leaves the request to the client's thread as before. The client's thread
 * still does the bookkeeping (counters, in-flight counts) when it next
 * reaps: before it acts on any message, so the next SUBMIT finds the slots
 * free.
 */
static bool send_now(struct nclient *c, struct nreq *r)
{
	struct nvmefs_vol *vol = c->srv->vol;
	struct {
		struct nvmefs_wire_hdr h;
		struct nvmefs_wire_cqe e;
	} m;

	if (r->e.op != NVMEFS_WIRE_READ || c->closing || (vol->test_mute && vol->test_mute()))
		return false;
	m.h = msg_hdr(NVMEFS_WIRE_COMPLETE, 1, 0, 0);
	m.e = (struct nvmefs_wire_cqe){.user_data = r->e.user_data, .res = req_result(r)};
	if (send(c->sock, &m, sizeof(m), MSG_DONTWAIT | MSG_NOSIGNAL) != (ssize_t)sizeof(m))
		return false;
	count_done(vol, r, m.e.res); /* before the client can look at them */
	count(&vol->native.direct_completions, 1);
	return true;
}

/* A request's last reference went: its completion goes out now (a read),
 * or it goes to its client's thread. */
static void req_put(struct nreq *r)
{
	struct nclient *c = r->c;
	uint64_t one = 1;
	bool wake;

	if (atomic_fetch_sub(&r->left, 1) != 1)
		return;
	pthread_mutex_lock(&c->mu);
	r->sent = send_now(c, r);
	r->next = c->done;
	c->done = r;
	/* One wake-up per batch: none while one is coming (the client's
	 * thread reads the eventfd before it takes the list); none for a
	 * request already answered. */
	wake = !r->sent && !c->wake_pending;
	if (wake)
		c->wake_pending = true;
	pthread_mutex_unlock(&c->mu);
	if (wake && write(c->wake, &one, sizeof(one)) < 0)
		nvmefs_err("native: cannot wake a client's thread: %s", strerror(errno));
}

/* A piece is done: on an engine thread, or the client's when it ends early. */
static void piece_done(void *ctx, ssize_t res, const void *data)
{
	struct npiece *p = ctx;

	(void)data;
	p->res = res;
	req_put(p->r);
}

static bool aligned(uint64_t v)
{
	return !(v & (NVMEFS_BLOCK - 1));
}

/*
 * Cut [off, off + len) into what the core moves in one call each. A
 * block-aligned range (buffer, offset and length) is one piece and no
 * copy. When buffer and offset are misaligned alike, the unaligned head
 * and tail go through pool buffers and the middle is still zero copy;
 * otherwise pieces of NVMEFS_IO_MAX, each through a pool buffer.
 * Fills p (room for max) and returns the count.
 */
static unsigned plan(uint64_t mem, uint64_t off, uint64_t len, struct npiece *p, unsigned max)
{
	unsigned n = 0;

	if ((mem & (NVMEFS_BLOCK - 1)) == (off & (NVMEFS_BLOCK - 1))) {
		uint64_t head = aligned(off) ? 0 : NVMEFS_BLOCK - (off & (NVMEFS_BLOCK - 1));
		uint64_t mid, tail;

		if (head > len)
			head = len;
		mid = (len - head) & ~(uint64_t)(NVMEFS_BLOCK - 1);
		tail = len - head - mid;
		if (head)
			p[n++] = (struct npiece){.off = off, .len = head, .mem_off = mem};
		if (mid)
			p[n++] = (struct npiece){
				.off = off + head, .len = mid, .mem_off = mem + head};
		if (tail)
			p[n++] = (struct npiece){
				.off = off + head + mid, .len = tail, .mem_off = mem + head + mid};
		return n;
	}
	for (uint64_t at = 0; at < len && n < max; at += NVMEFS_IO_MAX) {
		uint64_t l = len - at < NVMEFS_IO_MAX ? len - at : NVMEFS_IO_MAX;

		p[n++] = (struct npiece){.off = off + at, .len = l, .mem_off = mem + at};
	}
	return n;
}

/* Pieces plan() may make for a request of len bytes. */
static unsigned plan_max(uint64_t len)
{
	uint64_t n = (len + NVMEFS_IO_MAX - 1) / NVMEFS_IO_MAX;

	return n < 3 ? 3 : (unsigned)n;
}

static void inval(struct nclient *c, uint64_t ino, int64_t off, int64_t len);

/* Start a checked READ or WRITE e on the client's file and region. */
static void start_io(struct nclient *c, const struct nvmefs_wire_sqe *e)
{
	struct nvmefs_vol *vol = c->srv->vol;
	struct nfile *f = &c->files[e->handle];
	uint8_t *mem = c->regions[e->region].base;
	bool wr = e->op == NVMEFS_WIRE_WRITE;
	unsigned max = plan_max(e->len);
	struct nreq *r = calloc(1, sizeof(*r) + max * sizeof(r->p[0]));
	int ret = 0;

	if (!r) {
		complete(c, e->user_data, -ENOMEM);
		return;
	}
	if (wr)
		ret = nvmefs_ns_read_only(vol) ? -EROFS
					       : nvmefs_ns_kill_privs(vol, f->in, &c->cred);
	if (ret > 0) { /* the mode changed: the kernel's copy is stale */
		inval(c, f->ino, -1, 0);
		ret = 0;
	}
	if (ret) {
		free(r);
		complete(c, e->user_data, ret);
		return;
	}
	r->c = c;
	r->e = *e;
	r->npieces = plan((uint64_t)(uintptr_t)mem + e->mem_off, e->off, e->len, r->p, max);
	for (unsigned i = 0; i < r->npieces; i++) {
		r->p[i].r = r;
		r->p[i].mem_off -= (uint64_t)(uintptr_t)mem;
	}
	atomic_init(&r->left, r->npieces + 1);
	c->inflight++;
	f->inflight++;
	c->regions[e->region].inflight++;
	for (unsigned i = 0; i < r->npieces; i++) {
		struct npiece *p = &r->p[i];

		/* Regions are page-aligned mappings: the offsets tell. */
		if (!aligned(p->off | p->len | p->mem_off)) {
			count(&vol->native.copied_requests, 1);
			count(&vol->native.copied_bytes, p->len);
		}
		if (wr)
			nvmefs_data_write_from(vol, f->in, mem + p->mem_off, p->len, p->off, 0,
					       piece_done, p);
		else
			nvmefs_data_read_into(vol, f->in, mem + p->mem_off, p->len, p->off,
					      piece_done, p);
	}
	req_put(r);
}

/* One file's range written by completed requests, for one invalidation. */
struct span {
	uint32_t handle;
	uint64_t start, end;
};

#define MAX_SPANS 16

/* Ask the kernel to drop what it caches of the file (native_i.h). */
static void inval(struct nclient *c, uint64_t ino, int64_t off, int64_t len)
{
	count(&c->srv->vol->native.invals, 1);
	c->srv->inval(c->srv->inval_arg, ino, off, len);
}

/* Add a written range to v (n of MAX_SPANS): merged with its file's; a
 * file beyond MAX_SPANS is invalidated whole now. */
static void span_add(struct nclient *c, struct span *v, unsigned *n, uint32_t handle, uint64_t off,
		     uint64_t len)
{
	for (unsigned i = 0; i < *n; i++) {
		if (v[i].handle == handle) {
			v[i].start = off < v[i].start ? off : v[i].start;
			v[i].end = off + len > v[i].end ? off + len : v[i].end;
			return;
		}
	}
	if (*n < MAX_SPANS)
		v[(*n)++] = (struct span){handle, off, off + len};
	else
		inval(c, c->files[handle].ino, 0, 0);
}

/*
 * Finish the requests the engine completed: counters, and for the files
 * written, the kernel's pages and attributes dropped before the client
 * hears of it, so that a reader through the mount who starts after the
 * completion sees the bytes, the size and the mtime.
 */
static void reap(struct nclient *c)
{
	struct nvmefs_vol *vol = c->srv->vol;
	struct span spans[MAX_SPANS];
	unsigned nspans = 0;
	struct nreq *r, *next, *list;

	pthread_mutex_lock(&c->mu);
	list = c->done;
	c->done = NULL;
	c->wake_pending = false;
	pthread_mutex_unlock(&c->mu);
	for (r = list; r; r = r->next)
		if (r->e.op == NVMEFS_WIRE_WRITE)
			span_add(c, spans, &nspans, r->e.handle, r->e.off, r->e.len);
	for (unsigned i = 0; i < nspans; i++)
		inval(c, c->files[spans[i].handle].ino, (int64_t)spans[i].start,
		      (int64_t)(spans[i].end - spans[i].start));
	for (r = list; r; r = next) {
		next = r->next;
		c->inflight--;
		c->files[r->e.handle].inflight--;
		c->regions[r->e.region].inflight--;
		if (!r->sent) {
			int64_t res = req_result(r);

			count_done(vol, r, res);
			complete(c, r->e.user_data, res);
		}
		free(r);
	}
}

/* ---- control messages ---- */

/* st_dev of the mount, found at the first need: not at start, when the
 * mount's root cannot be looked at yet. */
static int mount_dev(struct nvmefs_native *srv, dev_t *dev)
{
	struct stat st;
	int ret = 0;

	pthread_mutex_lock(&srv->mu);
	if (!srv->dev_known) {
		if (stat(srv->mountpoint, &st)) {
			ret = -errno;
		} else {
			srv->dev = st.st_dev;
			srv->dev_known = true;
		}
	}
	*dev = srv->dev;
	pthread_mutex_unlock(&srv->mu);
	return ret;
}

static int do_hello(struct nclient *c)
{
	struct nvmefs_wire_hello h = {.block = NVMEFS_BLOCK,
				      .max_inflight = NVMEFS_WIRE_MAX_INFLIGHT,
				      .max_batch = NVMEFS_WIRE_MAX_BATCH,
				      .max_len = NVMEFS_WIRE_MAX_REGION};
	dev_t dev;
	int ret = mount_dev(c->srv, &dev);

	h.dev = dev;
	memcpy(h.uuid, c->srv->vol->label.uuid, sizeof(h.uuid));
	return queue_msg(c, NVMEFS_WIRE_REPLY, ret, 0, &h, 0, ret ? 0 : sizeof(h));
}

/* What the descriptor fd proves: 0 with *ino and *may, or -errno. */
static int check_fd(struct nclient *c, int fd, uint64_t *ino, unsigned *may)
{
	int fl = fcntl(fd, F_GETFL);
	struct statx stx;
	dev_t dev;
	int ret;

	if (fl < 0 || (fl & O_PATH))
		return -EBADF; /* O_PATH opens prove no access */
	/* What the kernel knows already: no request to the file's filesystem,
	 * which may be another FUSE daemon that never answers. */
	if (statx(fd, "", AT_EMPTY_PATH | AT_STATX_DONT_SYNC, STATX_TYPE | STATX_INO, &stx))
		return -errno;
	ret = mount_dev(c->srv, &dev);
	if (ret)
		return ret;
	if (makedev(stx.stx_dev_major, stx.stx_dev_minor) != dev)
		return -EXDEV;
	if (!S_ISREG(stx.stx_mode) || stx.stx_ino > NVMEFS_INO_MAX)
		return -EINVAL; /* directories, devices, the control files */
	switch (fl & O_ACCMODE) {
	case O_RDONLY:
		*may = NVMEFS_WIRE_MAY_READ;
		break;
	case O_WRONLY:
		*may = NVMEFS_WIRE_MAY_WRITE;
		break;
	default:
		*may = NVMEFS_WIRE_MAY_READ | NVMEFS_WIRE_MAY_WRITE;
	}
	/* With the write-back cache the kernel owns sizes and times, and
	 * would not take what a native write changes. */
	if ((*may & NVMEFS_WIRE_MAY_WRITE) && c->srv->vol->writeback)
		return -EOPNOTSUPP;
	*ino = stx.stx_ino;
	return 0;
}

/* A free slot of an array of n, grown when full: its index, or -ENOMEM. */
static int64_t slot(void **v, uint32_t *n, size_t esz, bool (*used)(const void *))
{
	void *nv;

	for (uint32_t i = 0; i < *n; i++)
		if (!used((char *)*v + i * esz))
			return i;
	if (*n >= 65536)
		return -EMFILE;
	nv = realloc(*v, (*n + 16) * esz);
	if (!nv)
		return -ENOMEM;
	memset((char *)nv + *n * esz, 0, 16 * esz);
	*v = nv;
	*n += 16;
	return *n - 16;
}

static bool file_used(const void *f)
{
	return ((const struct nfile *)f)->in != NULL;
}

static bool region_used(const void *r)
{
	return ((const struct nregion *)r)->base != NULL;
}

static int64_t do_reg_fd(struct nclient *c, int fd, unsigned *may)
{
	struct nvmefs_vol *vol = c->srv->vol;
	struct nvmefs_inode *in;
	uint64_t ino = 0;
	int64_t i;
	int ret;

	if (fd < 0)
		return -EBADMSG;
	ret = check_fd(c, fd, &ino, may);
	if (ret)
		return ret;
	i = slot((void **)&c->files, &c->nfiles, sizeof(*c->files), file_used);
	if (i < 0)
		return i;
	ret = nvmefs_ns_open(vol, ino, false, &in);
	if (ret)
		return ret;
	if (!S_ISREG(in->mode)) {
		nvmefs_ns_release(vol, ino);
		return -EINVAL;
	}
	c->files[i] = (struct nfile){.in = in, .ino = ino, .may = *may};
	return i;
}

static int do_unreg_fd(struct nclient *c, int64_t h)
{
	struct nfile *f;

	if (h < 0 || h >= c->nfiles || !c->files[h].in)
		return -EBADF;
	f = &c->files[h];
	if (f->inflight)
		return -EBUSY;
	nvmefs_ns_release(c->srv->vol, f->ino);
	f->in = NULL;
	return 0;
}

/* Map the client's memfd of size bytes: sealed so that it cannot shrink
 * under the mapping (a truncated mapping would fault this process). */
static int64_t do_reg_mem(struct nclient *c, int fd, int64_t size)
{
	struct stat st;
	int64_t i;
	int seals;
	void *p;

	if (fd < 0)
		return -EBADMSG;
	if (size <= 0 || (uint64_t)size > NVMEFS_WIRE_MAX_REGION || !aligned((uint64_t)size))
		return -EINVAL;
	seals = fcntl(fd, F_GET_SEALS);
	if (seals < 0 || !(seals & F_SEAL_SHRINK))
		return -EPERM;
	if (fstat(fd, &st))
		return -errno;
	if (st.st_size < size)
		return -EINVAL;
	i = slot((void **)&c->regions, &c->nregions, sizeof(*c->regions), region_used);
	if (i < 0)
		return i;
	/* Populated now (the client has the pages locked: only page tables),
	 * not fault by fault under the first requests' O_DIRECT: that made
	 * the first pass over a new 1 GiB buffer half as fast. */
	p = mmap(NULL, (size_t)size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
	if (p == MAP_FAILED)
		return -errno;
	c->regions[i] = (struct nregion){.base = p, .size = (uint64_t)size};
	return i;
}

static int do_unreg_mem(struct nclient *c, int64_t id)
{
	struct nregion *r;

	if (id < 0 || id >= c->nregions || !c->regions[id].base)
		return -EINVAL;
	r = &c->regions[id];
	if (r->inflight)
		return -EBUSY;
	munmap(r->base, r->size);
	*r = (struct nregion){0};
	return 0;
}

/* The checks of one entry that need the client's tables. */
static int check_sqe(struct nclient *c, const struct nvmefs_wire_sqe *e)
{
	unsigned may =
		e->handle < c->nfiles && c->files[e->handle].in ? c->files[e->handle].may : 0;
	/* A region given back (UNREG_MEM) has no size: nothing is inside it. */
	uint64_t rsize = e->region < c->nregions && c->regions[e->region].base
				 ? c->regions[e->region].size
				 : 0;
	int ret =
		nvmefs_wire_check_sqe(e, may, rsize, NVMEFS_WIRE_MAX_REGION, NVMEFS_MAX_FILE_SIZE);

	if (!ret && c->inflight >= NVMEFS_WIRE_MAX_INFLIGHT)
		ret = -EAGAIN; /* the library never sends more */
	return ret;
}

/*
 * Before the reads of a SUBMIT start: what the kernel still holds dirty of
 * their ranges (shared mmap, the write-back cache) goes to the daemon, so
 * that a read sees every write made through the mount before it; and atime
 * as a READ through the mount keeps it (relatime), the kernel's copy of the
 * attributes going with the same invalidation. Once per file and message,
 * over the union of its ranges: one system call, not one per request.
 */
static void before_reads(struct nclient *c, const struct nvmefs_wire_msg *m)
{
	struct span spans[MAX_SPANS];
	unsigned n = 0;

	for (uint32_t i = 0; i < m->hdr.count; i++) {
		struct nvmefs_wire_sqe e;

		nvmefs_wire_sqe_at(m, i, &e);
		if (e.op == NVMEFS_WIRE_READ && e.len && !check_sqe(c, &e))
			span_add(c, spans, &n, e.handle, e.off, e.len);
	}
	for (unsigned i = 0; i < n; i++) {
		struct nfile *f = &c->files[spans[i].handle];

		nvmefs_ns_note_read(c->srv->vol, f->in, &f->note);
		inval(c, f->ino, (int64_t)spans[i].start, (int64_t)(spans[i].end - spans[i].start));
	}
}

static void do_submit(struct nclient *c, const struct nvmefs_wire_msg *m)
{
	struct nvmefs_vol *vol = c->srv->vol;

	before_reads(c, m);
	for (uint32_t i = 0; i < m->hdr.count; i++) {
		struct nvmefs_wire_sqe e;
		int ret;

		nvmefs_wire_sqe_at(m, i, &e);
		ret = check_sqe(c, &e);
		if (ret) {
			count(&vol->native.refused, 1);
			complete(c, e.user_data, ret);
		} else if (e.op == NVMEFS_WIRE_FSYNC) {
			count(&vol->native.fsyncs, 1);
			complete(c, e.user_data, nvmefs_journal_commit(vol));
		} else {
			start_io(c, &e);
		}
	}
}

/*
 * Act on one message with fd (-1: none) attached; fd is consumed. Returns
 * 0, or -errno when the client cannot be answered any more.
 */
static int handle(struct nclient *c, const void *buf, size_t len, int fd)
{
	struct nvmefs_vol *vol = c->srv->vol;
	struct nvmefs_wire_msg m;
	unsigned may = 0;
	int64_t res;
	int ret = nvmefs_wire_parse(buf, len, 1, &m);

	if (!ret && fd >= 0 && m.hdr.type != NVMEFS_WIRE_REG_FD &&
	    m.hdr.type != NVMEFS_WIRE_REG_MEM)
		ret = -EBADMSG; /* a descriptor where none belongs */
	if (ret) {
		if (fd >= 0)
			close(fd);
		count(&vol->native.refused, 1);
		nvmefs_debug("native: client pid %d: bad message (%zu bytes): %s", (int)c->cred.pid,
			     len, strerror(-ret));
		return reply(c, ret, 0);
	}
	switch (m.hdr.type) {
	case NVMEFS_WIRE_HELLO:
		return do_hello(c);
	case NVMEFS_WIRE_REG_FD:
		res = do_reg_fd(c, fd, &may);
		break;
	case NVMEFS_WIRE_UNREG_FD:
		res = do_unreg_fd(c, m.hdr.arg);
		break;
	case NVMEFS_WIRE_REG_MEM:
		res = do_reg_mem(c, fd, m.hdr.arg);
		break;
	case NVMEFS_WIRE_UNREG_MEM:
		res = do_unreg_mem(c, m.hdr.arg);
		break;
	default: /* NVMEFS_WIRE_SUBMIT */
		do_submit(c, &m);
		return 0;
	}
	if (fd >= 0)
		close(fd); /* the door keeps the file open, or the mapping */
	if (res < 0)
		count(&vol->native.refused, 1);
	return reply(c, res, res < 0 ? 0 : may);
}

/* Receive one message. Returns 0, or -errno when the client is gone. */
static int receive(struct nclient *c, uint8_t *buf)
{
	union {
		struct cmsghdr h;
		char space[CMSG_SPACE(4 * sizeof(int))];
	} cm;
	struct iovec iov = {.iov_base = buf, .iov_len = NVMEFS_WIRE_MAX_MSG};
	struct msghdr mh = {
		.msg_iov = &iov, .msg_iovlen = 1, .msg_control = &cm, .msg_controllen = sizeof(cm)};
	int fds[4], nfd = 0;
	ssize_t n = recvmsg(c->sock, &mh, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);

	if (n < 0)
		return errno == EAGAIN || errno == EINTR ? 0 : -errno;
	if (n == 0)
		return -ECONNRESET;
	for (struct cmsghdr *h = CMSG_FIRSTHDR(&mh); h; h = CMSG_NXTHDR(&mh, h)) {
		if (h->cmsg_level != SOL_SOCKET || h->cmsg_type != SCM_RIGHTS)
			continue;
		for (size_t k = 0; (k + 1) * sizeof(int) <= h->cmsg_len - CMSG_LEN(0); k++) {
			int fd;

			memcpy(&fd, CMSG_DATA(h) + k * sizeof(int), sizeof(fd));
			if (nfd < 4)
				fds[nfd++] = fd;
			else
				close(fd);
		}
	}
	/* More than one descriptor, or a message cut short: refused whole. */
	if (nfd > 1 || (mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC))) {
		for (int k = 0; k < nfd; k++)
			close(fds[k]);
		count(&c->srv->vol->native.refused, 1);
		return reply(c, -EBADMSG, 0);
	}
	return handle(c, buf, (size_t)n, nfd ? fds[0] : -1);
}

/* ---- the client's thread ---- */

/* The client went (or the door closes): finish its requests in flight,
 * then give back its files and mappings. */
static void client_teardown(struct nclient *c)
{
	struct nvmefs_vol *vol = c->srv->vol;

	/* From now on every completion comes through the eventfd. */
	pthread_mutex_lock(&c->mu);
	c->closing = true;
	pthread_mutex_unlock(&c->mu);
	reap(c);
	while (c->inflight) {
		struct pollfd p = {.fd = c->wake, .events = POLLIN};
		uint64_t v;

		if (poll(&p, 1, -1) > 0 && read(c->wake, &v, sizeof(v)) < 0 && errno != EAGAIN)
			nvmefs_err("native: client wake: %s", strerror(errno));
		reap(c);
	}
	for (uint32_t i = 0; i < c->nfiles; i++)
		if (c->files[i].in)
			nvmefs_ns_release(vol, c->files[i].ino);
	for (uint32_t i = 0; i < c->nregions; i++)
		if (c->regions[i].base)
			munmap(c->regions[i].base, c->regions[i].size);
	for (unsigned i = 0; i < c->nout; i++)
		free(c->out[i]);
	free(c->files);
	free(c->regions);
	free(c->cq);
	c->files = NULL;
	c->regions = NULL;
	c->cq = NULL;
	c->nfiles = c->nregions = c->nout = c->ncq = 0;
	close(c->sock);
	c->sock = -1;
}

static void *client_main(void *arg)
{
	struct nclient *c = arg;
	uint8_t *buf = malloc(NVMEFS_WIRE_MAX_MSG);
	int ret = buf ? 0 : -ENOMEM;

	while (!ret) {
		/* Read no more while the client does not read its answers. */
		struct pollfd p[3] = {
			{.fd = c->sock,
			 .events = (c->nout < MAX_OUT ? POLLIN : 0) | (c->nout ? POLLOUT : 0)},
			{.fd = c->wake, .events = POLLIN},
			{.fd = c->srv->stop, .events = POLLIN},
		};
		uint64_t v;

		if (poll(p, 3, -1) < 0) {
			ret = errno == EINTR ? 0 : -errno;
			continue;
		}
		if (p[2].revents)
			break;
		if (p[1].revents) {
			if (read(c->wake, &v, sizeof(v)) < 0 && errno != EAGAIN)
				ret = -errno;
			reap(c);
		}
		if (!ret && (p[0].revents & POLLIN)) {
			reap(c); /* completions sent by the engine's threads */
			ret = receive(c, buf);
		} else if (!ret && (p[0].revents & (POLLHUP | POLLERR)))
			ret = -ECONNRESET;
		if (!ret)
			ret = flush(c);
	}
	if (ret && ret != -ECONNRESET && ret != -EPIPE)
		nvmefs_warn("native: client pid %d: %s; disconnected", (int)c->cred.pid,
			    strerror(-ret));
	free(buf);
	client_teardown(c);
	atomic_fetch_sub_explicit(&c->srv->vol->native.clients, 1, RELAXED);
	atomic_store(&c->exited, true);
	return NULL;
}

static void client_free(struct nclient *c)
{
	pthread_join(c->thread, NULL);
	pthread_mutex_destroy(&c->mu);
	close(c->wake);
	free(c);
}

/* Join and free the clients whose threads have ended (srv->mu held). */
static void collect_exited(struct nvmefs_native *srv)
{
	for (struct nclient **pp = &srv->clients; *pp;) {
		struct nclient *c = *pp;

		if (!atomic_load(&c->exited)) {
			pp = &c->next;
			continue;
		}
		*pp = c->next;
		srv->nclients--;
		client_free(c);
	}
}

static int client_new(struct nvmefs_native *srv, int sock)
{
	struct ucred cred;
	socklen_t clen = sizeof(cred);
	struct nclient *c = calloc(1, sizeof(*c));
	int ret;

	if (!c)
		return -ENOMEM;
	if (getsockopt(sock, SOL_SOCKET, SO_PEERCRED, &cred, &clen)) {
		ret = -errno;
		goto err_free;
	}
	c->srv = srv;
	c->sock = sock;
	c->cred = (struct nvmefs_cred){.uid = cred.uid, .gid = cred.gid, .pid = cred.pid};
	c->wake = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (c->wake < 0) {
		ret = -errno;
		goto err_free;
	}
	pthread_mutex_init(&c->mu, NULL);
	atomic_fetch_add_explicit(&srv->vol->native.clients, 1, RELAXED);
	count(&srv->vol->native.connects, 1);
	ret = -pthread_create(&c->thread, NULL, client_main, c);
	if (ret) {
		atomic_fetch_sub_explicit(&srv->vol->native.clients, 1, RELAXED);
		goto err_wake;
	}
	pthread_setname_np(c->thread, "nvmefs-client");
	c->next = srv->clients;
	srv->clients = c;
	srv->nclients++;
	return 0;
err_wake:
	pthread_mutex_destroy(&c->mu);
	close(c->wake);
err_free:
	free(c);
	return ret;
}

static void *acceptor_main(void *arg)
{
	struct nvmefs_native *srv = arg;

	for (;;) {
		struct pollfd p[2] = {{.fd = srv->lfd, .events = POLLIN},
				      {.fd = srv->stop, .events = POLLIN}};
		int sock, ret;

		if (poll(p, 2, -1) < 0 && errno != EINTR)
			break;
		if (p[1].revents)
			break;
		if (!(p[0].revents & POLLIN))
			continue;
		sock = accept4(srv->lfd, NULL, NULL, SOCK_CLOEXEC);
		if (sock < 0)
			continue;
		pthread_mutex_lock(&srv->mu);
		collect_exited(srv);
		ret = srv->nclients < MAX_CLIENTS ? client_new(srv, sock) : -EMFILE;
		pthread_mutex_unlock(&srv->mu);
		if (ret) {
			nvmefs_warn("native: cannot take a client: %s", strerror(-ret));
			close(sock);
		}
	}
	return NULL;
}

/* ---- the door ---- */

int nvmefs_native_start(struct nvmefs_vol *vol, const char *mountpoint,
			nvmefs_native_inval_fn inval_fn, void *arg, struct nvmefs_native **out)
{
	struct sockaddr_un a = {.sun_family = AF_UNIX};
	struct nvmefs_native *srv = calloc(1, sizeof(*srv));
	char uuid[NVMEFS_UUID_STR];
	socklen_t alen;
	int ret;

	if (!srv)
		return -ENOMEM;
	srv->lfd = srv->stop = -1;
	srv->vol = vol;
	srv->inval = inval_fn;
	srv->inval_arg = arg;
	srv->mountpoint = strdup(mountpoint);
	if (!srv->mountpoint) {
		ret = -ENOMEM;
		goto err;
	}
	srv->stop = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	srv->lfd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (srv->stop < 0 || srv->lfd < 0) {
		ret = -errno;
		goto err;
	}
	/* Abstract: nothing to clean up after a crash. Named after the
	 * volume and this process; clients find it in .nvmefs/config and
	 * check it is ours by the peer's pid. */
	nvmefs_uuid_str(vol->label.uuid, uuid);
	snprintf(a.sun_path + 1, sizeof(a.sun_path) - 1, "nvmefs-%s-%d", uuid, (int)getpid());
	alen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + strlen(a.sun_path + 1));
	if (bind(srv->lfd, (struct sockaddr *)&a, alen) || listen(srv->lfd, 64)) {
		ret = -errno;
		goto err;
	}
	pthread_mutex_init(&srv->mu, NULL);
	ret = -pthread_create(&srv->acceptor, NULL, acceptor_main, srv);
	if (ret) {
		pthread_mutex_destroy(&srv->mu);
		goto err;
	}
	pthread_setname_np(srv->acceptor, "nvmefs-accept");
	snprintf(vol->native_socket, sizeof(vol->native_socket), "@%s", a.sun_path + 1);
	*out = srv;
	return 0;
err:
	if (srv->lfd >= 0)
		close(srv->lfd);
	if (srv->stop >= 0)
		close(srv->stop);
	free(srv->mountpoint);
	free(srv);
	return ret;
}

void nvmefs_native_stop(struct nvmefs_native *srv)
{
	uint64_t one = 1;

	if (!srv)
		return;
	srv->vol->native_socket[0] = '\0';
	if (write(srv->stop, &one, sizeof(one)) < 0)
		nvmefs_err("native: cannot stop the door: %s", strerror(errno));
	pthread_join(srv->acceptor, NULL);
	close(srv->lfd);
	/* Every client thread sees stop too; each finishes its requests. */
	while (srv->clients) {
		struct nclient *c = srv->clients;

		srv->clients = c->next;
		client_free(c);
	}
	pthread_mutex_destroy(&srv->mu);
	close(srv->stop);
	free(srv->mountpoint);
	free(srv);
}
