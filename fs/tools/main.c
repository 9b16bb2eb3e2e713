// SPDX-License-Identifier: MIT
/*
 * nvmefs: mount an nvmefs volume.
 *
 *   nvmefs DEV[,DEV...]|UUID=uuid|LABEL=label MOUNTPOINT [-o OPTS] [-f] [-d]
 *   nvmefs SOURCE MOUNTPOINT -o remount,ro|rw[,...]   (fs/tools/remount.c)
 *
 * Finds the members when named by tag (fs/core/discover.c), opens and checks the members and loads
 * the metadata before mounting, so every refusal reaches the terminal with a non-zero exit; then
 * mounts, daemonizes (unless -f), starts the I/O engine and serves requests with nvmefs's own
 * multithreaded loop (fs/fuse/loop.c) until unmounted, and makes a last commit and flush so the
 * next mount replays nothing.
 */
#define FUSE_USE_VERSION 314
#include <fuse_lowlevel.h>

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <malloc.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/utsname.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>

#include "door_i.h"
#include "discover_i.h"
#include "meta_i.h"
#include "native_i.h"
#include "prefetch_i.h"
#include "remount.h"
#include "volume_i.h"
#include "xlayout_i.h"
#ifdef NVMEFS_FAULT_INJECTION
#include "fault_i.h"
#include "testctl.h"
#endif
#include "nvmefs/util.h"

#define DEFAULT_THREADS 8

/* What to set on the mount's bdi once the kernel has taken the INIT reply. */
struct bdi_tuning {
	const char *mountpoint;
	uint64_t readahead, dirty;
	bool cached, writeback;
};

struct cfg {
	char *devs, *mountpoint;
	/* Non-option arguments beyond those two (an error), kept to show
	 * what was meant: members given space-separated. */
	char *extra[NVMEFS_MAX_DEVICES + 2];
	unsigned n_extra;
	char *queue_depth, *threads, *pool, *mode, *commit, *readahead, *dirty, *search, *prefetch,
		*spin, *meta_cache, *statahead, *uring_mode, *uring_depth, *cache_small,
		*write_behind, *uring_idle_wait, *cpu_latency;
	int foreground, debug, help, version, noallow_other, ro, writeback, uring, nouring;
	unsigned atime; /* NVMEFS_ATIME_*: the last of relatime, noatime, strictatime */
};

/* opt_proc's keys for the atime options: KEY_ATIME + NVMEFS_ATIME_*. */
#define KEY_ATIME 100

#define OPT(t, p)                                                                                  \
	{                                                                                          \
		t, offsetof(struct cfg, p), 1                                                      \
	}
static const struct fuse_opt opt_spec[] = {
	OPT("queue_depth=%s", queue_depth),
	OPT("threads=%s", threads),
	OPT("pool=%s", pool),
	OPT("meta_cache=%s", meta_cache),
	OPT("mode=%s", mode),
	OPT("commit=%s", commit),
	OPT("readahead=%s", readahead),
	OPT("prefetch=%s", prefetch),
	OPT("cache_small=%s", cache_small),
	OPT("write_behind=%s", write_behind),
	OPT("statahead=%s", statahead),
	OPT("spin=%s", spin),
	OPT("cpu_latency=%s", cpu_latency),
	OPT("dirty=%s", dirty),
	OPT("search=%s", search),
	OPT("writeback", writeback),
	OPT("uring", uring),
	OPT("nouring", nouring),
	OPT("uring=%s", uring_mode),
	OPT("uring_depth=%s", uring_depth),
	OPT("uring_idle_wait=%s", uring_idle_wait),
	OPT("-f", foreground),
	OPT("debug", debug),
	OPT("-d", debug),
	OPT("noallow_other", noallow_other),
	OPT("ro", ro),
	OPT("-h", help),
	OPT("--help", help),
	OPT("-V", version),
	OPT("--version", version),
	FUSE_OPT_KEY("rw", FUSE_OPT_KEY_DISCARD),
	FUSE_OPT_KEY("relatime", KEY_ATIME + NVMEFS_ATIME_RELATIME),
	FUSE_OPT_KEY("noatime", KEY_ATIME + NVMEFS_ATIME_NOATIME),
	FUSE_OPT_KEY("strictatime", KEY_ATIME + NVMEFS_ATIME_STRICTATIME),
	/* A directory's atime is never moved by a readdir here: nodiratime is
	 * what every policy does already (libfuse 3.14 refuses the option). */
	FUSE_OPT_KEY("nodiratime", FUSE_OPT_KEY_DISCARD),
	FUSE_OPT_END,
};

static void usage(FILE *f)
{
	fprintf(f,
		"usage: nvmefs SOURCE MOUNTPOINT [-o OPT[,OPT...]] [-f] [-d]\n"
		"       nvmefs SOURCE MOUNTPOINT -o remount,ro|rw  (what mount -o remount runs)\n"
		"\n"
		"Mount an nvmefs volume. SOURCE names its members:\n"
		"  DEV[,DEV...]         by path, in any order\n"
		"  UUID=uuid, LABEL=l   by the volume's UUID or label, found on the block\n"
		"                       devices and in the -o search directories (write\n"
		"                       uuid=/label= in lower case in /etc/fstab: mount(8)\n"
		"                       resolves the upper-case tags itself and fails)\n"
		"\n"
		"  -h, --help           this text;  -V, --version: the version\n"
		"  -f                   stay in the foreground, log to stderr\n"
		"  -d, -o debug         foreground with debug logging (and FUSE's)\n"
		"  -o mode=direct|cached  direct: every read and write goes to the devices\n"
		"                       (default on Linux 6.6+, where mmap works in it);\n"
		"                       cached: the page cache (the default before 6.6,\n"
		"                       or with writeback, readahead= or dirty=)\n"
		"  -o queue_depth=N     I/Os in flight per device (default 32)\n"
		"  -o threads=N         FUSE worker threads (default 8)\n"
		"  -o spin=US           poll /dev/fuse (or, with cpu_latency=0, an io_uring\n"
		"                       queue led from another CPU) up to US microseconds\n"
		"                       before sleeping (default 50, 0: never)\n"
		"  -o cpu_latency=US|off  while requests come, ask the kernel (PM QoS,\n"
		"                       /dev/cpu_dma_latency) to wake idle CPUs within\n"
		"                       US microseconds; given back after 100-200 ms without\n"
		"                       a request (default 0: idle CPUs poll; off: ask\n"
		"                       nothing)\n"
		"  -o pool=SIZE         pinned buffer pool (default 64M)\n"
		"  -o meta_cache=SIZE   metadata kept in memory when not in use (default\n"
		"                       128M; 0: none, every unused inode is read again)\n"
		"  -o commit=SECONDS    group commit interval (default 5)\n"
		"  -o readahead=SIZE    cached mode: readahead window (default 16M)\n"
		"  -o prefetch=N        direct mode: requests read ahead of a sequential\n"
		"                       reader, per file (default 2, 0: none)\n"
		"  -o cache_small=SIZE  direct mode: read-only opens of files of at most\n"
		"                       SIZE use the page cache (default 1M, 0: none)\n"
		"  -o write_behind=SIZE a write of at most SIZE, without O_DIRECT or\n"
		"                       O_SYNC, returns before the devices have it; a\n"
		"                       failure shows at fsync (default 64K, 0: none)\n"
		"  -o uring             FUSE over io_uring (Linux 6.14+, the fuse module's\n"
		"                       enable_uring on), or no mount; uring=auto: when\n"
		"                       offered (direct mode's default, silently, with\n"
		"                       cpu_latency not 0 or without root); uring=off,\n"
		"                       nouring: /dev/fuse (the default otherwise)\n"
		"  -o uring_depth=N     requests each io_uring queue holds (1-64)\n"
		"  -o uring_idle_wait=0|1  an io_uring queue with nothing to do waits\n"
		"                       at idle priority, so that the caller it answered\n"
		"                       stays on its CPU (default 1)\n"
		"  -o statahead=N       entries of a directory read ahead of a program\n"
		"                       that looks them up in order (default 512, 0: none)\n"
		"  -o writeback         cached mode: the kernel's write-back cache; a full\n"
		"                       volume then shows at fsync or close (docs/DATAPATH.md)\n"
		"  -o dirty=SIZE        with writeback: dirty page cache this mount may hold\n"
		"                       before writers wait (default 1G, at most 1/8 of the\n"
		"                       volume)\n"
		"  -o search=DIR[:DIR]  with UUID=/LABEL=: also look at the image files\n"
		"                       in these directories\n"
		"  -o ro                mount read-only\n"
		"  -o relatime, noatime, strictatime  which reads update atime (default\n"
		"                       relatime: when not newer than mtime or ctime, or\n"
		"                       a day old; a directory's atime never moves)\n"
		"  -o noallow_other     only the mounting user may access (root mounts\n"
		"                       allow other users by default)\n"
		"  other -o options are passed to FUSE (see mount.fuse3(8))\n"
		"\n"
		"In the background, messages go to syslog (daemon facility); with -f or\n"
		"-d to stderr.\n"
		"Unmount with: fusermount3 -u MOUNTPOINT (or umount MOUNTPOINT)\n");
}

static int opt_proc(void *data, const char *arg, int key, struct fuse_args *outargs)
{
	struct cfg *c = data;

	/* The kernel leaves a FUSE file's atime to us: the policy is ours.
	 * noatime still goes on to the mount's flags, where findmnt shows it;
	 * libfuse 3.14 refuses relatime and strictatime ("unknown option"). */
	if (key >= KEY_ATIME && key <= KEY_ATIME + NVMEFS_ATIME_STRICTATIME) {
		c->atime = (unsigned)(key - KEY_ATIME);
		return c->atime == NVMEFS_ATIME_NOATIME;
	}
	if (key != FUSE_OPT_KEY_NONOPT)
		return 1;
	if (!c->devs) {
		c->devs = strdup(arg);
		return 0;
	}
	if (!c->mountpoint) {
		c->mountpoint = strdup(arg);
		return 0;
	}
	if (c->n_extra < sizeof(c->extra) / sizeof(c->extra[0]) &&
	    !(c->extra[c->n_extra++] = strdup(arg)))
		return -1;
	return 0;
}

/* More than SOURCE and MOUNTPOINT: most likely members separated by spaces
 * ("nvmefs d0 d1 d2 MNT"); show the command meant. */
static void say_extra(const struct cfg *c)
{
	unsigned n = c->n_extra < sizeof(c->extra) / sizeof(c->extra[0])
			     ? c->n_extra
			     : sizeof(c->extra) / sizeof(c->extra[0]);

	struct stat st;

	/* After a tag, or a directory (the mount point, then): a stray one. */
	if (nvmefs_discover_is_tag(c->devs) || (!stat(c->mountpoint, &st) && S_ISDIR(st.st_mode))) {
		fprintf(stderr,
			"nvmefs: unexpected argument '%s': want SOURCE MOUNTPOINT (members "
			"comma-separated, in one argument: DEV,DEV,...)\n",
			c->extra[0]);
		return;
	}
	fprintf(stderr,
		"nvmefs: unexpected argument '%s': members are given comma-separated, in one "
		"argument: nvmefs %s,%s",
		c->extra[0], c->devs, c->mountpoint);
	for (unsigned i = 0; i + 1 < n; i++)
		fprintf(stderr, ",%s", c->extra[i]);
	fprintf(stderr, " %s\n", c->extra[n - 1]);
}

static int parse_uint(const char *name, const char *s, unsigned lo, unsigned hi, unsigned *out)
{
	char *end;
	unsigned long v;

	errno = 0;
	v = strtoul(s, &end, 10);
	if (errno || end == s || *end || v < lo || v > hi) {
		nvmefs_err("bad %s '%s': want a number from %u to %u", name, s, lo, hi);
		return -EINVAL;
	}
	*out = (unsigned)v;
	return 0;
}

/* A size option of at most max bytes (said as max_text), 0 meaning none. */
static int parse_size_opt(const char *name, const char *s, uint64_t max, const char *max_text,
			  uint64_t *out)
{
	uint64_t v;

	if (nvmefs_parse_size(s, &v) || v > max) {
		nvmefs_err("bad %s '%s': want a size up to %s (0: none)", name, s, max_text);
		return -EINVAL;
	}
	*out = v;
	return 0;
}

static int parse_bdi_opts(const struct cfg *c, struct bdi_tuning *t)
{
	t->readahead = 16 << 20;
	t->dirty = 1ull << 30;
	if (c->readahead && (nvmefs_parse_size(c->readahead, &t->readahead) ||
			     t->readahead < 4096 || t->readahead > (1ull << 30))) {
		nvmefs_err("bad readahead '%s': want a size from 4K to 1G", c->readahead);
		return -EINVAL;
	}
	if (c->dirty && (nvmefs_parse_size(c->dirty, &t->dirty) || t->dirty < (1u << 20))) {
		nvmefs_err("bad dirty '%s': want a size of at least 1M", c->dirty);
		return -EINVAL;
	}
	return 0;
}

/*
 * The mode when -o mode= is not given: direct, which measured best for
 * streaming reads and writes, writers sharing a file and torch.load
 * (docs/PERFORMANCE.md, "Choosing the default mode"), on kernels that let
 * a FUSE server allow shared mmap of direct_io files (Linux 6.6, FUSE 7.39:
 * op_init asks for it); before that, cached, so that mmap works. An option
 * only cached mode has (writeback, readahead=, dirty=) asks for cached.
 */
static bool default_direct(const struct cfg *c)
{
	struct utsname u;
	unsigned major = 0, minor = 0;

	if (c->writeback || c->readahead || c->dirty)
		return false;
	if (uname(&u) || sscanf(u.release, "%u.%u", &major, &minor) != 2)
		return false;
	return major > 6 || (major == 6 && minor >= 6);
}

static int parse_uring_opts(const struct cfg *c, struct nvmefs_vol_opts *o);

/* What a NVMEFS_URING_* choice serves, as --version says it. */
static const char *transport_name(unsigned uring)
{
	return uring == NVMEFS_URING_OFF ? "/dev/fuse" : "io_uring where offered";
}

/*
 * The mount point must be a directory. A FUSE mount whose daemon was killed
 * answers ENOTCONN ("Transport endpoint is not connected") until it is
 * unmounted; mounting on top of it would work and leave the dead one
 * underneath, so it is refused, saying what to do.
 */
static int check_mountpoint(const char *mnt)
{
	struct statvfs sv;
	struct stat st;
	int err;

	/* statfs always asks the filesystem (stat may be answered from the
	 * kernel's attribute cache even on a dead mount). */
	if (!stat(mnt, &st) && !statvfs(mnt, &sv)) {
		if (S_ISDIR(st.st_mode))
			return 0;
		nvmefs_err("%s: not a directory; the mount point must be one", mnt);
		return -ENOTDIR;
	}
	err = errno;
	if (err == ENOTCONN)
		nvmefs_err("%s: a mount whose daemon is gone (killed?) is still there; unmount it "
			   "first (umount %s), then mount again",
			   mnt, mnt);
	else
		nvmefs_err("%s: %s", mnt, strerror(err));
	return -err;
}

static int parse_vol_opts(const struct cfg *c, struct nvmefs_vol_opts *o, unsigned *threads)
{
	uint64_t v;
	unsigned secs;

	if (c->queue_depth && parse_uint("queue_depth", c->queue_depth, 1, 4096, &o->queue_depth))
		return -EINVAL;
	if (c->threads && parse_uint("threads", c->threads, 1, 1024, threads))
		return -EINVAL;
	if (c->commit) {
		if (parse_uint("commit", c->commit, 1, 3600, &secs))
			return -EINVAL;
		o->commit_ms = secs * 1000;
	}
	if (c->pool) {
		if (nvmefs_parse_size(c->pool, &v) || v < (4u << 20) || v > (64ull << 30)) {
			nvmefs_err("bad pool '%s': want a size from 4M to 64G", c->pool);
			return -EINVAL;
		}
		o->pool_bytes = v;
	}
	if (c->meta_cache) {
		if (parse_size_opt("meta_cache", c->meta_cache, 1ull << 40, "1T", &v))
			return -EINVAL;
		o->meta_cache = v ? v : 1; /* 1 byte: nothing fits */
	}
	/* Every worker holds a buffer to receive into; the rest carry the
	 * reads and writes in flight. */
	v = o->pool_bytes ? o->pool_bytes : NVMEFS_POOL_DEFAULT;
	if (v / NVMEFS_POOL_BUF < *threads + 2) {
		nvmefs_err("pool=%s holds %llu buffers of 1 MiB + 8 KiB; threads=%u needs at "
			   "least %u",
			   c->pool ? c->pool : "64M", (unsigned long long)(v / NVMEFS_POOL_BUF),
			   *threads, *threads + 2);
		return -EINVAL;
	}
	/* The kernel's readahead and write-back requests in flight, bounded
	 * by the buffers the workers do not hold. */
	o->max_background = (unsigned)(v / NVMEFS_POOL_BUF) - *threads;
	if (c->mode) {
		if (!strcmp(c->mode, "direct"))
			o->direct = true;
		else if (strcmp(c->mode, "cached")) {
			nvmefs_err("bad mode '%s': want cached or direct", c->mode);
			return -EINVAL;
		}
	} else {
		o->direct = default_direct(c);
	}
	o->prefetch = 2;
	if (c->prefetch && parse_uint("prefetch", c->prefetch, 0, 16, &o->prefetch))
		return -EINVAL;
	o->cache_small = NVMEFS_CACHE_SMALL_DEFAULT;
	if (c->cache_small &&
	    parse_size_opt("cache_small", c->cache_small, 1ull << 40, "1T", &o->cache_small))
		return -EINVAL;
	o->write_behind = NVMEFS_WRITE_BEHIND_DEFAULT;
	if (c->write_behind &&
	    parse_size_opt("write_behind", c->write_behind, 1u << 20, "1M", &o->write_behind))
		return -EINVAL;
	o->statahead = 512;
	if (c->statahead && parse_uint("statahead", c->statahead, 0, 65536, &o->statahead))
		return -EINVAL;
	o->spin_us = 50;
	if (c->spin && parse_uint("spin", c->spin, 0, 10000, &o->spin_us))
		return -EINVAL;
	if (nvmefs_cpulat_parse(c->cpu_latency, &o->cpu_latency_us))
		return -EINVAL;
	o->read_only = c->ro;
	o->writeback = c->writeback;
	return parse_uring_opts(c, o);
}

/*
 * -o uring (demanded: refused here when this kernel does not offer it),
 * uring=auto (used when offered, a line when not), uring=off or nouring,
 * and none of them: nvmefs_uring_default for the mode (o->direct, parsed
 * first). uring_depth=N entries a queue.
 */
static int parse_uring_opts(const struct cfg *c, struct nvmefs_vol_opts *o)
{
	int offered, err;

	o->uring = nvmefs_uring_default(o->direct, nvmefs_cpulat_awake(o->cpu_latency_us));
	if (c->uring + c->nouring + !!c->uring_mode > 1) {
		nvmefs_err("give one of uring, uring=MODE and nouring");
		return -EINVAL;
	}
	if (c->uring || (c->uring_mode && !strcmp(c->uring_mode, "on")))
		o->uring = NVMEFS_URING_ON;
	else if (c->nouring || (c->uring_mode && !strcmp(c->uring_mode, "off")))
		o->uring = NVMEFS_URING_OFF;
	else if (c->uring_mode && !strcmp(c->uring_mode, "auto"))
		o->uring = NVMEFS_URING_AUTO_SAY;
	else if (c->uring_mode) {
		nvmefs_err("bad uring=%s: want on, auto or off", c->uring_mode);
		return -EINVAL;
	}
	if (c->uring_depth && parse_uint("uring_depth", c->uring_depth, 1, 64, &o->uring_depth))
		return -EINVAL;
	o->uring_idle_wait = 1;
	if (c->uring_idle_wait &&
	    parse_uint("uring_idle_wait", c->uring_idle_wait, 0, 1, &o->uring_idle_wait))
		return -EINVAL;
	offered = nvmefs_uring_offered();
	if (o->uring == NVMEFS_URING_ON && offered) {
		nvmefs_err("-o uring: this kernel does not serve FUSE over io_uring (%s); an "
			   "administrator enables it with: echo Y > "
			   "/sys/module/fuse/parameters/enable_uring",
			   offered == -EPERM ? "its fuse module's enable_uring is off"
					     : "Linux 6.14 or later with CONFIG_FUSE_IO_URING");
		return -EOPNOTSUPP;
	}
	if (o->uring == NVMEFS_URING_AUTO_SAY && offered)
		nvmefs_warn("uring=auto: this kernel does not serve FUSE over io_uring "
			    "(enable_uring is %s): serving /dev/fuse",
			    offered == -EPERM ? "off" : "missing");
	/* Offered, but may we make a ring? Asked here, before the daemon
	 * forks: a refusal found later would reach syslog only, and the
	 * mount command would have succeeded. */
	if (o->uring != NVMEFS_URING_OFF && !offered && (err = nvmefs_uring_ring_ok())) {
		if (o->uring == NVMEFS_URING_ON) {
			nvmefs_err("-o uring: FUSE over io_uring cannot be set up: io_uring_setup: "
				   "%s (kernel.io_uring_disabled, or a seccomp policy?)",
				   strerror(-err));
			return err;
		}
		nvmefs_warn("FUSE over io_uring cannot be set up (io_uring_setup: %s): "
			    "serving /dev/fuse",
			    strerror(-err));
		o->uring = NVMEFS_URING_OFF;
	}
	return 0;
}

/*
 * Options that belong to the other mode, or to an option not given, would
 * be ignored; refuse them, naming both, rather than mount otherwise than
 * asked (writeback with mode=direct would end up off, silently).
 */
static int refuse_contradictions(const struct cfg *c, bool direct)
{
	const char *mode =
		c->mode ? (direct ? "mode=direct" : "mode=cached")
			: (direct ? "mode=direct (the default)" : "mode=cached (the default)");

	if (direct && c->writeback) {
		nvmefs_err("writeback and mode=direct contradict each other: writeback is the "
			   "page cache's write-back, and direct mode does not use the page cache");
		return -EINVAL;
	}
	if (c->dirty && !c->writeback) {
		nvmefs_err("dirty=%s without writeback: dirty bounds writeback's dirty page "
			   "cache; add writeback (cached mode) or drop dirty=",
			   c->dirty);
		return -EINVAL;
	}
	if (direct && c->readahead) {
		nvmefs_err("readahead=%s and %s contradict each other: readahead is the page "
			   "cache's (cached mode); direct mode reads ahead with prefetch=N",
			   c->readahead, mode);
		return -EINVAL;
	}
	if (!direct && c->cache_small) {
		nvmefs_err("cache_small=%s and %s contradict each other: in cached mode "
			   "every file's reads go through the page cache",
			   c->cache_small, mode);
		return -EINVAL;
	}
	if (!direct && c->prefetch) {
		nvmefs_err("prefetch=%s and %s contradict each other: prefetch is direct "
			   "mode's read-ahead; cached mode's is readahead=SIZE",
			   c->prefetch, mode);
		return -EINVAL;
	}
	return 0;
}

/* Split "a,b,c" in place into paths[]. */
static unsigned split_devs(char *devs, const char **paths, unsigned max)
{
	unsigned n = 0;

	for (char *save = NULL, *p = strtok_r(devs, ",", &save); p;
	     p = strtok_r(NULL, ",", &save)) {
		if (n == max)
			return max + 1;
		paths[n++] = p;
	}
	return n;
}

/* The device number ("0:NN") of the FUSE mount on mnt (absolute, resolved
 * by main before mounting), from mountinfo: a stat or realpath of the
 * mount point now would be a request to ourselves. */
static int mount_devno(const char *mnt, char *out, size_t len)
{
	char *line = NULL, dev[32], where[PATH_MAX + 1];
	size_t cap = 0;
	FILE *f;
	int ret = -ENOENT;

	f = fopen("/proc/self/mountinfo", "re");
	if (!f)
		return -errno;
	/* "ID PARENT MAJ:MIN ROOT MOUNTPOINT ...": the last match is ours. */
	while (getline(&line, &cap, f) > 0) {
		if (sscanf(line, "%*u %*u %31s %*s %4096s", dev, where) == 2 &&
		    !strcmp(where, mnt) && strstr(line, " - fuse.nvmefs ")) {
			snprintf(out, len, "%s", dev);
			ret = 0;
		}
	}
	free(line);
	fclose(f);
	return ret;
}

static int write_bdi(const char *devno, const char *knob, uint64_t v)
{
	char path[128];
	FILE *f;
	int ret = 0;

	snprintf(path, sizeof(path), "/sys/class/bdi/%s/%s", devno, knob);
	f = fopen(path, "we");
	if (!f)
		return -errno;
	if (fprintf(f, "%llu\n", (unsigned long long)v) < 0)
		ret = -EIO;
	if (fclose(f))
		ret = -errno;
	return ret;
}

/*
 * Runs once, right after INIT. The kernel caps a FUSE mount's readahead at
 * max_readahead and gives its write-back cache 1% of the dirty limit
 * (about 40 MiB here) with strict per-bdi throttling; both are too small
 * to keep several drives busy, and both are the bdi's sysfs knobs (root
 * only; an unprivileged mount keeps the kernel's values).
 */
static void tune_bdi(void *arg)
{
	const struct bdi_tuning *t = arg;
	char devno[32];
	int ret;

	if (!t->cached)
		return;
	ret = mount_devno(t->mountpoint, devno, sizeof(devno));
	if (!ret)
		ret = write_bdi(devno, "read_ahead_kb", t->readahead >> 10);
	if (!ret && t->writeback)
		ret = write_bdi(devno, "max_bytes", t->dirty);
	if (ret)
		nvmefs_warn("cannot tune the mount's readahead and write-back (%s); "
			    "sequential cached I/O will be slower",
			    strerror(-ret));
	else
		nvmefs_debug("bdi %s: read_ahead_kb %llu, max_bytes %llu", devno,
			     (unsigned long long)(t->readahead >> 10),
			     (unsigned long long)t->dirty);
}

static void syslog_sink(enum nvmefs_log_level level, const char *msg)
{
	syslog((int)level, "%s", msg);
}

/*
 * A background mount before the daemon detaches: everything to syslog, as
 * after it, and warnings and errors also to stderr, which mount(8) shows.
 * The notes of loading (the journal replayed, files unlinked while open
 * reclaimed) stay off the terminal, as a kernel filesystem's go to the
 * kernel log: xfstests compares its mounts' output (generic/417 and 530,
 * after a shutdown).
 */
static void mount_sink(enum nvmefs_log_level level, const char *msg)
{
	syslog((int)level, "%s", msg);
	if (level <= NVMEFS_LOG_WARN)
		fprintf(stderr, "nvmefs: %s\n", msg);
}

/* fsname is the source as given, so that mount(8) -a finds an fstab line's
 * volume already mounted; its commas are escaped for libfuse's parser. */
static int add_mount_opts(struct fuse_args *args, const struct cfg *c, const char *source)
{
	char *esc = NULL, *opts = NULL;
	size_t len;
	int ret = -ENOMEM;

	/* fuse_opt_add_opt_escaped escapes the source's commas and backslashes. */
	if (fuse_opt_add_opt_escaped(&esc, source))
		return -ENOMEM;
	len = strlen(esc) + sizeof("fsname=");
	opts = malloc(len);
	if (!opts)
		goto out;
	snprintf(opts, len, "fsname=%s", esc);
	ret = fuse_opt_add_opt(&opts, "subtype=nvmefs,default_permissions") ||
	      (geteuid() == 0 && !c->noallow_other && fuse_opt_add_opt(&opts, "allow_other")) ||
	      (c->ro && fuse_opt_add_opt(&opts, "ro")) || fuse_opt_add_arg(args, "-o") ||
	      fuse_opt_add_arg(args, opts) || (c->debug && fuse_opt_add_arg(args, "-d"));
	ret = ret ? -ENOMEM : 0;
out:
	free(opts);
	free(esc);
	return ret;
}

/* The members' paths (malloc'ed, *n of them, even on failure): split from
 * a list and made absolute, or found by tag. */
static int find_members(struct cfg *c, char **paths, unsigned *n)
{
	const char *given[NVMEFS_MAX_DEVICES];
	unsigned k;

	*n = 0;
	if (nvmefs_discover_is_tag(c->devs))
		return nvmefs_discover(c->devs, c->search, paths, n) ? -ENODEV : 0;
	k = split_devs(c->devs, given, NVMEFS_MAX_DEVICES);
	if (k == 0 || k > NVMEFS_MAX_DEVICES) {
		nvmefs_err("give 1 to %u devices separated by commas", NVMEFS_MAX_DEVICES);
		return -EINVAL;
	}
	/* Absolute paths in .nvmefs, which the daemon serves from "/"; a
	 * path that does not resolve is refused by name when opened. */
	for (; *n < k; (*n)++) {
		paths[*n] = realpath(given[*n], NULL);
		if (!paths[*n] && !(paths[*n] = strdup(given[*n])))
			return -ENOMEM;
	}
	return 0;
}

int main(int argc, char **argv)
{
	struct fuse_args args = FUSE_ARGS_INIT(argc, argv);
	struct nvmefs_vol_opts vopts = {0};
	char *paths[NVMEFS_MAX_DEVICES];
	char *source = NULL;
	struct fuse_session *se = NULL;
	struct nvmefs_vol *vol = NULL;
	struct bdi_tuning bdi;
	struct cfg c = {0};
	unsigned threads = DEFAULT_THREADS, n = 0;
	struct nvmefs_native *native = NULL;
	int ret = 1, conn_fd = -1, err;

	/* Metadata is allocated by whichever worker reads it from the store
	 * and freed by whichever evicts it: a chunk goes back to the arena it
	 * came from, so with several arenas each grows to what its threads
	 * once held and keeps what others freed into it. One arena (the
	 * workers take turns on 2 cores anyway): peak RSS at 10^6 files,
	 * stat then read, 219 MB, against 345 MB with two and more with
	 * glibc's default of 8 a core. */
	mallopt(M_ARENA_MAX, 1);

	nvmefs_log_set_ident("nvmefs");
	/* mount -o remount (through mount.fuse3): the running daemon's. */
	if (nvmefs_remount_asked(argc, argv)) {
		ret = nvmefs_remount_main(argc, argv);
		goto out;
	}
	if (fuse_opt_parse(&args, &c, opt_spec, opt_proc) == -1)
		goto out;
	if (c.help) {
		usage(stdout);
		ret = 0;
		goto out;
	}
	if (c.version) {
		bool awake = nvmefs_cpulat_awake(0); /* the default cpu_latency */

		err = nvmefs_uring_offered();
		printf("nvmefs %s (on-disk format %u, libfuse %s)\n", NVMEFS_VERSION,
		       NVMEFS_FORMAT_VERSION, fuse_pkgversion());
		printf("transports: /dev/fuse; FUSE over io_uring: %s (default: %s in direct "
		       "mode, %s in cached mode%s)\n",
		       !err	       ? "offered by this kernel"
		       : err == -EPERM ? "off in this kernel (enable_uring)"
				       : "not in this kernel",
		       transport_name(nvmefs_uring_default(true, awake)),
		       transport_name(nvmefs_uring_default(false, awake)),
		       awake ? "; io_uring in direct mode with cpu_latency not 0" : "");
		ret = 0;
		goto out;
	}
	if (c.n_extra) {
		say_extra(&c);
		goto out;
	}
	if (!c.devs || !c.mountpoint) {
		fprintf(stderr, "nvmefs: give the devices and a mount point\n");
		usage(stderr);
		goto out;
	}
	/* Absolute, for the bdi lookup and .nvmefs/config after the daemon
	 * has left the working directory. */
	{
		char *abs = realpath(c.mountpoint, NULL);

		if (abs) {
			free(c.mountpoint);
			c.mountpoint = abs;
		}
	}
	if (check_mountpoint(c.mountpoint))
		goto out;
	if (c.debug) {
		c.foreground = 1;
		nvmefs_log_set_level(NVMEFS_LOG_DEBUG);
	}
	if (!c.foreground) {
		openlog("nvmefs", LOG_PID, LOG_DAEMON);
		nvmefs_log_set_sink(mount_sink);
	}
	if (parse_vol_opts(&c, &vopts, &threads) || parse_bdi_opts(&c, &bdi) ||
	    refuse_contradictions(&c, vopts.direct))
		goto out;
	/* "umount; mount" must work: the last daemon may still be making its
	 * last flush, holding the members, for a moment after umount. */
	vopts.busy_wait_ms = NVMEFS_BUSY_WAIT_MS;
	vopts.atime = c.atime;
	vopts.threads = threads;
	vopts.readahead = bdi.readahead;
	vopts.mountpoint = c.mountpoint;
	bdi.mountpoint = c.mountpoint;
	bdi.cached = !vopts.direct;
	source = strdup(c.devs);
	if (!source || find_members(&c, paths, &n))
		goto out;
	vopts.source = source;
	/* Mounted here already: that mount, bound on this mount point too. */
	err = nvmefs_mount_again((const char *const *)paths, n, c.mountpoint, c.ro);
	if (err) {
		ret = err > 0 ? 0 : 1;
		goto out;
	}
	if (nvmefs_vol_open(&vol, (const char *const *)paths, n, &vopts))
		goto out;
	/* A volume made before the control directory may hold a real
	 * "/.nvmefs": it stays what that name means. */
	vol->ctl_shadowed = nvmefs_dir_find(vol, NVMEFS_ROOT_INO, NVMEFS_CTL_NAME) != NULL;
	if (vol->ctl_shadowed)
		nvmefs_warn("the root holds an entry named %s: the control directory (stats, "
			    "config) is not served until it is renamed",
			    NVMEFS_CTL_NAME);
	/* The dirty cache is also the space that may turn out missing at
	 * write-back: keep it a small part of the volume. */
	if (bdi.dirty > vol->total_bytes / 8)
		bdi.dirty = vol->total_bytes / 8 > (1u << 20) ? vol->total_bytes / 8 : 1u << 20;
	vol->opts.dirty_bytes = bdi.dirty;
	bdi.writeback = vopts.writeback;
#ifdef NVMEFS_FAULT_INJECTION
	vol->test_ctl = nvmefs_testctl;
	vol->test_mute = nvmefs_powerloss_cut;
#endif
	if (add_mount_opts(&args, &c, source))
		goto out_vol;
	se = fuse_session_new(&args, &nvmefs_ops, sizeof(nvmefs_ops), vol);
	if (!se)
		goto out_vol;
	if (fuse_set_signal_handlers(se))
		goto out_session;
	if (fuse_session_mount(se, c.mountpoint)) {
		nvmefs_err("%s: cannot mount here", c.mountpoint);
		goto out_handlers;
	}
	/* Held until the members are closed: through it, a tool that finds
	 * them busy after umount sees that our connection is gone, and waits
	 * for us rather than refusing (fs/core/holder.c). */
	conn_fd = fcntl(fuse_session_fd(se), F_DUPFD_CLOEXEC, 3);
	if (fuse_daemonize(c.foreground))
		goto out_unmount;
	if (!c.foreground)
		nvmefs_log_set_sink(syslog_sink);
	if (nvmefs_vol_start(vol)) {
		nvmefs_err("cannot start the I/O engine; unmounting");
		goto out_unmount;
	}
	vol->mounted_ns = nvmefs_now_ns();
	clock_gettime(CLOCK_REALTIME, &vol->mounted_at);
	/* The native door (libnvmefs): without it the mount still serves. */
	vol->allow_other = geteuid() == 0 && !c.noallow_other; /* as mount_opts() asks */
	err = nvmefs_native_start(vol, c.mountpoint, nvmefs_loop_inval, se, &native);
	if (err)
		nvmefs_warn("no native client door: %s", strerror(-err));
	/* Statahead (fs/fuse/statahead.c): without it the mount still serves. */
	err = nvmefs_sa_start(c.mountpoint, vol->opts.statahead, vol, se);
	if (err)
		nvmefs_warn("no statahead: %s", strerror(-err));
	nvmefs_info("mounted %u member(s) on %s", vol->ndevs, c.mountpoint);
	ret = nvmefs_loop_run(se, vol, threads, tune_bdi, &bdi) ? 1 : 0;
	nvmefs_sa_stop();
	/* Its requests in flight finish and its kernel notices go out while
	 * the session is still there. */
	nvmefs_native_stop(native);
	/* Replies still to come from the I/O completions need the session. */
	nvmefs_data_drain(vol);
out_unmount:
	fuse_session_unmount(se);
out_handlers:
	fuse_remove_signal_handlers(se);
out_session:
	fuse_session_destroy(se);
out_vol:
	if (nvmefs_vol_close(vol))
		ret = 1;
	if (conn_fd >= 0)
		close(conn_fd);
	/* Its job in flight, if any, has seen the connection end. */
	nvmefs_sa_join();
out:
	for (unsigned k = 0; k < n; k++)
		free(paths[k]);
	free(source);
	free(c.search);
	for (unsigned k = 0; k < c.n_extra && k < sizeof(c.extra) / sizeof(c.extra[0]); k++)
		free(c.extra[k]);
	free(c.devs);
	free(c.mountpoint);
	free(c.queue_depth);
	free(c.threads);
	free(c.pool);
	free(c.mode);
	free(c.commit);
	free(c.readahead);
	free(c.prefetch);
	free(c.cache_small);
	free(c.write_behind);
	free(c.spin);
	free(c.cpu_latency);
	free(c.uring_mode);
	free(c.uring_depth);
	free(c.uring_idle_wait);
	free(c.dirty);
	fuse_opt_free_args(&args);
	return ret;
}
