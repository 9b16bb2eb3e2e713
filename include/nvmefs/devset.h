/* SPDX-License-Identifier: MIT */
/*
 * nvmefs device set: the member devices of a volume, opened for O_DIRECT I/O.
 *
 * A member is a block device (opened O_EXCL, so a mounted or otherwise
 * claimed device is refused) or a regular image file (locked with flock so
 * two nvmefs processes never share one). Opening discovers each member's
 * usable size, its logical block size (the O_DIRECT alignment) and the NUMA
 * node it hangs off. Any member that cannot be used is refused with a message
 * that names its path and the reason.
 */
#ifndef NVMEFS_DEVSET_H
#define NVMEFS_DEVSET_H

#include <sched.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "nvmefs/limits.h"

struct nvmefs_dev {
	char *path;		 /* as given by the caller; owned by the set */
	int fd;			 /* O_DIRECT descriptor */
	bool is_blkdev;		 /* block device (else regular file) */
	uint64_t size;		 /* usable bytes, a multiple of block_size */
	uint32_t block_size;	 /* offset/length alignment for O_DIRECT */
	uint32_t mem_align;	 /* buffer address alignment for O_DIRECT */
	int numa_node;		 /* node of the device (0 if unknown) */
	dev_t id_dev;		 /* st_rdev of a block device, st_dev of a file */
	ino_t id_ino;		 /* 0 for a block device, st_ino of a file */
	struct nvmefs_devfi *fi; /* test-only faults (striping/fault_i.h); else NULL */
	/* nvmefs_devset_fence: no I/O reaches the member any more. Read and
	 * set with __atomic builtins (any thread). */
	bool fenced;
};

/*
 * The busy_quiet_ms of the tools (nvmefs, fsck.nvmefs, mkfs.nvmefs): a
 * plain FUSE unmount does not wait for the daemon (the kernel sends it
 * nothing: FUSE_DESTROY goes to fuseblk mounts only), which makes its last
 * commit and flush and lets go of the members tens of milliseconds after
 * umount(2) has returned. A program run right after the umount waits for
 * that silently; only a wait longer than this is worth a line.
 */
#define NVMEFS_BUSY_QUIET_MS 1000

struct nvmefs_devset_opts {
	uint64_t min_size; /* refuse members smaller than this (0: 1 MiB) */
	bool read_only;	   /* open O_RDONLY (fsck -n, inspection) */
	/*
	 * A member another process holds (O_EXCL, flock) is refused at once,
	 * naming the holder, unless holder (may be NULL) says of every
	 * process found holding it that it is letting go: an nvmefs daemon
	 * whose volume is unmounted writes its last checkpoint after
	 * umount(8) returns. Then the open waits for it, up to busy_wait_ms,
	 * and says so (an info line naming the holder) once the wait has
	 * lasted busy_quiet_ms (0: at once). holder(pid, state, len) returns
	 * 1 (letting go) or 0, and may put in state a phrase for the messages
	 * ("which has the volume mounted").
	 */
	unsigned busy_wait_ms;
	unsigned busy_quiet_ms;
	int (*holder)(pid_t pid, char *state, size_t len);
};

struct nvmefs_devset {
	unsigned count;
	struct nvmefs_dev devs[];
};

/*
 * Open the n members named by paths (opts may be NULL for defaults). On
 * success *out owns one descriptor per member and must be closed with
 * nvmefs_devset_close(). Refusals are logged naming the path:
 * -ENOENT missing, -ENODEV neither a block device nor a regular file,
 * -ENOSPC too small, -EROFS read-only (for writing), -EACCES no permission
 * (read_only), -EBUSY in use (the message names the holder when found),
 * -EINVAL given twice, no O_DIRECT support, or n not within
 * 1..NVMEFS_MAX_DEVICES, -EAGAIN the path changed while being opened.
 * Returns 0 or that -errno.
 */
int nvmefs_devset_open(struct nvmefs_devset **out, const char *const *paths, unsigned n,
		       const struct nvmefs_devset_opts *opts);

/*
 * Close every member's descriptor now, dropping its lock (flock, a block
 * device's O_EXCL), but keep the set for nvmefs_devset_close(): for a
 * caller that has written its last and has more to tear down, so that the
 * next program to open the members need not wait for it. Nothing may be
 * submitted to the members after it. NULL is allowed.
 */
void nvmefs_devset_release(struct nvmefs_devset *set);

/*
 * Fence every member: from now on each read, write, flush and discard
 * fails with -EIO without reaching it (what a filesystem shutdown,
 * FS_IOC_SHUTDOWN, asks). I/O already handed to the kernel is not
 * recalled: nvmefs_engine_fence also waits for the engine's. For good:
 * nothing lifts it but closing the set.
 */
void nvmefs_devset_fence(struct nvmefs_devset *set);

/* Whether dev is fenced (nvmefs_devset_fence). */
bool nvmefs_dev_fenced(const struct nvmefs_dev *dev);

/* Close every member and free the set. NULL is allowed. */
void nvmefs_devset_close(struct nvmefs_devset *set);

/*
 * Synchronous I/O of len bytes at off (all aligned as for O_DIRECT), for
 * labels and metadata. A failure or a short transfer is logged naming the
 * member and returns -errno (-EIO when short).
 */
int nvmefs_dev_pio(struct nvmefs_dev *dev, bool write, uint64_t off, void *buf, size_t len);

/* Make completed writes durable: flush the member's volatile cache. */
int nvmefs_dev_flush(struct nvmefs_dev *dev);

/*
 * Tell the member that [off, off + len) holds nothing: BLKDISCARD on a block
 * device, a punched hole on a file. Both must be block aligned. Afterwards
 * the range reads as zeros on a file; a block device may return anything.
 */
int nvmefs_dev_discard(struct nvmefs_dev *dev, uint64_t off, uint64_t len);

/* Largest block size over the members: an alignment that suits them all. */
uint32_t nvmefs_devset_block_size(const struct nvmefs_devset *set);

/*
 * The NUMA node most members hang off (the lowest on a tie): where threads
 * and buffers that serve every member are placed.
 */
int nvmefs_devset_home_node(const struct nvmefs_devset *set);

/*
 * The CPUs of NUMA node node, from libnuma, into *cpus. Returns 0, -ENOSYS
 * when libnuma sees no NUMA support, or -ENOENT for a node that does not
 * exist or has no CPU. Call it from one thread at a time: libnuma fills its
 * node-to-CPU cache lazily without a lock.
 */
int nvmefs_node_cpus(int node, cpu_set_t *cpus);

#endif
