// SPDX-License-Identifier: MIT
/*
 * Device set: open, size, align and place the members of a volume.
 *
 * Members are classified with stat() before anything is opened so that a path
 * given twice is reported as such (opening it twice would otherwise look like
 * "busy": O_EXCL and flock both conflict with our own first open).
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <numa.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <linux/fs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "fi_i.h"
#include "nvmefs/devset.h"
#include "nvmefs/util.h"

#define DEFAULT_MIN_SIZE (1ull << 20)
#define FALLBACK_ALIGN	 4096u

static int read_int_file(const char *path, int *out)
{
	char buf[32];
	ssize_t n;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return -errno;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return -EIO;
	buf[n] = '\0';
	*out = (int)strtol(buf, NULL, 10);
	return 0;
}

/*
 * NUMA node of the device behind d: walk up its sysfs path until a directory
 * with a numa_node attribute (an NVMe controller or PCI function). Virtual
 * devices (loop, tmpfs) have none, which counts as node 0, as does -1.
 */
static int sysfs_numa_node(dev_t d)
{
	char link[64], path[PATH_MAX], attr[PATH_MAX + 32];
	char *slash;
	int node = 0;

	snprintf(link, sizeof(link), "/sys/dev/block/%u:%u", major(d), minor(d));
	if (!realpath(link, path))
		return 0;
	while (strncmp(path, "/sys/devices/", 13) == 0) {
		snprintf(attr, sizeof(attr), "%s/numa_node", path);
		if (read_int_file(attr, &node) == 0)
			return node < 0 ? 0 : node;
		snprintf(attr, sizeof(attr), "%s/device/numa_node", path);
		if (read_int_file(attr, &node) == 0)
			return node < 0 ? 0 : node;
		slash = strrchr(path, '/');
		if (!slash)
			break;
		*slash = '\0';
	}
	return 0;
}

/* O_DIRECT alignment from statx (kernel >= 6.1), 0 when not reported. */
static void statx_dio_align(int fd, uint32_t *off_align, uint32_t *mem_align)
{
	struct statx sx;

	*off_align = *mem_align = 0;
	if (statx(fd, "", AT_EMPTY_PATH, STATX_DIOALIGN, &sx) == 0 &&
	    (sx.stx_mask & STATX_DIOALIGN)) {
		*off_align = sx.stx_dio_offset_align;
		*mem_align = sx.stx_dio_mem_align;
	}
}

static int probe_blkdev(struct nvmefs_dev *dev, bool read_only)
{
	uint64_t bytes;
	int ssz = 0, ro = 0;

	if (ioctl(dev->fd, BLKGETSIZE64, &bytes) < 0 || ioctl(dev->fd, BLKSSZGET, &ssz) < 0) {
		int err = -errno;

		nvmefs_err("%s: cannot read the device's size: %s", dev->path, strerror(-err));
		return err;
	}
	if (!read_only && ioctl(dev->fd, BLKROGET, &ro) == 0 && ro) {
		nvmefs_err("%s: device is read-only", dev->path);
		return -EROFS;
	}
	dev->block_size = ssz > 0 ? (uint32_t)ssz : FALLBACK_ALIGN;
	dev->size = bytes;
	return 0;
}

static int probe_file(struct nvmefs_dev *dev, const struct stat *st)
{
	dev->block_size = 0;
	dev->size = (uint64_t)st->st_size;
	return 0;
}

static int open_flags(bool blk, bool read_only)
{
	return (read_only ? O_RDONLY : O_RDWR) | O_DIRECT | O_CLOEXEC | (blk ? O_EXCL : 0);
}

static int open_error(const char *path, int err, bool read_only)
{
	if (read_only && (err == -EACCES || err == -EPERM)) {
		nvmefs_err("%s: cannot open: permission denied", path);
		return -EACCES;
	}
	switch (err) {
	case -EROFS:
	case -EACCES:
	case -EPERM:
		nvmefs_err("%s: cannot open for writing (read-only: %s)", path, strerror(-err));
		return -EROFS;
	case -EINVAL:
		nvmefs_err("%s: does not support O_DIRECT", path);
		return -EINVAL;
	default:
		nvmefs_err("%s: cannot open: %s", path, strerror(-err));
		return err;
	}
}

/* Open dev and, for an image file, lock it: 0, -EBUSY (held), or -errno
 * with *what naming the step that failed. */
static int open_lock(struct nvmefs_dev *dev, bool read_only, const char **what)
{
	*what = "open";
	dev->fd = open(dev->path, open_flags(dev->is_blkdev, read_only));
	if (dev->fd < 0)
		return -errno;
	if (dev->is_blkdev || !flock(dev->fd, (read_only ? LOCK_SH : LOCK_EX) | LOCK_NB))
		return 0;
	*what = "lock";
	int err = errno == EWOULDBLOCK ? -EBUSY : -errno;

	close(dev->fd);
	dev->fd = -1;
	return err;
}

/* Up to max processes other than this one that have path open, found by
 * the names /proc gives their descriptors: never a stat() of one, which
 * could hang on an unresponsive FUSE mount. Only the processes we may
 * inspect are seen (all of them as root). */
static unsigned find_holders(const char *path, pid_t *pids, unsigned max)
{
	char canon[PATH_MAX], fd_dir[64], link[PATH_MAX], target[PATH_MAX];
	struct dirent *p, *f;
	unsigned n = 0;
	DIR *procs, *fds;

	if (!realpath(path, canon) || !(procs = opendir("/proc")))
		return 0;
	while (n < max && (p = readdir(procs))) {
		char *end;
		long pid = strtol(p->d_name, &end, 10);

		if (*end || pid <= 0 || pid == (long)getpid())
			continue;
		snprintf(fd_dir, sizeof(fd_dir), "/proc/%ld/fd", pid);
		fds = opendir(fd_dir);
		while (fds && (f = readdir(fds))) {
			ssize_t len;

			snprintf(link, sizeof(link), "%s/%s", fd_dir, f->d_name);
			len = readlink(link, target, sizeof(target) - 1);
			if (len <= 0)
				continue;
			target[len] = '\0';
			if (!strcmp(target, canon)) {
				pids[n++] = (pid_t)pid;
				break;
			}
		}
		if (fds)
			closedir(fds);
	}
	closedir(procs);
	return n;
}

/* "COMM (pid N)" for a message. */
static void name_process(pid_t pid, char *buf, size_t len)
{
	char path[64], comm[64] = "";
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/comm", (int)pid);
	f = fopen(path, "re");
	if (f) {
		if (fgets(comm, sizeof(comm), f))
			comm[strcspn(comm, "\n")] = '\0';
		fclose(f);
	}
	snprintf(buf, len, "%s (pid %d)", comm[0] ? comm : "a process", (int)pid);
}

/* Who holds a busy member, for the messages (empty when none was found). */
struct holder {
	char name[96];	 /* "COMM (pid N)" */
	char state[128]; /* what o->holder said of it, maybe empty */
};

/* Find who holds the busy member dev (*h: the last holder looked at).
 * Returns the pid of a holder that is letting go (o->holder says so) when
 * no other holder stays, else 0. */
static pid_t judge_holders(const struct nvmefs_dev *dev, const struct nvmefs_devset_opts *o,
			   struct holder *h)
{
	pid_t pids[8], leaving = 0;
	unsigned n = find_holders(dev->path, pids, sizeof(pids) / sizeof(pids[0]));

	h->name[0] = h->state[0] = '\0';
	for (unsigned i = 0; i < n; i++) {
		int go;

		h->state[0] = '\0';
		go = o->holder ? o->holder(pids[i], h->state, sizeof(h->state)) : 0;
		name_process(pids[i], h->name, sizeof(h->name));
		if (go <= 0)
			return 0;
		leaving = pids[i];
	}
	return leaving;
}

/* The refusal of a busy member, naming its holder when one was found. */
static void busy_error(const struct nvmefs_dev *dev, const struct holder *h, bool waited,
		       unsigned wait_ms)
{
	const char *what = dev->is_blkdev ? "device" : "image file";

	if (waited)
		nvmefs_err("%s: still busy after %u s: %s has not released it", dev->path,
			   wait_ms / 1000, h->name);
	else if (h->name[0])
		nvmefs_err("%s: %s is busy: in use by %s%s%s", dev->path, what, h->name,
			   h->state[0] ? ", " : "", h->state);
	else if (dev->is_blkdev)
		nvmefs_err("%s: device is busy (mounted, or held by another program)", dev->path);
	else
		nvmefs_err("%s: image file is busy (in use by another program)", dev->path);
}

/* While a holder letting go is known, how often the open is tried again
 * and how often /proc is searched again (a search costs far more than an
 * open): the member is usually free within milliseconds of its release. */
#define LETGO_RETRY_US 2000
#define LETGO_JUDGE_NS (50 * 1000000ull)

/*
 * open_lock; while another process holds the member and o->holder says it
 * is letting go (an nvmefs daemon whose volume is unmounted, writing its
 * last checkpoint), retried every LETGO_RETRY_US up to o->busy_wait_ms,
 * saying so once the wait has lasted o->busy_quiet_ms. Any other holder is
 * refused at once (after two more looks, 20 ms apart: a holder letting go
 * may close the member, or exit, between our open and our look at it).
 * The error is logged once, at the end.
 */
static int open_unbusy(struct nvmefs_dev *dev, const struct nvmefs_devset_opts *o)
{
	uint64_t start = nvmefs_now_ns(), judged = 0;
	uint64_t deadline = start + o->busy_wait_ms * 1000000ull;
	uint64_t quiet = o->busy_quiet_ms * 1000000ull;
	pid_t waited = 0, leaving = 0;
	struct holder h, waited_for = {.name = ""};
	unsigned refusals = 0;
	bool letting_go = false, said = false;
	const char *what;
	int err;

	for (;;) {
		uint64_t now;

		err = open_lock(dev, o->read_only, &what);
		if (err != -EBUSY)
			break;
		now = nvmefs_now_ns();
		if (!letting_go || now - judged >= LETGO_JUDGE_NS) {
			leaving = judge_holders(dev, o, &h);
			judged = now;
			/* With no holder left after one we waited for, the kernel
			 * may still be releasing the member (a block device's
			 * claim). */
			letting_go = leaving || (waited && !h.name[0]);
			if (letting_go)
				refusals = 0;
			else if (++refusals == 3)
				break;
		}
		if (now >= deadline)
			break;
		if (leaving && leaving != waited) {
			waited = leaving;
			waited_for = h;
			said = false;
		}
		if (leaving && !said && now - start >= quiet) {
			/* A warning: the one line a background mount shows
			 * its user besides errors (fs/tools/main.c). */
			nvmefs_warn("waiting for %s to release %s (%s; up to %u s)", h.name,
				    dev->path, h.state, o->busy_wait_ms / 1000);
			said = true;
		}
		usleep(letting_go ? LETGO_RETRY_US : refusals ? 20 * 1000 : 50 * 1000);
	}
	if (!err)
		return 0;
	if (err == -EBUSY) {
		if (leaving)
			busy_error(dev, &h, true, o->busy_wait_ms);
		else if (waited && !h.name[0])
			busy_error(dev, &waited_for, true, o->busy_wait_ms);
		else
			busy_error(dev, &h, false, o->busy_wait_ms);
		return err;
	}
	if (!strcmp(what, "open"))
		return open_error(dev->path, err, o->read_only);
	nvmefs_err("%s: cannot lock: %s", dev->path, strerror(-err));
	return err;
}

/* Open one member whose stat() is st; fills dev (path already set). */
static int open_member(struct nvmefs_dev *dev, const struct stat *st,
		       const struct nvmefs_devset_opts *o)
{
	uint32_t off_align, mem_align;
	struct stat now;
	char a[32], b[32];
	int err;

	dev->is_blkdev = S_ISBLK(st->st_mode);
	err = open_unbusy(dev, o);
	if (err)
		return err;
	/* The path may have been swapped since stat(): insist on the same object. */
	if (fstat(dev->fd, &now) < 0 || (now.st_mode & S_IFMT) != (st->st_mode & S_IFMT) ||
	    now.st_rdev != st->st_rdev || now.st_dev != st->st_dev || now.st_ino != st->st_ino) {
		nvmefs_err("%s: changed while being opened", dev->path);
		err = -EAGAIN;
		goto err_close;
	}
	err = dev->is_blkdev ? probe_blkdev(dev, o->read_only) : probe_file(dev, st);
	if (err)
		goto err_close;
	statx_dio_align(dev->fd, &off_align, &mem_align);
	if (off_align > dev->block_size)
		dev->block_size = off_align;
	if (dev->block_size == 0)
		dev->block_size = FALLBACK_ALIGN;
	dev->mem_align = mem_align ? mem_align : dev->block_size;
	dev->size -= dev->size % dev->block_size;
	dev->numa_node = sysfs_numa_node(dev->is_blkdev ? st->st_rdev : st->st_dev);
	if (dev->size < o->min_size) {
		nvmefs_err("%s: too small (%s; needs at least %s)", dev->path,
			   nvmefs_fmt_size(dev->size, a, sizeof(a)),
			   nvmefs_fmt_size(o->min_size, b, sizeof(b)));
		err = -ENOSPC;
		goto err_close;
	}
	return 0;

err_close:
	close(dev->fd);
	dev->fd = -1;
	return err;
}

/* stat() a member and refuse what cannot be one, or what was given before. */
static int classify(struct nvmefs_devset *set, unsigned i, struct stat *st)
{
	struct nvmefs_dev *dev = &set->devs[i];

	if (stat(dev->path, st) < 0) {
		int err = -errno;

		if (err == -ENOENT)
			nvmefs_err("%s: no such file or device", dev->path);
		else
			nvmefs_err("%s: cannot access: %s", dev->path, strerror(-err));
		return err;
	}
	if (!S_ISBLK(st->st_mode) && !S_ISREG(st->st_mode)) {
		nvmefs_err("%s: not a block device or regular file", dev->path);
		return -ENODEV;
	}
	dev->id_dev = S_ISBLK(st->st_mode) ? st->st_rdev : st->st_dev;
	dev->id_ino = S_ISBLK(st->st_mode) ? 0 : st->st_ino;
	for (unsigned j = 0; j < i; j++) {
		if (set->devs[j].id_dev == dev->id_dev && set->devs[j].id_ino == dev->id_ino) {
			nvmefs_err("%s: given twice (same device as %s)", dev->path,
				   set->devs[j].path);
			return -EINVAL;
		}
	}
	return 0;
}

int nvmefs_devset_open(struct nvmefs_devset **out, const char *const *paths, unsigned n,
		       const struct nvmefs_devset_opts *opts)
{
	struct nvmefs_devset_opts o = {0};
	struct nvmefs_devset *set;
	struct stat st;
	unsigned i;
	int err;

	if (opts)
		o = *opts;
	if (!o.min_size)
		o.min_size = DEFAULT_MIN_SIZE;
	if (n == 0 || n > NVMEFS_MAX_DEVICES) {
		nvmefs_err(n ? "%u devices given; at most %d are supported" : "no devices given", n,
			   NVMEFS_MAX_DEVICES);
		return -EINVAL;
	}
	set = calloc(1, sizeof(*set) + n * sizeof(set->devs[0]));
	if (!set)
		return -ENOMEM;
	for (i = 0; i < n; i++)
		set->devs[i].fd = -1;
	for (i = 0; i < n; i++) {
		set->devs[i].path = strdup(paths[i]);
		set->count = i + 1;
		if (!set->devs[i].path) {
			err = -ENOMEM;
			goto err_close;
		}
		err = classify(set, i, &st);
		if (err)
			goto err_close;
		err = open_member(&set->devs[i], &st, &o);
		if (!err)
			err = fi_dev_init(&set->devs[i]);
		if (err)
			goto err_close;
	}
	*out = set;
	return 0;

err_close:
	nvmefs_devset_close(set);
	return err;
}

void nvmefs_devset_release(struct nvmefs_devset *set)
{
	if (!set)
		return;
	for (unsigned i = 0; i < set->count; i++) {
		if (set->devs[i].fd >= 0)
			close(set->devs[i].fd);
		set->devs[i].fd = -1;
	}
}

void nvmefs_devset_fence(struct nvmefs_devset *set)
{
	for (unsigned i = 0; i < set->count; i++)
		__atomic_store_n(&set->devs[i].fenced, true, __ATOMIC_SEQ_CST);
}

bool nvmefs_dev_fenced(const struct nvmefs_dev *dev)
{
	return __atomic_load_n(&dev->fenced, __ATOMIC_ACQUIRE);
}

/* An operation on a fenced member: expected after a shutdown, so a debug
 * line only (the caller reports the EIO where it matters). */
static int fenced_err(const struct nvmefs_dev *dev, const char *what)
{
	nvmefs_debug("%s: %s refused: the member is fenced", dev->path, what);
	return -EIO;
}

void nvmefs_devset_close(struct nvmefs_devset *set)
{
	if (!set)
		return;
	for (unsigned i = 0; i < set->count; i++) {
		fi_dev_exit(&set->devs[i]);
		if (set->devs[i].fd >= 0)
			close(set->devs[i].fd);
		free(set->devs[i].path);
	}
	free(set);
}

int nvmefs_dev_pio(struct nvmefs_dev *dev, bool write, uint64_t off, void *buf, size_t len)
{
	const char *what = write ? "write" : "read";
	size_t want = len, done = 0;
	bool shortx = false;
	uint64_t rec = 0;
	int err = 0;

	if (nvmefs_dev_fenced(dev))
		return fenced_err(dev, what);
	switch (fi_check(dev, write ? NVMEFS_FAULT_WRITES : NVMEFS_FAULT_READS, off, len)) {
	case FI_FAIL:
		nvmefs_err("%s: %s of %zu bytes at %" PRIu64 " failed: %s", dev->path, what, len,
			   off, strerror(EIO));
		return -EIO;
	case FI_SHORT:
		want = len - dev->block_size;
		break;
	case FI_GO:
		break;
	}
	if (write)
		rec = fi_write_begin(dev, off, buf, want);
	if (rec == FI_WRITE_DROPPED) { /* the power is cut (test-only) */
		fi_submit_done();
		return -EIO;
	}
	while (done < want) {
		ssize_t n = write ? pwrite(dev->fd, (char *)buf + done, want - done,
					   (off_t)(off + done))
				  : pread(dev->fd, (char *)buf + done, want - done,
					  (off_t)(off + done));

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			err = n < 0 ? -errno : -EIO;
			shortx = n == 0;
			break;
		}
		done += (size_t)n;
	}
	fi_write_end(dev, rec, true);
	if (!err && done < len) {
		err = -EIO;
		shortx = true;
	}
	if (err)
		nvmefs_err("%s: %s of %zu bytes at %" PRIu64 " failed: %s", dev->path, what,
			   len - done, off + done, shortx ? "short transfer" : strerror(-err));
	return err;
}

int nvmefs_dev_flush(struct nvmefs_dev *dev)
{
	uint64_t mark;

	if (nvmefs_dev_fenced(dev))
		return fenced_err(dev, "flush");
	if (fi_check(dev, NVMEFS_FAULT_FLUSHES, 0, 0) == FI_FAIL) {
		nvmefs_err("%s: flush failed: %s", dev->path, strerror(EIO));
		return -EIO;
	}
	mark = fi_flush_begin(dev);
	if (fdatasync(dev->fd) < 0) {
		int err = -errno;

		nvmefs_err("%s: flush failed: %s", dev->path, strerror(-err));
		return err;
	}
	fi_flush_end(dev, mark);
	return 0;
}

int nvmefs_dev_discard(struct nvmefs_dev *dev, uint64_t off, uint64_t len)
{
	if (off % dev->block_size || len % dev->block_size || off > dev->size ||
	    len > dev->size - off) {
		nvmefs_err("%s: bad discard range: offset %llu, length %llu (size %llu, block %u)",
			   dev->path, (unsigned long long)off, (unsigned long long)len,
			   (unsigned long long)dev->size, dev->block_size);
		return -EINVAL;
	}
	if (len == 0)
		return 0;
	if (nvmefs_dev_fenced(dev))
		return fenced_err(dev, "discard");
	if (dev->is_blkdev) {
		uint64_t range[2] = {off, len};

		if (ioctl(dev->fd, BLKDISCARD, range) < 0)
			return -errno;
		return 0;
	}
	if (fallocate(dev->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)off, (off_t)len) <
	    0)
		return -errno;
	return 0;
}

uint32_t nvmefs_devset_block_size(const struct nvmefs_devset *set)
{
	uint32_t bs = 512;

	for (unsigned i = 0; i < set->count; i++)
		if (set->devs[i].block_size > bs)
			bs = set->devs[i].block_size;
	return bs;
}

int nvmefs_devset_home_node(const struct nvmefs_devset *set)
{
	unsigned best_n = 0;
	int best = 0;

	for (unsigned i = 0; i < set->count; i++) {
		unsigned n = 0;

		for (unsigned j = 0; j < set->count; j++)
			n += set->devs[j].numa_node == set->devs[i].numa_node;
		if (n > best_n || (n == best_n && set->devs[i].numa_node < best)) {
			best_n = n;
			best = set->devs[i].numa_node;
		}
	}
	return best;
}

int nvmefs_node_cpus(int node, cpu_set_t *cpus)
{
	struct bitmask *mask;
	unsigned n = 0;

	if (numa_available() < 0)
		return -ENOSYS;
	if (node < 0 || node > numa_max_node())
		return -ENOENT;
	mask = numa_allocate_cpumask();
	if (!mask)
		return -ENOMEM;
	CPU_ZERO(cpus);
	if (numa_node_to_cpus(node, mask) == 0) {
		for (unsigned c = 0; c < mask->size && c < CPU_SETSIZE; c++) {
			if (numa_bitmask_isbitset(mask, c)) {
				CPU_SET(c, cpus);
				n++;
			}
		}
	}
	numa_free_cpumask(mask);
	return n ? 0 : -ENOENT;
}
