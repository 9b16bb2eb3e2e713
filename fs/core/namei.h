/* SPDX-License-Identifier: MIT */
/*
 * namei.h: the filesystem core's namespace API: names, attributes,
 * extended attributes and open counts, for any door (the FUSE adapter in
 * fs/fuse/ops.c and ops_file.c, the native door in fs/native/, the unit
 * tests) with no FUSE type in sight.
 *
 * Every function takes plain arguments (the volume, inode numbers, the
 * caller's ids, buffers), takes the locks it needs itself (the metadata
 * lock vol->lock; an inode's range lock for truncation) and returns 0 or
 * -errno. Permission checks on names (search, write on the directory) are
 * the door's: the kernel makes them for the mount (default_permissions);
 * the core applies the rules that depend on who asks: owners of new
 * inodes, setgid directories, what a write takes away.
 *
 * References: an inode stays in memory, even once unlinked, while a door
 * holds a reference on it (the kernel's lookup count for the mount), a
 * handle open on it, or a pointer from nvmefs_ns_get. Every function that
 * returns an entry (lookup, mknod, link, create) counts one reference for
 * the caller, given back with nvmefs_ns_forget.
 */
#ifndef NVMEFS_NAMEI_H
#define NVMEFS_NAMEI_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/types.h>

struct nvmefs_vol;
struct nvmefs_inode;

/* Who asks. */
struct nvmefs_cred {
	uint32_t uid, gid;
	/* The caller's process or thread, whose supplementary groups are read
	 * from /proc when a setgid bit needs them; 0: gid is its only group. */
	int32_t pid;
	/* The caller's umask, for a new inode's mode in a directory without a
	 * default ACL (FUSE_DONT_MASK leaves it to us); 0: none, or the door
	 * applied it already. */
	uint32_t umask;
};

/* The longest hard-link count a file or directory gets (EMLINK beyond). */
#define NVMEFS_LINK_MAX 65000u

/* What nvmefs_ns_setattr changes (the values of FUSE's FUSE_SET_ATTR_*). */
#define NVMEFS_SET_MODE	     (1 << 0)
#define NVMEFS_SET_UID	     (1 << 1)
#define NVMEFS_SET_GID	     (1 << 2)
#define NVMEFS_SET_SIZE	     (1 << 3)
#define NVMEFS_SET_ATIME     (1 << 4)
#define NVMEFS_SET_MTIME     (1 << 5)
#define NVMEFS_SET_ATIME_NOW (1 << 7)
#define NVMEFS_SET_MTIME_NOW (1 << 8)
#define NVMEFS_SET_CTIME     (1 << 10)

/* nvmefs_ns_rename flags (the values of renameat2's). */
#define NVMEFS_RENAME_NOREPLACE (1 << 0)
#define NVMEFS_RENAME_EXCHANGE	(1 << 1)

/* Attributes of an inode as stat(2) shows them (meta held). */
void nvmefs_ns_fill_stat(struct nvmefs_inode *in, struct stat *st);

/* True when changes are refused: a read-only mount, or a metadata write
 * failed (the volume went read-only), or a shutdown. */
bool nvmefs_ns_read_only(struct nvmefs_vol *vol);

/*
 * What a change of vol is refused with: 0 when it takes changes; -EIO once
 * shut down (FS_IOC_SHUTDOWN: every request but statfs answers EIO, as
 * xfs's and ext4's do, even one the door let in just before it); -EROFS
 * when read-only (-o ro, a remount, a metadata write error).
 */
int nvmefs_ns_may_change(struct nvmefs_vol *vol);

/*
 * The inode ino, live or not, with its extent map, in *in for a door that
 * works on it without the metadata lock (SEEK_DATA): it stays in memory
 * until nvmefs_ns_put. 0, -ENOENT (unknown), or -EIO, -ENOMEM or -EUCLEAN
 * from reading it from the store. Takes the metadata lock.
 */
int nvmefs_ns_get(struct nvmefs_vol *vol, uint64_t ino, struct nvmefs_inode **in);
/* Give back the inode of nvmefs_ns_get. Takes the metadata lock. */
void nvmefs_ns_put(struct nvmefs_vol *vol, struct nvmefs_inode *in);

/* name in directory parent: its attributes in *st, and one reference. */
int nvmefs_ns_lookup(struct nvmefs_vol *vol, uint64_t parent, const char *name, struct stat *st);
/* The same, and the entry's readdir offset in *cookie (a readdir from
 * *cookie on gives the entries after it) and the directory's number of
 * entries in *entries. */
int nvmefs_ns_lookup_cookie(struct nvmefs_vol *vol, uint64_t parent, const char *name,
			    struct stat *st, uint64_t *cookie, uint64_t *entries);
/* Give back n references on ino; an unlinked inode with none left and no
 * open handle leaves memory. */
void nvmefs_ns_forget(struct nvmefs_vol *vol, uint64_t ino, uint64_t n);
/* Whether the mount's kernel may hold anything of ino (attributes, pages):
 * its lookup count is not 0. Without a count it has no inode for it, and
 * its next lookup reads what the core has then. Takes the metadata lock. */
bool nvmefs_ns_kernel_holds(struct nvmefs_vol *vol, uint64_t ino);
/* Attributes of ino (also of an unlinked one still referenced). */
int nvmefs_ns_getattr(struct nvmefs_vol *vol, uint64_t ino, struct stat *st);
/*
 * Change what to_set (NVMEFS_SET_*) names, from attr (a mode change also
 * changes the access ACL, as Linux's posix_acl_chmod()); a size change
 * truncates or extends the file under its whole-file range lock. ctime
 * becomes now unless NVMEFS_SET_CTIME gives it. The result in *out.
 * Changes of an unlinked, freed inode (the kernel's late times after its
 * write-back) are answered with what it was, changing nothing. A size
 * change by cred (NULL: by the kernel itself) then takes away what
 * nvmefs_ns_kill_privs does, after any mode attr gives.
 */
int nvmefs_ns_setattr(struct nvmefs_vol *vol, const struct nvmefs_cred *cred, uint64_t ino,
		      const struct stat *attr, int to_set, struct stat *out);
/* A symlink's target, malloc'ed (the caller frees): 0, -EINVAL (not a
 * symlink), -ENOENT, -ENOMEM. */
int nvmefs_ns_readlink(struct nvmefs_vol *vol, uint64_t ino, char **target);

/*
 * Make name in parent: a file, device, fifo or socket (mode's type), a
 * directory (S_IFDIR), or a symlink to target (S_IFLNK, target given).
 * Owned by cred, or the directory's group under a setgid directory (whose
 * new subdirectories are setgid too), as Linux does. Under a directory
 * with a default ACL the inode's permissions and access ACL come from it
 * and mode as Linux's posix_acl_create() says (a new directory takes the
 * default ACL as its own default too); elsewhere mode loses cred's umask
 * (symlinks neither: 0777). Its attributes in *st, and one reference.
 */
int nvmefs_ns_mknod(struct nvmefs_vol *vol, const struct nvmefs_cred *cred, uint64_t parent,
		    const char *name, mode_t mode, dev_t rdev, const char *target, struct stat *st);
/* A new name newname in newparent for ino (not a directory): *st, a reference. */
int nvmefs_ns_link(struct nvmefs_vol *vol, uint64_t ino, uint64_t newparent, const char *newname,
		   struct stat *st);
/* Remove name (not a directory) from parent; the inode goes with its last
 * name, or at its last close when open. */
int nvmefs_ns_unlink(struct nvmefs_vol *vol, uint64_t parent, const char *name);
/* Remove the empty directory name from parent. */
int nvmefs_ns_rmdir(struct nvmefs_vol *vol, uint64_t parent, const char *name);
/* renameat2(2) within the volume, flags NVMEFS_RENAME_*. */
int nvmefs_ns_rename(struct nvmefs_vol *vol, uint64_t parent, const char *name, uint64_t newparent,
		     const char *newname, unsigned flags);

/*
 * Open ino with open(2)'s oflags (of which the access mode, O_TRUNC and
 * O_APPEND count): counts a handle (an unlinked file keeps its data until
 * the last one goes). O_TRUNC truncates a regular file to 0 whatever the
 * access mode, as Linux does. -EPERM, as the VFS's may_open for a kernel
 * filesystem: an immutable file opened for writing or with O_TRUNC, an
 * append-only one opened for writing without O_APPEND or with O_TRUNC.
 * *in is the inode, valid until the release.
 */
int nvmefs_ns_open(struct nvmefs_vol *vol, uint64_t ino, int oflags, struct nvmefs_inode **in);
/* Make a regular file name in parent (as nvmefs_ns_mknod) and open it:
 * *st, one reference and one handle; *in as for nvmefs_ns_open. */
int nvmefs_ns_create(struct nvmefs_vol *vol, const struct nvmefs_cred *cred, uint64_t parent,
		     const char *name, mode_t mode, struct stat *st, struct nvmefs_inode **in);
/* Give back a handle of nvmefs_ns_open or nvmefs_ns_create. */
void nvmefs_ns_release(struct nvmefs_vol *vol, uint64_t ino);

/*
 * What a change of a file's data or size by cred takes away before it
 * happens, as Linux's file_remove_privs() and setattr_should_drop_suidgid():
 * file capabilities (security.capability) whoever writes; for a caller other
 * than root, setuid, and setgid when the group may execute or the caller is
 * not in the file's group. 1 when the mode changed (a kernel that cached it
 * must be told), 0 when nothing did, or -errno.
 */
int nvmefs_ns_kill_privs(struct nvmefs_vol *vol, struct nvmefs_inode *in,
			 const struct nvmefs_cred *cred);
/* Note a read of in: atime as the mount's policy says (vol->opts.atime:
 * relatime, when not newer than mtime or ctime, or a day old; strictatime,
 * always; noatime, never). */
void nvmefs_ns_touch_atime(struct nvmefs_vol *vol, struct nvmefs_inode *in);

/*
 * fallocate(2) modes 0, FALLOC_FL_KEEP_SIZE, FALLOC_FL_PUNCH_HOLE and
 * FALLOC_FL_ZERO_RANGE on the regular file ino, under its whole-file range
 * lock (fs/core/data.c).
 */
int nvmefs_ns_fallocate(struct nvmefs_vol *vol, uint64_t ino, int mode, uint64_t off, uint64_t len);

/*
 * One directory entry for nvmefs_ns_readdir's caller: the name, the
 * child's number and type (S_IF*), the offset of the entry after it, and
 * with plus its attributes (one reference counted for the caller, taken
 * back by the core when emit returns false). Called with the metadata lock
 * held: emit must not call the core. false: no room, stop here.
 */
typedef bool (*nvmefs_dirent_fn)(void *arg, const char *name, uint64_t ino, mode_t mode, off_t next,
				 const struct stat *st);
/* Whether ino may be opened as a directory: 0, -ENOTDIR, -ENOENT. */
int nvmefs_ns_opendir(struct nvmefs_vol *vol, uint64_t ino);
/*
 * The entries of directory ino from offset off on (0: from the start; the
 * offsets are those emit was given): ".", "..", then each entry in
 * creation order. The offsets stay valid across changes of the directory.
 * end, the caller's per-handle bound (NULL: none): a walk from offset 0,
 * or the first of a handle (*end 0), sets it to the offset the next entry
 * made will get, and no entry from there on is emitted. An entry made or
 * renamed meanwhile gets an offset beyond it: without the bound a reader
 * that renames what it reads (away and back) would meet each entry again
 * and never end (xfstests generic/736; btrfs bounds its readdir the same
 * way). rewinddir (offset 0 again) sees the directory as it is then.
 */
int nvmefs_ns_readdir(struct nvmefs_vol *vol, uint64_t ino, off_t off, bool plus, uint64_t *end,
		      nvmefs_dirent_fn emit, void *arg);

/*
 * What a reader remembers between its reads for nvmefs_ns_note_read
 * (zero-initialized: the first read looks).
 */
struct nvmefs_read_note {
	atomic_uint_fast64_t gen; /* in->attr_gen + 1 when it last looked */
	atomic_llong sec;	  /* and the time then */
};
/*
 * A read of in through a reader that keeps note: relatime's check (see
 * nvmefs_ns_touch_atime), made only when an attribute changed since the
 * reader's last look or a day went by, so that a stream of reads takes no
 * volume-wide lock (under strictatime every read, under noatime none).
 */
void nvmefs_ns_note_read(struct nvmefs_vol *vol, struct nvmefs_inode *in,
			 struct nvmefs_read_note *note);

/*
 * A push: statahead storing a small file's data in the kernel's page
 * cache before a program opens it (fs/fuse/statahead.c). Begin takes the
 * regular file ino when it holds 1 to max bytes, is open nowhere (no
 * pages a writer dirtied can be in the kernel's cache), is not being
 * pushed already and the kernel has had none of its pages since it last
 * forgot it (in->kernel_pages): 0, *in and *size (the file is then held
 * as by an open, and every open and truncation of it waits until the push
 * ends), else -errno (-EBUSY: open, or being pushed; -EEXIST: the kernel
 * may hold its pages). End gives it back; stored: the data is
 * in the kernel's cache, so the next open for reading notes a read
 * (atime), which the kernel will not send.
 */
int nvmefs_ns_push_begin(struct nvmefs_vol *vol, uint64_t ino, uint64_t max,
			 struct nvmefs_inode **in, uint64_t *size);
void nvmefs_ns_push_end(struct nvmefs_vol *vol, struct nvmefs_inode *in, bool stored);
/*
 * An open's push (fs/fuse/ops_file.c): the same for the file of an open
 * handle that is its only one (in->opens 1: no other handle can have a
 * READ in flight on its pages, or pages of a shared mapping, dirty). Begin
 * takes it when it holds 1 to max bytes, no push holds it and a read now
 * would leave its atime (the reads the push spares are never seen, and an
 * open that reads nothing must not move it): 0 and *size, and until end
 * every other open and truncation of it waits; -EFBIG, -EBUSY (open
 * elsewhere, or being pushed) or -EAGAIN (a read would move the atime).
 */
int nvmefs_ns_open_push_begin(struct nvmefs_vol *vol, struct nvmefs_inode *in, uint64_t max,
			      uint64_t *size);
void nvmefs_ns_open_push_end(struct nvmefs_vol *vol, struct nvmefs_inode *in);

/*
 * File attribute flags (chattr(1), lsattr(1); NVMEFS_IFL_* in format.h,
 * with FS_IOC_GETFLAGS's values) of a regular file or directory, kept in
 * its INODE record. The core enforces them for every door, as ext4 and
 * the VFS do for a kernel filesystem (the kernel enforces nothing for a
 * FUSE inode): immutable: no write, truncation, fallocate, setattr, xattr
 * change, link, and neither the inode's names nor, for a directory, the
 * names in it added or removed (-EPERM); append-only: writes only at the
 * end, open for writing only with O_APPEND, no truncation, no fallocate
 * but plain allocation, no change of mode, owner or explicit times, no
 * xattr change, and neither its names nor the names in a directory
 * removed; noatime: reads leave atime; nodump: stored only.
 */
/* ino's flags in *flags: 0, -ENOENT, -ENOTTY (not a file or directory). */
int nvmefs_ns_getflags(struct nvmefs_vol *vol, uint64_t ino, uint32_t *flags);
/*
 * Set ino's flags to flags (ctime becomes now): 0; -EOPNOTSUPP for a flag
 * nvmefs does not have (outside NVMEFS_IFL_ALL); -EPERM when cred is
 * neither the owner nor root, when immutable or append-only would change
 * and cred is not root (the capability CAP_LINUX_IMMUTABLE, of which a
 * FUSE server sees nothing: uid 0 stands for it), or when an immutable
 * inode that stays immutable would change another flag (as ext4); -ENOTTY
 * for another file type; -EROFS.
 */
int nvmefs_ns_setflags(struct nvmefs_vol *vol, const struct nvmefs_cred *cred, uint64_t ino,
		       uint32_t flags);

/* Space and inodes, as statfs(2) shows them. */
void nvmefs_ns_statfs(struct nvmefs_vol *vol, struct statvfs *st);

/*
 * Extended attributes (user.*, trusted.*, security.*, and when the kernel
 * checks ACLs (vol->posix_acl) system.posix_acl_access and
 * system.posix_acl_default; other system.* names are EOPNOTSUPP). flags
 * are setxattr(2)'s XATTR_CREATE and XATTR_REPLACE. get and list copy into
 * buf of size bytes and return the length, or with size 0 only the length;
 * -ERANGE when buf is too small. The layout xattr (NVMEFS_LAYOUT_XATTR) is
 * virtual: fs/core/xlayout.c.
 *
 * An ACL set by cred (NULL: no caller to check) is checked (-EINVAL when it
 * is not one; fs/core/acl.c), and does what Linux's posix_acl_update_mode()
 * does: the mode's rwx bits become the ACL's (its mask for the group's), an
 * access ACL the mode says all of is not kept, and setgid goes unless cred
 * is root or in the file's group. A default ACL is for directories
 * (-EACCES elsewhere); symlinks take none (-EOPNOTSUPP). Removing an ACL
 * that is not there succeeds, as on Linux's own filesystems.
 */
int nvmefs_xattr_set(struct nvmefs_vol *vol, const struct nvmefs_cred *cred, uint64_t ino,
		     const char *name, const void *value, size_t size, int flags);
ssize_t nvmefs_xattr_get(struct nvmefs_vol *vol, uint64_t ino, const char *name, void *buf,
			 size_t size);
ssize_t nvmefs_xattr_list(struct nvmefs_vol *vol, uint64_t ino, char *buf, size_t size);
int nvmefs_xattr_remove(struct nvmefs_vol *vol, uint64_t ino, const char *name);

#endif
