// SPDX-License-Identifier: MIT
/*
 * The hidden control directory MOUNTPOINT/.nvmefs: read-only files made at
 * open from the daemon's state, as /proc files are.
 *
 *   stats   one JSON object: whether the volume is shut down
 *           (FS_IOC_SHUTDOWN); per member, the engine's counters (ops, bytes,
 *           errors, latency, in flight); the pinned pool; FUSE requests by
 *           type; the data path's, the native door's, the metadata cache's
 *           and store's, and statahead's counters; the transport.
 *           nvmefs-stat reads it.
 *   config  the options in force and the members, "key = value" lines.
 *
 * Its inodes are numbered above NVMEFS_INO_MAX, where no file can be; the
 * root's readdir does not show it (it is no directory entry), and no name
 * ".nvmefs" can be made in the root (nvmefs_is_ctl_name, fs/core/namei.c);
 * a volume made before the control directory may hold one, and that
 * entry is then served instead (vol->ctl_shadowed). JSON comes from
 * json-c, the library the tools already use, for correct escaping of
 * device paths.
 */
#define FUSE_USE_VERSION 314
#include <fuse_lowlevel.h>

#include "door_i.h"
#include "icache_i.h"
#include "store.h"
#include "volume_i.h"
#include "xlayout_i.h"

#include <errno.h>
#include <json-c/json.h>
#include <linux/fuse.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "nvmefs/util.h"

/* FUSE opcodes by name, for the request counters. */
static const char *const op_names[NVMEFS_CTL_OPS] = {
	[FUSE_LOOKUP] = "LOOKUP",
	[FUSE_FORGET] = "FORGET",
	[FUSE_GETATTR] = "GETATTR",
	[FUSE_SETATTR] = "SETATTR",
	[FUSE_READLINK] = "READLINK",
	[FUSE_SYMLINK] = "SYMLINK",
	[FUSE_MKNOD] = "MKNOD",
	[FUSE_MKDIR] = "MKDIR",
	[FUSE_UNLINK] = "UNLINK",
	[FUSE_RMDIR] = "RMDIR",
	[FUSE_RENAME] = "RENAME",
	[FUSE_LINK] = "LINK",
	[FUSE_OPEN] = "OPEN",
	[FUSE_READ] = "READ",
	[FUSE_WRITE] = "WRITE",
	[FUSE_STATFS] = "STATFS",
	[FUSE_RELEASE] = "RELEASE",
	[FUSE_FSYNC] = "FSYNC",
	[FUSE_SETXATTR] = "SETXATTR",
	[FUSE_GETXATTR] = "GETXATTR",
	[FUSE_LISTXATTR] = "LISTXATTR",
	[FUSE_REMOVEXATTR] = "REMOVEXATTR",
	[FUSE_FLUSH] = "FLUSH",
	[FUSE_INIT] = "INIT",
	[FUSE_OPENDIR] = "OPENDIR",
	[FUSE_READDIR] = "READDIR",
	[FUSE_RELEASEDIR] = "RELEASEDIR",
	[FUSE_FSYNCDIR] = "FSYNCDIR",
	[FUSE_GETLK] = "GETLK",
	[FUSE_SETLK] = "SETLK",
	[FUSE_SETLKW] = "SETLKW",
	[FUSE_ACCESS] = "ACCESS",
	[FUSE_CREATE] = "CREATE",
	[FUSE_INTERRUPT] = "INTERRUPT",
	[FUSE_BMAP] = "BMAP",
	[FUSE_DESTROY] = "DESTROY",
	[FUSE_IOCTL] = "IOCTL",
	[FUSE_POLL] = "POLL",
	[FUSE_NOTIFY_REPLY] = "NOTIFY_REPLY",
	[FUSE_BATCH_FORGET] = "BATCH_FORGET",
	[FUSE_FALLOCATE] = "FALLOCATE",
	[FUSE_READDIRPLUS] = "READDIRPLUS",
	[FUSE_RENAME2] = "RENAME2",
	[FUSE_LSEEK] = "LSEEK",
	[FUSE_COPY_FILE_RANGE] = "COPY_FILE_RANGE",
	[FUSE_SYNCFS] = "SYNCFS",
	[FUSE_TMPFILE] = "TMPFILE",
};

static const struct {
	const char *name;
	uint64_t ino;
} ctl_files[] = {
	{"stats", NVMEFS_CTL_STATS},
	{"config", NVMEFS_CTL_CONFIG},
};
#define NFILES (sizeof(ctl_files) / sizeof(ctl_files[0]))

void nvmefs_ctl_count(struct nvmefs_vol *vol, uint32_t opcode)
{
	atomic_fetch_add_explicit(&vol->req_count[opcode < NVMEFS_CTL_OPS ? opcode : 0], 1,
				  memory_order_relaxed);
}

bool nvmefs_ctl_ino(uint64_t ino)
{
	return ino >= NVMEFS_CTL_DIR && ino <= NVMEFS_CTL_CONFIG;
}

int nvmefs_ctl_stat(const struct nvmefs_vol *vol, uint64_t ino, struct stat *st)
{
	if (!nvmefs_ctl_ino(ino))
		return -ENOENT;
	memset(st, 0, sizeof(*st));
	st->st_ino = ino;
	/* Size 0 as in /proc: the text is made at open, served direct_io. */
	st->st_mode = ino == NVMEFS_CTL_DIR ? S_IFDIR | 0555 : S_IFREG | 0444;
	st->st_nlink = ino == NVMEFS_CTL_DIR ? 2 : 1;
	st->st_blksize = NVMEFS_BLOCK;
	st->st_atim = st->st_mtim = st->st_ctim = vol->mounted_at;
	return 0;
}

void nvmefs_ctl_entry(const struct nvmefs_vol *vol, uint64_t ino, struct fuse_entry_param *e)
{
	/* The same generation and timeouts in lookup and readdirplus: the
	 * kernel takes a different generation for a reused inode number and
	 * marks its cached inode bad (open files then get EIO). */
	memset(e, 0, sizeof(*e));
	e->ino = ino;
	e->generation = 1;
	e->attr_timeout = e->entry_timeout = NVMEFS_ATTR_TIMEOUT;
	nvmefs_ctl_stat(vol, ino, &e->attr);
}

int nvmefs_ctl_lookup(const struct nvmefs_vol *vol, uint64_t parent, const char *name,
		      struct fuse_entry_param *e)
{
	if (parent == NVMEFS_ROOT_INO && !strcmp(name, NVMEFS_CTL_NAME)) {
		if (vol->ctl_shadowed)
			return 1;
		nvmefs_ctl_entry(vol, NVMEFS_CTL_DIR, e);
		return 0;
	}
	if (parent != NVMEFS_CTL_DIR)
		return 1;
	for (size_t i = 0; i < NFILES; i++) {
		if (!strcmp(name, ctl_files[i].name)) {
			nvmefs_ctl_entry(vol, ctl_files[i].ino, e);
			return 0;
		}
	}
	return -ENOENT;
}

size_t nvmefs_ctl_readdir(struct fuse_req *req, const struct nvmefs_vol *vol, char *buf,
			  size_t size, off_t off, bool plus)
{
	size_t pos = 0;

	/* Entries at offsets 1 ("."), 2 (".."), 3... (the files). */
	for (off_t i = off; i < (off_t)(2 + NFILES); i++) {
		const char *name = i == 0 ? "." : i == 1 ? ".." : ctl_files[i - 2].name;
		uint64_t ino = i == 0	? NVMEFS_CTL_DIR
			       : i == 1 ? NVMEFS_ROOT_INO
					: ctl_files[i - 2].ino;
		struct fuse_entry_param e = {0};
		size_t n;

		if (ino == NVMEFS_ROOT_INO) /* ".." is the root: name it, no lookup */
			e.attr = (struct stat){.st_ino = ino, .st_mode = S_IFDIR};
		else
			nvmefs_ctl_entry(vol, ino, &e);
		n = plus ? fuse_add_direntry_plus(req, buf + pos, size - pos, name, &e, i + 1)
			 : fuse_add_direntry(req, buf + pos, size - pos, name, &e.attr, i + 1);
		if (n > size - pos)
			break;
		pos += n;
	}
	return pos;
}

/* ---- stats ---- */

static void put_u64(json_object *o, const char *key, uint64_t v)
{
	json_object_object_add(o, key, json_object_new_uint64(v));
}

static json_object *device_stats(struct nvmefs_vol *vol, unsigned d)
{
	struct nvmefs_engine_dev_stats st;
	json_object *o = json_object_new_object();
	char mean[32];
	uint64_t ops;
	double lat;

	nvmefs_engine_dev_stats(vol->eng, d, &st);
	ops = st.read_ops + st.write_ops;
	put_u64(o, "index", d);
	json_object_object_add(o, "path", json_object_new_string(vol->set->devs[d].path));
	put_u64(o, "read_ops", st.read_ops);
	put_u64(o, "read_bytes", st.read_bytes);
	put_u64(o, "write_ops", st.write_ops);
	put_u64(o, "write_bytes", st.write_bytes);
	put_u64(o, "errors", st.errors);
	put_u64(o, "latency_sum_ns", st.busy_ns); /* not busy time: overlaps add up */
	lat = ops ? (double)st.busy_ns / (double)ops / 1000 : 0.0;
	snprintf(mean, sizeof(mean), "%.1f", lat); /* printed as rounded, kept exact */
	json_object_object_add(o, "mean_latency_us", json_object_new_double_s(lat, mean));
	put_u64(o, "in_flight", st.in_flight);
	put_u64(o, "queued", st.queued);
	return o;
}

static json_object *pool_stats(struct nvmefs_vol *vol)
{
	struct nvmefs_bufpool_stats st;
	json_object *o = json_object_new_object();

	nvmefs_bufpool_stats(vol->pool, &st);
	put_u64(o, "buffer_bytes", st.buf_size);
	put_u64(o, "buffers", st.max_bufs);
	put_u64(o, "allocated", st.allocated);
	put_u64(o, "in_use", st.in_use);
	json_object_object_add(o, "pinned", json_object_new_boolean(st.pinned));
	return o;
}

static json_object *request_stats(struct nvmefs_vol *vol)
{
	json_object *o = json_object_new_object();

	for (unsigned op = 0; op < NVMEFS_CTL_OPS; op++) {
		uint64_t n = atomic_load_explicit(&vol->req_count[op], memory_order_relaxed);
		char other[24];

		if (!n)
			continue;
		snprintf(other, sizeof(other), "OPCODE_%u", op);
		put_u64(o, op && op_names[op] ? op_names[op] : op ? other : "OTHER", n);
	}
	return o;
}

static json_object *data_stats(struct nvmefs_vol *vol)
{
	json_object *o = json_object_new_object();
	unsigned now = atomic_load(&vol->io_inflight), peak = atomic_load(&vol->io_peak);

	put_u64(o, "reads", atomic_load(&vol->stats.reads));
	put_u64(o, "writes", atomic_load(&vol->stats.writes));
	put_u64(o, "zero_copy_writes", atomic_load(&vol->stats.zero_copy_writes));
	put_u64(o, "copied_bytes", atomic_load(&vol->stats.copied_bytes));
	put_u64(o, "edge_reads", atomic_load(&vol->stats.edge_reads));
	put_u64(o, "prefetch_reads", atomic_load(&vol->stats.prefetch_reads));
	put_u64(o, "prefetch_hits", atomic_load(&vol->stats.prefetch_hits));
	put_u64(o, "prefetch_wasted", atomic_load(&vol->stats.prefetch_wasted));
	put_u64(o, "open_pushes", atomic_load(&vol->stats.open_pushes));
	put_u64(o, "behind_writes", atomic_load(&vol->stats.behind_writes));
	put_u64(o, "behind_errors", atomic_load(&vol->stats.behind_errors));
	put_u64(o, "held_writes", atomic_load(&vol->stats.held_writes));
	put_u64(o, "held_sends", atomic_load(&vol->stats.held_sends));
	put_u64(o, "in_flight", now);
	put_u64(o, "peak_in_flight", peak);
	return o;
}

/* The native door's counters (fs/native/server.c, server_io.c). */
static json_object *native_stats(struct nvmefs_vol *vol)
{
	json_object *o = json_object_new_object();

	put_u64(o, "clients", atomic_load(&vol->native.clients));
	put_u64(o, "connects", atomic_load(&vol->native.connects));
	put_u64(o, "reads", atomic_load(&vol->native.reads));
	put_u64(o, "writes", atomic_load(&vol->native.writes));
	put_u64(o, "fsyncs", atomic_load(&vol->native.fsyncs));
	put_u64(o, "creates", atomic_load(&vol->native.creates));
	put_u64(o, "read_bytes", atomic_load(&vol->native.read_bytes));
	put_u64(o, "write_bytes", atomic_load(&vol->native.write_bytes));
	put_u64(o, "copied_requests", atomic_load(&vol->native.copied_requests));
	put_u64(o, "copied_bytes", atomic_load(&vol->native.copied_bytes));
	put_u64(o, "refused", atomic_load(&vol->native.refused));
	put_u64(o, "invalidations", atomic_load(&vol->native.invals));
	put_u64(o, "layouts", atomic_load(&vol->native.layouts));
	put_u64(o, "direct_completions", atomic_load(&vol->native.direct_completions));
	put_u64(o, "held_writes", atomic_load(&vol->native.held_writes));
	put_u64(o, "held_sends", atomic_load(&vol->native.held_sends));
	return o;
}

/* The store of sorted runs (fs/store/store.c): its flushes and
 * compactions since the mount, in 4 KiB blocks (their write
 * amplification), and its run-block cache. */
static json_object *store_stats(struct nvmefs_vol *vol)
{
	json_object *o = json_object_new_object();
	struct nvmefs_store_stats st;

	nvmefs_store_stats(vol->store, &st);
	put_u64(o, "runs", st.runs);
	put_u64(o, "flushes", st.flushes);
	put_u64(o, "flushed_blocks", st.flushed_blocks);
	put_u64(o, "compactions", st.compactions);
	put_u64(o, "compact_read_blocks", st.compact_read_blocks);
	put_u64(o, "compact_written_blocks", st.compact_written_blocks);
	put_u64(o, "memtable_bytes", st.mem_bytes + st.frozen_bytes);
	put_u64(o, "block_cache_bytes", st.cache_bytes);
	put_u64(o, "block_cache_hits", st.cache_hits);
	put_u64(o, "block_cache_misses", st.cache_misses);
	return o;
}

/* The metadata cache (fs/core/icache.c): what is in memory and what it
 * read from the store, taken under meta. */
static json_object *meta_stats(struct nvmefs_vol *vol)
{
	json_object *o = json_object_new_object();

	pthread_mutex_lock(&vol->lock);
	put_u64(o, "inodes", vol->ninodes);
	put_u64(o, "cached_inodes", vol->ncached);
	put_u64(o, "cached_entries", vol->ndirents);
	put_u64(o, "cache_bytes", nvmefs_icache_bytes(vol));
	put_u64(o, "lookups", vol->nlookups);
	put_u64(o, "lookups_bytes", vol->lookups_bytes);
	put_u64(o, "hits", vol->cache.hits);
	put_u64(o, "loads", vol->cache.loads);
	put_u64(o, "failed_loads", vol->cache.failed);
	put_u64(o, "evictions", vol->cache.evictions);
	json_object_object_add(o, "resident", json_object_new_boolean(vol->resident));
	pthread_mutex_unlock(&vol->lock);
	json_object_object_add(o, "store", store_stats(vol));
	return o;
}

static json_object *statahead_stats(void)
{
	json_object *o = json_object_new_object();
	struct nvmefs_sa_stats st;

	nvmefs_sa_stats(&st);
	json_object_object_add(o, "on", json_object_new_boolean(st.on));
	put_u64(o, "jobs", st.jobs);
	put_u64(o, "entries", st.entries);
	put_u64(o, "plain_readdirs", st.plain);
	put_u64(o, "failed", st.failed);
	put_u64(o, "pushed", st.pushed);
	put_u64(o, "pushed_bytes", st.pushed_bytes);
	put_u64(o, "push_failed", st.push_failed);
	put_u64(o, "push_passed", st.push_passed);
	return o;
}

/* Which transport brings the requests: /dev/fuse, or io_uring's queues
 * (with FORGET, INTERRUPT and notifications still on /dev/fuse). */
static json_object *transport_stats(const struct nvmefs_vol *vol)
{
	json_object *o = json_object_new_object();
	uint64_t backoffs, holds, polled;
	unsigned away;
	int held;

	json_object_object_add(
		o, "name", json_object_new_string(vol->uring_queues ? "io_uring" : "/dev/fuse"));
	put_u64(o, "queues", vol->uring_queues);
	put_u64(o, "queue_depth", vol->uring_depth);
	put_u64(o, "uring_requests", nvmefs_uring_served(vol->uring));
	put_u64(o, "spread_queues", nvmefs_uring_spread(vol->uring));
	away = nvmefs_uring_away(vol->uring, &polled);
	put_u64(o, "away_queues", away);
	put_u64(o, "polled_waits", polled);
	put_u64(o, "idle_waits", nvmefs_uring_idle_waits(vol->uring, &backoffs));
	put_u64(o, "idle_backoffs", backoffs);
	/* -o cpu_latency: held now (null: nothing asked), busy spells so far */
	held = nvmefs_cpulat_state(&holds);
	json_object_object_add(o, "cpu_latency_held",
			       held < 0 ? NULL : json_object_new_boolean(held));
	put_u64(o, "cpu_latency_holds", holds);
	return o;
}

static char *render_stats(struct nvmefs_vol *vol)
{
	json_object *o = json_object_new_object(), *devs = json_object_new_array();
	char uuid[NVMEFS_UUID_STR], *text;

	nvmefs_uuid_str(vol->label.uuid, uuid);
	put_u64(o, "version", 1);
	json_object_object_add(o, "mountpoint", json_object_new_string(vol->opts.mountpoint ?: ""));
	json_object_object_add(o, "uuid", json_object_new_string(uuid));
	json_object_object_add(o, "label", json_object_new_string(vol->label.name));
	put_u64(o, "uptime_ns", nvmefs_now_ns() - vol->mounted_ns);
	/* FS_IOC_SHUTDOWN: the volume answers EIO until the unmount. */
	json_object_object_add(o, "shut_down",
			       json_object_new_boolean(atomic_load(&vol->shut_down)));
	for (unsigned d = 0; d < vol->ndevs; d++)
		json_object_array_add(devs, device_stats(vol, d));
	json_object_object_add(o, "devices", devs);
	json_object_object_add(o, "pool", pool_stats(vol));
	json_object_object_add(o, "requests", request_stats(vol));
	json_object_object_add(o, "data", data_stats(vol));
	json_object_object_add(o, "native", native_stats(vol));
	json_object_object_add(o, "metadata", meta_stats(vol));
	json_object_object_add(o, "statahead", statahead_stats());
	json_object_object_add(o, "transport", transport_stats(vol));
	text = strdup(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PRETTY |
								JSON_C_TO_STRING_NOSLASHESCAPE));
	json_object_put(o);
	return text;
}

/* ---- config ---- */

static char *render_config(struct nvmefs_vol *vol)
{
	const struct nvmefs_vol_opts *o = &vol->opts;
	struct nvmefs_bufpool_stats ps;
	char uuid[NVMEFS_UUID_STR], *t = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&t, &len);

	if (!f)
		return NULL;
	nvmefs_uuid_str(vol->label.uuid, uuid);
	nvmefs_bufpool_stats(vol->pool, &ps);
	fprintf(f, "version = %s\nsource = %s\nmountpoint = %s\n", NVMEFS_VERSION, o->source ?: "",
		o->mountpoint ?: "");
	fprintf(f, "uuid = %s\nlabel = %s\nmembers = %u\n", uuid, vol->label.name, vol->ndevs);
	for (unsigned d = 0; d < vol->ndevs; d++)
		fprintf(f, "member.%u = %s\n", d, vol->set->devs[d].path);
	fprintf(f, "chunk = %u\ncapacity = %llu\n", vol->label.chunk_size,
		(unsigned long long)vol->total_bytes);
	fprintf(f, "mode = %s\nwriteback = %d\n", o->direct ? "direct" : "cached", vol->writeback);
	fprintf(f, "direct_io_mmap = %d\n", vol->direct_mmap);
	if (vol->writeback)
		fprintf(f, "dirty = %llu\n", (unsigned long long)o->dirty_bytes);
	if (!o->direct)
		fprintf(f, "write_only_direct = %d\nreadahead = %llu\n", vol->wronly_direct,
			(unsigned long long)o->readahead);
	else
		fprintf(f, "prefetch = %u\ncache_small = %llu\n", o->prefetch,
			(unsigned long long)o->cache_small);
	fprintf(f, "write_behind = %llu\n", (unsigned long long)o->write_behind);
	fprintf(f, "queue_depth = %u\nthreads = %u\nspin_us = %u\n",
		nvmefs_engine_queue_depth(vol->eng), o->threads, o->spin_us);
	if (o->cpu_latency_us < 0)
		fprintf(f, "cpu_latency = off\n");
	else
		fprintf(f, "cpu_latency = %d\n", o->cpu_latency_us);
	fprintf(f, "pool = %llu\nmax_background = %u\n",
		(unsigned long long)(ps.max_bufs * ps.buf_size), o->max_background);
	fprintf(f, "commit = %u\nread_only = %d\nshut_down = %d\n", vol->j.interval_ms / 1000,
		o->read_only || atomic_load(&vol->ro_remounted), atomic_load(&vol->shut_down));
	fprintf(f, "meta_cache = %llu\n",
		(unsigned long long)(o->meta_cache == 1 ? 0
				     : o->meta_cache	? o->meta_cache
							: NVMEFS_META_CACHE_DEFAULT));
	fprintf(f, "statahead = %u\n", o->statahead);
	if (vol->uring_queues)
		fprintf(f,
			"transport = io_uring\nuring_queues = %u\nuring_depth = %u\n"
			"uring_idle_wait = %d\n",
			vol->uring_queues, vol->uring_depth, nvmefs_uring_idle_wait(vol->uring));
	else
		fprintf(f, "transport = /dev/fuse\n");
	/* libnvmefs connects here and checks the peer is this pid. */
	fprintf(f, "pid = %d\nnative_socket = %s\n", (int)getpid(), vol->native_socket);
	if (fclose(f)) {
		free(t);
		return NULL;
	}
	return t;
}

int nvmefs_ctl_render(struct nvmefs_vol *vol, uint64_t ino, char **text)
{
	if (ino == NVMEFS_CTL_STATS)
		*text = render_stats(vol);
	else if (ino == NVMEFS_CTL_CONFIG)
		*text = render_config(vol);
	else
		return -EISDIR;
	return *text ? 0 : -ENOMEM;
}

int nvmefs_ctl_ioctl(struct nvmefs_vol *vol, uint64_t ino, unsigned cmd, uid_t uid, const void *in,
		     size_t in_len)
{
	struct nvmefs_remount_arg a;

	if (cmd == NVMEFS_IOC_SHUTDOWN) {
		/* The flags are not in (in_len is 0, see NVMEFS_IOC_SHUTDOWN);
		 * 4 bytes could be answered, which the kernel would copy over
		 * them: none are. Shut down even when the last commit failed,
		 * which nvmefs_vol_shutdown says in the log, as a kernel
		 * filesystem does. */
		if (uid != 0)
			return -EPERM;
		nvmefs_vol_shutdown(vol);
		return 0;
	}
	if (ino != NVMEFS_CTL_DIR || cmd != NVMEFS_IOC_REMOUNT)
		return -ENOTTY;
	if (in_len < sizeof(a))
		return -EINVAL;
	memcpy(&a, in, sizeof(a));
	if ((a.flags & ~NVMEFS_REMOUNT_RO) || a.atime > NVMEFS_ATIME_STRICTATIME + 1)
		return -EINVAL;
	if (uid != 0)
		return -EPERM;
	return nvmefs_vol_remount(vol, a.flags & NVMEFS_REMOUNT_RO, (int)a.atime - 1);
}
