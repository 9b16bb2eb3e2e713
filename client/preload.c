// SPDX-License-Identifier: MIT
/*
 * libnvmefs-preload.so: the create door for unmodified programs. Loaded with
 * LD_PRELOAD, it serves open(O_CREAT) of a new file on an nvmefs mount, and
 * the writes and close that follow, through the native door (libnvmefs's
 * nvmefs_create and nvmefs_pwrite): one round trip for the create and one
 * per write, where the mount costs a permission check of the directory, a
 * LOOKUP and a CREATE before the first WRITE (docs/NATIVE.md, "The create
 * door for programs"). Everything else goes to libc unchanged, but for
 * O_DIRECT reads, which its read door serves (client/preload_read.c).
 *
 * What it takes: an open or openat (and their 64 and fortified names) with
 * O_CREAT, O_WRONLY and O_CLOEXEC (a descriptor that cannot outlive an
 * exec), none of O_APPEND, O_DIRECT, O_SYNC, O_DSYNC, O_PATH, O_TMPFILE,
 * O_DIRECTORY, a path on a mount whose daemon has a native door, by a
 * process whose real and effective ids agree (the daemon checks the real
 * ones). The name must not exist (the daemon says so without changing it;
 * the open then goes to libc). Anything the door refuses goes to libc.
 *
 * The descriptor the program gets is real: an O_PATH descriptor of the
 * file's directory, so the number is the process's own, the mount stays
 * busy while it is open, and a call this file does not know fails with
 * EBADF rather than acting on something else. The calls it knows on such a
 * descriptor: write, pwrite, writev, lseek, fstat (and statx, fstatat with
 * AT_EMPTY_PATH), fsync, fdatasync, isatty and ioctl, read (EBADF: opened
 * for writing), close, close_range; as the directory of an *at call with a
 * relative path it is ENOTDIR (at_dir). Before any call that needs the
 * file in the kernel (dup, fcntl but F_GETFD/F_SETFD/F_GETFL, ftruncate,
 * fchmod, fchown, fallocate, mmap, fdopen, flock, futimens, the f*xattr
 * calls, an *at call on the file itself, fork, posix_spawn, ...) the file
 * is opened through the mount and put in the descriptor's place
 * ("materialized"): from then on the kernel serves it.
 */
/* Every call under its own name: open is open here, not open64 (the
 * build's large-file flag would rename them; off_t is 64 bits anyway). */
#undef _FILE_OFFSET_BITS
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/sysmacros.h>
#include <sys/time.h>
#include <sys/uio.h>
#include <sys/xattr.h>
#include <termios.h>
#include <unistd.h>

#include "client_i.h"
#include "preload_i.h"
#include "sys_i.h"

/* A descriptor the door serves. */
struct dfile {
	struct nvmefs_client *c;
	dev_t pdev;	/* the placeholder's (the directory's) st_dev and st_ino: */
	ino_t pino;	/* that the number still is ours */
	struct stat st; /* the file's, from CREATE; size as written since */
	uint64_t pos;	/* the file offset */
	bool stale;	/* times changed since st: ask the mount */
	char name[256]; /* in the placeholder's directory, for materializing */
};

/* By descriptor number: allocated whole at the first create and never
 * moved, so that a check without the lock reads no freed memory. A
 * descriptor above it is never the door's. */
#define MAX_FDS PRELOAD_MAX_FDS
static struct dfile **files;
static int nfiles;
static unsigned cur_umask;
static bool disabled; /* NVMEFS_PRELOAD=0 */

/* libc's own. */
static int (*real_openat)(int, const char *, int, ...);
static ssize_t (*real_write)(int, const void *, size_t);
static ssize_t (*real_pwrite)(int, const void *, size_t, off_t);
static ssize_t (*real_writev)(int, const struct iovec *, int);
static ssize_t (*real_read)(int, void *, size_t);
static off_t (*real_lseek)(int, off_t, int);
static int (*real_fstat)(int, struct stat *);
static int (*real_fstatat)(int, const char *, struct stat *, int);
static int (*real_statx)(int, const char *, int, unsigned, struct statx *);
static int (*real_close)(int);
static int (*real_close_range)(unsigned, unsigned, int);
static int (*real_fsync)(int);
static int (*real_fdatasync)(int);
static int (*real_dup)(int);
static int (*real_dup2)(int, int);
static int (*real_dup3)(int, int, int);
static int (*real_fcntl)(int, int, ...);
static int (*real_ioctl)(int, unsigned long, ...);
static int (*real_isatty)(int);
static int (*real_ftruncate)(int, off_t);
static int (*real_fchmod)(int, mode_t);
static int (*real_fchown)(int, uid_t, gid_t);
static int (*real_fallocate)(int, int, off_t, off_t);
static int (*real_posix_fallocate)(int, off_t, off_t);
static void *(*real_mmap)(void *, size_t, int, int, int, off_t);
static FILE *(*real_fdopen)(int, const char *);
static int (*real_flock)(int, int);
static int (*real_fchdir)(int);
static pid_t (*real_fork)(void);
static int (*real_posix_spawn)(pid_t *, const char *, const posix_spawn_file_actions_t *,
			       const posix_spawnattr_t *, char *const[], char *const[]);
static int (*real_posix_spawnp)(pid_t *, const char *, const posix_spawn_file_actions_t *,
				const posix_spawnattr_t *, char *const[], char *const[]);
static mode_t (*real_umask)(mode_t);

static void fork_prepare(void);
static void fork_parent(void);
static void fork_child(void);

__attribute__((constructor)) static void preload_init(void)
{
	const char *e = getenv("NVMEFS_PRELOAD");
	mode_t m;

	RESOLVE(openat);
	RESOLVE(write);
	RESOLVE(pwrite);
	RESOLVE(writev);
	RESOLVE(read);
	RESOLVE(lseek);
	RESOLVE(fstat);
	RESOLVE(fstatat);
	RESOLVE(statx);
	RESOLVE(close);
	RESOLVE(close_range);
	RESOLVE(fsync);
	RESOLVE(fdatasync);
	RESOLVE(dup);
	RESOLVE(dup2);
	RESOLVE(dup3);
	RESOLVE(fcntl);
	RESOLVE(ioctl);
	RESOLVE(isatty);
	RESOLVE(ftruncate);
	RESOLVE(fchmod);
	RESOLVE(fchown);
	RESOLVE(fallocate);
	RESOLVE(posix_fallocate);
	RESOLVE(mmap);
	RESOLVE(fdopen);
	RESOLVE(flock);
	RESOLVE(fchdir);
	RESOLVE(fork);
	RESOLVE(posix_spawn);
	RESOLVE(posix_spawnp);
	RESOLVE(umask);
	preload_read_init();
	disabled = (e && !strcmp(e, "0")) || !real_openat || !real_umask;
	if (!disabled) {
		m = REAL(umask)(022);
		REAL(umask)(m);
		cur_umask = m;
	}
	/* A child gets kernel descriptors only: its copy of a client would
	 * share the parent's connection. */
	pthread_atfork(fork_prepare, fork_parent, fork_child);
}

/* ---- the table ---- */

/* fd's entry (preload_mu held), if fd is still the placeholder it was. */
static struct dfile *lookup(int fd)
{
	struct dfile *f;

	if (fd < 0 || fd >= nfiles || !files[fd])
		return NULL;
	f = files[fd];
	/* A number closed behind our back (a raw close system call) and
	 * reused by the kernel is not ours any more. */
	if (!sys_ident_is(fd, f->pdev, f->pino)) {
		nvmefs_close_fd(f->c, fd);
		free(f);
		__atomic_store_n(&files[fd], NULL, __ATOMIC_RELAXED);
		return NULL;
	}
	return f;
}

/* Whether fd is the door's, checked under the lock (lookup). */
bool preload_door(int fd)
{
	bool door;

	if (!preload_has(fd))
		return false;
	pthread_mutex_lock(&preload_mu);
	door = lookup(fd) != NULL;
	pthread_mutex_unlock(&preload_mu);
	return door;
}

/* Whether fd may be the door's: read without the lock (the table never
 * moves; entries are set and cleared whole). */
bool preload_has(int fd)
{
	return fd >= 0 && fd < __atomic_load_n(&nfiles, __ATOMIC_ACQUIRE) &&
	       __atomic_load_n(&files[fd], __ATOMIC_RELAXED);
}

/* The table, allocated on first use (preload_mu held); NULL without memory. */
static struct dfile **table(void)
{
	if (!files) {
		files = calloc(MAX_FDS, sizeof(*files));
		if (files)
			__atomic_store_n(&nfiles, MAX_FDS, __ATOMIC_RELEASE);
	}
	return files;
}

static void drop(int fd)
{
	struct dfile *f = files[fd];

	nvmefs_close_fd(f->c, fd);
	free(f);
	__atomic_store_n(&files[fd], NULL, __ATOMIC_RELAXED);
}

/*
 * Put the file in the kernel's hands at fd (preload_mu held): opened through the
 * mount by name in its directory, checked to be the same file, moved onto
 * fd's number with the offset kept. 0 or -errno (the file was renamed or
 * removed, or may not be opened for writing again: the descriptor stays
 * the door's).
 */
static int materialize(int fd)
{
	struct dfile *f = files[fd];
	struct stat st;
	int k, ret = 0;

	k = REAL(openat)(fd, f->name, O_WRONLY | O_CLOEXEC | O_NOFOLLOW);
	if (k < 0)
		return -errno;
	if (REAL(fstat)(k, &st) || st.st_ino != f->st.st_ino || st.st_dev != f->st.st_dev)
		ret = -EBADF;
	else if (REAL(lseek)(k, (off_t)f->pos, SEEK_SET) < 0 || REAL(dup3)(k, fd, O_CLOEXEC) < 0)
		ret = -errno;
	REAL(close)(k);
	if (!ret)
		drop(fd);
	return ret;
}

static void materialize_locked(void)
{
	for (int fd = 0; fd < nfiles; fd++)
		if (files[fd] && lookup(fd))
			materialize(fd);
}

static void materialize_all(void)
{
	pthread_mutex_lock(&preload_mu);
	materialize_locked();
	pthread_mutex_unlock(&preload_mu);
}

/* fork: every door descriptor to the kernel, and the lock held across, so
 * that the child finds it free and the table empty. */
static void fork_prepare(void)
{
	pthread_mutex_lock(&preload_mu);
	materialize_locked();
}

static void fork_parent(void)
{
	pthread_mutex_unlock(&preload_mu);
}

/* The child's copies of the connections are the parent's: it forgets
 * every door descriptor (one that could not be materialized stays an
 * O_PATH descriptor: its calls fail with EBADF), closes its copies, and
 * attaches anew if it creates. */
static void fork_child(void)
{
	for (int fd = 0; fd < nfiles; fd++) {
		free(files[fd]);
		files[fd] = NULL;
	}
	preload_mounts_fork_child();
	preload_read_fork_child();
	pthread_mutex_unlock(&preload_mu);
}

/* Before a call the kernel must serve: fd in the kernel's hands. -1 with
 * errno when it cannot be. */
int preload_need_kernel(int fd)
{
	int ret = 0;

	pthread_mutex_lock(&preload_mu);
	if (preload_has(fd) && lookup(fd))
		ret = materialize(fd);
	pthread_mutex_unlock(&preload_mu);
	if (ret) {
		errno = -ret;
		return -1;
	}
	return 0;
}

/*
 * The *at calls start a relative path at a descriptor. A door descriptor is
 * an O_PATH descriptor of the file's directory inside, so the kernel would
 * resolve the path there: unlinkat(fd, "x", 0) on a file's descriptor
 * removed the directory's x, where without the door the answer is
 * ENOTDIR. 0: let the call through (not the door's, an absolute path, no
 * path, or the file itself: an empty path with AT_EMPTY_PATH, and the file
 * is in the kernel's hands now); -1 with errno otherwise.
 */
__attribute__((noinline)) int preload_at_dir(int at, const char *path, int flags)
{
	if ((path && path[0] == '/') || !preload_door(at))
		return 0;
	/* No name (AT_EMPTY_PATH; NULL too since Linux 6.11): the file. */
	if ((!path || !path[0]) && (flags & AT_EMPTY_PATH))
		return preload_need_kernel(at);
	/* NULL: the call's own error (EFAULT; EINVAL for utimensat in glibc). */
	if (!path)
		return 0;
	errno = path[0] ? ENOTDIR : ENOENT;
	return -1;
}

/* ---- the create ---- */

/* fd's entry with the lock held, or NULL (the lock not held): not the
 * door's, libc's then. */
static struct dfile *enter(int fd)
{
	struct dfile *f;

	if (!preload_has(fd))
		return NULL;
	pthread_mutex_lock(&preload_mu);
	f = lookup(fd);
	if (!f)
		pthread_mutex_unlock(&preload_mu);
	return f;
}

#define DOOR_FLAGS (O_ACCMODE | O_CREAT | O_CLOEXEC)
#define NOT_DOOR   (O_APPEND | O_DIRECT | O_DSYNC | O_SYNC | O_PATH | O_DIRECTORY | __O_TMPFILE)

/* open(O_CREAT) of path relative to at: the door's descriptor, or -1 with
 * errno, or -2: not the door's, libc's then. */
static int door_create(int at, const char *path, int flags, mode_t mode)
{
	const char *slash = strrchr(path, '/'), *name = slash ? slash + 1 : path;
	uid_t ru, eu, su;
	gid_t rg, eg, sg;
	char dir[PATH_MAX];
	struct dfile *f;
	dev_t dev;
	ino_t ino;
	int d, ret;

	if (disabled || (flags & DOOR_FLAGS) != (O_WRONLY | O_CREAT | O_CLOEXEC) ||
	    (flags & NOT_DOOR))
		return -2;
	if (!*name || strlen(name) > NVMEFS_WIRE_NAME_MAX || !strcmp(name, ".") ||
	    !strcmp(name, ".."))
		return -2;
	if (getresuid(&ru, &eu, &su) || getresgid(&rg, &eg, &sg) || ru != eu || rg != eg)
		return -2;
	if (!slash) {
		strcpy(dir, ".");
	} else if (slash == path) {
		strcpy(dir, "/");
	} else {
		if ((size_t)(slash - path) >= sizeof(dir))
			return -2;
		memcpy(dir, path, (size_t)(slash - path));
		dir[slash - path] = '\0';
	}
	d = REAL(openat)(at, dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (d < 0)
		return -2; /* libc says why */
	if (sys_ident(d, &dev, &ino)) {
		REAL(close)(d);
		return -2;
	}
	f = calloc(1, sizeof(*f));
	pthread_mutex_lock(&preload_mu);
	if (f && d < MAX_FDS && table())
		f->c = preload_client(dev, d);
	if (!f || !f->c) {
		pthread_mutex_unlock(&preload_mu);
		free(f);
		REAL(close)(d);
		return -2;
	}
	/* The directory's descriptor is the program's: its number, and what
	 * keeps the mount busy while the file is open. */
	/* A number closed behind our back and given out again. */
	if (files[d])
		drop(d);
	ret = nvmefs_create(f->c, d, name, flags, mode, cur_umask, d, &f->st);
	if (!ret) {
		f->pdev = dev;
		f->pino = ino;
		strcpy(f->name, name);
		__atomic_store_n(&files[d], f, __ATOMIC_RELAXED);
	}
	pthread_mutex_unlock(&preload_mu);
	/* Whatever the door refuses the kernel answers, with its own errno
	 * and its own order of checks: an existing name (EEXIST from the door,
	 * opened or refused there), a directory only root's capabilities let
	 * it write, flags or ACLs the door does not serve, a full volume. */
	if (ret) {
		free(f);
		REAL(close)(d);
		return -2;
	}
	return d;
}

EXPORT int openat(int at, const char *path, int flags, ...)
{
	va_list ap;
	mode_t mode;
	int fd;

	if (preload_at_dir(at, path, 0))
		return -1;
	va_start(ap, flags);
	mode = (flags & O_CREAT) || (flags & __O_TMPFILE) == __O_TMPFILE ? va_arg(ap, mode_t) : 0;
	va_end(ap);
	fd = (flags & O_CREAT) && !preload_null_path(path) ? door_create(at, path, flags, mode)
							   : -2;
	if (fd != -2)
		return fd;
	fd = REAL(openat)(at, path, flags, mode);
	if (fd >= 0 && (flags & O_DIRECT) && !disabled)
		preload_read_open(fd, flags);
	return fd;
}

/* open(2) is openat(2) from the working directory. */
EXPORT int open(const char *path, int flags, ...)
{
	va_list ap;
	mode_t mode;

	va_start(ap, flags);
	mode = (flags & O_CREAT) || (flags & __O_TMPFILE) == __O_TMPFILE ? va_arg(ap, mode_t) : 0;
	va_end(ap);
	return openat(AT_FDCWD, path, flags, mode);
}

EXPORT int open64(const char *path, int flags, ...) __attribute__((alias("open")));
EXPORT int openat64(int at, const char *path, int flags, ...) __attribute__((alias("openat")));

int __open_2(const char *path, int flags);
int __openat_2(int at, const char *path, int flags);

EXPORT int __open_2(const char *path, int flags)
{
	return open(path, flags);
}

EXPORT int __open64_2(const char *path, int flags) __attribute__((alias("__open_2")));

EXPORT int __openat_2(int at, const char *path, int flags)
{
	return openat(at, path, flags);
}

EXPORT int __openat64_2(int at, const char *path, int flags) __attribute__((alias("__openat_2")));

EXPORT int creat(const char *path, mode_t mode)
{
	return open(path, O_WRONLY | O_CREAT | O_TRUNC, mode);
}

EXPORT int creat64(const char *path, mode_t mode) __attribute__((alias("creat")));

EXPORT mode_t umask(mode_t mask)
{
	mode_t old = REAL(umask)(mask);

	cur_umask = mask & 0777;
	return old;
}

/* ---- data ---- */

/* Write len bytes at off (preload_mu held): the bytes written or -1 with errno. */
static ssize_t door_pwrite(int fd, struct dfile *f, const void *buf, size_t len, uint64_t off)
{
	ssize_t n;

	if (!len)
		return 0;
	/* As a small write through the mount: answered early, a device
	 * failure reported by the next fsync (the door's files are opened
	 * without O_DIRECT, O_SYNC and O_DSYNC). */
	n = nvmefs_cl_pwrite_behind(f->c, fd, buf, len, off);
	if (n < 0) {
		errno = n == -ENOTCONN ? EIO : (int)-n; /* the daemon is gone */
		return -1;
	}
	if (off + (uint64_t)n > (uint64_t)f->st.st_size)
		f->st.st_size = (off_t)(off + (uint64_t)n);
	f->stale = true;
	return n;
}

EXPORT ssize_t write(int fd, const void *buf, size_t len)
{
	struct dfile *f;
	ssize_t n;

	f = enter(fd);
	if (!f)
		return REAL(write)(fd, buf, len);
	n = door_pwrite(fd, f, buf, len, f->pos);
	if (n > 0)
		f->pos += (uint64_t)n;
	pthread_mutex_unlock(&preload_mu);
	return n;
}

EXPORT ssize_t pwrite(int fd, const void *buf, size_t len, off_t off)
{
	struct dfile *f;
	ssize_t n;

	f = enter(fd);
	if (!f)
		return REAL(pwrite)(fd, buf, len, off);
	if (off < 0) {
		pthread_mutex_unlock(&preload_mu);
		errno = EINVAL;
		return -1;
	}
	n = door_pwrite(fd, f, buf, len, (uint64_t)off);
	pthread_mutex_unlock(&preload_mu);
	return n;
}

EXPORT ssize_t pwrite64(int fd, const void *buf, size_t len, off_t off)
	__attribute__((alias("pwrite")));

EXPORT ssize_t writev(int fd, const struct iovec *iov, int cnt)
{
	ssize_t done = 0;

	if (!preload_has(fd))
		return REAL(writev)(fd, iov, cnt);
	for (int i = 0; i < cnt; i++) {
		ssize_t n = write(fd, iov[i].iov_base, iov[i].iov_len);

		if (n < 0)
			return done ? done : -1;
		done += n;
		if ((size_t)n < iov[i].iov_len)
			break;
	}
	return done;
}

EXPORT ssize_t read(int fd, void *buf, size_t len)
{
	struct dfile *f = enter(fd);
	off_t pos;
	ssize_t n;

	if (f) {
		pthread_mutex_unlock(&preload_mu);
		errno = EBADF; /* opened for writing only */
		return -1;
	}
	/* The read door's file: a pread at the file offset, which then moves. */
	if (!preload_rd_fd(fd) || (pos = REAL(lseek)(fd, 0, SEEK_CUR)) < 0 ||
	    (n = preload_rd_pread(fd, buf, len, pos)) == -2)
		return REAL(read)(fd, buf, len);
	if (n > 0 && REAL(lseek)(fd, pos + n, SEEK_SET) < 0)
		return -1;
	return n;
}

EXPORT off_t lseek(int fd, off_t off, int whence)
{
	struct dfile *f;
	int64_t base;

	f = enter(fd);
	if (!f)
		return REAL(lseek)(fd, off, whence);
	switch (whence) {
	case SEEK_SET:
		base = 0;
		break;
	case SEEK_CUR:
		base = (int64_t)f->pos;
		break;
	case SEEK_END:
		base = f->st.st_size;
		break;
	case SEEK_DATA:
	case SEEK_HOLE:
		if (off < 0 || off >= f->st.st_size) {
			pthread_mutex_unlock(&preload_mu);
			errno = ENXIO;
			return -1;
		}
		/* Conservatively: data everywhere, the hole at the end. */
		base = 0;
		if (whence == SEEK_HOLE)
			off = f->st.st_size;
		break;
	default:
		pthread_mutex_unlock(&preload_mu);
		errno = EINVAL;
		return -1;
	}
	if (base + off < 0) {
		pthread_mutex_unlock(&preload_mu);
		errno = EINVAL;
		return -1;
	}
	f->pos = (uint64_t)(base + off);
	pthread_mutex_unlock(&preload_mu);
	return (off_t)f->pos;
}

EXPORT off_t lseek64(int fd, off_t off, int whence) __attribute__((alias("lseek")));

/* The file's attributes (preload_mu held): from CREATE while nothing changed its
 * times, else through the mount by name (the kernel then holds the file,
 * and later writes tell it). */
static int door_stat(int fd, struct dfile *f, struct stat *st)
{
	struct stat k;

	if (f->stale) {
		if (REAL(fstatat)(fd, f->name, &k, AT_SYMLINK_NOFOLLOW))
			return -1;
		if (k.st_ino != f->st.st_ino) {
			errno = ESTALE; /* renamed over or removed since */
			return -1;
		}
		f->st = k;
		f->stale = false;
	}
	*st = f->st;
	return 0;
}

EXPORT int fstat(int fd, struct stat *st)
{
	struct dfile *f;
	int ret;

	if (!preload_has(fd))
		return REAL(fstat)(fd, st);
	pthread_mutex_lock(&preload_mu);
	f = lookup(fd);
	ret = f ? door_stat(fd, f, st) : REAL(fstat)(fd, st);
	pthread_mutex_unlock(&preload_mu);
	return ret;
}

EXPORT int fstat64(int fd, struct stat64 *st)
{
	return fstat(fd, (struct stat *)st);
}

EXPORT int fstatat(int at, const char *path, struct stat *st, int flags)
{
	if ((flags & AT_EMPTY_PATH) && preload_empty_path(path) && preload_has(at))
		return fstat(at, st);
	if (preload_at_dir(at, path, flags))
		return -1;
	return REAL(fstatat)(at, path, st, flags);
}

EXPORT int fstatat64(int at, const char *path, struct stat64 *st, int flags)
{
	return fstatat(at, path, (struct stat *)st, flags);
}

EXPORT int statx(int at, const char *path, int flags, unsigned mask, struct statx *sx)
{
	struct stat st;

	if (!((flags & AT_EMPTY_PATH) && preload_empty_path(path) && preload_has(at)))
		return preload_at_dir(at, path, flags) ? -1
						       : REAL(statx)(at, path, flags, mask, sx);
	if (fstat(at, &st))
		return -1;
	*sx = (struct statx){
		.stx_mask = STATX_BASIC_STATS,
		.stx_blksize = (uint32_t)st.st_blksize,
		.stx_nlink = (uint32_t)st.st_nlink,
		.stx_uid = st.st_uid,
		.stx_gid = st.st_gid,
		.stx_mode = (uint16_t)st.st_mode,
		.stx_ino = st.st_ino,
		.stx_size = (uint64_t)st.st_size,
		.stx_blocks = (uint64_t)st.st_blocks,
		.stx_atime = {st.st_atim.tv_sec, (uint32_t)st.st_atim.tv_nsec},
		.stx_mtime = {st.st_mtim.tv_sec, (uint32_t)st.st_mtim.tv_nsec},
		.stx_ctime = {st.st_ctim.tv_sec, (uint32_t)st.st_ctim.tv_nsec},
		.stx_dev_major = major(st.st_dev),
		.stx_dev_minor = minor(st.st_dev),
	};
	return 0;
}

static int door_fsync(int fd, int (*libc)(int))
{
	struct dfile *f;
	int ret;

	if (!preload_has(fd))
		return libc(fd);
	pthread_mutex_lock(&preload_mu);
	f = lookup(fd);
	ret = f ? nvmefs_fsync(f->c, fd) : 1;
	pthread_mutex_unlock(&preload_mu);
	if (ret == 1)
		return libc(fd);
	if (ret) {
		errno = -ret;
		return -1;
	}
	return 0;
}

EXPORT int fsync(int fd)
{
	return door_fsync(fd, real_fsync);
}

EXPORT int fdatasync(int fd)
{
	return door_fsync(fd, real_fdatasync);
}

EXPORT int close(int fd)
{
	if (preload_fd_ours(fd)) {
		errno = EBADF; /* the library's, never the program's */
		return -1;
	}
	if (preload_has(fd)) {
		pthread_mutex_lock(&preload_mu);
		if (preload_has(fd))
			drop(fd);
		pthread_mutex_unlock(&preload_mu);
	}
	preload_read_close(fd);
	return REAL(close)(fd);
}

EXPORT int close_range(unsigned first, unsigned last, int flags)
{
	/* With CLOSE_RANGE_UNSHARE the descriptors close in a table of this
	 * thread's own: the others' stay (a stale entry is found later). */
	bool closes = !(flags & (CLOSE_RANGE_CLOEXEC | CLOSE_RANGE_UNSHARE));

	pthread_mutex_lock(&preload_mu);
	for (unsigned fd = first; closes && fd <= last && fd < (unsigned)nfiles; fd++)
		if (files[fd])
			drop((int)fd);
	pthread_mutex_unlock(&preload_mu);
	for (unsigned fd = first; closes && fd <= last && fd < MAX_FDS; fd++)
		preload_read_close((int)fd);
	return preload_fd_close_range(first, last, flags, real_close_range);
}

/* glibc's closefrom closes with its own system call: our close_range
 * instead, which goes around the library's descriptors. */
EXPORT void closefrom(int low)
{
	long max = sysconf(_SC_OPEN_MAX);

	if (low < 0 || !close_range((unsigned)low, ~0u, 0))
		return;
	for (long fd = low; fd < (max > 0 ? max : MAX_FDS); fd++)
		close((int)fd);
}

EXPORT int isatty(int fd)
{
	if (preload_has(fd)) {
		errno = ENOTTY;
		return 0;
	}
	return REAL(isatty)(fd);
}

EXPORT int ioctl(int fd, unsigned long req, ...)
{
	va_list ap;
	void *arg;

	va_start(ap, req);
	arg = va_arg(ap, void *);
	va_end(ap);
	if (preload_has(fd)) {
		if (req == TCGETS) {
			errno = ENOTTY;
			return -1;
		}
		if (preload_need_kernel(fd))
			return -1;
	}
	return REAL(ioctl)(fd, req, arg);
}

EXPORT int fcntl(int fd, int cmd, ...)
{
	va_list ap;
	void *arg;

	va_start(ap, cmd);
	arg = va_arg(ap, void *);
	va_end(ap);
	if (preload_has(fd)) {
		if (cmd == F_GETFL)
			return O_WRONLY | O_LARGEFILE;
		/* Clearing FD_CLOEXEC lets the file cross an exec: the kernel's. */
		if ((cmd != F_GETFD && (cmd != F_SETFD || !((uintptr_t)arg & FD_CLOEXEC))) &&
		    preload_need_kernel(fd))
			return -1;
	}
	if (cmd == F_DUPFD || cmd == F_DUPFD_CLOEXEC) {
		int to = REAL(fcntl)(fd, cmd, arg);

		if (to >= 0)
			preload_read_dup(fd, to);
		return to;
	}
	return REAL(fcntl)(fd, cmd, arg);
}

EXPORT int fcntl64(int fd, int cmd, ...) __attribute__((alias("fcntl")));

/* Calls the kernel must serve: the file goes to it first. */
_Static_assert(sizeof(struct stat) == sizeof(struct stat64), "stat and stat64 are one");
_Static_assert(sizeof(off_t) == sizeof(off64_t), "off_t is 64 bits");

EXPORT int dup(int fd)
{
	int to;

	if (preload_has(fd) && preload_need_kernel(fd))
		return -1;
	to = REAL(dup)(fd);
	if (to >= 0)
		preload_read_dup(fd, to);
	return to;
}

/*
 * dup2 and dup3 close what was at to: a door descriptor there is closed as
 * by close(2) once the call has succeeded (a failed one leaves to as it
 * was), under the lock, so that no call on to in between is served as the
 * door's file (the new descriptor may be its directory, which lookup()
 * would take for the placeholder). One of the library's own descriptors
 * at to moves out of the way first, in the same hold of the lock.
 */
static int dup_onto(int fd, int to, int flags, bool three)
{
	int ret, moved;

	if (preload_has(fd) && preload_need_kernel(fd))
		return -1;
	if (fd == to)
		return three ? REAL(dup3)(fd, to, flags) : REAL(dup2)(fd, to);
	preload_read_close(to);
	pthread_mutex_lock(&preload_mu);
	moved = preload_rd_evict_locked(to);
	preload_mounts_renumber(to, moved);
	ret = three ? REAL(dup3)(fd, to, flags) : REAL(dup2)(fd, to);
	if (ret >= 0 && preload_has(to) && files[to])
		drop(to);
	pthread_mutex_unlock(&preload_mu);
	if (ret >= 0)
		preload_read_dup(fd, to);
	return ret;
}

EXPORT int dup2(int fd, int to)
{
	return dup_onto(fd, to, 0, false);
}

EXPORT int dup3(int fd, int to, int flags)
{
	return dup_onto(fd, to, flags, true);
}
KERNEL_CALL(int, ftruncate, (int fd, off_t len), (fd, len))
KERNEL_CALL(int, fchmod, (int fd, mode_t mode), (fd, mode))
KERNEL_CALL(int, fchown, (int fd, uid_t uid, gid_t gid), (fd, uid, gid))
KERNEL_CALL(int, fallocate, (int fd, int mode, off_t off, off_t len), (fd, mode, off, len))
KERNEL_CALL(int, flock, (int fd, int op), (fd, op))

EXPORT int ftruncate64(int fd, off_t len) __attribute__((alias("ftruncate")));
EXPORT int fallocate64(int fd, int mode, off_t off, off_t len) __attribute__((alias("fallocate")));

EXPORT int posix_fallocate(int fd, off_t off, off_t len)
{
	if (preload_has(fd) && preload_need_kernel(fd))
		return errno;
	return REAL(posix_fallocate)(fd, off, len);
}

EXPORT int posix_fallocate64(int fd, off_t off, off_t len)
	__attribute__((alias("posix_fallocate")));

EXPORT void *mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
	if (!(flags & MAP_ANONYMOUS) && preload_has(fd) && preload_need_kernel(fd))
		return MAP_FAILED;
	return REAL(mmap)(addr, len, prot, flags, fd, off);
}

EXPORT void *mmap64(void *addr, size_t len, int prot, int flags, int fd, off_t off)
	__attribute__((alias("mmap")));

EXPORT FILE *fdopen(int fd, const char *mode)
{
	if (preload_has(fd) && preload_need_kernel(fd))
		return NULL;
	return REAL(fdopen)(fd, mode);
}

EXPORT int fchdir(int fd)
{
	if (preload_has(fd)) {
		errno = ENOTDIR;
		return -1;
	}
	return REAL(fchdir)(fd);
}

/* ---- processes ---- */

/* vfork's child would share our memory and connections: a fork, after
 * every door descriptor went to the kernel (pthread_atfork). */
EXPORT pid_t vfork(void)
{
	return REAL(fork)();
}

EXPORT int posix_spawn(pid_t *pid, const char *path, const posix_spawn_file_actions_t *fa,
		       const posix_spawnattr_t *attr, char *const argv[], char *const envp[])
{
	materialize_all();
	return REAL(posix_spawn)(pid, path, fa, attr, argv, envp);
}

EXPORT int posix_spawnp(pid_t *pid, const char *file, const posix_spawn_file_actions_t *fa,
			const posix_spawnattr_t *attr, char *const argv[], char *const envp[])
{
	materialize_all();
	return REAL(posix_spawnp)(pid, file, fa, attr, argv, envp);
}
