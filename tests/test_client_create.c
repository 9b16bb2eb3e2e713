// SPDX-License-Identifier: MIT
/*
 * test_client_create MOUNTPOINT [writeback]: libnvmefs's nvmefs_create, the
 * native door's CREATE (docs/NATIVE.md, "Creating files"), on a mounted
 * volume, as root. What it must do as open(O_CREAT) through the mount does:
 *  - the file appears through the mount at once, with the mode less the
 *    umask, the caller's owner, and what native writes put in it; the
 *    directory's cached mtime is dropped (the kernel would show the old one
 *    for 60 s otherwise);
 *  - an existing name is -EEXIST and left as it was;
 *  - write and search on the directory are checked for the sender's real
 *    ids (also when it attached as root and then became that user):
 *    another user is refused in a root-owned 0755 directory, served in
 *    a 0777 one (owning the file) and through its group in a 0770 one;
 *    a setgid directory gives its group;
 *  - what it does not serve it says: reading, O_APPEND, a directory that is
 *    not one, another filesystem, a removed directory, a bad name, and a
 *    -o writeback mount (the writeback argument) are refused, nothing made;
 *  - the registration's close (nvmefs_close_fd) sends without waiting, and
 *    the next call still gets its own reply.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "libnvmefs.h"
#include "test_util.h"

#define OTHER_UID 4242
#define OTHER_GID 4243

static const char *mnt;

static const char *P(const char *name)
{
	static char buf[4][4096];
	static unsigned i;
	char *p = buf[i++ % 4];

	snprintf(p, sizeof(buf[0]), "%s/%s", mnt, name);
	return p;
}

static struct nvmefs_client *attach(void)
{
	struct nvmefs_client *c = NULL;
	int ret = nvmefs_attach(mnt, &c);

	if (ret) {
		fprintf(stderr, "FAIL: nvmefs_attach(%s): %d %s\n", mnt, ret,
			c ? nvmefs_client_error(c) : "");
		exit(1);
	}
	return c;
}

/* A descriptor number for a file the door makes: any open descriptor. */
static int placeholder(void)
{
	int fd = open("/", O_PATH | O_CLOEXEC);

	if (fd < 0) {
		perror("open /");
		exit(1);
	}
	return fd;
}

static int dir_fd(const char *name)
{
	int fd = open(P(name), O_PATH | O_DIRECTORY | O_CLOEXEC);

	if (fd < 0) {
		fprintf(stderr, "FAIL: open %s: %s\n", P(name), strerror(errno));
		exit(1);
	}
	return fd;
}

static void mkdir_mode(const char *name, mode_t mode, uid_t uid, gid_t gid)
{
	if (mkdir(P(name), 0700) || chown(P(name), uid, gid) || chmod(P(name), mode)) {
		fprintf(stderr, "FAIL: mkdir %s: %s\n", P(name), strerror(errno));
		exit(1);
	}
}

/* Create dir/name through the door; the result, with the file kept
 * registered under *ph (-1 when it failed). */
static int create(struct nvmefs_client *c, const char *dir, const char *name, int flags,
		  mode_t mode, int *ph, struct stat *st)
{
	int d = dir_fd(dir);
	int fd = placeholder();
	int ret = nvmefs_create(c, d, name, flags, mode, 022, fd, st);

	close(d);
	if (ret) {
		close(fd);
		fd = -1;
	}
	*ph = fd;
	return ret;
}

static void close_reg(struct nvmefs_client *c, int fd)
{
	CHECK_ERR(nvmefs_close_fd(c, fd), 0);
	close(fd);
}

static void test_basic(struct nvmefs_client *c)
{
	char data[10000], back[10000];
	struct stat st, kst, d0, d1;
	int fd, kfd;

	mkdir_mode("basic", 0755, 0, 0);
	CHECK(!stat(P("basic"), &d0));
	usleep(20000); /* a later mtime */
	CHECK(stat(P("basic/f"), &kst) && errno == ENOENT);
	CHECK_ERR(create(c, "basic", "f", O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666, &fd, &st),
		  0);
	if (fd < 0)
		return;
	CHECKF(S_ISREG(st.st_mode) && (st.st_mode & 07777) == 0644, "mode %o",
	       (unsigned)st.st_mode);
	CHECKF(st.st_size == 0 && st.st_uid == 0 && st.st_nlink == 1, "size %lld uid %u",
	       (long long)st.st_size, (unsigned)st.st_uid);
	/* Through the mount, at once. */
	CHECKF(!stat(P("basic/f"), &kst), "stat through the mount: %s", strerror(errno));
	CHECKF(kst.st_ino == st.st_ino && kst.st_dev == st.st_dev && kst.st_mode == st.st_mode,
	       "the mount's ino %llu mode %o, the door's %llu %o", (unsigned long long)kst.st_ino,
	       (unsigned)kst.st_mode, (unsigned long long)st.st_ino, (unsigned)st.st_mode);
	CHECK(!stat(P("basic"), &d1));
	CHECKF(d1.st_mtim.tv_sec != d0.st_mtim.tv_sec || d1.st_mtim.tv_nsec != d0.st_mtim.tv_nsec,
	       "the directory's mtime through the mount changed with the create");
	for (size_t i = 0; i < sizeof(data); i++)
		data[i] = (char)(i * 7 + 3);
	CHECK_ERR(nvmefs_pwrite(c, fd, data, sizeof(data), 0), (long long)sizeof(data));
	CHECK_ERR(nvmefs_pread(c, fd, back, 16, 0), -EBADF); /* write-only */
	/* The kernel looked the file up before the create (nothing then) and
	 * at the stat above (size 0): the write's completion waited for its
	 * cached size to go. */
	CHECKF(!stat(P("basic/f"), &kst) && kst.st_size == (off_t)sizeof(data),
	       "size through the mount after a native write: %lld", (long long)kst.st_size);
	/* A file the kernel never looked up: answered from the engine's
	 * thread (nothing to drop), and its first lookup reads the new size. */
	{
		struct stat ust;
		int ufd;

		CHECK_ERR(create(c, "basic", "unseen", O_WRONLY | O_CREAT, 0644, &ufd, &ust), 0);
		if (ufd >= 0) {
			CHECK_ERR(nvmefs_pwrite(c, ufd, data, 5000, 0), 5000);
			CHECKF(!stat(P("basic/unseen"), &kst) && kst.st_size == 5000,
			       "size through the mount of a file written before any lookup: %lld",
			       (long long)kst.st_size);
			CHECK_ERR(nvmefs_pwrite(c, ufd, data, sizeof(data), 5000),
				  (long long)sizeof(data));
			CHECKF(!stat(P("basic/unseen"), &kst) &&
				       kst.st_size == 5000 + (off_t)sizeof(data),
			       "size through the mount once the kernel holds it: %lld",
			       (long long)kst.st_size);
			close_reg(c, ufd);
		}
	}
	close_reg(c, fd);
	kfd = open(P("basic/f"), O_RDONLY);
	CHECK(kfd >= 0);
	if (kfd >= 0) {
		CHECK(read(kfd, back, sizeof(back)) == (ssize_t)sizeof(back));
		CHECK(!memcmp(data, back, sizeof(data)));
		close(kfd);
	}
	/* A control call after the unanswered close gets its own reply. */
	kfd = open(P("basic/f"), O_RDONLY);
	CHECK_ERR(nvmefs_reg_fd(c, kfd), 0);
	CHECK_ERR(nvmefs_pread(c, kfd, back, sizeof(back), 0), (long long)sizeof(data));
	CHECK_ERR(nvmefs_unreg_fd(c, kfd), 0);
	close(kfd);

	/* O_RDWR reads back through the door too. */
	CHECK_ERR(create(c, "basic", "rw", O_RDWR | O_CREAT | O_EXCL, 0600, &fd, &st), 0);
	if (fd >= 0) {
		CHECK_ERR(nvmefs_pwrite(c, fd, data, 4096, 0), 4096);
		CHECK_ERR(nvmefs_pread(c, fd, back, 4096, 0), 4096);
		CHECK(!memcmp(data, back, 4096));
		CHECK((st.st_mode & 07777) == 0600);
		close_reg(c, fd);
	}
}

/*
 * The directory's cached attributes are dropped also when the kernel never
 * looked the new name up: FUSE_NOTIFY_INVAL_ENTRY finds no dentry then and
 * leaves the directory alone (fuse_reverse_inval_entry), so the door drops
 * them itself. A stat of the directory through the mount shows the create.
 */
static void test_dir_attrs(struct nvmefs_client *c)
{
	struct stat st, d0, d1;
	int fd;

	mkdir_mode("dattr", 0755, 0, 0);
	CHECK(!stat(P("dattr"), &d0)); /* the kernel caches its attributes */
	usleep(20000);		       /* a later mtime */
	CHECK_ERR(create(c, "dattr", "g", O_WRONLY | O_CREAT | O_CLOEXEC, 0644, &fd, &st), 0);
	CHECK(!stat(P("dattr"), &d1));
	CHECKF(d1.st_mtim.tv_sec != d0.st_mtim.tv_sec || d1.st_mtim.tv_nsec != d0.st_mtim.tv_nsec,
	       "the directory's mtime through the mount changed with a create of a name the "
	       "kernel never looked up");
	if (fd >= 0)
		close_reg(c, fd);
}

static void test_exists(struct nvmefs_client *c)
{
	struct stat st, a, b;
	int fd, kfd;

	mkdir_mode("exists", 0755, 0, 0);
	kfd = open(P("exists/f"), O_WRONLY | O_CREAT, 0600);
	CHECK(kfd >= 0 && write(kfd, "abc", 3) == 3);
	close(kfd);
	CHECK(!stat(P("exists/f"), &a));
	CHECK_ERR(create(c, "exists", "f", O_WRONLY | O_CREAT | O_TRUNC, 0644, &fd, &st), -EEXIST);
	CHECK_ERR(create(c, "exists", "f", O_WRONLY | O_CREAT | O_EXCL, 0644, &fd, &st), -EEXIST);
	CHECK(!stat(P("exists/f"), &b));
	CHECKF(b.st_size == 3 && b.st_mode == a.st_mode && b.st_ino == a.st_ino,
	       "the existing file unchanged: size %lld", (long long)b.st_size);
	mkdir_mode("exists/sub", 0755, 0, 0);
	CHECK_ERR(create(c, "exists", "sub", O_WRONLY | O_CREAT, 0644, &fd, &st), -EEXIST);
}

static void test_refused(struct nvmefs_client *c)
{
	struct stat st;
	int fd, d, ph, ret;

	mkdir_mode("refused", 0755, 0, 0);
	CHECK_ERR(create(c, "refused", "r", O_RDONLY | O_CREAT, 0644, &fd, &st), -EOPNOTSUPP);
	CHECK_ERR(create(c, "refused", "a", O_WRONLY | O_CREAT | O_APPEND, 0644, &fd, &st),
		  -EOPNOTSUPP);
	CHECK_ERR(create(c, "refused", "d", O_WRONLY | O_CREAT | O_DIRECT, 0644, &fd, &st),
		  -EOPNOTSUPP);
	CHECK_ERR(create(c, "refused", "n", O_WRONLY, 0644, &fd, &st), -EOPNOTSUPP);
	ph = placeholder();
	CHECK_ERR(nvmefs_create(c, ph, "x", O_WRONLY | O_CREAT, 0644, 022, ph, &st), -EXDEV);
	d = open(P("exists/f"), O_PATH);
	CHECK_ERR(nvmefs_create(c, d, "x", O_WRONLY | O_CREAT, 0644, 022, ph, &st), -ENOTDIR);
	close(d);
	d = dir_fd("refused");
	CHECK_ERR(nvmefs_create(c, d, "a/b", O_WRONLY | O_CREAT, 0644, 022, ph, &st), -EINVAL);
	CHECK_ERR(nvmefs_create(c, d, "..", O_WRONLY | O_CREAT, 0644, 022, ph, &st), -EINVAL);
	CHECK_ERR(nvmefs_create(c, d, "", O_WRONLY | O_CREAT, 0644, 022, ph, &st), -EINVAL);
	close(d);
	/* A directory removed after the client opened it. */
	mkdir_mode("gone", 0755, 0, 0);
	d = dir_fd("gone");
	CHECK(!rmdir(P("gone")));
	ret = nvmefs_create(c, d, "x", O_WRONLY | O_CREAT, 0644, 022, ph, &st);
	CHECK_ERR(ret, -ENOENT);
	close(d);
	close(ph);
	for (const char *const *n = (const char *const[]){"r", "a", "d", "n", "x", NULL}; *n; n++)
		CHECKF(access(P("refused/x"), F_OK) && access(P("refused/r"), F_OK) &&
			       access(P("refused/a"), F_OK) && access(P("refused/d"), F_OK),
		       "nothing made (%s)", *n);
}

/* In a child as another user: the expected result of creating name in dir.
 * early: attach as root first, then become the other user (the daemon must
 * go by who sends, not by who connected). */
static void as_other_at(bool early, const char *dir, const char *name, gid_t group, int want,
			uid_t want_uid, gid_t want_gid)
{
	pid_t pid = fork();
	int status;

	if (pid < 0) {
		perror("fork");
		exit(1);
	}
	if (!pid) {
		gid_t groups[1] = {group};
		struct nvmefs_client *c = early ? attach() : NULL;
		struct stat st;
		int fd, ret;

		if (setgroups(group ? 1 : 0, groups) ||
		    setresgid(OTHER_GID, OTHER_GID, OTHER_GID) ||
		    setresuid(OTHER_UID, OTHER_UID, OTHER_UID)) {
			perror("setresuid");
			_exit(2);
		}
		if (!c)
			c = attach();
		ret = create(c, dir, name, O_WRONLY | O_CREAT | O_CLOEXEC, 0640, &fd, &st);
		if (ret != want) {
			fprintf(stderr, "FAIL: as uid %d, create %s/%s: %d (%s), want %d\n",
				OTHER_UID, dir, name, ret, strerror(-ret), want);
			_exit(1);
		}
		if (!ret && (st.st_uid != want_uid || st.st_gid != want_gid)) {
			fprintf(stderr, "FAIL: %s/%s owned by %u:%u, want %u:%u\n", dir, name,
				(unsigned)st.st_uid, (unsigned)st.st_gid, (unsigned)want_uid,
				(unsigned)want_gid);
			_exit(1);
		}
		nvmefs_detach(c);
		_exit(0);
	}
	CHECKF(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && !WEXITSTATUS(status),
	       "as another user in %s", dir);
}

static void as_other(const char *dir, const char *name, gid_t group, int want, uid_t want_uid,
		     gid_t want_gid)
{
	as_other_at(false, dir, name, group, want, want_uid, want_gid);
}

static void test_perms(void)
{
	struct stat st;

	mkdir_mode("p755", 0755, 0, 0);
	mkdir_mode("p777", 0777, 0, 0);
	mkdir_mode("p770", 0770, 0, 5000);
	mkdir_mode("psgid", 02777, 0, 5001);
	as_other("p755", "f", 0, -EACCES, 0, 0);
	as_other_at(true, "p755", "f", 0, -EACCES, 0, 0);
	CHECK(access(P("p755/f"), F_OK) && errno == ENOENT);
	as_other("p777", "f", 0, 0, OTHER_UID, OTHER_GID);
	CHECK(!stat(P("p777/f"), &st) && st.st_uid == OTHER_UID && (st.st_mode & 0777) == 0640);
	as_other("p770", "f", 0, -EACCES, 0, 0);
	as_other("p770", "g", 5000, 0, OTHER_UID, OTHER_GID);
	as_other("psgid", "f", 0, 0, OTHER_UID, 5001);
}

/* Root gets no override through the door (it cannot see capabilities):
 * a directory whose bits refuse writing is -EACCES, for the mount to
 * decide. */
static void test_root_bits(struct nvmefs_client *c)
{
	struct stat st;
	int fd;

	mkdir_mode("r555", 0555, 0, 0);
	CHECK_ERR(create(c, "r555", "f", O_WRONLY | O_CREAT, 0644, &fd, &st), -EACCES);
	CHECK(access(P("r555/f"), F_OK) && errno == ENOENT);
}

/* Many closes in a row, their replies unread: the library must read them
 * before the socket and the daemon's queue fill (it hung at about 620). */
static void test_many_closes(struct nvmefs_client *c)
{
	enum { N = 700 };
	static int fds[N];
	struct stat st;
	int d, n = 0;

	mkdir_mode("many", 0755, 0, 0);
	d = dir_fd("many");
	for (int i = 0; i < N; i++) {
		char name[32];

		snprintf(name, sizeof(name), "f%d", i);
		fds[i] = dup(d);
		if (fds[i] < 0 ||
		    nvmefs_create(c, d, name, O_WRONLY | O_CREAT | O_EXCL, 0644, 022, fds[i], &st))
			break;
		n++;
	}
	CHECKF(n == N, "%d of %d files made", n, N);
	for (int i = 0; i < n; i++) {
		CHECK_ERR(nvmefs_close_fd(c, fds[i]), 0);
		close(fds[i]);
	}
	/* A call that waits for its own reply still gets it. */
	CHECK_ERR(create(c, "many", "last", O_WRONLY | O_CREAT, 0644, &fds[0], &st), 0);
	if (fds[0] >= 0)
		close_reg(c, fds[0]);
	close(d);
}

static void test_writeback(struct nvmefs_client *c)
{
	struct stat st;
	int fd;

	mkdir_mode("create_wb", 0755, 0, 0);
	CHECK_ERR(create(c, "create_wb", "f", O_WRONLY | O_CREAT, 0644, &fd, &st), -EOPNOTSUPP);
	CHECK(access(P("create_wb/f"), F_OK) && errno == ENOENT);
}

int main(int argc, char **argv)
{
	struct nvmefs_client *c;

	if (argc < 2) {
		fprintf(stderr, "usage: test_client_create MOUNTPOINT [writeback]\n");
		return 2;
	}
	if (geteuid())
		TEST_SKIP("needs root (files as another user)");
	mnt = argv[1];
	umask(022);
	alarm(120);
	c = attach();
	if (argc > 2 && !strcmp(argv[2], "writeback")) {
		test_writeback(c);
	} else {
		test_basic(c);
		test_dir_attrs(c);
		test_exists(c);
		test_refused(c);
		test_root_bits(c);
		test_many_closes(c);
		test_perms();
	}
	nvmefs_detach(c);
	return test_result();
}
