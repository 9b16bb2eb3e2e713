/* SPDX-License-Identifier: MIT */
/*
 * sys_i.h: the system calls libnvmefs makes on descriptors of its own (its
 * connection, its shared-memory regions), made past any interposer; and
 * sys_ident, which the preload's doors use too.
 *
 * Inside libnvmefs-preload.so the names close, fcntl, ftruncate, mmap and statx are
 * the create door's own (client/preload.c): they look the descriptor up in
 * the door's table and, for an entry there, take the door's lock. The
 * client runs under that lock (a door write that needs a bounce region),
 * and a number the program closed with a raw system call stays in the
 * table until it is next looked up: a memfd the kernel then gives the
 * library under that number sent its ftruncate to the door, which waited
 * for the lock its own thread held. So the client never calls those names:
 * its descriptors are not the program's, and nothing the door keeps is
 * about them. tests/test_preload_calls.py fails on any call from inside
 * the preload to one of its interposers but the wrappers that hand a call
 * on.
 */
#ifndef NVMEFS_CLIENT_SYS_I_H
#define NVMEFS_CLIENT_SYS_I_H

#include <fcntl.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/types.h>
#include <unistd.h>

/* Each argument one register wide, as the kernel takes it: written for
 * 64-bit Linux (a 32-bit ABI splits a 64-bit length in two). */
#if !defined(__linux__) || __SIZEOF_LONG__ != 8
#error "client/sys_i.h: libnvmefs's own system calls are written for 64-bit Linux"
#endif

static inline int sys_close(int fd)
{
	return (int)syscall(SYS_close, (long)fd);
}

/* fcntl with an integer argument (F_GETFD, F_ADD_SEALS, F_DUPFD_CLOEXEC). */
static inline int sys_fcntl(int fd, int cmd, long arg)
{
	return (int)syscall(SYS_fcntl, (long)fd, (long)cmd, arg);
}

static inline int sys_ftruncate(int fd, off_t len)
{
	return (int)syscall(SYS_ftruncate, (long)fd, (long)len);
}

/* What fd refers to, as stat's st_dev, st_ino and st_mode (mode may be
 * NULL): 0, or -1 with errno. statx, whose layout is the same on every
 * architecture, from what the kernel caches (AT_STATX_DONT_SYNC: no
 * GETATTR round trip on a mount). */
static inline int sys_ident_mode(int fd, dev_t *dev, ino_t *ino, mode_t *mode)
{
	struct statx sx;

	if (syscall(SYS_statx, (long)fd, "", (long)(AT_EMPTY_PATH | AT_STATX_DONT_SYNC),
		    (long)(STATX_INO | (mode ? STATX_TYPE : 0)), &sx))
		return -1;
	*dev = makedev(sx.stx_dev_major, sx.stx_dev_minor);
	*ino = sx.stx_ino;
	if (mode)
		*mode = sx.stx_mode;
	return 0;
}

static inline int sys_ident(int fd, dev_t *dev, ino_t *ino)
{
	return sys_ident_mode(fd, dev, ino, NULL);
}

/* Whether fd still is the file recorded as dev and ino (sys_ident): the
 * library's and the preload's one test of a number the program may have
 * closed behind them (a raw system call, closefrom, dup2) and the kernel
 * given to another file. */
static inline bool sys_ident_is(int fd, dev_t dev, ino_t ino)
{
	dev_t d;
	ino_t i;

	return !sys_ident(fd, &d, &i) && d == dev && i == ino;
}

/* MAP_FAILED with errno, as mmap(2). */
static inline void *sys_mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
#if defined(__s390x__)
	/* s390x's mmap takes its six arguments in a block. */
	unsigned long args[6] = {(unsigned long)addr, len,
				 (unsigned long)prot, (unsigned long)flags,
				 (unsigned long)fd,   (unsigned long)off};

	return (void *)syscall(SYS_mmap, args);
#else
	return (void *)syscall(SYS_mmap, addr, len, (long)prot, (long)flags, (long)fd, (long)off);
#endif
}

#endif
