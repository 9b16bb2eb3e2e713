// SPDX-License-Identifier: MIT
/*
 * Device set: opening, probing and refusing members, on image files and on
 * loop devices.
 *
 * Image files live in private directories on ext4 ($TMPDIR or /tmp) and on
 * tmpfs (/dev/shm). A set of three opens with each size rounded down to the
 * member's O_DIRECT block size (what statx reports: 512 on ext4; the 4096
 * fallback on tmpfs, which reports nothing), descriptors open O_DIRECT in the
 * right access mode, and the set's block size is the members' maximum. 1 and
 * NVMEFS_MAX_DEVICES members open; 0 and one too many are refused.
 *
 * Every refusal must return its documented -errno, log a line that names the
 * path and the reason, and leave no descriptor open (counted in
 * /proc/self/fd): missing, directory, /dev/null, FIFO, too small, given twice
 * (same path, hard link, symlink, dir/./file), locked by another set. A
 * member locked by another process is refused at once, naming it, unless
 * the holder hook says it is letting go: then the open waits for it.
 * read_only sets share a file with each other but not with a read-write set.
 * Flush succeeds; discard punches a hole exactly over an aligned range and
 * refuses misaligned or out-of-range ones.
 *
 * As root with a working losetup, loop devices too: size, 512 and 4096 byte
 * sectors, NUMA node 0, O_EXCL (a second set gets -EBUSY), a second device
 * node for the same device (given twice), too small, a read-only device
 * (-EROFS, yet it opens read_only), discard 0 or -EOPNOTSUPP. Otherwise those
 * parts are skipped with the reason. Loop devices and temp files are removed
 * at exit, also after a failure.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <numa.h>
#include <sched.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include "nvmefs/devset.h"
#include "nvmefs/util.h"
#include "test_util.h"

#define KIB	  (1ull << 10)
#define MIB	  (1ull << 20)
#define MAX_LOOPS 4

static char ext4_dir[PATH_MAX], shm_dir[PATH_MAX];
static char loops[MAX_LOOPS][64]; /* attached by us; "" when free */
static char log_buf[8192];	  /* lines logged since log_reset() */
static unsigned log_lines;

static void die(const char *what)
{
	perror(what);
	exit(1);
}

static void capture(enum nvmefs_log_level level, const char *msg)
{
	size_t used = strlen(log_buf);

	snprintf(log_buf + used, sizeof(log_buf) - used, "%s\n", msg);
	log_lines++;
}

static void log_reset(void)
{
	log_buf[0] = '\0';
	log_lines = 0;
}

/* Does the log hold a line about path ("path: reason")? */
static bool log_names(const char *path)
{
	char needle[PATH_MAX + 2];

	snprintf(needle, sizeof(needle), "%s:", path);
	return strstr(log_buf, needle) != NULL;
}

static unsigned count_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	unsigned n = 0;

	if (!d)
		die("/proc/self/fd");
	while ((e = readdir(d)))
		if (e->d_name[0] != '.')
			n++;
	closedir(d);
	return n;
}

/* Format a path into buf (PATH_MAX bytes); too long is a setup failure. */
static __attribute__((format(printf, 2, 3))) void fmt_path(char *buf, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(buf, PATH_MAX, fmt, ap);
	va_end(ap);
	if (n < 0 || n >= PATH_MAX) {
		errno = ENAMETOOLONG;
		die(fmt);
	}
}

static void join(char *buf, const char *dir, const char *name)
{
	fmt_path(buf, "%s/%s", dir, name);
}

/* Create path with size bytes: all fill if fill is nonzero, else a sparse file. */
static void make_file(const char *path, uint64_t size, int fill)
{
	char buf[64 * 1024];
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);

	if (fd < 0 || ftruncate(fd, (off_t)size) < 0)
		die(path);
	memset(buf, fill, sizeof(buf));
	for (uint64_t off = 0; fill && off < size; off += sizeof(buf)) {
		size_t n = size - off < sizeof(buf) ? (size_t)(size - off) : sizeof(buf);

		if (pwrite(fd, buf, n, (off_t)off) != (ssize_t)n)
			die(path);
	}
	close(fd);
}

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	return remove(path);
}

static void remove_dirs(void)
{
	if (ext4_dir[0])
		nftw(ext4_dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
	if (shm_dir[0])
		nftw(shm_dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

/* The ext4 directory is required; a missing tmpfs only skips its part. */
static void make_dirs(void)
{
	const char *tmp = getenv("TMPDIR");

	fmt_path(ext4_dir, "%s/nvmefs-devset-XXXXXX", tmp && *tmp ? tmp : "/tmp");
	fmt_path(shm_dir, "/dev/shm/nvmefs-devset-XXXXXX");
	atexit(remove_dirs);
	if (!mkdtemp(shm_dir)) {
		printf("tmpfs: skipped (mkdtemp %s: %s)\n", shm_dir, strerror(errno));
		shm_dir[0] = '\0';
	}
	if (!mkdtemp(ext4_dir)) {
		ext4_dir[0] = '\0';
		die("mkdtemp");
	}
}

/* Open expecting success and no log line; NULL (after a failed check) if not. */
static struct nvmefs_devset *open_ok(const char *what, const char *const *paths, unsigned n,
				     bool ro)
{
	struct nvmefs_devset_opts o = {.read_only = ro};
	struct nvmefs_devset *set = NULL;
	int err;

	log_reset();
	err = nvmefs_devset_open(&set, paths, n, &o);
	CHECKF(err == 0, "%s: %d (%s): %s", what, err, strerror(-err), log_buf);
	if (err)
		return NULL;
	CHECKF(log_lines == 0, "%s: opened but logged: %s", what, log_buf);
	CHECKF(set->count == n, "%s: count %u, want %u", what, set->count, n);
	return set;
}

/*
 * Open expecting the refusal want: the log must name path (unless NULL) and
 * contain word, and every descriptor the attempt opened must be closed again.
 */
static void refuse(const char *what, const char *const *paths, unsigned n,
		   const struct nvmefs_devset_opts *o, int want, const char *path, const char *word)
{
	struct nvmefs_devset *set = NULL;
	unsigned fds = count_fds(), after;
	int err;

	log_reset();
	err = nvmefs_devset_open(&set, paths, n, o);
	after = count_fds();
	CHECKF(err == want, "%s: got %d (%s), want %d (%s)", what, err, strerror(-err), want,
	       strerror(-want));
	CHECKF(!path || log_names(path), "%s: log does not name %s: %s", what, path, log_buf);
	CHECKF(strcasestr(log_buf, word), "%s: log lacks \"%s\": %s", what, word, log_buf);
	CHECKF(after == fds, "%s: %u descriptors open before, %u after", what, fds, after);
	if (err == 0)
		nvmefs_devset_close(set);
}

/* Descriptor open, O_DIRECT, read-only or read-write as asked. */
static void check_fd(const struct nvmefs_dev *d, bool ro)
{
	int fl = fcntl(d->fd, F_GETFL);

	CHECKF(fl >= 0, "%s: fd %d not open", d->path, d->fd);
	CHECKF(fl < 0 || (fl & O_DIRECT), "%s: not O_DIRECT", d->path);
	CHECKF(fl < 0 || (fl & O_ACCMODE) == (ro ? O_RDONLY : O_RDWR), "%s: flags %#x, ro %d",
	       d->path, fl, ro);
}

static bool is_pow2(uint64_t v)
{
	return v && !(v & (v - 1));
}

/* What a file's block size must be: statx's DIO alignment, else 4096. */
static uint32_t file_block_size(const char *path)
{
	struct statx sx;

	if (statx(AT_FDCWD, path, 0, STATX_DIOALIGN, &sx) == 0 && (sx.stx_mask & STATX_DIOALIGN) &&
	    sx.stx_dio_offset_align)
		return sx.stx_dio_offset_align;
	return 4096;
}

static void check_file_member(const struct nvmefs_dev *d, const char *path, bool ro)
{
	uint32_t bs = d->block_size;
	struct stat st;

	if (stat(path, &st) < 0)
		die(path);
	CHECKF(strcmp(d->path, path) == 0, "path %s, want %s", d->path, path);
	CHECKF(!d->is_blkdev, "%s: is_blkdev", path);
	CHECKF(bs >= 512 && is_pow2(bs), "%s: block_size %u", path, bs);
	CHECKF(bs == file_block_size(path), "%s: block_size %u, want %u", path, bs,
	       file_block_size(path));
	CHECKF(d->size == (uint64_t)(st.st_size - st.st_size % bs),
	       "%s: size %llu, file %lld, block %u", path, (unsigned long long)d->size,
	       (long long)st.st_size, bs);
	CHECKF(d->mem_align != 0, "%s: mem_align 0", path);
	CHECKF(d->numa_node >= 0, "%s: numa_node %d", path, d->numa_node);
	CHECKF(d->id_dev == st.st_dev && d->id_ino == st.st_ino, "%s: wrong id", path);
	check_fd(d, ro);
}

/* Three image files of uneven sizes (one exactly the 1 MiB default minimum). */
static void test_files(const char *dir, const char *fs)
{
	static const uint64_t sizes[3] = {2 * MIB + 1000, 3 * MIB + 4096 + 7, MIB};
	char p[3][PATH_MAX];
	const char *paths[3] = {p[0], p[1], p[2]};
	unsigned fds = count_fds();
	struct nvmefs_devset *set;
	uint32_t max = 0;

	for (unsigned i = 0; i < 3; i++) {
		fmt_path(p[i], "%s/file%u.img", dir, i);
		make_file(p[i], sizes[i], 0);
	}
	set = open_ok(fs, paths, 3, false);
	if (!set)
		return;
	for (unsigned i = 0; i < 3; i++) {
		check_file_member(&set->devs[i], p[i], false);
		CHECK_ERR(nvmefs_dev_flush(&set->devs[i]), 0);
		if (set->devs[i].block_size > max)
			max = set->devs[i].block_size;
	}
	CHECK(nvmefs_devset_block_size(set) == max);
	printf("%s: block_size %u mem_align %u numa_node %d\n", fs, set->devs[0].block_size,
	       set->devs[0].mem_align, set->devs[0].numa_node);
	nvmefs_devset_close(set);
	CHECKF(count_fds() == fds, "%s: descriptors left open after close", fs);
}

/* One member on ext4 (512) and one on tmpfs (4096): the set needs 4096. */
static void test_mixed(void)
{
	char a[PATH_MAX], b[PATH_MAX];
	const char *paths[2] = {a, b};
	struct nvmefs_devset *set;

	join(a, ext4_dir, "mixed.img");
	join(b, shm_dir, "mixed.img");
	make_file(a, 2 * MIB, 0);
	make_file(b, 2 * MIB, 0);
	set = open_ok("ext4 + tmpfs", paths, 2, false);
	if (!set)
		return;
	CHECK(nvmefs_devset_block_size(set) == file_block_size(b));
	CHECK(set->devs[0].block_size < set->devs[1].block_size);
	CHECK(nvmefs_devset_block_size(set) == set->devs[1].block_size);
	nvmefs_devset_close(set);
	nvmefs_devset_close(NULL);
}

/* Paths that are no block device or regular file, or do not exist. */
static void test_not_members(const char *dir, const char *good)
{
	char missing[PATH_MAX], sub[PATH_MAX], fifo[PATH_MAX];
	const char *paths[2] = {good, NULL};

	join(missing, dir, "missing.img");
	join(sub, dir, "subdir");
	join(fifo, dir, "fifo");
	if (mkdir(sub, 0755) < 0)
		die(sub);
	if (mkfifo(fifo, 0644) < 0)
		die(fifo);
	paths[1] = missing;
	refuse("missing", paths, 2, NULL, -ENOENT, missing, "no such");
	paths[1] = sub;
	refuse("directory", paths, 2, NULL, -ENODEV, sub, "not a block device");
	paths[1] = "/dev/null";
	refuse("/dev/null", paths, 2, NULL, -ENODEV, "/dev/null", "not a block device");
	refuse("/dev/null alone", paths + 1, 1, NULL, -ENODEV, "/dev/null", "not a block device");
	paths[1] = fifo;
	refuse("fifo", paths, 2, NULL, -ENODEV, fifo, "not a block device");
}

/* Below the default 1 MiB, below an explicit min_size, and exactly at it. */
static void test_too_small(const char *dir, const char *good)
{
	struct nvmefs_devset_opts o = {.min_size = 3 * MIB};
	char small[PATH_MAX], mid[PATH_MAX], big[PATH_MAX];
	const char *paths[2] = {good, small};
	struct nvmefs_devset *set = NULL;

	join(small, dir, "small.img");
	join(mid, dir, "mid.img");
	join(big, dir, "big.img");
	make_file(big, 4 * MIB, 0);
	make_file(small, MIB - 512, 0);
	make_file(mid, 3 * MIB - 1, 0);
	refuse("below 1 MiB", paths, 2, NULL, -ENOSPC, small, "too small");
	paths[0] = big;
	paths[1] = mid;
	refuse("below min_size", paths, 2, &o, -ENOSPC, mid, "too small");
	/* The usable size (rounded down to the block size) against min_size. */
	o.min_size = (3 * MIB - 1) / file_block_size(mid) * file_block_size(mid);
	CHECK_ERR(nvmefs_devset_open(&set, paths + 1, 1, &o), 0);
	nvmefs_devset_close(set);
	o.min_size++;
	refuse("one byte below min_size", paths, 2, &o, -ENOSPC, mid, "too small");
}

/* The same file by the same path, a hard link, a symlink and dir/./file. */
static void test_given_twice(const char *dir, const char *a, const char *b)
{
	char hard[PATH_MAX], sym[PATH_MAX], dot[PATH_MAX];
	const char *paths[3] = {a, b, a};

	join(hard, dir, "hard.img");
	join(sym, dir, "sym.img");
	fmt_path(dot, "%s/.%s", dir, strrchr(a, '/'));
	if (link(a, hard) < 0)
		die(hard);
	if (symlink(a, sym) < 0)
		die(sym);
	refuse("same path", paths, 3, NULL, -EINVAL, a, "given twice");
	paths[2] = hard;
	refuse("hard link", paths, 3, NULL, -EINVAL, hard, "given twice");
	paths[2] = sym;
	refuse("symlink", paths, 3, NULL, -EINVAL, sym, "given twice");
	paths[2] = dot;
	refuse("dir/./file", paths, 3, NULL, -EINVAL, dot, "given twice");
}

/* A file held by another set is busy until that set is closed. */
static void test_locked(const char *a, const char *b)
{
	const char *paths[2] = {b, a};
	struct nvmefs_devset *holder = open_ok("lock holder", paths + 1, 1, false);
	struct nvmefs_devset *set;

	refuse("held by another set", paths, 2, NULL, -EBUSY, a, "busy");
	nvmefs_devset_close(holder);
	set = open_ok("after the holder closed", paths, 2, false);
	nvmefs_devset_close(set);
}

/* The holder hook of test_holder: the child it names is letting go (1)
 * or stays (0). */
static pid_t hook_pid;
static int hook_answer;

static int hook(pid_t pid, char *state, size_t len)
{
	if (pid != hook_pid)
		return 0;
	snprintf(state, len, "%s", hook_answer ? "it is letting go" : "which stays");
	return hook_answer;
}

/* A child that locks path (flock, as a set does), says so on ready, and
 * exits after ms milliseconds. */
static pid_t lock_child(const char *path, unsigned ms)
{
	int ready[2];
	pid_t pid;
	char c;

	if (pipe(ready) < 0)
		die("pipe");
	pid = fork();
	if (pid < 0)
		die("fork");
	if (pid == 0) {
		int fd = open(path, O_RDWR);

		if (fd < 0 || flock(fd, LOCK_EX) < 0 || write(ready[1], "r", 1) != 1)
			_exit(1);
		usleep(ms * 1000);
		_exit(0);
	}
	close(ready[1]);
	if (read(ready[0], &c, 1) != 1)
		die("lock child");
	close(ready[0]);
	return pid;
}

/*
 * A member another process holds: refused at once, naming the process and
 * what the hook says of it, unless the hook says it is letting go; then
 * the open waits for it (saying so) and succeeds once it has exited.
 */
static void test_holder(const char *a)
{
	struct nvmefs_devset_opts o = {.busy_wait_ms = 10000, .holder = hook};
	const char *paths[1] = {a};
	struct nvmefs_devset *set = NULL;
	char pidstr[32];
	uint64_t t0;
	int err;

	hook_answer = 0;
	hook_pid = lock_child(a, 3000);
	snprintf(pidstr, sizeof(pidstr), "(pid %d)", (int)hook_pid);
	t0 = nvmefs_now_ns();
	refuse("held by a process that stays", paths, 1, &o, -EBUSY, a, "which stays");
	CHECKF(strstr(log_buf, pidstr), "held: the log does not name %s: %s", pidstr, log_buf);
	CHECKF(nvmefs_now_ns() - t0 < 2000000000ull, "held: refused after %.1f s, want at once",
	       (double)(nvmefs_now_ns() - t0) / 1e9);
	o.holder = NULL;
	t0 = nvmefs_now_ns();
	refuse("held, no holder hook", paths, 1, &o, -EBUSY, a, "busy");
	CHECKF(nvmefs_now_ns() - t0 < 2000000000ull, "held, no hook: refused after %.1f s",
	       (double)(nvmefs_now_ns() - t0) / 1e9);
	kill(hook_pid, SIGKILL);
	waitpid(hook_pid, NULL, 0);

	hook_answer = 1;
	o.holder = hook;
	hook_pid = lock_child(a, 500);
	snprintf(pidstr, sizeof(pidstr), "(pid %d)", (int)hook_pid);
	log_reset();
	err = nvmefs_devset_open(&set, paths, 1, &o);
	CHECKF(err == 0, "held by a process letting go: %d (%s): %s", err, strerror(-err), log_buf);
	CHECKF(strstr(log_buf, "waiting for") && strstr(log_buf, pidstr),
	       "letting go: no word of waiting for %s: %s", pidstr, log_buf);
	nvmefs_devset_close(set);
	waitpid(hook_pid, NULL, 0);
}

/* 0, NVMEFS_MAX_DEVICES and one more. */
static void test_counts(const char *dir)
{
	static char p[NVMEFS_MAX_DEVICES + 1][PATH_MAX];
	const char *paths[NVMEFS_MAX_DEVICES + 1];
	struct nvmefs_devset *set;

	for (unsigned i = 0; i <= NVMEFS_MAX_DEVICES; i++) {
		fmt_path(p[i], "%s/many%02u.img", dir, i);
		make_file(p[i], MIB, 0);
		paths[i] = p[i];
	}
	refuse("0 devices", paths, 0, NULL, -EINVAL, NULL, "no devices");
	refuse("too many devices", paths, NVMEFS_MAX_DEVICES + 1, NULL, -EINVAL, NULL, "at most");
	set = open_ok("NVMEFS_MAX_DEVICES", paths, NVMEFS_MAX_DEVICES, false);
	if (set)
		check_file_member(&set->devs[NVMEFS_MAX_DEVICES - 1], p[NVMEFS_MAX_DEVICES - 1],
				  false);
	nvmefs_devset_close(set);
}

static void test_refusals(const char *dir)
{
	char a[PATH_MAX], b[PATH_MAX];

	join(a, dir, "file-a.img");
	join(b, dir, "file-b.img");
	make_file(a, 2 * MIB, 0);
	make_file(b, 2 * MIB, 0);
	test_not_members(dir, a);
	test_too_small(dir, a);
	test_given_twice(dir, a, b);
	test_locked(a, b);
	test_holder(a);
	test_counts(dir);
}

/* read_only sets share a 0444 file; a read-write set excludes them and vice versa. */
static void test_read_only(const char *dir)
{
	struct nvmefs_devset_opts ro = {.read_only = true};
	char path[PATH_MAX], other[PATH_MAX];
	const char *paths[2] = {other, path};
	struct nvmefs_devset *a, *b, *w;

	join(path, dir, "ro.img");
	join(other, dir, "ro-other.img");
	make_file(path, 2 * MIB, 0);
	make_file(other, 2 * MIB, 0);
	if (chmod(path, 0444) < 0)
		die(path);
	a = open_ok("read_only set", paths + 1, 1, true);
	b = open_ok("second read_only set", paths + 1, 1, true);
	if (a)
		check_file_member(&a->devs[0], path, true);
	refuse("read-write beside read_only sets", paths, 2, NULL, -EBUSY, path, "busy");
	nvmefs_devset_close(a);
	nvmefs_devset_close(b);
	w = open_ok("read-write after they closed", paths, 2, false);
	refuse("read_only beside a read-write set", paths + 1, 1, &ro, -EBUSY, path, "busy");
	nvmefs_devset_close(w);
}

/*
 * As nobody (root passes every permission check), a root-only file is
 * refused: -EACCES "permission denied" when opening read_only, -EROFS when
 * opening for writing. Runs in a child that drops its privileges.
 */
static int no_permission_child(const char *path)
{
	struct nvmefs_devset_opts ro = {.read_only = true};
	const char *paths[1] = {path};

	if (setgid(65534) < 0 || setuid(65534) < 0)
		return 2;
	refuse("read_only, no permission", paths, 1, &ro, -EACCES, path, "permission denied");
	refuse("read-write, no permission", paths, 1, NULL, -EROFS, path, "writing");
	return test_failures ? 1 : 0;
}

static void test_no_permission(const char *dir)
{
	char path[PATH_MAX];
	int status = 0;
	pid_t pid;

	if (geteuid() != 0) {
		printf("no-permission refusals: skipped (needs root to become nobody)\n");
		return;
	}
	join(path, dir, "root-only.img");
	make_file(path, 2 * MIB, 0);
	if (chmod(path, 0600) < 0 || chmod(dir, 0755) < 0)
		die(path);
	fflush(NULL);
	pid = fork();
	if (pid == 0)
		_exit(no_permission_child(path));
	CHECK(pid > 0 && waitpid(pid, &status, 0) == pid);
	CHECKF(WIFEXITED(status) && WEXITSTATUS(status) == 0, "no-permission child: status %d",
	       status);
	chmod(dir, 0700);
}

/* Bytes [off, off + len) of fd all equal want. */
static void check_bytes(int fd, uint64_t off, uint64_t len, int want, const char *what)
{
	unsigned char buf[4096];

	for (uint64_t p = off; p < off + len;) {
		size_t n = off + len - p < sizeof(buf) ? (size_t)(off + len - p) : sizeof(buf);

		if (pread(fd, buf, n, (off_t)p) != (ssize_t)n) {
			CHECKF(0, "%s: pread at %llu failed", what, (unsigned long long)p);
			return;
		}
		for (size_t i = 0; i < n; i++) {
			if (buf[i] != want) {
				CHECKF(0, "%s: byte %llu is %#x, want %#x", what,
				       (unsigned long long)(p + i), buf[i], want);
				return;
			}
		}
		p += n;
	}
}

/* Misaligned or out-of-range discards are refused (and touch nothing). */
static void discard_refusals(struct nvmefs_dev *d)
{
	uint64_t bs = d->block_size, size = d->size;

	CHECK_ERR(nvmefs_dev_discard(d, 1, bs), -EINVAL);
	CHECK_ERR(nvmefs_dev_discard(d, bs / 2, bs), -EINVAL);
	CHECK_ERR(nvmefs_dev_discard(d, bs, bs / 2), -EINVAL);
	CHECK_ERR(nvmefs_dev_discard(d, bs, 1), -EINVAL);
	CHECK_ERR(nvmefs_dev_discard(d, size, bs), -EINVAL);
	CHECK_ERR(nvmefs_dev_discard(d, size - bs, 2 * bs), -EINVAL);
	CHECK_ERR(nvmefs_dev_discard(d, size + bs, 0), -EINVAL);
	CHECK_ERR(nvmefs_dev_discard(d, bs, UINT64_MAX - bs + 1), -EINVAL); /* off + len wraps */
	CHECK_ERR(nvmefs_dev_discard(d, UINT64_MAX - bs + 1, bs), -EINVAL);
}

/* Punch [64K, 192K) and one block at 1 MiB of a file full of 0xa5. */
static void test_discard(const char *dir, const char *fs)
{
	char path[PATH_MAX];
	const char *paths[1] = {path};
	struct nvmefs_devset *set;
	struct stat before, after;
	struct nvmefs_dev *d;
	uint64_t bs;
	int fd;

	join(path, dir, "discard.img");
	make_file(path, 2 * MIB, 0xa5);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	set = open_ok(fs, paths, 1, false);
	if (fd < 0 || fstat(fd, &before) < 0)
		die(path);
	if (!set)
		goto out;
	d = &set->devs[0];
	bs = d->block_size;
	CHECK_ERR(nvmefs_dev_discard(d, 64 * KIB, 128 * KIB), 0);
	CHECK_ERR(nvmefs_dev_discard(d, MIB, bs), 0);
	discard_refusals(d);
	CHECK_ERR(nvmefs_dev_flush(d), 0);
	if (fstat(fd, &after) < 0)
		die(path);
	CHECK(after.st_size == before.st_size);
	CHECKF(after.st_blocks < before.st_blocks, "%s: no hole: %lld blocks before, %lld after",
	       fs, (long long)before.st_blocks, (long long)after.st_blocks);
	check_bytes(fd, 0, 64 * KIB, 0xa5, fs);
	check_bytes(fd, 64 * KIB, 128 * KIB, 0, fs);
	check_bytes(fd, 192 * KIB, MIB - 192 * KIB, 0xa5, fs);
	check_bytes(fd, MIB, bs, 0, fs);
	check_bytes(fd, MIB + bs, MIB - bs, 0xa5, fs);
	/* The last block and an empty range at the end are in range. */
	CHECK_ERR(nvmefs_dev_discard(d, d->size - bs, bs), 0);
	CHECK_ERR(nvmefs_dev_discard(d, d->size, 0), 0);
	check_bytes(fd, d->size - bs, bs, 0, fs);
	check_bytes(fd, d->size - 2 * bs, bs, 0xa5, fs);
	nvmefs_devset_close(set);
out:
	close(fd);
}

static void loop_detach(char *dev)
{
	char cmd[512];

	if (!dev[0])
		return;
	snprintf(cmd, sizeof(cmd), "losetup -d %s", dev);
	if (system(cmd) != 0)
		fprintf(stderr, "warning: '%s' failed\n", cmd);
	dev[0] = '\0';
}

static void detach_all(void)
{
	for (unsigned i = 0; i < MAX_LOOPS; i++)
		loop_detach(loops[i]);
}

/*
 * Attach a loop device over file with extra losetup options. Returns its
 * path (registered for detach_all()), or NULL with the reason in why.
 */
static char *loop_attach(const char *file, const char *opts, char *why, size_t whylen)
{
	char cmd[PATH_MAX + 128], line[256] = "";
	unsigned slot = 0;
	FILE *p;
	int st;

	while (slot < MAX_LOOPS && loops[slot][0])
		slot++;
	if (slot == MAX_LOOPS) {
		snprintf(why, whylen, "more than %d loop devices", MAX_LOOPS);
		return NULL;
	}
	snprintf(cmd, sizeof(cmd), "losetup -f --show %s '%s' 2>&1", opts, file);
	p = popen(cmd, "r");
	if (!p) {
		snprintf(why, whylen, "popen: %s", strerror(errno));
		return NULL;
	}
	if (!fgets(line, sizeof(line), p))
		line[0] = '\0';
	st = pclose(p);
	line[strcspn(line, "\n")] = '\0';
	if (st != 0 || strncmp(line, "/dev/loop", 9) != 0) {
		snprintf(why, whylen, "'%s' failed: %s", cmd, line);
		return NULL;
	}
	if (strlen(line) >= sizeof(loops[slot])) {
		snprintf(why, whylen, "device name too long: %s", line);
		return NULL;
	}
	memcpy(loops[slot], line, strlen(line) + 1);
	return loops[slot];
}

static void check_blk_member(const struct nvmefs_dev *d, const char *path, uint64_t size,
			     uint32_t bs, bool ro)
{
	struct stat st;

	if (stat(path, &st) < 0)
		die(path);
	CHECKF(d->is_blkdev, "%s: not is_blkdev", path);
	CHECKF(d->size == size, "%s: size %llu, want %llu", path, (unsigned long long)d->size,
	       (unsigned long long)size);
	CHECKF(d->block_size == bs, "%s: block_size %u, want %u", path, d->block_size, bs);
	CHECKF(d->mem_align != 0, "%s: mem_align 0", path);
	CHECKF(d->numa_node == 0, "%s: numa_node %d, want 0", path, d->numa_node);
	CHECKF(d->id_dev == st.st_rdev && d->id_ino == 0, "%s: wrong id", path);
	check_fd(d, ro);
}

/* A 512-byte sector loop device: probe, flush, discard, O_EXCL. */
static void test_loop_basic(const char *dev)
{
	const char *paths[1] = {dev};
	struct nvmefs_devset *set = open_ok("loop", paths, 1, false);
	struct nvmefs_dev *d;
	int err;

	if (!set)
		return;
	d = &set->devs[0];
	check_blk_member(d, dev, 4 * MIB, 512, false);
	CHECK(nvmefs_devset_block_size(set) == 512);
	CHECK_ERR(nvmefs_dev_flush(d), 0);
	err = nvmefs_dev_discard(d, 64 * KIB, 128 * KIB);
	CHECKF(err == 0 || err == -EOPNOTSUPP, "loop discard: %d (%s)", err, strerror(-err));
	discard_refusals(d);
	refuse("loop in use by another set", paths, 1, NULL, -EBUSY, dev, "busy");
	nvmefs_devset_close(set);
	set = open_ok("loop after the holder closed", paths, 1, false);
	nvmefs_devset_close(set);
}

/* A second device node for the same device is the same member. */
static void test_loop_alias(const char *dir, const char *dev)
{
	char alias[PATH_MAX];
	const char *paths[2] = {dev, alias};
	struct stat st;

	join(alias, dir, "loop-alias");
	if (stat(dev, &st) < 0)
		die(dev);
	if (mknod(alias, S_IFBLK | 0600, st.st_rdev) < 0) {
		printf("loop alias: skipped (mknod: %s)\n", strerror(errno));
		return;
	}
	refuse("loop by two device nodes", paths, 2, NULL, -EINVAL, alias, "given twice");
}

/* 4096-byte sectors; the set's block size follows the largest member. */
static void test_loop_4k(const char *dir, const char *dev512)
{
	char file[PATH_MAX], img[PATH_MAX], why[PATH_MAX + 400];
	const char *paths[3] = {dev512, NULL, img};
	struct nvmefs_devset *set;
	char *dev;

	join(file, dir, "loop4k.img");
	join(img, dir, "loop4k-peer.img");
	make_file(file, 4 * MIB, 0);
	make_file(img, 2 * MIB, 0);
	dev = loop_attach(file, "--sector-size 4096", why, sizeof(why));
	if (!dev) {
		CHECKF(0, "4096-byte sectors: %s", why);
		return;
	}
	paths[1] = dev;
	set = open_ok("loop 512 + loop 4096 + file", paths, 3, false);
	if (set) {
		check_blk_member(&set->devs[1], dev, 4 * MIB, 4096, false);
		CHECK(nvmefs_devset_block_size(set) == 4096);
		CHECK_ERR(nvmefs_dev_discard(&set->devs[1], 512, 4096), -EINVAL);
		discard_refusals(&set->devs[1]);
	}
	nvmefs_devset_close(set);
	loop_detach(dev);
}

/* A read-only device is refused for writing but opens read_only. */
static void test_loop_ro(const char *dir)
{
	char file[PATH_MAX], why[PATH_MAX + 400];
	const char *paths[1];
	struct nvmefs_devset *set;
	char *dev;

	join(file, dir, "loop-ro.img");
	make_file(file, 4 * MIB, 0);
	dev = loop_attach(file, "-r", why, sizeof(why));
	if (!dev) {
		CHECKF(0, "read-only loop: %s", why);
		return;
	}
	paths[0] = dev;
	refuse("read-only loop", paths, 1, NULL, -EROFS, dev, "read-only");
	set = open_ok("read-only loop, read_only", paths, 1, true);
	if (set)
		check_blk_member(&set->devs[0], dev, 4 * MIB, 512, true);
	nvmefs_devset_close(set);
	loop_detach(dev);
}

static void test_loop_small(const char *dir)
{
	char file[PATH_MAX], why[PATH_MAX + 400];
	const char *paths[1];
	char *dev;

	join(file, dir, "loop-small.img");
	make_file(file, 512 * KIB, 0);
	dev = loop_attach(file, "", why, sizeof(why));
	if (!dev) {
		CHECKF(0, "small loop: %s", why);
		return;
	}
	paths[0] = dev;
	refuse("small loop", paths, 1, NULL, -ENOSPC, dev, "too small");
	loop_detach(dev);
}

static void test_loops(const char *dir)
{
	char file[PATH_MAX], why[PATH_MAX + 400];
	char *dev;

	if (geteuid() != 0) {
		printf("block devices: skipped (not root)\n");
		return;
	}
	join(file, dir, "loop512.img");
	make_file(file, 4 * MIB, 0);
	dev = loop_attach(file, "", why, sizeof(why));
	if (!dev) {
		printf("block devices: skipped (%s)\n", why);
		return;
	}
	printf("block devices: %s\n", dev);
	test_loop_basic(dev);
	test_loop_alias(dir, dev);
	test_loop_4k(dir, dev);
	loop_detach(dev);
	test_loop_ro(dir);
	test_loop_small(dir);
}

/* A set whose members hang off the given nodes (only numa_node is set). */
static int home_of(unsigned n, const int *nodes)
{
	struct nvmefs_devset *set = calloc(1, sizeof(*set) + n * sizeof(set->devs[0]));
	int home;

	set->count = n;
	for (unsigned i = 0; i < n; i++)
		set->devs[i].numa_node = nodes[i];
	home = nvmefs_devset_home_node(set);
	free(set);
	return home;
}

/*
 * NUMA placement: the home node is where most members are (lowest on a
 * tie), and its CPUs come from libnuma: on this one-node machine, node 0
 * has every CPU this process may use, and a node that does not exist has
 * none. Opened members report a node (loop devices and files: 0).
 */
static void test_numa(void)
{
	const int one[] = {0}, most[] = {1, 0, 1, 1}, tie[] = {1, 1, 0, 0}, far[] = {3, 2, 3};
	cpu_set_t cpus, allowed;
	int ret;

	CHECK(home_of(1, one) == 0);
	CHECK(home_of(4, most) == 1);
	CHECK(home_of(4, tie) == 0);
	CHECK(home_of(3, far) == 3);
	ret = nvmefs_node_cpus(0, &cpus);
	if (ret == -ENOSYS) {
		printf("numa: libnuma sees no NUMA here; CPU sets not checked\n");
		return;
	}
	CHECK_ERR(ret, 0);
	CHECK_ERR(nvmefs_node_cpus(numa_max_node() + 1, &cpus), -ENOENT);
	CHECK_ERR(nvmefs_node_cpus(-1, &cpus), -ENOENT);
	if (numa_max_node() == 0 && sched_getaffinity(0, sizeof(allowed), &allowed) == 0) {
		CPU_AND(&allowed, &allowed, &cpus);
		CHECKF(CPU_COUNT(&allowed) > 0, "node 0 has none of our CPUs");
		CHECKF(CPU_COUNT(&cpus) == numa_num_configured_cpus(), "node 0: %d CPUs of %d",
		       CPU_COUNT(&cpus), numa_num_configured_cpus());
	}
}

int main(void)
{
	nvmefs_log_set_sink(capture);
	test_numa();
	make_dirs();
	atexit(detach_all); /* runs before remove_dirs(): detach, then delete */
	test_files(ext4_dir, "ext4");
	test_refusals(ext4_dir);
	test_read_only(ext4_dir);
	test_no_permission(ext4_dir);
	test_discard(ext4_dir, "ext4");
	if (shm_dir[0]) {
		test_files(shm_dir, "tmpfs");
		test_discard(shm_dir, "tmpfs");
		test_mixed();
	}
	test_loops(ext4_dir);
	return test_result();
}
