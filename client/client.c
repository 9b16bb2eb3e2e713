// SPDX-License-Identifier: MIT
/*
 * libnvmefs: the native client (include/libnvmefs.h), over the protocol of
 * include/nvmefs/wire.h to the daemon's native door (fs/native/server.c).
 *
 * A client is one SOCK_SEQPACKET connection. Shared memory is a memfd per
 * buffer, sealed against shrinking and growing, mapped and locked here and
 * mapped by the daemon; a request names a region and an offset in it, so
 * the daemon's devices read and write the application's memory directly.
 * A buffer outside every region goes through a bounce region of the
 * library's (a copy here, counted). Each request in flight has a slot;
 * its index is the wire's user_data, and the caller's comes back from it.
 */
/* The API is exported; everything else stays inside (-fvisibility=hidden). */
#pragma GCC visibility push(default)
#include "libnvmefs.h"
#pragma GCC visibility pop
#include "nvmefs/wire.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <numa.h>
#include <numaif.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define FUSE_SUPER_MAGIC 0x65735546
#define BOUNCE_CAP	 (256ull << 20) /* bounce memory one client may hold */
#define BOUNCE_MIN	 (1ull << 20)	/* smallest bounce region */
#define SYNC_CHUNK	 (64ull << 20)	/* a synchronous bounced request, per piece */

struct region {
	uint8_t *base;
	size_t size;
	uint32_t id;	   /* the daemon's */
	uint64_t serial;   /* the process's buffer (struct shbuf); 0: bounce */
	int memfd;	   /* bounce: the client's own */
	bool stale;	   /* its buffer was freed */
	bool bounce;	   /* the library's own */
	bool busy;	   /* bounce: lent to a request */
	unsigned inflight; /* requests using it */
};

struct reg {
	int fd;
	uint32_t handle;
	unsigned may; /* NVMEFS_WIRE_MAY_* */
	unsigned inflight;
};

struct slot {
	bool used, sync;
	int op;
	uint64_t user_data;
	void *ubuf; /* the caller's buffer */
	size_t len;
	struct region *region; /* the one the daemon uses */
	struct reg *reg;
	uint32_t next_free;
};

struct nvmefs_client {
	int sock;
	bool dead;
	dev_t dev;
	struct nvmefs_wire_hello hello;
	struct region **regions;
	size_t nregions;
	struct reg *regs;
	size_t nregs;
	struct slot *slots;	  /* hello.max_inflight */
	uint32_t free_slot;	  /* head of the free list; max_inflight: none */
	unsigned sent;		  /* requests at the daemon */
	struct nvmefs_cqe *ready; /* completed, not yet reaped */
	unsigned nready;
	uint64_t bounce_held;
	uint64_t gen; /* g_gen when the regions were last checked */
	/* a control call's reply */
	bool want_reply, got_reply;
	int64_t reply_arg, reply_arg2;
	/* a synchronous helper's completion */
	bool sync_done;
	int64_t sync_res;
	uint8_t *rbuf; /* receive buffer */
	struct nvmefs_client_stats st;
	char err[512];
};

static __thread char attach_err[512];

/* Say what failed (for nvmefs_client_error) and return ret. */
__attribute__((format(printf, 3, 4))) static int fail(struct nvmefs_client *c, int ret,
						      const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(c ? c->err : attach_err, sizeof(attach_err), fmt, ap);
	va_end(ap);
	return ret;
}

const char *nvmefs_client_error(const struct nvmefs_client *c)
{
	return c ? c->err : attach_err;
}

size_t nvmefs_client_block(const struct nvmefs_client *c)
{
	return c->hello.block;
}

unsigned nvmefs_client_inflight(const struct nvmefs_client *c)
{
	return c->sent + c->nready;
}

unsigned nvmefs_client_max_inflight(const struct nvmefs_client *c)
{
	return c->hello.max_inflight;
}

void nvmefs_client_stats(const struct nvmefs_client *c, struct nvmefs_client_stats *st)
{
	*st = c->st;
}

/* ---- the connection ---- */

/* Send one message, with fd attached when fd >= 0. */
static int send_msg(struct nvmefs_client *c, uint16_t type, int64_t arg, const void *body,
		    uint32_t cnt, size_t len, int fd)
{
	struct nvmefs_wire_hdr h = {.magic = NVMEFS_WIRE_MAGIC,
				    .version = NVMEFS_WIRE_VERSION,
				    .type = type,
				    .count = cnt,
				    .arg = arg};
	struct iovec iov[2] = {{&h, sizeof(h)}, {(void *)body, len}};
	union {
		struct cmsghdr h;
		char space[CMSG_SPACE(sizeof(int))];
	} cm;
	struct msghdr mh = {.msg_iov = iov, .msg_iovlen = len ? 2 : 1};

	if (c->dead)
		return -ENOTCONN;
	if (fd >= 0) {
		memset(&cm, 0, sizeof(cm));
		mh.msg_control = &cm;
		mh.msg_controllen = sizeof(cm);
		cm.h.cmsg_level = SOL_SOCKET;
		cm.h.cmsg_type = SCM_RIGHTS;
		cm.h.cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(&cm.h), &fd, sizeof(fd));
	}
	while (sendmsg(c->sock, &mh, MSG_NOSIGNAL) < 0) {
		if (errno == EINTR)
			continue;
		c->dead = true;
		return -ENOTCONN;
	}
	return 0;
}

static void slot_put(struct nvmefs_client *c, struct slot *s)
{
	s->used = false;
	s->next_free = c->free_slot;
	c->free_slot = (uint32_t)(s - c->slots);
}

/* A completion's result for the caller: the bounce copied back, the slot freed. */
static void finish(struct nvmefs_client *c, struct slot *s, int64_t res)
{
	struct region *r = s->region;

	if (s->reg)
		s->reg->inflight--;
	if (r) {
		r->inflight--;
		if (r->bounce) {
			if (s->op == NVMEFS_OP_READ && res > 0) {
				memcpy(s->ubuf, r->base, (size_t)res);
				c->st.bounce_bytes += (uint64_t)res;
			}
			r->busy = false;
		}
	}
	if (res > 0)
		c->st.bytes += (uint64_t)res;
	if (s->sync) {
		c->sync_done = true;
		c->sync_res = res;
	} else {
		c->ready[c->nready++] = (struct nvmefs_cqe){.user_data = s->user_data, .res = res};
	}
	slot_put(c, s);
}

/* The daemon is gone: every request in flight fails. */
static void lose(struct nvmefs_client *c)
{
	c->dead = true;
	for (uint32_t i = 0; i < c->hello.max_inflight && c->slots; i++) {
		if (c->slots[i].used && c->sent) {
			c->sent--;
			finish(c, &c->slots[i], -ENOTCONN);
		}
	}
}

static int on_complete(struct nvmefs_client *c, const struct nvmefs_wire_msg *m)
{
	for (uint32_t i = 0; i < m->hdr.count; i++) {
		struct nvmefs_wire_cqe e;
		struct slot *s;

		memcpy(&e, (const char *)m->entries + i * sizeof(e), sizeof(e));
		if (e.user_data >= c->hello.max_inflight || !c->slots[e.user_data].used)
			return -EBADMSG;
		s = &c->slots[e.user_data];
		c->sent--;
		finish(c, s, e.res);
	}
	return 0;
}

/*
 * Receive and act on one message, waiting up to timeout_ms (-1: no limit).
 * Returns 1 when one came, 0 at the timeout, -ENOTCONN when the daemon is
 * gone (or broke the protocol: the connection is then dropped).
 */
static int pump(struct nvmefs_client *c, int timeout_ms)
{
	struct pollfd p = {.fd = c->sock, .events = POLLIN};
	struct nvmefs_wire_msg m;
	ssize_t n;
	int ret;

	if (c->dead)
		return -ENOTCONN;
	ret = poll(&p, 1, timeout_ms);
	if (ret < 0)
		return errno == EINTR ? 0 : -errno;
	if (!ret)
		return 0;
	n = recv(c->sock, c->rbuf, NVMEFS_WIRE_MAX_MSG, MSG_DONTWAIT);
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return 0;
	ret = n <= 0 ? -ENOTCONN : nvmefs_wire_parse(c->rbuf, (size_t)n, 0, &m);
	if (!ret && m.hdr.type == NVMEFS_WIRE_COMPLETE)
		ret = on_complete(c, &m);
	else if (!ret && c->want_reply && !c->got_reply) {
		c->got_reply = true;
		c->reply_arg = m.hdr.arg;
		c->reply_arg2 = m.hdr.arg2;
		if ((size_t)n == sizeof(m.hdr) + sizeof(c->hello))
			memcpy(&c->hello, m.entries, sizeof(c->hello));
	} else if (!ret) {
		ret = -EBADMSG; /* a reply nobody asked for */
	}
	if (ret) {
		fail(c, -ENOTCONN, "the daemon closed the connection or broke the protocol (%s)",
		     strerror(-ret));
		lose(c);
		return -ENOTCONN;
	}
	return 1;
}

/* A control call: send, then wait for its reply (completions may come
 * first). Returns the reply's arg (a count or -errno). */
static int64_t control(struct nvmefs_client *c, uint16_t type, int64_t arg, int fd)
{
	int ret = send_msg(c, type, arg, NULL, 0, 0, fd);

	if (ret) {
		lose(c);
		return ret;
	}
	c->want_reply = true;
	c->got_reply = false;
	while (!c->got_reply) {
		ret = pump(c, -1);
		if (ret < 0)
			break;
	}
	c->want_reply = false;
	return c->got_reply ? c->reply_arg : ret;
}

/* ---- attach ---- */

/* The mount's root above path (same st_dev), into root. */
static int find_root(const char *path, dev_t *dev, char *root)
{
	struct stat st;
	char *abs = realpath(path, NULL);
	int ret = 0;

	if (!abs)
		return -errno;
	if (stat(abs, &st)) {
		ret = -errno;
		goto out;
	}
	*dev = st.st_dev;
	if (!S_ISDIR(st.st_mode))
		*strrchr(abs, '/') = '\0';
	for (;;) {
		char *slash = strrchr(abs, '/');
		struct stat up;

		if (!slash || slash == abs) {
			if (stat("/", &up) == 0 && up.st_dev == *dev && abs[0])
				abs[1] = '\0';
			break;
		}
		*slash = '\0';
		if (stat(abs, &up) || up.st_dev != *dev) {
			*slash = '/';
			break;
		}
	}
	if (!abs[0])
		strcpy(abs, "/");
	snprintf(root, PATH_MAX, "%s", abs);
out:
	free(abs);
	return ret;
}

/* pid and native_socket of root/.nvmefs/config. */
static int read_config(const char *root, pid_t *pid, char *sock, size_t len)
{
	char path[PATH_MAX + 32], line[512];
	FILE *f;

	snprintf(path, sizeof(path), "%s/.nvmefs/config", root);
	f = fopen(path, "re");
	if (!f)
		return -errno;
	*pid = 0;
	sock[0] = '\0';
	while (fgets(line, sizeof(line), f)) {
		char *v = strstr(line, " = ");

		if (!v)
			continue;
		*v = '\0';
		v += 3;
		v[strcspn(v, "\n")] = '\0';
		if (!strcmp(line, "pid"))
			*pid = (pid_t)strtol(v, NULL, 10);
		else if (!strcmp(line, "native_socket"))
			snprintf(sock, len, "%s", v);
	}
	fclose(f);
	return 0;
}

/* Connect to the abstract socket "@name" and check its peer is pid. */
static int connect_door(const char *name, pid_t pid, int *out)
{
	struct sockaddr_un a = {.sun_family = AF_UNIX};
	struct ucred cred;
	socklen_t clen = sizeof(cred), alen;
	int fd, ret;

	if (name[0] != '@' || strlen(name) >= sizeof(a.sun_path))
		return -EPROTONOSUPPORT;
	memcpy(a.sun_path + 1, name + 1, strlen(name + 1));
	alen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + strlen(name));
	fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (connect(fd, (struct sockaddr *)&a, alen)) {
		ret = -errno;
		goto err;
	}
	/* Anyone may bind an abstract name: the daemon is whoever the mount
	 * says it is. */
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &clen) || cred.pid != pid) {
		ret = -EPERM;
		goto err;
	}
	*out = fd;
	return 0;
err:
	close(fd);
	return ret;
}

static int hello(struct nvmefs_client *c, const char *root)
{
	int64_t ret = control(c, NVMEFS_WIRE_HELLO, 0, -1);

	if (ret < 0)
		return fail(c, (int)ret, "%s: the daemon refused the connection: %s", root,
			    strerror((int)-ret));
	if ((dev_t)c->hello.dev != c->dev || !c->hello.max_inflight || !c->hello.block)
		return fail(c, -EPERM, "%s: the daemon's socket belongs to another mount", root);
	if (c->hello.max_inflight > NVMEFS_WIRE_MAX_INFLIGHT)
		c->hello.max_inflight = NVMEFS_WIRE_MAX_INFLIGHT;
	return 0;
}

static int client_alloc(struct nvmefs_client *c)
{
	unsigned n = NVMEFS_WIRE_MAX_INFLIGHT;

	c->rbuf = malloc(NVMEFS_WIRE_MAX_MSG);
	c->slots = calloc(n, sizeof(*c->slots));
	c->ready = calloc(n, sizeof(*c->ready));
	if (!c->rbuf || !c->slots || !c->ready)
		return -ENOMEM;
	for (uint32_t i = 0; i < n; i++)
		c->slots[i].next_free = i + 1;
	c->free_slot = 0;
	c->hello.max_inflight = n; /* until HELLO says */
	return 0;
}

/* statfs of path, or of its directory when path does not exist yet (the
 * file a program is about to create); dir gets what was looked at. */
static int look_at(const char *path, struct statfs *sf, char *dir, size_t len)
{
	char *slash;

	snprintf(dir, len, "%s", path);
	if (!statfs(dir, sf))
		return 0;
	if (errno != ENOENT)
		return -errno;
	slash = strrchr(dir, '/');
	if (!slash)
		snprintf(dir, len, ".");
	else if (slash == dir)
		dir[1] = '\0';
	else
		*slash = '\0';
	return statfs(dir, sf) ? -errno : 0;
}

int nvmefs_attach(const char *path, struct nvmefs_client **out)
{
	struct nvmefs_client *c;
	char root[PATH_MAX], sock[128], dir[PATH_MAX];
	struct statfs sf;
	pid_t pid = 0;
	int ret;

	attach_err[0] = '\0';
	ret = look_at(path, &sf, dir, sizeof(dir));
	if (ret)
		return fail(NULL, ret, "%s: %s", path, strerror(-ret));
	if (sf.f_type != FUSE_SUPER_MAGIC)
		return fail(NULL, -ENOTSUP, "%s: not on an nvmefs mount", path);
	path = dir;
	c = calloc(1, sizeof(*c));
	if (!c || client_alloc(c)) {
		ret = fail(NULL, -ENOMEM, "out of memory");
		goto err;
	}
	c->sock = -1;
	ret = find_root(path, &c->dev, root);
	if (ret) {
		fail(NULL, ret, "%s: %s", path, strerror(-ret));
		goto err;
	}
	ret = read_config(root, &pid, sock, sizeof(sock));
	if (ret == -ENOENT || (!ret && !sock[0]))
		ret = -EPROTONOSUPPORT;
	if (ret) {
		fail(NULL, ret, "%s: not an nvmefs mount with a native client door (%s)", root,
		     strerror(-ret));
		goto err;
	}
	ret = connect_door(sock, pid, &c->sock);
	if (ret) {
		fail(NULL, ret, "%s: cannot reach its daemon (pid %d) at %s: %s", root, (int)pid,
		     sock, strerror(-ret));
		goto err;
	}
	ret = hello(c, root);
	if (ret) {
		fail(NULL, ret, "%s", c->err);
		goto err;
	}
	*out = c;
	return 0;
err:
	if (c && c->sock >= 0)
		close(c->sock);
	if (c) {
		free(c->rbuf);
		free(c->slots);
		free(c->ready);
	}
	free(c);
	return ret;
}

/* ---- shared memory ---- */

/*
 * The process's shared buffers (nvmefs_buf_alloc), for every client: a
 * client registers one with its daemon the first time a request of its
 * uses it. serial names a buffer for good (an address may come back after
 * a free); gen changes at every free, so that clients drop registrations
 * of freed buffers before they look an address up again.
 */
struct shbuf {
	struct shbuf *next;
	uint8_t *base;
	size_t size;
	int memfd;
	uint64_t serial;
};

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static struct shbuf *g_bufs;   /* g_mu */
static uint64_t g_serial;      /* g_mu */
static _Atomic uint64_t g_gen; /* bumped under g_mu */

static size_t page_round(size_t size)
{
	size_t pg = (size_t)sysconf(_SC_PAGESIZE);

	return (size + pg - 1) & ~(pg - 1);
}

/* A sealed memfd of size bytes (a page multiple), mapped, placed on node
 * (-1: anywhere) and locked: 0 with *base and *memfd, or -errno. */
static int shm_create(struct nvmefs_client *c, size_t size, int node, uint8_t **base, int *memfd)
{
	int fd = memfd_create("nvmefs-buf", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	void *p;
	int ret;

	if (fd < 0 || ftruncate(fd, (off_t)size) ||
	    fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL)) {
		ret = -errno;
		goto err;
	}
	p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED) {
		ret = -errno;
		goto err;
	}
	/* Placed before it is touched; mlock then faults every page in. */
	if (node >= 0)
		numa_tonode_memory(p, size, node);
	if (mlock(p, size)) {
		ret = -errno;
		munmap(p, size);
		fail(c, ret, "cannot lock %zu bytes in RAM (RLIMIT_MEMLOCK, ulimit -l): %s", size,
		     strerror(-ret));
		if (fd >= 0)
			close(fd);
		return ret;
	}
	*base = p;
	*memfd = fd;
	return 0;
err:
	fail(c, ret, "cannot make %zu bytes of shared memory: %s", size, strerror(-ret));
	if (fd >= 0)
		close(fd);
	return ret;
}

/* Register memfd (mapped here at base, size bytes) with c's daemon as a
 * region; serial 0 for the client's own bounce memory. */
static int region_add(struct nvmefs_client *c, uint8_t *base, size_t size, int memfd,
		      uint64_t serial, struct region **out)
{
	struct region *r = calloc(1, sizeof(*r)), **v;
	int64_t id;

	v = r ? realloc(c->regions, (c->nregions + 1) * sizeof(*v)) : NULL;
	if (!v) {
		free(r);
		return fail(c, -ENOMEM, "out of memory");
	}
	c->regions = v;
	id = control(c, NVMEFS_WIRE_REG_MEM, (int64_t)size, memfd);
	if (id < 0) {
		free(r);
		return fail(c, (int)id, "the daemon refused %zu bytes of shared memory: %s", size,
			    strerror((int)-id));
	}
	*r = (struct region){.base = base,
			     .size = size,
			     .id = (uint32_t)id,
			     .serial = serial,
			     .bounce = !serial};
	c->regions[c->nregions++] = r;
	c->st.shared_bytes += size;
	*out = r;
	return 0;
}

/* Forget region i: given back to the daemon; bounce memory unmapped. */
static void region_drop(struct nvmefs_client *c, size_t i)
{
	struct region *r = c->regions[i];

	if (!c->dead)
		control(c, NVMEFS_WIRE_UNREG_MEM, r->id, -1);
	if (r->bounce) {
		munmap(r->base, r->size);
		close(r->memfd);
		c->bounce_held -= r->size;
	}
	c->st.shared_bytes -= r->size;
	c->regions[i] = c->regions[--c->nregions];
	free(r);
}

static struct shbuf *shbuf_find(uint64_t serial)
{
	for (struct shbuf *b = g_bufs; b; b = b->next)
		if (b->serial == serial)
			return b;
	return NULL;
}

/* Drop the registrations of buffers freed since c last looked. */
static void regions_sync(struct nvmefs_client *c)
{
	uint64_t gen = atomic_load(&g_gen);

	if (gen == c->gen)
		return;
	pthread_mutex_lock(&g_mu);
	for (size_t i = c->nregions; i-- > 0;)
		if (!c->regions[i]->bounce && !c->regions[i]->inflight &&
		    !shbuf_find(c->regions[i]->serial))
			c->regions[i]->stale = true;
	pthread_mutex_unlock(&g_mu);
	for (size_t i = c->nregions; i-- > 0;)
		if (c->regions[i]->stale)
			region_drop(c, i);
	c->gen = gen;
}

int nvmefs_buf_alloc(struct nvmefs_client *c, size_t size, int numa_node, void **out)
{
	struct shbuf *b;
	struct region *r;
	int ret;

	if (c)
		c->err[0] = '\0';
	if (!size || size > NVMEFS_WIRE_MAX_REGION)
		return fail(c, -EINVAL, "buffer size %zu: give 1 byte to 1 TiB", size);
	if (numa_node >= 0 && (numa_available() < 0 || numa_node > numa_max_node()))
		return fail(c, -EINVAL, "NUMA node %d: no such node", numa_node);
	b = calloc(1, sizeof(*b));
	if (!b)
		return fail(c, -ENOMEM, "out of memory");
	b->size = page_round(size);
	ret = shm_create(c, b->size, numa_node, &b->base, &b->memfd);
	if (ret) {
		free(b);
		return ret;
	}
	pthread_mutex_lock(&g_mu);
	b->serial = ++g_serial;
	b->next = g_bufs;
	g_bufs = b;
	pthread_mutex_unlock(&g_mu);
	/* Registered now with the client given, so that a refusal shows here. */
	if (c) {
		ret = region_add(c, b->base, b->size, b->memfd, b->serial, &r);
		if (ret) {
			nvmefs_buf_free(NULL, b->base);
			return ret;
		}
	}
	*out = b->base;
	return 0;
}

int nvmefs_buf_free(struct nvmefs_client *c, void *buf)
{
	struct shbuf **pp, *b = NULL;

	if (c) {
		for (size_t i = 0; i < c->nregions; i++) {
			struct region *r = c->regions[i];

			if (r->bounce || r->base != buf)
				continue;
			if (r->inflight)
				return fail(c, -EBUSY, "buffer %p: a request in flight uses it",
					    buf);
			region_drop(c, i);
			break;
		}
	}
	pthread_mutex_lock(&g_mu);
	for (pp = &g_bufs; *pp; pp = &(*pp)->next) {
		if ((*pp)->base == buf) {
			b = *pp;
			*pp = b->next;
			atomic_fetch_add(&g_gen, 1);
			break;
		}
	}
	pthread_mutex_unlock(&g_mu);
	if (!b)
		return fail(c, -EINVAL, "%p: not a buffer of nvmefs_buf_alloc", buf);
	munmap(b->base, b->size);
	close(b->memfd);
	free(b);
	return 0;
}

/* c's region holding [buf, buf + len), registering a shared buffer of the
 * process on its first use by c; NULL when the range is in none. */
static struct region *region_of(struct nvmefs_client *c, const void *buf, size_t len)
{
	const uint8_t *p = buf;
	struct region *r = NULL;
	uint8_t *base = NULL;
	uint64_t serial = 0;
	size_t size = 0;
	int memfd = -1;

	regions_sync(c);
	for (size_t i = 0; i < c->nregions; i++) {
		r = c->regions[i];
		if (!r->bounce && p >= r->base && len <= r->size &&
		    (size_t)(p - r->base) <= r->size - len)
			return r;
	}
	pthread_mutex_lock(&g_mu);
	for (struct shbuf *b = g_bufs; b; b = b->next) {
		if (p >= b->base && len <= b->size && (size_t)(p - b->base) <= b->size - len) {
			/* Another thread may free it meanwhile: our own descriptor. */
			memfd = fcntl(b->memfd, F_DUPFD_CLOEXEC, 3);
			base = b->base;
			size = b->size;
			serial = b->serial;
			break;
		}
	}
	pthread_mutex_unlock(&g_mu);
	if (memfd < 0)
		return NULL;
	if (region_add(c, base, size, memfd, serial, &r))
		r = NULL;
	close(memfd);
	return r;
}

/* A free bounce region of at least len bytes: -EAGAIN when the cap is
 * reached while others are lent (they come back with completions). */
static int bounce_new(struct nvmefs_client *c, size_t size, struct region **out)
{
	uint8_t *base;
	int memfd, ret = shm_create(c, size, -1, &base, &memfd);

	if (ret)
		return ret;
	ret = region_add(c, base, size, memfd, 0, out);
	if (ret) {
		munmap(base, size);
		close(memfd);
		return ret;
	}
	(*out)->memfd = memfd;
	c->bounce_held += size;
	return 0;
}

static int bounce_get(struct nvmefs_client *c, size_t len, struct region **out)
{
	struct region *best = NULL;
	size_t size = BOUNCE_MIN;
	int ret;

	for (size_t i = 0; i < c->nregions; i++) {
		struct region *r = c->regions[i];

		if (r->bounce && !r->busy && r->size >= len && (!best || r->size < best->size))
			best = r;
	}
	if (!best) {
		while (size < len)
			size *= 2;
		/* Room for it: idle bounce regions go first. */
		for (size_t i = c->nregions; i-- > 0 && c->bounce_held + size > BOUNCE_CAP;)
			if (c->regions[i]->bounce && !c->regions[i]->busy)
				region_drop(c, i);
		if (c->bounce_held + size > BOUNCE_CAP && c->bounce_held)
			return -EAGAIN;
		ret = bounce_new(c, size, &best);
		if (ret)
			return ret;
	}
	best->busy = true;
	*out = best;
	return 0;
}

/* ---- descriptors ---- */

static struct reg *reg_of(struct nvmefs_client *c, int fd)
{
	for (size_t i = 0; i < c->nregs; i++)
		if (c->regs[i].fd == fd)
			return &c->regs[i];
	return NULL;
}

int nvmefs_reg_fd(struct nvmefs_client *c, int fd)
{
	struct reg *v;
	int64_t h;

	c->err[0] = '\0';
	if (reg_of(c, fd))
		return fail(c, -EEXIST, "fd %d: already registered", fd);
	if (fcntl(fd, F_GETFD) < 0)
		return fail(c, -EBADF, "fd %d: not an open descriptor", fd);
	v = realloc(c->regs, (c->nregs + 1) * sizeof(*v));
	if (!v)
		return fail(c, -ENOMEM, "out of memory");
	c->regs = v;
	h = control(c, NVMEFS_WIRE_REG_FD, 0, fd);
	if (h == -EXDEV)
		return fail(c, -EXDEV,
			    "fd %d: not a file of the nvmefs volume this client is "
			    "attached to",
			    fd);
	if (h < 0)
		return fail(c, (int)h, "fd %d: refused: %s%s", fd, strerror((int)-h),
			    h == -EOPNOTSUPP ? " (writing through a mount with -o writeback)"
			    : h == -EINVAL   ? " (not a regular file)"
			    : h == -EBADF    ? " (an O_PATH descriptor)"
					     : "");
	c->regs[c->nregs++] =
		(struct reg){.fd = fd, .handle = (uint32_t)h, .may = (unsigned)c->reply_arg2};
	return 0;
}

int nvmefs_unreg_fd(struct nvmefs_client *c, int fd)
{
	struct reg *r = reg_of(c, fd);
	int64_t ret;

	if (!r)
		return fail(c, -EBADF, "fd %d: not registered", fd);
	if (r->inflight)
		return fail(c, -EBUSY, "fd %d: requests in flight name it", fd);
	ret = control(c, NVMEFS_WIRE_UNREG_FD, r->handle, -1);
	*r = c->regs[--c->nregs];
	return ret < 0 && ret != -ENOTCONN ? (int)ret : 0;
}

/* ---- requests ---- */

/*
 * Turn io into the wire entry e with its slot: 0, -errno for a request
 * that is wrong (it completes with it), or -EAGAIN when it cannot be
 * taken now.
 */
static int prepare(struct nvmefs_client *c, const struct nvmefs_io *io, bool sync,
		   struct nvmefs_wire_sqe *e)
{
	struct reg *reg = reg_of(c, io->fd);
	struct region *r = NULL;
	struct slot *s;

	/* Room first: a wrong request taken completes at once, in ready. */
	if (c->free_slot >= c->hello.max_inflight || c->sent + c->nready >= c->hello.max_inflight)
		return -EAGAIN;
	if (!reg)
		return fail(c, -EBADF, "fd %d: not registered (nvmefs_reg_fd)", io->fd);
	if (io->op != NVMEFS_OP_READ && io->op != NVMEFS_OP_WRITE && io->op != NVMEFS_OP_FSYNC)
		return fail(c, -EINVAL, "op %d: not NVMEFS_OP_READ, _WRITE or _FSYNC", io->op);
	if (io->op != NVMEFS_OP_FSYNC && io->len) {
		r = region_of(c, io->buf, io->len);
		if (!r) {
			int ret;

			if (io->len > BOUNCE_CAP)
				return fail(c, -EINVAL,
					    "%zu bytes outside shared memory: at most "
					    "256 MiB per request (nvmefs_buf_alloc)",
					    io->len);
			ret = bounce_get(c, io->len, &r);
			if (ret)
				return ret;
			c->st.bounced++;
			if (io->op == NVMEFS_OP_WRITE) {
				memcpy(r->base, io->buf, io->len);
				c->st.bounce_bytes += io->len;
			}
		}
	}
	s = &c->slots[c->free_slot];
	c->free_slot = s->next_free;
	*s = (struct slot){.used = true,
			   .sync = sync,
			   .op = io->op,
			   .user_data = io->user_data,
			   .ubuf = io->buf,
			   .len = io->len,
			   .region = r,
			   .reg = reg};
	reg->inflight++;
	if (r)
		r->inflight++;
	*e = (struct nvmefs_wire_sqe){.user_data = (uint64_t)(s - c->slots),
				      .off = io->off,
				      .len = io->op == NVMEFS_OP_FSYNC ? 0 : io->len,
				      .mem_off = r ? (uint64_t)((uint8_t *)io->buf - r->base) : 0,
				      .handle = reg->handle,
				      .region = r ? r->id : 0,
				      .op = (uint32_t)io->op};
	if (r && r->bounce)
		e->mem_off = 0;
	c->st.requests++;
	return 0;
}

static int submit(struct nvmefs_client *c, const struct nvmefs_io *ios, unsigned n, bool sync)
{
	struct nvmefs_wire_sqe batch[NVMEFS_WIRE_MAX_BATCH];
	unsigned nb = 0, taken = 0;
	int ret = 0;

	if (c->dead)
		return fail(c, -ENOTCONN, "the daemon is gone");
	while (taken < n) {
		ret = prepare(c, &ios[taken], sync, &batch[nb]);
		if (ret == -EAGAIN)
			break;
		if (ret && !taken) /* the first is wrong: nothing taken */
			break;
		if (ret) /* taken, and completed with its error at once */
			c->ready[c->nready++] =
				(struct nvmefs_cqe){.user_data = ios[taken].user_data, .res = ret};
		else
			nb++;
		taken++;
		ret = 0;
		if (nb == c->hello.max_batch || nb == NVMEFS_WIRE_MAX_BATCH || taken == n) {
			if (nb && send_msg(c, NVMEFS_WIRE_SUBMIT, 0, batch, nb,
					   nb * sizeof(batch[0]), -1)) {
				c->sent += nb;
				lose(c);
				return -ENOTCONN;
			}
			c->sent += nb;
			nb = 0;
		}
	}
	if (nb) {
		if (send_msg(c, NVMEFS_WIRE_SUBMIT, 0, batch, nb, nb * sizeof(batch[0]), -1)) {
			c->sent += nb;
			lose(c);
			return -ENOTCONN;
		}
		c->sent += nb;
	}
	if (taken)
		return (int)taken;
	return ret ? ret : -EAGAIN;
}

int nvmefs_submit(struct nvmefs_client *c, const struct nvmefs_io *ios, unsigned n)
{
	c->err[0] = '\0';
	if (!n)
		return 0;
	return submit(c, ios, n, false);
}

int nvmefs_wait(struct nvmefs_client *c, struct nvmefs_cqe *cqes, unsigned max, unsigned min,
		int timeout_ms)
{
	struct timespec now;
	int64_t deadline = -1;
	unsigned n;

	if (min > c->sent + c->nready)
		min = c->sent + c->nready;
	if (timeout_ms > 0) {
		clock_gettime(CLOCK_MONOTONIC, &now);
		deadline = now.tv_sec * 1000 + now.tv_nsec / 1000000 + timeout_ms;
	}
	while (c->nready < min) {
		int left = timeout_ms, ret;

		if (deadline >= 0) {
			clock_gettime(CLOCK_MONOTONIC, &now);
			left = (int)(deadline - (now.tv_sec * 1000 + now.tv_nsec / 1000000));
			if (left < 0)
				left = 0;
		}
		ret = pump(c, left);

		if (ret == -ENOTCONN && c->nready)
			break; /* the failed requests first */
		if (ret < 0)
			return ret;
		if (!ret && left == 0)
			break; /* the timeout */
	}
	n = c->nready < max ? c->nready : max;
	memcpy(cqes, c->ready, n * sizeof(*cqes));
	memmove(c->ready, c->ready + n, (c->nready - n) * sizeof(*cqes));
	c->nready -= n;
	return (int)n;
}

/* One synchronous request: its result. */
static int64_t sync_io(struct nvmefs_client *c, int op, int fd, void *buf, size_t len, uint64_t off)
{
	struct nvmefs_io io = {.fd = fd, .op = op, .buf = buf, .len = len, .off = off};
	int ret;

	c->sync_done = false;
	for (;;) {
		ret = submit(c, &io, 1, true);
		if (ret != -EAGAIN)
			break;
		/* Room comes with a completion, unless every slot holds one
		 * already: then only the caller's nvmefs_wait makes room. */
		if (!c->sent)
			return fail(c, -EAGAIN,
				    "%u completions wait to be reaped (nvmefs_wait): no room for "
				    "a synchronous request",
				    c->nready);
		ret = pump(c, -1);
		if (ret < 0)
			return ret;
	}
	if (ret < 0)
		return ret;
	while (!c->sync_done) {
		ret = pump(c, -1);
		if (ret < 0 && !c->sync_done)
			return ret;
	}
	return c->sync_res;
}

/* A synchronous read or write: in pieces when bounced (a bounce region
 * holds SYNC_CHUNK at most), whole when the buffer is shared. */
static ssize_t sync_rw(struct nvmefs_client *c, int op, int fd, void *buf, size_t len, uint64_t off)
{
	size_t done = 0;

	c->err[0] = '\0';
	if (region_of(c, buf, len) || len <= SYNC_CHUNK)
		return (ssize_t)sync_io(c, op, fd, buf, len, off);
	while (done < len) {
		size_t n = len - done < SYNC_CHUNK ? len - done : SYNC_CHUNK;
		int64_t ret = sync_io(c, op, fd, (uint8_t *)buf + done, n, off + done);

		if (ret < 0)
			return done ? (ssize_t)done : (ssize_t)ret;
		done += (size_t)ret;
		if ((size_t)ret < n)
			break; /* the end of the file */
	}
	return (ssize_t)done;
}

ssize_t nvmefs_pread(struct nvmefs_client *c, int fd, void *buf, size_t len, uint64_t off)
{
	return sync_rw(c, NVMEFS_OP_READ, fd, buf, len, off);
}

ssize_t nvmefs_pwrite(struct nvmefs_client *c, int fd, const void *buf, size_t len, uint64_t off)
{
	return sync_rw(c, NVMEFS_OP_WRITE, fd, (void *)buf, len, off);
}

int nvmefs_fsync(struct nvmefs_client *c, int fd)
{
	c->err[0] = '\0';
	return (int)sync_io(c, NVMEFS_OP_FSYNC, fd, NULL, 0, 0);
}

void nvmefs_detach(struct nvmefs_client *c)
{
	if (!c)
		return;
	while (c->sent && pump(c, -1) >= 0)
		;
	/* Closing the connection gives back, in the daemon, every file and
	 * region it holds for us: no message per registration. */
	c->dead = true;
	close(c->sock);
	for (size_t i = 0; i < c->nregions; i++) {
		if (c->regions[i]->bounce) {
			munmap(c->regions[i]->base, c->regions[i]->size);
			close(c->regions[i]->memfd);
		}
		free(c->regions[i]);
	}
	free(c->regions);
	free(c->regs);
	free(c->slots);
	free(c->ready);
	free(c->rbuf);
	free(c);
}
