/* SPDX-License-Identifier: MIT */
/*
 * sys_i.h: the system calls libnvmefs makes on descriptors of its own (its
 * connection, its shared-memory regions), made past any interposer.
 *
 * Inside libnvmefs-preload.so the names close, fcntl, ftruncate and mmap are
 * the create door's own (client/preload.c): they look the descriptor up in
 * the door's table and, for an entry there, take the door's lock. The
 * client runs under that lock (a door write that needs a bounce region),
 * and a number the program closed with a raw system call stays in the
 * table until it is next looked up: a memfd the kernel then gives the
 * library under that number sent its ftruncate to the door, which waited
 * for the lock its own thread held. So the client never calls those names:
 * its descriptors are not the program's, and nothing the door keeps is
 * about them.
 */
#ifndef NVMEFS_CLIENT_SYS_I_H
#define NVMEFS_CLIENT_SYS_I_H

#include <stddef.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <unistd.h>

static inline int sys_close(int fd)
{
	return (int)syscall(SYS_close, fd);
}

/* fcntl with an integer argument (F_GETFD, F_ADD_SEALS, F_DUPFD_CLOEXEC). */
static inline int sys_fcntl(int fd, int cmd, long arg)
{
	return (int)syscall(SYS_fcntl, fd, cmd, arg);
}

static inline int sys_ftruncate(int fd, off_t len)
{
	return (int)syscall(SYS_ftruncate, fd, len);
}

/* MAP_FAILED with errno, as mmap(2). off is a page multiple. */
static inline void *sys_mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
#ifdef SYS_mmap2
	return (void *)syscall(SYS_mmap2, addr, len, prot, flags, fd, off / 4096);
#else
	return (void *)syscall(SYS_mmap, addr, len, prot, flags, fd, off);
#endif
}

#endif
