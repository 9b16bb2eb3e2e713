// SPDX-License-Identifier: MIT
/*
 * The native door: the daemon's side of libnvmefs (include/libnvmefs.h,
 * protocol in include/nvmefs/wire.h, design in docs/NATIVE.md).
 *
 * One thread accepts connections on an abstract Unix socket; each client
 * gets a thread of its own that receives its messages, checks them, calls
 * the core (nvmefs_data_read_into / nvmefs_data_write_from on the client's
 * shared memory, nvmefs_journal_commit for fsync) and sends completions.
 * I/O completions arrive on the engine's threads: they queue the request
 * and wake the client's thread, which does everything that may block
 * (asking the kernel to drop cached pages, sending); only a read's
 * completion, which needs nothing done after it, they send themselves
 * when the socket takes it at once (server_io.c, send_now).
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
 *
 * This file holds the control messages (registrations, a SUBMIT's checks),
 * the client's thread, the acceptor and the door's start and stop;
 * server_io.c sends messages and runs the requests; server_i.h holds what
 * both share.
 */
#include "server_i.h"
#include "journal_i.h"
#include "namei.h"
#include "util_i.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <unistd.h>

#include "nvmefs/spin.h"
#include "nvmefs/util.h"
#include "nvmefs/wire.h"

/* Linux 6.8's statmount(2), newer than Debian 12's headers (uapi
 * linux/stat.h, linux/mount.h; the number is the same on every
 * architecture with the generic table). */
#define NVMEFS_STATX_MNT_ID_UNIQUE 0x4000u
#define NVMEFS_NR_STATMOUNT	   457
#define NVMEFS_STATMOUNT_SB_BASIC  0x1u
#define NVMEFS_STATMOUNT_MNT_BASIC 0x2u
#define NVMEFS_SB_RDONLY	   0x1u
#define NVMEFS_MOUNT_ATTR_RDONLY   0x1u

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
	if (c->srv->vol->opts.write_behind)
		h.flags = NVMEFS_WIRE_HELLO_BEHIND;
	memcpy(h.uuid, c->srv->vol->label.uuid, sizeof(h.uuid));
	return queue_msg(c, NVMEFS_WIRE_REPLY, ret, 0, &h, 0, ret ? 0 : sizeof(h));
}

/* Type and inode of what fd refers to, 0 when it is of this mount, else
 * -EXDEV or -errno. From what the kernel knows already: no request to the
 * file's filesystem, which may be another FUSE daemon that never answers. */
static int of_mount(struct nclient *c, int fd, struct statx *stx)
{
	dev_t dev;
	int ret;

	if (statx(fd, "", AT_EMPTY_PATH | AT_STATX_DONT_SYNC,
		  STATX_TYPE | STATX_INO | NVMEFS_STATX_MNT_ID_UNIQUE, stx))
		return -errno;
	ret = mount_dev(c->srv, &dev);
	if (ret)
		return ret;
	return makedev(stx->stx_dev_major, stx->stx_dev_minor) == dev ? 0 : -EXDEV;
}

/*
 * Whether the mount fd was opened through is read-only (a read-only bind
 * mount of ours has our st_dev), asked of the VFS alone: statmount(2) of
 * the mount's unique id, which of_mount's statx asked for (Linux 6.8).
 * fstatvfs(3) would say it too, but it sends the filesystem a STATFS:
 * a round trip through our own /dev/fuse workers for every create. Where
 * statmount cannot answer (an older kernel, a mount in another mount
 * namespace than the daemon's), fstatvfs does.
 */
static bool mount_read_only(int fd, const struct statx *stx)
{
	struct {
		uint32_t size, spare;
		uint64_t mnt_id, param;
	} req = {.size = 24, .param = NVMEFS_STATMOUNT_SB_BASIC | NVMEFS_STATMOUNT_MNT_BASIC};
	union {
		struct { /* struct statmount's first fields */
			uint32_t size, spare1;
			uint64_t mask;
			uint32_t sb_dev_major, sb_dev_minor;
			uint64_t sb_magic;
			uint32_t sb_flags, fs_type;
			uint64_t mnt_id, mnt_parent_id;
			uint32_t mnt_id_old, mnt_parent_id_old;
			uint64_t mnt_attr;
		} sm;
		uint8_t room[1024]; /* the whole struct is 512 bytes in 6.18 */
	} buf;
	struct statvfs vfs;

	if (stx->stx_mask & NVMEFS_STATX_MNT_ID_UNIQUE) {
		req.mnt_id = stx->stx_mnt_id;
		if (syscall(NVMEFS_NR_STATMOUNT, &req, &buf, sizeof(buf), 0) == 0 &&
		    (buf.sm.mask & req.param) == req.param)
			return (buf.sm.sb_flags & NVMEFS_SB_RDONLY) ||
			       (buf.sm.mnt_attr & NVMEFS_MOUNT_ATTR_RDONLY);
	}
	return fstatvfs(fd, &vfs) == 0 && (vfs.f_flag & ST_RDONLY);
}

/* What the descriptor fd proves: 0 with *ino and *may, or -errno. */
static int check_fd(struct nclient *c, int fd, uint64_t *ino, unsigned *may)
{
	int fl = fcntl(fd, F_GETFL);
	struct statx stx;
	int ret;

	if (fl < 0 || (fl & O_PATH))
		return -EBADF; /* O_PATH opens prove no access */
	ret = of_mount(c, fd, &stx);
	if (ret)
		return ret;
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
	ret = nvmefs_ns_open(vol, ino, O_RDONLY, &in);
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
	layout_end(c, f);
	nvmefs_ns_release(c->srv->vol, f->ino);
	f->in = NULL;
	return 0;
}

/* Map the client's memfd of size bytes: sealed so that it cannot shrink
 * under the mapping (a truncated mapping would fault this process). */
static int64_t do_reg_mem(struct nclient *c, int fd, int64_t size)
{
	struct statfs sfs;
	bool huge;
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
	huge = !fstatfs(fd, &sfs) && sfs.f_type == HUGETLBFS_MAGIC;
	i = slot((void **)&c->regions, &c->nregions, sizeof(*c->regions), region_used);
	if (i < 0)
		return i;
	/* Populated now (the client has the pages locked: only page tables),
	 * not fault by fault under the first requests' O_DIRECT: that made
	 * the first pass over a new 1 GiB buffer half as fast. */
	p = mmap(NULL, (size_t)size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
	if (p == MAP_FAILED)
		return -errno;
	c->regions[i] = (struct nregion){.base = p, .size = (uint64_t)size, .huge = huge};
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
	/* Loans whose word lies in it end: nothing may store there. */
	for (uint32_t i = 0; r->leases && i < c->nfiles; i++)
		if (c->files[i].pub && c->files[i].lease_region == (uint32_t)id)
			layout_end(c, &c->files[i]);
	munmap(r->base, r->size);
	*r = (struct nregion){0};
	return 0;
}

/*
 * Whether cred may add a name to the directory whose attributes are *dir:
 * write and search, as the kernel's may_create() asks of it, by the mode
 * bits alone. Root is no exception: the daemon cannot see whether it has
 * CAP_DAC_OVERRIDE, so a create the bits refuse it is -EACCES, and the
 * client goes through the mount, where the kernel decides (as for an ACL,
 * which the door does not evaluate: -EOPNOTSUPP).
 */
static int may_create(struct nclient *c, const struct nvmefs_cred *cred, uint64_t dino,
		      const struct stat *dir)
{
	const unsigned want = 3; /* write and search */
	unsigned bits;

	if (c->srv->vol->posix_acl &&
	    nvmefs_xattr_get(c->srv->vol, dino, "system.posix_acl_access", NULL, 0) > 0)
		return -EOPNOTSUPP;
	if (cred->uid == dir->st_uid)
		bits = (dir->st_mode >> 6) & 7;
	else if (cred->gid == dir->st_gid)
		bits = (dir->st_mode >> 3) & 7;
	else if (((dir->st_mode >> 3) & want) == (dir->st_mode & want))
		bits = dir->st_mode & 7; /* group and others alike: no need to know */
	else if (nvmefs_pid_in_group(cred->pid, (uint32_t)dir->st_gid))
		bits = (dir->st_mode >> 3) & 7;
	else
		bits = dir->st_mode & 7;
	return (bits & want) == want ? 0 : -EACCES;
}

/* The open(2) flags CREATE serves: a new file, written. Others (append,
 * direct or synchronous I/O, a directory, a temporary file, reading) go
 * through the mount. */
#define CREATE_FLAGS                                                                               \
	(O_ACCMODE | O_CREAT | O_EXCL | O_TRUNC | O_CLOEXEC | O_NOCTTY | O_NONBLOCK | O_NOFOLLOW | \
	 O_LARGEFILE)

static void wire_stat(const struct stat *st, struct nvmefs_wire_stat *w)
{
	*w = (struct nvmefs_wire_stat){
		.ino = st->st_ino,
		.size = (uint64_t)st->st_size,
		.blocks = (uint64_t)st->st_blocks,
		.mode = st->st_mode,
		.nlink = (uint32_t)st->st_nlink,
		.uid = st->st_uid,
		.gid = st->st_gid,
		.blksize = (uint32_t)st->st_blksize,
		.atime_sec = st->st_atim.tv_sec,
		.mtime_sec = st->st_mtim.tv_sec,
		.ctime_sec = st->st_ctim.tv_sec,
		.atime_nsec = (uint32_t)st->st_atim.tv_nsec,
		.mtime_nsec = (uint32_t)st->st_mtim.tv_nsec,
		.ctime_nsec = (uint32_t)st->st_ctim.tv_nsec,
	};
}

/*
 * CREATE: make the regular file name in the directory fd names, as an
 * open(O_CREAT) through the mount does, and register it for writing. The
 * directory descriptor proves the walk to it (even O_PATH: the kernel
 * checked search on every directory above); write and search on the
 * directory itself are checked here against the sender's credentials at
 * the send (SCM_CREDENTIALS). Before the reply the kernel forgets the
 * name (a negative dentry) and the directory's attributes, so that every
 * other process sees the file at once. An existing name is -EEXIST: the
 * client opens it through the mount unless it asked for O_EXCL.
 */
static int64_t do_create(struct nclient *c, int fd, const struct nvmefs_wire_msg *m,
			 struct nvmefs_wire_stat *out)
{
	struct nvmefs_vol *vol = c->srv->vol;
	struct nvmefs_cred cred = c->msg_cred;
	char name[NVMEFS_WIRE_NAME_MAX + 1];
	int flags = (int)m->hdr.arg;
	struct nvmefs_inode *in;
	struct stat dir, st;
	struct statx stx;
	int64_t i;
	int ret;

	if (fd < 0)
		return -EBADMSG;
	if ((flags & ~CREATE_FLAGS) || !(flags & O_CREAT) || (flags & O_ACCMODE) == O_RDONLY ||
	    (flags & O_ACCMODE) == O_ACCMODE)
		return -EOPNOTSUPP;
	if (vol->writeback)
		return -EOPNOTSUPP; /* as REG_FD: the kernel would own its size */
	ret = of_mount(c, fd, &stx);
	if (ret)
		return ret;
	if (!S_ISDIR(stx.stx_mode) || stx.stx_ino > NVMEFS_INO_MAX)
		return -ENOTDIR;
	ret = nvmefs_ns_getattr(vol, stx.stx_ino, &dir);
	if (ret)
		return ret;
	if (!dir.st_nlink)
		return -ENOENT; /* removed since the client opened it */
	/* What the kernel would refuse before looking at the directory: a
	 * read-only mount (a read-only bind mount has the same st_dev), or a
	 * user the mount does not let in (no allow_other). */
	if (mount_read_only(fd, &stx))
		return -EROFS;
	if (!vol->allow_other && cred.uid != geteuid())
		return -EACCES;
	ret = may_create(c, &cred, stx.stx_ino, &dir);
	if (ret)
		return ret;
	memcpy(name, m->entries, m->hdr.count);
	name[m->hdr.count] = '\0';
	i = slot((void **)&c->files, &c->nfiles, sizeof(*c->files), file_used);
	if (i < 0)
		return i;
	cred.umask = (uint32_t)((uint64_t)m->hdr.arg2 >> 32) & 0777;
	ret = nvmefs_ns_create(vol, &cred, stx.stx_ino, name, (mode_t)(m->hdr.arg2 & 07777), &st,
			       &in);
	if (ret)
		return ret;
	/* The handle keeps the inode; the kernel holds no reference on it. */
	nvmefs_ns_forget(vol, st.st_ino, 1);
	/* The directory changed: the kernel drops its cached attributes
	 * (mtime), as after a create through the mount. Nothing of the name
	 * can hide the file: a LOOKUP answered ENOENT leaves a negative
	 * dentry that is never valid (test_client_create's test_basic looks
	 * the name up first, and would fail if one were kept). */
	inval(c, stx.stx_ino, -1, 0);
	count(&vol->native.creates, 1);
	c->files[i] = (struct nfile){.in = in, .ino = st.st_ino, .may = NVMEFS_WIRE_MAY_WRITE};
	if ((flags & O_ACCMODE) == O_RDWR)
		c->files[i].may |= NVMEFS_WIRE_MAY_READ;
	wire_stat(&st, out);
	return i;
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
			complete(c, e.user_data, nvmefs_journal_fsync(vol, c->files[e.handle].in));
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
	struct nvmefs_wire_stat wst;
	struct nvmefs_wire_msg m;
	unsigned may = 0;
	int64_t res, res2 = 0;
	int ret = nvmefs_wire_parse(buf, len, 1, &m);

	if (!ret && fd >= 0 && m.hdr.type != NVMEFS_WIRE_REG_FD &&
	    m.hdr.type != NVMEFS_WIRE_REG_MEM && m.hdr.type != NVMEFS_WIRE_CREATE)
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
	case NVMEFS_WIRE_CREATE:
		res = do_create(c, fd, &m, &wst);
		if (fd >= 0)
			close(fd);
		if (res < 0) {
			count(&vol->native.refused, 1);
			return reply(c, res, 0);
		}
		return queue_msg(c, NVMEFS_WIRE_REPLY, res, c->files[res].may, &wst, 0,
				 sizeof(wst));
	case NVMEFS_WIRE_LAYOUT:
		res = do_layout(c, &m, &res2);
		if (res < 0)
			count(&vol->native.refused, 1);
		return reply(c, res, res2);
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

/* Receive one message, waiting for it when wait. Returns 1 when one came,
 * 0 when none was there, or -errno when the client is gone. */
static int receive(struct nclient *c, uint8_t *buf, bool wait)
{
	union {
		struct cmsghdr h;
		char space[CMSG_SPACE(4 * sizeof(int)) + CMSG_SPACE(sizeof(struct ucred))];
	} cm;
	struct iovec iov = {.iov_base = buf, .iov_len = NVMEFS_WIRE_MAX_MSG};
	struct msghdr mh = {
		.msg_iov = &iov, .msg_iovlen = 1, .msg_control = &cm, .msg_controllen = sizeof(cm)};
	int fds[4], nfd = 0, ret;
	ssize_t n = recvmsg(c->sock, &mh, MSG_CMSG_CLOEXEC | (wait ? 0 : MSG_DONTWAIT));

	if (n < 0)
		return errno == EAGAIN || errno == EINTR ? 0 : -errno;
	if (n == 0)
		return -ECONNRESET;
	/* Requests answered from the engine's thread are finished here
	 * before the client's next message is (its UNREG_FD, say). */
	if (c->inflight)
		reap(c);
	/* Who sent it, as the kernel says (SO_PASSCRED): the real ids at the
	 * send, which a process can always act as; the connect's otherwise. */
	c->msg_cred = c->cred;
	for (struct cmsghdr *h = CMSG_FIRSTHDR(&mh); h; h = CMSG_NXTHDR(&mh, h)) {
		if (h->cmsg_level == SOL_SOCKET && h->cmsg_type == SCM_CREDENTIALS &&
		    h->cmsg_len >= CMSG_LEN(sizeof(struct ucred))) {
			struct ucred u;

			memcpy(&u, CMSG_DATA(h), sizeof(u));
			c->msg_cred =
				(struct nvmefs_cred){.uid = u.uid, .gid = u.gid, .pid = u.pid};
			continue;
		}
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
		ret = reply(c, -EBADMSG, 0);
	} else {
		ret = handle(c, buf, (size_t)n, nfd ? fds[0] : -1);
	}
	return ret ? ret : 1;
}

/*
 * Nothing left for the engine, nothing to send: wait for the client's next message
 * in recvmsg alone, after polling for it for the client's window (its
 * messages come one after another: a create, its close, the next create),
 * not in poll(2) on three descriptors. The door's stop shuts the socket
 * down to end the wait.
 */
static int receive_idle(struct nclient *c, uint8_t *buf)
{
	uint64_t t0, end;
	int ret;

	hold_send_due();
	ret = receive(c, buf, false);
	if (ret)
		return ret;
	if (!c->spin.max_ns) {
		hold_send();
		return receive(c, buf, true);
	}
	t0 = nvmefs_spin_clock();
	end = t0 + c->spin.ns;
	while (nvmefs_spin_clock() < end) {
		hold_send_due();
		if ((ret = receive(c, buf, false)))
			return ret;
	}
	hold_send();
	/* Timed even with the window closed, so that it can open again. */
	ret = receive(c, buf, true);
	nvmefs_spin_adapt(&c->spin, nvmefs_spin_clock() - t0);
	return ret;
}

/* ---- the client's thread ---- */

/* The client went (or the door closes): finish its requests in flight,
 * then give back its files and mappings. */
static void client_teardown(struct nclient *c)
{
	struct nvmefs_vol *vol = c->srv->vol;

	hold_end();
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
	for (uint32_t i = 0; i < c->nfiles; i++) {
		if (c->files[i].in) {
			layout_end(c, &c->files[i]);
			nvmefs_ns_release(vol, c->files[i].ino);
		}
	}
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
	pthread_mutex_lock(&c->mu); /* nvmefs_native_stop's shutdown */
	close(c->sock);
	c->sock = -1;
	pthread_mutex_unlock(&c->mu);
}

static void *client_main(void *arg)
{
	struct nclient *c = arg;
	uint8_t *buf = malloc(NVMEFS_WIRE_MAX_MSG);
	int ret = buf ? 0 : -ENOMEM;

	hold_begin(c);
	while (!ret) {
		/* Nothing the engine has yet to finish, nothing to send. */
		if (c->inflight == atomic_load(&c->answered) && !c->nout &&
		    !atomic_load(&c->srv->stopping)) {
			ret = receive_idle(c, buf);
			if (ret >= 0)
				ret = flush(c);
			continue;
		}
		/* Read no more while the client does not read its answers. */
		struct pollfd p[3] = {
			{.fd = c->sock,
			 .events = (c->nout < MAX_OUT ? POLLIN : 0) | (c->nout ? POLLOUT : 0)},
			{.fd = c->wake, .events = POLLIN},
			{.fd = c->srv->stop, .events = POLLIN},
		};
		uint64_t v;

		hold_send(); /* the client waits for an answer */
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
			ret = receive(c, buf, false);
			if (ret > 0)
				ret = 0;
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
	nvmefs_spin_init(&c->spin, (uint64_t)srv->vol->opts.spin_us * 1000);
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
	/* Every message then says who sent it (SCM_CREDENTIALS), for CREATE's
	 * permission checks; accepted sockets inherit it. */
	if (setsockopt(srv->lfd, SOL_SOCKET, SO_PASSCRED, &(int){1}, sizeof(int)) ||
	    bind(srv->lfd, (struct sockaddr *)&a, alen) || listen(srv->lfd, 64)) {
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
	/* Client threads waiting in recvmsg (nothing in flight) see the
	 * socket shut; the others see stop in their poll. No client comes
	 * now: the acceptor is gone. */
	atomic_store(&srv->stopping, true);
	for (struct nclient *c = srv->clients; c; c = c->next) {
		pthread_mutex_lock(&c->mu);
		if (c->sock >= 0)
			shutdown(c->sock, SHUT_RD);
		pthread_mutex_unlock(&c->mu);
	}
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
