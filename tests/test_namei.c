// SPDX-License-Identifier: MIT
/*
 * The namespace rules of the core (fs/core/namei.h), called as a door calls
 * them, on image files formatted by mkfs.nvmefs: no kernel mount, no
 * /dev/fuse, no root. Creating every kind of inode, owners by the caller's
 * ids and setgid directories, links and link counts, unlink and rmdir,
 * rename with NOREPLACE and EXCHANGE (link counts of both parents), setattr,
 * extended attributes, what a write takes away, an unlinked file kept by
 * its open handle, ENAMETOOLONG, EEXIST, ENOSPC; then all of it again after
 * the volume is closed and opened, and fsck.nvmefs -n clean. With the
 * shadow store on (test_vol.h), every commit compares format v2's keys
 * with the maps; and a mismatch made on purpose (an attribute, a summary
 * field, a stray key, a missing key, a changed xattr) must be caught, with
 * the key named, so that the crosscheck cannot pass by checking nothing.
 * After every call of the core, a walk of the inodes checks that it left no
 * operation reference behind (fs/core/icache.c). The kernel's lookup
 * counts: forgets of unknown inodes and of more than is held, a freed inode
 * kept until its last forget, what pins an inode, the table's growth and
 * deletions. chattr's flags: who may set which, and what immutable,
 * append-only and noatime refuse or leave, on files and directories, kept
 * across the reopen. Every change refused with EROFS on a volume remounted
 * read-only, and with EIO once it is shut down (FS_IOC_SHUTDOWN).
 *
 * usage: test_namei BUILD_DIR   (for BUILD_DIR/mkfs.nvmefs and fsck.nvmefs)
 */
#include <fcntl.h>
#include <linux/falloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "fs_i.h"
#include "icache_i.h"
#include "journal_i.h"
#include "meta_i.h"
#include "namei.h"
#include "store.h"
#include "volume_i.h"
#include "xlayout_i.h"
#include "test_vol.h"

#define ROOT NVMEFS_ROOT_INO

/* What a call returned, after checking that it left no reference. */
static long idle_after(struct nvmefs_vol *vol, long ret, int line)
{
	int bad;

	pthread_mutex_lock(&vol->lock);
	bad = nvmefs_icache_check(vol, true);
	pthread_mutex_unlock(&vol->lock);
	CHECKF(bad == 0, "the call at line %d left references behind", line);
	return ret;
}

/*
 * Each call of the namespace API below is checked by idle_after. The
 * macros take the functions' own names: a function-like macro is not
 * expanded again inside its own expansion, so each still calls the
 * function. (nvmefs_ns_get and nvmefs_ns_put are not wrapped: a reference
 * between them is the point.)
 */
#define IDLE(vol, call)		     idle_after(vol, (long)(call), __LINE__)
#define IDLE_VOID(vol, call)	     ((void)(call), (void)idle_after(vol, 0, __LINE__))
#define nvmefs_ns_lookup(v, ...)     IDLE(v, nvmefs_ns_lookup(v, __VA_ARGS__))
#define nvmefs_ns_forget(v, ...)     IDLE_VOID(v, nvmefs_ns_forget(v, __VA_ARGS__))
#define nvmefs_ns_getattr(v, ...)    IDLE(v, nvmefs_ns_getattr(v, __VA_ARGS__))
#define nvmefs_ns_setattr(v, ...)    IDLE(v, nvmefs_ns_setattr(v, __VA_ARGS__))
#define nvmefs_ns_readlink(v, ...)   IDLE(v, nvmefs_ns_readlink(v, __VA_ARGS__))
#define nvmefs_ns_mknod(v, ...)	     IDLE(v, nvmefs_ns_mknod(v, __VA_ARGS__))
#define nvmefs_ns_link(v, ...)	     IDLE(v, nvmefs_ns_link(v, __VA_ARGS__))
#define nvmefs_ns_unlink(v, ...)     IDLE(v, nvmefs_ns_unlink(v, __VA_ARGS__))
#define nvmefs_ns_rmdir(v, ...)	     IDLE(v, nvmefs_ns_rmdir(v, __VA_ARGS__))
#define nvmefs_ns_rename(v, ...)     IDLE(v, nvmefs_ns_rename(v, __VA_ARGS__))
#define nvmefs_ns_open(v, ...)	     IDLE(v, nvmefs_ns_open(v, __VA_ARGS__))
#define nvmefs_ns_create(v, ...)     IDLE(v, nvmefs_ns_create(v, __VA_ARGS__))
#define nvmefs_ns_release(v, ...)    IDLE_VOID(v, nvmefs_ns_release(v, __VA_ARGS__))
#define nvmefs_ns_kill_privs(v, ...) IDLE(v, nvmefs_ns_kill_privs(v, __VA_ARGS__))
#define nvmefs_ns_opendir(v, ...)    IDLE(v, nvmefs_ns_opendir(v, __VA_ARGS__))
#define nvmefs_ns_readdir(v, ...)    IDLE(v, nvmefs_ns_readdir(v, __VA_ARGS__))
#define nvmefs_xattr_set(v, ...)     IDLE(v, nvmefs_xattr_set(v, __VA_ARGS__))
#define nvmefs_xattr_get(v, ...)     IDLE(v, nvmefs_xattr_get(v, __VA_ARGS__))
#define nvmefs_xattr_list(v, ...)    IDLE(v, nvmefs_xattr_list(v, __VA_ARGS__))
#define nvmefs_xattr_remove(v, ...)  IDLE(v, nvmefs_xattr_remove(v, __VA_ARGS__))
#define nvmefs_ns_getflags(v, ...)   IDLE(v, nvmefs_ns_getflags(v, __VA_ARGS__))
#define nvmefs_ns_setflags(v, ...)   IDLE(v, nvmefs_ns_setflags(v, __VA_ARGS__))
#define nvmefs_ns_fallocate(v, ...)  IDLE(v, nvmefs_ns_fallocate(v, __VA_ARGS__))

static const struct nvmefs_cred alice = {.uid = 1000, .gid = 1000};
static const struct nvmefs_cred root = {.uid = 0, .gid = 0};
static const struct nvmefs_cred bob = {.uid = 1001, .gid = 1001};

/* name in parent: its inode number, or 0 (and the errno in *err). */
static uint64_t ino_of(struct nvmefs_vol *vol, uint64_t parent, const char *name)
{
	struct stat st;

	if (nvmefs_ns_lookup(vol, parent, name, &st))
		return 0;
	nvmefs_ns_forget(vol, st.st_ino, 1);
	return st.st_ino;
}

static struct stat attr_of(struct nvmefs_vol *vol, uint64_t ino)
{
	struct stat st = {0};

	CHECK_ERR(nvmefs_ns_getattr(vol, ino, &st), 0);
	return st;
}

static uint64_t mk(struct nvmefs_vol *vol, const struct nvmefs_cred *c, uint64_t parent,
		   const char *name, mode_t mode)
{
	struct stat st = {0};
	int ret = nvmefs_ns_mknod(vol, c, parent, name, mode, 0, NULL, &st);

	CHECKF(ret == 0, "mknod %s: %s", name, strerror(-ret));
	if (ret)
		return 0;
	nvmefs_ns_forget(vol, st.st_ino, 1);
	return st.st_ino;
}

static void test_create(struct nvmefs_vol *vol)
{
	char long_name[NVMEFS_NAME_MAX + 2], long_target[NVMEFS_SYMLINK_MAX + 2];
	struct stat st;
	uint64_t d, f;

	d = mk(vol, &alice, ROOT, "c", S_IFDIR | 0755);
	CHECK(attr_of(vol, d).st_nlink == 2 && attr_of(vol, ROOT).st_nlink == 3);
	CHECK(attr_of(vol, d).st_uid == 1000 && attr_of(vol, d).st_gid == 1000);
	f = mk(vol, &alice, d, "file", S_IFREG | 0640);
	CHECK(S_ISREG(attr_of(vol, f).st_mode) && (attr_of(vol, f).st_mode & 07777) == 0640);
	CHECK(attr_of(vol, d).st_nlink == 2); /* a file is no subdirectory */
	mk(vol, &alice, d, "fifo", S_IFIFO | 0600);
	mk(vol, &alice, d, "sock", S_IFSOCK | 0600);
	CHECK_ERR(nvmefs_ns_mknod(vol, &alice, d, "chr", S_IFCHR | 0600, makedev(1, 3), NULL, &st),
		  0);
	CHECK(S_ISCHR(st.st_mode) && st.st_rdev == makedev(1, 3));
	nvmefs_ns_forget(vol, st.st_ino, 1);
	CHECK_ERR(nvmefs_ns_mknod(vol, &alice, d, "ln", S_IFLNK, 0, "file", &st), 0);
	CHECK(S_ISLNK(st.st_mode) && st.st_size == 4);
	nvmefs_ns_forget(vol, st.st_ino, 1);
	{
		char *t = NULL;

		CHECK_ERR(nvmefs_ns_readlink(vol, ino_of(vol, d, "ln"), &t), 0);
		CHECK(t && !strcmp(t, "file"));
		free(t);
		CHECK_ERR(nvmefs_ns_readlink(vol, f, &t), -EINVAL);
	}
	/* errors */
	CHECK_ERR(nvmefs_ns_mknod(vol, &alice, d, "file", S_IFREG | 0600, 0, NULL, &st), -EEXIST);
	CHECK_ERR(nvmefs_ns_mknod(vol, &alice, f, "x", S_IFREG | 0600, 0, NULL, &st), -ENOTDIR);
	CHECK_ERR(nvmefs_ns_mknod(vol, &alice, 999999, "x", S_IFREG, 0, NULL, &st), -ENOENT);
	CHECK_ERR(nvmefs_ns_mknod(vol, &alice, ROOT, NVMEFS_CTL_NAME, S_IFREG, 0, NULL, &st),
		  -EEXIST);
	CHECK_ERR(nvmefs_ns_mknod(vol, &alice, d, "bad", 0170000, 0, NULL, &st), -EINVAL);
	memset(long_name, 'n', sizeof(long_name) - 1);
	long_name[sizeof(long_name) - 1] = 0;
	CHECK_ERR(nvmefs_ns_mknod(vol, &alice, d, long_name, S_IFREG, 0, NULL, &st), -ENAMETOOLONG);
	CHECK_ERR(nvmefs_ns_lookup(vol, d, long_name, &st), -ENAMETOOLONG);
	long_name[NVMEFS_NAME_MAX] = 0; /* 255: fits */
	CHECK(mk(vol, &alice, d, long_name, S_IFREG | 0600) != 0);
	CHECK_ERR(nvmefs_ns_mknod(vol, &alice, d, "empty", S_IFLNK, 0, "", &st), -ENOENT);
	memset(long_target, 't', sizeof(long_target) - 1);
	long_target[sizeof(long_target) - 1] = 0;
	CHECK_ERR(nvmefs_ns_mknod(vol, &alice, d, "lt", S_IFLNK, 0, long_target, &st),
		  -ENAMETOOLONG);
	CHECK_ERR(nvmefs_ns_lookup(vol, d, "none", &st), -ENOENT);
}

/* BSD group semantics in setgid directories, as Linux has them. */
static void test_setgid_dir(struct nvmefs_vol *vol)
{
	struct stat attr = {.st_mode = 02775, .st_gid = 50};
	struct stat st;
	uint64_t d, f, sub;

	d = mk(vol, &root, ROOT, "sg", S_IFDIR | 0775);
	CHECK_ERR(nvmefs_ns_setattr(vol, NULL, d, &attr, NVMEFS_SET_MODE | NVMEFS_SET_GID, &st), 0);
	CHECK((st.st_mode & 07777) == 02775 && st.st_gid == 50);
	f = mk(vol, &alice, d, "f", S_IFREG | 0644);
	sub = mk(vol, &alice, d, "sub", S_IFDIR | 0755);
	CHECK(attr_of(vol, f).st_uid == 1000 && attr_of(vol, f).st_gid == 50);
	CHECK(attr_of(vol, sub).st_gid == 50 && (attr_of(vol, sub).st_mode & S_ISGID));
	CHECK(!(attr_of(vol, f).st_mode & S_ISGID));
}

static void test_links(struct nvmefs_vol *vol)
{
	uint64_t d = mk(vol, &alice, ROOT, "l", S_IFDIR | 0755);
	uint64_t f = mk(vol, &alice, d, "f", S_IFREG | 0644);
	uint64_t sub = mk(vol, &alice, d, "sub", S_IFDIR | 0755);
	struct stat st;

	CHECK_ERR(nvmefs_ns_link(vol, f, d, "f2", &st), 0);
	CHECK(st.st_ino == f && st.st_nlink == 2);
	nvmefs_ns_forget(vol, f, 1);
	CHECK_ERR(nvmefs_ns_link(vol, f, d, "f2", &st), -EEXIST);
	CHECK_ERR(nvmefs_ns_link(vol, sub, d, "sub2", &st), -EPERM);
	CHECK_ERR(nvmefs_ns_unlink(vol, d, "f"), 0);
	CHECK(attr_of(vol, f).st_nlink == 1 && ino_of(vol, d, "f2") == f);
	CHECK_ERR(nvmefs_ns_unlink(vol, d, "f"), -ENOENT);
	CHECK_ERR(nvmefs_ns_unlink(vol, d, "sub"), -EISDIR);
	CHECK_ERR(nvmefs_ns_rmdir(vol, d, "f2"), -ENOTDIR);
	mk(vol, &alice, sub, "in", S_IFREG | 0644);
	CHECK_ERR(nvmefs_ns_rmdir(vol, d, "sub"), -ENOTEMPTY);
	CHECK_ERR(nvmefs_ns_unlink(vol, sub, "in"), 0);
	CHECK(attr_of(vol, d).st_nlink == 3);
	CHECK_ERR(nvmefs_ns_rmdir(vol, d, "sub"), 0);
	CHECK(attr_of(vol, d).st_nlink == 2);
}

static void test_rename(struct nvmefs_vol *vol)
{
	uint64_t r = mk(vol, &alice, ROOT, "r", S_IFDIR | 0755);
	uint64_t p1 = mk(vol, &alice, r, "p1", S_IFDIR | 0755);
	uint64_t p2 = mk(vol, &alice, r, "p2", S_IFDIR | 0755);
	uint64_t a = mk(vol, &alice, p1, "a", S_IFDIR | 0755);
	uint64_t b = mk(vol, &alice, p2, "b", S_IFDIR | 0755);
	uint64_t x = mk(vol, &alice, r, "x", S_IFREG | 0644);
	uint64_t y = mk(vol, &alice, r, "y", S_IFREG | 0644);
	unsigned both = NVMEFS_RENAME_NOREPLACE | NVMEFS_RENAME_EXCHANGE;

	mk(vol, &alice, b, "c", S_IFDIR | 0755);
	/* two directories across parents: each parent keeps one subdirectory
	 * (the bug of a90ce85 moved a link from one to the other) */
	CHECK_ERR(nvmefs_ns_rename(vol, p1, "a", p2, "b", NVMEFS_RENAME_EXCHANGE), 0);
	CHECK(ino_of(vol, p1, "a") == b && ino_of(vol, p2, "b") == a);
	CHECK(attr_of(vol, p1).st_nlink == 3 && attr_of(vol, p2).st_nlink == 3);
	/* a file with a directory across parents: the link moves */
	CHECK_ERR(nvmefs_ns_rename(vol, r, "x", p1, "a", NVMEFS_RENAME_EXCHANGE), 0);
	CHECK(ino_of(vol, r, "x") == b && ino_of(vol, p1, "a") == x);
	CHECK(attr_of(vol, p1).st_nlink == 2 && attr_of(vol, r).st_nlink == 5);
	CHECK_ERR(nvmefs_ns_rename(vol, r, "x", p1, "a", NVMEFS_RENAME_EXCHANGE), 0);
	/* NOREPLACE, plain replace, flags */
	CHECK_ERR(nvmefs_ns_rename(vol, r, "x", r, "y", NVMEFS_RENAME_NOREPLACE), -EEXIST);
	CHECK_ERR(nvmefs_ns_rename(vol, r, "x", r, "y", both), -EINVAL);
	CHECK_ERR(nvmefs_ns_rename(vol, r, "x", r, "none", NVMEFS_RENAME_EXCHANGE), -ENOENT);
	CHECK_ERR(nvmefs_ns_rename(vol, r, "x", r, "y", 0), 0);
	CHECK(ino_of(vol, r, "y") == x && ino_of(vol, r, "x") == 0);
	CHECK_ERR(nvmefs_ns_getattr(vol, y, &(struct stat){0}), -ENOENT); /* replaced: freed */
	/* directories: into their own subtree, over files, over non-empty ones */
	CHECK_ERR(nvmefs_ns_rename(vol, r, "p2", a, "in", 0), -EINVAL);
	CHECK_ERR(nvmefs_ns_rename(vol, r, "p2", r, "y", 0), -ENOTDIR);
	CHECK_ERR(nvmefs_ns_rename(vol, r, "y", r, "p2", 0), -EISDIR);
	CHECK_ERR(nvmefs_ns_rename(vol, p2, "b", p1, "a", 0), -ENOTEMPTY); /* p1/a holds c */
	CHECK_ERR(nvmefs_ns_rename(vol, p2, "b", r, "moved", 0), 0);
	CHECK(attr_of(vol, p2).st_nlink == 2 && attr_of(vol, r).st_nlink == 5);
	CHECK_ERR(nvmefs_ns_rename(vol, r, "moved", ROOT, NVMEFS_CTL_NAME, 0), -EEXIST);
	CHECK_ERR(nvmefs_ns_rename(vol, r, "nothing", r, "z", 0), -ENOENT);
}

static void test_setattr(struct nvmefs_vol *vol)
{
	uint64_t f = mk(vol, &alice, ROOT, "sa", S_IFREG | 0644);
	struct stat attr = {0}, st, before = attr_of(vol, f);

	attr.st_mode = 04755;
	attr.st_uid = 7;
	attr.st_gid = 8;
	attr.st_atim = (struct timespec){1000, 1};
	attr.st_mtim = (struct timespec){2000, 2};
	CHECK_ERR(nvmefs_ns_setattr(vol, NULL, f, &attr,
				    NVMEFS_SET_MODE | NVMEFS_SET_UID | NVMEFS_SET_GID |
					    NVMEFS_SET_ATIME | NVMEFS_SET_MTIME,
				    &st),
		  0);
	CHECK(S_ISREG(st.st_mode) && (st.st_mode & 07777) == 04755);
	CHECK(st.st_uid == 7 && st.st_gid == 8);
	CHECK(st.st_atim.tv_sec == 1000 && st.st_atim.tv_nsec == 1);
	CHECK(st.st_mtim.tv_sec == 2000 && st.st_mtim.tv_nsec == 2);
	CHECK(st.st_ctim.tv_sec > before.st_ctim.tv_sec ||
	      (st.st_ctim.tv_sec == before.st_ctim.tv_sec &&
	       st.st_ctim.tv_nsec >= before.st_ctim.tv_nsec));
	CHECK_ERR(nvmefs_ns_setattr(vol, NULL, ROOT, &attr, NVMEFS_SET_SIZE, &st), -EISDIR);
	CHECK_ERR(nvmefs_ns_setattr(vol, NULL, 999999, &attr, NVMEFS_SET_MODE, &st), -ENOENT);
}

static void test_xattrs(struct nvmefs_vol *vol)
{
	uint64_t f = mk(vol, &alice, ROOT, "xa", S_IFREG | 0644);
	char buf[64], big[NVMEFS_XATTR_VALUE_MAX + 1];

	CHECK_ERR(nvmefs_xattr_set(vol, &alice, f, "user.a", "1", 1, XATTR_REPLACE), -ENODATA);
	CHECK_ERR(nvmefs_xattr_set(vol, &alice, f, "user.a", "1", 1, XATTR_CREATE), 0);
	CHECK_ERR(nvmefs_xattr_set(vol, &alice, f, "user.a", "22", 2, XATTR_CREATE), -EEXIST);
	CHECK_ERR(nvmefs_xattr_set(vol, &alice, f, "user.a", "22", 2, XATTR_REPLACE), 0);
	CHECK_ERR(nvmefs_xattr_set(vol, &alice, f, "user.b", "", 0, 0), 0);
	CHECK_ERR(nvmefs_xattr_get(vol, f, "user.a", NULL, 0), 2);
	CHECK_ERR(nvmefs_xattr_get(vol, f, "user.a", buf, 1), -ERANGE);
	CHECK_ERR(nvmefs_xattr_get(vol, f, "user.a", buf, sizeof(buf)), 2);
	CHECK(!memcmp(buf, "22", 2));
	CHECK_ERR(nvmefs_xattr_get(vol, f, "user.none", buf, sizeof(buf)), -ENODATA);
	CHECK_ERR(nvmefs_xattr_list(vol, f, NULL, 0), 14);
	CHECK_ERR(nvmefs_xattr_list(vol, f, buf, 3), -ERANGE);
	CHECK_ERR(nvmefs_xattr_list(vol, f, buf, sizeof(buf)), 14);
	CHECK(!memcmp(buf, "user.a\0user.b\0", 14));
	CHECK_ERR(nvmefs_xattr_set(vol, &alice, f, "system.posix_acl_access", "x", 1, 0),
		  -EOPNOTSUPP);
	CHECK_ERR(nvmefs_xattr_get(vol, f, "system.posix_acl_access", buf, sizeof(buf)), -ENODATA);
	memset(big, 'v', sizeof(big));
	CHECK_ERR(nvmefs_xattr_set(vol, &alice, f, "user.big", big, sizeof(big), 0), -E2BIG);
	CHECK_ERR(nvmefs_xattr_remove(vol, f, "user.b"), 0);
	CHECK_ERR(nvmefs_xattr_remove(vol, f, "user.b"), -ENODATA);
	CHECK_ERR(nvmefs_xattr_list(vol, f, NULL, 0), 7);
	/* the layout xattr is virtual: a file's, and not listed */
	CHECK(nvmefs_xattr_get(vol, f, NVMEFS_LAYOUT_XATTR, buf, sizeof(buf)) > 0);
}

/* An ACL xattr of n entries {tag, perm, id} (id -1: none) in buf: its size. */
static size_t acl_value(uint8_t *buf, const uint32_t (*e)[3], size_t n)
{
	size_t pos = 4;

	memset(buf, 0, 4);
	buf[0] = 2; /* the version */
	for (size_t i = 0; i < n; i++, pos += 8) {
		buf[pos] = (uint8_t)e[i][0];
		buf[pos + 1] = 0;
		buf[pos + 2] = (uint8_t)e[i][1];
		buf[pos + 3] = 0;
		memcpy(buf + pos + 4, &e[i][2], 4); /* little-endian hosts */
	}
	return pos;
}

/* POSIX ACLs as the core keeps them for the kernel (vol->posix_acl, which
 * op_init sets when the kernel checks them): the mode from the ACL, chmod,
 * inheritance from a default, the umask without one, what is refused. */
static void test_acls(struct nvmefs_vol *vol)
{
	static const uint32_t named[][3] = {
		{1, 7, ~0u}, {2, 4, 1001}, {4, 5, ~0u}, {0x10, 4, ~0u}, {0x20, 0, ~0u}};
	static const uint32_t minimal[][3] = {{1, 6, ~0u}, {4, 6, ~0u}, {0x20, 0, ~0u}};
	const struct nvmefs_cred masked = {.uid = 1000, .gid = 1000, .umask = 077};
	const char *A = "system.posix_acl_access", *D = "system.posix_acl_default";
	uint8_t v[64], got[64];
	struct stat attr = {.st_mode = 0750}, st;
	size_t nv = acl_value(v, named, 5), nm;
	uint64_t f, d, sub, g, l;

	vol->posix_acl = true;
	f = mk(vol, &alice, ROOT, "acl", S_IFREG | 02600);
	d = mk(vol, &alice, ROOT, "acld", S_IFDIR | 0700);
	l = 0;
	CHECK_ERR(nvmefs_ns_mknod(vol, &alice, ROOT, "acll", S_IFLNK, 0, "acl", &st), 0);
	l = st.st_ino;
	nvmefs_ns_forget(vol, l, 1);
	/* an access ACL: kept, its mask in the group bits; bob (outside the
	 * file's group) setting it takes setgid away */
	CHECK_ERR(nvmefs_xattr_set(vol, &bob, f, A, v, nv, 0), 0);
	CHECK((attr_of(vol, f).st_mode & 07777) == 0740);
	CHECK_ERR(nvmefs_xattr_get(vol, f, A, got, sizeof(got)), (long)nv);
	CHECK(!memcmp(got, v, nv));
	CHECK_ERR(nvmefs_xattr_list(vol, f, NULL, 0), (long)strlen(A) + 1);
	/* chmod changes the ACL's owner, mask and other entries */
	CHECK_ERR(nvmefs_ns_setattr(vol, &alice, f, &attr, NVMEFS_SET_MODE, &st), 0);
	CHECK_ERR(nvmefs_xattr_get(vol, f, A, got, sizeof(got)), (long)nv);
	CHECK(got[4 + 2] == 7 && got[28 + 2] == 5 && got[36 + 2] == 0 && got[12 + 2] == 4);
	/* an ACL the mode says all of sets the mode and goes */
	nm = acl_value(v, minimal, 3);
	CHECK_ERR(nvmefs_xattr_set(vol, &root, f, A, v, nm, 0), 0);
	CHECK((attr_of(vol, f).st_mode & 07777) == 0660);
	CHECK_ERR(nvmefs_xattr_get(vol, f, A, NULL, 0), -ENODATA);
	/* refused: not an ACL, a default on a file, any on a symlink, other
	 * system.* names */
	CHECK_ERR(nvmefs_xattr_set(vol, &alice, f, A, "x", 1, 0), -EINVAL);
	CHECK_ERR(nvmefs_xattr_set(vol, &alice, f, A, v, nm - 1, 0), -EINVAL);
	CHECK_ERR(nvmefs_xattr_set(vol, &alice, f, D, v, nm, 0), -EACCES);
	CHECK_ERR(nvmefs_xattr_set(vol, &alice, l, A, v, nm, 0), -EOPNOTSUPP);
	CHECK_ERR(nvmefs_xattr_set(vol, &alice, f, "system.other", "1", 1, 0), -EOPNOTSUPP);
	/* a default: inherited with the create's mode, the umask (077) ignored */
	nv = acl_value(v, named, 5);
	CHECK_ERR(nvmefs_xattr_set(vol, &alice, d, D, v, nv, 0), 0);
	CHECK((attr_of(vol, d).st_mode & 07777) == 0700); /* a default leaves the mode */
	g = mk(vol, &masked, d, "f", S_IFREG | 0666);
	sub = mk(vol, &masked, d, "sub", S_IFDIR | 0777);
	CHECK((attr_of(vol, g).st_mode & 07777) == 0640);
	CHECK((attr_of(vol, sub).st_mode & 07777) == 0740);
	CHECK_ERR(nvmefs_xattr_get(vol, g, A, got, sizeof(got)), (long)nv);
	CHECK(got[4 + 2] == 6 && got[28 + 2] == 4 && got[36 + 2] == 0); /* rw-, mask r--, --- */
	CHECK_ERR(nvmefs_xattr_get(vol, g, D, NULL, 0), -ENODATA);
	CHECK_ERR(nvmefs_xattr_get(vol, sub, D, got, sizeof(got)), (long)nv);
	CHECK(!memcmp(got, v, nv));
	CHECK_ERR(nvmefs_xattr_get(vol, sub, A, NULL, 0), (long)nv);
	/* a header alone removes the default; then the umask applies */
	CHECK_ERR(nvmefs_xattr_set(vol, &alice, d, D, v, 4, 0), 0);
	CHECK_ERR(nvmefs_xattr_get(vol, d, D, NULL, 0), -ENODATA);
	CHECK_ERR(nvmefs_xattr_remove(vol, d, D), 0); /* none there: as ext4 */
	CHECK_ERR(nvmefs_xattr_remove(vol, d, "user.none"), -ENODATA);
	g = mk(vol, &masked, d, "g", S_IFREG | 0666);
	CHECK((attr_of(vol, g).st_mode & 07777) == 0600);
	CHECK_ERR(nvmefs_xattr_get(vol, g, A, NULL, 0), -ENODATA);
	vol->posix_acl = false; /* as the rest of the test expects */
}

/* What a write takes away, by who writes. */
static void test_kill_privs(struct nvmefs_vol *vol)
{
	uint64_t f = mk(vol, &alice, ROOT, "kp", S_IFREG | 06755);
	uint64_t g = mk(vol, &alice, ROOT, "kp2", S_IFREG | 02745); /* setgid, no group x */
	struct nvmefs_inode *in = NULL, *in2 = NULL;

	/* A write's: on open files, whose handles keep the inodes. */
	CHECK_ERR(nvmefs_ns_open(vol, f, O_RDONLY, &in), 0);
	CHECK_ERR(nvmefs_ns_open(vol, g, O_RDONLY, &in2), 0);
	if (!in || !in2)
		return;

	CHECK_ERR(nvmefs_xattr_set(vol, &alice, f, "security.capability", "c", 1, 0), 0);
	CHECK_ERR(nvmefs_ns_kill_privs(vol, in, &root), 0); /* root keeps the bits */
	CHECK((attr_of(vol, f).st_mode & 07777) == 06755);
	CHECK_ERR(nvmefs_xattr_get(vol, f, "security.capability", NULL, 0), -ENODATA);
	/* 1: the mode changed, a kernel's cached copy must go */
	CHECK_ERR(nvmefs_ns_kill_privs(vol, in, &alice), 1);
	CHECK((attr_of(vol, f).st_mode & 07777) == 0755);
	CHECK_ERR(nvmefs_ns_kill_privs(vol, in, &alice), 0);
	/* a mandatory-lock mark stays for the file's group (alice's)... */
	CHECK_ERR(nvmefs_ns_kill_privs(vol, in2, &alice), 0);
	CHECK((attr_of(vol, g).st_mode & 07777) == 02745);
	/* ...and goes for a caller outside it (Linux 6.2+) */
	CHECK_ERR(nvmefs_ns_kill_privs(vol, in2, &bob), 1);
	CHECK((attr_of(vol, g).st_mode & 07777) == 0745);
	nvmefs_ns_release(vol, f);
	nvmefs_ns_release(vol, g);
}

static uint32_t flags_of(struct nvmefs_vol *vol, uint64_t ino)
{
	uint32_t fl = UINT32_MAX;

	CHECK_ERR(nvmefs_ns_getflags(vol, ino, &fl), 0);
	return fl;
}

/* Who may set which of chattr's flags (namei.h). */
static void test_flags_setting(struct nvmefs_vol *vol, uint64_t d)
{
	uint64_t f = mk(vol, &alice, d, "f", S_IFREG | 0644);
	uint64_t s = mk(vol, &alice, d, "fifo", S_IFIFO | 0644);
	uint32_t fl;

	CHECK(flags_of(vol, f) == 0);
	CHECK_ERR(nvmefs_ns_getflags(vol, s, &fl), -ENOTTY);
	CHECK_ERR(nvmefs_ns_setflags(vol, &root, s, NVMEFS_IFL_NODUMP), -ENOTTY);
	CHECK_ERR(nvmefs_ns_setflags(vol, &root, f, 0x4 /* FS_COMPR_FL */), -EOPNOTSUPP);
	CHECK_ERR(nvmefs_ns_setflags(vol, &alice, f, NVMEFS_IFL_IMMUTABLE), -EPERM);
	CHECK_ERR(nvmefs_ns_setflags(vol, &alice, f, NVMEFS_IFL_APPEND), -EPERM);
	CHECK_ERR(nvmefs_ns_setflags(vol, &bob, f, NVMEFS_IFL_NODUMP), -EPERM); /* not his */
	CHECK_ERR(nvmefs_ns_setflags(vol, &alice, f, NVMEFS_IFL_NODUMP | NVMEFS_IFL_NOATIME), 0);
	CHECK(flags_of(vol, f) == (NVMEFS_IFL_NODUMP | NVMEFS_IFL_NOATIME));
	CHECK_ERR(nvmefs_ns_setflags(vol, &root, f, NVMEFS_IFL_NODUMP | NVMEFS_IFL_IMMUTABLE), 0);
	/* ext4's rule: what stays immutable changes no other flag. */
	CHECK_ERR(nvmefs_ns_setflags(vol, &root, f, NVMEFS_IFL_IMMUTABLE), -EPERM);
	CHECK(flags_of(vol, f) == (NVMEFS_IFL_NODUMP | NVMEFS_IFL_IMMUTABLE));
}

/* What an immutable file refuses (f, made by test_flags_setting). */
static void test_flags_immutable(struct nvmefs_vol *vol, uint64_t d)
{
	uint64_t f = ino_of(vol, d, "f");
	struct nvmefs_inode *in = NULL;
	struct stat attr = {.st_mode = 0600}, st;

	mk(vol, &alice, d, "o", S_IFREG | 0644);
	CHECK_ERR(nvmefs_ns_open(vol, f, O_WRONLY, &in), -EPERM);
	CHECK_ERR(nvmefs_ns_open(vol, f, O_RDWR | O_APPEND, &in), -EPERM);
	CHECK_ERR(nvmefs_ns_open(vol, f, O_RDONLY | O_TRUNC, &in), -EPERM);
	CHECK_ERR(nvmefs_ns_setattr(vol, &root, f, &attr, NVMEFS_SET_MODE, &st), -EPERM);
	CHECK_ERR(nvmefs_ns_setattr(vol, &root, f, &attr, NVMEFS_SET_UID, &st), -EPERM);
	CHECK_ERR(nvmefs_ns_setattr(vol, &root, f, &attr, NVMEFS_SET_SIZE, &st), -EPERM);
	CHECK_ERR(nvmefs_ns_setattr(vol, &root, f, &attr, NVMEFS_SET_MTIME | NVMEFS_SET_MTIME_NOW,
				    &st),
		  -EPERM);
	CHECK_ERR(nvmefs_xattr_set(vol, &root, f, "user.x", "1", 1, 0), -EPERM);
	CHECK_ERR(nvmefs_xattr_remove(vol, f, "user.x"), -EPERM);
	CHECK_ERR(nvmefs_xattr_set(vol, &root, f, NVMEFS_LAYOUT_XATTR, "chunk=64K", 9, 0), -EPERM);
	CHECK_ERR(nvmefs_ns_fallocate(vol, f, 0, 0, 4096), -EPERM);
	CHECK_ERR(nvmefs_ns_unlink(vol, d, "f"), -EPERM);
	CHECK_ERR(nvmefs_ns_rename(vol, d, "f", d, "g", 0), -EPERM);
	CHECK_ERR(nvmefs_ns_rename(vol, d, "o", d, "f", 0), -EPERM);
	CHECK_ERR(nvmefs_ns_rename(vol, d, "o", d, "f", NVMEFS_RENAME_EXCHANGE), -EPERM);
	CHECK_ERR(nvmefs_ns_link(vol, f, d, "h", &st), -EPERM);
	/* Reading is allowed (writes: tests/test_chattr.sh). */
	CHECK_ERR(nvmefs_ns_open(vol, f, O_RDONLY, &in), 0);
	if (in)
		nvmefs_ns_release(vol, f);
	CHECK(ino_of(vol, d, "f") == f);
}

/* What an append-only file refuses and takes. */
static void test_flags_append(struct nvmefs_vol *vol, uint64_t d)
{
	uint64_t a = mk(vol, &alice, d, "a", S_IFREG | 0644);
	struct nvmefs_inode *in = NULL;
	struct stat attr = {.st_mode = 0600}, st;

	CHECK_ERR(nvmefs_ns_setflags(vol, &root, a, NVMEFS_IFL_APPEND), 0);
	CHECK_ERR(nvmefs_ns_open(vol, a, O_WRONLY, &in), -EPERM);
	CHECK_ERR(nvmefs_ns_open(vol, a, O_RDWR | O_APPEND | O_TRUNC, &in), -EPERM);
	CHECK_ERR(nvmefs_ns_open(vol, a, O_RDWR | O_APPEND, &in), 0);
	if (in)
		nvmefs_ns_release(vol, a);
	CHECK_ERR(nvmefs_ns_setattr(vol, &root, a, &attr, NVMEFS_SET_SIZE, &st), -EPERM);
	CHECK_ERR(nvmefs_ns_setattr(vol, &root, a, &attr, NVMEFS_SET_MODE, &st), -EPERM);
	CHECK_ERR(nvmefs_ns_setattr(vol, &root, a, &attr, NVMEFS_SET_MTIME, &st), -EPERM);
	CHECK_ERR(nvmefs_ns_setattr(vol, &root, a, &attr,
				    NVMEFS_SET_ATIME | NVMEFS_SET_ATIME_NOW | NVMEFS_SET_MTIME |
					    NVMEFS_SET_MTIME_NOW,
				    &st),
		  0); /* touch: to now */
	CHECK_ERR(nvmefs_ns_fallocate(vol, a, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0, 4096),
		  -EPERM);
	CHECK_ERR(nvmefs_ns_fallocate(vol, a, FALLOC_FL_KEEP_SIZE, 0, 8192), 0);
	CHECK_ERR(nvmefs_xattr_set(vol, &root, a, "user.x", "1", 1, 0), -EPERM);
	CHECK_ERR(nvmefs_ns_unlink(vol, d, "a"), -EPERM);
	CHECK_ERR(nvmefs_ns_rename(vol, d, "a", ROOT, "a", 0), -EPERM);
	CHECK_ERR(nvmefs_ns_link(vol, a, d, "h", &st), -EPERM);
}

/* Directories: immutable takes and loses no name, append-only loses none. */
static void test_flags_dirs(struct nvmefs_vol *vol, uint64_t d)
{
	uint64_t o = ino_of(vol, d, "o"), p = mk(vol, &alice, ROOT, "flp", S_IFDIR | 0755);
	struct stat st;

	mk(vol, &alice, p, "x", S_IFREG | 0644);
	CHECK_ERR(nvmefs_ns_setflags(vol, &root, d, NVMEFS_IFL_IMMUTABLE), 0);
	CHECK_ERR(nvmefs_ns_mknod(vol, &alice, d, "new", S_IFREG | 0644, 0, NULL, &st), -EPERM);
	CHECK_ERR(nvmefs_ns_mknod(vol, &alice, d, "o", S_IFREG | 0644, 0, NULL, &st), -EEXIST);
	CHECK_ERR(nvmefs_ns_link(vol, o, d, "o2", &st), -EPERM);
	CHECK_ERR(nvmefs_ns_unlink(vol, d, "o"), -EPERM);
	CHECK_ERR(nvmefs_ns_rename(vol, d, "o", p, "o", 0), -EPERM);
	CHECK_ERR(nvmefs_ns_rename(vol, p, "x", d, "x", 0), -EPERM);
	/* An immutable directory keeps its own name too. */
	CHECK_ERR(nvmefs_ns_rename(vol, ROOT, "fl", p, "fl", 0), -EPERM);
	CHECK_ERR(nvmefs_ns_rename(vol, ROOT, "fl", ROOT, "fl2", 0), -EPERM);
	CHECK_ERR(nvmefs_ns_setflags(vol, &root, d, NVMEFS_IFL_APPEND), 0);
	CHECK_ERR(nvmefs_ns_rename(vol, p, "x", d, "x", 0), 0);
	CHECK_ERR(nvmefs_ns_unlink(vol, d, "x"), -EPERM);
	CHECK_ERR(nvmefs_ns_rename(vol, d, "o", d, "o3", 0), -EPERM);
	CHECK_ERR(nvmefs_ns_setflags(vol, &root, p, NVMEFS_IFL_IMMUTABLE), 0);
	CHECK_ERR(nvmefs_ns_rmdir(vol, ROOT, "flp"), -EPERM); /* empty, but immutable */
}

/* noatime: a read leaves atime; without it the same read moves it. */
static void test_flags_noatime(struct nvmefs_vol *vol, uint64_t d)
{
	uint64_t n = mk(vol, &alice, d, "n", S_IFREG | 0644);
	struct stat old = {.st_atim = {1000, 0}}, st;
	struct nvmefs_inode *in = NULL;

	CHECK_ERR(nvmefs_ns_setflags(vol, &alice, n, NVMEFS_IFL_NOATIME), 0);
	CHECK_ERR(nvmefs_ns_setattr(vol, &alice, n, &old, NVMEFS_SET_ATIME, &st), 0);
	CHECK_ERR(nvmefs_ns_open(vol, n, O_RDONLY, &in), 0);
	if (!in)
		return;
	nvmefs_ns_touch_atime(vol, in);
	CHECK(attr_of(vol, n).st_atim.tv_sec == 1000);
	CHECK_ERR(nvmefs_ns_setflags(vol, &alice, n, 0), 0);
	nvmefs_ns_touch_atime(vol, in);
	CHECK(attr_of(vol, n).st_atim.tv_sec > 1000);
	nvmefs_ns_release(vol, n);
}

static void test_flags(struct nvmefs_vol *vol)
{
	uint64_t d = mk(vol, &alice, ROOT, "fl", S_IFDIR | 0755);

	test_flags_setting(vol, d);
	test_flags_immutable(vol, d);
	test_flags_append(vol, d);
	test_flags_noatime(vol, d);
	test_flags_dirs(vol, d);
}

/* A truncation by a caller takes what a write does, after the kernel's mode. */
static void test_kill_privs_truncate(struct nvmefs_vol *vol)
{
	uint64_t f = mk(vol, &alice, ROOT, "kt", S_IFREG | 06744);
	struct stat attr = {.st_size = 0, .st_mode = 02744}, st;

	/* the kernel's SETATTR: its FUSE rule kept the setgid without group x */
	CHECK_ERR(nvmefs_ns_setattr(vol, &bob, f, &attr, NVMEFS_SET_SIZE | NVMEFS_SET_MODE, &st),
		  0);
	CHECKF((st.st_mode & 07777) == 0744, "mode %o", st.st_mode & 07777);
	CHECK((attr_of(vol, f).st_mode & 07777) == 0744);
	/* the kernel itself (NULL) and root take nothing */
	attr.st_mode = 06744;
	CHECK_ERR(nvmefs_ns_setattr(vol, NULL, f, &attr, NVMEFS_SET_MODE, &st), 0);
	CHECK_ERR(nvmefs_ns_setattr(vol, NULL, f, &attr, NVMEFS_SET_SIZE, &st), 0);
	CHECK_ERR(nvmefs_ns_setattr(vol, &root, f, &attr, NVMEFS_SET_SIZE, &st), 0);
	CHECK((st.st_mode & 07777) == 06744);
}

/* An unlinked file lives while a handle or a reference holds it. */
static void test_open_unlinked(struct nvmefs_vol *vol)
{
	struct nvmefs_inode *in;
	struct stat st;
	uint64_t f;

	CHECK_ERR(nvmefs_ns_create(vol, &alice, ROOT, "ou", 0600, &st, &in), 0);
	f = st.st_ino;
	CHECK(S_ISREG(st.st_mode) && st.st_uid == 1000);
	CHECK_ERR(nvmefs_ns_create(vol, &alice, ROOT, "ou", 0600, &st, &in), -EEXIST);
	CHECK_ERR(nvmefs_ns_unlink(vol, ROOT, "ou"), 0);
	CHECK(attr_of(vol, f).st_nlink == 0);
	nvmefs_ns_release(vol, f);		      /* the last handle: the space goes */
	CHECK_ERR(nvmefs_ns_getattr(vol, f, &st), 0); /* the reference keeps it in memory */
	CHECK(st.st_nlink == 0);
	CHECK_ERR(nvmefs_ns_open(vol, f, O_RDONLY, &in), -ENOENT);
	nvmefs_ns_forget(vol, f, 1);
	CHECK_ERR(nvmefs_ns_getattr(vol, f, &st), -ENOENT);
}

/* What readdir gave: the entries' numbers, 0 for those without attributes. */
struct seen {
	unsigned n, max;
	uint64_t ino[8];
};

static bool see_entry(void *arg, const char *name, uint64_t ino, mode_t mode, off_t next,
		      const struct stat *st)
{
	struct seen *s = arg;

	(void)name, (void)ino, (void)mode, (void)next;
	if (s->n == s->max)
		return false;
	s->ino[s->n++] = st ? st->st_ino : 0;
	return true;
}

/* An operation's reference keeps an inode as a lookup does; opendir;
 * readdirplus. The calls in parentheses are not checked by idle_after:
 * a reference is held across them on purpose. */
static void test_refs(struct nvmefs_vol *vol)
{
	uint64_t d = mk(vol, &alice, ROOT, "refs", S_IFDIR | 0755);
	uint64_t f = mk(vol, &alice, d, "f", S_IFREG | 0644);
	struct nvmefs_inode *in = NULL;
	struct seen seen = {.max = 3};
	struct stat st;

	CHECK_ERR(nvmefs_ns_opendir(vol, d), 0);
	CHECK_ERR(nvmefs_ns_opendir(vol, f), -ENOTDIR);
	CHECK_ERR(nvmefs_ns_opendir(vol, 999999), -ENOENT);
	CHECK_ERR(nvmefs_ns_get(vol, 999999, &in), -ENOENT);
	CHECK(in == NULL);
	CHECK_ERR(nvmefs_ns_get(vol, f, &in), 0);
	if (!in)
		return;
	CHECK(in->refs == 1);
	CHECK_ERR((nvmefs_ns_unlink)(vol, d, "f"), 0);
	CHECK_ERR((nvmefs_ns_getattr)(vol, f, &st), 0); /* freed, kept by the reference */
	CHECK(st.st_nlink == 0 && in->dead && in->refs == 1);
	nvmefs_ns_put(vol, in);
	CHECK_ERR(nvmefs_ns_getattr(vol, f, &st), -ENOENT);
	/* ".", "..", then the first entry fits: its lookup is the caller's */
	f = mk(vol, &alice, d, "a", S_IFREG | 0644);
	mk(vol, &alice, d, "b", S_IFREG | 0644);
	CHECK_ERR(nvmefs_ns_readdir(vol, d, 0, true, NULL, see_entry, &seen), 0);
	CHECK(seen.n == 3 && seen.ino[0] == 0 && seen.ino[1] == 0 && seen.ino[2] == f);
	nvmefs_ns_forget(vol, f, 1);
	CHECK_ERR(nvmefs_ns_unlink(vol, d, "a"), 0);
	CHECK_ERR(nvmefs_ns_getattr(vol, f, &st), -ENOENT); /* no lookup left on it */
}

/* Whether ino is pinned (nvmefs_inode_pinned); false when unknown. */
static bool pinned(struct nvmefs_vol *vol, uint64_t ino)
{
	struct nvmefs_inode *in;
	bool ret;

	pthread_mutex_lock(&vol->lock);
	in = nvmefs_iget(vol, ino);
	ret = in && nvmefs_inode_pinned(vol, in);
	pthread_mutex_unlock(&vol->lock);
	return ret;
}

static uint64_t lookups_of(struct nvmefs_vol *vol, uint64_t ino)
{
	uint64_t n;

	pthread_mutex_lock(&vol->lock);
	n = nvmefs_lookups_count(vol, ino);
	pthread_mutex_unlock(&vol->lock);
	return n;
}

/* The kernel's lookup counts (vol->lookups): forgets of what it does not
 * hold; a freed inode kept until its last forget; what pins. */
static void test_lookups(struct nvmefs_vol *vol)
{
	uint64_t d = mk(vol, &alice, ROOT, "lk", S_IFDIR | 0755), f;
	struct stat attr = {.st_mtim = {3000, 3}}, st;
	struct nvmefs_inode *in = NULL;
	size_t n = vol->nlookups;

	/* forgets of an unknown ino and of one the kernel does not hold */
	nvmefs_ns_forget(vol, 999999, 1);
	nvmefs_ns_forget(vol, d, 1);
	CHECK(vol->nlookups == n && attr_of(vol, d).st_nlink == 2);
	/* a forget of more than is held takes all, and the inode stays */
	CHECK_ERR(nvmefs_ns_lookup(vol, ROOT, "lk", &st), 0);
	CHECK_ERR(nvmefs_ns_lookup(vol, ROOT, "lk", &st), 0);
	CHECK(lookups_of(vol, d) == 2 && vol->nlookups == n + 1);
	nvmefs_ns_forget(vol, d, 5);
	CHECK(lookups_of(vol, d) == 0 && vol->nlookups == n);
	CHECK(attr_of(vol, d).st_nlink == 2);
	/* pins: the root, an open handle, unlogged attributes; not lookups */
	CHECK_ERR(nvmefs_ns_mknod(vol, &alice, d, "f", S_IFREG | 0644, 0, NULL, &st), 0);
	f = st.st_ino;
	CHECK_ERR(nvmefs_journal_commit(vol), 0);
	CHECK(pinned(vol, ROOT) && !pinned(vol, d) && !pinned(vol, f));
	CHECK_ERR(nvmefs_ns_open(vol, f, O_RDONLY, &in), 0);
	CHECK(pinned(vol, f));
	nvmefs_ns_release(vol, f);
	CHECK(!pinned(vol, f));
	CHECK_ERR(nvmefs_ns_setattr(vol, NULL, f, &attr, NVMEFS_SET_MTIME, &st), 0);
	CHECK(pinned(vol, f)); /* dirty until the commit logs it */
	/* a freed inode the kernel names stays, pinned, until its last forget */
	CHECK_ERR(nvmefs_ns_lookup(vol, d, "f", &st), 0);
	CHECK_ERR(nvmefs_ns_unlink(vol, d, "f"), 0);
	CHECK_ERR(nvmefs_journal_commit(vol), 0);
	CHECK_ERR(nvmefs_ns_getattr(vol, f, &st), 0);
	CHECK(st.st_nlink == 0 && pinned(vol, f));
	/* the write-back cache's late times: answered with what it was */
	CHECK_ERR(nvmefs_ns_setattr(vol, NULL, f, &attr, NVMEFS_SET_MTIME, &st), 0);
	nvmefs_ns_forget(vol, f, 1);
	CHECK_ERR(nvmefs_ns_getattr(vol, f, &st), 0); /* one lookup left */
	nvmefs_ns_forget(vol, f, 1);
	CHECK_ERR(nvmefs_ns_getattr(vol, f, &st), -ENOENT);
	nvmefs_ns_forget(vol, f, 1); /* unknown now */
	CHECK(vol->nlookups == n);
}

/* "." and "..", which the kernel looks up to open a file handle whose inode
 * it dropped (FUSE_EXPORT_SUPPORT): the inode itself, a directory's parent,
 * each with a reference; a freed inode is gone (the kernel's ESTALE). */
static void test_dots(struct nvmefs_vol *vol)
{
	uint64_t d = mk(vol, &alice, ROOT, "dots", S_IFDIR | 0755);
	uint64_t e = mk(vol, &alice, d, "e", S_IFDIR | 0755);
	uint64_t f = mk(vol, &alice, e, "f", S_IFREG | 0644);
	size_t n = vol->nlookups;
	struct stat st;

	CHECK_ERR(nvmefs_ns_lookup(vol, f, ".", &st), 0);
	CHECK(st.st_ino == f && S_ISREG(st.st_mode) && lookups_of(vol, f) == 1);
	nvmefs_ns_forget(vol, f, 1);
	CHECK_ERR(nvmefs_ns_lookup(vol, e, "..", &st), 0);
	CHECK(st.st_ino == d && S_ISDIR(st.st_mode) && lookups_of(vol, d) == 1);
	nvmefs_ns_forget(vol, d, 1);
	CHECK_ERR(nvmefs_ns_lookup(vol, ROOT, "..", &st), 0);
	CHECK(st.st_ino == ROOT);
	nvmefs_ns_forget(vol, ROOT, 1);
	CHECK_ERR(nvmefs_ns_lookup(vol, f, "..", &st), -ENOTDIR);
	CHECK(vol->nlookups == n);
	CHECK_ERR(nvmefs_ns_unlink(vol, e, "f"), 0);
	CHECK_ERR(nvmefs_journal_commit(vol), 0);
	CHECK_ERR(nvmefs_ns_lookup(vol, f, ".", &st), -ENOENT);
	CHECK_ERR(nvmefs_ns_lookup(vol, 999999, ".", &st), -ENOENT);
	CHECK(vol->nlookups == n);
}

/* The table itself, on numbers that need not be inodes: growth past half
 * full, deletion among collisions, shrinking, its bytes; and no growth
 * moving more than a small share of the entries (one table moved them all
 * under the metadata lock: 87 ms at 2^19). */
static void test_lookups_table(struct nvmefs_vol *vol)
{
	enum { N = 30000 };
	static uint64_t want[N];
	const uint64_t base = 1ull << 40;
	size_t n0 = vol->nlookups, used = 0;
	unsigned seed = 1;

	pthread_mutex_lock(&vol->lock);
	for (unsigned k = 0; k < 20 * N; k++) {
		unsigned i = (unsigned)rand_r(&seed) % N;
		uint64_t n = 1 + (unsigned)rand_r(&seed) % 3;

		if (rand_r(&seed) % 3) {
			CHECK_ERR(nvmefs_lookups_reserve(vol), 0);
			nvmefs_lookups_add(vol, base + i);
			want[i]++;
		} else {
			want[i] = want[i] > n ? want[i] - n : 0;
			CHECK(nvmefs_lookups_sub(vol, base + i, n) == want[i]);
		}
	}
	for (unsigned i = 0; i < N; i++) {
		CHECK(nvmefs_lookups_count(vol, base + i) == want[i]);
		used += want[i] != 0;
	}
	CHECK(vol->nlookups == n0 + used && vol->nlookups * 2 <= vol->lookups_cap);
	CHECK(vol->lookups_bytes == vol->lookups_cap * 16);
	CHECK(used > N / 2 && vol->lookups_max_move * 16 <= vol->nlookups);
	CHECK(nvmefs_lookups_check(vol, NULL) == 0);
	for (unsigned i = 0; i < N; i++)
		CHECK(nvmefs_lookups_sub(vol, base + i, UINT64_MAX) == 0);
	CHECK(vol->nlookups == n0);
	/* each table back to its smallest, or an eighth full */
	CHECK(vol->lookups_cap <= NVMEFS_LOOKUP_SHARDS * 16 + 16 * vol->nlookups);
	CHECK(nvmefs_lookups_check(vol, NULL) == 0);
	pthread_mutex_unlock(&vol->lock);
}

/* Names stop when the checkpoint would not hold them. */
static void test_enospc(struct nvmefs_vol *vol)
{
	uint64_t d = mk(vol, &alice, ROOT, "full", S_IFDIR | 0755), cap = vol->meta_cap;
	static char value[4000];
	char name[32];
	struct stat st;
	int ret = 0, n;

	vol->meta_cap = vol->meta_bytes + 4096; /* a small metadata area */
	for (n = 0; n < 1000 && !ret; n++) {
		snprintf(name, sizeof(name), "f%d", n);
		ret = nvmefs_ns_mknod(vol, &alice, d, name, S_IFREG | 0644, 0, NULL, &st);
		if (!ret)
			nvmefs_ns_forget(vol, st.st_ino, 1);
	}
	CHECK_ERR(ret, -ENOSPC);
	CHECK(n > 5 && n < 1000);
	CHECK_ERR(nvmefs_xattr_set(vol, &alice, d, "user.v", value, sizeof(value), 0), -ENOSPC);
	vol->meta_cap = cap;
	CHECK_ERR(nvmefs_ns_mknod(vol, &alice, d, name, S_IFREG | 0644, 0, NULL, &st), 0);
	nvmefs_ns_forget(vol, st.st_ino, 1);
}

/* What the tests above left, as a closed and reopened volume holds it. */
static void check_after_reopen(struct nvmefs_vol *vol)
{
	uint64_t r = ino_of(vol, ROOT, "r"), p1 = ino_of(vol, r, "p1");
	char buf[8];

	CHECK(r && p1 && attr_of(vol, p1).st_nlink == 3);
	CHECK(attr_of(vol, ino_of(vol, r, "p2")).st_nlink == 2);
	CHECK(attr_of(vol, r).st_nlink == 5);
	CHECK(attr_of(vol, ino_of(vol, ROOT, "l")).st_nlink == 2);
	CHECK((attr_of(vol, ino_of(vol, ROOT, "sa")).st_mode & 07777) == 04755);
	CHECK_ERR(nvmefs_xattr_get(vol, ino_of(vol, ROOT, "xa"), "user.a", buf, sizeof(buf)), 2);
	CHECK(ino_of(vol, ROOT, "ou") == 0);
	CHECK(attr_of(vol, ino_of(vol, ino_of(vol, ROOT, "sg"), "sub")).st_gid == 50);
	/* chattr's flags are in the INODE records (test_flags) */
	r = ino_of(vol, ROOT, "fl");
	CHECK(flags_of(vol, r) == NVMEFS_IFL_APPEND);
	CHECK(flags_of(vol, ino_of(vol, r, "f")) == (NVMEFS_IFL_NODUMP | NVMEFS_IFL_IMMUTABLE));
	CHECK(flags_of(vol, ino_of(vol, r, "a")) == NVMEFS_IFL_APPEND);
	CHECK(flags_of(vol, ino_of(vol, ROOT, "flp")) == NVMEFS_IFL_IMMUTABLE);
	CHECK_ERR(nvmefs_ns_unlink(vol, r, "a"), -EPERM);
	/* ACLs and the modes they gave stay */
	vol->posix_acl = true;
	CHECK_ERR(nvmefs_xattr_get(vol, ino_of(vol, ino_of(vol, ROOT, "acld"), "sub"),
				   "system.posix_acl_default", NULL, 0),
		  44);
	CHECK((attr_of(vol, ino_of(vol, ino_of(vol, ROOT, "acld"), "f")).st_mode & 07777) == 0640);
	vol->posix_acl = false;
}

/* The changes a door makes, each refused on vol with err; f ("sd") unchanged. */
static void check_changes_refused(struct nvmefs_vol *vol, uint64_t f, int err)
{
	struct stat attr = {.st_mode = 0600}, st;
	struct nvmefs_inode *in;

	CHECK_ERR(nvmefs_ns_mknod(vol, &root, ROOT, "sd2", S_IFREG | 0644, 0, NULL, &st), err);
	CHECK_ERR(nvmefs_ns_create(vol, &root, ROOT, "sd2", 0644, &st, &in), err);
	CHECK_ERR(nvmefs_ns_link(vol, f, ROOT, "sd3", &st), err);
	CHECK_ERR(nvmefs_ns_unlink(vol, ROOT, "sd"), err);
	CHECK_ERR(nvmefs_ns_rename(vol, ROOT, "sd", ROOT, "sd4", 0), err);
	CHECK_ERR(nvmefs_ns_setattr(vol, &root, f, &attr, NVMEFS_SET_MODE, &st), err);
	CHECK_ERR(nvmefs_xattr_set(vol, &root, f, "user.sd", "1", 1, 0), err);
	CHECK_ERR(nvmefs_xattr_remove(vol, f, "user.sd0"), err);
	CHECK_ERR(nvmefs_ns_setflags(vol, &root, f, NVMEFS_IFL_NODUMP), err);
	CHECK_ERR(nvmefs_ns_fallocate(vol, f, 0, 0, 4096), err);
	CHECK_ERR(nvmefs_ns_open(vol, f, O_RDWR | O_TRUNC, &in), err);
	CHECK(ino_of(vol, ROOT, "sd") == f);
	CHECK(attr_of(vol, f).st_size == 0);
}

/*
 * A change a door let in just before a shutdown (its check and the
 * shutdown race, as a busy writer's 64 KiB write answered early makes
 * them) answers EIO, as every later request does, and not the EROFS of a
 * read-only volume; a read-only volume still answers EROFS, and one shut
 * down while read-only EIO.
 */
static void test_shut_down(struct nvmefs_vol *vol)
{
	uint64_t f = mk(vol, &alice, ROOT, "sd", S_IFREG | 0644);

	CHECK_ERR(nvmefs_vol_start(vol), 0); /* its engine, which the shutdown fences */
	CHECK_ERR(nvmefs_xattr_set(vol, &root, f, "user.sd0", "1", 1, 0), 0);
	CHECK_ERR(nvmefs_vol_remount(vol, true, -1), 0);
	check_changes_refused(vol, f, -EROFS);
	/* Shut down while read-only: EIO wins (every request answers it). */
	CHECK_ERR(nvmefs_vol_shutdown(vol), 0);
	check_changes_refused(vol, f, -EIO);
}

static char last_err[512];

static void keep_err(enum nvmefs_log_level level, const char *msg)
{
	if (level == NVMEFS_LOG_ERR && !last_err[0])
		snprintf(last_err, sizeof(last_err), "%s", msg);
}

/* The crosscheck fails (-EUCLEAN) and its first message names key. */
static bool caught(struct nvmefs_vol *vol, const char *key)
{
	int ret;

	last_err[0] = 0;
	ret = nvmefs_meta_crosscheck(vol);
	if (ret != -EUCLEAN || !strstr(last_err, key)) {
		fprintf(stderr, "crosscheck returned %d, said '%s'; want -EUCLEAN naming %s\n", ret,
			last_err, key);
		return false;
	}
	return true;
}

static void test_crosscheck(struct nvmefs_vol *vol)
{
	uint64_t ino = mk(vol, &root, ROOT, "xc", S_IFREG | 0644);
	struct nvmefs_val v = {.kind = NVMEFS_KEY_ORPHAN};
	struct nvmefs_inode *r, *f;
	uint8_t key[NVMEFS_KEY_MAX];
	char name[64];

	CHECK(vol->shadow != NULL);
	CHECK_ERR(nvmefs_xattr_set(vol, &alice, ino, "user.xc", "1", 1, 0), 0);
	CHECK_ERR(nvmefs_journal_commit(vol), 0); /* every inode clean */
	if (!vol->shadow || !ino)
		return;
	nvmefs_log_set_sink(keep_err);
	pthread_mutex_lock(&vol->lock);
	r = nvmefs_iget(vol, ROOT);
	f = nvmefs_iget(vol, ino);
	CHECK_ERR(nvmefs_meta_crosscheck(vol), 0);
	/* An attribute of a clean inode. */
	r->uid ^= 1;
	CHECK(caught(vol, "INODE(1)"));
	r->uid ^= 1;
	CHECK_ERR(nvmefs_meta_crosscheck(vol), 0);
	/* A summary field, even of a dirty inode. */
	nvmefs_inode_dirty(vol, r);
	r->dir->next_cookie++;
	CHECK(caught(vol, "INODE(1)"));
	r->dir->next_cookie--;
	CHECK_ERR(nvmefs_meta_crosscheck(vol), 0);
	/* A key the maps do not call for. */
	v.rec.type = NVMEFS_REC_ORPHAN_ADD;
	v.rec.ino.ino = ino;
	CHECK_ERR(nvmefs_shadow_put(vol->shadow, &v), 0);
	snprintf(name, sizeof(name), "ORPHAN(%llu)", (unsigned long long)ino);
	CHECK(caught(vol, name));
	CHECK_ERR(nvmefs_shadow_del(vol->shadow, key, nvmefs_key_orphan(key, ino)), 0);
	CHECK_ERR(nvmefs_meta_crosscheck(vol), 0);
	/* A key the maps call for, missing. */
	CHECK_ERR(nvmefs_shadow_del(vol->shadow, key, nvmefs_key_dirent(key, ROOT, "xc", 2)), 0);
	CHECK(caught(vol, "DIRENT(1, \"xc\")"));
	nvmefs_meta_kv_inode(vol, r); /* no DIRENT back: still caught */
	CHECK(caught(vol, "DIRENT(1, \"xc\")"));
	pthread_mutex_unlock(&vol->lock);
	nvmefs_log_set_sink(NULL);
	/* Put back by the records themselves: rename it away and back. */
	CHECK_ERR(nvmefs_ns_rename(vol, ROOT, "xc", ROOT, "xc2", 0), 0);
	CHECK_ERR(nvmefs_ns_rename(vol, ROOT, "xc2", ROOT, "xc", 0), 0);
	nvmefs_log_set_sink(keep_err);
	pthread_mutex_lock(&vol->lock);
	CHECK_ERR(nvmefs_meta_crosscheck(vol), 0);
	/* A value changed behind apply's back. */
	((char *)f->xattrs[0].value)[0] = '2';
	snprintf(name, sizeof(name), "XATTR(%llu, \"user.xc\")", (unsigned long long)ino);
	CHECK(caught(vol, name));
	((char *)f->xattrs[0].value)[0] = '1';
	CHECK_ERR(nvmefs_meta_crosscheck(vol), 0);
	pthread_mutex_unlock(&vol->lock);
	nvmefs_log_set_sink(NULL);
}

int main(int argc, char **argv)
{
	struct nvmefs_vol *vol;

	if (argc < 2)
		TEST_SKIP("usage: test_namei BUILD_DIR");
	vol = test_vol_setup(argv[1]);
	if (vol) {
		test_create(vol);
		test_setgid_dir(vol);
		test_links(vol);
		test_rename(vol);
		test_setattr(vol);
		test_xattrs(vol);
		test_acls(vol);
		test_kill_privs(vol);
		test_kill_privs_truncate(vol);
		test_flags(vol);
		test_open_unlinked(vol);
		test_refs(vol);
		test_lookups(vol);
		test_dots(vol);
		test_lookups_table(vol);
		test_enospc(vol);
		test_crosscheck(vol);
		CHECK_ERR(nvmefs_vol_close(vol), 0);
	}
	vol = test_vol_reopen();
	if (vol) {
		check_after_reopen(vol);
		test_shut_down(vol);
	}
	test_vol_teardown(vol);
	return test_result();
}
