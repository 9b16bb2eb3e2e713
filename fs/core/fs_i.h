/* SPDX-License-Identifier: MIT */
/*
 * The core's shared types (fs/core/): the mounted volume, its in-memory metadata
 * (inodes, directories, extent maps, xattrs), the space allocator, the
 * journal, and the data path. See docs/FORMAT.md for the model: the metadata
 * a mount works on is in memory (read from the store on demand, icache.c)
 * and reaches the devices as journal records (group-committed) and, written
 * through into the store's memtable (kv.c), as sorted runs that commits
 * flush (format v2).
 *
 * Locking: vol->lock (the metadata lock) protects every field marked
 * "meta"; it is never held across device I/O or a FUSE reply. An inode's
 * io_lock is a byte-range lock: reads share their blocks, a write holds its
 * blocks exclusively from before its edge blocks are read until its extents
 * are logged (released by the I/O completion), and truncate, fallocate and
 * punch hold the whole file. The journal's commit_lock serializes commits
 * and flushes. Order: io_lock, then commit_lock, then vol->lock.
 */
#ifndef NVMEFS_FS_I_H
#define NVMEFS_FS_I_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <time.h>

#include "format.h"
#include "rangelock_i.h"
#include "nvmefs/bufpool.h"
#include "nvmefs/devset.h"
#include "nvmefs/engine.h"
#include "nvmefs/layout.h"

/* Bytes one extent adds to meta_bytes, the estimate of the live metadata
 * (its EXTENT record). */
#define NVMEFS_EXT_COST 48u

/* One mapped run of a slot's component on its device. */
struct nvmefs_ext {
	uint64_t comp_off, dev_off, len;
	uint32_t flags; /* NVMEFS_EXT_UNWRITTEN */
};

/* A slot's extents, sorted by comp_off, non-overlapping. */
struct nvmefs_extmap {
	struct nvmefs_ext *v;
	size_t n, cap;
};

struct nvmefs_xattr {
	char *name;
	void *value;
	uint32_t name_len, value_len;
};

struct nvmefs_dirent {
	struct nvmefs_dirent *hnext; /* volume-wide (parent, name) hash chain */
	uint64_t parent, child;
	uint64_t cookie; /* readdir offset, increasing within a directory */
	uint8_t type;	 /* DT_* */
	uint16_t name_len;
	char name[]; /* NUL-terminated */
};

/* A directory's entries in cookie order; removed ones leave NULL holes.
 * live and next_cookie are always right (the INODE value's summary when the
 * entries are not in memory); v holds the entries only once loaded (meta
 * held: icache.c loads them when an operation asks for them). */
struct nvmefs_dir {
	struct nvmefs_dirent **v;
	size_t n, cap, live;
	uint64_t next_cookie;
	bool loaded;
};

struct nvmefs_prefetch;
struct nvmefs_shadow;
struct nvmefs_store;

struct nvmefs_inode {
	struct nvmefs_inode *hnext; /* meta: inode hash chain */
	uint64_t ino;
	/* meta: attributes, as in the INODE record; flags (NVMEFS_IFL_*, chattr's)
	 * are also read without meta by a WRITE (stored atomically) */
	uint32_t mode, uid, gid, nlink, flags;
	uint64_t size, rdev;
	struct timespec atime, mtime, ctime, crtime;
	struct nvmefs_layout layout; /* regular files */
	char *target;		     /* symlinks */
	struct nvmefs_extmap *slots; /* regular files: layout.stripe_count maps */
	uint64_t alloc_bytes;	     /* bytes mapped, for st_blocks */
	/* regular files: whether the slots hold the extents (else they are
	 * in the store only, nextents of them; icache.c loads them) */
	bool ext_loaded;
	uint64_t nextents; /* the INODE value's count, while not loaded */
	/* meta: read from the store by an operation that dropped meta for it
	 * (icache.c); others wait on vol->load_cond */
	bool loading;
	bool referenced;	/* meta: got since the eviction hand last passed (CLOCK) */
	struct nvmefs_dir *dir; /* directories */
	uint64_t parent;	/* directories: the parent (root: itself) */
	struct nvmefs_xattr *xattrs;
	unsigned nxattrs;
	/* meta: runtime state, never on disk (the kernel's lookup count is
	 * in vol->lookups) */
	uint32_t opens; /* open file handles */
	/* meta: statahead is storing the file's data in the kernel's page
	 * cache (nvmefs_ns_push_begin); every open and truncation waits
	 * on vol->push_cond until it is done */
	bool pushing;
	/* The data went into the kernel's cache and no open has yet noted
	 * the read it stands for (atime; nvmefs_ns_push_end) */
	atomic_bool pushed;
	/* The kernel may hold pages of the file: set by a push and by an
	 * open through its page cache, cleared when the kernel forgets the
	 * inode (its pages go with it), set again from the lookup count when
	 * the inode is read back after an eviction. An open finding it clear
	 * pushes the data (fs/fuse/ops_file.c, open_push). Only a hint: pages
	 * the kernel dropped on its own are read again by a READ. */
	atomic_bool kernel_pages;
	/* meta: the kernel's forgets of the inode (its count reaching 0),
	 * and their number when the running push began: a push that ends
	 * after one stored into an inode the kernel no longer has */
	uint32_t forgotten, push_forgotten;
	bool orphan; /* nlink 0 while open: ORPHAN_ADD logged */
	bool dead;   /* storage freed, INODE_FREE logged */
	/* On the journal's list of inodes whose attributes go out at the next
	 * commit: NULL when not. Doubly linked (as the kernel's hlist) so that
	 * freeing an inode takes it off in O(1), not a walk of the list. */
	struct nvmefs_inode *dirty_next, **dirty_pprev;
	struct nvmefs_rangelock io_lock; /* orders data I/O (fs/core/rangelock.c) */
	/* The layout and the extent maps (slots): changed holding meta and
	 * this lock written; read holding either (a READ takes only this). */
	pthread_rwlock_t map_lock;
	/* Bumped by every attribute change (nvmefs_inode_dirty): a reader
	 * that saw the same value need not look at atime again. */
	atomic_uint_fast64_t attr_gen;
	/* May hold what a write takes away (setuid; setgid;
	 * security.capability): kept by nvmefs_inode_note_privs at
	 * every change of the mode or the xattrs, read by every WRITE. */
	atomic_bool privs;
	/* An overwrite's mtime/ctime (ns; 0: none) not yet folded into
	 * mtime and ctime, and whether the inode is queued for it
	 * (fs/core/data_io.c note_overwrite, nvmefs_inode_fold_wtime). */
	atomic_uint_fast64_t wtime_ns;
	atomic_bool wtime_queued;
	struct nvmefs_prefetch *pfs; /* io_lock.mu: open handles' read-ahead (fs/core/prefetch.c) */
	/* meta: an overwrite's time was folded into mtime/ctime since the
	 * shadow last took this inode (meta_keys.c; nvmefs_meta_crosscheck,
	 * meta_check.c). */
	bool shadow_stale;
	/* meta: operations holding it, from nvmefs_inode_get to its put
	 * (fs/core/icache.c); while any does, it stays in memory. */
	uint32_t refs;
	/* Reads and writes in flight on it (fs/core/data_io.c, dio_new to
	 * dio_finish): counted without meta, as an overwrite takes none. */
	atomic_uint ios;
	/* Writes answered before the devices completed them
	 * (NVMEFS_WRITE_BEHIND) in flight (vol->behind_lock), and the first
	 * failure (-errno) of one, for the file's next fsync. */
	unsigned behind_n;
	atomic_int behind_err;
};

/* Free space of one member: sorted, coalesced byte ranges. */
struct nvmefs_range {
	uint64_t off, len;
};
struct nvmefs_freemap {
	struct nvmefs_range *v;
	size_t n, cap;
};

struct nvmefs_pfree {
	uint32_t dev;
	uint64_t off, len;
};

struct nvmefs_journal {
	pthread_mutex_t commit_lock; /* one commit or flush at a time */
	/* meta: the open transaction */
	uint8_t *buf;
	size_t len, cap;
	struct nvmefs_pfree *pf; /* space its records release */
	size_t npf, pfcap;
	uint64_t open_gen; /* generation the open transaction commits as */
	/* commit_lock: positions on disk */
	uint64_t head, tail, next_seq;
	uint64_t super_seq;
	uint64_t manifest_seq; /* the run area's manifest of the last flush */
	uint64_t since_flush;  /* journal bytes written since the last flush */
	bool compact_due;      /* state_lock: a flush added a run; the compactor compacts */
	/* state_lock: what is durable */
	pthread_mutex_t state_lock;
	pthread_cond_t state_cond;
	uint64_t durable_gen;
	atomic_int error; /* sticky: a metadata write failed, volume is read-only;
			   * set under state_lock, read without it */
	/* the committer and compactor threads */
	pthread_t thread, cthread;
	pthread_cond_t compact_cond; /* state_lock: compact_due or stop */
	bool running, stop, kick;    /* state_lock */
	atomic_bool stop_compact;    /* the compactor stops: unmount */
	unsigned interval_ms;
	/* what nvmefs_journal_load found */
	bool loaded_clean;	  /* the superblock said clean unmount */
	uint64_t replayed;	  /* journal transactions replayed */
	uint64_t loaded_manifest; /* the run area's manifest loaded (its sequence) */
	uint64_t damaged;	  /* replay stopped at a damaged transaction:
				   * the latest valid one after it (else 0) */
};

#define NVMEFS_CTL_OPS 64 /* FUSE opcodes counted one by one */

struct nvmefs_vol_opts {
	unsigned queue_depth;	 /* engine, per device (0: 32) */
	size_t pool_bytes;	 /* pinned buffer pool (0: 64 MiB) */
	unsigned commit_ms;	 /* group commit interval (0: 5000) */
	unsigned max_background; /* FUSE background requests (0: 64) */
	uint64_t dirty_bytes;	 /* dirty page cache the kernel may hold (cached) */
	unsigned busy_wait_ms;	 /* wait this long for a member being let go (devset.h) */
	bool read_only;
	bool direct;	/* direct mode: no page cache for file data */
	bool writeback; /* cached mode: the kernel's write-back cache */
	unsigned atime; /* NVMEFS_ATIME_*: which reads update atime */
	/* fsck: load what is on disk and stop there; overlapping extents,
	 * dangling entries and orphans are left for the checker to find. */
	bool check;
	/* Load the whole metadata at mount and keep it in memory (implied by
	 * check): the tests that compare a volume's state across a remount. */
	bool resident;
	/* What else is in force, shown in .nvmefs/config (fs/fuse/ctl.c); the
	 * strings are the caller's and outlive the volume. */
	const char *source, *mountpoint;
	unsigned threads;
	uint64_t readahead;
	unsigned prefetch; /* direct mode: requests read ahead per file (0: off) */
	/* Direct mode: a read-only open of a regular file of at most this many
	 * bytes goes through the page cache (fs/fuse/ops_file.c; 0: none). */
	uint64_t cache_small;
	/* Metadata kept in memory that no operation, handle or commit holds
	 * (-o meta_cache; 0: NVMEFS_META_CACHE_DEFAULT; 1: none, every
	 * unused inode goes at once). A mount that loads the whole metadata
	 * (resident) keeps it all whatever this says. */
	uint64_t meta_cache;
	unsigned spin_us;     /* the request loop polls /dev/fuse this long at most */
	unsigned statahead;   /* entries read ahead of a directory walk (0: off) */
	unsigned uring;	      /* NVMEFS_URING_*: FUSE over io_uring (fs/fuse/uring.c) */
	unsigned uring_depth; /* its entries per queue (0: the default) */
	/* A queue's leader with nothing in flight waits as SCHED_IDLE
	 * (fs/fuse/uring.c, "Where the caller wakes"; -o uring_idle_wait). */
	unsigned uring_idle_wait;
	/* The CPU wake-up latency asked of the kernel while requests come
	 * (fs/fuse/cpulat.c, -o cpu_latency); < 0: nothing is asked. */
	int cpu_latency_us;
	/* A WRITE of at most this many bytes is answered once it is planned,
	 * as it is sent, before the devices complete it (NVMEFS_WRITE_BEHIND,
	 * fs/core/data_io.c; -o write_behind; 0: never). */
	uint64_t write_behind;
};

/*
 * -o relatime (the default, as for Linux's own filesystems), noatime,
 * strictatime. The kernel never updates a FUSE file's atime (its inodes are
 * S_NOATIME), so its mount flags do not act: the daemon keeps the policy.
 */
enum {
	NVMEFS_ATIME_RELATIME,	  /* when atime <= mtime or ctime, or a day old */
	NVMEFS_ATIME_NOATIME,	  /* never on a read */
	NVMEFS_ATIME_STRICTATIME, /* on every read */
};

/* The transport of -o uring, uring=auto, uring=off. */
enum {
	NVMEFS_URING_OFF,      /* /dev/fuse only */
	NVMEFS_URING_AUTO,     /* io_uring where the kernel offers it, silently */
	NVMEFS_URING_AUTO_SAY, /* the same, and a line when it does not */
	NVMEFS_URING_ON,       /* io_uring, or no mount */
};
/*
 * Without an option: the faster transport for the README's workloads in
 * that mode, as the machine's idle CPUs wait (docs/PERFORMANCE.md, "Idle
 * CPUs kept awake" and "The default transport"). awake: the daemon will
 * keep idle CPUs polling while it serves (-o cpu_latency=0, the default,
 * and the right to ask: nvmefs_cpulat_awake; a latency above 0 lets them
 * sleep lightly).
 * - awake: /dev/fuse in both modes. Its polling leader then answers a
 *   lone program on the other CPU with no wake-up to wait for: in two runs
 *   of the benchmark driver it made, stat'ed and removed small files
 *   1.2-2.1 x as fast as io_uring, looked names up 1.9-2.0 x, ran
 *   torch.save and torch.load 1.1-1.4 x; io_uring stayed ahead for dd's
 *   reads (1.3-2.2 x) and 4 KiB random reads at QD32 (1.5-2.1 x), where
 *   -o uring serves better.
 * - not: io_uring in direct mode, silently where the kernel offers it (it
 *   won small files, lookups, dd and 4 KiB random reads in four runs by
 *   1.04-2.3 x and lost 1 MiB streams by up to a quarter); /dev/fuse in
 *   cached mode (io_uring lost the reads: small files in every run, dd in
 *   three of four).
 */
static inline unsigned nvmefs_uring_default(bool direct, bool awake)
{
	return direct && !awake ? NVMEFS_URING_AUTO : NVMEFS_URING_OFF;
}

/* One of the lookup-count tables (fs/core/lookups.c): cap slots (a power
 * of 2, or 0), n of them in use. */
#define NVMEFS_LOOKUP_SHARDS 64
struct nvmefs_lookup_shard {
	struct nvmefs_lookup *t;
	size_t cap, n;
};

struct nvmefs_vol {
	struct nvmefs_devset *set;
	struct nvmefs_engine *eng; /* NULL until nvmefs_vol_start */
	struct nvmefs_bufpool *pool;
	struct nvmefs_vol_opts opts;
	struct nvmefs_label label; /* member 0's; uuid, sizes, chunk, metadata area */
	unsigned ndevs;		   /* members, in label order: set->devs[i] is member i */
	uint64_t data_start[NVMEFS_MAX_DEVICES], data_end[NVMEFS_MAX_DEVICES];
	uint64_t total_bytes; /* sum of data areas */
	size_t buf_size;      /* bytes per pool buffer */

	pthread_mutex_t lock; /* the metadata lock ("meta") */
	/* meta: the inodes in memory (ncached of them), and the inodes in use
	 * (ninodes, in memory or not). With the whole metadata resident
	 * (resident: fsck, the tests' memory volumes) the two are the same
	 * but for freed inodes still held; otherwise inodes, a directory's
	 * entries and a file's extents come from the store when an
	 * operation first asks for them (icache.c). */
	struct nvmefs_inode **itab;
	size_t itab_size, ncached, ninodes;
	bool resident;
	pthread_cond_t load_cond; /* with meta: a load finished (icache.c) */
	pthread_cond_t push_cond; /* with meta: a push ended (nvmefs_ns_push_end) */
	/* meta: inodes being read from the store, not yet in itab: a get of
	 * one waits for it on load_cond (icache.c) */
	struct nvmefs_iload *iloads;
	/* meta: the eviction hand (an itab bucket) and what the cache did */
	size_t evict_hand;
	struct {
		uint64_t hits, loads, failed, evictions;
	} cache;
	/* meta: inodes whose attributes go out at the next commit
	 * (nvmefs_inode_dirty); the journal takes them there. */
	struct nvmefs_inode *dirty;
	size_t ndirty;
	struct nvmefs_dirent **dtab;
	size_t dtab_size, ndirents;
	/* Keys dtab's hash of names (meta.c): random per volume open, never on
	 * disk. A fuzzer or test wanting the same buckets every run sets it
	 * after nvmefs_meta_init, before the first entry. */
	uint64_t name_seed;
	uint64_t next_ino;
	unsigned rotor; /* first device of the next new file */
	/* meta: the allocator's free space: what it may hand out now. */
	struct nvmefs_freemap free[NVMEFS_MAX_DEVICES];
	uint64_t free_bytes;
	/* meta: the durable free map: per member, the space free by the
	 * records applied, which the store's FREE keys hold (alloc.c). Unlike
	 * free[], it still counts space reserved in memory and not yet logged,
	 * and already counts space released by a transaction not yet durable. */
	struct nvmefs_freemap dfree[NVMEFS_MAX_DEVICES];
	/* The store holds FREE keys (the superblock's NVMEFS_SUPER_FREE_KEYS):
	 * set by mkfs, by a mount that found it, and by fsck -y once it wrote
	 * them; every superblock written carries it. */
	bool free_keys;
	uint64_t pending_bytes; /* released, free once their commit is durable */
	uint64_t meta_bytes;	/* the state's size as journal records (an estimate) */
	uint64_t meta_cap;	/* meta_bytes allowed: 9/32 of the run area */
	size_t norphans;
	bool replaying;	    /* records come from disk: apply without logging */
	bool writeback;	    /* the kernel caches writes (FUSE writeback cache) */
	bool wronly_direct; /* cached mode: write-only opens skip the page cache */
	bool direct_mmap;   /* direct_io handles may be mapped shared (FUSE 7.39) */
	/* The kernel checks POSIX ACLs (FUSE_POSIX_ACL with FUSE_DONT_MASK,
	 * op_init): the system.posix_acl_* xattrs are taken (fs/core/acl.c);
	 * without it they are refused as every other system.* one. */
	bool posix_acl;
	/* Users other than the mounting one may reach the mount (allow_other):
	 * the native door's CREATE serves them only then. */
	bool allow_other;
	/* FUSE over io_uring (fs/fuse/uring.c): its queues while they serve
	 * (NULL: /dev/fuse alone), how many, and the entries of each. */
	struct nvmefs_uring *uring;
	unsigned uring_queues, uring_depth;
	/* Asynchronous reads and writes in flight (nvmefs_data_drain). */
	pthread_mutex_t dio_lock;
	pthread_cond_t dio_cond;
	atomic_uint dio_inflight; /* counted without a lock ... */
	atomic_bool draining;	  /* ... dio_lock and dio_cond only wake a drain */
	atomic_uint io_inflight;  /* of those, at the devices */
	/* Writes answered before the devices completed them
	 * (NVMEFS_WRITE_BEHIND): how many are in flight, and a commit's gate,
	 * which sends new ones the usual way while the commit waits for those
	 * to end (nvmefs_behind_hold). */
	pthread_mutex_t behind_lock;
	pthread_cond_t behind_cond;
	unsigned behind_n;
	unsigned behind_waiters; /* commits waiting */
	/* meta: unlinked inodes, no longer open, whose space waits for their
	 * early-answered writes in flight: freed by the next commit, which
	 * waits for those writes first (journal.c). Each holds
	 * a reference. */
	struct nvmefs_inode **deferred;
	size_t ndeferred, deferred_cap;
	bool behind_gate;
	atomic_uint io_peak; /* the most at the devices at once */
	/* Data path counters (relaxed atomics): copies the daemon made. */
	struct {
		atomic_uint_fast64_t reads, writes;
		atomic_uint_fast64_t zero_copy_writes; /* aligned, sent from the receive buffer */
		atomic_uint_fast64_t copied_bytes;     /* payload and edge bytes memcpy'd */
		atomic_uint_fast64_t edge_reads;       /* unaligned writes' edge blocks read */
		atomic_uint_fast64_t prefetch_reads;   /* windows read ahead */
		atomic_uint_fast64_t prefetch_hits;    /* READs answered from one */
		atomic_uint_fast64_t prefetch_wasted;  /* windows dropped unused */
		atomic_uint_fast64_t open_pushes;      /* opens that stored the data (ops_file.c) */
		atomic_uint_fast64_t behind_writes;    /* answered early (NVMEFS_WRITE_BEHIND) */
		atomic_uint_fast64_t behind_errors;    /* of those, failed at the devices */
		/* of those, held back by a /dev/fuse worker and sent together
		 * (fs/fuse/loop.c, "Writes held back"), and the sends */
		atomic_uint_fast64_t held_writes, held_sends;
	} stats;
	/* The native door's counters (fs/native/server.c; relaxed atomics). */
	struct {
		atomic_uint clients; /* connected now */
		atomic_uint_fast64_t connects, reads, writes, fsyncs;
		atomic_uint_fast64_t creates;		      /* files made by CREATE */
		atomic_uint_fast64_t read_bytes, write_bytes; /* moved by requests that succeeded */
		atomic_uint_fast64_t copied_requests;	      /* unaligned: through pool buffers */
		atomic_uint_fast64_t copied_bytes;	      /* their bytes */
		atomic_uint_fast64_t refused; /* requests and registrations refused */
		atomic_uint_fast64_t invals;  /* page cache invalidations asked */
		atomic_uint_fast64_t layouts; /* loans of a file's extents (LAYOUT) */
		/* completions sent by the engine's thread that finished the
		 * request, not through the client's thread */
		atomic_uint_fast64_t direct_completions;
		/* writes answered early held back by a client's thread and
		 * sent to the devices together (nvmefs_engine_plug), and
		 * the sends */
		atomic_uint_fast64_t held_writes, held_sends;
	} native;
	/* The native door's socket, "@" and its abstract name; "" when off. */
	char native_socket[64];
	atomic_uint pf_bufs;  /* pool buffers held by read-ahead windows */
	unsigned pf_max_bufs; /* at most this many: a quarter of the pool */
	/* FUSE requests received, by opcode (fs/fuse/ctl.c; relaxed atomics). */
	atomic_uint_fast64_t req_count[NVMEFS_CTL_OPS];
	uint64_t mounted_ns; /* nvmefs_now_ns() at mount */
	/* The root holds a real ".nvmefs" (made before the control directory
	 * existed): it stays visible and the control directory is not served. */
	bool ctl_shadowed;
	/* mount -o remount,ro (nvmefs_vol_remount): no change is taken and
	 * nothing written to the members until read-write again. */
	atomic_bool ro_remounted;
	/* FS_IOC_SHUTDOWN (nvmefs_vol_shutdown): nothing reaches the members
	 * any more and the doors answer EIO, until the unmount. */
	atomic_bool shut_down;
	pthread_mutex_t remount_lock; /* one remount or shutdown at a time */
	struct timespec mounted_at;   /* the control files' times */
	struct nvmefs_journal j;
	/* The metadata's durable state (format v2): the key/value store over
	 * the run area (fs/store/store.h). Every record applied is written
	 * through into it (kv.c) except while the mount loads the maps from
	 * it (loading) or fills an inode read from it (filling). */
	struct nvmefs_store *store;
	bool loading;
	/* meta: one inode, or its entries, extents or xattrs, read on demand
	 * is being put into memory (icache.c): nothing is written through and
	 * the counts (ninodes, meta_bytes) are left alone, as the store has
	 * them already. */
	bool filling;
	int kv_err;	 /* meta: a write-through failed (kv_i.h) */
	uint8_t *kv_val; /* meta: NVMEFS_VAL_MAX bytes, a value being encoded */
	/* The test daemon nvmefs-fi only (fs/tools/testctl.c): a setxattr of
	 * NVMEFS_TEST_CTL_XATTR on the root is a command to it. NULL in nvmefs. */
	int (*test_ctl)(struct nvmefs_vol *vol, const char *cmd, size_t len);
	/* The test daemon only: true once its emulated power is cut; data
	 * replies are then held back, as a dead machine sends none. */
	bool (*test_mute)(void);
	/* The test daemon only: this many OPEN/CREATE replies are lost (the
	 * opener gets EINTR; the daemon acts as if the kernel refused them). */
	atomic_uint test_lose_opens;
	/* The test daemon only: this many READDIRPLUS replies are lost. */
	atomic_uint test_lose_readdirs;
	/* meta: the shadow, a second copy of the metadata's keys, written
	 * through by apply beside the store and checked against the maps
	 * (fs/store/store.h, nvmefs_meta_crosscheck; docs/FORMAT.md,
	 * "Crosschecks"); NULL when off, as in production. */
	struct nvmefs_shadow *shadow;
	/* meta: the kernel's lookup counts, ino -> count (fs/core/lookups.c),
	 * apart from the inodes: an inode the kernel names need not stay in
	 * memory for it. NVMEFS_LOOKUP_SHARDS tables of open addressing, each
	 * growing on its own; lookups_cap slots in all, nlookups in use,
	 * lookups_bytes what they take; lookups_max_move the most entries one
	 * growth or shrink moved (what it stalls the metadata for). */
	struct nvmefs_lookup_shard lookups[NVMEFS_LOOKUP_SHARDS];
	size_t lookups_cap, nlookups, lookups_bytes, lookups_max_move;
};

#define NVMEFS_TEST_CTL_XATTR "trusted.nvmefs.fault"

/* Member 0's path, where the metadata lives: for messages about it. */
static inline const char *nvmefs_meta_where(const struct nvmefs_vol *vol)
{
	return vol->set && vol->set->count ? vol->set->devs[0].path : "(volume)";
}

/*
 * Pool buffers (vol->pool, vol->buf_size bytes each) carry data from
 * NVMEFS_DATA_OFF on: the FUSE loop receives a request so that a WRITE's
 * payload starts there (fs/fuse/loop.c), and reads and writes use the same area
 * for the block-aligned range they move.
 */
#define NVMEFS_DATA_OFF 4096u

/* Bytes per pool buffer: the largest FUSE request (1 MiB, fs/fuse/loop.c) and
 * a block either side of it (its header page, an unaligned range's edge). */
#define NVMEFS_POOL_BUF		    ((1u << 20) + 2 * NVMEFS_BLOCK)
#define NVMEFS_POOL_DEFAULT	    (64u << 20) /* -o pool= */
#define NVMEFS_CACHE_SMALL_DEFAULT  (1u << 20)	/* -o cache_small= */
#define NVMEFS_WRITE_BEHIND_DEFAULT (64u << 10) /* -o write_behind= */

#define NVMEFS_META_CACHE_DEFAULT (128ull << 20) /* -o meta_cache= */

/* The metadata cache's limit in bytes: -o meta_cache, or its default. */
static inline uint64_t nvmefs_meta_cache_limit(const struct nvmefs_vol *vol)
{
	return vol->opts.meta_cache ? vol->opts.meta_cache : NVMEFS_META_CACHE_DEFAULT;
}

#define NVMEFS_LAYOUT_XATTR "user.nvmefs.layout"

/* How long the tools and the daemon wait for such a daemon to let go. */
#define NVMEFS_BUSY_WAIT_MS 30000

/* Largest file, 64 PiB: far below 2^64 so offset arithmetic cannot
 * overflow, and below 10^18 so that absurd sizes get EFBIG as on ext4. */
#define NVMEFS_MAX_FILE_SIZE (1ull << 56)

/* Largest inode number: numbers are never reused within a mount, and 2^62
 * keeps next_ino far from wrapping. */
#define NVMEFS_INO_MAX ((1ull << 62) - 1)

#endif
