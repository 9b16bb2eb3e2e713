// SPDX-License-Identifier: MIT
/*
 * POSIX/Linux semantics of file operations inside one directory, asserting
 * what Linux's own filesystems (tmpfs, ext4) do, so that the same program run
 * on an nvmefs mount shows where nvmefs behaves differently.
 *
 * usage: test_posix DIR
 *
 * Each area (create/open, read/write, truncate, timestamps, setattr,
 * link/unlink, rename, mkdir/readdir, symlink, mknod, xattr, fallocate,
 * lseek, statfs, fsync, names, open files, permissions) makes its own
 * subdirectory of DIR, prints its name and removes the subdirectory at the
 * end. Where Linux filesystems legitimately differ (optional fallocate modes,
 * SEEK_HOLE granularity, ENOTEMPTY vs EEXIST) both behaviours are accepted
 * and the check says why. Parts that need root (chown, device nodes, checks
 * run as uid 65534 in a forked child) are skipped with a note otherwise; on a
 * FUSE mount those need allow_other and default_permissions. Random data
 * comes from a printed seed (NVMEFS_TEST_SEED repeats a run). Exit 0 pass,
 * 1 fail.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <endian.h>
#include <fcntl.h>
#include <ftw.h>
#include <grp.h>
#include <inttypes.h>
#include <limits.h>
#include <linux/capability.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#include "test_util.h"

#define KiB    1024L
#define MiB    (1024L * 1024L)
#define NOBODY 65534
#define BIG_N  5000 /* entries in the big directory */

static const char *base_dir; /* argv[1] */
static char area[PATH_MAX];  /* subdirectory of the running area */
static uint64_t rng;
static bool is_root;

/* ---- helpers ---------------------------------------------------------- */

/* -errno for a failed call, its result otherwise: CHECK_ERR(sys(unlink(p)), -EISDIR). */
static long sys(long r)
{
	return r < 0 ? -errno : r;
}

/* open() for its error only: 0 if it succeeds (the fd is closed again), else -errno. */
static int open_err(const char *path, int flags)
{
	int fd = open(path, flags, 0644);

	if (fd < 0)
		return -errno;
	close(fd);
	return 0;
}

/* splitmix64 */
static uint64_t rnd(void)
{
	uint64_t z = (rng += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static void fill_rand(void *buf, size_t len)
{
	unsigned char *p = buf;
	uint64_t v;
	size_t i;

	for (i = 0; i + 8 <= len; i += 8) {
		v = rnd();
		memcpy(p + i, &v, 8);
	}
	v = rnd();
	memcpy(p + i, &v, len - i);
}

static void *xmalloc(size_t len)
{
	void *p = calloc(1, len);

	if (!p) {
		perror("calloc");
		exit(1);
	}
	return p;
}

/* Offset of the first byte where a and b differ, or -1. */
static long first_diff(const void *a, const void *b, size_t len)
{
	const unsigned char *x = a, *y = b;
	size_t i;

	for (i = 0; i < len; i++)
		if (x[i] != y[i])
			return (long)i;
	return -1;
}

/* Offset of the first non-zero byte, or -1. */
static long first_nonzero(const void *buf, size_t len)
{
	const unsigned char *p = buf;
	size_t i;

	for (i = 0; i < len; i++)
		if (p[i])
			return (long)i;
	return -1;
}

#define CHECK_BYTES(got, want, len)                                                                \
	do {                                                                                       \
		long d_ = first_diff(got, want, len);                                              \
		CHECKF(d_ < 0, "%s differs from %s at byte %ld", #got, #want, d_);                 \
	} while (0)

#define CHECK_ZERO(buf, len)                                                                       \
	do {                                                                                       \
		long z_ = first_nonzero(buf, len);                                                 \
		CHECKF(z_ < 0, "%s: byte %ld is not zero", #buf, z_);                              \
	} while (0)

/* Path of name inside the current area; rotating buffers so a few can be live at once. */
static char *at(const char *name)
{
	static char bufs[8][PATH_MAX];
	static unsigned next;
	char *b = bufs[next++ % 8];
	int n = snprintf(b, PATH_MAX, "%s/%s", area, name);

	if (n < 0 || n >= PATH_MAX) {
		fprintf(stderr, "path %s/%s too long\n", area, name);
		exit(1);
	}
	return b;
}

/* pwrite all of buf: 0 or -errno. */
static int write_at(int fd, const void *buf, size_t len, off_t off)
{
	size_t done = 0;
	ssize_t r;

	while (done < len) {
		r = pwrite(fd, (const char *)buf + done, len - done, off + (off_t)done);
		if (r < 0)
			return -errno;
		if (r == 0)
			return -EIO;
		done += (size_t)r;
	}
	return 0;
}

/* pread up to len bytes, stopping only at EOF: the count or -errno. */
static ssize_t read_at(int fd, void *buf, size_t len, off_t off)
{
	size_t done = 0;
	ssize_t r;

	while (done < len) {
		r = pread(fd, (char *)buf + done, len - done, off + (off_t)done);
		if (r < 0)
			return -errno;
		if (r == 0)
			break;
		done += (size_t)r;
	}
	return (ssize_t)done;
}

/* Create or replace path with exactly buf: 0 or -errno. */
static int put_file(const char *path, const void *buf, size_t len)
{
	int fd = open(path, O_CREAT | O_TRUNC | O_WRONLY, 0644);
	int r;

	if (fd < 0)
		return -errno;
	r = write_at(fd, buf, len, 0);
	close(fd);
	return r;
}

/* Read up to len bytes of path: the count or -errno. */
static ssize_t get_file(const char *path, void *buf, size_t len)
{
	int fd = open(path, O_RDONLY);
	ssize_t r;

	if (fd < 0)
		return -errno;
	r = read_at(fd, buf, len, 0);
	close(fd);
	return r;
}

/* Check that path holds exactly the len bytes of want. */
#define CHECK_FILE(path, want, len)                                                                \
	do {                                                                                       \
		char cf_[256];                                                                     \
		ssize_t n_ = get_file(path, cf_, sizeof(cf_));                                     \
		CHECKF(n_ == (ssize_t)(len) && !memcmp(cf_, want, len), "%s: read %zd bytes",      \
		       path, n_);                                                                  \
	} while (0)

static struct stat lst(const char *path)
{
	struct stat st;

	if (lstat(path, &st)) {
		CHECKF(0, "lstat %s: %s", path, strerror(errno));
		memset(&st, 0, sizeof(st));
	}
	return st;
}

static struct stat fst(int fd)
{
	struct stat st;

	if (fstat(fd, &st)) {
		CHECKF(0, "fstat %d: %s", fd, strerror(errno));
		memset(&st, 0, sizeof(st));
	}
	return st;
}

static int ts_cmp(struct timespec a, struct timespec b)
{
	if (a.tv_sec != b.tv_sec)
		return a.tv_sec < b.tv_sec ? -1 : 1;
	if (a.tv_nsec != b.tv_nsec)
		return a.tv_nsec < b.tv_nsec ? -1 : 1;
	return 0;
}

#define CHECK_TS(a, op, b)                                                                         \
	do {                                                                                       \
		struct timespec ta_ = (a), tb_ = (b);                                              \
		CHECKF(ts_cmp(ta_, tb_) op 0, "%s = %lld.%09ld, %s = %lld.%09ld", #a,              \
		       (long long)ta_.tv_sec, ta_.tv_nsec, #b, (long long)tb_.tv_sec,              \
		       tb_.tv_nsec);                                                               \
	} while (0)

/*
 * Wait until the kernel's coarse clock, which file timestamps come from, has
 * moved on, so a timestamp set from now on is later than any taken before.
 */
static void wait_tick(void)
{
	struct timespec t0, t, d = {0, 1000000};

	clock_gettime(CLOCK_REALTIME_COARSE, &t0);
	do {
		nanosleep(&d, NULL);
		clock_gettime(CLOCK_REALTIME_COARSE, &t);
	} while (ts_cmp(t, t0) == 0);
}

/* Run op (0 or -1 and errno) and check that it moved path_after's ctime past path's. */
#define CHECK_CTIME_BUMP(path, op, path_after)                                                     \
	do {                                                                                       \
		struct stat old_ = lst(path);                                                      \
		wait_tick();                                                                       \
		CHECK_ERR(sys(op), 0);                                                             \
		CHECK_TS(lst(path_after).st_ctim, >, old_.st_ctim);                                \
	} while (0)

/* Run op and check that it moved both mtime and ctime of directory dir. */
#define CHECK_DIR_BUMP(dir, op)                                                                    \
	do {                                                                                       \
		struct stat old_ = lst(dir), new_;                                                 \
		wait_tick();                                                                       \
		CHECK_ERR(sys(op), 0);                                                             \
		new_ = lst(dir);                                                                   \
		CHECK_TS(new_.st_mtim, >, old_.st_mtim);                                           \
		CHECK_TS(new_.st_ctim, >, old_.st_ctim);                                           \
	} while (0)

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
	return remove(path) ? -1 : 0;
}

static int rm_rf(const char *path)
{
	struct stat st;

	if (lstat(path, &st) && errno == ENOENT)
		return 0;
	return nftw(path, rm_entry, 32, FTW_DEPTH | FTW_PHYS) ? -errno : 0;
}

/* Print the area's name and make its fresh subdirectory; false if that fails. */
static bool area_begin(const char *name)
{
	int n = snprintf(area, sizeof(area), "%s/%s", base_dir, name);

	if (n < 0 || n >= (int)sizeof(area)) {
		fprintf(stderr, "%s/%s: path too long\n", base_dir, name);
		exit(1);
	}
	printf("%s\n", name);
	fflush(stdout);
	rm_rf(area);
	if (mkdir(area, 0755)) {
		CHECKF(0, "mkdir %s: %s", area, strerror(errno));
		return false;
	}
	return true;
}

static void area_end(void)
{
	int r = rm_rf(area);

	CHECKF(r == 0, "removing %s: %s", area, strerror(-r));
}

/*
 * Run fn in a forked child as uid/gid 65534 without supplementary groups,
 * with the area as working directory (entered by fd, so DIR's ancestors need
 * no search permission for 65534). Failed checks in the child fail the test.
 */
static void as_nobody(void (*fn)(void))
{
	int dfd = open(area, O_RDONLY | O_DIRECTORY);
	int status;
	pid_t pid;

	CHECK(dfd >= 0);
	fflush(stdout);
	fflush(stderr);
	pid = fork();
	if (pid < 0) {
		CHECKF(0, "fork: %s", strerror(errno));
		close(dfd);
		return;
	}
	if (pid == 0) {
		test_failures = 0;
		if (fchdir(dfd) || setgroups(0, NULL) || setresgid(NOBODY, NOBODY, NOBODY) ||
		    setresuid(NOBODY, NOBODY, NOBODY)) {
			perror("dropping to uid 65534");
			_exit(2);
		}
		fn();
		fflush(stdout);
		_exit(test_failures ? 1 : 0);
	}
	close(dfd);
	CHECK(waitpid(pid, &status, 0) == pid);
	CHECKF(WIFEXITED(status) && WEXITSTATUS(status) == 0,
	       "checks as uid %d failed (status %#x)", NOBODY, status);
}

/* Free bytes (f_bfree) of the filesystem holding path, or -1. */
static long long free_bytes(const char *path)
{
	struct statvfs s;

	if (statvfs(path, &s))
		return -1;
	return (long long)s.f_bfree * (long long)s.f_frsize;
}

/* Poll up to 2 s (a FUSE fs may reclaim after the call returned) until free space >= want. */
static long long wait_free(const char *path, long long want)
{
	struct timespec d = {0, 10000000};
	long long f = free_bytes(path);
	int i;

	for (i = 0; i < 200 && f < want; i++) {
		nanosleep(&d, NULL);
		f = free_bytes(path);
	}
	return f;
}

/* Times name is listed in dir (-1 if it cannot be read); *others: entries besides . and ... */
static int dir_count(const char *dir, const char *name, int *others)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	int n = 0;

	*others = 0;
	if (!d)
		return -1;
	while ((e = readdir(d))) {
		if (!strcmp(e->d_name, name))
			n++;
		else if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
			(*others)++;
	}
	closedir(d);
	return n;
}

/* ---- create/open ------------------------------------------------------ */

static void create_excl(void)
{
	struct stat dir = lst(area), st;
	gid_t gid = (dir.st_mode & S_ISGID) ? dir.st_gid : getegid();
	int fd;

	fd = open(at("f"), O_CREAT | O_EXCL | O_WRONLY, 0666);
	CHECK(fd >= 0);
	st = fst(fd);
	/* umask 022 applied to 0666; owner is the caller, group the caller's or a setgid dir's */
	CHECKF(st.st_mode == (S_IFREG | 0644), "mode %o", st.st_mode);
	CHECK(st.st_size == 0 && st.st_nlink == 1);
	CHECK(st.st_uid == geteuid() && st.st_gid == gid);
	CHECK(write(fd, "abc", 3) == 3);
	close(fd);
	CHECK_ERR(open_err(at("f"), O_CREAT | O_EXCL | O_WRONLY), -EEXIST);
	/* O_CREAT without O_EXCL opens the existing file and keeps its data */
	CHECK_ERR(open_err(at("f"), O_CREAT | O_WRONLY), 0);
	CHECK_FILE(at("f"), "abc", 3);
	/* O_EXCL does not follow a symlink, even a dangling one */
	CHECK_ERR(sys(symlink("nowhere", at("dangling"))), 0);
	CHECK_ERR(open_err(at("dangling"), O_CREAT | O_EXCL | O_WRONLY), -EEXIST);
	CHECK_ERR(sys(access(at("nowhere"), F_OK)), -ENOENT);
}

static void create_trunc_append(void)
{
	char buf[8192];
	struct stat old, st;
	int fd, fd2;

	fill_rand(buf, sizeof(buf));
	CHECK_ERR(put_file(at("t"), buf, sizeof(buf)), 0);
	old = lst(at("t"));
	wait_tick();
	fd = open(at("t"), O_WRONLY | O_TRUNC);
	CHECK(fd >= 0);
	st = fst(fd);
	CHECK(st.st_size == 0 && st.st_ino == old.st_ino);
	CHECK_TS(st.st_mtim, >, old.st_mtim);
	CHECK_TS(st.st_ctim, >, old.st_ctim);
	close(fd);
	CHECK(lst(at("t")).st_size == 0);
	/* Linux truncates on O_RDONLY | O_TRUNC too (write permission needed). */
	CHECK_ERR(put_file(at("t"), buf, sizeof(buf)), 0);
	fd = open(at("t"), O_RDONLY | O_TRUNC);
	CHECK(fd >= 0);
	CHECK(fst(fd).st_size == 0);
	close(fd);
	CHECK(lst(at("t")).st_size == 0);

	/* O_APPEND: every write lands at the current end, whoever wrote last */
	fd = open(at("a"), O_CREAT | O_WRONLY | O_APPEND, 0644);
	fd2 = open(at("a"), O_WRONLY | O_APPEND);
	CHECK(fd >= 0 && fd2 >= 0);
	CHECK(write(fd, "aaaa", 4) == 4);
	CHECK(write(fd2, "bbbb", 4) == 4);
	CHECK(lseek(fd, 0, SEEK_SET) == 0);
	CHECK(write(fd, "cc", 2) == 2);
	CHECK(lseek(fd, 0, SEEK_CUR) == 10);
	/* Linux: pwrite on an O_APPEND fd appends too (pwrite(2), BUGS) */
	CHECK(pwrite(fd2, "dd", 2, 0) == 2);
	close(fd);
	close(fd2);
	CHECK_FILE(at("a"), "aaaabbbbccdd", 12);
}

static void create_direct(void)
{
	const size_t len = 64 * KiB;
	unsigned char *buf, *rbuf, *cbuf = xmalloc(132 * KiB + 1);
	int fd;

	if (posix_memalign((void **)&buf, 4096, len) || posix_memalign((void **)&rbuf, 4096, len)) {
		CHECKF(0, "posix_memalign failed");
		exit(1);
	}
	fd = open(at("direct"), O_CREAT | O_RDWR | O_DIRECT, 0644);
	if (fd < 0 && errno == EINVAL) {
		printf("  note: O_DIRECT open gives EINVAL here, its round trip is skipped\n");
		goto out;
	}
	CHECKF(fd >= 0, "open O_DIRECT: %s", strerror(errno));
	if (fd < 0)
		goto out;
	fill_rand(buf, len);
	CHECK(pwrite(fd, buf, len, 0) == (ssize_t)len);
	CHECK(pwrite(fd, buf, 4096, 128 * KiB) == 4096);
	CHECK(pread(fd, rbuf, len, 0) == (ssize_t)len);
	CHECK_BYTES(rbuf, buf, len);
	CHECK(fst(fd).st_size == 132 * KiB);
	/* the buffered view agrees, and a buffered write is seen by an O_DIRECT read */
	CHECK(get_file(at("direct"), cbuf, 132 * KiB + 1) == 132 * KiB);
	CHECK_BYTES(cbuf, buf, len);
	CHECK_ZERO(cbuf + len, 64 * KiB);
	CHECK_BYTES(cbuf + 128 * KiB, buf, 4096);
	fill_rand(cbuf, 4096);
	{
		int bfd = open(at("direct"), O_WRONLY);

		CHECK(bfd >= 0 && pwrite(bfd, cbuf, 4096, 8192) == 4096);
		close(bfd);
	}
	CHECK(pread(fd, rbuf, 4096, 8192) == 4096);
	CHECK_BYTES(rbuf, cbuf, 4096);
	close(fd);
out:
	free(buf);
	free(rbuf);
	free(cbuf);
}

static void create_errors(void)
{
	char name[300];
	struct stat st;

	memset(name, 'n', 256);
	name[255] = 0;
	CHECK_ERR(open_err(at(name), O_CREAT | O_WRONLY), 0);
	CHECK(S_ISREG(lst(at(name)).st_mode));
	name[255] = 'n';
	name[256] = 0;
	CHECK_ERR(open_err(at(name), O_CREAT | O_WRONLY), -ENAMETOOLONG);
	CHECK_ERR(sys(lstat(at(name), &st)), -ENAMETOOLONG);

	CHECK_ERR(open_err(at("missing"), O_RDONLY), -ENOENT);
	CHECK_ERR(open_err(at("nodir/x"), O_CREAT | O_WRONLY), -ENOENT);
	CHECK_ERR(open_err(at("f/x"), O_RDONLY), -ENOTDIR);
	CHECK_ERR(open_err(at("f/x"), O_CREAT | O_WRONLY), -ENOTDIR);
	CHECK_ERR(open_err(at("f"), O_RDONLY | O_DIRECTORY), -ENOTDIR);
	CHECK_ERR(sys(mkdir(at("dir"), 0755)), 0);
	CHECK_ERR(open_err(at("dir"), O_WRONLY), -EISDIR);
	CHECK_ERR(open_err(at("dir"), O_RDWR), -EISDIR);
	CHECK_ERR(open_err(at("dir"), O_CREAT | O_RDONLY), -EISDIR);
	CHECK_ERR(open_err(at("dir"), O_CREAT | O_EXCL | O_WRONLY), -EEXIST);
	CHECK_ERR(open_err(at("dir"), O_RDONLY), 0);
}

static void test_create(void)
{
	if (!area_begin("create"))
		return;
	create_excl();
	create_trunc_append();
	create_direct();
	create_errors();
	area_end();
}

/* ---- read/write ------------------------------------------------------- */

static void rw_sparse(void)
{
	const off_t off = 10 * MiB;
	unsigned char *data = xmalloc(4096), *buf = xmalloc(MiB);
	struct stat st;
	int fd = open(at("sparse"), O_CREAT | O_RDWR, 0644);

	CHECK(fd >= 0);
	fill_rand(data, 4096);
	CHECK_ERR(write_at(fd, data, 4096, off), 0);
	CHECK_ERR(sys(fsync(fd)), 0);
	st = fst(fd);
	CHECK(st.st_size == off + 4096);
	CHECKF((long long)st.st_blocks * 512 >= 4096, "st_blocks %lld", (long long)st.st_blocks);
	/*
	 * Linux filesystems allocate only the written block; a FUSE fs may
	 * allocate in bigger units, so "much smaller" is "under half the size".
	 */
	CHECKF((long long)st.st_blocks * 512 < st.st_size / 2, "st_blocks %lld for a sparse file",
	       (long long)st.st_blocks);
	CHECK(read_at(fd, buf, MiB, 0) == MiB);
	CHECK_ZERO(buf, MiB);
	CHECK(read_at(fd, buf, MiB, 5 * MiB + 123) == MiB);
	CHECK_ZERO(buf, MiB);
	CHECK(read_at(fd, buf, 8192, off - 4096) == 8192);
	CHECK_ZERO(buf, 4096);
	CHECK_BYTES(buf + 4096, data, 4096);
	/* short read at EOF, nothing past it */
	CHECK(read_at(fd, buf, 8192, off + 2048) == 2048);
	CHECK_BYTES(buf, data + 2048, 2048);
	CHECK(read_at(fd, buf, 100, off + 4096) == 0);
	CHECK(read_at(fd, buf, 100, off + 100000) == 0);
	close(fd);
	free(data);
	free(buf);
}

/* pwrite at awkward offsets and random ones, then compare the file with a model. */
static void rw_model(void)
{
	static const struct {
		off_t off;
		size_t len;
	} cases[] = {
		{1, 1},	      {4095, 2},	  {4097, 100},	       {MiB - 1, 1},
		{MiB - 1, 2}, {MiB - 3000, 7000}, {2 * MiB - 1, 4097}, {0, 1},
		{4096, 4096}, {12345, 65536 + 3}, {MiB + 1, MiB},      {3 * MiB - 5, 5},
		{511, 513},   {MiB - 4096, 8192}, {2 * MiB, 1},	       {65535, 2},
	};
	const size_t size = 3 * MiB;
	unsigned char *model = xmalloc(size), *buf = xmalloc(size);
	size_t i, end = 0;
	int fd = open(at("model"), O_CREAT | O_RDWR, 0644);

	CHECK(fd >= 0);
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]) + 64; i++) {
		off_t off;
		size_t len;

		if (i < sizeof(cases) / sizeof(cases[0])) {
			off = cases[i].off;
			len = cases[i].len;
		} else {
			len = 1 + rnd() % 70000;
			off = (off_t)(rnd() % (size - len));
		}
		fill_rand(model + off, len);
		CHECK_ERR(write_at(fd, model + off, len, off), 0);
		if ((size_t)off + len > end)
			end = (size_t)off + len;
	}
	CHECK(fst(fd).st_size == (off_t)end);
	close(fd);
	CHECK(get_file(at("model"), buf, size) == (ssize_t)end);
	CHECK_BYTES(buf, model, end);
	/* unaligned reads of random ranges */
	fd = open(at("model"), O_RDONLY);
	for (i = 0; i < 32; i++) {
		size_t len = 1 + rnd() % 200000, off = rnd() % size;
		size_t want = off >= end ? 0 : (off + len > end ? end - off : len);

		CHECK(read_at(fd, buf, len, (off_t)off) == (ssize_t)want);
		CHECK_BYTES(buf, model + off, want);
	}
	close(fd);
	free(model);
	free(buf);
}

static void rw_zero_len(void)
{
	struct stat old, st;
	int fd;

	CHECK_ERR(put_file(at("z"), "hello", 5), 0);
	old = lst(at("z"));
	wait_tick();
	fd = open(at("z"), O_WRONLY);
	CHECK(fd >= 0);
	CHECK(write(fd, "x", 0) == 0);
	CHECK(pwrite(fd, "x", 0, MiB) == 0);
	st = fst(fd);
	/* POSIX: a zero-length write to a regular file "has no other results" */
	CHECK(st.st_size == 5);
	CHECK_TS(st.st_mtim, ==, old.st_mtim);
	CHECK_TS(st.st_ctim, ==, old.st_ctim);
	close(fd);
	CHECK_FILE(at("z"), "hello", 5);
}

static void test_readwrite(void)
{
	if (!area_begin("readwrite"))
		return;
	rw_sparse();
	rw_model();
	rw_zero_len();
	area_end();
}

/* ---- truncate --------------------------------------------------------- */

static void trunc_up_down(void)
{
	const size_t len = 64 * KiB;
	unsigned char *data = xmalloc(len), *buf = xmalloc(MiB + 5);
	struct stat old, st;
	int fd;

	fill_rand(data, len);
	CHECK_ERR(put_file(at("t"), data, len), 0);
	old = lst(at("t"));
	wait_tick();
	CHECK_ERR(sys(truncate(at("t"), MiB + 5)), 0);
	st = lst(at("t"));
	CHECK(st.st_size == MiB + 5);
	CHECK_TS(st.st_mtim, >, old.st_mtim);
	CHECK_TS(st.st_ctim, >, old.st_ctim);
	CHECK(get_file(at("t"), buf, MiB + 5) == MiB + 5);
	CHECK_BYTES(buf, data, len);
	CHECK_ZERO(buf + len, MiB + 5 - len);

	/* down to an unaligned size and back up: the cut bytes must come back as zeros */
	fd = open(at("t"), O_RDWR);
	CHECK(fd >= 0);
	old = fst(fd);
	wait_tick();
	CHECK_ERR(sys(ftruncate(fd, 10000)), 0);
	st = fst(fd);
	CHECK(st.st_size == 10000);
	CHECK_TS(st.st_mtim, >, old.st_mtim);
	CHECK_TS(st.st_ctim, >, old.st_ctim);
	CHECK(read_at(fd, buf, len, 0) == 10000);
	CHECK_BYTES(buf, data, 10000);
	CHECK_ERR(sys(ftruncate(fd, len)), 0);
	CHECK(read_at(fd, buf, len, 0) == (ssize_t)len);
	CHECK_BYTES(buf, data, 10000);
	CHECK_ZERO(buf + 10000, len - 10000);

	/* the same after a cut followed by a write far past it */
	CHECK_ERR(sys(ftruncate(fd, 5000)), 0);
	CHECK(pwrite(fd, "x", 1, 200000) == 1);
	CHECK(read_at(fd, buf, MiB, 0) == 200001);
	CHECK_BYTES(buf, data, 5000);
	CHECK_ZERO(buf + 5000, 200000 - 5000);
	CHECK(buf[200000] == 'x');
	close(fd);
	free(data);
	free(buf);
}

static void trunc_same_and_errors(void)
{
	char buf[16];
	int fd;

	CHECK_ERR(put_file(at("s"), "0123456789", 10), 0);
	/*
	 * To the same size: succeeds and keeps the data. Timestamps are not
	 * checked: POSIX marks them for update only if the size changes (ext4
	 * and tmpfs set them anyway; nothing relies on that).
	 */
	CHECK_ERR(sys(truncate(at("s"), 10)), 0);
	fd = open(at("s"), O_RDWR);
	CHECK(fd >= 0);
	CHECK_ERR(sys(ftruncate(fd, 10)), 0);
	CHECK(read_at(fd, buf, sizeof(buf), 0) == 10 && !memcmp(buf, "0123456789", 10));
	CHECK_ERR(sys(ftruncate(fd, -1)), -EINVAL);
	close(fd);
	fd = open(at("s"), O_RDONLY);
	{
		long r = sys(ftruncate(fd, 0));

		/* ftruncate(2): EBADF or EINVAL for an fd not open for writing (Linux: EINVAL) */
		CHECKF(r == -EINVAL || r == -EBADF, "ftruncate on O_RDONLY fd: %s",
		       strerror((int)-r));
	}
	close(fd);
	CHECK(lst(at("s")).st_size == 10);
	CHECK_ERR(sys(truncate(at("missing"), 0)), -ENOENT);
	CHECK_ERR(sys(mkdir(at("d"), 0755)), 0);
	CHECK_ERR(sys(truncate(at("d"), 0)), -EISDIR);
}

static void test_truncate(void)
{
	if (!area_begin("truncate"))
		return;
	trunc_up_down();
	trunc_same_and_errors();
	area_end();
}

/* ---- timestamps ------------------------------------------------------- */

static void ts_explicit(void)
{
	struct timespec t[2] = {{1000000000, 123456789}, {1200000000, 987654321}};
	struct timespec far[2] = {{4102444800, 1}, {4102444800 + 86400, 999999999}};
	struct stat st, old;
	int fd;

	CHECK_ERR(put_file(at("f"), "x", 1), 0);
	old = lst(at("f"));
	wait_tick();
	CHECK_ERR(sys(utimensat(AT_FDCWD, at("f"), t, 0)), 0);
	st = lst(at("f"));
	CHECK_TS(st.st_atim, ==, t[0]);
	CHECK_TS(st.st_mtim, ==, t[1]);
	CHECK_TS(st.st_ctim, >, old.st_ctim); /* setting times is a status change */
	/* past 2038 (year 2100) */
	CHECK_ERR(sys(utimensat(AT_FDCWD, at("f"), far, 0)), 0);
	st = lst(at("f"));
	CHECK_TS(st.st_atim, ==, far[0]);
	CHECK_TS(st.st_mtim, ==, far[1]);

	/* futimens: explicit values, then NULL = both now */
	fd = open(at("f"), O_RDWR);
	CHECK(fd >= 0);
	CHECK_ERR(sys(futimens(fd, t)), 0);
	st = fst(fd);
	CHECK_TS(st.st_atim, ==, t[0]);
	CHECK_TS(st.st_mtim, ==, t[1]);
	CHECK_ERR(sys(futimens(fd, NULL)), 0);
	st = fst(fd);
	CHECK(st.st_atim.tv_sec > t[0].tv_sec + 1000000 && st.st_mtim.tv_sec > t[1].tv_sec);
	close(fd);

	/* AT_SYMLINK_NOFOLLOW sets the link's own times, not the target's */
	CHECK_ERR(sys(symlink("f", at("l"))), 0);
	CHECK_ERR(sys(utimensat(AT_FDCWD, at("f"), far, 0)), 0);
	CHECK_ERR(sys(utimensat(AT_FDCWD, at("l"), t, AT_SYMLINK_NOFOLLOW)), 0);
	CHECK_TS(lst(at("l")).st_mtim, ==, t[1]);
	CHECK_TS(lst(at("f")).st_mtim, ==, far[1]);
}

static void ts_now_omit(void)
{
	struct timespec t[2] = {{1000000000, 111}, {1100000000, 222}}, lo, hi;
	struct timespec now_omit[2] = {{0, UTIME_NOW}, {0, UTIME_OMIT}};
	struct timespec omit_now[2] = {{0, UTIME_OMIT}, {0, UTIME_NOW}};
	struct timespec omit[2] = {{0, UTIME_OMIT}, {0, UTIME_OMIT}};
	struct stat st, old;

	CHECK_ERR(put_file(at("n"), "x", 1), 0);
	CHECK_ERR(sys(utimensat(AT_FDCWD, at("n"), t, 0)), 0);
	old = lst(at("n"));
	wait_tick();
	clock_gettime(CLOCK_REALTIME_COARSE, &lo);
	CHECK_ERR(sys(utimensat(AT_FDCWD, at("n"), now_omit, 0)), 0);
	clock_gettime(CLOCK_REALTIME, &hi);
	st = lst(at("n"));
	CHECK_TS(st.st_atim, >=, lo);
	CHECK_TS(st.st_atim, <=, hi);
	CHECK_TS(st.st_mtim, ==, t[1]);
	CHECK_TS(st.st_ctim, >, old.st_ctim);

	CHECK_ERR(sys(utimensat(AT_FDCWD, at("n"), t, 0)), 0);
	old = lst(at("n"));
	wait_tick();
	clock_gettime(CLOCK_REALTIME_COARSE, &lo);
	CHECK_ERR(sys(utimensat(AT_FDCWD, at("n"), omit_now, 0)), 0);
	clock_gettime(CLOCK_REALTIME, &hi);
	st = lst(at("n"));
	CHECK_TS(st.st_atim, ==, t[0]);
	CHECK_TS(st.st_mtim, >=, lo);
	CHECK_TS(st.st_mtim, <=, hi);
	CHECK_TS(st.st_ctim, >, old.st_ctim);

	/* both omitted: nothing changes, not even ctime */
	old = st;
	wait_tick();
	CHECK_ERR(sys(utimensat(AT_FDCWD, at("n"), omit, 0)), 0);
	st = lst(at("n"));
	CHECK_TS(st.st_atim, ==, old.st_atim);
	CHECK_TS(st.st_mtim, ==, old.st_mtim);
	CHECK_TS(st.st_ctim, ==, old.st_ctim);
}

/* ctime moves on every status change of the inode, mtime on data changes. */
static void ts_ctime(void)
{
	uid_t uid = is_root ? 1234 : geteuid();
	struct stat old, st;
	int fd;

	CHECK_ERR(put_file(at("c"), "x", 1), 0);
	CHECK_CTIME_BUMP(at("c"), chmod(at("c"), 0600), at("c"));
	CHECK_CTIME_BUMP(at("c"), chown(at("c"), uid, -1), at("c"));
	CHECK_CTIME_BUMP(at("c"), link(at("c"), at("c2")), at("c"));
	CHECK_CTIME_BUMP(at("c"), unlink(at("c2")), at("c"));
	/* the renamed inode's ctime too (ext4 and tmpfs both set it) */
	CHECK_CTIME_BUMP(at("c"), rename(at("c"), at("r")), at("r"));
	CHECK_CTIME_BUMP(at("r"), truncate(at("r"), 100), at("r"));

	fd = open(at("r"), O_WRONLY);
	CHECK(fd >= 0);
	old = fst(fd);
	wait_tick();
	CHECK(pwrite(fd, "data", 4, 10) == 4);
	st = fst(fd);
	CHECK_TS(st.st_mtim, >, old.st_mtim);
	CHECK_TS(st.st_ctim, >, old.st_ctim);
	close(fd);
}

static void ts_dir(void)
{
	struct stat old, st;

	CHECK_ERR(sys(mkdir(at("d"), 0755)), 0);
	CHECK_ERR(sys(mkdir(at("e"), 0755)), 0);
	CHECK_DIR_BUMP(at("d"), open_err(at("d/f"), O_CREAT | O_WRONLY));
	CHECK_DIR_BUMP(at("d"), rename(at("d/f"), at("d/g")));
	CHECK_DIR_BUMP(at("d"), link(at("d/g"), at("d/h")));
	CHECK_DIR_BUMP(at("d"), unlink(at("d/h")));
	CHECK_DIR_BUMP(at("d"), mkdir(at("d/sub"), 0755));
	CHECK_DIR_BUMP(at("d"), rmdir(at("d/sub")));
	CHECK_DIR_BUMP(at("d"), symlink("g", at("d/l")));
	/* a move between directories changes both */
	CHECK_DIR_BUMP(at("d"), rename(at("d/g"), at("e/g")));
	CHECK_DIR_BUMP(at("e"), rename(at("e/g"), at("d/g")));
	/* writing to a file inside does not touch the directory */
	old = lst(at("d"));
	wait_tick();
	CHECK_ERR(put_file(at("d/g"), "data", 4), 0);
	st = lst(at("d"));
	CHECK_TS(st.st_mtim, ==, old.st_mtim);
	CHECK_TS(st.st_ctim, ==, old.st_ctim);
}

static void test_timestamps(void)
{
	if (!area_begin("timestamps"))
		return;
	ts_explicit();
	ts_now_omit();
	ts_ctime();
	ts_dir();
	area_end();
}

/* ---- setattr ---------------------------------------------------------- */

static void nobody_write(void)
{
	static const char *const names[] = {"suid", "suidgx"};
	size_t i;
	int fd;

	for (i = 0; i < 2; i++) {
		fd = open(names[i], O_WRONLY);
		CHECKF(fd >= 0, "open %s as uid %d: %s", names[i], NOBODY, strerror(errno));
		if (fd < 0)
			continue;
		CHECK(write(fd, "y", 1) == 1);
		close(fd);
	}
}

/* A write by a user without CAP_FSETID clears setuid, and setgid with group-exec. */
static void setattr_kill_suid(void)
{
	CHECK_ERR(put_file(at("suid"), "x", 1), 0);
	CHECK_ERR(put_file(at("suidgx"), "x", 1), 0);
	/*
	 * Group 65534, so the writer is in the file's group: then Linux keeps a
	 * setgid bit without group-exec (the old mandatory-locking marker) on
	 * every kernel version; for non-members kernels from 6.2 clear it too.
	 */
	CHECK_ERR(sys(chown(at("suid"), 0, NOBODY)), 0);
	CHECK_ERR(sys(chmod(at("suid"), 06666)), 0);
	CHECK_ERR(sys(chmod(at("suidgx"), 06676)), 0);
	/* root (CAP_FSETID) writing keeps both */
	CHECK_ERR(put_file(at("suidgx"), "xx", 2), 0);
	CHECKF((lst(at("suidgx")).st_mode & 07777) == 06676, "mode %o after root write",
	       lst(at("suidgx")).st_mode);
	as_nobody(nobody_write);
	CHECKF((lst(at("suid")).st_mode & 07777) == 02666, "mode %o", lst(at("suid")).st_mode);
	CHECKF((lst(at("suidgx")).st_mode & 07777) == 0676, "mode %o", lst(at("suidgx")).st_mode);
}

/*
 * Every way an unprivileged user changes a file's data or size clears its
 * setuid bit, and its setgid bit when the group may execute or the user is
 * not in the file's group (Linux 6.2+). The mode is read back as
 * `stat -c %A` reads it, statx() asking for STATX_MODE only: a FUSE kernel
 * then answers from its attribute cache, so a daemon that cleared the bits
 * without telling the kernel shows the old mode there (xfstests generic/193
 * after a truncate, generic/355 after an O_DIRECT write).
 */
static const char *const kill_ops[] = {"truncate", "ftruncate", "otrunc", "write",
				       "dwrite",   "falloc",	"cfr"};
#define KILL_OPS (sizeof(kill_ops) / sizeof(kill_ops[0]))
/* Per op: a file with group-exec, one without (the writer in its group), one
 * of another group. */
static const struct {
	const char *suffix;
	mode_t mode;
	gid_t gid;
} kill_files[] = {{"gx", 06754, NOBODY}, {"member", 06644, NOBODY}, {"other", 06644, 0}};
#define KILL_FILES (sizeof(kill_files) / sizeof(kill_files[0]))

static bool kill_dio_ok; /* O_DIRECT opens work here (tmpfs before 6.6: no) */

/* As uid 65534: op i on path; 0 or -errno. */
static long kill_do(unsigned i, const char *path)
{
	int fd = open(path, i == 2 ? O_WRONLY | O_TRUNC : i == 4 ? O_RDWR | O_DIRECT : O_WRONLY);
	long r = 0;

	if (fd < 0)
		return -errno;
	if (i == 0) {
		r = sys(truncate(path, 3));
	} else if (i == 1) {
		r = sys(ftruncate(fd, 3));
	} else if (i == 3) {
		r = sys(write(fd, "y", 1)) == 1 ? 0 : -EIO;
	} else if (i == 4) {
		void *buf = NULL;

		if (posix_memalign(&buf, 4096, 4096))
			r = -ENOMEM;
		else {
			memset(buf, 'd', 4096);
			r = sys(pwrite(fd, buf, 4096, 0)) == 4096 ? 0 : -EIO;
		}
		free(buf);
	} else if (i == 5) {
		r = sys(fallocate(fd, 0, 0, 8192));
	} else if (i == 6) {
		int src = open("kill.src", O_RDONLY);

		r = src < 0 ? -errno : sys(copy_file_range(src, NULL, fd, NULL, 2, 0));
		r = r == 2 ? 0 : r < 0 ? r : -EIO;
		if (src >= 0)
			close(src);
	}
	close(fd);
	return r;
}

static void nobody_kill(void)
{
	char name[64];

	for (unsigned i = 0; i < KILL_OPS; i++) {
		if (i == 4 && !kill_dio_ok)
			continue;
		for (unsigned f = 0; f < KILL_FILES; f++) {
			snprintf(name, sizeof(name), "kill.%s.%s", kill_ops[i],
				 kill_files[f].suffix);
			long r = kill_do(i, name);

			CHECKF(r == 0, "%s as uid %d: %s", name, NOBODY, strerror((int)-r));
		}
	}
}

/* The path of op i's file f. */
static char *kill_path(unsigned i, unsigned f)
{
	char name[64];

	snprintf(name, sizeof(name), "kill.%s.%s", kill_ops[i], kill_files[f].suffix);
	return at(name);
}

/* The mode as the kernel answers `stat -c %A`. */
static mode_t mode_only(const char *path)
{
	struct statx stx;

	if (statx(AT_FDCWD, path, AT_SYMLINK_NOFOLLOW, STATX_MODE, &stx)) {
		CHECKF(0, "statx %s: %s", path, strerror(errno));
		return 0;
	}
	return stx.stx_mode & 07777;
}

static void setattr_kill_paths(void)
{
	struct utsname u;
	unsigned major = 0, minor = 0;
	int fd;

	/* Linux 6.2 began to clear a non-executable setgid of non-members. */
	uname(&u);
	sscanf(u.release, "%u.%u", &major, &minor);
	fd = open(at("kill.dio"), O_CREAT | O_RDWR | O_DIRECT, 0644);
	kill_dio_ok = fd >= 0;
	if (fd >= 0)
		close(fd);
	else
		printf("  note: no O_DIRECT here (%s): the direct write is not checked\n",
		       strerror(errno));
	CHECK_ERR(put_file(at("kill.src"), "src", 3), 0);
	for (unsigned i = 0; i < KILL_OPS; i++) {
		for (unsigned f = 0; f < KILL_FILES; f++) {
			char *p = kill_path(i, f);

			CHECK_ERR(put_file(p, "x", 1), 0);
			CHECK_ERR(sys(chown(p, NOBODY, kill_files[f].gid)), 0);
			CHECK_ERR(sys(chmod(p, kill_files[f].mode)), 0);
			/* The kernel now holds the mode with the bits. */
			CHECKF(mode_only(p) == kill_files[f].mode, "%s: mode %o before", p,
			       mode_only(p));
		}
	}
	as_nobody(nobody_kill);
	for (unsigned i = 0; i < KILL_OPS; i++) {
		if (i == 4 && !kill_dio_ok)
			continue;
		for (unsigned f = 0; f < KILL_FILES; f++) {
			mode_t m = kill_files[f].mode & ~(mode_t)S_ISUID;
			char *p = kill_path(i, f);

			if ((m & S_IXGRP) || (kill_files[f].gid != NOBODY &&
					      (major > 6 || (major == 6 && minor >= 2))))
				m &= ~(mode_t)S_ISGID;
			CHECKF(mode_only(p) == m, "%s by uid %d: mode %o, want %o (stat -c %%A)", p,
			       NOBODY, mode_only(p), m);
			CHECKF((lst(p).st_mode & 07777) == m, "%s by uid %d: mode %o, want %o", p,
			       NOBODY, lst(p).st_mode & 07777, m);
		}
	}
}

/* A write drops file capabilities, whoever writes (Linux's file_remove_privs),
 * here through an O_WRONLY | O_APPEND descriptor: no truncate to do it. */
static void setattr_kill_caps(void)
{
	struct vfs_cap_data cap = {.magic_etc = htole32(VFS_CAP_REVISION_2)};
	int fd;

	cap.data[0].permitted = htole32(1u << CAP_NET_RAW);
	CHECK_ERR(put_file(at("cap"), "x", 1), 0);
	CHECK_ERR(sys(setxattr(at("cap"), "security.capability", &cap, sizeof(cap), 0)), 0);
	CHECK(getxattr(at("cap"), "security.capability", NULL, 0) == (ssize_t)sizeof(cap));
	fd = open(at("cap"), O_WRONLY | O_APPEND);
	CHECK(fd >= 0);
	CHECK(write(fd, "y", 1) == 1);
	close(fd);
	CHECK_ERR(sys(getxattr(at("cap"), "security.capability", NULL, 0)), -ENODATA);
}

static void setattr_chown(void)
{
	struct stat st;
	int fd;

	CHECK_ERR(put_file(at("o"), "x", 1), 0);
	CHECK_ERR(sys(chown(at("o"), 1234, 5678)), 0);
	st = lst(at("o"));
	CHECK(st.st_uid == 1234 && st.st_gid == 5678);
	fd = open(at("o"), O_RDWR);
	CHECK(fd >= 0);
	CHECK_ERR(sys(fchown(fd, 4321, -1)), 0);
	st = fst(fd);
	CHECK(st.st_uid == 4321 && st.st_gid == 5678);
	close(fd);
	CHECK_ERR(sys(chown(at("o"), -1, -1)), 0);
	st = lst(at("o"));
	CHECK(st.st_uid == 4321 && st.st_gid == 5678);
	/* lchown changes the link, not the target */
	CHECK_ERR(sys(symlink("o", at("ol"))), 0);
	CHECK_ERR(sys(lchown(at("ol"), 77, 88)), 0);
	st = lst(at("ol"));
	CHECK(st.st_uid == 77 && st.st_gid == 88);
	CHECK(lst(at("o")).st_uid == 4321);
	/* chown clears setuid even for root (Linux since 2.2.13); setgid only with group-exec */
	CHECK_ERR(sys(chmod(at("o"), 06755)), 0);
	CHECK_ERR(sys(chown(at("o"), 1, 1)), 0);
	CHECKF((lst(at("o")).st_mode & 07777) == 0755, "mode %o", lst(at("o")).st_mode);
	CHECK_ERR(sys(chmod(at("o"), 06644)), 0);
	CHECK_ERR(sys(chown(at("o"), 2, 2)), 0);
	CHECKF((lst(at("o")).st_mode & 07777) == 02644, "mode %o", lst(at("o")).st_mode);
}

static void test_setattr(void)
{
	int fd;

	if (!area_begin("setattr"))
		return;
	CHECK_ERR(put_file(at("m"), "x", 1), 0);
	CHECK_ERR(sys(chmod(at("m"), 0640)), 0);
	CHECK(lst(at("m")).st_mode == (S_IFREG | 0640));
	fd = open(at("m"), O_RDONLY);
	CHECK(fd >= 0);
	CHECK_ERR(sys(fchmod(fd, 0604)), 0);
	CHECK(fst(fd).st_mode == (S_IFREG | 0604));
	close(fd);
	CHECK_ERR(sys(chmod(at("m"), 07777)), 0);
	CHECK(lst(at("m")).st_mode == (S_IFREG | 07777));
	CHECK_ERR(sys(mkdir(at("d"), 0755)), 0);
	CHECK_ERR(sys(chmod(at("d"), 01700)), 0);
	CHECK(lst(at("d")).st_mode == (S_IFDIR | 01700));
	CHECK_ERR(sys(chmod(at("missing"), 0600)), -ENOENT);
	if (is_root) {
		setattr_chown();
		setattr_kill_suid();
		setattr_kill_paths();
		setattr_kill_caps();
	} else {
		printf("  note: not root, chown and the write-as-uid-%d checks are skipped\n",
		       NOBODY);
	}
	area_end();
}

/* ---- link/unlink ------------------------------------------------------ */

static void link_counts(void)
{
	CHECK_ERR(put_file(at("a"), "data", 4), 0);
	CHECK(lst(at("a")).st_nlink == 1);
	CHECK_ERR(sys(link(at("a"), at("b"))), 0);
	CHECK(lst(at("a")).st_nlink == 2 && lst(at("b")).st_nlink == 2);
	CHECK(lst(at("a")).st_ino == lst(at("b")).st_ino);
	CHECK_FILE(at("b"), "data", 4);
	CHECK_ERR(sys(mkdir(at("sub"), 0755)), 0);
	CHECK_ERR(sys(link(at("a"), at("sub/c"))), 0);
	CHECK(lst(at("sub/c")).st_nlink == 3);
	CHECK_ERR(sys(unlink(at("b"))), 0);
	CHECK(lst(at("a")).st_nlink == 2);
	CHECK_ERR(sys(unlink(at("sub/c"))), 0);
	CHECK(lst(at("a")).st_nlink == 1);

	/* a directory has 2 + one per subdirectory ("." and each child's "..") */
	CHECK_ERR(sys(mkdir(at("d"), 0755)), 0);
	CHECK(lst(at("d")).st_nlink == 2);
	CHECK_ERR(sys(mkdir(at("d/x"), 0755)), 0);
	CHECK_ERR(sys(mkdir(at("d/y"), 0755)), 0);
	CHECK_ERR(put_file(at("d/file"), "", 0), 0);
	CHECK(lst(at("d")).st_nlink == 4);
	CHECK_ERR(sys(rmdir(at("d/x"))), 0);
	CHECK(lst(at("d")).st_nlink == 3);

	CHECK_ERR(sys(link(at("missing"), at("z"))), -ENOENT);
	CHECK_ERR(sys(link(at("a"), at("a"))), -EEXIST);
	CHECK_ERR(sys(link(at("a"), at("nodir/z"))), -ENOENT);
	CHECK_ERR(sys(link(at("d"), at("dl"))), -EPERM);
	CHECK_ERR(sys(unlink(at("d"))), -EISDIR);
	CHECK_ERR(sys(unlink(at("missing"))), -ENOENT);
	CHECK_ERR(sys(unlink(at("a/x"))), -ENOTDIR);
	CHECK_ERR(sys(rmdir(at("a"))), -ENOTDIR);
}

static void link_unlink_open(void)
{
	const size_t chunk = MiB, total = 8 * MiB;
	unsigned char *data = xmalloc(chunk), *buf = xmalloc(chunk);
	long long before, after;
	struct stat st;
	size_t off;
	int fd = open(at("u"), O_CREAT | O_RDWR, 0644);

	CHECK(fd >= 0);
	fill_rand(data, chunk);
	for (off = 0; off < total; off += chunk)
		CHECK_ERR(write_at(fd, data, chunk, (off_t)off), 0);
	CHECK_ERR(sys(fsync(fd)), 0);
	CHECK_ERR(sys(unlink(at("u"))), 0);
	CHECK_ERR(sys(access(at("u"), F_OK)), -ENOENT);
	st = fst(fd);
	CHECK(st.st_nlink == 0 && st.st_size == (off_t)total);
	/* still readable and writable through the fd */
	CHECK(read_at(fd, buf, chunk, 3 * MiB) == (ssize_t)chunk);
	CHECK_BYTES(buf, data, chunk);
	CHECK_ERR(write_at(fd, "tail", 4, (off_t)total), 0);
	CHECK(read_at(fd, buf, 16, (off_t)total) == 4 && !memcmp(buf, "tail", 4));
	CHECK_ERR(sys(fsync(fd)), 0);
	before = free_bytes(area);
	close(fd);
	/* the space comes back at the last close (some slack for other users of the fs) */
	after = wait_free(area, before + (long long)total * 3 / 4);
	CHECKF(after >= before + (long long)total * 3 / 4,
	       "free space %lld before close, %lld 2 s after", before, after);
	free(data);
	free(buf);
}

static void test_link(void)
{
	if (!area_begin("link"))
		return;
	link_counts();
	link_unlink_open();
	area_end();
}

/* ---- rename ----------------------------------------------------------- */

static void rename_files(void)
{
	ino_t ia;
	char buf[8];
	int fd;

	CHECK_ERR(put_file(at("a"), "AAAA", 4), 0);
	CHECK_ERR(put_file(at("b"), "BB", 2), 0);
	ia = lst(at("a")).st_ino;
	fd = open(at("b"), O_RDONLY);
	CHECK(fd >= 0);
	CHECK_ERR(sys(rename(at("a"), at("b"))), 0);
	CHECK_ERR(sys(access(at("a"), F_OK)), -ENOENT);
	CHECK(lst(at("b")).st_ino == ia);
	CHECK_FILE(at("b"), "AAAA", 4);
	/* the replaced inode lives on, unlinked, while open */
	CHECK(fst(fd).st_nlink == 0);
	CHECK(pread(fd, buf, sizeof(buf), 0) == 2 && !memcmp(buf, "BB", 2));
	close(fd);

	/* same name: nothing happens */
	CHECK_ERR(sys(rename(at("b"), at("b"))), 0);
	CHECK(lst(at("b")).st_ino == ia);
	CHECK_FILE(at("b"), "AAAA", 4);
	/* two links to one inode: POSIX says succeed and do nothing, both names stay */
	CHECK_ERR(sys(link(at("b"), at("c"))), 0);
	CHECK_ERR(sys(rename(at("b"), at("c"))), 0);
	CHECK(lst(at("b")).st_ino == ia && lst(at("c")).st_ino == ia);
	CHECK(lst(at("b")).st_nlink == 2);

	CHECK_ERR(sys(rename(at("missing"), at("x"))), -ENOENT);
	CHECK_ERR(sys(rename(at("b"), at("nodir/x"))), -ENOENT);
	CHECK_ERR(sys(rename(at("b"), at("c/x"))), -ENOTDIR);
}

static void rename_dirs(void)
{
	ino_t i1;
	long r;

	CHECK_ERR(sys(mkdir(at("d1"), 0755)), 0);
	CHECK_ERR(put_file(at("d1/f"), "f", 1), 0);
	CHECK_ERR(sys(mkdir(at("d2"), 0755)), 0);
	i1 = lst(at("d1")).st_ino;
	CHECK_ERR(sys(rename(at("d1"), at("d2"))), 0); /* over an empty directory */
	CHECK(lst(at("d2")).st_ino == i1);
	CHECK_FILE(at("d2/f"), "f", 1);
	CHECK_ERR(sys(access(at("d1"), F_OK)), -ENOENT);

	CHECK_ERR(sys(mkdir(at("g"), 0755)), 0);
	r = sys(rename(at("g"), at("d2")));
	/* POSIX allows EEXIST too; Linux filesystems give ENOTEMPTY */
	CHECKF(r == -ENOTEMPTY || r == -EEXIST, "dir over non-empty dir: %s", strerror((int)-r));
	CHECK(S_ISDIR(lst(at("g")).st_mode) && lst(at("d2")).st_ino == i1);
	CHECK_ERR(put_file(at("f"), "x", 1), 0);
	CHECK_ERR(sys(rename(at("f"), at("g"))), -EISDIR);
	CHECK_ERR(sys(rename(at("g"), at("f"))), -ENOTDIR);

	/* moving a directory moves its ".." link from one parent to the other */
	CHECK_ERR(sys(mkdir(at("p1"), 0755)), 0);
	CHECK_ERR(sys(mkdir(at("p2"), 0755)), 0);
	CHECK_ERR(sys(mkdir(at("p1/sub"), 0755)), 0);
	CHECK_ERR(put_file(at("p1/sub/file"), "s", 1), 0);
	CHECK(lst(at("p1")).st_nlink == 3 && lst(at("p2")).st_nlink == 2);
	CHECK_ERR(sys(rename(at("p1/sub"), at("p2/sub"))), 0);
	CHECK(lst(at("p1")).st_nlink == 2 && lst(at("p2")).st_nlink == 3);
	CHECK(lst(at("p2/sub/..")).st_ino == lst(at("p2")).st_ino);
	CHECK_FILE(at("p2/sub/file"), "s", 1);
	CHECK_ERR(sys(rename(at("p2/sub/file"), at("p1/file"))), 0);
	CHECK(lst(at("p1")).st_nlink == 2 && lst(at("p2/sub")).st_nlink == 2);

	/* a directory cannot move below itself; "." cannot be renamed */
	CHECK_ERR(sys(mkdir(at("q"), 0755)), 0);
	CHECK_ERR(sys(mkdir(at("q/r"), 0755)), 0);
	CHECK_ERR(sys(rename(at("q"), at("q/r/s"))), -EINVAL);
	CHECK_ERR(sys(rename(at("q"), at("q/s"))), -EINVAL);
	CHECK_ERR(sys(rename(at("q/r"), at("q"))), -ENOTEMPTY); /* target is an ancestor */
	CHECK_ERR(sys(rename(at("q/."), at("z"))), -EBUSY);
}

static void rename_flags(void)
{
	ino_t ix, iy, f, d;

	CHECK_ERR(put_file(at("x"), "X", 1), 0);
	CHECK_ERR(put_file(at("y"), "YY", 2), 0);
	ix = lst(at("x")).st_ino;
	iy = lst(at("y")).st_ino;
	CHECK_ERR(sys(renameat2(AT_FDCWD, at("x"), AT_FDCWD, at("y"), RENAME_NOREPLACE)), -EEXIST);
	CHECK_FILE(at("x"), "X", 1);
	CHECK_FILE(at("y"), "YY", 2);
	CHECK_ERR(sys(renameat2(AT_FDCWD, at("x"), AT_FDCWD, at("z"), RENAME_NOREPLACE)), 0);
	CHECK(lst(at("z")).st_ino == ix);
	CHECK_ERR(sys(access(at("x"), F_OK)), -ENOENT);
	CHECK_ERR(sys(renameat2(AT_FDCWD, at("z"), AT_FDCWD, at("y"), RENAME_EXCHANGE)), 0);
	CHECK(lst(at("z")).st_ino == iy && lst(at("y")).st_ino == ix);
	CHECK_FILE(at("z"), "YY", 2);
	CHECK_FILE(at("y"), "X", 1);
	CHECK_ERR(sys(renameat2(AT_FDCWD, at("z"), AT_FDCWD, at("none"), RENAME_EXCHANGE)),
		  -ENOENT);
	CHECK_ERR(sys(renameat2(AT_FDCWD, at("z"), AT_FDCWD, at("y"),
				RENAME_EXCHANGE | RENAME_NOREPLACE)),
		  -EINVAL);

	/* a file with a directory, across parents: the parents' link counts follow */
	CHECK_ERR(sys(mkdir(at("x1"), 0755)), 0);
	CHECK_ERR(sys(mkdir(at("x2"), 0755)), 0);
	CHECK_ERR(put_file(at("x1/f"), "F", 1), 0);
	CHECK_ERR(sys(mkdir(at("x2/D"), 0755)), 0);
	CHECK_ERR(put_file(at("x2/D/inner"), "I", 1), 0);
	f = lst(at("x1/f")).st_ino;
	d = lst(at("x2/D")).st_ino;
	CHECK_ERR(sys(renameat2(AT_FDCWD, at("x1/f"), AT_FDCWD, at("x2/D"), RENAME_EXCHANGE)), 0);
	CHECK(S_ISDIR(lst(at("x1/f")).st_mode) && lst(at("x1/f")).st_ino == d);
	CHECK(S_ISREG(lst(at("x2/D")).st_mode) && lst(at("x2/D")).st_ino == f);
	CHECK_FILE(at("x1/f/inner"), "I", 1);
	CHECK(lst(at("x1")).st_nlink == 3 && lst(at("x2")).st_nlink == 2);
	CHECK(lst(at("x1/f/..")).st_ino == lst(at("x1")).st_ino);

	/* two directories across parents: each parent keeps one subdirectory */
	CHECK_ERR(sys(mkdir(at("y1"), 0755)), 0);
	CHECK_ERR(sys(mkdir(at("y2"), 0755)), 0);
	CHECK_ERR(sys(mkdir(at("y1/a"), 0755)), 0);
	CHECK_ERR(sys(mkdir(at("y2/b"), 0755)), 0);
	CHECK_ERR(sys(mkdir(at("y2/b/c"), 0755)), 0);
	CHECK_ERR(sys(renameat2(AT_FDCWD, at("y1/a"), AT_FDCWD, at("y2/b"), RENAME_EXCHANGE)), 0);
	CHECK(lst(at("y1")).st_nlink == 3 && lst(at("y2")).st_nlink == 3);
	CHECK(lst(at("y1/a")).st_nlink == 3 && lst(at("y2/b")).st_nlink == 2);
	CHECK(lst(at("y1/a/..")).st_ino == lst(at("y1")).st_ino);
	CHECK(lst(at("y2/b/..")).st_ino == lst(at("y2")).st_ino);
}

static void test_rename(void)
{
	if (!area_begin("rename"))
		return;
	rename_files();
	rename_dirs();
	rename_flags();
	area_end();
}

/* ---- mkdir/rmdir/readdir ---------------------------------------------- */

static void mkdir_basic(void)
{
	long r;

	CHECK_ERR(sys(mkdir(at("d"), 0777)), 0);
	CHECK(lst(at("d")).st_mode == (S_IFDIR | 0755)); /* umask 022 */
	CHECK(lst(at("d")).st_nlink == 2);
	CHECK_ERR(sys(mkdir(at("d"), 0755)), -EEXIST);
	CHECK_ERR(put_file(at("f"), "", 0), 0);
	CHECK_ERR(sys(mkdir(at("f"), 0755)), -EEXIST);
	CHECK_ERR(sys(mkdir(at("nodir/x"), 0755)), -ENOENT);
	CHECK_ERR(sys(mkdir(at("f/x"), 0755)), -ENOTDIR);
	CHECK_ERR(put_file(at("d/file"), "", 0), 0);
	r = sys(rmdir(at("d")));
	/* POSIX allows EEXIST too; Linux filesystems give ENOTEMPTY */
	CHECKF(r == -ENOTEMPTY || r == -EEXIST, "rmdir non-empty: %s", strerror((int)-r));
	CHECK_ERR(sys(rmdir(at("d/."))), -EINVAL);
	CHECK_ERR(sys(rmdir(at("d/.."))), -ENOTEMPTY);
	CHECK_ERR(sys(rmdir(at("missing"))), -ENOENT);
	CHECK_ERR(sys(unlink(at("d/file"))), 0);
	CHECK_ERR(sys(rmdir(at("d"))), 0);
	CHECK_ERR(sys(access(at("d"), F_OK)), -ENOENT);
}

/* readdir lists exactly the entries, with d_type and d_ino matching lstat. */
static void mkdir_readdir(void)
{
	struct {
		const char *name;
		unsigned char type;
		int seen;
	} want[] = {
		{".", DT_DIR, 0},   {"..", DT_DIR, 0},	  {"reg", DT_REG, 0},	{"dir", DT_DIR, 0},
		{"lnk", DT_LNK, 0}, {"fifo", DT_FIFO, 0}, {"sock", DT_SOCK, 0},
	};
	const size_t n = sizeof(want) / sizeof(want[0]);
	char rel[300];
	struct dirent *e;
	size_t i;
	DIR *d;

	CHECK_ERR(sys(mkdir(at("r"), 0755)), 0);
	CHECK_ERR(put_file(at("r/reg"), "x", 1), 0);
	CHECK_ERR(sys(mkdir(at("r/dir"), 0755)), 0);
	CHECK_ERR(sys(symlink("reg", at("r/lnk"))), 0);
	CHECK_ERR(sys(mkfifo(at("r/fifo"), 0644)), 0);
	CHECK_ERR(sys(mknod(at("r/sock"), S_IFSOCK | 0644, 0)), 0);
	d = opendir(at("r"));
	CHECK(d);
	if (!d)
		return;
	while ((e = readdir(d))) {
		for (i = 0; i < n && strcmp(e->d_name, want[i].name); i++)
			;
		CHECKF(i < n, "unexpected entry '%s'", e->d_name);
		if (i == n)
			continue;
		want[i].seen++;
		CHECKF(e->d_type == want[i].type, "%s: d_type %u, want %u", e->d_name, e->d_type,
		       want[i].type);
		snprintf(rel, sizeof(rel), "r/%s", e->d_name);
		CHECKF(e->d_ino == lst(at(rel)).st_ino, "%s: d_ino %llu, st_ino %llu", e->d_name,
		       (unsigned long long)e->d_ino, (unsigned long long)lst(at(rel)).st_ino);
	}
	closedir(d);
	for (i = 0; i < n; i++)
		CHECKF(want[i].seen == 1, "'%s' listed %d times", want[i].name, want[i].seen);
}

/* Index of a big-directory name "e01234"; -1 for . and .., -2 for anything else. */
static int big_index(const char *name)
{
	unsigned long v;
	char *end;

	if (!strcmp(name, ".") || !strcmp(name, ".."))
		return -1;
	if (name[0] != 'e' || !name[1])
		return -2;
	errno = 0;
	v = strtoul(name + 1, &end, 10);
	if (errno || *end || v >= BIG_N)
		return -2;
	return (int)v;
}

/* Read entries (at most max, or to the end) into out as indices; dots counted apart. */
static int big_read(DIR *d, int *out, int max, int *dots)
{
	struct dirent *e;
	int n = 0, k;

	while (n < max && (e = readdir(d))) {
		k = big_index(e->d_name);
		CHECKF(k != -2, "unexpected entry '%s'", e->d_name);
		CHECKF(k < 0 || e->d_type == DT_REG, "%s: d_type %u", e->d_name, e->d_type);
		if (k == -1)
			(*dots)++;
		else if (k >= 0)
			out[n++] = k;
	}
	return n;
}

/* Check that the indices in a and b together name every entry exactly once. */
static void big_check_once(const int *a, int na, const int *b, int nb)
{
	unsigned char *seen = xmalloc(BIG_N);
	int i, bad = 0;

	for (i = 0; i < na; i++)
		seen[a[i]]++;
	for (i = 0; i < nb; i++)
		seen[b[i]]++;
	for (i = 0; i < BIG_N; i++)
		bad += seen[i] != 1;
	CHECKF(bad == 0 && na + nb == BIG_N, "%d of %d names not listed exactly once (%d + %d)",
	       bad, BIG_N, na, nb);
	free(seen);
}

/*
 * 5000 entries: listed exactly once; after telldir/seekdir halfway the rest
 * repeats identically; and unlinking each entry as it is read skips none
 * (what rm -r does). One function for the three passes over one directory,
 * since creating 5000 entries is the expensive part.
 */
static void mkdir_big(void)
{
	int *first = xmalloc(sizeof(int) * (BIG_N + 1)),
	    *rest1 = xmalloc(sizeof(int) * (BIG_N + 1));
	int *rest2 = xmalloc(sizeof(int) * (BIG_N + 1));
	int i, nf, n1, n2, dots = 0, dots1 = 0, dots2 = 0, removed = 0;
	char name[32];
	struct dirent *e;
	long pos;
	DIR *d;

	CHECK_ERR(sys(mkdir(at("big"), 0755)), 0);
	for (i = 0; i < BIG_N; i++) {
		snprintf(name, sizeof(name), "big/e%05d", i);
		CHECK_ERR(open_err(at(name), O_CREAT | O_WRONLY), 0);
	}
	d = opendir(at("big"));
	CHECK(d);
	if (!d)
		goto out;
	n1 = big_read(d, rest1, BIG_N + 1, &dots);
	CHECK(dots == 2);
	big_check_once(rest1, n1, NULL, 0);

	rewinddir(d);
	dots = 0;
	nf = big_read(d, first, BIG_N / 2, &dots);
	pos = telldir(d);
	n1 = big_read(d, rest1, BIG_N + 1, &dots1);
	seekdir(d, pos);
	n2 = big_read(d, rest2, BIG_N + 1, &dots2);
	CHECKF(n1 == n2 && !memcmp(rest1, rest2, sizeof(int) * n1) && dots1 == dots2,
	       "after seekdir: %d entries, first time %d", n2, n1);
	CHECK(dots + dots1 == 2);
	big_check_once(first, nf, rest1, n1);
	closedir(d);

	d = opendir(at("big"));
	CHECK(d);
	if (!d)
		goto out;
	while ((e = readdir(d))) {
		if (big_index(e->d_name) < 0)
			continue;
		CHECK_ERR(sys(unlinkat(dirfd(d), e->d_name, 0)), 0);
		removed++;
	}
	closedir(d);
	CHECKF(removed == BIG_N, "unlinking while reading removed %d of %d", removed, BIG_N);
	CHECK_ERR(sys(rmdir(at("big"))), 0);
out:
	free(first);
	free(rest1);
	free(rest2);
}

/*
 * A readdir ends while its entries are renamed away and back (xfstests
 * generic/736): a rename gives the entry a new place in the directory, and
 * a reader that met it again there would never end. POSIX leaves open
 * whether an entry added or moved during the walk is seen; it must be
 * seen at most once per name here, and the walk must end.
 */
static void mkdir_rename_walk(void)
{
	enum { N = 300 };
	char name[32];
	struct dirent *e;
	int seen = 0, i;
	DIR *d;

	CHECK_ERR(sys(mkdir(at("walk"), 0755)), 0);
	for (i = 0; i < N; i++) {
		snprintf(name, sizeof(name), "walk/%d", i);
		CHECK_ERR(open_err(at(name), O_CREAT | O_WRONLY), 0);
	}
	d = opendir(at("walk"));
	CHECK(d);
	if (!d)
		return;
	while (seen <= 3 * N && (e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue;
		seen++;
		CHECK_ERR(sys(renameat(dirfd(d), e->d_name, dirfd(d), "TEMPFILE")), 0);
		CHECK_ERR(sys(renameat(dirfd(d), "TEMPFILE", dirfd(d), e->d_name)), 0);
	}
	closedir(d);
	CHECKF(seen <= N, "readdir while renaming: %d entries for %d names", seen, N);
	for (i = 0; i < N; i++) {
		snprintf(name, sizeof(name), "walk/%d", i);
		CHECK_ERR(sys(unlink(at(name))), 0);
	}
	CHECK_ERR(sys(rmdir(at("walk"))), 0);
}

static void test_mkdir(void)
{
	if (!area_begin("mkdir"))
		return;
	mkdir_basic();
	mkdir_readdir();
	mkdir_big();
	mkdir_rename_walk();
	area_end();
}

/* ---- symlink/readlink ------------------------------------------------- */

static void symlink_targets(void)
{
	char target[PATH_MAX + 1], buf[PATH_MAX + 1];
	struct stat st;
	int i;

	CHECK_ERR(sys(symlink("some/target path", at("l"))), 0);
	memset(buf, '#', 64);
	CHECK(readlink(at("l"), buf, 64) == 16 && !memcmp(buf, "some/target path#", 17));
	st = lst(at("l"));
	/* Linux symlinks are lrwxrwxrwx whatever the umask */
	CHECK(S_ISLNK(st.st_mode) && (st.st_mode & 0777) == 0777);
	CHECK(st.st_size == 16 && st.st_nlink == 1);
	CHECK(readlink(at("l"), buf, 4) == 4 && !memcmp(buf, "some", 4)); /* silently cut */

	/* 4000 bytes, in components of at most 99 */
	for (i = 0; i < 4000; i++)
		target[i] = i % 100 == 99 ? '/' : (char)('a' + i % 26);
	target[4000] = 0;
	CHECK_ERR(sys(symlink(target, at("long"))), 0);
	CHECK(readlink(at("long"), buf, PATH_MAX) == 4000 && !memcmp(buf, target, 4000));
	CHECK(lst(at("long")).st_size == 4000);
	memset(target, 'x', PATH_MAX);
	target[PATH_MAX] = 0; /* a target of PATH_MAX bytes does not fit with its NUL */
	CHECK_ERR(sys(symlink(target, at("toolong"))), -ENAMETOOLONG);
	CHECK_ERR(sys(symlink("", at("empty"))), -ENOENT);
	CHECK_ERR(sys(symlink("x", at("l"))), -EEXIST);
	CHECK_ERR(put_file(at("file"), "content", 7), 0);
	CHECK_ERR(sys(readlink(at("file"), buf, 64)), -EINVAL);
	CHECK_ERR(sys(readlink(at("missing"), buf, 64)), -ENOENT);
}

static void symlink_follow(void)
{
	struct stat st;

	/* dangling: lstat works, following fails, O_CREAT through it creates the target */
	CHECK_ERR(sys(symlink("nowhere", at("dl"))), 0);
	CHECK(S_ISLNK(lst(at("dl")).st_mode));
	CHECK_ERR(sys(stat(at("dl"), &st)), -ENOENT);
	CHECK_ERR(open_err(at("dl"), O_RDONLY), -ENOENT);
	CHECK_ERR(open_err(at("dl"), O_CREAT | O_WRONLY), 0);
	CHECK(S_ISREG(lst(at("nowhere")).st_mode));

	CHECK_ERR(sys(symlink("l2", at("l1"))), 0);
	CHECK_ERR(sys(symlink("l1", at("l2"))), 0);
	CHECK_ERR(sys(symlink("self", at("self"))), 0);
	CHECK_ERR(sys(stat(at("l1"), &st)), -ELOOP);
	CHECK_ERR(open_err(at("l1"), O_RDONLY), -ELOOP);
	CHECK_ERR(sys(stat(at("self"), &st)), -ELOOP);

	CHECK_ERR(sys(symlink("file", at("lf"))), 0);
	CHECK_ERR(open_err(at("lf"), O_RDONLY | O_NOFOLLOW), -ELOOP);
	CHECK_FILE(at("lf"), "content", 7);
	/* relative targets resolve from the link's directory */
	CHECK_ERR(sys(mkdir(at("sub"), 0755)), 0);
	CHECK_ERR(sys(symlink("../file", at("sub/up"))), 0);
	CHECK_FILE(at("sub/up"), "content", 7);
	CHECK_ERR(sys(symlink("sub", at("ldir"))), 0);
	CHECK(S_ISDIR(lst(at("ldir/.")).st_mode));
	CHECK_ERR(put_file(at("ldir/via"), "v", 1), 0);
	CHECK_FILE(at("sub/via"), "v", 1);
}

static void test_symlink(void)
{
	if (!area_begin("symlink"))
		return;
	symlink_targets();
	symlink_follow();
	area_end();
}

/* ---- mknod ------------------------------------------------------------ */

static void mknod_socket_bound(void)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	int s, c;

	if (strlen(at("bound")) >= sizeof(sa.sun_path)) {
		printf("  note: path too long for a unix socket address, bind skipped\n");
		return;
	}
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", at("bound"));
	s = socket(AF_UNIX, SOCK_STREAM, 0);
	c = socket(AF_UNIX, SOCK_STREAM, 0);
	CHECK(s >= 0 && c >= 0);
	CHECK_ERR(sys(bind(s, (struct sockaddr *)&sa, sizeof(sa))), 0);
	CHECK_ERR(sys(listen(s, 1)), 0);
	CHECK(S_ISSOCK(lst(at("bound")).st_mode));
	CHECK_ERR(sys(connect(c, (struct sockaddr *)&sa, sizeof(sa))), 0);
	close(c);
	close(s);
}

static void test_mknod(void)
{
	char buf[8];
	struct stat st;
	int rd, wr;

	if (!area_begin("mknod"))
		return;
	CHECK_ERR(sys(mkfifo(at("fifo"), 0666)), 0);
	CHECK(lst(at("fifo")).st_mode == (S_IFIFO | 0644));
	CHECK_ERR(sys(mkfifo(at("fifo"), 0666)), -EEXIST);
	rd = open(at("fifo"), O_RDONLY | O_NONBLOCK);
	wr = open(at("fifo"), O_WRONLY | O_NONBLOCK);
	CHECK(rd >= 0 && wr >= 0);
	CHECK(write(wr, "ping", 4) == 4);
	CHECK(read(rd, buf, sizeof(buf)) == 4 && !memcmp(buf, "ping", 4));
	close(wr);
	close(rd);
	CHECK(lst(at("fifo")).st_size == 0);
	CHECK_ERR(sys(mknod(at("sock"), S_IFSOCK | 0644, 0)), 0);
	CHECK(lst(at("sock")).st_mode == (S_IFSOCK | 0644));
	CHECK_ERR(sys(mknod(at("reg"), S_IFREG | 0644, 0)), 0);
	st = lst(at("reg"));
	CHECK(S_ISREG(st.st_mode) && st.st_size == 0);
	CHECK_ERR(sys(mknod(at("dir"), S_IFDIR | 0755, 0)), -EPERM);
	mknod_socket_bound();
	if (is_root) {
		CHECK_ERR(sys(mknod(at("chr"), S_IFCHR | 0600, makedev(1, 3))), 0);
		st = lst(at("chr"));
		CHECK(S_ISCHR(st.st_mode) && st.st_rdev == makedev(1, 3));
		/* a minor above 16 bits needs the full 32-bit dev_t encoding */
		CHECK_ERR(sys(mknod(at("blk"), S_IFBLK | 0600, makedev(259, 65541))), 0);
		st = lst(at("blk"));
		CHECKF(S_ISBLK(st.st_mode) && major(st.st_rdev) == 259 &&
			       minor(st.st_rdev) == 65541,
		       "rdev %u:%u", major(st.st_rdev), minor(st.st_rdev));
	} else {
		printf("  note: not root, device nodes skipped\n");
	}
	area_end();
}

/* ---- xattr ------------------------------------------------------------ */

/* Times name occurs in a listxattr list; *users gets the number of user.* names. */
static int xlist_count(const char *list, ssize_t len, const char *name, int *users)
{
	const char *p = list, *end = list + (len > 0 ? len : 0);
	int n = 0;

	*users = 0;
	for (; p < end; p += strlen(p) + 1) {
		n += !strcmp(p, name);
		*users += !strncmp(p, "user.", 5);
	}
	return n;
}

static void xattr_basic(void)
{
	char buf[64], list[256];
	int users;
	ssize_t n;

	CHECK_ERR(put_file(at("f"), "", 0), 0);
	CHECK_ERR(sys(setxattr(at("f"), "user.a", "hello", 5, 0)), 0);
	CHECK(getxattr(at("f"), "user.a", NULL, 0) == 5);
	CHECK(getxattr(at("f"), "user.a", buf, sizeof(buf)) == 5 && !memcmp(buf, "hello", 5));
	CHECK_ERR(sys(getxattr(at("f"), "user.a", buf, 2)), -ERANGE);
	CHECK_ERR(sys(setxattr(at("f"), "user.a", "x", 1, XATTR_CREATE)), -EEXIST);
	CHECK_ERR(sys(setxattr(at("f"), "user.b", "x", 1, XATTR_REPLACE)), -ENODATA);
	CHECK_ERR(sys(getxattr(at("f"), "user.b", buf, sizeof(buf))), -ENODATA);
	CHECK_ERR(sys(setxattr(at("f"), "user.a", "hi", 2, XATTR_REPLACE)), 0);
	CHECK(getxattr(at("f"), "user.a", buf, sizeof(buf)) == 2 && !memcmp(buf, "hi", 2));
	CHECK_ERR(sys(setxattr(at("f"), "user.a", "hello world", 11, 0)), 0);
	CHECK(getxattr(at("f"), "user.a", buf, sizeof(buf)) == 11);
	CHECK_ERR(sys(setxattr(at("f"), "user.empty", "", 0, XATTR_CREATE)), 0);
	CHECK(getxattr(at("f"), "user.empty", NULL, 0) == 0);
	CHECK(getxattr(at("f"), "user.empty", buf, sizeof(buf)) == 0);
	n = listxattr(at("f"), list, sizeof(list));
	CHECK(n > 0 && listxattr(at("f"), NULL, 0) == n);
	CHECK(xlist_count(list, n, "user.a", &users) == 1);
	CHECK(xlist_count(list, n, "user.empty", &users) == 1 && users == 2);
	CHECK_ERR(sys(listxattr(at("f"), list, 3)), -ERANGE);
	CHECK_CTIME_BUMP(at("f"), setxattr(at("f"), "user.c", "c", 1, 0), at("f"));
	CHECK_CTIME_BUMP(at("f"), removexattr(at("f"), "user.a"), at("f"));
	CHECK_ERR(sys(getxattr(at("f"), "user.a", buf, sizeof(buf))), -ENODATA);
	CHECK_ERR(sys(removexattr(at("f"), "user.a")), -ENODATA);
	n = listxattr(at("f"), list, sizeof(list));
	CHECK(xlist_count(list, n, "user.a", &users) == 0 && users == 2);
}

static void xattr_limits(void)
{
	char *val = xmalloc(65537), *buf = xmalloc(65537), name[300];
	int fd;

	CHECK_ERR(put_file(at("big"), "", 0), 0);
	fill_rand(val, 4000);
	CHECK_ERR(sys(setxattr(at("big"), "user.big", val, 4000, 0)), 0);
	CHECK(getxattr(at("big"), "user.big", NULL, 0) == 4000);
	CHECK(getxattr(at("big"), "user.big", buf, 65537) == 4000);
	CHECK_BYTES(buf, val, 4000);
	/* the VFS refuses values over 64 KiB and names over 255 bytes */
	CHECK_ERR(sys(setxattr(at("big"), "user.huge", val, 65537, 0)), -E2BIG);
	/* (on another file: ext4 keeps all of a file's xattrs in one block) */
	CHECK_ERR(put_file(at("longname"), "", 0), 0);
	snprintf(name, sizeof(name), "user.%0250d", 7);
	CHECK_ERR(sys(setxattr(at("longname"), name, "n", 1, 0)), 0);
	CHECK(getxattr(at("longname"), name, buf, 16) == 1);
	snprintf(name, sizeof(name), "user.%0251d", 7);
	CHECK_ERR(sys(setxattr(at("longname"), name, "n", 1, 0)), -ERANGE);
	/* through an fd */
	fd = open(at("big"), O_RDONLY);
	CHECK(fd >= 0);
	CHECK_ERR(sys(fsetxattr(fd, "user.fd", "fd", 2, 0)), 0);
	CHECK(fgetxattr(fd, "user.fd", buf, 16) == 2 && !memcmp(buf, "fd", 2));
	CHECK_ERR(sys(fremovexattr(fd, "user.fd")), 0);
	close(fd);
	free(val);
	free(buf);
}

static void xattr_many(void)
{
	char name[32], val[16], buf[16], *list = xmalloc(8192);
	int i, users = 0, bad = 0;
	ssize_t n;

	CHECK_ERR(put_file(at("many"), "", 0), 0);
	for (i = 0; i < 100; i++) {
		snprintf(name, sizeof(name), "user.n%03d", i);
		snprintf(val, sizeof(val), "v%03d", i);
		CHECK_ERR(sys(setxattr(at("many"), name, val, 4, XATTR_CREATE)), 0);
	}
	n = listxattr(at("many"), NULL, 0);
	CHECK(n >= 100 * 10);
	CHECK(listxattr(at("many"), list, 8192) == n);
	for (i = 0; i < 100; i++) {
		snprintf(name, sizeof(name), "user.n%03d", i);
		snprintf(val, sizeof(val), "v%03d", i);
		bad += xlist_count(list, n, name, &users) != 1;
		bad += getxattr(at("many"), name, buf, sizeof(buf)) != 4 || memcmp(buf, val, 4);
	}
	CHECKF(bad == 0 && users == 100, "%d bad of 100 names, %d user names listed", bad, users);
	free(list);
}

/* user.* names are for regular files and directories only: EPERM to set elsewhere. */
static void xattr_kinds(void)
{
	char buf[16];

	CHECK_ERR(sys(mkdir(at("d"), 0755)), 0);
	CHECK_ERR(sys(setxattr(at("d"), "user.d", "dir", 3, 0)), 0);
	CHECK(getxattr(at("d"), "user.d", buf, sizeof(buf)) == 3 && !memcmp(buf, "dir", 3));
	CHECK_ERR(put_file(at("target"), "", 0), 0);
	CHECK_ERR(sys(symlink("target", at("l"))), 0);
	CHECK_ERR(sys(lsetxattr(at("l"), "user.s", "s", 1, 0)), -EPERM);
	CHECK_ERR(sys(lgetxattr(at("l"), "user.s", buf, sizeof(buf))), -ENODATA);
	/* the following calls go to the target */
	CHECK_ERR(sys(setxattr(at("l"), "user.t", "t", 1, 0)), 0);
	CHECK(getxattr(at("target"), "user.t", buf, sizeof(buf)) == 1);
	CHECK_ERR(sys(mkfifo(at("fifo"), 0644)), 0);
	CHECK_ERR(sys(setxattr(at("fifo"), "user.f", "f", 1, 0)), -EPERM);
}

static void test_xattr(void)
{
	if (!area_begin("xattr"))
		return;
	xattr_basic();
	xattr_limits();
	xattr_many();
	xattr_kinds();
	area_end();
}

/* ---- fallocate -------------------------------------------------------- */

static void falloc_basic(void)
{
	unsigned char *data = xmalloc(8192), *buf = xmalloc(2 * MiB + 4096);
	struct stat st;
	blkcnt_t b0;
	int fd = open(at("a"), O_CREAT | O_RDWR, 0644), ro;

	CHECK(fd >= 0);
	CHECK_ERR(sys(fallocate(fd, 0, 0, MiB)), 0);
	st = fst(fd);
	CHECK(st.st_size == MiB && (long long)st.st_blocks * 512 >= MiB);
	CHECK(read_at(fd, buf, 2 * MiB, 0) == MiB);
	CHECK_ZERO(buf, MiB);
	/* over existing data: data kept, size extended */
	fill_rand(data, 8192);
	CHECK_ERR(write_at(fd, data, 8192, 0), 0);
	CHECK_ERR(sys(fallocate(fd, 0, 4096, 2 * MiB)), 0);
	CHECK(fst(fd).st_size == 2 * MiB + 4096);
	CHECK(read_at(fd, buf, 2 * MiB + 4096, 0) == 2 * MiB + 4096);
	CHECK_BYTES(buf, data, 8192);
	CHECK_ZERO(buf + 8192, 2 * MiB + 4096 - 8192);
	close(fd);

	/* KEEP_SIZE: space past EOF, size unchanged, zeros once the size reaches it */
	fd = open(at("k"), O_CREAT | O_RDWR, 0644);
	CHECK_ERR(write_at(fd, data, 4096, 0), 0);
	CHECK_ERR(sys(fsync(fd)), 0);
	b0 = fst(fd).st_blocks;
	CHECK_ERR(sys(fallocate(fd, FALLOC_FL_KEEP_SIZE, MiB, MiB)), 0);
	st = fst(fd);
	CHECK(st.st_size == 4096);
	CHECKF((long long)(st.st_blocks - b0) * 512 >= MiB, "st_blocks %lld -> %lld", (long long)b0,
	       (long long)st.st_blocks);
	CHECK(read_at(fd, buf, 100, 4096) == 0);
	CHECK_ERR(sys(ftruncate(fd, 2 * MiB)), 0);
	CHECK(read_at(fd, buf, 2 * MiB, 0) == 2 * MiB);
	CHECK_BYTES(buf, data, 4096);
	CHECK_ZERO(buf + 4096, 2 * MiB - 4096);

	CHECK_ERR(sys(fallocate(fd, 0, 0, 0)), -EINVAL);
	CHECK_ERR(sys(fallocate(fd, 0, -1, 10)), -EINVAL);
	CHECK_ERR(sys(fallocate(fd, FALLOC_FL_PUNCH_HOLE, 0, 4096)), -EOPNOTSUPP);
	close(fd);
	ro = open(at("k"), O_RDONLY);
	CHECK_ERR(sys(fallocate(ro, 0, 0, 4096)), -EBADF);
	close(ro);
	free(data);
	free(buf);
}

static void falloc_punch(void)
{
	const size_t size = 4 * MiB;
	unsigned char *model = xmalloc(size), *buf = xmalloc(size);
	const int keep = FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE;
	blkcnt_t b0, b1;
	int fd = open(at("p"), O_CREAT | O_RDWR, 0644);

	CHECK(fd >= 0);
	fill_rand(model, size);
	CHECK_ERR(write_at(fd, model, size, 0), 0);
	CHECK_ERR(sys(fsync(fd)), 0);
	b0 = fst(fd).st_blocks;
	/* unaligned edges: the rest of the partly punched blocks keeps its data */
	CHECK_ERR(sys(fallocate(fd, keep, 100, 5000)), 0);
	memset(model + 100, 0, 5000);
	CHECK_ERR(sys(fallocate(fd, keep, MiB, MiB)), 0);
	memset(model + MiB, 0, MiB);
	CHECK_ERR(sys(fsync(fd)), 0);
	b1 = fst(fd).st_blocks;
	CHECKF((long long)(b0 - b1) * 512 >= MiB, "st_blocks %lld -> %lld after punching 1 MiB",
	       (long long)b0, (long long)b1);
	/* straddling EOF: size kept */
	CHECK_ERR(sys(fallocate(fd, keep, size - 10, MiB)), 0);
	memset(model + size - 10, 0, 10);
	CHECK(fst(fd).st_size == (off_t)size);
	CHECK(read_at(fd, buf, size, 0) == (ssize_t)size);
	CHECK_BYTES(buf, model, size);
	close(fd);
	free(model);
	free(buf);
}

/*
 * Optional modes: ext4 has them; tmpfs says EOPNOTSUPP, and so does a FUSE
 * mount for modes its kernel side does not pass on (COLLAPSE and INSERT
 * always) or the daemon refuses. Either is fine, but a success must leave the
 * right bytes.
 */
static bool falloc_supported(const char *mode, long r)
{
	CHECKF(r == 0 || r == -EOPNOTSUPP, "%s: %s", mode, strerror((int)-r));
	if (r == -EOPNOTSUPP)
		printf("  note: %s not supported\n", mode);
	return r == 0;
}

static void falloc_optional(void)
{
	const size_t size = 256 * KiB;
	unsigned char *model = xmalloc(size + 64 * KiB), *buf = xmalloc(size + 64 * KiB);
	int fd = open(at("o"), O_CREAT | O_RDWR, 0644);
	long r;

	CHECK(fd >= 0);
	fill_rand(model, size);
	CHECK_ERR(write_at(fd, model, size, 0), 0);
	r = sys(fallocate(fd, FALLOC_FL_ZERO_RANGE, 1000, 70000));
	if (falloc_supported("FALLOC_FL_ZERO_RANGE", r)) {
		memset(model + 1000, 0, 70000);
		CHECK(fst(fd).st_size == (off_t)size);
		CHECK(read_at(fd, buf, size, 0) == (ssize_t)size);
		CHECK_BYTES(buf, model, size);
	}
	r = sys(fallocate(fd, FALLOC_FL_COLLAPSE_RANGE, 64 * KiB, 64 * KiB));
	if (falloc_supported("FALLOC_FL_COLLAPSE_RANGE", r)) {
		memmove(model + 64 * KiB, model + 128 * KiB, size - 128 * KiB);
		CHECK(fst(fd).st_size == (off_t)(size - 64 * KiB));
		CHECK(read_at(fd, buf, size, 0) == (ssize_t)(size - 64 * KiB));
		CHECK_BYTES(buf, model, size - 64 * KiB);
		/* and INSERT_RANGE puts a zeroed gap back */
		r = sys(fallocate(fd, FALLOC_FL_INSERT_RANGE, 64 * KiB, 64 * KiB));
		if (falloc_supported("FALLOC_FL_INSERT_RANGE", r)) {
			memmove(model + 128 * KiB, model + 64 * KiB, size - 128 * KiB);
			memset(model + 64 * KiB, 0, 64 * KiB);
			CHECK(read_at(fd, buf, size + 1, 0) == (ssize_t)size);
			CHECK_BYTES(buf, model, size);
		}
	}
	close(fd);
	free(model);
	free(buf);
}

static void test_fallocate(void)
{
	if (!area_begin("fallocate"))
		return;
	falloc_basic();
	falloc_punch();
	falloc_optional();
	area_end();
}

/* ---- lseek ------------------------------------------------------------ */

/*
 * Data at [0,64K) and [1M,1M+64K), size 2M. Filesystems may report holes at
 * a coarser granularity than 64K, so the hole after the first extent may
 * start anywhere in [64K,1M], but the data after it must start by 1M.
 */
static void lseek_holes(void)
{
	unsigned char *data = xmalloc(64 * KiB);
	int fd = open(at("h"), O_CREAT | O_RDWR, 0644);
	off_t h, d, h2;

	CHECK(fd >= 0);
	fill_rand(data, 64 * KiB);
	CHECK_ERR(write_at(fd, data, 64 * KiB, 0), 0);
	CHECK_ERR(write_at(fd, data, 64 * KiB, MiB), 0);
	CHECK_ERR(sys(ftruncate(fd, 2 * MiB)), 0);
	CHECK(lseek(fd, 0, SEEK_DATA) == 0);
	CHECK(lseek(fd, 100, SEEK_DATA) == 100);
	h = lseek(fd, 0, SEEK_HOLE);
	CHECKF(h >= 64 * KiB && h <= MiB, "SEEK_HOLE(0) = %lld", (long long)h);
	if (h >= 64 * KiB && h < MiB) {
		CHECK(lseek(fd, h, SEEK_HOLE) == h);
		d = lseek(fd, h, SEEK_DATA);
		CHECKF(d > h && d <= MiB, "SEEK_DATA(%lld) = %lld", (long long)h, (long long)d);
	}
	CHECK(lseek(fd, MiB, SEEK_DATA) == MiB);
	h2 = lseek(fd, MiB, SEEK_HOLE);
	CHECKF(h2 >= MiB + 64 * KiB && h2 <= 2 * MiB, "SEEK_HOLE(1M) = %lld", (long long)h2);
	if (h2 >= MiB + 64 * KiB && h2 < 2 * MiB)
		CHECK_ERR(sys(lseek(fd, h2, SEEK_DATA)), -ENXIO); /* no data after the last */
	CHECK_ERR(sys(lseek(fd, 2 * MiB, SEEK_DATA)), -ENXIO);
	CHECK_ERR(sys(lseek(fd, 2 * MiB, SEEK_HOLE)), -ENXIO);
	CHECK_ERR(sys(lseek(fd, 3 * MiB, SEEK_HOLE)), -ENXIO);
	CHECK_ERR(sys(lseek(fd, 3 * MiB, SEEK_DATA)), -ENXIO);
	CHECK_ERR(sys(lseek(fd, -1, SEEK_DATA)), -ENXIO);
	CHECK_ERR(sys(lseek(fd, -1, SEEK_HOLE)), -ENXIO);
	close(fd);
	free(data);
}

static void lseek_edges(void)
{
	unsigned char *data = xmalloc(100000);
	char c;
	int fd = open(at("e"), O_CREAT | O_RDWR, 0644);

	CHECK(fd >= 0);
	/* empty: no data, and offset 0 is already at EOF */
	CHECK_ERR(sys(lseek(fd, 0, SEEK_DATA)), -ENXIO);
	CHECK_ERR(sys(lseek(fd, 0, SEEK_HOLE)), -ENXIO);
	/* all data: the only hole is the virtual one at EOF */
	fill_rand(data, 100000);
	CHECK_ERR(write_at(fd, data, 100000, 0), 0);
	CHECK(lseek(fd, 0, SEEK_HOLE) == 100000);
	CHECK(lseek(fd, 99999, SEEK_HOLE) == 100000);
	CHECK(lseek(fd, 99999, SEEK_DATA) == 99999);
	/* plain whence values */
	CHECK(lseek(fd, 0, SEEK_END) == 100000);
	CHECK(lseek(fd, -10, SEEK_CUR) == 99990);
	CHECK_ERR(sys(lseek(fd, -1, SEEK_SET)), -EINVAL);
	CHECK(lseek(fd, 10, SEEK_END) == 100010);
	CHECK(read(fd, &c, 1) == 0);
	close(fd);

	/* all hole */
	fd = open(at("s"), O_CREAT | O_RDWR, 0644);
	CHECK_ERR(sys(ftruncate(fd, MiB)), 0);
	CHECK_ERR(sys(lseek(fd, 0, SEEK_DATA)), -ENXIO);
	CHECK(lseek(fd, 0, SEEK_HOLE) == 0);
	CHECK(lseek(fd, 5000, SEEK_HOLE) == 5000);
	close(fd);
	free(data);
}

static void test_lseek(void)
{
	if (!area_begin("lseek"))
		return;
	lseek_holes();
	lseek_edges();
	area_end();
}

/* ---- statfs ----------------------------------------------------------- */

static void test_statfs(void)
{
	const size_t total = 8 * MiB;
	unsigned char *data = xmalloc(MiB);
	long long before, after, freed;
	struct statvfs s;
	size_t off;
	int fd;

	if (!area_begin("statfs"))
		return;
	CHECK_ERR(sys(statvfs(area, &s)), 0);
	CHECK(s.f_bsize > 0 && s.f_frsize > 0 && s.f_blocks > 0);
	CHECK(s.f_bfree <= s.f_blocks && s.f_bavail <= s.f_bfree);
	CHECKF(s.f_files > 0 && s.f_ffree <= s.f_files && s.f_ffree > 0,
	       "f_files %llu f_ffree %llu", (unsigned long long)s.f_files,
	       (unsigned long long)s.f_ffree);
	CHECK(s.f_namemax == 255);

	/* free space follows 8 MiB written and synced, then unlinked (slack for others) */
	fill_rand(data, MiB);
	before = free_bytes(area);
	fd = open(at("f"), O_CREAT | O_WRONLY, 0644);
	CHECK(fd >= 0);
	for (off = 0; off < total; off += MiB)
		CHECK_ERR(write_at(fd, data, MiB, (off_t)off), 0);
	CHECK_ERR(sys(fsync(fd)), 0);
	close(fd);
	after = free_bytes(area);
	CHECKF(before - after >= (long long)total * 3 / 4 && before - after <= (long long)total * 2,
	       "free space %lld -> %lld after writing %zu bytes", before, after, total);
	CHECK_ERR(sys(unlink(at("f"))), 0);
	freed = wait_free(area, after + (long long)total * 3 / 4) - after;
	CHECKF(freed >= (long long)total * 3 / 4, "unlink gave back %lld bytes of %zu", freed,
	       total);
	free(data);
	area_end();
}

/* ---- fsync ------------------------------------------------------------ */

static void test_fsync(void)
{
	int fd, dfd, ro;

	if (!area_begin("fsync"))
		return;
	fd = open(at("f"), O_CREAT | O_RDWR, 0644);
	CHECK(fd >= 0);
	CHECK(write(fd, "data", 4) == 4);
	CHECK_ERR(sys(fsync(fd)), 0);
	CHECK(write(fd, "more", 4) == 4);
	CHECK_ERR(sys(fdatasync(fd)), 0);
	CHECK_ERR(sys(sync_file_range(fd, 0, 0, SYNC_FILE_RANGE_WRITE)), 0);
	CHECK_ERR(sys(syncfs(fd)), 0);
	ro = open(at("f"), O_RDONLY);
	CHECK(ro >= 0);
	CHECK_ERR(sys(fsync(ro)), 0);
	close(ro);
	close(fd);
	dfd = open(area, O_RDONLY | O_DIRECTORY);
	CHECK(dfd >= 0);
	CHECK_ERR(sys(fsync(dfd)), 0);
	CHECK_ERR(sys(fdatasync(dfd)), 0);
	CHECK_ERR(sys(syncfs(dfd)), 0);
	close(dfd);
	area_end();
}

/* ---- names ------------------------------------------------------------ */

/* Create name, find it exactly once by readdir, rename it to itself + "2", remove it. */
static void name_round_trip(const char *name)
{
	char other[300];
	int others, n;
	int r = open_err(at(name), O_CREAT | O_WRONLY);

	CHECKF(r == 0, "create %zu-byte name: %s", strlen(name), strerror(-r));
	n = dir_count(area, name, &others);
	CHECKF(n == 1 && others == 0, "%zu-byte name listed %d times, %d others", strlen(name), n,
	       others);
	CHECK(S_ISREG(lst(at(name)).st_mode));
	snprintf(other, sizeof(other), "%.250s2", name);
	CHECK_ERR(sys(rename(at(name), at(other))), 0);
	CHECK(dir_count(area, other, &others) == 1 && others == 0);
	CHECK_ERR(sys(unlink(at(other))), 0);
}

static void test_names(void)
{
	char name[512], longname[300];
	int i, k;

	if (!area_begin("names"))
		return;
	/* 85 euro signs of 3 bytes: 255 bytes, valid since the limit counts bytes */
	for (i = 0; i < 85; i++)
		memcpy(name + 3 * i, "\xe2\x82\xac", 3);
	name[255] = 0;
	CHECK_ERR(open_err(at(name), O_CREAT | O_WRONLY), 0);
	CHECK(dir_count(area, name, &k) == 1 && k == 0);
	CHECK_ERR(sys(unlink(at(name))), 0);
	memcpy(name + 255, "\xe2\x82\xac", 4);
	CHECK_ERR(open_err(at(name), O_CREAT | O_WRONLY), -ENAMETOOLONG);
	name_round_trip("a b\nc\td ");
	name_round_trip(" ");
	name_round_trip("-leading dash");
	name_round_trip("...");
	name_round_trip("back\\slash*?[]");
	/* every byte but NUL and '/' */
	for (i = 1, k = 0; i < 256; i++)
		if (i != '/')
			name[k++] = (char)i;
	name[k] = 0;
	name_round_trip(name + 2); /* 252 bytes, leaving room for the "2" of the rename */
	/* names are case-sensitive */
	CHECK_ERR(put_file(at("Case"), "A", 1), 0);
	CHECK_ERR(put_file(at("case"), "b", 1), 0);
	CHECK(lst(at("Case")).st_ino != lst(at("case")).st_ino);
	CHECK_FILE(at("Case"), "A", 1);

	memset(longname, 'L', 256);
	longname[256] = 0;
	CHECK_ERR(sys(mkdir(at(longname), 0755)), -ENAMETOOLONG);
	CHECK_ERR(sys(rename(at("case"), at(longname))), -ENAMETOOLONG);
	CHECK_ERR(sys(symlink("case", at(longname))), -ENAMETOOLONG);
	CHECK_ERR(sys(link(at("case"), at(longname))), -ENAMETOOLONG);
	CHECK_ERR(sys(mknod(at(longname), S_IFIFO | 0644, 0)), -ENAMETOOLONG);
	longname[255] = 0;
	CHECK_ERR(sys(mkdir(at(longname), 0755)), 0);
	CHECK_ERR(sys(rmdir(at(longname))), 0);
	CHECK_ERR(sys(rename(at("case"), at(longname))), 0);
	CHECK_ERR(sys(link(at(longname), at("case"))), 0);
	longname[0] = 'S';
	CHECK_ERR(sys(symlink("case", at(longname))), 0);
	CHECK(readlink(at(longname), name, sizeof(name)) == 4);
	area_end();
}

/* ---- open files ------------------------------------------------------- */

static void openfile_shared(void)
{
	char buf[32];
	int fd1, fd2, dfd;

	fd1 = open(at("f"), O_CREAT | O_RDWR, 0644);
	fd2 = open(at("f"), O_RDWR);
	CHECK(fd1 >= 0 && fd2 >= 0);
	CHECK(write(fd1, "hello", 5) == 5);
	CHECK(pread(fd2, buf, sizeof(buf), 0) == 5 && !memcmp(buf, "hello", 5));
	CHECK(pwrite(fd2, "HE", 2, 0) == 2);
	CHECK(pread(fd1, buf, sizeof(buf), 0) == 5 && !memcmp(buf, "HEllo", 5));
	CHECK_ERR(sys(ftruncate(fd2, 2)), 0);
	CHECK(fst(fd1).st_size == 2);
	/* renamed, even to another directory, the fd goes on working (offset 5: a hole at 2..5) */
	CHECK_ERR(sys(mkdir(at("sub"), 0755)), 0);
	CHECK_ERR(sys(rename(at("f"), at("sub/g"))), 0);
	CHECK(write(fd1, "more", 4) == 4);
	CHECK_FILE(at("sub/g"), "HE\0\0\0more", 9);
	CHECK(fst(fd1).st_ino == lst(at("sub/g")).st_ino);
	close(fd1);
	close(fd2);

	fd1 = open(at("sub/g"), O_RDONLY);
	CHECK_ERR(sys(write(fd1, "x", 1)), -EBADF);
	close(fd1);
	fd1 = open(at("sub/g"), O_WRONLY);
	CHECK_ERR(sys(read(fd1, buf, 1)), -EBADF);
	close(fd1);
	dfd = open(area, O_RDONLY | O_DIRECTORY);
	CHECK(dfd >= 0);
	CHECK_ERR(sys(read(dfd, buf, sizeof(buf))), -EISDIR);
	close(dfd);
}

/*
 * A read-only handle sees every change made through the others. In direct
 * mode a small file's read-only open goes through the page cache
 * (-o cache_small): the kernel must drop what it cached of the ranges the
 * other handles write, truncate and copy into. Read to EOF each time.
 */
static void openfile_readers(void)
{
	char buf[64];
	int r, w, src;
	loff_t in = 0, out = 2;

	CHECK_ERR(put_file(at("rd"), "0123456789", 10), 0);
	r = open(at("rd"), O_RDONLY);
	w = open(at("rd"), O_WRONLY);
	CHECK(r >= 0 && w >= 0);
	CHECK(pread(r, buf, sizeof(buf), 0) == 10 && !memcmp(buf, "0123456789", 10));
	CHECK(pwrite(w, "AB", 2, 0) == 2);
	CHECK(pread(r, buf, sizeof(buf), 0) == 10 && !memcmp(buf, "AB23456789", 10));
	CHECK_ERR(sys(ftruncate(w, 4)), 0);
	CHECK(pread(r, buf, sizeof(buf), 0) == 4 && !memcmp(buf, "AB23", 4));
	CHECK(pwrite(w, "xyz", 3, 8) == 3);
	CHECK(pread(r, buf, sizeof(buf), 0) == 11 && !memcmp(buf, "AB23\0\0\0\0xyz", 11));
	/* copy_file_range into it, from another file */
	CHECK_ERR(put_file(at("rd-src"), "cd", 2), 0);
	src = open(at("rd-src"), O_RDONLY);
	CHECK(src >= 0);
	CHECK(copy_file_range(src, &in, w, &out, 2, 0) == 2);
	close(src);
	CHECK(pread(r, buf, sizeof(buf), 0) == 11 && !memcmp(buf, "ABcd\0\0\0\0xyz", 11));
	close(w);
	/* a new read-only open: nothing stale kept from the first */
	close(r);
	CHECK_FILE(at("rd"), "ABcd\0\0\0\0xyz", 11);
	/* a read-write handle's writes, and a rewrite from scratch */
	w = open(at("rd"), O_RDWR);
	r = open(at("rd"), O_RDONLY);
	CHECK(r >= 0 && w >= 0);
	CHECK(pread(r, buf, sizeof(buf), 0) == 11);
	CHECK(pwrite(w, "Q", 1, 1) == 1);
	CHECK(pread(r, buf, 2, 0) == 2 && !memcmp(buf, "AQ", 2));
	close(w);
	CHECK_ERR(put_file(at("rd"), "new", 3), 0);
	CHECK(pread(r, buf, sizeof(buf), 0) == 3 && !memcmp(buf, "new", 3));
	close(r);
	CHECK_FILE(at("rd"), "new", 3);
	unlink(at("rd"));
	unlink(at("rd-src"));
}

/* MAP_SHARED stores reach read(), and write() reaches the mapping. */
static void openfile_mmap(void)
{
	const size_t len = 16 * KiB;
	unsigned char *data = xmalloc(len), *buf = xmalloc(len), *p;
	int fd, fd2;

	fill_rand(data, len);
	CHECK_ERR(put_file(at("m"), data, len), 0);
	fd = open(at("m"), O_RDWR);
	fd2 = open(at("m"), O_RDWR);
	CHECK(fd >= 0 && fd2 >= 0);
	p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (getenv("NVMEFS_TEST_NO_SHARED_MMAP")) {
		/* FUSE direct_io before Linux 6.6 (no FUSE_DIRECT_IO_ALLOW_MMAP):
		 * the kernel refuses shared mappings. */
		CHECKF(p == MAP_FAILED && errno == ENODEV, "shared mmap under direct_io: %s",
		       p == MAP_FAILED ? strerror(errno) : "worked");
		if (p != MAP_FAILED)
			munmap(p, len);
		p = MAP_FAILED;
	} else {
		CHECKF(p != MAP_FAILED, "mmap: %s", strerror(errno));
	}
	if (p != MAP_FAILED) {
		CHECK_BYTES(p, data, len);
		p[100] = data[100] = 'Z';
		CHECK_ERR(sys(msync(p, len, MS_SYNC)), 0);
		CHECK(read_at(fd2, buf, len, 0) == (ssize_t)len);
		CHECK_BYTES(buf, data, len);
		CHECK(pwrite(fd2, "Y", 1, 9000) == 1);
		CHECK(p[9000] == 'Y');
		munmap(p, len);
	}
	close(fd);
	close(fd2);
	free(data);
	free(buf);
}

/*
 * A store through a shared mapping is a data change: mtime and ctime move
 * (xfstests generic/080 and generic/215), seen once msync(MS_SYNC) returns,
 * and once the file is unmapped and closed (generic/080's sequence). Linux's
 * filesystems set them at the first store into a clean page; a FUSE server
 * sets them when that page's write-back reaches it, which msync and close
 * wait for.
 */
static void openfile_mmap_times(void)
{
	const size_t len = 8 * KiB;
	static const char *const name[2] = {"tm", "tc"};
	unsigned char *data = xmalloc(len), *buf = xmalloc(len), *p;
	struct stat old, st;
	int fd;

	fill_rand(data, len);
	for (int close_first = 0; close_first < 2; close_first++) {
		CHECK_ERR(put_file(at(name[close_first]), data, len), 0);
		fd = open(at(name[close_first]), O_RDWR);
		CHECK(fd >= 0);
		old = fst(fd);
		wait_tick();
		p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
		if (p == MAP_FAILED) {
			/* refused under direct_io before Linux 6.6: openfile_mmap */
			CHECKF(getenv("NVMEFS_TEST_NO_SHARED_MMAP"), "mmap: %s", strerror(errno));
			close(fd);
			break;
		}
		/* A store alone: a load first would map the page for reading,
		 * and Linux's tmpfs moves the times only at a write fault, not at
		 * the write-protect fault of a page already mapped (built with -O0,
		 * "^=" is a load and a store). */
		p[len - 1] = (unsigned char)(data[len - 1] ^ 0xff);
		if (close_first) {
			munmap(p, len);
			close(fd);
			st = lst(at(name[close_first]));
		} else {
			CHECK_ERR(sys(msync(p, len, MS_SYNC)), 0);
			st = lst(at(name[close_first]));
			munmap(p, len);
			close(fd);
		}
		CHECK_TS(st.st_mtim, >, old.st_mtim);
		CHECK_TS(st.st_ctim, >, old.st_ctim);
		CHECK(get_file(at(name[close_first]), buf, len) == (ssize_t)len);
		CHECK(buf[len - 1] == (data[len - 1] ^ 0xff));
	}
	free(data);
	free(buf);
}

/* Locks between two open file descriptions of one file. */
static void openfile_locks(void)
{
	struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 0, .l_len = 100};
	int fd1 = open(at("m"), O_RDWR), fd2 = open(at("m"), O_RDWR);

	CHECK(fd1 >= 0 && fd2 >= 0);
	CHECK_ERR(sys(fcntl(fd1, F_OFD_SETLK, &fl)), 0);
	CHECK_ERR(sys(fcntl(fd2, F_OFD_SETLK, &fl)), -EAGAIN);
	fl.l_type = F_RDLCK;
	fl.l_pid = 0;
	CHECK_ERR(sys(fcntl(fd2, F_OFD_GETLK, &fl)), 0);
	CHECK(fl.l_type == F_WRLCK && fl.l_pid == -1); /* -1: held by an OFD lock */
	fl.l_pid = 0;
	fl.l_type = F_UNLCK;
	CHECK_ERR(sys(fcntl(fd1, F_OFD_SETLK, &fl)), 0);
	fl.l_type = F_WRLCK;
	CHECK_ERR(sys(fcntl(fd2, F_OFD_SETLK, &fl)), 0);
	CHECK_ERR(sys(flock(fd1, LOCK_EX | LOCK_NB)), 0);
	CHECK_ERR(sys(flock(fd2, LOCK_EX | LOCK_NB)), -EWOULDBLOCK);
	close(fd1);
	CHECK_ERR(sys(flock(fd2, LOCK_EX | LOCK_NB)), 0);
	close(fd2);
}

static void test_openfile(void)
{
	if (!area_begin("openfile"))
		return;
	openfile_shared();
	openfile_readers();
	openfile_mmap();
	openfile_mmap_times();
	openfile_locks();
	area_end();
}

/* ---- permissions (root) ----------------------------------------------- */

static void nobody_perms(void)
{
	struct timespec t[2] = {{1, 0}, {2, 0}};
	struct stat st;
	long r;

	CHECK_ERR(open_err("secret", O_RDONLY), -EACCES);
	CHECK_ERR(open_err("secret", O_WRONLY), -EACCES);
	CHECK_ERR(open_err("public", O_RDONLY), 0);
	CHECK_ERR(open_err("public", O_WRONLY), -EACCES);
	CHECK_ERR(sys(unlink("public")), -EACCES);
	CHECK_ERR(open_err("new", O_CREAT | O_WRONLY), -EACCES);
	CHECK_ERR(sys(stat("private/x", &st)), -EACCES);
	CHECK_ERR(sys(chmod("public", 0777)), -EPERM);
	CHECK_ERR(sys(utimensat(AT_FDCWD, "public", t, 0)), -EPERM);
	CHECK_ERR(sys(utimensat(AT_FDCWD, "public", NULL, 0)), -EACCES);
	/* write permission is enough to set both times to now */
	CHECK_ERR(sys(utimensat(AT_FDCWD, "sticky/rootfile", NULL, 0)), 0);
	CHECK_ERR(open_err("sticky/rootfile", O_WRONLY), 0);
	/* sticky: only the owner of the file or the directory may remove or rename */
	r = sys(unlink("sticky/rootfile"));
	CHECKF(r == -EPERM || r == -EACCES, "unlink in sticky dir: %s", strerror((int)-r));
	r = sys(rename("sticky/rootfile", "sticky/moved"));
	CHECKF(r == -EPERM || r == -EACCES, "rename in sticky dir: %s", strerror((int)-r));
	CHECK_ERR(open_err("sticky/mine", O_CREAT | O_WRONLY), 0);
	CHECK(lst("sticky/mine").st_uid == NOBODY);
	CHECK_ERR(sys(unlink("sticky/mine")), 0);
	CHECK_ERR(sys(unlink("open/rootfile")), 0); /* no sticky bit: dir write suffices */
}

static void test_permissions(void)
{
	if (!is_root) {
		printf("permissions\n  note: not root, skipped\n");
		return;
	}
	if (!area_begin("permissions"))
		return;
	CHECK_ERR(put_file(at("secret"), "s", 1), 0);
	CHECK_ERR(sys(chmod(at("secret"), 0600)), 0);
	CHECK_ERR(put_file(at("public"), "p", 1), 0);
	CHECK_ERR(sys(mkdir(at("private"), 0700)), 0);
	CHECK_ERR(put_file(at("private/x"), "x", 1), 0);
	CHECK_ERR(sys(mkdir(at("sticky"), 0755)), 0);
	CHECK_ERR(sys(chmod(at("sticky"), 01777)), 0);
	CHECK_ERR(put_file(at("sticky/rootfile"), "r", 1), 0);
	CHECK_ERR(sys(chmod(at("sticky/rootfile"), 0666)), 0);
	CHECK_ERR(sys(mkdir(at("open"), 0755)), 0);
	CHECK_ERR(sys(chmod(at("open"), 0777)), 0);
	CHECK_ERR(put_file(at("open/rootfile"), "r", 1), 0);
	as_nobody(nobody_perms);
	CHECK_FILE(at("sticky/rootfile"), "r", 1);
	CHECK_ERR(sys(access(at("open/rootfile"), F_OK)), -ENOENT);
	area_end();
}

int main(int argc, char **argv)
{
	struct stat st;

	if (argc != 2) {
		fprintf(stderr, "usage: %s DIR\n", argv[0]);
		return 1;
	}
	base_dir = argv[1];
	if (stat(base_dir, &st) || !S_ISDIR(st.st_mode)) {
		fprintf(stderr, "%s: not a directory\n", base_dir);
		return 1;
	}
	umask(022);
	is_root = geteuid() == 0;
	rng = test_seed();
	printf("test_posix %s, seed %#" PRIx64 " (NVMEFS_TEST_SEED repeats it)\n", base_dir, rng);

	test_create();
	test_readwrite();
	test_truncate();
	test_timestamps();
	test_setattr();
	test_link();
	test_rename();
	test_mkdir();
	test_symlink();
	test_mknod();
	test_xattr();
	test_fallocate();
	test_lseek();
	test_statfs();
	test_fsync();
	test_names();
	test_openfile();
	test_permissions();
	return test_result();
}
