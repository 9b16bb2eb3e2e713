/* SPDX-License-Identifier: MIT */
/*
 * door_i.h: what the FUSE door's files (fs/fuse/) share: the request loop,
 * the control files and the low-level operations. The core (fs/core/)
 * never includes this header nor any of libfuse's.
 */
#ifndef NVMEFS_DOOR_I_H
#define NVMEFS_DOOR_I_H

#include <linux/fuse.h>
#include <linux/ioctl.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <time.h>

#include "fs_i.h"

/* ---- ctl.c: the hidden control directory MOUNTPOINT/.nvmefs ---- */
/*
 * A remount (fs/tools/remount.c), told to the daemon: an ioctl on the
 * control directory, root only. flags: NVMEFS_REMOUNT_RO or 0 (read-write);
 * atime: NVMEFS_ATIME_* + 1, or 0 to keep the policy.
 */
struct nvmefs_remount_arg {
	uint32_t flags;
	uint32_t atime;
};
#define NVMEFS_REMOUNT_RO  1u
#define NVMEFS_IOC_REMOUNT _IOW('N', 0x52, struct nvmefs_remount_arg)
/*
 * FS_IOC_SHUTDOWN, XFS_IOC_GOINGDOWN before it (xfstests' godown, xfs_io's
 * shutdown): on any file or directory of the mount, root only. Debian 12's
 * <linux/fs.h> has no FS_IOC_SHUTDOWN yet. The kernel gives a FUSE server
 * an ioctl's argument only as its _IOC encoding says: for this _IOR one,
 * no input, so the caller's flags (0 flush then shut down, 1 flush the
 * log, 2 flush nothing) never arrive; nvmefs_vol_shutdown does the same
 * for all three.
 */
#define NVMEFS_IOC_SHUTDOWN _IOR('X', 125, uint32_t)

/* Count one FUSE request (the receive loop). */
void nvmefs_ctl_count(struct nvmefs_vol *vol, uint32_t opcode);
/* True for the control directory and its files. */
bool nvmefs_ctl_ino(uint64_t ino);
/* Attributes of a control inode: 0 or -ENOENT. */
int nvmefs_ctl_stat(const struct nvmefs_vol *vol, uint64_t ino, struct stat *st);
/*
 * The attribute and entry cache time of every reply (fs/fuse/ops.c,
 * ops_file.c): how long the kernel may trust a name or attributes we gave
 * it. Every change reaches the volume through this daemon: the kernel
 * updates or drops what it cached for the changes it sends, and the native
 * door has it drop what its clients' writes change (nvmefs_loop_inval), so
 * the cache may be kept long: 10,000 small files went from 3,868 to 5,198
 * files/s when this went from 1 s to 60 s (fewer LOOKUP and GETATTR round
 * trips).
 */
#define NVMEFS_ATTR_TIMEOUT 60.0
/* An entry for a control inode (lookup and readdirplus alike). */
struct fuse_entry_param;
void nvmefs_ctl_entry(const struct nvmefs_vol *vol, uint64_t ino, struct fuse_entry_param *e);
/* name in parent when it is a control entry: 0 with *e filled, -ENOENT
 * for another name in the control directory, 1 when not ours to answer
 * (also ".nvmefs" when a real entry of that name is in the root). */
int nvmefs_ctl_lookup(const struct nvmefs_vol *vol, uint64_t parent, const char *name,
		      struct fuse_entry_param *e);
/* The control file's text, made now (malloc'ed, the caller frees): 0,
 * -EISDIR or -ENOMEM. */
int nvmefs_ctl_render(struct nvmefs_vol *vol, uint64_t ino, char **text);
/* An ioctl on inode ino by uid: NVMEFS_IOC_SHUTDOWN on any inode and
 * NVMEFS_IOC_REMOUNT on the control directory (both root only, else
 * -EPERM), anything else -ENOTTY. */
int nvmefs_ctl_ioctl(struct nvmefs_vol *vol, uint64_t ino, unsigned cmd, uid_t uid, const void *in,
		     size_t in_len);
/* The control directory's entries from offset off into buf (size bytes),
 * as FUSE's readdir(plus) replies hold them: the bytes used. */
struct fuse_req;
size_t nvmefs_ctl_readdir(struct fuse_req *req, const struct nvmefs_vol *vol, char *buf,
			  size_t size, off_t off, bool plus);

/* ---- loop.c: the FUSE request loop ---- */
struct fuse_session;
/*
 * Serve se with threads workers until it is unmounted or a signal stops it.
 * after_init(arg), if given, runs once, right after the INIT reply went to
 * the kernel. Returns 0, or -errno when receiving failed or the workers
 * (or the io_uring queues -o uring demands) could not be set up.
 */
int nvmefs_loop_run(struct fuse_session *se, struct nvmefs_vol *vol, unsigned threads,
		    void (*after_init)(void *arg), void *arg);

/* ---- cpulat.c: idle CPUs quick to wake while requests come ---- */
/*
 * Start asking the kernel (PM QoS, /dev/cpu_dma_latency) for a CPU wake-up
 * latency of busy_us microseconds while requests come, given back after a
 * quiet spell (-o cpu_latency; busy_us < 0: never ask). Where the device
 * cannot be opened (no root, no such device) or written, or the watcher
 * thread cannot start, it says so once and asks nothing: the mount goes
 * on. Once per process at a time, before any serving thread starts.
 */
void nvmefs_cpulat_start(int busy_us);
/* -o cpu_latency=US|off: *busy_us, -1 for off, 0 when s is NULL (the
 * default); -EINVAL, said naming the value, for anything else. */
int nvmefs_cpulat_parse(const char *s, int *busy_us);
/* Whether a daemon asking busy_us (nvmefs_cpulat_parse) keeps idle CPUs
 * awake while it serves: 0 us, and /dev/cpu_dma_latency opens for writing
 * (root; a container's device rules may say no). What the default
 * transport and io_uring's polling from another CPU follow. */
bool nvmefs_cpulat_awake(int busy_us);
/* A request came (any serving thread; one load when held already). */
void nvmefs_cpulat_busy(void);
/* Give the request back and stop the watcher (after every serving thread). */
void nvmefs_cpulat_stop(void);
/* 1 held now, 0 not held, -1 nothing asked (off, or the device refused);
 * *holds: busy spells since the mount. */
int nvmefs_cpulat_state(uint64_t *holds);

/* ---- devio.c: the session's reads and writes of /dev/fuse ---- */
struct iovec;
/*
 * Put se's reads and writes of /dev/fuse through our hooks
 * (fuse_session_custom_io): the INIT reply gets the flags
 * nvmefs_devio_init_flags() asked for, a reply to a request of the
 * io_uring queues goes there, and after_init(arg), if given, runs once,
 * on the thread that sent the INIT reply, right after the kernel took it.
 * 0 or -errno.
 */
int nvmefs_devio_attach(struct fuse_session *se, void (*after_init)(void *arg), void *arg);
/*
 * Add flags (FUSE_* INIT flags, 64 bits: the high half goes to flags2) to
 * the INIT reply libfuse sends; for flags libfuse 3.14 has no capability
 * for. Call from the init handler, before the reply is sent.
 */
void nvmefs_devio_init_flags(uint64_t flags);
/* The INIT flags the kernel offered (flags2 in the high half); 0 before INIT. */
uint64_t nvmefs_devio_offered(void);
/* writev(2) of a reply through the hooks (a queue's request goes there). */
ssize_t nvmefs_devio_writev(int fd, struct iovec *iov, int count);
/*
 * The pool buffer the calling worker received its current request into,
 * now the caller's (the worker takes another); outside a worker, a fresh
 * pool buffer. NULL only when the pool cannot allocate.
 */
void *nvmefs_loop_take_buf(struct nvmefs_vol *vol);
/* The same, but outside a worker only a pool buffer free now: NULL when
 * none is (nothing waits). */
void *nvmefs_loop_try_buf(struct nvmefs_vol *vol);

/*
 * The native door's nvmefs_native_inval_fn (fs/native/native_i.h) for the
 * session se: FUSE_NOTIFY_INVAL_INODE. Never from a worker or an I/O
 * completion: the kernel may wait on pages a READ of theirs holds.
 */
void nvmefs_loop_inval(void *se, uint64_t ino, int64_t off, int64_t len);
/*
 * Drop the kernel's cached attributes of ino (not its pages), from a worker
 * serving a request: the kernel takes no page or inode lock for it, so it
 * cannot wait on the request being served.
 */
void nvmefs_loop_inval_attr(uint64_t ino);
/*
 * Store len bytes of data at offset 0 of ino in the kernel's page cache
 * (FUSE_NOTIFY_STORE): 0 or -errno (-ENOENT: the kernel holds no inode).
 * The kernel locks each page: only while no READ of the file can be in
 * flight (an open's push holds the file: nvmefs_ns_open_push_begin).
 */
int nvmefs_loop_store(uint64_t ino, const void *data, size_t len);

/*
 * Serve the request of len bytes at req (laid out as read(2) from /dev/fuse
 * gives it) on the calling thread: counted, then libfuse's handlers.
 */
typedef void nvmefs_serve_fn(struct fuse_session *se, struct nvmefs_vol *vol, void *req,
			     size_t len);
nvmefs_serve_fn nvmefs_loop_serve;

/*
 * Whether a leader (of the /dev/fuse loop, or of an io_uring queue) serves
 * the request in (its fuse_in_header, then the opcode's struct, as read(2)
 * from /dev/fuse lays them out; len bytes in all) itself: it waits for
 * nothing but memory (READ and WRITE leave for the devices; where one
 * might wait, for a range lock, a buffer or a commit, the leader hands
 * over first: nvmefs_before_wait). Before any other it hands over. An
 * IOCTL is one, but for the control directory's remount and a shutdown,
 * which flush everything: the others are a file's attribute flags and
 * what is answered ENOTTY at once (isatty(3)'s TCGETS, which Python's
 * open() sends).
 */
static inline bool nvmefs_serve_inline(const struct fuse_in_header *in, size_t len)
{
	const struct fuse_ioctl_in *io = (const void *)(in + 1);

	switch (in->opcode) {
	case FUSE_IOCTL:
		return len >= sizeof(*in) + sizeof(*io) &&
		       io->cmd != (uint32_t)NVMEFS_IOC_SHUTDOWN &&
		       io->cmd != (uint32_t)NVMEFS_IOC_REMOUNT;
	case FUSE_LOOKUP:
	case FUSE_FORGET:
	case FUSE_BATCH_FORGET:
	case FUSE_GETATTR:
	case FUSE_ACCESS:
	case FUSE_OPEN:
	case FUSE_OPENDIR:
	case FUSE_READDIR:
	case FUSE_READDIRPLUS:
	case FUSE_RELEASEDIR:
	case FUSE_STATFS:
	case FUSE_GETXATTR:
	case FUSE_LISTXATTR:
	case FUSE_READLINK:
	case FUSE_CREATE:
	case FUSE_MKNOD:
	case FUSE_MKDIR:
	case FUSE_SYMLINK:
	case FUSE_LINK:
	case FUSE_UNLINK:
	case FUSE_RMDIR:
	case FUSE_RENAME:
	case FUSE_RENAME2:
	case FUSE_FLUSH:
	case FUSE_READ:
	case FUSE_WRITE:
	case FUSE_RELEASE:
		return true;
	default:
		return false;
	}
}

/* ---- uring.c: FUSE over io_uring (Linux 6.14+) ---- */
struct nvmefs_uring;
/* 0 when this kernel serves FUSE over io_uring (its module parameter
 * enable_uring is on), -EPERM when it is off, -ENOTSUP when it has none. */
int nvmefs_uring_offered(void);
/* 0 when this process may make an io_uring ring as the queues' (a small
 * one, made and freed), else io_uring_setup(2)'s error: -EPERM under
 * kernel.io_uring_disabled or a seccomp policy, -ENOMEM, ... */
int nvmefs_uring_ring_ok(void);
/*
 * Before the INIT reply: make a queue per possible CPU (an SQE128 ring and
 * depth entries of locked header and payload buffers; 0: the default),
 * whose requests serve() will serve. A queue serving a lone caller that
 * reads nothing from the devices is led from another CPU, polling its
 * ring for at most poll_ns before it sleeps (uring.c, "Polling from
 * another CPU"; 0: never, for a daemon that does not keep idle CPUs
 * awake). 0 with *out, or -errno (nothing made): the mount then serves
 * /dev/fuse.
 */
int nvmefs_uring_prepare(struct fuse_session *se, struct nvmefs_vol *vol, unsigned depth,
			 uint64_t poll_ns, nvmefs_serve_fn *serve, struct nvmefs_uring **out);
/* The INIT flag (FUSE_OVER_IO_URING) that asks the kernel for it. */
uint64_t nvmefs_uring_init_flag(void);
/* After the INIT reply: a thread per queue registers its entries and
 * serves them. fail(arg, -errno) if the kernel refuses them, when the mount
 * can only be stopped (its requests wait for the queues). */
int nvmefs_uring_start(struct nvmefs_uring *u, void (*fail)(void *arg, int err), void *arg);
/*
 * Once the queues serve a mount's requests, /dev/fuse carries only FORGET,
 * BATCH_FORGET and INTERRUPT, for none of which anybody waits. An unlink's
 * FORGET came there about every 30 us, and a /dev/fuse leader polling for
 * each, as if a caller waited, took a CPU from the caller and from the
 * queue polling for it: unlinks ran at half /dev/fuse's rate (0.53 s for
 * 10,000 against 0.26). So that leader polls no more, and before each wait
 * it sleeps NVMEFS_URING_GATHER_NS, in which the kernel queues the next
 * FORGETs to be read as one BATCH_FORGET: a wake-up per gathering at most
 * (0.27 s). An INTERRUPT may wait as long. False if a signal cut the sleep.
 */
#define NVMEFS_URING_GATHER_NS (1000 * 1000)
static inline bool nvmefs_uring_gather(void)
{
	const struct timespec t = {.tv_nsec = NVMEFS_URING_GATHER_NS};

	return nanosleep(&t, NULL) == 0;
}
/* Stop the queue threads (after the unmount, or to stop serving). */
void nvmefs_uring_stop(struct nvmefs_uring *u);
/* Whether the kernel holds none of u's buffers (every entry ended). */
bool nvmefs_uring_idle(const struct nvmefs_uring *u);
void nvmefs_uring_free(struct nvmefs_uring *u);
/* Queues (and *depth, entries each) of u; 0 for NULL. */
unsigned nvmefs_uring_queues(const struct nvmefs_uring *u, unsigned *depth);
/* Requests served through the queues so far. */
uint64_t nvmefs_uring_served(const struct nvmefs_uring *u);
/* Queues whose threads may now run on any CPU: their requests come in a
 * stream (uring.c, "Where a queue's threads run"); 0 for NULL. */
unsigned nvmefs_uring_spread(const struct nvmefs_uring *u);
/* Queues led from another CPU now, and (*polled) how many of their
 * leaders' waits polling ended so far (a CQE came: a request, a
 * completion, a hand-over; uring.c, "Polling from another CPU"); 0 for
 * NULL. */
unsigned nvmefs_uring_away(const struct nvmefs_uring *u, uint64_t *polled);
/* Whether u's leaders wait as SCHED_IDLE when nothing is in flight
 * (uring.c, "Where the caller wakes"), how many such waits they made, and
 * (*backoffs) how many times a thread stopped them for slow wake-ups. */
bool nvmefs_uring_idle_wait(const struct nvmefs_uring *u);
uint64_t nvmefs_uring_idle_waits(const struct nvmefs_uring *u, uint64_t *backoffs);
/*
 * The reply in iov (count parts, fuse_out_header first), if it answers a
 * request of the queues: committed through its entry, *res what writev(2)
 * would have returned, true. False for anything of /dev/fuse.
 */
bool nvmefs_uring_reply(const struct iovec *iov, int count, ssize_t *res);
/*
 * On a queue thread serving a request: its payload (page-aligned, *cap
 * bytes), where a WRITE's data lies and where a READ's answer may be put
 * to be sent without a copy, valid until the reply. NULL elsewhere.
 */
void *nvmefs_uring_payload(size_t *cap);

/*
 * Direct mode's -o cache_small: the largest regular file whose read-only
 * opens go through the page cache (ops_file.c), and whose data statahead
 * may store there ahead of them (statahead.c); 0: none. Only from FUSE
 * 7.39 (vol->direct_mmap), whose direct_io writes drop the pages they
 * overwrite.
 */
static inline uint64_t nvmefs_cache_small_max(const struct nvmefs_vol *vol)
{
	return vol->opts.direct && vol->direct_mmap ? vol->opts.cache_small : 0;
}

/* ---- statahead.c: directories read ahead of a program walking them ---- */
/* Start the thread that reads ahead, up to max entries a step (0: off),
 * through mountpoint, and small files' data of vol (with se's stores):
 * 0 or -errno (the mount then serves without it). */
struct fuse_session;
int nvmefs_sa_start(const char *mountpoint, unsigned max, struct nvmefs_vol *vol,
		    struct fuse_session *se);
/* A LOOKUP found the entry ino at cookie in parent (of entries entries),
 * for thread tid: perhaps a job reads on from there. */
void nvmefs_sa_lookup(uint64_t parent, uint64_t cookie, uint64_t entries, uint64_t ino, int tid);
/* True when tid is the statahead thread, whose plain READDIR (the kernel
 * did not ask for READDIRPLUS) is answered empty; counted. */
bool nvmefs_sa_self(int tid);
/* True when tid is the statahead thread (not counted). */
bool nvmefs_sa_thread(int tid);
/* In the statahead thread's READDIRPLUS, one entry in NVMEFS_SA_TRIP goes
 * without its attributes, so that the walk sends a LOOKUP for it: the
 * daemon's only sign of how far a walk in the kernel's cache has got. */
#define NVMEFS_SA_TRIP 64
/* Whether the entry at cookie, after the one at prev (or first after the
 * offset prev a read started from), is such a tripwire: its cookie crosses
 * a multiple of NVMEFS_SA_TRIP. By cookie, not by place in a reply, so that
 * the reply (ops.c) and the thread's getdents (a push passes tripwires by:
 * the kernel made no inode of them) agree whatever the reply's size. */
static inline bool nvmefs_sa_trip(uint64_t prev, uint64_t cookie)
{
	return prev / NVMEFS_SA_TRIP != cookie / NVMEFS_SA_TRIP;
}
/* A read-only open of file ino: when it is the one a walk just looked up,
 * the walk reads its files, and its jobs push their data. */
void nvmefs_sa_open(uint64_t ino);
/* No more jobs; join once the connection is gone (a job waits on it). */
void nvmefs_sa_stop(void);
void nvmefs_sa_join(void);
struct nvmefs_sa_stats {
	bool on;
	uint64_t jobs, entries, plain, failed;
	uint64_t pushed, pushed_bytes, push_failed; /* small files' data */
	uint64_t push_passed;			    /* files the walk opened before their push */
};
void nvmefs_sa_stats(struct nvmefs_sa_stats *st);

/* ---- ops.c, ops_file.c: the operations ---- */
struct fuse_lowlevel_ops;
extern const struct fuse_lowlevel_ops nvmefs_ops;

#endif
