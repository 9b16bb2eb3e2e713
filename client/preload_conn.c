// SPDX-License-Identifier: MIT
/*
 * What libnvmefs-preload.so's doors share, below all of them: the lock of
 * their tables, the mounts (a client each, attached on first use), and the
 * preload's own descriptors (the connections', the read door's files and
 * members). client/preload.c (the create door and the calls on
 * descriptors), client/preload_at.c (the *at calls), client/preload_read.c
 * (the read door) and client/preload_aio.c (its libaio calls) call down
 * into this file; it calls none of them.
 *
 * Our own descriptors go high, out of the program's way (its
 * closefrom-style loops and its own numbers stay below), and are recorded
 * by number with what each is (its st_dev and st_ino): the program's
 * close, close_range, closefrom, dup2 and dup3 leave them alone, and one
 * the program closed behind our back (a raw system call) and got again is
 * known not to be ours any more (preload_fd_ours). They are closed with
 * the system call, past the interposers: they are never the program's.
 */
#undef _FILE_OFFSET_BITS
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/resource.h>
#include <sys/statfs.h>
#include <unistd.h>

#include "client_i.h"
#include "preload_i.h"
#include "sys_i.h"

#define MAX_MOUNTS 16
#define MAX_FDS	   PRELOAD_MAX_FDS

pthread_mutex_t preload_mu = PTHREAD_MUTEX_INITIALIZER;

/* ---- our own descriptors ---- */

static uint8_t hidden[MAX_FDS / 8];
static struct {
	dev_t dev;
	ino_t ino;
} hids[MAX_FDS];
static unsigned hide_min; /* where they go (0: not known yet) */
/* Bumped whenever one of ours moved or was found gone: a read whose
 * pieces were made before reads through the mount. */
static unsigned long moves;

/* The lowest number ours take: high, within the soft limit. */
static unsigned low_mark(void)
{
	struct rlimit rl;
	unsigned m = __atomic_load_n(&hide_min, __ATOMIC_RELAXED);

	if (m)
		return m;
	m = !getrlimit(RLIMIT_NOFILE, &rl) && rl.rlim_cur > 512
		    ? (unsigned)(rl.rlim_cur < MAX_FDS ? rl.rlim_cur : MAX_FDS) - 256
		    : 3;
	__atomic_store_n(&hide_min, m, __ATOMIC_RELAXED);
	return m;
}

/* A mark is read before its record (preload_fd_ours, without the lock):
 * set with release after the record is written, read with acquire. */
bool preload_fd_marked(int fd)
{
	return fd >= 0 && fd < MAX_FDS &&
	       (__atomic_load_n(&hidden[fd / 8], __ATOMIC_ACQUIRE) >> (fd % 8) & 1);
}

void preload_fd_mark(int fd, bool on)
{
	if (fd < 0 || fd >= MAX_FDS)
		return;
	if (on)
		__atomic_fetch_or(&hidden[fd / 8], (uint8_t)(1u << (fd % 8)), __ATOMIC_RELEASE);
	else
		__atomic_fetch_and(&hidden[fd / 8], (uint8_t) ~(1u << (fd % 8)), __ATOMIC_RELAXED);
}

int preload_fd_hide(int fd)
{
	long to = sys_fcntl(fd, F_DUPFD_CLOEXEC, (long)low_mark());

	if (to < 0 || to >= MAX_FDS) {
		/* No high number: marked where it is. */
		if (to >= 0)
			sys_close((int)to);
		to = fd;
	} else {
		sys_close(fd);
	}
	if (to >= MAX_FDS || sys_ident((int)to, &hids[to].dev, &hids[to].ino)) {
		sys_close((int)to);
		return -1;
	}
	preload_fd_mark((int)to, true);
	return (int)to;
}

bool preload_fd_ours(int fd)
{
	if (!preload_fd_marked(fd))
		return false;
	if (sys_ident_is(fd, hids[fd].dev, hids[fd].ino))
		return true;
	preload_fd_mark(fd, false);
	preload_fd_moved();
	return false;
}

void preload_fd_close_ours(int fd)
{
	if (preload_fd_ours(fd)) {
		preload_fd_mark(fd, false);
		sys_close(fd);
	}
}

unsigned long preload_fd_moves(void)
{
	return __atomic_load_n(&moves, __ATOMIC_SEQ_CST);
}

void preload_fd_moved(void)
{
	__atomic_fetch_add(&moves, 1, __ATOMIC_SEQ_CST);
}

int preload_fd_close_range(unsigned first, unsigned last, int flags,
			   int (*real)(unsigned, unsigned, int))
{
	unsigned from = first;
	int ret = 0;

	if (first > last || (flags & CLOSE_RANGE_CLOEXEC))
		return real(first, last, flags); /* EINVAL, or nothing closed */
	for (unsigned fd = first; fd <= last && fd < MAX_FDS; fd++) {
		if (!preload_fd_ours((int)fd))
			continue;
		if (from < fd && real(from, fd - 1, flags) && !ret)
			ret = -1;
		from = fd + 1;
	}
	if (from <= last && from >= first && real(from, last, flags) && !ret)
		ret = -1;
	return ret;
}

/* ---- the mounts ---- */

/* A mount seen: its st_dev, and its client (NULL: not nvmefs, or no door). */
struct mnt {
	dev_t dev;
	struct nvmefs_client *c;
};

static struct mnt mounts[MAX_MOUNTS]; /* preload_mu */
static int nmounts;

struct nvmefs_client *preload_client(dev_t dev, int dirfd)
{
	struct statfs sf;
	struct nvmefs_client *c = NULL;
	char path[64];

	for (int i = 0; i < nmounts; i++)
		if (mounts[i].dev == dev)
			return mounts[i].c;
	if (nmounts == MAX_MOUNTS)
		return NULL;
	if (!fstatfs(dirfd, &sf) && sf.f_type == PRELOAD_FUSE_MAGIC) {
		snprintf(path, sizeof(path), "/proc/self/fd/%d", dirfd);
		if (nvmefs_attach(path, &c))
			c = NULL;
		/* The connection: high, kept from the program's closes. */
		if (c && (c->sock = preload_fd_hide(c->sock)) < 0)
			c->dead = true;
	}
	mounts[nmounts++] = (struct mnt){.dev = dev, .c = c};
	return c;
}

void preload_mounts_renumber(int fd, int to)
{
	if (to == fd)
		return;
	for (int i = 0; i < nmounts; i++) {
		if (mounts[i].c && mounts[i].c->sock == fd) {
			mounts[i].c->sock = to;
			mounts[i].c->dead |= to < 0;
		}
	}
}

void preload_mounts_fork_child(void)
{
	for (int i = 0; i < nmounts; i++) {
		if (mounts[i].c) {
			sys_close(mounts[i].c->sock);
			mounts[i].c->sock = -1;
			mounts[i].c->dead = true;
		}
	}
	nmounts = 0;
}

/* ---- paths ---- */

__attribute__((noinline)) bool preload_null_path(const char *path)
{
	return !path;
}

__attribute__((noinline)) bool preload_empty_path(const char *path)
{
	return !path || !path[0];
}
