/* SPDX-License-Identifier: MIT */
/*
 * libnvmefs: the native client of an nvmefs volume.
 *
 * Files are named, opened, created and checked through the mount, as by
 * any program; their bytes then move between the drives and the program's
 * own memory with no copy through FUSE. The daemon reads and writes shared
 * memory this library creates (nvmefs_buf_alloc) directly with O_DIRECT;
 * sizes, times, locks, allocation and the journal are the same as through
 * the mount, and readers through the mount see native writes at once.
 *
 *     struct nvmefs_client *c;
 *     nvmefs_attach("/mnt/vol", &c);              any path inside the mount
 *     int fd = open("/mnt/vol/ckpt", O_RDWR | O_CREAT, 0644);
 *     nvmefs_reg_fd(c, fd);                       the open is the permission
 *     void *buf;
 *     nvmefs_buf_alloc(c, 64 << 20, -1, &buf);    pinned, shared, page-aligned
 *     nvmefs_pwrite(c, fd, buf, 64 << 20, 0);
 *     nvmefs_fsync(c, fd);
 *     nvmefs_detach(c);                           frees buffers, unregisters
 *
 * Rules every call keeps:
 *  - Functions return 0 (or a count) on success and -errno on failure; errno
 *    is not used. nvmefs_client_error() holds a sentence about the last
 *    failure (naming the path or descriptor), for messages to a person.
 *  - A client is not thread-safe: use one per thread (each has its own
 *    connection and its own server thread in the daemon), as an io_uring
 *    is used. Descriptors and buffers belong to the client they were
 *    registered with.
 *  - Zero copy needs the buffer inside a region of nvmefs_buf_alloc, and
 *    the buffer's address, the file offset and the length all multiples of
 *    4096 (nvmefs_client_block()). Other buffers work too: the library moves
 *    them through pinned bounce buffers of its own, and an unaligned range
 *    goes through the daemon's, each counted (nvmefs_client_stats,
 *    nvmefs-stat).
 *  - Requests carry explicit offsets, also on an O_APPEND descriptor.
 *  - Link with `pkg-config --cflags --libs libnvmefs`.
 */
#ifndef LIBNVMEFS_H
#define LIBNVMEFS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/stat.h>

#ifdef __cplusplus
extern "C" {
#endif

/* A connection to one mounted volume's daemon. Opaque. */
struct nvmefs_client;

/*
 * Connect to the daemon serving the nvmefs mount that holds path (the
 * mount point or anything inside it; a file that does not exist yet is
 * looked for in its directory). On success *out is the new client,
 * the caller's until nvmefs_detach. Returns 0, or -ENOTSUP (path is not on
 * an nvmefs mount), -EPROTONOSUPPORT (its daemon offers no native client),
 * -ECONNREFUSED (the daemon is gone), -EPERM (the socket is not the
 * daemon's), -ENOMEM, or another -errno of the path's lookup.
 */
int nvmefs_attach(const char *path, struct nvmefs_client **out);

/*
 * Wait for the client's requests in flight, unregister its descriptors
 * (the caller's descriptors stay open) and close the connection. Buffers
 * of nvmefs_buf_alloc are the process's and stay until nvmefs_buf_free.
 * c may be NULL.
 */
void nvmefs_detach(struct nvmefs_client *c);

/* The last failure of a call on c, as a sentence ("" after none); with c
 * NULL, the calling thread's last failure of a call given no client
 * (nvmefs_attach, nvmefs_buf_alloc and nvmefs_buf_free with c NULL). Valid
 * until the next such call. */
const char *nvmefs_client_error(const struct nvmefs_client *c);

/* The alignment of zero-copy I/O in bytes (4096). */
size_t nvmefs_client_block(const struct nvmefs_client *c);

/*
 * Allocate size bytes (rounded up to the page size) of memory the daemon
 * can reach: page-aligned, zero-filled, locked in RAM (mlock, as DeepNVMe's
 * new_cpu_locked_tensor), on NUMA node numa_node (-1: the caller's). The
 * buffer is the process's: every client may use it (each shares it with
 * its daemon on first use), and it outlives them. With c given it is
 * shared with c's daemon at once (a refusal shows here); c may be NULL.
 * *out is its address, valid until nvmefs_buf_free. Returns 0, -EINVAL
 * (size 0 or above 1 TiB, or no such node), -ENOMEM (also when
 * RLIMIT_MEMLOCK is too low to lock it), or -EPERM/-EAGAIN when it cannot
 * be locked otherwise; nothing is allocated then. Locking needs
 * CAP_IPC_LOCK or a high enough `ulimit -l`.
 */
int nvmefs_buf_alloc(struct nvmefs_client *c, size_t size, int numa_node, void **out);

/* Free a buffer of nvmefs_buf_alloc (its start address). Other clients
 * that used it let go of it at their next call. c (may be NULL): -EBUSY
 * while a request of c in flight uses it. -EINVAL when buf is no such
 * start. Freeing a buffer another client's request in flight uses is the
 * caller's error, as freeing memory under read(2) is. */
int nvmefs_buf_free(struct nvmefs_client *c, void *buf);

/*
 * Register fd, a regular file opened through the mount, for native I/O.
 * The descriptor's access mode binds: O_RDONLY allows reads only,
 * O_WRONLY writes only (and fsync), O_RDWR both. Requests name the file by
 * fd; the daemon holds the file open from here to nvmefs_unreg_fd (or
 * nvmefs_detach), so unregister before closing fd or reusing its number.
 * Returns 0,
 * or -EXDEV (a file of another filesystem or another volume), -EINVAL (not
 * a regular file, or a control file), -EBADF (not open, or O_PATH),
 * -EEXIST (already registered), -EOPNOTSUPP (a write-enabled descriptor on
 * a mount with -o writeback, whose kernel owns sizes and times).
 */
int nvmefs_reg_fd(struct nvmefs_client *c, int fd);

/* Forget fd's registration. -EBADF when not registered, -EBUSY while a
 * request in flight names it. */
int nvmefs_unreg_fd(struct nvmefs_client *c, int fd);

/*
 * Create the regular file name in the directory dirfd (a descriptor of a
 * directory of the mount; O_PATH will do) and register it under fd, as
 * open(2) with O_CREAT and flags would make it and nvmefs_reg_fd register
 * it: one round trip to the daemon, none through the kernel. fd is a
 * descriptor number the caller holds for the file (any open descriptor:
 * the library only names the file by it in later calls). flags: access
 * mode O_WRONLY or O_RDWR, O_CREAT, and of the rest only O_EXCL, O_TRUNC,
 * O_CLOEXEC, O_NOCTTY, O_NONBLOCK, O_NOFOLLOW. mode loses the bits of
 * cmask (the caller's umask) unless the directory has a default ACL. The
 * daemon checks write and search on the directory for the caller's real
 * user and group ids (which the process can always act as) by the mode
 * bits alone, root included (it cannot see capabilities). *st: the new
 * file's attributes. Returns 0, or
 * -EEXIST (the name exists; nothing changed: open it through the mount),
 * -EOPNOTSUPP (flags the door does not serve, a directory with an access
 * ACL, a mount with -o writeback: create through the mount), -EACCES,
 * -ENOTDIR, -EXDEV, -EINVAL (not a name), -EROFS (also a read-only bind
 * mount), -ENOSPC, -EMLINK. On any error but -EINVAL the kernel may still
 * allow an open(2) through the mount (root's capabilities): try it there.
 */
int nvmefs_create(struct nvmefs_client *c, int dirfd, const char *name, int flags, mode_t mode,
		  mode_t cmask, int fd, struct stat *st);

/* Forget fd's registration as nvmefs_unreg_fd does, once its requests in
 * flight completed (it waits for them), without waiting for the daemon's
 * answer: the next call that waits on the daemon takes it. -EBADF when not
 * registered. */
int nvmefs_close_fd(struct nvmefs_client *c, int fd);

/* nvmefs_io.op */
#define NVMEFS_OP_READ	1
#define NVMEFS_OP_WRITE 2
#define NVMEFS_OP_FSYNC 3 /* buf, len and off unused */

/* One request: move len bytes between buf and the file fd at off. */
struct nvmefs_io {
	int fd;		    /* a registered descriptor */
	int op;		    /* NVMEFS_OP_* */
	void *buf;	    /* the caller's memory, untouched until completion */
	size_t len;	    /* bytes (a read stops at the end of the file) */
	uint64_t off;	    /* file offset */
	uint64_t user_data; /* given back in the completion */
};

/* One completed request. */
struct nvmefs_cqe {
	uint64_t user_data;
	int64_t res; /* bytes moved, or -errno (-EIO, -ENOSPC, -EBADF ...) */
};

/*
 * Start up to n requests without waiting for any. Returns how many were
 * taken (from the first; a request taken counts its completion), which is
 * fewer than n when the client already has nvmefs_client_max_inflight()
 * requests not yet reaped; -EAGAIN when none could be taken for that
 * reason, -EBADF or -EINVAL when ios[0] is wrong (nothing taken), or
 * -ENOTCONN when the daemon is gone. A request found wrong after the
 * first is taken and completes with the -errno.
 */
int nvmefs_submit(struct nvmefs_client *c, const struct nvmefs_io *ios, unsigned n);

/*
 * Wait until at least min requests have completed (or timeout_ms passed;
 * -1: no limit; 0: just look), and move up to max completions into cqes.
 * Returns how many were moved (possibly fewer than min at the timeout), or
 * -ENOTCONN when the daemon is gone (then the requests in flight complete
 * with -ENOTCONN first). min is capped at what is in flight.
 */
int nvmefs_wait(struct nvmefs_client *c, struct nvmefs_cqe *cqes, unsigned max, unsigned min,
		int timeout_ms);

/* Requests submitted and not yet reaped, and the most there may be. */
unsigned nvmefs_client_inflight(const struct nvmefs_client *c);
unsigned nvmefs_client_max_inflight(const struct nvmefs_client *c);

/*
 * Synchronous helpers: one request, waited for (other completions that
 * arrive meanwhile stay for nvmefs_wait). pread returns the bytes read
 * (short at the end of the file), pwrite the bytes written, fsync 0; or
 * -errno (-EAGAIN when nvmefs_client_max_inflight() completions wait to be
 * reaped by nvmefs_wait: no room for the request). fsync makes every write
 * that completed durable, as fsync(2) through the mount does.
 */
ssize_t nvmefs_pread(struct nvmefs_client *c, int fd, void *buf, size_t len, uint64_t off);
ssize_t nvmefs_pwrite(struct nvmefs_client *c, int fd, const void *buf, size_t len, uint64_t off);
int nvmefs_fsync(struct nvmefs_client *c, int fd);

/* What the client did. */
struct nvmefs_client_stats {
	uint64_t requests;     /* submitted */
	uint64_t bytes;	       /* moved by requests that succeeded */
	uint64_t bounced;      /* requests whose buffer was outside the shared regions */
	uint64_t bounce_bytes; /* bytes copied through the library's bounce buffers */
	uint64_t shared_bytes; /* shared memory held (buffers and bounce buffers) */
};

void nvmefs_client_stats(const struct nvmefs_client *c, struct nvmefs_client_stats *st);

#ifdef __cplusplus
}
#endif

#endif
