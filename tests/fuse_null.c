// SPDX-License-Identifier: MIT
/*
 * fuse_null: a FUSE file system that stores no data, for scripts/bench.sh.
 *
 * It answers the same sequential workloads as nvmefs over the same FUSE
 * transport as nvmefs (libfuse 3.14 low level, 1 MiB requests, async
 * direct I/O, 64 background requests, direct_io in direct mode and for
 * write-only opens in cached mode) but touches no device: a WRITE's bytes
 * are dropped once the kernel has copied them in, a READ is answered with
 * zeros from one buffer. What it reaches is therefore what the kernel's
 * FUSE copies and round trips alone cost on this machine: the most any
 * daemon could get through the mount before doing its own work. The bench
 * prints nvmefs against it (docs/PERFORMANCE.md, "The FUSE ceiling").
 *
 * Its /dev/fuse loop is built as nvmefs's (fs/fuse/loop.c), not libfuse's,
 * whose workers all sleep in read(2): one of NULL_WORKERS threads leads,
 * polls /dev/fuse before it sleeps in poll(2), for nvmefs's adaptive
 * window (nvmefs/spin.h) of at most NULL_SPIN_NS,
 * reads the request, and hands the lead on before serving it unless the
 * request is one nvmefs's leader serves itself (nvmefs_serve_inline).
 * With libfuse's loop nvmefs's polling leader outran it (lookups 1.3-1.4
 * x, creates 1.2-1.8 x): a floor, not a ceiling.
 *
 * With -o uring it serves through FUSE over io_uring (Linux 6.14+, the
 * module parameter enable_uring on), with nvmefs's own transport
 * (fs/fuse/uring.c, the same queues, depths and CPU pinning; the session's
 * I/O through fs/fuse/devio.c), or refuses to run, naming the reason: the
 * bench measures the ceiling of both transports. A READ's zeros are
 * copied into the request's payload buffer there, where nvmefs reads its
 * devices straight into it: the ceiling counts one memcpy more than a
 * daemon that does. At the end it prints how many requests came through
 * the queues.
 *
 * Directories and regular files, at most NULL_FILES in all, each a name in
 * its directory, a size, a mode and times; no data, no links. Enough for
 * the bench's small-file pass (a directory of 10,000 files of 4 KiB made,
 * stat'ed and removed: the ceiling of a create, whose data it drops) as
 * well as its sequential ones. Names are found through a tree ordered by
 * (directory, name) (glibc's tsearch), as a real file system's index
 * would, so a lookup's cost does not grow with the number of files.
 * Mounted with default_permissions, as nvmefs is (fs/tools/main.c): the
 * kernel then asks for a directory's attributes before a create or an
 * unlink in it once a change there dropped them, as it does of nvmefs.
 *
 * While requests come it asks the kernel for idle CPUs quick to wake, as
 * nvmefs does (fs/fuse/cpulat.c, -o cpu_latency=US|off, default 0).
 *
 * Usage: fuse_null MOUNTPOINT [-f] [-o mode=direct|cached] [-o uring]
 *        [-o cpu_latency=US|off] [-o FUSE options]
 */
#define FUSE_USE_VERSION 314
#include <fuse_lowlevel.h>

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <search.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "door_i.h"
#include "nvmefs/spin.h"
#include "reply_open_i.h"

#define NULL_FILES    (1u << 18)
#define NULL_WORKERS  8		   /* as nvmefs's -o threads= default */
#define NULL_SPIN_NS  (50u * 1000) /* as nvmefs's -o spin= default */
#define NULL_MAX_IO   (1u << 20)
#define NULL_MAX_SIZE (1ull << 40)

struct null_file {
	char name[256];
	fuse_ino_t parent;   /* the directory it is in */
	uint64_t generation; /* bumped each time the slot is given back */
	bool used, dir;
	unsigned entries; /* a directory's */
	uid_t uid;
	gid_t gid;
	off_t size;
	mode_t mode;
	struct timespec mtime, ctime;
};

struct null_fs {
	bool direct;	   /* -o mode=direct */
	char *mode;	   /* the -o mode= string, for checking */
	int uring;	   /* -o uring: FUSE over io_uring, or no mount */
	char *cpu_latency; /* -o cpu_latency=US|off (nvmefs's; default 0) */
	struct fuse_session *se;
	struct nvmefs_uring *u;	 /* the io_uring queues (-o uring) */
	bool uring_granted;	 /* the INIT reply asked for them */
	atomic_bool rings_serve; /* they were started: nvmefs_uring_gather */
	uint64_t poll_ns;	 /* their leaders' poll window away (as nvmefs's) */
	void *zeros;		 /* NULL_MAX_IO bytes of zeros, page aligned */
	pthread_mutex_t lock;
	/* NULL_FILES entries, mapped without reserve: a page costs memory once
	 * an entry in it was used. Inode = index + 2; all protected by lock. */
	struct null_file *files;
	unsigned top; /* entries ever used: files[0, top) */
	/* Entries given back, reused oldest first once top is at the end: a
	 * ring of NULL_FILES slots, nfreed of them from freed_head. */
	unsigned *freed;
	unsigned freed_head, nfreed;
	void *names; /* tsearch tree of the used entries, by (parent, name) */
};

static struct null_fs nfs = {.lock = PTHREAD_MUTEX_INITIALIZER};

/* The /dev/fuse loop's lead (the file's top comment). */
static struct {
	pthread_mutex_t mu;
	pthread_cond_t follow;
	bool led;		 /* protected by mu */
	atomic_bool failed;	 /* a worker's read failed, or a queue did */
	struct nvmefs_spin spin; /* the leader's poll window */
} lp = {.mu = PTHREAD_MUTEX_INITIALIZER, .follow = PTHREAD_COND_INITIALIZER};
static __thread bool leading;

static const struct fuse_opt null_opts[] = {
	{"mode=%s", offsetof(struct null_fs, mode), 0},
	{"uring", offsetof(struct null_fs, uring), 1},
	{"cpu_latency=%s", offsetof(struct null_fs, cpu_latency), 0},
	FUSE_OPT_END,
};

/* The file of inode ino, or NULL; called with nfs.lock held. */
static struct null_file *file_of(fuse_ino_t ino)
{
	if (ino < 2 || ino >= 2 + (fuse_ino_t)nfs.top || !nfs.files[ino - 2].used)
		return NULL;
	return &nfs.files[ino - 2];
}

/* Whether ino is a directory (the root or one made); nfs.lock held. */
static bool is_dir(fuse_ino_t ino)
{
	struct null_file *f = file_of(ino);

	return ino == FUSE_ROOT_ID || (f && f->dir);
}

/* tsearch's order: by directory, then name. */
static int name_cmp(const void *a, const void *b)
{
	const struct null_file *x = a, *y = b;

	if (x->parent != y->parent)
		return x->parent < y->parent ? -1 : 1;
	return strcmp(x->name, y->name);
}

/* The attributes of inode ino (1 is the root), and its generation into
 * *gen unless NULL (the root's: 0); 0 or -ENOENT. */
static int stat_of(fuse_ino_t ino, struct stat *st, uint64_t *gen)
{
	struct null_file *f;
	int ret = 0;

	memset(st, 0, sizeof(*st));
	st->st_ino = ino;
	if (ino == FUSE_ROOT_ID) {
		/* The mounter's, so that a user's fusermount3 mount is its own
		 * under default_permissions. */
		st->st_mode = S_IFDIR | 0755;
		st->st_nlink = 2;
		st->st_uid = getuid();
		st->st_gid = getgid();
		return 0;
	}
	pthread_mutex_lock(&nfs.lock);
	f = file_of(ino);
	if (f) {
		st->st_mode = (f->dir ? S_IFDIR : S_IFREG) | f->mode;
		st->st_nlink = f->dir ? 2 : 1;
		st->st_uid = f->uid;
		st->st_gid = f->gid;
		st->st_size = f->size;
		st->st_blocks = (f->size + 511) / 512;
		st->st_mtim = f->mtime;
		st->st_ctim = f->ctime;
		st->st_atim = f->mtime;
		if (gen)
			*gen = f->generation;
	} else {
		ret = -ENOENT;
	}
	pthread_mutex_unlock(&nfs.lock);
	return ret;
}

static void reply_entry(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct fuse_entry_param e = {.ino = ino,
				     .attr_timeout = NVMEFS_ATTR_TIMEOUT,
				     .entry_timeout = NVMEFS_ATTR_TIMEOUT};
	int ret = stat_of(ino, &e.attr, &e.generation);

	if (ret)
		fuse_reply_err(req, -ret);
	else if (fi)
		fuse_reply_create(req, &e, fi);
	else
		fuse_reply_entry(req, &e);
}

/* The inode named name in directory parent, or 0; nfs.lock held. */
static fuse_ino_t find(fuse_ino_t parent, const char *name)
{
	struct null_file key = {.parent = parent};
	struct null_file **hit;

	if (strlen(name) >= sizeof(key.name))
		return 0;
	memcpy(key.name, name, strlen(name) + 1);
	hit = tfind(&key, &nfs.names, name_cmp);
	return hit ? (fuse_ino_t)(*hit - nfs.files) + 2 : 0;
}

/*
 * A new entry name in directory parent, of mode (S_IFREG or S_IFDIR and
 * the permission bits), owned by the caller of req: its inode, or
 * -ENOENT, -ENOTDIR, -EEXIST, -ENAMETOOLONG, -ENOSPC, -ENOMEM. Called
 * with nfs.lock held.
 */
static int64_t add(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode)
{
	const struct fuse_ctx *ctx = fuse_req_ctx(req);
	struct null_file *f;
	uint64_t gen;
	unsigned i;

	if (parent != FUSE_ROOT_ID && !file_of(parent))
		return -ENOENT;
	if (!is_dir(parent))
		return -ENOTDIR;
	if (strlen(name) >= sizeof(f->name))
		return -ENAMETOOLONG;
	if (find(parent, name))
		return -EEXIST;
	/* New slots first, then the oldest given back: an inode number the
	 * kernel may still hold (an unlinked file still open) comes back as
	 * late as can be, and with another generation. */
	if (nfs.top < NULL_FILES)
		i = nfs.top;
	else if (nfs.nfreed)
		i = nfs.freed[nfs.freed_head];
	else
		return -ENOSPC;
	f = &nfs.files[i];
	gen = f->generation;
	memset(f, 0, sizeof(*f));
	memcpy(f->name, name, strlen(name) + 1);
	f->parent = parent;
	f->generation = gen;
	f->dir = S_ISDIR(mode);
	f->mode = mode & 07777;
	f->uid = ctx->uid;
	f->gid = ctx->gid;
	clock_gettime(CLOCK_REALTIME, &f->mtime);
	f->ctime = f->mtime;
	if (!tsearch(f, &nfs.names, name_cmp))
		return -ENOMEM; /* the slot stays where it was */
	if (i != nfs.top) {
		nfs.freed_head = (nfs.freed_head + 1) % NULL_FILES;
		nfs.nfreed--;
	}
	f->used = true;
	if (i == nfs.top)
		nfs.top++;
	if (parent != FUSE_ROOT_ID)
		nfs.files[parent - 2].entries++;
	return (int64_t)i + 2;
}

/* Take entry ino out of its directory and give its slot back; nfs.lock held. */
static void drop(fuse_ino_t ino)
{
	struct null_file *f = &nfs.files[ino - 2];

	tdelete(f, &nfs.names, name_cmp);
	f->used = false;
	f->generation++;
	if (f->parent != FUSE_ROOT_ID)
		nfs.files[f->parent - 2].entries--;
	nfs.freed[(nfs.freed_head + nfs.nfreed++) % NULL_FILES] = (unsigned)(ino - 2);
}

static void null_init(void *userdata, struct fuse_conn_info *conn)
{
	(void)userdata;
	/* As nvmefs's op_init: 1 MiB requests, parallel O_DIRECT, no splice. */
	conn->want &= ~(FUSE_CAP_SPLICE_READ | FUSE_CAP_SPLICE_WRITE | FUSE_CAP_SPLICE_MOVE);
	conn->want &= ~FUSE_CAP_WRITEBACK_CACHE;
	if (conn->capable & FUSE_CAP_ATOMIC_O_TRUNC)
		conn->want |= FUSE_CAP_ATOMIC_O_TRUNC;
	if (conn->capable & FUSE_CAP_ASYNC_DIO)
		conn->want |= FUSE_CAP_ASYNC_DIO;
	conn->max_write = NULL_MAX_IO;
	conn->max_read = NULL_MAX_IO;
	conn->max_readahead = NULL_MAX_IO;
	conn->max_background = 64;
	conn->congestion_threshold = 48;
	if (nfs.u && (nvmefs_devio_offered() & nvmefs_uring_init_flag())) {
		nvmefs_devio_init_flags(nvmefs_uring_init_flag());
		nfs.uring_granted = true;
	}
}

/* Stop serving, failed: the workers see the session end within their
 * poll's timeout, and the exit status says it. */
static void stop(void)
{
	atomic_store(&lp.failed, true);
	fuse_session_exit(nfs.se);
}

/* A queue failed after INIT: the kernel's requests would wait for it. */
static void uring_failed(void *arg, int err)
{
	(void)arg;
	fprintf(stderr, "fuse_null: FUSE over io_uring failed: %s\n", strerror(-err));
	stop();
}

/* devio.c's after_init: the INIT reply is the kernel's; start the queues. */
static void init_replied(void *arg)
{
	unsigned depth, nq = nvmefs_uring_queues(nfs.u, &depth);

	(void)arg;
	if (!nfs.uring_granted) {
		fprintf(stderr, "fuse_null: -o uring: the kernel did not offer FUSE over "
				"io_uring at INIT\n");
		stop();
		return;
	}
	fprintf(stderr, "fuse_null: FUSE over io_uring: %u queue(s) of %u entries\n", nq, depth);
	if (nvmefs_uring_start(nfs.u, uring_failed, NULL))
		stop(); /* said by uring_failed */
	atomic_store_explicit(&nfs.rings_serve, true, memory_order_relaxed);
}

/* nvmefs_serve_fn of the queues: a request laid out as read(2) gives it. */
static void serve(struct fuse_session *se, struct nvmefs_vol *vol, void *req, size_t len)
{
	struct fuse_buf fb = {.mem = req, .size = len};

	(void)vol;
	nvmefs_cpulat_busy();
	fuse_session_process_buf(se, &fb);
}

/* -o uring: the queues, made before the INIT reply; 0 or -errno. */
static int prepare_uring(struct fuse_session *se)
{
	int ret = nvmefs_devio_attach(se, init_replied, NULL);

	if (!ret)
		ret = nvmefs_uring_prepare(se, NULL, 0, nfs.poll_ns, serve, &nfs.u);
	if (ret == -EPERM)
		fprintf(stderr, "fuse_null: -o uring: FUSE over io_uring is off in this kernel "
				"(/sys/module/fuse/parameters/enable_uring)\n");
	else if (ret)
		fprintf(stderr, "fuse_null: -o uring: FUSE over io_uring cannot be set up: %s\n",
			strerror(-ret));
	return ret;
}

static void null_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	fuse_ino_t ino;

	pthread_mutex_lock(&nfs.lock);
	ino = find(parent, name);
	pthread_mutex_unlock(&nfs.lock);
	if (!ino)
		fuse_reply_err(req, ENOENT);
	else
		reply_entry(req, ino, NULL);
}

static void null_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct stat st;
	int ret = stat_of(ino, &st, NULL);

	(void)fi;
	if (ret)
		fuse_reply_err(req, -ret);
	else
		fuse_reply_attr(req, &st, NVMEFS_ATTR_TIMEOUT);
}

static void null_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int to_set,
			 struct fuse_file_info *fi)
{
	struct null_file *f;
	struct stat st;
	int ret = 0;

	(void)fi;
	pthread_mutex_lock(&nfs.lock);
	f = file_of(ino);
	if (!f && ino != FUSE_ROOT_ID) {
		ret = -ENOENT;
	} else if (f) {
		if ((to_set & FUSE_SET_ATTR_SIZE) && f->dir) {
			ret = -EISDIR;
		} else if (to_set & FUSE_SET_ATTR_SIZE) {
			if ((uint64_t)attr->st_size > NULL_MAX_SIZE)
				ret = -EFBIG;
			else
				f->size = attr->st_size;
		}
		if (to_set & FUSE_SET_ATTR_MODE)
			f->mode = attr->st_mode & 07777;
		if (to_set & FUSE_SET_ATTR_MTIME)
			f->mtime = attr->st_mtim;
		clock_gettime(CLOCK_REALTIME, &f->ctime);
	}
	pthread_mutex_unlock(&nfs.lock);
	if (!ret)
		ret = stat_of(ino, &st, NULL);
	if (ret)
		fuse_reply_err(req, -ret);
	else
		fuse_reply_attr(req, &st, NVMEFS_ATTR_TIMEOUT);
}

/* direct_io as nvmefs sets it: every open in direct mode, write-only ones
 * in cached mode (with the page cache kept for other handles). */
static void set_open_flags(struct fuse_file_info *fi)
{
	fi->direct_io = nfs.direct || (fi->flags & O_ACCMODE) == O_WRONLY;
	fi->keep_cache = !nfs.direct;
}

static void null_create(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
			struct fuse_file_info *fi)
{
	int64_t ino;

	if (!S_ISREG(mode)) {
		fuse_reply_err(req, EPERM);
		return;
	}
	pthread_mutex_lock(&nfs.lock);
	ino = (int64_t)find(parent, name);
	if (ino && (fi->flags & O_EXCL))
		ino = -EEXIST;
	else if (ino && nfs.files[ino - 2].dir)
		ino = -EISDIR;
	else if (!ino)
		ino = add(req, parent, name, mode);
	pthread_mutex_unlock(&nfs.lock);
	if (ino < 0) {
		fuse_reply_err(req, (int)-ino);
		return;
	}
	set_open_flags(fi);
	reply_entry(req, (fuse_ino_t)ino, fi);
}

static void null_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct null_file *f;
	int err = 0;

	pthread_mutex_lock(&nfs.lock);
	f = file_of(ino);
	if (is_dir(ino))
		err = EISDIR;
	else if (!f)
		err = ENOENT;
	else if (fi->flags & O_TRUNC)
		f->size = 0;
	pthread_mutex_unlock(&nfs.lock);
	if (err) {
		fuse_reply_err(req, err);
		return;
	}
	set_open_flags(fi);
	nvmefs_reply_open(req, fi);
}

static void null_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		      struct fuse_file_info *fi)
{
	struct null_file *f;
	off_t end = -1;

	(void)fi;
	pthread_mutex_lock(&nfs.lock);
	f = file_of(ino);
	if (f)
		end = f->size;
	pthread_mutex_unlock(&nfs.lock);
	if (end < 0) {
		fuse_reply_err(req, ENOENT);
		return;
	}
	if (off >= end)
		size = 0;
	else if ((off_t)size > end - off)
		size = (size_t)(end - off);
	if (size > NULL_MAX_IO)
		size = NULL_MAX_IO;
	fuse_reply_buf(req, nfs.zeros, size);
}

static void null_write(fuse_req_t req, fuse_ino_t ino, const char *buf, size_t size, off_t off,
		       struct fuse_file_info *fi)
{
	struct null_file *f;
	int ret = 0;

	(void)buf;
	(void)fi;
	pthread_mutex_lock(&nfs.lock);
	f = file_of(ino);
	if (!f)
		ret = -ENOENT;
	else if ((uint64_t)off + size > NULL_MAX_SIZE)
		ret = -EFBIG;
	else if (off + (off_t)size > f->size)
		f->size = off + (off_t)size;
	if (f && !ret)
		clock_gettime(CLOCK_REALTIME, &f->mtime);
	pthread_mutex_unlock(&nfs.lock);
	if (ret)
		fuse_reply_err(req, -ret);
	else
		fuse_reply_write(req, size);
}

static void null_fallocate(fuse_req_t req, fuse_ino_t ino, int mode, off_t off, off_t len,
			   struct fuse_file_info *fi)
{
	struct null_file *f;
	int ret = 0;

	(void)fi;
	if (mode) {
		fuse_reply_err(req, EOPNOTSUPP);
		return;
	}
	pthread_mutex_lock(&nfs.lock);
	f = file_of(ino);
	if (!f)
		ret = -ENOENT;
	else if ((uint64_t)off + (uint64_t)len > NULL_MAX_SIZE)
		ret = -EFBIG;
	else if (off + len > f->size)
		f->size = off + len;
	pthread_mutex_unlock(&nfs.lock);
	fuse_reply_err(req, -ret);
}

/* Nothing to make durable. */
static void null_fsync(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi)
{
	(void)ino;
	(void)datasync;
	(void)fi;
	fuse_reply_err(req, 0);
}

/* Remove name from directory parent: a file (unlink) or an empty
 * directory (rmdir). 0 or an errno. */
static int remove_entry(fuse_ino_t parent, const char *name, bool dir)
{
	fuse_ino_t ino;
	int err = 0;

	pthread_mutex_lock(&nfs.lock);
	ino = find(parent, name);
	if (!ino)
		err = ENOENT;
	else if (nfs.files[ino - 2].dir != dir)
		err = dir ? ENOTDIR : EISDIR;
	else if (dir && nfs.files[ino - 2].entries)
		err = ENOTEMPTY;
	else
		drop(ino);
	pthread_mutex_unlock(&nfs.lock);
	return err;
}

static void null_unlink(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	fuse_reply_err(req, remove_entry(parent, name, false));
}

static void null_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode)
{
	int64_t ino;

	pthread_mutex_lock(&nfs.lock);
	ino = add(req, parent, name, S_IFDIR | (mode & 07777));
	pthread_mutex_unlock(&nfs.lock);
	if (ino < 0)
		fuse_reply_err(req, (int)-ino);
	else
		reply_entry(req, (fuse_ino_t)ino, NULL);
}

static void null_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	fuse_reply_err(req, remove_entry(parent, name, true));
}

static void null_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
			 struct fuse_file_info *fi)
{
	char *buf = malloc(size);
	size_t used = 0, n;
	struct stat st = {0};

	(void)fi;
	if (!buf) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	/* Offsets: 1 "..", then 2 + i for files[i] (after "." at 0): the
	 * entries of every directory lie among all, in slot order. */
	pthread_mutex_lock(&nfs.lock);
	if (!is_dir(ino)) {
		pthread_mutex_unlock(&nfs.lock);
		fuse_reply_err(req, ENOTDIR);
		free(buf);
		return;
	}
	for (off_t i = off; i < 2 + (off_t)nfs.top; i++) {
		const char *name = i == 0 ? "." : i == 1 ? ".." : NULL;

		if (!name && (!nfs.files[i - 2].used || nfs.files[i - 2].parent != ino))
			continue;
		if (i == 0)
			st.st_ino = ino;
		else if (i == 1) /* the parent; the root's is itself */
			st.st_ino = ino == FUSE_ROOT_ID ? ino : nfs.files[ino - 2].parent;
		else
			st.st_ino = (ino_t)i;
		st.st_mode = name || nfs.files[i - 2].dir ? S_IFDIR : S_IFREG;
		n = fuse_add_direntry(req, buf + used, size - used,
				      name ? name : nfs.files[i - 2].name, &st, i + 1);
		if (n > size - used)
			break;
		used += n;
	}
	pthread_mutex_unlock(&nfs.lock);
	fuse_reply_buf(req, buf, used);
	free(buf);
}

/* ---- The /dev/fuse loop ---- */

/* Wait until the calling worker leads; false once the session ended. */
static bool lead(struct fuse_session *se)
{
	if (leading)
		return true;
	pthread_mutex_lock(&lp.mu);
	while (lp.led && !fuse_session_exited(se))
		pthread_cond_wait(&lp.follow, &lp.mu);
	if (!fuse_session_exited(se))
		leading = lp.led = true;
	pthread_mutex_unlock(&lp.mu);
	return leading;
}

/* Hand the lead to a follower (all of them, once the session ended). */
static void resign(bool all)
{
	pthread_mutex_lock(&lp.mu);
	if (leading)
		leading = lp.led = false;
	if (all)
		pthread_cond_broadcast(&lp.follow);
	else
		pthread_cond_signal(&lp.follow);
	pthread_mutex_unlock(&lp.mu);
}

/* The leader: poll /dev/fuse without sleeping for the window (or, once
 * the io_uring queues serve, gather FORGETs instead), then sleep in
 * poll(2) a slice at a time, the wait adapting the window, as
 * fs/fuse/loop.c's wait_for_request: true once a request waits (or the
 * mount is gone: read(2) says so), false when the session ended. */
static bool wait_for_request(struct fuse_session *se)
{
	struct pollfd p = {.fd = fuse_session_fd(se), .events = POLLIN};
	uint64_t t0 = nvmefs_spin_clock(), end = t0 + lp.spin.ns;
	bool gather = atomic_load_explicit(&nfs.rings_serve, memory_order_relaxed);

	if (gather) /* FORGETs only: no polling (a signal: looked at below) */
		(void)nvmefs_uring_gather();
	do {
		if (poll(&p, 1, 0) != 0)
			return true;
	} while (!gather && nvmefs_spin_clock() < end);
	while (!fuse_session_exited(se)) {
		if (poll(&p, 1, 200) != 0) { /* a request, the mount gone, or a signal */
			nvmefs_spin_adapt(&lp.spin, nvmefs_spin_clock() - t0);
			return true;
		}
	}
	return false;
}

static void *worker_main(void *arg)
{
	struct fuse_session *se = arg;
	struct fuse_buf fb = {.mem = NULL};

	while (lead(se)) {
		int res;

		if (!wait_for_request(se))
			break;
		res = fuse_session_receive_buf(se, &fb);
		if (res == -EINTR || res == -EAGAIN)
			continue;
		if (res <= 0) { /* 0: unmounted (ENODEV), the session ended */
			if (res < 0) {
				fprintf(stderr, "fuse_null: reading /dev/fuse: %s\n",
					strerror(-res));
				atomic_store(&lp.failed, true);
			}
			break;
		}
		nvmefs_cpulat_busy();
		if (!nvmefs_serve_inline(fb.mem, fb.size))
			resign(false);
		fuse_session_process_buf(se, &fb);
	}
	fuse_session_exit(se); /* over for the followers too */
	resign(true);
	free(fb.mem);
	return NULL;
}

/* Serve se with NULL_WORKERS workers until it ends: 0, or -1 on a failure. */
static int serve_loop(struct fuse_session *se)
{
	pthread_t t[NULL_WORKERS];
	unsigned n = 0;

	nvmefs_spin_init(&lp.spin, NULL_SPIN_NS);
	while (n < NULL_WORKERS && !pthread_create(&t[n], NULL, worker_main, se))
		n++;
	if (n < NULL_WORKERS) {
		atomic_store(&lp.failed, true);
		fuse_session_exit(se);
		resign(true);
	}
	while (n)
		pthread_join(t[--n], NULL);
	return atomic_load(&lp.failed) ? -1 : 0;
}

/* tdestroy's: the tree's keys are entries of nfs.files. */
static void noop_free(void *p)
{
	(void)p;
}

static const struct fuse_lowlevel_ops null_ops = {
	.init = null_init,
	.lookup = null_lookup,
	.getattr = null_getattr,
	.setattr = null_setattr,
	.create = null_create,
	.open = null_open,
	.read = null_read,
	.write = null_write,
	.fallocate = null_fallocate,
	.fsync = null_fsync,
	.unlink = null_unlink,
	.mkdir = null_mkdir,
	.rmdir = null_rmdir,
	.readdir = null_readdir,
};

int main(int argc, char **argv)
{
	struct fuse_args args = FUSE_ARGS_INIT(argc, argv);
	struct fuse_cmdline_opts o = {0};
	struct fuse_session *se = NULL;
	int busy_us, ret = 1;

	if (fuse_opt_parse(&args, &nfs, null_opts, NULL) || fuse_parse_cmdline(&args, &o))
		goto out;
	if (o.show_help || !o.mountpoint) {
		fprintf(stderr,
			"usage: %s MOUNTPOINT [-f] [-o mode=direct|cached] [-o uring] "
			"[-o cpu_latency=US|off] [-o FUSE options]\n",
			argv[0]);
		goto out;
	}
	if (nfs.mode && strcmp(nfs.mode, "direct") && strcmp(nfs.mode, "cached")) {
		fprintf(stderr, "%s: -o mode=%s: not direct or cached\n", argv[0], nfs.mode);
		goto out;
	}
	nfs.direct = nfs.mode && !strcmp(nfs.mode, "direct");
	if (nvmefs_cpulat_parse(nfs.cpu_latency, &busy_us))
		goto out;
	/* As nvmefs (loop.c): queues poll away only with idle CPUs awake. */
	nfs.poll_ns = nvmefs_cpulat_awake(busy_us) ? NULL_SPIN_NS : 0;
	/* libfuse checks the max_read of INIT against the mount option's;
	 * default_permissions as nvmefs's mount (the file's top comment). */
	if (fuse_opt_add_arg(&args, "-omax_read=1048576") ||
	    fuse_opt_add_arg(&args, "-odefault_permissions") ||
	    posix_memalign(&nfs.zeros, 4096, NULL_MAX_IO))
		goto out;
	nfs.files = mmap(NULL, NULL_FILES * sizeof(*nfs.files), PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	nfs.freed = calloc(NULL_FILES, sizeof(*nfs.freed));
	if (nfs.files == MAP_FAILED || !nfs.freed) {
		fprintf(stderr, "%s: cannot allocate the file table\n", argv[0]);
		goto out;
	}
	memset(nfs.zeros, 0, NULL_MAX_IO);
	se = fuse_session_new(&args, &null_ops, sizeof(null_ops), NULL);
	if (!se)
		goto out;
	nfs.se = se;
	if (fuse_set_signal_handlers(se) || fuse_session_mount(se, o.mountpoint))
		goto out_destroy;
	if (nfs.uring && prepare_uring(se))
		goto out_unmount;
	if (fuse_daemonize(o.foreground))
		goto out_unmount;
	nvmefs_cpulat_start(busy_us);
	ret = serve_loop(se) ? 1 : 0;
	if (nfs.u)
		nvmefs_uring_stop(nfs.u);
	nvmefs_cpulat_stop();
	if (nfs.u) {
		fprintf(stderr, "fuse_null: %llu requests served over io_uring\n",
			(unsigned long long)nvmefs_uring_served(nfs.u));
		if (!nfs.uring_granted || !nvmefs_uring_served(nfs.u))
			ret = 1; /* -o uring and none came that way */
		/* The kernel's while it holds an entry: else freed at the exit. */
		if (nvmefs_uring_idle(nfs.u))
			nvmefs_uring_free(nfs.u);
	}
out_unmount:
	fuse_session_unmount(se);
	fuse_remove_signal_handlers(se);
out_destroy:
	fuse_session_destroy(se);
out:
	tdestroy(nfs.names, noop_free);
	if (nfs.files && nfs.files != MAP_FAILED)
		munmap(nfs.files, NULL_FILES * sizeof(*nfs.files));
	free(nfs.freed);
	free(nfs.zeros);
	free(nfs.mode);
	free(nfs.cpu_latency);
	free(o.mountpoint);
	fuse_opt_free_args(&args);
	return ret;
}
