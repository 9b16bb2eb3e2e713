// SPDX-License-Identifier: MIT
/*
 * libnvmefs-preload.so, continued (client/preload.c has the door's
 * descriptors, and preload_at_dir, the check of one as a directory): the
 * calls that take a descriptor as a directory (the *at family), and the
 * other calls on a door descriptor that the kernel must serve (futimens,
 * the f*xattr calls), which hand the file to it first.
 */
#undef _FILE_OFFSET_BITS
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/types.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "preload_i.h"

static int (*real_mkdirat)(int, const char *, mode_t);
static int (*real_mknodat)(int, const char *, mode_t, dev_t);
static int (*real_mkfifoat)(int, const char *, mode_t);
static int (*real_unlinkat)(int, const char *, int);
static int (*real_renameat)(int, const char *, int, const char *);
static int (*real_renameat2)(int, const char *, int, const char *, unsigned);
static int (*real_linkat)(int, const char *, int, const char *, int);
static int (*real_symlinkat)(const char *, int, const char *);
static ssize_t (*real_readlinkat)(int, const char *, char *, size_t);
static int (*real_fchownat)(int, const char *, uid_t, gid_t, int);
static int (*real_fchmodat)(int, const char *, mode_t, int);
static int (*real_faccessat)(int, const char *, int, int);
static int (*real_utimensat)(int, const char *, const struct timespec *, int);
static int (*real_futimesat)(int, const char *, const struct timeval *);
static int (*real_futimens)(int, const struct timespec *);
static int (*real_name_to_handle_at)(int, const char *, struct file_handle *, int *, int);
static int (*real_execveat)(int, const char *, char *const *, char *const *, int);
static int (*real_fsetxattr)(int, const char *, const void *, size_t, int);
static ssize_t (*real_fgetxattr)(int, const char *, void *, size_t);
static ssize_t (*real_flistxattr)(int, char *, size_t);
static int (*real_fremovexattr)(int, const char *);
static int (*real_futimes)(int, const struct timeval *);
static ssize_t (*real___readlinkat_chk)(int, const char *, char *, size_t, size_t);

/* Its own constructor: REAL() resolves a call made before it ran. */
__attribute__((constructor)) static void at_init(void)
{
	RESOLVE(mkdirat);
	RESOLVE(mknodat);
	RESOLVE(mkfifoat);
	RESOLVE(unlinkat);
	RESOLVE(renameat);
	RESOLVE(renameat2);
	RESOLVE(linkat);
	RESOLVE(symlinkat);
	RESOLVE(readlinkat);
	RESOLVE(fchownat);
	RESOLVE(fchmodat);
	RESOLVE(faccessat);
	RESOLVE(utimensat);
	RESOLVE(futimesat);
	RESOLVE(futimens);
	RESOLVE(name_to_handle_at);
	RESOLVE(execveat);
	RESOLVE(fsetxattr);
	RESOLVE(fgetxattr);
	RESOLVE(flistxattr);
	RESOLVE(fremovexattr);
	RESOLVE(futimes);
	RESOLVE(__readlinkat_chk);
}

KERNEL_CALL(int, futimens, (int fd, const struct timespec t[2]), (fd, t))
KERNEL_CALL(int, futimes, (int fd, const struct timeval t[2]), (fd, t))
KERNEL_CALL(int, fsetxattr, (int fd, const char *name, const void *v, size_t n, int flags),
	    (fd, name, v, n, flags))
KERNEL_CALL(ssize_t, fgetxattr, (int fd, const char *name, void *v, size_t n), (fd, name, v, n))
KERNEL_CALL(ssize_t, flistxattr, (int fd, char *list, size_t n), (fd, list, n))
KERNEL_CALL(int, fremovexattr, (int fd, const char *name), (fd, name))

/* The *at calls: a door descriptor as their directory (at_dir). */
#define AT_CALL(ret_t, name, params, check, args)                                                  \
	EXPORT ret_t name params                                                                   \
	{                                                                                          \
		if (!real_##name) {                                                                \
			errno = ENOSYS; /* not in this libc */                                     \
			return (ret_t)-1;                                                          \
		}                                                                                  \
		if (check)                                                                         \
			return (ret_t)-1;                                                          \
		return REAL(name) args;                                                            \
	}

AT_CALL(int, mkdirat, (int at, const char *path, mode_t mode), preload_at_dir(at, path, 0),
	(at, path, mode))
AT_CALL(int, mknodat, (int at, const char *path, mode_t mode, dev_t dev),
	preload_at_dir(at, path, 0), (at, path, mode, dev))
AT_CALL(int, mkfifoat, (int at, const char *path, mode_t mode), preload_at_dir(at, path, 0),
	(at, path, mode))
AT_CALL(int, unlinkat, (int at, const char *path, int flags), preload_at_dir(at, path, 0),
	(at, path, flags))
AT_CALL(int, renameat, (int at, const char *path, int to, const char *topath),
	preload_at_dir(at, path, 0) || preload_at_dir(to, topath, 0), (at, path, to, topath))
AT_CALL(int, renameat2, (int at, const char *path, int to, const char *topath, unsigned flags),
	preload_at_dir(at, path, 0) || preload_at_dir(to, topath, 0), (at, path, to, topath, flags))
AT_CALL(int, linkat, (int at, const char *path, int to, const char *topath, int flags),
	preload_at_dir(at, path, flags) || preload_at_dir(to, topath, 0),
	(at, path, to, topath, flags))
AT_CALL(int, symlinkat, (const char *target, int at, const char *path), preload_at_dir(at, path, 0),
	(target, at, path))
AT_CALL(ssize_t, readlinkat, (int at, const char *path, char *buf, size_t len),
	preload_at_dir(at, path, 0), (at, path, buf, len))
/* readlinkat of a program built with _FORTIFY_SOURCE (glibc calls its own
 * readlinkat from it, not ours). */
ssize_t __readlinkat_chk(int at, const char *path, char *buf, size_t len, size_t buflen);
AT_CALL(ssize_t, __readlinkat_chk, (int at, const char *path, char *buf, size_t len, size_t buflen),
	preload_at_dir(at, path, 0), (at, path, buf, len, buflen))
AT_CALL(int, fchownat, (int at, const char *path, uid_t uid, gid_t gid, int flags),
	preload_at_dir(at, path, flags), (at, path, uid, gid, flags))
AT_CALL(int, fchmodat, (int at, const char *path, mode_t mode, int flags),
	preload_at_dir(at, path, flags), (at, path, mode, flags))
AT_CALL(int, faccessat, (int at, const char *path, int mode, int flags),
	preload_at_dir(at, path, flags), (at, path, mode, flags))
AT_CALL(int, utimensat, (int at, const char *path, const struct timespec t[2], int flags),
	preload_at_dir(at, path, flags), (at, path, t, flags))
/* futimesat with no path sets the descriptor's own times. */
AT_CALL(int, futimesat, (int at, const char *path, const struct timeval t[2]),
	preload_at_dir(at, path, AT_EMPTY_PATH), (at, path, t))
AT_CALL(int, name_to_handle_at,
	(int at, const char *path, struct file_handle *h, int *mnt_id, int flags),
	preload_at_dir(at, path, flags), (at, path, h, mnt_id, flags))
AT_CALL(int, execveat,
	(int at, const char *path, char *const argv[], char *const envp[], int flags),
	preload_at_dir(at, path, flags), (at, path, argv, envp, flags))
