/* SPDX-License-Identifier: MIT */
/*
 * Inside libnvmefs-preload.so: what its files share. Not exported
 * (preload.map). Each calls only the files below it:
 *   preload_at.c    the *at calls, and the other calls it hands to the kernel
 *   preload_aio.c   libaio's calls, through the read door
 *   preload.c       the create door, and the calls on descriptors
 *   preload_read.c  the read door
 *   preload_conn.c  the lock, the mounts, our own descriptors
 */
#ifndef NVMEFS_PRELOAD_I_H
#define NVMEFS_PRELOAD_I_H

#include <dlfcn.h>
#include <linux/aio_abi.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#define EXPORT __attribute__((visibility("default")))
/* real_NAME: the next definition of NAME (libc's). */
#define RESOLVE(name) (*(void **)&real_##name = dlsym(RTLD_NEXT, #name))
/* real_NAME, resolved here when the constructor has not run yet: another
 * library's constructor, or a sanitizer's interceptors, may call in first. */
#define REAL(name) (real_##name ? real_##name : (RESOLVE(name), real_##name))

/* ---- preload_conn.c ---- */

/* The doors' tables' lock (preload.c's and preload_read.c's). */
extern pthread_mutex_t preload_mu;
/* The client of the mount whose st_dev is dev, attached on first use by
 * fd, a descriptor on it (preload_mu held); NULL when it is not nvmefs or
 * has no door. */
struct nvmefs_client *preload_client(dev_t dev, int fd);
/* (preload_mu held) A connection's socket moved from fd to to (-1: none
 * could be had); in the child of fork, every connection forgotten. */
void preload_mounts_renumber(int fd, int to);
void preload_mounts_fork_child(void);
/* Our own descriptors. fd made one of ours, high: its new number (fd
 * closed), or -1 (fd closed). Whether fd is one of ours still (no lock:
 * a number that is not any more loses its mark, and counts as a move);
 * whether it is marked so; mark it or not; close it when it is ours. */
int preload_fd_hide(int fd);
bool preload_fd_ours(int fd);
bool preload_fd_marked(int fd);
void preload_fd_mark(int fd, bool on);
void preload_fd_close_ours(int fd);
/* Moves of our descriptors (moved, or found gone) so far; one more. */
unsigned long preload_fd_moves(void);
void preload_fd_moved(void);
/* close_range around our descriptors (real is libc's). */
int preload_fd_close_range(unsigned first, unsigned last, int flags,
			   int (*real)(unsigned, unsigned, int));
/* Whether path is NULL; whether it names nothing (NULL or ""). Asked of
 * functions that are never inlined: glibc declares the path of most calls
 * wrapped here nonnull, which lets the compiler drop a test for NULL made
 * inside their wrappers. */
bool preload_null_path(const char *path);
bool preload_empty_path(const char *path);

/* ---- preload.c ---- */

/* Whether fd may be the door's (no lock taken). */
bool preload_has(int fd);
/* Whether fd is the door's (checked under the lock). */
bool preload_door(int fd);
/* Before a call the kernel must serve: fd in the kernel's hands. -1 with
 * errno when it cannot be. */
int preload_need_kernel(int fd);
/* The door's descriptor as the directory of an *at call: 0 (let it
 * through) or -1 with errno (never inlined either). */
int preload_at_dir(int at, const char *path, int flags);

#define PRELOAD_FUSE_MAGIC 0x65735546 /* statfs's f_type of a FUSE mount */
/* Descriptors the tables (preload.c's, preload_read.c's) cover: one above
 * is never the doors'. */
#define PRELOAD_MAX_FDS 65536

/* ---- preload_read.c, the read door ---- */

void preload_read_init(void);
/* After an open of fd with flags succeeded: borrow the file when the door
 * serves it. */
void preload_read_open(int fd, int flags);
/* After fd was duplicated as to (dup, dup2, dup3, fcntl F_DUPFD*). */
void preload_read_dup(int fd, int to);
/* Before fd is closed (or replaced by dup2, dup3). */
void preload_read_close(int fd);
/* A pread of fd at pos through the door: bytes, or -1 with errno, or
 * -2: not the door's (the caller's libc call then). */
ssize_t preload_rd_pread(int fd, void *buf, size_t len, off_t pos);
/* (preload_mu held) fd, one of ours that dup2 or dup3 will replace,
 * moved out of the way, the read door's tables told: its new number (-1:
 * none could be had), or fd when it is not ours. */
int preload_rd_evict_locked(int fd);
/* In the child of fork, preload_mu held: forget everything. */
void preload_read_fork_child(void);

/* One read through the read door: its pieces, each a read of one member
 * at the loan's offset, as iocbs (aio_data: the read). */
#define PRELOAD_MAX_PIECES 64u
struct rfile;
struct loan;
struct preload_rd {
	struct preload_rd *next, *prev; /* preload_aio.c's list */
	struct rfile *f;
	struct loan *l;
	uint64_t iocb, data; /* libaio: the program's iocb and its aio_data */
	uint64_t pos, len, buf;
	unsigned n, left;    /* pieces; not yet done */
	bool failed;	     /* a piece read short or failed */
	int pfd;	     /* the program's descriptor */
	unsigned long moves; /* the library's descriptor moves when it was made */
	struct iocb sub[];
};
/* Whether fd may be the read door's (no lock); whether any file is. */
bool preload_rd_fd(int fd);
bool preload_rd_any(void);
/* The read of [pos, pos + len) of fd into buf when the door serves it
 * (fd's loan holds, and maps all of it to at most PRELOAD_MAX_PIECES
 * pieces), else NULL: the mount's. Free with preload_rd_free. */
struct preload_rd *preload_rd_new(int fd, uint64_t pos, uint64_t len, uint64_t buf);
void preload_rd_free(struct preload_rd *d);
/* Piece sub of d read res bytes: whether it was the last. */
bool preload_rd_piece_done(struct preload_rd *d, const struct iocb *sub, int64_t res);
/* Read d's pieces from the from-th on here, one after another. */
void preload_rd_pieces_sync(struct preload_rd *d, unsigned from);
/* Every piece in: the read's result, the mount's when a piece failed or
 * the file changed meanwhile. */
int64_t preload_rd_result(const struct preload_rd *d);

/* A call the kernel must serve: the file goes to it first. */
#define KERNEL_CALL(ret_t, name, params, args)                                                     \
	EXPORT ret_t name params                                                                   \
	{                                                                                          \
		if (preload_has(fd) && preload_need_kernel(fd))                                    \
			return (ret_t)-1;                                                          \
		return REAL(name) args;                                                            \
	}

#endif
