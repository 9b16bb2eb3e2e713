// SPDX-License-Identifier: MIT
/*
 * Statahead: the entries of a directory a program walks, read ahead of it
 * into the kernel's dentry cache.
 *
 * A program that stats or opens the files of a directory one after another
 * (a dataset loader, rsync, a scan after a remount) makes the kernel send
 * one FUSE LOOKUP per name it does not have cached, and waits for the reply:
 * about 23 us a file on this machine, most of it the wake-up of the program
 * on its CPU (docs/PERFORMANCE.md), against btrfs's lookup inside the
 * kernel. FUSE has no message that gives the kernel an entry it did not ask
 * for. It instantiates entries only from replies: LOOKUP, CREATE and the
 * like, and READDIRPLUS, whose every entry carries the inode's attributes.
 * So when a directory's lookups come in its readdir order, a thread of ours
 * reads the directory ahead of the program through the mount itself, and
 * the kernel turns our READDIRPLUS replies into dentries the program then
 * finds cached, as Lustre's statahead does inside its client.
 *
 * How the thread reads a directory (one job: a directory, the cookie the
 * program reached, how many entries):
 * - It opens the directory by handle (open_by_handle_at: FUSE's handle is
 *   the node id and generation, which are our ino and 1), without a path,
 *   through a detached clone of the mount (open_tree(OPEN_TREE_CLONE)):
 *   what it holds open pins the clone, not the mount, so an umount meanwhile
 *   does not fail with EBUSY; the kernel ends the connection when the clone
 *   goes, at the job's end. The clone's root must be ours (st_dev). The
 *   path walk to the mount point that makes the clone holds the mount for
 *   microseconds, as any process's walk there does: an umount at that
 *   instant fails with EBUSY. So jobs are few: one per window of a walk,
 *   and none in a directory of fewer than SA_MIN_DIR entries, where a
 *   walk of two lookups followed by an umount (tests/test_badsets.sh)
 *   raced it.
 * - It seeks to the cookie and reads with getdents64 into a 64 KiB buffer:
 *   one READDIRPLUS of up to 64 KiB (about 400 entries) per call.
 * - The kernel (readdirplus_auto) sends READDIRPLUS only at offset 0 or when
 *   the directory is marked as wanting it: by a lookup in it, or by a stat
 *   of an entry that a READDIRPLUS brought. After each call the thread
 *   stats the last entry it got, which marks the directory again. A plain
 *   READDIR from the thread all the same is answered empty (ops.c): it
 *   would only cost the daemon the work.
 *
 * When (nvmefs_sa_lookup, for every LOOKUP that found an entry): the
 * door keeps the last cookie looked up in a few directories. A lookup past
 * the last one and within what was read ahead plus a small gap continues a
 * walk (any lookup forward, while a job reads); the second such lookup in
 * a row starts a job from there, and a lookup within a window of the end
 * of what was read ahead starts the next, each job up to twice as long as
 * the one before (SA_FIRST to -o statahead=N entries). A walk that finds
 * its entries in the kernel's cache sends nothing, so one entry in
 * NVMEFS_SA_TRIP of the thread's READDIRPLUS goes without attributes
 * (ops.c, give_back_entries): the walk's LOOKUP of that tripwire says where it
 * is. Lookups in another order, or of names not in the directory, start
 * nothing, so a random access costs a compare.
 *
 * What it costs: the daemon's work for an entry is the same as for its
 * LOOKUP; the kernel holds the dentries and inodes of about two windows
 * ahead of the program (a job is queued when the walk comes within one of
 * its end, and reads whole getdents batches); we count one lookup for
 * each, as for any READDIRPLUS.
 * It reads as root what the program may only search (a directory of mode
 * 0711): the names go only to the kernel's cache, where the program finds
 * one only by naming it, which without us would have told it as much.
 * Off with -o statahead=0; a daemon without CAP_SYS_ADMIN and
 * CAP_DAC_READ_SEARCH turns it off at its first job.
 *
 * Small files' data too (a push): in direct mode with -o cache_small, a
 * program that reads the files of a directory in order (a data loader, a
 * scan, tar) sends OPEN and READ for each, and waits for the READ's device
 * read. For each regular file of at most cache_small bytes (and 1 MiB)
 * that a getdents of a job brought, the thread reads the data from the
 * devices (several files at once, PUSH_INFLIGHT) and stores it in the
 * kernel's page cache with FUSE_NOTIFY_STORE. The program's read-only
 * open then goes through the page cache (cache_small, FOPEN_KEEP_CACHE)
 * and finds the data there: no READ at all. A push takes only a file that
 * is open nowhere (no pages that a writer dirtied can be in the kernel's
 * cache for the store to overwrite), and while it runs every open and
 * truncation of the file waits for it (nvmefs_ns_push_begin): nothing else
 * changes the file between the read and the store. The next open for
 * reading notes the read for atime, which the kernel will not send
 * (relatime; under strictatime each open drops the cache: no push). At
 * most PUSH_JOB_BYTES a job: the pages are the kernel's, reclaimed as any
 * clean page cache. A walk that only stats (ls -l, find, rsync's scan)
 * must not read every file: a job pushes only when the walker opened, for
 * reading, a file it had just looked up in the directory (the walk's
 * first lookups, before a job, come with their opens when it reads).
 */
#define FUSE_USE_VERSION 314
#include <fuse_lowlevel.h>

#include "door_i.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "data_i.h"
#include "namei.h"
#include "nvmefs/bufpool.h"
#include "nvmefs/util.h"

#ifndef OPEN_TREE_CLONE
#define OPEN_TREE_CLONE 1
#endif
#ifndef OPEN_TREE_CLOEXEC
#define OPEN_TREE_CLOEXEC O_CLOEXEC
#endif

#define SA_DIRS	       16	     /* directories followed at once */
#define SA_GAP	       8	     /* cookies a walk may skip (removed entries) */
#define SA_FIRST       256	     /* entries of a walk's first job */
#define SA_MIN_DIR     64	     /* smaller directories: lookups cost less than a job */
#define SA_QUEUE       8	     /* jobs waiting */
#define SA_BUF	       (64 << 10)    /* getdents64's buffer: the READDIRPLUS size */
#define FH_INO_GEN     0x81	     /* FILEID_INO64_GEN: fuse_encode_fh's type */
#define PUSH_INFLIGHT  16	     /* files read at once for a push */
#define PUSH_JOB_BYTES (32ull << 20) /* pushed per job at most */

/* A directory being walked. */
struct sa_dir {
	uint64_t ino;
	uint64_t last;	/* the cookie of its last lookup */
	uint64_t ahead; /* the last cookie read ahead (0: none yet) */
	uint64_t used;	/* for replacement: the lookup count when last seen */
	unsigned streak, window;
	unsigned gen;	   /* a new walk: a job of the old one reports to nothing */
	bool busy;	   /* a job of it is queued or running */
	uint64_t last_ino; /* the file of its last lookup */
	bool reads;	   /* the walk opened a file it looked up: push */
};

struct sa_job {
	uint64_t ino, from;
	unsigned count, gen;
};

static struct {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	pthread_t thread;
	bool started;
	atomic_bool on, stop;
	atomic_int tid; /* the thread's: its requests are told apart */
	char *mountpoint;
	dev_t dev; /* the mount's, to know its clone */
	unsigned max;
	uint64_t lookups;
	struct sa_dir dir[SA_DIRS];
	struct sa_job q[SA_QUEUE];
	unsigned qhead, qlen;
	/* pushes: the volume and session, and the reads in flight */
	struct nvmefs_vol *vol;
	struct fuse_session *se;
	pthread_mutex_t push_mu;
	pthread_cond_t push_cv;
	unsigned pushing; /* push_mu */
	/* .nvmefs/stats */
	atomic_uint_fast64_t jobs, entries, plain, failed;
	atomic_uint_fast64_t pushed, pushed_bytes, push_failed, push_passed;
	/* the file of the last open that a push could have served */
	atomic_uint_fast64_t last_open;
} sa = {.mu = PTHREAD_MUTEX_INITIALIZER,
	.cv = PTHREAD_COND_INITIALIZER,
	.tid = -1,
	.push_mu = PTHREAD_MUTEX_INITIALIZER,
	.push_cv = PTHREAD_COND_INITIALIZER};

/* ---- when ---- */

static struct sa_dir *dir_of(uint64_t ino)
{
	struct sa_dir *victim = NULL;

	for (unsigned i = 0; i < SA_DIRS; i++) {
		if (sa.dir[i].ino == ino)
			return &sa.dir[i];
		if (!sa.dir[i].busy && (!victim || sa.dir[i].used < victim->used))
			victim = &sa.dir[i];
	}
	if (!victim)
		return NULL; /* all 16 have jobs: follow no new one */
	*victim = (struct sa_dir){.ino = ino, .window = SA_FIRST, .gen = victim->gen + 1};
	return victim;
}

void nvmefs_sa_lookup(uint64_t parent, uint64_t cookie, uint64_t entries, uint64_t ino, int tid)
{
	struct sa_dir *d;

	if (!atomic_load_explicit(&sa.on, memory_order_relaxed) || tid == atomic_load(&sa.tid) ||
	    entries < SA_MIN_DIR)
		return;
	pthread_mutex_lock(&sa.mu);
	d = dir_of(parent);
	if (!d)
		goto out;
	d->used = ++sa.lookups;
	/* In order: just after the last, or anywhere forward while a job
	 * reads (the walk's next LOOKUP is a tripwire of that job's batch,
	 * NVMEFS_SA_TRIP entries on, before the job has said where it ended). */
	if (cookie > d->last &&
	    (d->busy || cookie <= (d->ahead > d->last ? d->ahead : d->last) + SA_GAP)) {
		d->streak++;
	} else {
		d->streak = 0;
		d->ahead = 0;
		d->window = SA_FIRST;
		d->gen++;
		d->reads = false;
	}
	d->last = cookie;
	d->last_ino = ino;
	/* The second lookup in order starts a job; then each lookup within a
	 * window of what was read starts the next. */
	if (d->streak >= 2 && !d->busy && sa.qlen < SA_QUEUE && cookie + d->window >= d->ahead) {
		struct sa_job *j = &sa.q[(sa.qhead + sa.qlen++) % SA_QUEUE];

		*j = (struct sa_job){.ino = parent,
				     .from = d->ahead > cookie ? d->ahead : cookie,
				     .count = d->window,
				     .gen = d->gen};
		d->busy = true;
		if (d->window < sa.max)
			d->window = d->window * 2 < sa.max ? d->window * 2 : sa.max;
		pthread_cond_signal(&sa.cv);
	}
out:
	pthread_mutex_unlock(&sa.mu);
}

void nvmefs_sa_open(uint64_t ino)
{
	if (!atomic_load_explicit(&sa.on, memory_order_relaxed))
		return;
	atomic_store_explicit(&sa.last_open, ino, memory_order_relaxed);
	pthread_mutex_lock(&sa.mu);
	for (unsigned i = 0; i < SA_DIRS; i++)
		if (sa.dir[i].ino && sa.dir[i].last_ino == ino)
			sa.dir[i].reads = true;
	pthread_mutex_unlock(&sa.mu);
}

/* Whether job j's walk reads the files it walks (nvmefs_sa_open). */
static bool walk_reads(const struct sa_job *j)
{
	bool reads = false;

	pthread_mutex_lock(&sa.mu);
	for (unsigned i = 0; i < SA_DIRS; i++)
		if (sa.dir[i].ino == j->ino && sa.dir[i].gen == j->gen)
			reads = sa.dir[i].reads;
	pthread_mutex_unlock(&sa.mu);
	return reads;
}

bool nvmefs_sa_thread(int tid)
{
	return tid == atomic_load(&sa.tid);
}

bool nvmefs_sa_self(int tid)
{
	if (!nvmefs_sa_thread(tid))
		return false;
	atomic_fetch_add(&sa.plain, 1);
	return true;
}

/* ---- how ---- */

/* The directory ino, opened through a clone of the mount; -errno. */
static int open_dir(uint64_t ino)
{
	struct {
		struct file_handle h;
		uint32_t w[3];
	} fh = {.h = {.handle_bytes = sizeof(fh.w), .handle_type = FH_INO_GEN}};
	uint32_t w[3] = {(uint32_t)(ino >> 32), (uint32_t)ino, 1};
	struct stat st;
	int tree, root, fd;

	memcpy(fh.h.f_handle, w, sizeof(w));
	tree = (int)syscall(SYS_open_tree, AT_FDCWD, sa.mountpoint,
			    OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);
	if (tree < 0)
		return -errno;
	/* open_by_handle_at takes no O_PATH descriptor, which open_tree's is. */
	root = openat(tree, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	close(tree);
	if (root < 0)
		return -errno;
	/* Unmounted, or another file system mounted over ours. */
	if (fstat(root, &st) || st.st_dev != sa.dev) {
		close(root);
		return -ESTALE;
	}
	/* The kernel made the root's inode itself, generation 0, not ours. */
	if (ino == NVMEFS_ROOT_INO)
		return root;
	fd = open_by_handle_at(root, &fh.h, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		fd = -errno;
	close(root);
	return fd;
}

/* ---- pushes ---- */

struct push {
	struct nvmefs_inode *in;
	uint64_t ino;
	bool stored;
};

/* A push's read slot is free again. */
static void push_slot_end(void)
{
	pthread_mutex_lock(&sa.push_mu);
	sa.pushing--;
	pthread_cond_broadcast(&sa.push_cv);
	pthread_mutex_unlock(&sa.push_mu);
}

/* The file's data, read under its range lock: into the kernel's cache. */
static void push_store(void *ctx, ssize_t res, const void *data)
{
	struct push *p = ctx;
	struct fuse_bufvec bv = FUSE_BUFVEC_INIT(res > 0 ? (size_t)res : 0);
	int ret;

	if (res <= 0)
		return;
	bv.buf[0].mem = (void *)data;
	/* -ENOENT: the kernel has dropped the inode meanwhile. */
	ret = fuse_lowlevel_notify_store(sa.se, p->ino, 0, &bv, 0);
	p->stored = ret == 0;
	if (!ret)
		atomic_fetch_add(&sa.pushed_bytes, (uint64_t)res);
}

static void push_done(void *ctx, ssize_t res, const void *data)
{
	struct push *p = ctx;

	(void)data;
	atomic_fetch_add(p->stored ? &sa.pushed : &sa.push_failed, 1);
	if (res < 0)
		nvmefs_debug("statahead: inode %llu: no push: %s", (unsigned long long)p->ino,
			     strerror((int)-res));
	nvmefs_ns_push_end(sa.vol, p->in, p->stored);
	free(p);
	push_slot_end();
}

/* Whether the handles of a read-only open would use the page cache. */
static uint64_t push_max(void)
{
	const struct nvmefs_vol *vol = sa.vol;
	uint64_t max;

	if (!vol || __atomic_load_n(&vol->opts.atime, __ATOMIC_RELAXED) == NVMEFS_ATIME_STRICTATIME)
		return 0;
	max = nvmefs_cache_small_max(vol);
	return max < NVMEFS_IO_MAX ? max : NVMEFS_IO_MAX;
}

/* Push file ino, if it qualifies: its bytes, 0 when it did not. */
static uint64_t push(uint64_t ino, uint64_t max)
{
	struct push *p;
	uint64_t size;
	void *buf;

	p = calloc(1, sizeof(*p));
	if (!p)
		return 0;
	p->ino = ino;
	/* A slot first: an open of the file waits from push_begin on. */
	pthread_mutex_lock(&sa.push_mu);
	while (sa.pushing >= PUSH_INFLIGHT)
		pthread_cond_wait(&sa.push_cv, &sa.push_mu);
	sa.pushing++;
	pthread_mutex_unlock(&sa.push_mu);
	if (!nvmefs_ns_push_begin(sa.vol, ino, max, &p->in, &size)) {
		/* A pool buffer only when one is free: the FUSE requests' come first. */
		buf = nvmefs_bufpool_tryget(sa.vol->pool);
		if (buf) {
			nvmefs_data_read_hold(sa.vol, p->in, buf, (size_t)size, push_store,
					      push_done, p);
			return size;
		}
		nvmefs_ns_push_end(sa.vol, p->in, false);
	}
	free(p);
	push_slot_end();
	return 0;
}

/* Wait until the pushes in flight have ended. */
static void push_wait(void)
{
	pthread_mutex_lock(&sa.push_mu);
	while (sa.pushing)
		pthread_cond_wait(&sa.push_cv, &sa.push_mu);
	pthread_mutex_unlock(&sa.push_mu);
}

/* The offset in buf (n bytes of entries) just past the entry of ino from
 * offset o on, o when there is none; the regular files passed counted in
 * *files, the entry's cookie in *cookie. */
static long past(const char *buf, long o, long n, uint64_t ino, unsigned *files, uint64_t *cookie)
{
	unsigned seen = 0;

	for (long i = o; i < n;) {
		const struct dirent64 *e = (const void *)(buf + i);

		i += e->d_reclen;
		seen += e->d_type == DT_REG;
		if (e->d_ino == ino) {
			*files = seen;
			*cookie = (uint64_t)e->d_off;
			return i;
		}
	}
	return o;
}

/* Push the regular files of one getdents batch (n bytes of buf), within
 * *budget. The program walks the batch in its order too, and may be
 * ahead (a job starts at its second lookup; its first opens come while
 * the READDIRPLUS is being answered): a file it has opened is read, and
 * pushing it would only keep the files it is about to open waiting. So
 * when the last open names a file further on, the push skips to just
 * after it (on io_uring a walk of 200 files read 47 of them itself while
 * the push went through the ones behind it). */
static void push_batch(const char *buf, long n, uint64_t prev, uint64_t max, uint64_t *budget)
{
	uint64_t seen = 0;

	for (long o = 0; o < n && *budget >= max;) {
		const struct dirent64 *e = (const void *)(buf + o);
		uint64_t opened = atomic_load_explicit(&sa.last_open, memory_order_relaxed);
		unsigned files = 0;
		bool trip;

		if (opened != seen) {
			long next = past(buf, o, n, opened, &files, &prev);

			seen = opened;
			if (next != o) {
				atomic_fetch_add(&sa.push_passed, files);
				o = next;
				continue;
			}
		}
		o += e->d_reclen;
		trip = nvmefs_sa_trip(prev, (uint64_t)e->d_off);
		prev = (uint64_t)e->d_off;
		if (e->d_type == DT_REG && !trip)
			*budget -= push(e->d_ino, max);
	}
}

/* Read count entries of job j's directory after its cookie into the
 * kernel's cache: 0, 1 at the directory's end, or -errno; the last cookie
 * read in *last. A plain READDIR (answered empty) is not the end: 0. */
static int run(const struct sa_job *j, char *buf, uint64_t *last)
{
	uint64_t plain = atomic_load(&sa.plain);
	uint64_t max = push_max(), budget = PUSH_JOB_BYTES, prev = j->from;
	unsigned got = 0;
	int fd, ret = 0;

	if (!sa.dev) { /* the first job: the mount is there (a lookup came) */
		struct stat st;

		if (stat(sa.mountpoint, &st))
			return -errno;
		sa.dev = st.st_dev;
	}
	fd = open_dir(j->ino);
	if (fd < 0)
		return fd;
	if (lseek(fd, (off_t)j->from, SEEK_SET) < 0)
		ret = -errno;
	while (!ret && got < j->count && !atomic_load_explicit(&sa.stop, memory_order_relaxed)) {
		long n = syscall(SYS_getdents64, fd, buf, SA_BUF);
		const char *name = NULL;
		struct stat st;

		if (n <= 0) {
			ret = n < 0 ? -errno : atomic_load(&sa.plain) == plain;
			break;
		}
		for (long o = 0; o < n; got++) {
			const struct dirent64 *e = (const void *)(buf + o);

			name = e->d_name;
			*last = (uint64_t)e->d_off;
			o += e->d_reclen;
		}
		/* Marks the directory for READDIRPLUS again (see above). */
		fstatat(fd, name, &st, AT_SYMLINK_NOFOLLOW);
		/* The getdents made the kernel's inodes: a store finds them. */
		if (max && walk_reads(j))
			push_batch(buf, n, prev, max, &budget);
		prev = *last;
	}
	atomic_fetch_add(&sa.entries, got);
	push_wait();
	close(fd);
	return ret;
}

static void *sa_main(void *arg)
{
	char *buf = malloc(SA_BUF);
	sigset_t set;

	(void)arg;
	/* Signals are the workers' and the main thread's (loop.c). */
	sigfillset(&set);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	if (!buf)
		atomic_store(&sa.on, false);
	atomic_store(&sa.tid, (int)gettid());
	pthread_mutex_lock(&sa.mu);
	while (buf && !atomic_load(&sa.stop)) {
		struct sa_job j;
		uint64_t last = 0;
		int ret;

		if (!sa.qlen) {
			pthread_cond_wait(&sa.cv, &sa.mu);
			continue;
		}
		j = sa.q[sa.qhead];
		sa.qhead = (sa.qhead + 1) % SA_QUEUE;
		sa.qlen--;
		pthread_mutex_unlock(&sa.mu);
		atomic_fetch_add(&sa.jobs, 1);
		ret = run(&j, buf, &last);
		if (ret < 0) {
			atomic_fetch_add(&sa.failed, 1);
			nvmefs_debug("statahead: directory %llu: %s", (unsigned long long)j.ino,
				     strerror(-ret));
		}
		if (ret == -EPERM && atomic_exchange(&sa.on, false))
			nvmefs_info("statahead off: reading directories ahead needs "
				    "CAP_SYS_ADMIN and CAP_DAC_READ_SEARCH");
		pthread_mutex_lock(&sa.mu);
		for (unsigned i = 0; i < SA_DIRS; i++) {
			struct sa_dir *d = &sa.dir[i];

			if (d->ino != j.ino || !d->busy)
				continue;
			d->busy = false;
			if (d->gen != j.gen)
				break; /* a new walk since: its own jobs say */
			/* At the directory's end, or failed: nothing more ahead; a
			 * job cut short (plain READDIR) leaves it to the next. */
			if (ret)
				d->ahead = UINT64_MAX / 2;
			else if (last > d->ahead)
				d->ahead = last;
		}
	}
	pthread_mutex_unlock(&sa.mu);
	free(buf);
	return NULL;
}

int nvmefs_sa_start(const char *mountpoint, unsigned max, struct nvmefs_vol *vol,
		    struct fuse_session *se)
{
	int ret;

	if (!max)
		return 0;
	sa.vol = vol;
	sa.se = se;
	sa.mountpoint = strdup(mountpoint);
	if (!sa.mountpoint)
		return -ENOMEM;
	sa.max = max < SA_FIRST ? SA_FIRST : max;
	atomic_store(&sa.tid, -1);
	ret = pthread_create(&sa.thread, NULL, sa_main, NULL);
	if (ret) {
		free(sa.mountpoint);
		sa.mountpoint = NULL;
		return -ret;
	}
	pthread_setname_np(sa.thread, "nvmefs-ahead");
	sa.started = true;
	atomic_store(&sa.on, true);
	return 0;
}

void nvmefs_sa_stop(void)
{
	atomic_store(&sa.on, false);
	pthread_mutex_lock(&sa.mu);
	atomic_store(&sa.stop, true);
	pthread_cond_signal(&sa.cv);
	pthread_mutex_unlock(&sa.mu);
}

void nvmefs_sa_join(void)
{
	if (!sa.started)
		return;
	nvmefs_sa_stop();
	pthread_join(sa.thread, NULL);
	sa.started = false;
	free(sa.mountpoint);
	sa.mountpoint = NULL;
}

void nvmefs_sa_stats(struct nvmefs_sa_stats *st)
{
	st->on = atomic_load(&sa.on);
	st->jobs = atomic_load(&sa.jobs);
	st->entries = atomic_load(&sa.entries);
	st->plain = atomic_load(&sa.plain);
	st->failed = atomic_load(&sa.failed);
	st->pushed = atomic_load(&sa.pushed);
	st->pushed_bytes = atomic_load(&sa.pushed_bytes);
	st->push_failed = atomic_load(&sa.push_failed);
	st->push_passed = atomic_load(&sa.push_passed);
}
