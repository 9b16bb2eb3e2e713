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
 *
 * This file holds the connection (messages, the receive pump, control
 * calls), attach and detach, and the descriptors; client_buf.c the shared
 * buffers and bounce regions, client_io.c the requests; client_i.h what
 * they share.
 */
#include "client_i.h"
#include "sys_i.h"
#include "nvmefs/spin.h"

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

static __thread char attach_err[512];

/* Say what failed (for nvmefs_client_error) and return ret. */
__attribute__((format(printf, 3, 4))) int nvmefs_cl_fail(struct nvmefs_client *c, int ret,
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
int nvmefs_cl_send_msg(struct nvmefs_client *c, uint16_t type, int64_t arg, int64_t arg2,
		       const void *body, uint32_t cnt, size_t len, int fd)
{
	struct nvmefs_wire_hdr h = {.magic = NVMEFS_WIRE_MAGIC,
				    .version = NVMEFS_WIRE_VERSION,
				    .type = type,
				    .count = cnt,
				    .arg = arg,
				    .arg2 = arg2};
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
void nvmefs_cl_lose(struct nvmefs_client *c)
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
 * Receive one message with no time limit: polled for during the client's
 * window (the daemon answers a control message or a small request in tens
 * of microseconds, and finding the answer costs less than being woken for
 * it), then waited for in recv alone, not poll(2) and recv (one wait
 * queue's wake-up less; docs/NATIVE.md, "Creating files").
 */
static ssize_t recv_wait(struct nvmefs_client *c)
{
	ssize_t n = recv(c->sock, c->rbuf, NVMEFS_WIRE_MAX_MSG, MSG_DONTWAIT);
	/* A caller with a queue at the daemon has work coming anyway, and
	 * its polling would take the CPU the daemon needs: its own, shorter
	 * window (client_spin_ns). */
	struct nvmefs_spin *s = c->sent > 1 ? &c->spin_q : &c->spin;
	uint64_t t0, end;

	if (n >= 0 || errno != EAGAIN)
		return n;
	if (!s->max_ns)
		return recv(c->sock, c->rbuf, NVMEFS_WIRE_MAX_MSG, 0);
	t0 = nvmefs_spin_clock();
	end = t0 + s->ns;
	while (nvmefs_spin_clock() < end) {
		n = recv(c->sock, c->rbuf, NVMEFS_WIRE_MAX_MSG, MSG_DONTWAIT);
		if (n >= 0 || errno != EAGAIN)
			return n;
	}
	/* Timed even with the window closed, so that it can open again. */
	n = recv(c->sock, c->rbuf, NVMEFS_WIRE_MAX_MSG, 0);
	nvmefs_spin_adapt(s, nvmefs_spin_clock() - t0);
	return n;
}

/*
 * Receive and act on one message, waiting up to timeout_ms (-1: no limit).
 * Returns 1 when one came, 0 at the timeout, -ENOTCONN when the daemon is
 * gone (or broke the protocol: the connection is then dropped).
 */
int nvmefs_cl_pump(struct nvmefs_client *c, int timeout_ms)
{
	struct pollfd p = {.fd = c->sock, .events = POLLIN};
	struct nvmefs_wire_msg m;
	ssize_t n;
	int ret;

	if (c->dead)
		return -ENOTCONN;
	if (timeout_ms >= 0) {
		ret = poll(&p, 1, timeout_ms);
		if (ret < 0)
			return errno == EINTR ? 0 : -errno;
		if (!ret)
			return 0;
		n = recv(c->sock, c->rbuf, NVMEFS_WIRE_MAX_MSG, MSG_DONTWAIT);
	} else {
		n = recv_wait(c);
	}
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return 0;
	ret = n <= 0 ? -ENOTCONN : nvmefs_wire_parse(c->rbuf, (size_t)n, 0, &m);
	if (!ret && m.hdr.type == NVMEFS_WIRE_COMPLETE) {
		ret = on_complete(c, &m);
	} else if (!ret && c->unanswered) {
		/* The reply to a message nobody waits for (nvmefs_close_fd):
		 * replies come in order, so it is the oldest's. */
		c->unanswered--;
		if (m.hdr.arg < 0)
			c->late_errors++;
	} else if (!ret && c->want_reply && !c->got_reply) {
		c->got_reply = true;
		c->reply_arg = m.hdr.arg;
		c->reply_arg2 = m.hdr.arg2;
		if ((size_t)n == sizeof(m.hdr) + sizeof(c->hello))
			memcpy(&c->hello, m.entries, sizeof(c->hello));
		else if ((size_t)n == sizeof(m.hdr) + sizeof(c->reply_stat))
			memcpy(&c->reply_stat, m.entries, sizeof(c->reply_stat));
	} else if (!ret) {
		ret = -EBADMSG; /* a reply nobody asked for */
	}
	if (ret) {
		nvmefs_cl_fail(c, -ENOTCONN,
			       "the daemon closed the connection or broke the protocol (%s)",
			       strerror(-ret));
		nvmefs_cl_lose(c);
		return -ENOTCONN;
	}
	return 1;
}

/* A control call: send, then wait for its reply (completions may come
 * first). Returns the reply's arg (a count or -errno). */
int64_t nvmefs_cl_control(struct nvmefs_client *c, uint16_t type, int64_t arg, int fd)
{
	return nvmefs_cl_call(c, type, arg, 0, NULL, 0, fd);
}

int64_t nvmefs_cl_call(struct nvmefs_client *c, uint16_t type, int64_t arg, int64_t arg2,
		       const void *body, uint32_t len, int fd)
{
	return nvmefs_cl_call_n(c, type, arg, arg2, body, len, len, fd);
}

int64_t nvmefs_cl_call_n(struct nvmefs_client *c, uint16_t type, int64_t arg, int64_t arg2,
			 const void *body, uint32_t cnt, size_t len, int fd)
{
	int ret = nvmefs_cl_send_msg(c, type, arg, arg2, body, cnt, len, fd);

	if (ret) {
		nvmefs_cl_lose(c);
		return ret;
	}
	c->want_reply = true;
	c->got_reply = false;
	while (!c->got_reply) {
		ret = nvmefs_cl_pump(c, -1);
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
	sys_close(fd);
	return ret;
}

static int hello(struct nvmefs_client *c, const char *root)
{
	int64_t ret = nvmefs_cl_control(c, NVMEFS_WIRE_HELLO, 0, -1);

	if (ret < 0)
		return nvmefs_cl_fail(c, (int)ret, "%s: the daemon refused the connection: %s",
				      root, strerror((int)-ret));
	if ((dev_t)c->hello.dev != c->dev || !c->hello.max_inflight || !c->hello.block)
		return nvmefs_cl_fail(c, -EPERM, "%s: the daemon's socket belongs to another mount",
				      root);
	if (c->hello.max_inflight > NVMEFS_WIRE_MAX_INFLIGHT)
		c->hello.max_inflight = NVMEFS_WIRE_MAX_INFLIGHT;
	return 0;
}

/* Replies a client leaves unread (nvmefs_close_fd) before it reads them:
 * well under what the socket and the daemon's queue (MAX_OUT) hold. */
#define MAX_UNANSWERED 32u

/*
 * The longest a wait polls before it sleeps: NVMEFS_CLIENT_SPIN_US
 * microseconds (0: never), by default 200 for a lone request or a control
 * call (a 4 KiB write to a RAM loop device is answered in 50-150 us on
 * this project's VM, and a caller woken for it costs 20-50% more a file:
 * PERFORMANCE.md, "Wake-ups per file, and the door's create"), and at most 50 (the
 * daemon's -o spin) with more requests at the daemon, whose 1 MiB reads
 * lost 22% to a caller polling 200.
 */
#define CLIENT_SPIN_NS	 200000u
#define CLIENT_SPIN_Q_NS 50000u

static uint64_t client_spin_ns(void)
{
	const char *e = getenv("NVMEFS_CLIENT_SPIN_US");
	char *end;
	unsigned long us;

	if (!e || !*e)
		return CLIENT_SPIN_NS;
	us = strtoul(e, &end, 10);
	return *end || us > 10000 ? CLIENT_SPIN_NS : (uint64_t)us * 1000;
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
	nvmefs_spin_init(&c->spin, client_spin_ns());
	nvmefs_spin_init(&c->spin_q,
			 c->spin.max_ns < CLIENT_SPIN_Q_NS ? c->spin.max_ns : CLIENT_SPIN_Q_NS);
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
		return nvmefs_cl_fail(NULL, ret, "%s: %s", path, strerror(-ret));
	if (sf.f_type != FUSE_SUPER_MAGIC)
		return nvmefs_cl_fail(NULL, -ENOTSUP, "%s: not on an nvmefs mount", path);
	path = dir;
	c = calloc(1, sizeof(*c));
	if (!c || client_alloc(c)) {
		ret = nvmefs_cl_fail(NULL, -ENOMEM, "out of memory");
		goto err;
	}
	c->sock = -1;
	ret = find_root(path, &c->dev, root);
	if (ret) {
		nvmefs_cl_fail(NULL, ret, "%s: %s", path, strerror(-ret));
		goto err;
	}
	ret = read_config(root, &pid, sock, sizeof(sock));
	if (ret == -ENOENT || (!ret && !sock[0]))
		ret = -EPROTONOSUPPORT;
	if (ret) {
		nvmefs_cl_fail(NULL, ret, "%s: not an nvmefs mount with a native client door (%s)",
			       root, strerror(-ret));
		goto err;
	}
	ret = connect_door(sock, pid, &c->sock);
	if (!ret && sys_ident(c->sock, &c->sock_dev, &c->sock_ino))
		ret = -errno;
	if (ret) {
		nvmefs_cl_fail(NULL, ret, "%s: cannot reach its daemon (pid %d) at %s: %s", root,
			       (int)pid, sock, strerror(-ret));
		goto err;
	}
	ret = hello(c, root);
	if (ret) {
		nvmefs_cl_fail(NULL, ret, "%s", c->err);
		goto err;
	}
	*out = c;
	return 0;
err:
	if (c && c->sock >= 0)
		sys_close(c->sock);
	if (c) {
		free(c->rbuf);
		free(c->slots);
		free(c->ready);
	}
	free(c);
	return ret;
}

/* ---- descriptors ---- */

struct reg *nvmefs_cl_reg_of(struct nvmefs_client *c, int fd)
{
	for (size_t i = 0; i < c->nregs; i++)
		if (c->regs[i].fd == fd)
			return &c->regs[i];
	return NULL;
}

void nvmefs_cl_reg_renumber(struct nvmefs_client *c, int fd, int to)
{
	struct reg *r = nvmefs_cl_reg_of(c, fd);

	if (r)
		r->fd = to;
}

/* Before a registration under fd: 0 when fd has none yet and the table has
 * room for one more, else -errno (said). */
static int reg_room(struct nvmefs_client *c, int fd)
{
	struct reg *v;

	c->err[0] = '\0';
	if (nvmefs_cl_reg_of(c, fd))
		return nvmefs_cl_fail(c, -EEXIST, "fd %d: already registered", fd);
	v = realloc(c->regs, (c->nregs + 1) * sizeof(*v));
	if (!v)
		return nvmefs_cl_fail(c, -ENOMEM, "out of memory");
	c->regs = v;
	return 0;
}

/* The daemon's handle h for fd, with the reply's access (room made). */
static void reg_add(struct nvmefs_client *c, int fd, int64_t h)
{
	c->regs[c->nregs++] =
		(struct reg){.fd = fd, .handle = (uint32_t)h, .may = (unsigned)c->reply_arg2};
}

int nvmefs_reg_fd(struct nvmefs_client *c, int fd)
{
	int64_t h = reg_room(c, fd);

	if (h)
		return (int)h;
	if (sys_fcntl(fd, F_GETFD, 0) < 0)
		return nvmefs_cl_fail(c, -EBADF, "fd %d: not an open descriptor", fd);
	h = nvmefs_cl_control(c, NVMEFS_WIRE_REG_FD, 0, fd);
	if (h == -EXDEV)
		return nvmefs_cl_fail(c, -EXDEV,
				      "fd %d: not a file of the nvmefs volume this client is "
				      "attached to",
				      fd);
	if (h < 0)
		return nvmefs_cl_fail(c, (int)h, "fd %d: refused: %s%s", fd, strerror((int)-h),
				      h == -EOPNOTSUPP
					      ? " (writing through a mount with -o writeback)"
				      : h == -EINVAL ? " (not a regular file)"
				      : h == -EBADF  ? " (an O_PATH descriptor)"
						     : "");
	reg_add(c, fd, h);
	return 0;
}

int nvmefs_create(struct nvmefs_client *c, int dirfd, const char *name, int flags, mode_t mode,
		  mode_t cmask, int fd, struct stat *st)
{
	size_t len = strlen(name);
	struct nvmefs_wire_stat *w = &c->reply_stat;
	int64_t h = reg_room(c, fd);

	if (h)
		return (int)h;
	if (!nvmefs_wire_name_ok(name, len))
		return nvmefs_cl_fail(c, -EINVAL, "\"%s\": not a name a file may have", name);
	h = nvmefs_cl_call(c, NVMEFS_WIRE_CREATE, flags,
			   (int64_t)(mode & 07777) | (int64_t)(cmask & 0777) << 32, name,
			   (uint32_t)len, dirfd);
	if (h < 0)
		return h == -EEXIST ? (int)h
				    : nvmefs_cl_fail(c, (int)h, "create %s: %s", name,
						     strerror((int)-h));
	reg_add(c, fd, h);
	*st = (struct stat){
		.st_dev = c->dev,
		.st_ino = w->ino,
		.st_mode = w->mode,
		.st_nlink = w->nlink,
		.st_uid = w->uid,
		.st_gid = w->gid,
		.st_size = (off_t)w->size,
		.st_blksize = (blksize_t)w->blksize,
		.st_blocks = (blkcnt_t)w->blocks,
		.st_atim = {w->atime_sec, w->atime_nsec},
		.st_mtim = {w->mtime_sec, w->mtime_nsec},
		.st_ctim = {w->ctime_sec, w->ctime_nsec},
	};
	return 0;
}

int nvmefs_close_fd(struct nvmefs_client *c, int fd)
{
	struct reg *r = nvmefs_cl_reg_of(c, fd);
	int ret;

	if (!r)
		return nvmefs_cl_fail(c, -EBADF, "fd %d: not registered", fd);
	/* Its requests done; and replies come in order, so the next pump that
	 * meets this one drops it, but not too many at once: unread replies
	 * fill the socket, the daemon then stops reading us, and our next
	 * send would block for ever. */
	while (r->inflight || c->unanswered >= MAX_UNANSWERED) {
		ret = nvmefs_cl_pump(c, -1);
		if (ret < 0)
			break;
	}
	ret = nvmefs_cl_send_msg(c, NVMEFS_WIRE_UNREG_FD, r->handle, 0, NULL, 0, 0, -1);
	if (!ret)
		c->unanswered++;
	*r = c->regs[--c->nregs];
	return 0;
}

int nvmefs_unreg_fd(struct nvmefs_client *c, int fd)
{
	struct reg *r = nvmefs_cl_reg_of(c, fd);
	int64_t ret;

	if (!r)
		return nvmefs_cl_fail(c, -EBADF, "fd %d: not registered", fd);
	if (r->inflight)
		return nvmefs_cl_fail(c, -EBUSY, "fd %d: requests in flight name it", fd);
	ret = nvmefs_cl_control(c, NVMEFS_WIRE_UNREG_FD, r->handle, -1);
	*r = c->regs[--c->nregs];
	return ret < 0 && ret != -ENOTCONN ? (int)ret : 0;
}

void nvmefs_detach(struct nvmefs_client *c)
{
	if (!c)
		return;
	while ((c->sent || c->unanswered) && nvmefs_cl_pump(c, -1) >= 0)
		;
	/* Closing the connection gives back, in the daemon, every file and
	 * region it holds for us: no message per registration. */
	c->dead = true;
	/* A program may have closed it behind us and the number be another
	 * file's now: not ours to close then. */
	if (sys_ident_is(c->sock, c->sock_dev, c->sock_ino))
		sys_close(c->sock);
	for (size_t i = 0; i < c->nregions; i++) {
		if (c->regions[i]->bounce)
			munmap(c->regions[i]->base, c->regions[i]->size);
		free(c->regions[i]);
	}
	free(c->regions);
	free(c->regs);
	free(c->slots);
	free(c->ready);
	free(c->rbuf);
	free(c);
}
