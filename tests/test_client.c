// SPDX-License-Identifier: MIT
/*
 * libnvmefs (include/libnvmefs.h) and the daemon's native door
 * (fs/native/server.c) on a mounted volume: a test per call of the API,
 * coherence with the mount both ways, and the daemon against hostile and
 * dying clients. tests/test_native.sh mounts the volumes and runs the
 * groups; each test says what it checks above its function.
 *
 *   api        every call: attach, buffers, descriptors and the access mode
 *              that binds, submit/wait, the synchronous helpers over a table
 *              of sizes, offsets and buffers compared with pread(2) through
 *              the mount, the end of the file, fsync, the client's and the
 *              daemon's counters
 *   coherence  native writes seen at once through the mount (bytes, size,
 *              mtime, also by pages and mappings cached before); writes
 *              through the mount, a truncate and dirty pages of a shared
 *              mapping seen by native reads (in the mount's mode)
 *   writeback  on a -o writeback mount: write-enabled registrations refused,
 *              read-only ones read what the kernel still holds dirty
 *   hostile    malformed, truncated and lying messages straight on the
 *              socket: each answered with an error, nothing leaked, the
 *              daemon serving the others, also while one floods it
 *   slow       with the devices slowed (the script's doing): handles and
 *              regions busy while a request uses them; a client SIGKILLed
 *              with many writes in flight, after which the daemon gives
 *              back everything it held and serves on
 *
 * usage: test_client MOUNTPOINT GROUP...   (exit 0 pass, 1 fail)
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <grp.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "libnvmefs.h"
#include "nvmefs/wire.h"

#define KIB	  1024ull
#define MIB	  (1024 * KIB)
#define BLK	  4096u
#define Y2001	  978307200 /* 2001-01-01, an mtime no write makes */
#define TEST_SECS 60	    /* per test: a hang fails, naming the step */

/* ASan's mlock does nothing: VmLck does not move. */
#ifdef __SANITIZE_ADDRESS__
#define LOCK_SEEN 0
#else
#define LOCK_SEEN 1
#endif

static const char *mnt;
static const char *cur_test = "";
static const char *volatile cur_step = "";
static int nfail;
static bool cached_mode, maps_shared;

/* ---- checks ---- */

__attribute__((format(printf, 2, 3))) static void fail_at(int line, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "FAIL %s (line %d): ", cur_test, line);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	nfail++;
}

#define CHECK(cond, ...)                                                                           \
	do {                                                                                       \
		if (!(cond))                                                                       \
			fail_at(__LINE__, __VA_ARGS__);                                            \
	} while (0)

#define CHECK_EQ(got, want, ...)                                                                   \
	do {                                                                                       \
		long long g_ = (long long)(got), w_ = (long long)(want);                           \
		if (g_ != w_) {                                                                    \
			fail_at(__LINE__, __VA_ARGS__);                                            \
			fprintf(stderr, "    got %lld, want %lld\n", g_, w_);                      \
		}                                                                                  \
	} while (0)

/* A test cannot go on (its setup failed): report and stop. */
__attribute__((format(printf, 1, 2), noreturn)) static void die(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "FAIL %s: ", cur_test);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(1);
}

static void on_alarm(int sig)
{
	static const char a[] = "FAIL: timed out in ", b[] = ", at: ";
	const char *step = cur_step;

	(void)sig;
	if (write(2, a, sizeof(a) - 1) < 0 || write(2, cur_test, strlen(cur_test)) < 0 ||
	    write(2, b, sizeof(b) - 1) < 0 || write(2, step, strlen(step)) < 0 || write(2, "\n", 1))
		_exit(1);
	_exit(1);
}

static double now_s(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + t.tv_nsec / 1e9;
}

/* ---- files and bytes ---- */

/* MOUNT/name, in one of 4 rotating buffers. */
static const char *P(const char *name)
{
	static char ring[4][PATH_MAX];
	static unsigned i;
	char *p = ring[i++ % 4];

	snprintf(p, PATH_MAX, "%s/%s", mnt, name);
	return p;
}

/* The pattern seed: bytes that differ between seeds and offsets, here the
 * 8 at offsets [8 * word, 8 * word + 8). */
static uint64_t pat_word(uint32_t seed, uint64_t word)
{
	uint64_t x = word ^ ((uint64_t)seed << 44);

	x = (x ^ (x >> 31)) * 0x9e3779b97f4a7c15ull;
	x = (x ^ (x >> 29)) * 0xbf58476d1ce4e5b9ull;
	return x ^ (x >> 32);
}

static void fill(void *buf, size_t len, uint32_t seed, uint64_t off)
{
	uint8_t *b = buf;
	uint64_t w = pat_word(seed, off >> 3);

	for (size_t i = 0; i < len; i++) {
		uint64_t o = off + i;

		if (!(o & 7))
			w = pat_word(seed, o >> 3);
		b[i] = (uint8_t)(w >> ((o & 7) * 8));
	}
}

/* The first index where buf is not the pattern, or -1. */
static long long mismatch(const void *buf, size_t len, uint32_t seed, uint64_t off)
{
	const uint8_t *b = buf;
	uint64_t w = pat_word(seed, off >> 3);

	for (size_t i = 0; i < len; i++) {
		uint64_t o = off + i;

		if (!(o & 7))
			w = pat_word(seed, o >> 3);
		if (b[i] != (uint8_t)(w >> ((o & 7) * 8)))
			return (long long)i;
	}
	return -1;
}

static long long diff_at(const void *a, const void *b, size_t len)
{
	const uint8_t *x = a, *y = b;

	for (size_t i = 0; i < len; i++)
		if (x[i] != y[i])
			return (long long)i;
	return -1;
}

static bool all_zero(const void *buf, size_t len)
{
	const uint8_t *b = buf;

	for (size_t i = 0; i < len; i++)
		if (b[i])
			return false;
	return true;
}

static int mopen(const char *name, int flags)
{
	int fd = open(P(name), flags | O_CLOEXEC, 0644);

	if (fd < 0)
		die("open %s: %s", P(name), strerror(errno));
	return fd;
}

/* pwrite(2) through the mount, all of it. */
static void kwrite(int fd, const void *buf, size_t len, off_t off)
{
	size_t done = 0;

	while (done < len) {
		ssize_t n = pwrite(fd, (const uint8_t *)buf + done, len - done, off + (off_t)done);

		if (n <= 0)
			die("pwrite through the mount: %s", n ? strerror(errno) : "wrote 0");
		done += (size_t)n;
	}
}

/* pread(2) through the mount, to the end of the file or len. */
static size_t kread(int fd, void *buf, size_t len, off_t off)
{
	size_t done = 0;

	while (done < len) {
		ssize_t n = pread(fd, (uint8_t *)buf + done, len - done, off + (off_t)done);

		if (n < 0)
			die("pread through the mount: %s", strerror(errno));
		if (!n)
			break;
		done += (size_t)n;
	}
	return done;
}

/* MOUNT/name, len bytes of the pattern seed, written through the mount. */
static void make_file(const char *name, size_t len, uint32_t seed)
{
	int fd = mopen(name, O_RDWR | O_CREAT | O_TRUNC);
	uint8_t *b = malloc(len ? len : 1);

	if (!b)
		die("out of memory");
	fill(b, len, seed, 0);
	kwrite(fd, b, len, 0);
	free(b);
	close(fd);
}

static off_t fsize(int fd)
{
	struct stat st;

	if (fstat(fd, &st))
		die("fstat: %s", strerror(errno));
	return st.st_size;
}

static void *xmalloc(size_t n)
{
	void *p = malloc(n);

	if (!p)
		die("out of memory (%zu bytes)", n);
	return p;
}

/* ---- the daemon's side ---- */

static char *slurp(const char *path)
{
	size_t cap = 65536, len = 0;
	char *doc = xmalloc(cap);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		die("%s: %s", path, strerror(errno));
	while ((n = read(fd, doc + len, cap - len - 1)) > 0) {
		len += (size_t)n;
		if (cap - len < 2) {
			cap *= 2;
			doc = realloc(doc, cap);
			if (!doc)
				die("out of memory");
		}
	}
	close(fd);
	doc[len] = '\0';
	return doc;
}

/* Counter key of the "native" object of MOUNT/.nvmefs/stats (JSON,
 * fs/fuse/ctl.c), or -1 when it is not there. */
static long long nat(const char *key)
{
	char *doc = slurp(P(".nvmefs/stats")), want[64], *at, *end, *k;
	long long v = -1;

	at = strstr(doc, "\"native\"");
	end = at ? strchr(at, '}') : NULL; /* a flat object */
	snprintf(want, sizeof(want), "\"%s\"", key);
	k = at ? strstr(at, want) : NULL;
	if (k && k < end) {
		k += strlen(want);
		k += strspn(k, " \t\n");
		if (*k == ':')
			v = strtoll(k + 1, NULL, 10);
	}
	free(doc);
	return v;
}

/* The volume's free bytes (statvfs). */
static unsigned long long free_bytes(void)
{
	struct statvfs v;

	if (statvfs(mnt, &v))
		die("statvfs %s: %s", mnt, strerror(errno));
	return (unsigned long long)v.f_bfree * v.f_frsize;
}

/* The volume has want free bytes again within 10 s, less 64 KiB of
 * slack: an unlinked file's blocks are freed when the last one holding it
 * open (the kernel, the native door) lets go. */
static bool space_back(unsigned long long want)
{
	for (int i = 0; i < 1000; i++) {
		if (free_bytes() + 64 * KIB >= want)
			return true;
		usleep(10000);
	}
	return false;
}

/* The daemon's clients counter reaches want within 20 s. */
static bool clients_become(long long want)
{
	for (int i = 0; i < 2000; i++) {
		if (nat("clients") == want)
			return true;
		usleep(10000);
	}
	return false;
}

/* A line "key = value" of MOUNT/.nvmefs/config, into out. */
static bool config(const char *key, char *out, size_t len)
{
	char *doc = slurp(P(".nvmefs/config")), *line = doc;
	size_t kl = strlen(key);
	bool found = false;

	while (line && *line) {
		char *nl = strchr(line, '\n');

		if (nl)
			*nl = '\0';
		if (!strncmp(line, key, kl) && !strncmp(line + kl, " = ", 3)) {
			snprintf(out, len, "%s", line + kl + 3);
			found = true;
			break;
		}
		line = nl ? nl + 1 : NULL;
	}
	free(doc);
	return found;
}

static pid_t daemon_pid(void)
{
	char v[32];

	if (!config("pid", v, sizeof(v)))
		die("no pid in %s", P(".nvmefs/config"));
	return (pid_t)strtol(v, NULL, 10);
}

/* The entries of the daemon's /proc/PID/DIR: "fd" its open descriptors,
 * "task" its threads. */
static int daemon_proc_entries(const char *dir)
{
	char path[64];
	struct dirent *e;
	int n = 0;
	DIR *d;

	snprintf(path, sizeof(path), "/proc/%d/%s", (int)daemon_pid(), dir);
	d = opendir(path);
	if (!d)
		die("%s: %s", path, strerror(errno));
	while ((e = readdir(d)))
		n += e->d_name[0] != '.';
	closedir(d);
	return n;
}

/*
 * The daemon's threads, without the kernel's io_uring workers
 * (iou-wrk-N): on FUSE over io_uring the queues' device blocks go on
 * their rings, and the kernel starts and ends such workers as it needs.
 */
static int daemon_threads(void)
{
	char path[96], comm[32];
	struct dirent *e;
	int n = 0;
	DIR *d;

	snprintf(path, sizeof(path), "/proc/%d/task", (int)daemon_pid());
	d = opendir(path);
	if (!d)
		die("%s: %s", path, strerror(errno));
	while ((e = readdir(d))) {
		FILE *f;

		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/proc/%d/task/%.32s/comm", (int)daemon_pid(),
			 e->d_name);
		f = fopen(path, "re");
		if (!f)
			continue; /* ended meanwhile */
		if (!fgets(comm, sizeof(comm), f))
			comm[0] = 0;
		fclose(f);
		n += strncmp(comm, "iou-wrk-", 8) != 0;
	}
	closedir(d);
	return n;
}

/* The daemon's mappings of clients' memory (memfds). */
static int daemon_memfd_maps(void)
{
	char path[64];
	char *doc, *at;
	int n = 0;

	snprintf(path, sizeof(path), "/proc/%d/maps", (int)daemon_pid());
	doc = slurp(path);
	for (at = doc; (at = strstr(at, "/memfd:")); at++)
		n++;
	free(doc);
	return n;
}

static bool others_served(void);

/*
 * What the daemon holds with no client attached: descriptors and threads.
 * The door joins a client's thread and closes its eventfd when the next
 * client connects, so the state compared is always the one right after a
 * client of the library came and went (the one before it collected).
 */
struct held {
	int fds, threads;
};

static struct held settled(void)
{
	/* clients drops just before a thread is marked done: a moment more */
	CHECK(clients_become(0), "no client left (%lld)", nat("clients"));
	usleep(20000);
	CHECK(others_served(), "a client is served");
	CHECK(clients_become(0), "no client left (%lld)", nat("clients"));
	usleep(20000);
	return (struct held){daemon_proc_entries("fd"), daemon_threads()};
}

#define CHECK_HELD(before, why)                                                                    \
	do {                                                                                       \
		struct held now_ = settled();                                                      \
		CHECK_EQ(now_.fds, (before).fds, "the daemon's descriptors back as before %s",     \
			 why);                                                                     \
		CHECK_EQ(now_.threads, (before).threads, "the daemon's threads back as before %s", \
			 why);                                                                     \
		CHECK_EQ(daemon_memfd_maps(), 0, "the daemon maps no client memory %s", why);      \
	} while (0)

/* ---- the client ---- */

static struct nvmefs_client *attach(void)
{
	struct nvmefs_client *c = NULL;
	int ret = nvmefs_attach(mnt, &c);

	if (ret)
		die("nvmefs_attach(%s): %d %s", mnt, ret, nvmefs_client_error(NULL));
	return c;
}

/* The buffers of balloc: the process's, freed after each test. */
static void *bufs[64];
static unsigned nbufs;

static void *balloc(struct nvmefs_client *c, size_t size)
{
	void *p = NULL;
	int ret = nvmefs_buf_alloc(c, size, -1, &p);

	if (ret)
		die("nvmefs_buf_alloc(%zu): %d %s", size, ret, nvmefs_client_error(c));
	if (nbufs == sizeof(bufs) / sizeof(bufs[0]))
		die("too many buffers");
	bufs[nbufs++] = p;
	return p;
}

static void free_bufs(void)
{
	while (nbufs) {
		int ret = nvmefs_buf_free(NULL, bufs[--nbufs]);

		CHECK_EQ(ret, 0, "free a buffer after the test: %s", nvmefs_client_error(NULL));
	}
}

static void reg(struct nvmefs_client *c, int fd)
{
	int ret = nvmefs_reg_fd(c, fd);

	if (ret)
		die("nvmefs_reg_fd(%d): %d %s", fd, ret, nvmefs_client_error(c));
}

/* Wait for n completions of c into cqes (die when they do not come). */
static void reap(struct nvmefs_client *c, struct nvmefs_cqe *cqes, unsigned n)
{
	unsigned got = 0;

	while (got < n) {
		int ret = nvmefs_wait(c, cqes + got, n - got, n - got, -1);

		if (ret <= 0)
			die("nvmefs_wait: %d %s", ret, nvmefs_client_error(c));
		got += (unsigned)ret;
	}
}

/* ==== api ==== */

/*
 * nvmefs_attach from the mount point, a file inside, a file not created
 * yet (which it does not create), relative paths; refused on a path of
 * another filesystem (-ENOTSUP, a message naming it) and a missing
 * directory (-ENOENT). The daemon counts the client while attached.
 */
static void test_attach(void)
{
	static const char *foreign[] = {"/tmp", "/", "/dev/shm/nvmefs-not-there", "/proc/self"};
	struct nvmefs_client *c = NULL;
	long long conn0 = nat("connects");
	char cwd[PATH_MAX];
	int ret, fd;

	CHECK(clients_become(0), "no client before (%lld)", nat("clients"));
	ret = nvmefs_attach(mnt, &c);
	CHECK_EQ(ret, 0, "attach at the mount point: %s", nvmefs_client_error(NULL));
	if (!ret) {
		CHECK_EQ(nvmefs_client_block(c), BLK, "zero-copy alignment");
		CHECK(nvmefs_client_max_inflight(c) >= 256, "max in flight %u",
		      nvmefs_client_max_inflight(c));
		CHECK_EQ(nvmefs_client_inflight(c), 0, "nothing in flight after attach");
		CHECK_EQ(strlen(nvmefs_client_error(c)), 0, "no error after attach");
		CHECK(clients_become(1), "the daemon counts an attached client (%lld)",
		      nat("clients"));
		nvmefs_detach(c);
	}
	CHECK(clients_become(0), "after detach the daemon counts no client");
	nvmefs_detach(NULL);

	if (mkdir(P("attach.d"), 0755) || mkdir(P("attach.d/sub"), 0755))
		die("mkdir: %s", strerror(errno));
	make_file("attach.d/sub/f", 100, 1);
	c = NULL;
	ret = nvmefs_attach(P("attach.d/sub/f"), &c);
	CHECK_EQ(ret, 0, "attach from a file two levels down: %s", nvmefs_client_error(NULL));
	if (!ret) {
		/* the same volume: a file of the mount registers */
		fd = mopen("attach.d/sub/f", O_RDONLY);
		CHECK_EQ(nvmefs_reg_fd(c, fd), 0,
			 "a file of the mount registers with a client attached from inside");
		nvmefs_detach(c);
		close(fd);
	}
	c = NULL;
	ret = nvmefs_attach(P("attach.d/sub/not-yet"), &c);
	CHECK_EQ(ret, 0, "attach from a file not created yet: %s", nvmefs_client_error(NULL));
	CHECK(access(P("attach.d/sub/not-yet"), F_OK) && errno == ENOENT,
	      "attach created the file it was given");
	nvmefs_detach(ret ? NULL : c);

	if (!getcwd(cwd, sizeof(cwd)) || chdir(P("attach.d")))
		die("chdir: %s", strerror(errno));
	c = NULL;
	ret = nvmefs_attach("sub/f", &c);
	CHECK_EQ(ret, 0, "attach from a relative path: %s", nvmefs_client_error(NULL));
	nvmefs_detach(ret ? NULL : c);
	c = NULL;
	ret = nvmefs_attach("new-file", &c);
	CHECK_EQ(ret, 0, "attach from a new file in the working directory: %s",
		 nvmefs_client_error(NULL));
	nvmefs_detach(ret ? NULL : c);
	if (chdir(cwd))
		die("chdir %s: %s", cwd, strerror(errno));

	c = NULL;
	ret = nvmefs_attach(P("no-such-dir/f"), &c);
	CHECK_EQ(ret, -ENOENT, "attach below a missing directory");
	CHECK(strstr(nvmefs_client_error(NULL), "no-such-dir"), "the message names the path: %s",
	      nvmefs_client_error(NULL));
	for (size_t i = 0; i < sizeof(foreign) / sizeof(foreign[0]); i++) {
		c = NULL;
		ret = nvmefs_attach(foreign[i], &c);
		CHECK_EQ(ret, -ENOTSUP, "attach on %s (not nvmefs)", foreign[i]);
		CHECK(!c, "a refused attach gave a client");
		CHECK(strstr(nvmefs_client_error(NULL), foreign[i]) &&
			      strstr(nvmefs_client_error(NULL), "nvmefs"),
		      "the refusal names %s and nvmefs: \"%s\"", foreign[i],
		      nvmefs_client_error(NULL));
	}
	CHECK_EQ(nat("connects") - conn0, 5, "the daemon counted each attach");
}

static long vmlck_kb(void)
{
	char *doc = slurp("/proc/self/status"), *at = strstr(doc, "VmLck:");
	long v = at ? strtol(at + 6, NULL, 10) : -1;

	free(doc);
	return v;
}

/*
 * nvmefs_buf_alloc: page-aligned, zero-filled over the rounded size,
 * locked (VmLck), counted as the client's shared memory; with no client
 * too; on a NUMA node; -EINVAL for size 0, above 1 TiB, no such node (the
 * message in nvmefs_client_error). nvmefs_buf_free: only a start address
 * (-EINVAL else, also twice), -EBUSY while a request of the client uses
 * it. Buffers are the process's: they outlive a detach and another client
 * moves them with zero copy; a client that used a freed buffer lets go of
 * it (the daemon unmaps it) at its next call.
 */
static void test_buf(void)
{
	struct nvmefs_client *c = attach(), *c2;
	struct nvmefs_client_stats st;
	struct nvmefs_cqe cqe;
	long lck0 = vmlck_kb();
	long long cb0;
	void *a = NULL, *b = NULL, *d = NULL, *e = NULL, *n = NULL;
	int local, fd, maps, ret;

	CHECK_EQ(nvmefs_buf_alloc(c, 1, -1, &a), 0, "1 byte: %s", nvmefs_client_error(c));
	CHECK_EQ(nvmefs_buf_alloc(c, 3 * BLK + 5, -1, &b), 0, "3 pages and 5 bytes");
	if (!a || !b)
		die("no buffers");
	CHECK_EQ((uintptr_t)a % BLK, 0, "1-byte buffer page-aligned");
	CHECK_EQ((uintptr_t)b % BLK, 0, "3-page buffer page-aligned");
	CHECK(all_zero(a, BLK) && all_zero(b, 4 * BLK), "new buffers are zero-filled");
	memset(a, 0xa5, BLK);
	memset(b, 0x5a, 4 * BLK); /* the whole rounded size is the caller's */
	nvmefs_client_stats(c, &st);
	CHECK_EQ(st.shared_bytes, 5 * BLK, "shared bytes counted, rounded to pages");
	CHECK(!LOCK_SEEN || vmlck_kb() - lck0 >= 20, "buffers locked in RAM (VmLck %ld -> %ld kB)",
	      lck0, vmlck_kb());

	CHECK_EQ(nvmefs_buf_alloc(c, 0, -1, &e), -EINVAL, "size 0");
	CHECK(strstr(nvmefs_client_error(c), "size"), "the refusal says why: %s",
	      nvmefs_client_error(c));
	CHECK_EQ(nvmefs_buf_alloc(c, (1ull << 40) + 1, -1, &e), -EINVAL, "above 1 TiB");
	CHECK_EQ(nvmefs_buf_alloc(c, BLK, 4096, &e), -EINVAL, "NUMA node 4096");
	CHECK_EQ(nvmefs_buf_alloc(NULL, 0, -1, &e), -EINVAL, "size 0, no client");
	CHECK(strstr(nvmefs_client_error(NULL), "size"),
	      "with no client the refusal is nvmefs_client_error(NULL): %s",
	      nvmefs_client_error(NULL));
	CHECK(!e, "a refused allocation gave a buffer");
	if (!access("/sys/devices/system/node/node0", F_OK)) {
		ret = nvmefs_buf_alloc(c, 64 * KIB, 0, &e);
		CHECK_EQ(ret, 0, "NUMA node 0: %s", nvmefs_client_error(c));
		CHECK(!ret && all_zero(e, 64 * KIB), "a buffer on node 0 is zero-filled");
		CHECK_EQ(ret ? 0 : nvmefs_buf_free(c, e), 0, "free the node-0 buffer");
	}

	CHECK_EQ(nvmefs_buf_free(c, (uint8_t *)b + BLK), -EINVAL, "free inside a buffer");
	CHECK_EQ(nvmefs_buf_free(c, NULL), -EINVAL, "free NULL");
	CHECK_EQ(nvmefs_buf_free(c, &local), -EINVAL, "free the stack");
	CHECK_EQ(nvmefs_buf_free(c, a), 0, "free");
	CHECK_EQ(nvmefs_buf_free(c, a), -EINVAL, "free twice");
	CHECK_EQ(nvmefs_buf_free(NULL, a), -EINVAL, "free twice, no client");
	nvmefs_client_stats(c, &st);
	CHECK_EQ(st.shared_bytes, 4 * BLK, "shared bytes after a free");

	/* -EBUSY while a request uses it: nothing is reaped before the wait. */
	make_file("buf", MIB, 2);
	fd = mopen("buf", O_RDONLY);
	reg(c, fd);
	CHECK_EQ(nvmefs_buf_alloc(c, MIB, -1, &d), 0, "1 MiB");
	if (!d)
		die("no buffer");
	{
		struct nvmefs_io io = {.fd = fd, .op = NVMEFS_OP_READ, .buf = d, .len = MIB};

		CHECK_EQ(nvmefs_submit(c, &io, 1), 1, "submit a read");
	}
	CHECK_EQ(nvmefs_buf_free(c, d), -EBUSY, "free while a read fills it");
	reap(c, &cqe, 1);
	CHECK_EQ(cqe.res, MIB, "the read");
	CHECK_EQ(mismatch(d, MIB, 2, 0), -1, "the read's bytes");
	CHECK_EQ(nvmefs_buf_free(c, d), 0, "free once the read completed");
	nvmefs_detach(c);
	close(fd);

	/* The process's: b outlives the client, and the next moves it with
	 * no copy (registered at its first use). */
	CHECK(!LOCK_SEEN || vmlck_kb() - lck0 >= 16,
	      "a detach leaves the buffers locked (VmLck %ld -> %ld kB)", lck0, vmlck_kb());
	c2 = attach();
	fd = mopen("buf", O_RDWR);
	reg(c2, fd);
	cb0 = nat("copied_bytes");
	fill(b, 4 * BLK, 3, 0);
	CHECK_EQ(nvmefs_pwrite(c2, fd, b, 4 * BLK, 0), 4 * BLK, "another client writes it");
	nvmefs_client_stats(c2, &st);
	CHECK(!st.bounced && st.shared_bytes == 4 * BLK,
	      "from shared memory: %" PRIu64 " bounced, %" PRIu64 " shared bytes", st.bounced,
	      st.shared_bytes);
	CHECK_EQ(nat("copied_bytes") - cb0, 0, "with no copy in the daemon");
	memset(b, 0, 4 * BLK);
	CHECK_EQ(nvmefs_pread(c2, fd, b, 4 * BLK, 0), 4 * BLK, "and reads it");
	CHECK_EQ(mismatch(b, 4 * BLK, 3, 0), -1, "its bytes");

	/* Freed with no client: c2 lets go of it at its next call. */
	CHECK_EQ(nvmefs_buf_alloc(NULL, BLK, -1, &n), 0, "allocate with no client");
	maps = daemon_memfd_maps();
	CHECK_EQ(nvmefs_buf_free(NULL, b), 0, "free with no client");
	CHECK_EQ(nvmefs_pread(c2, fd, n, BLK, 0), BLK, "c2's next call, into another buffer");
	CHECK_EQ(daemon_memfd_maps(), maps,
		 "the daemon unmapped the freed buffer and mapped the new one");
	nvmefs_client_stats(c2, &st);
	CHECK_EQ(st.shared_bytes, BLK, "c2's shared memory: the new buffer only");
	CHECK_EQ(nvmefs_buf_free(NULL, n), 0, "free the last");

	/* A buffer freed with no client while c2 still has a read in flight
	 * on it (the caller's fault): c2 keeps its registration only for that
	 * read, and a new buffer that mmap puts at the same address, before or
	 * after the reap, is served from its own memory, not from the freed
	 * buffer's (the daemon writing into the old memfd). */
	CHECK_EQ(nvmefs_buf_alloc(c2, MIB, -1, &d), 0, "a buffer for a read in flight");
	CHECK_EQ(nvmefs_buf_alloc(NULL, BLK, -1, &n), 0, "and another");
	if (!d || !n)
		die("no buffers");
	{
		struct nvmefs_io io = {.fd = fd, .op = NVMEFS_OP_READ, .buf = d, .len = MIB};
		void *again = NULL;

		CHECK_EQ(nvmefs_submit(c2, &io, 1), 1, "submit a read");
		CHECK_EQ(nvmefs_buf_free(NULL, d), 0, "free it with no client");
		CHECK_EQ(nvmefs_pread(c2, fd, n, BLK, 0), BLK,
			 "c2's next call, into another buffer");
		CHECK_EQ(nvmefs_buf_alloc(NULL, MIB, -1, &again), 0, "a new buffer of that size");
		if (!again)
			die("no buffer");
		for (int round = 0; round < 2; round++) {
			memset(again, 0, MIB);
			CHECK_EQ(nvmefs_pread(c2, fd, again, MIB, 0), MIB,
				 "read into the new buffer");
			/* The file: c2's 4 pages of seed 3, then make_file's seed 2. */
			CHECK(mismatch(again, 4 * BLK, 3, 0) == -1 &&
				      mismatch((uint8_t *)again + 4 * BLK, MIB - 4 * BLK, 2,
					       4 * BLK) == -1,
			      "%s the reap, the new buffer (at %p; the freed one at %p) holds the "
			      "file's bytes",
			      round ? "after" : "before", again, d);
			if (!round)
				reap(c2, &cqe, 1);
		}
		CHECK_EQ(nvmefs_buf_free(c2, again), 0, "free it");
	}
	CHECK_EQ(nvmefs_buf_free(NULL, n), 0, "free the last");
	nvmefs_detach(c2);
	close(fd);
	CHECK(vmlck_kb() <= lck0, "every buffer freed is unlocked (VmLck %ld -> %ld kB)", lck0,
	      vmlck_kb());
}

/* Whether descriptor fd of the process is a buffer's memfd. */
static bool is_buf_memfd(int fd)
{
	char p[32], t[64];
	ssize_t n;

	snprintf(p, sizeof(p), "/proc/self/fd/%d", fd);
	n = readlink(p, t, sizeof(t) - 1);
	return n > 0 && (t[n] = '\0', !strncmp(t, "/memfd:nvmefs-buf", 17));
}

/*
 * A buffer whose memfd the program closed behind the library (closefrom,
 * dup2 over its number): the file the program then has at that number is
 * neither sent to a daemon nor closed by nvmefs_buf_free, and requests on
 * the buffer are bounced, and right.
 */
static void test_buf_fd_taken(void)
{
	struct nvmefs_client *c = attach();
	struct nvmefs_client_stats st;
	struct stat sb;
	void *b = NULL;
	bool was[1024];
	int fd, mfd, other;

	for (int i = 0; i < 1024; i++)
		was[i] = is_buf_memfd(i);
	CHECK_EQ(nvmefs_buf_alloc(NULL, 4 * BLK, -1, &b), 0, "a buffer, no client yet");
	if (!b)
		die("no buffer");
	mfd = -1;
	for (int i = 0; i < 1024 && mfd < 0; i++)
		if (!was[i] && is_buf_memfd(i))
			mfd = i;
	if (mfd < 0)
		die("the new buffer's memfd is not in /proc/self/fd");
	other = open("/dev/null", O_RDONLY | O_CLOEXEC);
	CHECK(other >= 0 && dup2(other, mfd) == mfd, "/dev/null put on the memfd's number %d", mfd);
	close(other);
	make_file("fdtaken", 4 * BLK, 5);
	fd = mopen("fdtaken", O_RDWR);
	reg(c, fd);
	fill(b, 4 * BLK, 6, 0);
	CHECK_EQ(nvmefs_pwrite(c, fd, b, 4 * BLK, 0), 4 * BLK, "a write from the buffer: %s",
		 nvmefs_client_error(c));
	/* A file sent as the buffer would have been refused (no seals), in
	 * a sentence left here. */
	CHECK(!*nvmefs_client_error(c), "nothing sent to the daemon for it: %s",
	      nvmefs_client_error(c));
	memset(b, 0, 4 * BLK);
	CHECK_EQ(nvmefs_pread(c, fd, b, 4 * BLK, 0), 4 * BLK, "a read into it");
	CHECK(!*nvmefs_client_error(c), "nor for the read: %s", nvmefs_client_error(c));
	CHECK_EQ(mismatch(b, 4 * BLK, 6, 0), -1, "its bytes");
	nvmefs_client_stats(c, &st);
	CHECK_EQ(st.bounced, 2, "both through a bounce region, the buffer not registered");
	CHECK_EQ(nvmefs_buf_free(c, b), 0, "free it");
	CHECK(!fstat(mfd, &sb) && S_ISCHR(sb.st_mode),
	      "the program's /dev/null at number %d is still open after the free", mfd);
	close(mfd);
	nvmefs_detach(c);
	close(fd);
}

static int tmp_file(const char *dir)
{
	char p[PATH_MAX];
	int fd;

	snprintf(p, sizeof(p), "%s/nvmefs-client.XXXXXX", dir);
	fd = mkstemp(p);
	if (fd < 0)
		return -1;
	unlink(p);
	return fd;
}

/*
 * nvmefs_reg_fd / nvmefs_unreg_fd: -EEXIST twice, -EBADF for a closed
 * descriptor and O_PATH, -EINVAL for a directory and the control file
 * .nvmefs/stats, a foreign descriptor refused (-EXDEV: files on /tmp and
 * /dev/shm, a memfd, a pipe), -EBUSY while a request names it, -EBADF to
 * unregister what is not; a dup'ed descriptor registers on its own.
 */
static void test_reg_fd(void)
{
	struct nvmefs_client *c = attach();
	const char *dirs[] = {"/tmp", "/dev/shm"};
	int fd = -1, dfd, pfd, sfd, mfd, pp[2], ret;
	struct nvmefs_cqe cqe;
	void *buf;

	make_file("reg", 64 * KIB, 3);
	fd = mopen("reg", O_RDWR);
	CHECK_EQ(nvmefs_reg_fd(c, fd), 0, "register: %s", nvmefs_client_error(c));
	CHECK_EQ(nvmefs_reg_fd(c, fd), -EEXIST, "register twice");
	CHECK_EQ(nvmefs_unreg_fd(c, fd), 0, "unregister");
	CHECK_EQ(nvmefs_unreg_fd(c, fd), -EBADF, "unregister twice");
	CHECK_EQ(nvmefs_reg_fd(c, fd), 0, "register again after unregistering");
	CHECK_EQ(nvmefs_reg_fd(c, -1), -EBADF, "register -1");
	CHECK_EQ(nvmefs_reg_fd(c, 1000), -EBADF, "register a closed descriptor");
	CHECK_EQ(nvmefs_unreg_fd(c, 1000), -EBADF, "unregister what never was");

	pfd = open(P("reg"), O_PATH | O_CLOEXEC);
	CHECK_EQ(nvmefs_reg_fd(c, pfd), -EBADF, "an O_PATH descriptor");
	dfd = open(mnt, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	CHECK_EQ(nvmefs_reg_fd(c, dfd), -EINVAL, "a directory of the mount");
	sfd = open(P(".nvmefs/stats"), O_RDONLY | O_CLOEXEC);
	CHECK(sfd >= 0, ".nvmefs/stats opens");
	CHECK_EQ(nvmefs_reg_fd(c, sfd), -EINVAL, "the control file .nvmefs/stats");
	close(pfd);
	close(dfd);
	close(sfd);

	/* A foreign descriptor refused: the daemon checks the file's st_dev. */
	for (size_t i = 0; i < 2; i++) {
		int tfd = tmp_file(dirs[i]);

		if (tfd < 0) {
			fprintf(stderr, "note: no file on %s (%s), not tried\n", dirs[i],
				strerror(errno));
			continue;
		}
		ret = nvmefs_reg_fd(c, tfd);
		CHECK_EQ(ret, -EXDEV, "a foreign descriptor refused: a file on %s", dirs[i]);
		CHECK(strstr(nvmefs_client_error(c), "not a file of the nvmefs volume"),
		      "the refusal says why: %s", nvmefs_client_error(c));
		close(tfd);
	}
	mfd = memfd_create("reg", MFD_CLOEXEC);
	CHECK_EQ(nvmefs_reg_fd(c, mfd), -EXDEV, "a foreign descriptor refused: a memfd");
	close(mfd);
	if (pipe2(pp, O_CLOEXEC))
		die("pipe: %s", strerror(errno));
	CHECK_EQ(nvmefs_reg_fd(c, pp[0]), -EXDEV, "a foreign descriptor refused: a pipe");
	close(pp[0]);
	close(pp[1]);

	/* -EBUSY while in flight; the registration works meanwhile. */
	buf = balloc(c, 64 * KIB);
	{
		struct nvmefs_io io = {.fd = fd, .op = NVMEFS_OP_READ, .buf = buf, .len = 64 * KIB};

		CHECK_EQ(nvmefs_submit(c, &io, 1), 1, "submit a read");
	}
	CHECK_EQ(nvmefs_unreg_fd(c, fd), -EBUSY, "unregister while a read names it");
	reap(c, &cqe, 1);
	CHECK_EQ(cqe.res, 64 * KIB, "the read");
	CHECK_EQ(mismatch(buf, 64 * KIB, 3, 0), -1, "the read's bytes");

	/* A second descriptor of the same file is registered on its own. */
	{
		int fd2 = dup(fd);

		CHECK_EQ(nvmefs_reg_fd(c, fd2), 0, "a dup'ed descriptor");
		CHECK_EQ(nvmefs_pread(c, fd2, buf, BLK, 0), BLK, "a read through it");
		CHECK_EQ(nvmefs_unreg_fd(c, fd2), 0, "unregister the dup");
		CHECK_EQ(nvmefs_pread(c, fd, buf, BLK, 0), BLK, "the first still works");
		close(fd2);
	}
	CHECK_EQ(nvmefs_unreg_fd(c, fd), 0, "unregister once idle");
	close(fd);
	nvmefs_detach(c);
}

/*
 * The access mode binds: a read-only descriptor refused for writing (the
 * completion -EBADF, the file untouched), a write-only one refused for
 * reading; each refusal counted by the daemon. fsync is allowed on any;
 * O_APPEND does not move an explicit offset.
 */
static void test_modes(void)
{
	struct nvmefs_client *c = attach();
	struct nvmefs_cqe cqe = {0};
	long long refused0 = nat("refused");
	uint8_t *buf, *k = xmalloc(16 * KIB);
	int ro, wo, rw, ap;

	make_file("modes", 16 * KIB, 4);
	ro = mopen("modes", O_RDONLY);
	wo = mopen("modes", O_WRONLY);
	rw = mopen("modes", O_RDWR);
	ap = mopen("modes", O_WRONLY | O_APPEND);
	reg(c, ro);
	reg(c, wo);
	reg(c, rw);
	reg(c, ap);
	buf = balloc(c, 16 * KIB);
	fill(buf, 16 * KIB, 5, 0);

	{
		struct nvmefs_io io = {
			.fd = ro, .op = NVMEFS_OP_WRITE, .buf = buf, .len = BLK, .user_data = 11};

		CHECK_EQ(nvmefs_submit(c, &io, 1), 1, "a write on a read-only descriptor is taken");
	}
	reap(c, &cqe, 1);
	CHECK_EQ(cqe.user_data, 11, "its completion");
	CHECK_EQ(cqe.res, -EBADF, "a read-only descriptor refused for writing");
	CHECK_EQ(nvmefs_pwrite(c, ro, buf, 100, 7), -EBADF, "nvmefs_pwrite on a read-only one");
	CHECK_EQ(kread(ro, k, 16 * KIB, 0), 16 * KIB, "the file through the mount");
	CHECK_EQ(mismatch(k, 16 * KIB, 4, 0), -1, "refused writes left the file untouched");
	CHECK_EQ(nvmefs_pread(c, wo, buf, BLK, 0), -EBADF,
		 "a write-only descriptor refused for reading");
	CHECK_EQ(nat("refused") - refused0, 3, "the daemon counted the refusals");

	CHECK_EQ(nvmefs_pread(c, ro, buf, 16 * KIB, 0), 16 * KIB, "a read-only one reads");
	CHECK_EQ(mismatch(buf, 16 * KIB, 4, 0), -1, "its bytes");
	fill(buf, BLK, 5, BLK);
	CHECK_EQ(nvmefs_pwrite(c, wo, buf, BLK, BLK), BLK, "a write-only one writes");
	CHECK_EQ(nvmefs_pwrite(c, rw, buf, 10, 2 * BLK + 3), 10, "a read-write one writes");
	CHECK_EQ(nvmefs_pread(c, rw, buf, 10, 2 * BLK + 3), 10, "and reads");
	CHECK_EQ(mismatch(buf, 10, 5, BLK), -1, "its bytes");
	CHECK_EQ(nvmefs_fsync(c, wo), 0, "fsync on a write-only descriptor");
	CHECK_EQ(nvmefs_fsync(c, ro), 0, "fsync on a read-only descriptor");

	fill(buf, BLK, 6, 0);
	CHECK_EQ(nvmefs_pwrite(c, ap, buf, BLK, 0), BLK, "a write at 0 on an O_APPEND descriptor");
	CHECK_EQ(fsize(rw), 16 * KIB, "an explicit offset is kept on O_APPEND (no append)");
	CHECK_EQ(kread(rw, k, BLK, 0), BLK, "read through the mount");
	CHECK_EQ(mismatch(k, BLK, 6, 0), -1, "it landed at offset 0");
	nvmefs_detach(c);
	close(ro);
	close(wo);
	close(rw);
	close(ap);
	free(k);
}

/*
 * nvmefs_submit / nvmefs_wait: a batch larger than one message, every
 * user_data (0 and UINT64_MAX too) back once; wrong first requests
 * refused with nothing taken, wrong later ones taken and completed with
 * their error; a mixed batch; wait with timeout 0 and with min above what
 * is in flight returns at once; partial acceptance at max_inflight, then
 * -EAGAIN, and a synchronous helper then returns -EAGAIN rather than wait
 * for room only nvmefs_wait can make.
 */
static void test_submit_wait(void)
{
	struct nvmefs_client *c = attach();
	unsigned max = nvmefs_client_max_inflight(c), n = 300;
	struct nvmefs_io *ios = xmalloc((max + 10) * sizeof(*ios));
	struct nvmefs_cqe *cq = xmalloc((max + 10) * sizeof(*cq));
	uint8_t *buf, *k = xmalloc(n * BLK), *seen = calloc(max + 10, 1);
	int fd, other, ret;
	double t;

	fd = mopen("batch", O_RDWR | O_CREAT | O_TRUNC);
	reg(c, fd);
	buf = balloc(c, (max + 10) * (size_t)BLK);
	fill(buf, n * BLK, 7, 0);
	for (unsigned i = 0; i < n; i++)
		ios[i] = (struct nvmefs_io){.fd = fd,
					    .op = NVMEFS_OP_WRITE,
					    .buf = buf + (size_t)i * BLK,
					    .len = BLK,
					    .off = (uint64_t)i * BLK,
					    .user_data = i == n - 1 ? UINT64_MAX : i};
	cur_step = "a batch of 300";
	CHECK_EQ(nvmefs_submit(c, ios, n), n, "a batch of %u writes, more than one message", n);
	CHECK_EQ(nvmefs_client_inflight(c), n, "all in flight");
	reap(c, cq, n);
	for (unsigned i = 0; i < n; i++) {
		uint64_t u = cq[i].user_data == UINT64_MAX ? n - 1 : cq[i].user_data;

		CHECK_EQ(cq[i].res, BLK, "write %" PRIu64, cq[i].user_data);
		if (u < n && !seen[u]++)
			continue;
		CHECK(0, "user_data %" PRIu64 " came back wrong or twice", cq[i].user_data);
	}
	CHECK_EQ(nvmefs_client_inflight(c), 0, "nothing in flight once reaped");
	CHECK_EQ(kread(fd, k, n * BLK, 0), n * BLK, "the file through the mount");
	CHECK_EQ(mismatch(k, n * BLK, 7, 0), -1, "the batch's bytes through the mount");

	t = now_s();
	CHECK_EQ(nvmefs_wait(c, cq, 8, 0, 0), 0, "wait with nothing in flight, timeout 0");
	CHECK_EQ(nvmefs_wait(c, cq, 8, 5, -1), 0, "wait for 5 with nothing in flight");
	CHECK(now_s() - t < 0.5, "those waits returned at once (%.3f s)", now_s() - t);
	CHECK_EQ(nvmefs_submit(c, ios, 0), 0, "submit nothing");

	/* The first request wrong: nothing taken. */
	other = mopen("batch-other", O_RDWR | O_CREAT | O_TRUNC);
	ios[0] = (struct nvmefs_io){.fd = other, .op = NVMEFS_OP_READ, .buf = buf, .len = BLK};
	CHECK_EQ(nvmefs_submit(c, ios, 1), -EBADF, "first request on an unregistered descriptor");
	ios[0] = (struct nvmefs_io){.fd = fd, .op = 42, .buf = buf, .len = BLK};
	CHECK_EQ(nvmefs_submit(c, ios, 1), -EINVAL, "first request with op 42");
	ios[0] = (struct nvmefs_io){
		.fd = fd, .op = NVMEFS_OP_WRITE, .buf = &ret, .len = 300 * MIB, .user_data = 9};
	CHECK_EQ(nvmefs_submit(c, ios, 1), -EINVAL, "300 MiB outside shared memory");
	CHECK_EQ(nvmefs_client_inflight(c), 0, "refused requests were not taken");
	CHECK_EQ(nvmefs_wait(c, cq, 8, 0, 0), 0, "and complete nothing");

	/* Wrong after the first: taken, completed with their error. */
	ios[0] = (struct nvmefs_io){
		.fd = fd, .op = NVMEFS_OP_READ, .buf = buf, .len = BLK, .user_data = 100};
	ios[1] = (struct nvmefs_io){
		.fd = other, .op = NVMEFS_OP_READ, .buf = buf, .len = BLK, .user_data = 101};
	ios[2] = (struct nvmefs_io){.fd = fd, .op = 42, .buf = buf, .len = BLK, .user_data = 102};
	ios[3] = (struct nvmefs_io){.fd = fd,
				    .op = NVMEFS_OP_WRITE,
				    .buf = buf + BLK,
				    .len = BLK,
				    .off = 400 * BLK,
				    .user_data = 103};
	ios[4] = (struct nvmefs_io){.fd = fd, .op = NVMEFS_OP_FSYNC, .user_data = 104};
	cur_step = "a mixed batch";
	CHECK_EQ(nvmefs_submit(c, ios, 5), 5, "a batch with wrong requests after the first");
	reap(c, cq, 5);
	for (unsigned i = 0; i < 5; i++) {
		static const long long want[] = {BLK, -EBADF, -EINVAL, BLK, 0};
		uint64_t u = cq[i].user_data - 100;

		if (u > 4) {
			CHECK(0, "unknown user_data %" PRIu64, cq[i].user_data);
			continue;
		}
		CHECK_EQ(cq[i].res, want[u], "request %" PRIu64 " of the mixed batch",
			 cq[i].user_data);
	}

	/* Partial acceptance at max_inflight. */
	for (unsigned i = 0; i < max + 10; i++)
		ios[i] = (struct nvmefs_io){.fd = fd,
					    .op = NVMEFS_OP_READ,
					    .buf = buf + (size_t)i * BLK,
					    .len = BLK,
					    .off = (uint64_t)(i % n) * BLK,
					    .user_data = 5000 + i};
	cur_step = "max_inflight";
	CHECK_EQ(nvmefs_submit(c, ios, max + 10), max, "%u requests at a limit of %u", max + 10,
		 max);
	CHECK_EQ(nvmefs_client_inflight(c), max, "in flight at the limit");
	CHECK_EQ(nvmefs_submit(c, ios + max, 1), -EAGAIN, "one more at the limit");
	t = now_s();
	ret = nvmefs_wait(c, cq, max, max, 0);
	CHECK(ret >= 0 && ret <= (int)max, "wait with timeout 0: %d", ret);
	CHECK(now_s() - t < 0.5, "wait with timeout 0 returned at once (%.3f s)", now_s() - t);
	{
		unsigned got = (unsigned)(ret > 0 ? ret : 0);
		int w = nvmefs_wait(c, cq + got, 0, max - got, -1);

		CHECK_EQ(w, 0, "wait for all with room for none moves none");
		cur_step = "max_inflight reap";
		reap(c, cq + got, max - got);
	}
	memset(seen, 0, max + 10);
	for (unsigned i = 0; i < max; i++) {
		uint64_t u = cq[i].user_data - 5000;

		CHECK_EQ(cq[i].res, BLK, "read %" PRIu64, cq[i].user_data);
		if (u < max && !seen[u]++)
			continue;
		CHECK(0, "user_data %" PRIu64 " came back wrong or twice", cq[i].user_data);
	}
	/* Every slot holding a completed, unreaped request: no room until the
	 * caller reaps, which a synchronous call must not wait for. (Checked
	 * apart from the above: there the wait with timeout 0 may already
	 * have reaped some, leaving room.) */
	CHECK_EQ(nvmefs_submit(c, ios, max), max, "%u requests again", max);
	CHECK_EQ(nvmefs_wait(c, cq, 0, max, -1), 0, "wait for all, reaping none");
	cur_step = "nvmefs_pread with max_inflight completions unreaped";
	alarm(10);
	CHECK_EQ(nvmefs_pread(c, fd, buf, BLK, 0), -EAGAIN,
		 "a synchronous read with every slot holding an unreaped completion");
	cur_step = "max_inflight reap";
	reap(c, cq, max);
	CHECK_EQ(nvmefs_submit(c, ios + max, 10), 10, "the rest once reaped");
	reap(c, cq, 10);
	CHECK_EQ(nvmefs_client_inflight(c), 0, "nothing left in flight");
	nvmefs_detach(c);
	close(fd);
	close(other);
	free(ios);
	free(cq);
	free(k);
	free(seen);
}

/* Where a test's buffer sits. */
enum where {
	SHARED,	    /* a region's page-aligned start: zero copy when off and len are */
	COALIGNED,  /* shared, misaligned like the offset: copies at the edges only */
	SHARED_ODD, /* shared, 13 bytes into a page */
	HEAP,	    /* the caller's own: the library bounces it */
};

static const char *where_name[] = {"shared", "co-aligned", "shared+13", "heap"};

static uint8_t *place(enum where w, uint8_t *shared, uint8_t *heap, uint64_t off)
{
	switch (w) {
	case SHARED:
		return shared;
	case COALIGNED:
		return shared + (off % BLK);
	case SHARED_ODD:
		return shared + 13;
	default:
		return heap + 1;
	}
}

/*
 * The synchronous helpers over a table (as littlefs's tests): sizes 0, 7,
 * 4096, 8193 and 1 MiB + 3 at offsets 0, 4096, 7, 4095 and 1 MiB - 1,
 * from and into each kind of buffer. After each write the file through the
 * mount (pread(2) around the range, and its size) must match a model; the
 * native read back must give the bytes. Then 70 MiB from the heap (more
 * than one bounce piece) and 4 MiB shared, both ways.
 */
static void test_rw_sizes(void)
{
	static const size_t sizes[] = {0, 7, BLK, 2 * BLK + 1, MIB + 3};
	static const uint64_t offs[] = {0, BLK, 7, BLK - 1, MIB - 1};
	struct nvmefs_client *c = attach();
	size_t mlen = 4 * MIB, msize = 0, big = 70 * MIB;
	uint8_t *model = calloc(mlen, 1), *k = xmalloc(mlen), *heap = xmalloc(2 * MIB + 16);
	uint8_t *src = balloc(c, 2 * MIB + BLK), *dst = balloc(c, 2 * MIB + BLK), *h2;
	struct nvmefs_client_stats st0, st1;
	uint32_t seed = 100;
	int fd = mopen("sizes", O_RDWR | O_CREAT | O_TRUNC);
	char step[160];

	reg(c, fd);
	for (size_t si = 0; si < sizeof(sizes) / sizeof(sizes[0]); si++)
		for (size_t oi = 0; oi < sizeof(offs) / sizeof(offs[0]); oi++)
			for (int w = SHARED; w <= HEAP; w++) {
				size_t len = sizes[si], lo, hi;
				uint64_t off = offs[oi];
				uint8_t *s = place(w, src, heap, off),
					*d = place(w, dst, heap, off);
				ssize_t got;

				seed++;
				snprintf(step, sizeof(step), "%zu bytes at %" PRIu64 ", %s buffer",
					 len, off, where_name[w]);
				cur_step = step;
				fill(s, len, seed, off);
				got = nvmefs_pwrite(c, fd, s, len, off);
				CHECK_EQ(got, len, "write %s: %s", step, nvmefs_client_error(c));
				if (got != (ssize_t)len)
					continue;
				memcpy(model + off, s, len);
				if (len && off + len > msize)
					msize = off + len;
				CHECK_EQ(fsize(fd), msize, "size through the mount after %s", step);
				lo = off > BLK ? off - BLK : 0;
				lo = lo < msize ? lo : msize;
				hi = off + len + BLK < msize ? off + len + BLK : msize;
				hi = hi > lo ? hi : lo;
				CHECK_EQ(kread(fd, k, hi - lo, (off_t)lo), hi - lo,
					 "pread(2) around %s", step);
				CHECK_EQ(diff_at(k, model + lo, hi - lo), -1,
					 "pread(2) around %s (offset from %zu)", step, lo);
				memset(d, 0xee, len);
				got = nvmefs_pread(c, fd, d, len, off);
				CHECK_EQ(got, len, "read back %s", step);
				CHECK_EQ(mismatch(d, len, seed, off), -1, "bytes read back, %s",
					 step);
			}

	cur_step = "70 MiB from the heap";
	h2 = xmalloc(big);
	fill(h2, big, 1, 0);
	nvmefs_client_stats(c, &st0);
	CHECK_EQ(nvmefs_pwrite(c, fd, h2, big, 0), big, "70 MiB from the heap");
	nvmefs_client_stats(c, &st1);
	CHECK(st1.bounced > st0.bounced, "it was bounced");
	CHECK_EQ(st1.bounce_bytes - st0.bounce_bytes, big, "bounce bytes of the write");
	memset(h2, 0, big);
	CHECK_EQ(nvmefs_pread(c, fd, h2, big, 0), big, "70 MiB into the heap");
	CHECK_EQ(mismatch(h2, big, 1, 0), -1, "their bytes");
	CHECK_EQ(fsize(fd), big, "the size through the mount");
	free(h2);
	cur_step = "4 MiB shared";
	{
		uint8_t *s4 = balloc(c, 4 * MIB);

		fill(s4, 4 * MIB, 2, 0);
		CHECK_EQ(nvmefs_pwrite(c, fd, s4, 4 * MIB, 8 * MIB), 4 * MIB, "4 MiB shared");
		CHECK_EQ(kread(fd, k, 4 * MIB, 8 * MIB), 4 * MIB, "through the mount");
		CHECK_EQ(mismatch(k, 4 * MIB, 2, 0), -1, "4 MiB through the mount");
		memset(s4, 0, 4 * MIB);
		CHECK_EQ(nvmefs_pread(c, fd, s4, 4 * MIB, 8 * MIB), 4 * MIB, "read 4 MiB shared");
		CHECK_EQ(mismatch(s4, 4 * MIB, 2, 0), -1, "their bytes");
	}
	nvmefs_detach(c);
	close(fd);
	free(model);
	free(k);
	free(heap);
}

/*
 * Reads at and past the end of the file are short (0 beyond it), in any
 * buffer, synchronous or not; a hole reads as zeros.
 */
static void test_eof(void)
{
	struct nvmefs_client *c = attach();
	uint8_t *buf, *heap = xmalloc(20000);
	struct nvmefs_cqe cqe;
	int fd, rw;

	make_file("eof", 10000, 8);
	fd = mopen("eof", O_RDONLY);
	reg(c, fd);
	buf = balloc(c, MIB);
	CHECK_EQ(nvmefs_pread(c, fd, buf, MIB, 0), 10000, "1 MiB from 0 of a 10000-byte file");
	CHECK_EQ(mismatch(buf, 10000, 8, 0), -1, "its bytes");
	CHECK_EQ(nvmefs_pread(c, fd, buf, 2 * BLK, 2 * BLK), 10000 - 2 * BLK, "across the end");
	CHECK_EQ(mismatch(buf, 10000 - 2 * BLK, 8, 2 * BLK), -1, "its bytes");
	CHECK_EQ(nvmefs_pread(c, fd, buf + 7, 2 * BLK, 2 * BLK - 1), 10000 - 2 * BLK + 1,
		 "across the end, misaligned");
	CHECK_EQ(mismatch(buf + 7, 10000 - 2 * BLK + 1, 8, 2 * BLK - 1), -1, "its bytes");
	CHECK_EQ(nvmefs_pread(c, fd, buf, BLK, 10000), 0, "at the end");
	CHECK_EQ(nvmefs_pread(c, fd, buf, BLK, 1ull << 30), 0, "far past the end");
	CHECK_EQ(nvmefs_pread(c, fd, heap, 20000, 5), 9995, "into the heap, across the end");
	CHECK_EQ(mismatch(heap, 9995, 8, 5), -1, "its bytes");
	{
		struct nvmefs_io io = {.fd = fd,
				       .op = NVMEFS_OP_READ,
				       .buf = buf,
				       .len = 2 * BLK,
				       .off = 2 * BLK,
				       .user_data = 1};

		CHECK_EQ(nvmefs_submit(c, &io, 1), 1, "submit across the end");
		reap(c, &cqe, 1);
		CHECK_EQ(cqe.res, 10000 - 2 * BLK, "the completion is short");
	}
	/* A hole: extended through the mount. */
	rw = mopen("eof", O_RDWR);
	if (ftruncate(rw, 3 * MIB))
		die("ftruncate: %s", strerror(errno));
	memset(buf, 0xff, MIB);
	CHECK_EQ(nvmefs_pread(c, fd, buf, MIB, MIB), MIB, "a hole of the file");
	CHECK(all_zero(buf, MIB), "a hole reads as zeros");
	memset(buf, 0xff, 2 * BLK);
	CHECK_EQ(nvmefs_pread(c, fd, buf, 2 * BLK, 2 * BLK), 2 * BLK, "data then hole");
	CHECK(mismatch(buf, 10000 - 2 * BLK, 8, 2 * BLK) == -1 &&
		      all_zero(buf + 10000 - 2 * BLK, 3 * BLK - 10000),
	      "data then zeros");
	nvmefs_detach(c);
	close(fd);
	close(rw);
	free(heap);
}

/* nvmefs_fsync: 0 on a registered descriptor (the daemon counts it),
 * -EBADF on one that is not. */
static void test_fsync(void)
{
	struct nvmefs_client *c = attach();
	long long f0 = nat("fsyncs");
	uint8_t *buf = balloc(c, MIB);
	int fd = mopen("fsync", O_RDWR | O_CREAT | O_TRUNC), other = mopen("fsync", O_RDWR);

	reg(c, fd);
	fill(buf, MIB, 9, 0);
	CHECK_EQ(nvmefs_pwrite(c, fd, buf, MIB, 0), MIB, "write");
	CHECK_EQ(nvmefs_fsync(c, fd), 0, "fsync: %s", nvmefs_client_error(c));
	CHECK_EQ(nvmefs_fsync(c, fd), 0, "fsync again");
	CHECK_EQ(nat("fsyncs") - f0, 2, "the daemon counted 2 fsyncs");
	CHECK_EQ(nvmefs_fsync(c, other), -EBADF, "fsync of an unregistered descriptor");
	nvmefs_detach(c);
	close(fd);
	close(other);
}

/*
 * nvmefs_client_stats: requests, bytes, bounced requests and bytes (the
 * library's copies) and shared memory, exactly, for shared and heap
 * buffers, reads and writes.
 */
static void test_client_stats(void)
{
	struct nvmefs_client *c = attach();
	struct nvmefs_client_stats s0, s1;
	uint8_t *buf = balloc(c, 64 * KIB), heap[1000];
	int fd = mopen("cstats", O_RDWR | O_CREAT | O_TRUNC);

	nvmefs_client_stats(c, &s0);
	CHECK(!s0.requests && !s0.bytes && !s0.bounced && !s0.bounce_bytes,
	      "a new client has done nothing");
	CHECK_EQ(s0.shared_bytes, 64 * KIB, "its buffer");
	reg(c, fd);
	fill(buf, 64 * KIB, 10, 0);
	CHECK_EQ(nvmefs_pwrite(c, fd, buf, 64 * KIB, 0), 64 * KIB, "shared write");
	nvmefs_client_stats(c, &s1);
	CHECK_EQ(s1.requests, 1, "requests after a shared write");
	CHECK_EQ(s1.bytes, 64 * KIB, "bytes after a shared write");
	CHECK_EQ(s1.bounced, 0, "a shared buffer is not bounced");
	CHECK_EQ(s1.bounce_bytes, 0, "nothing copied for it");
	fill(heap, sizeof(heap), 11, 0);
	CHECK_EQ(nvmefs_pwrite(c, fd, heap, sizeof(heap), 5), sizeof(heap), "heap write");
	CHECK_EQ(nvmefs_pread(c, fd, heap, sizeof(heap), 70000), 0, "heap read past the end");
	CHECK_EQ(nvmefs_pread(c, fd, heap, sizeof(heap), 100), sizeof(heap), "heap read");
	CHECK_EQ(mismatch(heap, 905, 11, 95), -1, "its bytes");
	nvmefs_client_stats(c, &s1);
	CHECK_EQ(s1.requests, 4, "requests");
	CHECK_EQ(s1.bytes, 64 * KIB + 2 * sizeof(heap), "bytes");
	CHECK_EQ(s1.bounced, 3, "3 requests from the heap bounced");
	CHECK_EQ(s1.bounce_bytes, 2 * sizeof(heap), "bounced bytes: the write's and the read's");
	CHECK(s1.shared_bytes > 64 * KIB, "bounce memory is counted as shared");
	nvmefs_detach(c);
	close(fd);
}

/*
 * The daemon's "native" counters in .nvmefs/stats: requests and bytes
 * each way exactly; zero copied bytes for aligned I/O (also a heap
 * buffer: the library's bounce region is aligned), copies counted for
 * unaligned I/O; a write and a read each invalidate the kernel's cache.
 */
static void test_daemon_stats(void)
{
	static const char *keys[] = {
		"reads",	   "writes",	   "read_bytes",    "write_bytes",
		"copied_requests", "copied_bytes", "invalidations", "direct_completions"};
	enum { R, W, RB, WB, CR, CB, INV, DC, NK };
	struct nvmefs_client *c = attach();
	uint8_t *buf = balloc(c, 4 * MIB), *heap = xmalloc(MIB);
	int fd = mopen("dstats", O_RDWR | O_CREAT | O_TRUNC);
	long long v0[NK], v1[NK];

#define SNAP(v)                                                                                    \
	for (int i = 0; i < NK; i++)                                                               \
	(v)[i] = nat(keys[i])
	reg(c, fd);
	SNAP(v0);
	CHECK(v0[R] >= 0 && v0[CB] >= 0, "the native object is in .nvmefs/stats");
	fill(buf, 4 * MIB, 12, 0);
	CHECK_EQ(nvmefs_pwrite(c, fd, buf, 4 * MIB, 0), 4 * MIB, "aligned write");
	CHECK_EQ(nvmefs_pread(c, fd, buf, 4 * MIB, 0), 4 * MIB, "aligned read");
	CHECK_EQ(nvmefs_pwrite(c, fd, heap, MIB, 4 * MIB), MIB, "aligned write from the heap");
	SNAP(v1);
	CHECK_EQ(v1[W] - v0[W], 2, "writes counted");
	CHECK_EQ(v1[R] - v0[R], 1, "reads counted");
	CHECK_EQ(v1[WB] - v0[WB], 5 * MIB, "bytes written");
	CHECK_EQ(v1[RB] - v0[RB], 4 * MIB, "bytes read");
	CHECK_EQ(v1[CB] - v0[CB], 0, "zero copied bytes for aligned native I/O");
	CHECK_EQ(v1[CR] - v0[CR], 0, "zero copied requests for aligned native I/O");
	CHECK(v1[INV] - v0[INV] >= 3, "each request invalidated the kernel's cache (%lld)",
	      v1[INV] - v0[INV]);
	/* The read's completion left from the engine's thread; the writes',
	 * which drop the kernel's pages first, through the client's thread. */
	CHECK_EQ(v1[DC] - v0[DC], 1, "the read completed from the engine's thread");

	SNAP(v0);
	CHECK_EQ(nvmefs_pwrite(c, fd, buf + 7, 2 * BLK + 1, 7), 2 * BLK + 1, "unaligned write");
	SNAP(v1);
	CHECK(v1[CB] - v0[CB] > 0, "an unaligned write is copied and counted");
	CHECK(v1[CR] - v0[CR] >= 1, "and its copied requests");
	SNAP(v0);
	CHECK_EQ(nvmefs_pread(c, fd, buf + 5, 3 * BLK, 4093), 3 * BLK, "unaligned read");
	SNAP(v1);
	CHECK(v1[CB] - v0[CB] > 0, "an unaligned read is copied and counted");
	CHECK_EQ(v1[RB] - v0[RB], 3 * BLK, "its bytes");
#undef SNAP
	nvmefs_detach(c);
	close(fd);
	free(heap);
}

/*
 * Detach with requests in flight waits for them (their bytes are in the
 * file after). A file registered while open and then unlinked through the
 * mount stays usable, as the open file it is; once the client detached
 * and the descriptor is closed its space is free again (the door held it
 * open, and let go).
 */
static void test_detach_inflight(void)
{
	struct nvmefs_client *c = attach();
	struct nvmefs_io ios[64];
	uint8_t *buf = balloc(c, 64 * 64 * KIB), *k = xmalloc(64 * 64 * KIB);
	int fd = mopen("detach", O_RDWR | O_CREAT | O_TRUNC), gone, ret;
	unsigned long long free0;

	reg(c, fd);
	fill(buf, 64 * 64 * KIB, 13, 0);
	for (unsigned i = 0; i < 64; i++)
		ios[i] = (struct nvmefs_io){.fd = fd,
					    .op = NVMEFS_OP_WRITE,
					    .buf = buf + i * 64 * KIB,
					    .len = 64 * KIB,
					    .off = i * 64 * KIB};
	CHECK_EQ(nvmefs_submit(c, ios, 64), 64, "64 writes");
	nvmefs_detach(c);
	CHECK_EQ(kread(fd, k, 64 * 64 * KIB, 0), 64 * 64 * KIB, "the file after detach");
	CHECK_EQ(mismatch(k, 64 * 64 * KIB, 13, 0), -1,
		 "every write was done before detach returned");
	close(fd);

	c = attach();
	buf = balloc(c, MIB);
	free0 = free_bytes();
	gone = mopen("unlinked", O_RDWR | O_CREAT | O_TRUNC);
	ret = nvmefs_reg_fd(c, gone);
	CHECK_EQ(ret, 0, "register a new file: %s", nvmefs_client_error(c));
	if (unlink(P("unlinked")))
		die("unlink: %s", strerror(errno));
	fill(buf, MIB, 14, 0);
	CHECK_EQ(nvmefs_pwrite(c, gone, buf, MIB, 0), MIB, "write to an unlinked open file");
	CHECK_EQ(kread(gone, k, MIB, 0), MIB, "read it through the mount");
	CHECK_EQ(mismatch(k, MIB, 14, 0), -1, "its bytes");
	nvmefs_detach(c);
	close(gone);
	CHECK(space_back(free0), "the unlinked file's space is free once closed (%llu -> %llu)",
	      free0, free_bytes());
	free(k);
}

/* ==== coherence ==== */

/* A shared mapping of fd's first len bytes, or NULL when the mount does
 * not allow one (direct mode before Linux 6.6). */
static uint8_t *map(int fd, size_t len, int prot)
{
	void *p = mmap(NULL, len, prot, MAP_SHARED, fd, 0);

	if (p == MAP_FAILED) {
		if (maps_shared)
			die("mmap: %s", strerror(errno));
		return NULL;
	}
	return p;
}

/*
 * A native write completed: a reader through the mount sees the bytes,
 * the size and the mtime at once, though it had the pages (and a shared
 * mapping, and the attributes) cached before. The mapping is looked at
 * first: a read or stat would revalidate the attributes, and a new mtime
 * alone drops the pages.
 */
static void test_coh_native_write(void)
{
	struct nvmefs_client *c = attach();
	size_t len = 64 * KIB;
	uint8_t *model = xmalloc(2 * len), *k = xmalloc(2 * len), *buf = balloc(c, MIB), *m;
	uint8_t heap[20000];
	struct timespec old[2] = {{Y2001, 0}, {Y2001, 0}};
	struct stat st;
	time_t t0;
	int fd, rd;

	make_file("coh-w", len, 20);
	fill(model, len, 20, 0);
	fd = mopen("coh-w", O_RDWR);
	rd = mopen("coh-w", O_RDONLY);
	if (futimens(fd, old))
		die("futimens: %s", strerror(errno));
	CHECK_EQ(kread(rd, k, len, 0), len, "read through the mount (pages cached)");
	m = map(rd, len, PROT_READ);
	if (m)
		CHECK_EQ(diff_at(m, model, len), -1, "the mapping before");
	CHECK(!fstat(rd, &st) && st.st_mtime == Y2001, "mtime before: %ld", (long)st.st_mtime);
	t0 = time(NULL);
	reg(c, fd);

	fill(buf, 2 * BLK, 21, BLK);
	CHECK_EQ(nvmefs_pwrite(c, fd, buf, 2 * BLK, BLK), 2 * BLK, "aligned native write");
	memcpy(model + BLK, buf, 2 * BLK);
	if (m)
		CHECK_EQ(diff_at(m, model, len), -1, "a mapping made before sees the native write");
	CHECK(!fstat(rd, &st) && st.st_mtime >= t0 - 1, "mtime after a native write: %ld (was %d)",
	      (long)st.st_mtime, Y2001);
	CHECK_EQ(kread(rd, k, len, 0), len, "read through the mount");
	CHECK_EQ(diff_at(k, model, len), -1,
		 "cached pages dropped: the mount reads the native write");

	/* Again with the pages cached and the size growing: unaligned, heap. */
	if (futimens(fd, old))
		die("futimens: %s", strerror(errno));
	CHECK_EQ(kread(rd, k, len, 0), len, "read through the mount (pages cached again)");
	CHECK(!fstat(rd, &st) && st.st_mtime == Y2001 && st.st_size == (off_t)len,
	      "attributes cached: mtime %ld size %lld", (long)st.st_mtime, (long long)st.st_size);
	fill(heap, sizeof(heap), 22, 60000);
	CHECK_EQ(nvmefs_pwrite(c, fd, heap, sizeof(heap), 60000), sizeof(heap),
		 "unaligned native write past the end");
	memcpy(model + 60000, heap, sizeof(heap));
	if (m)
		CHECK_EQ(diff_at(m + 60000, model + 60000, len - 60000), -1,
			 "the mapping sees the extending write");
	CHECK(!fstat(rd, &st) && st.st_size == 80000, "fstat size after it: %lld",
	      (long long)st.st_size);
	CHECK(st.st_mtime >= t0 - 1, "fstat mtime after it: %ld", (long)st.st_mtime);
	CHECK(!stat(P("coh-w"), &st) && st.st_size == 80000, "stat size after it: %lld",
	      (long long)st.st_size);
	CHECK_EQ(kread(rd, k, 2 * len, 0), 80000, "pread(2) to the end");
	CHECK_EQ(diff_at(k, model, 80000), -1, "the mount reads both writes");
	{
		int fresh = mopen("coh-w", O_RDONLY);

		CHECK_EQ(kread(fresh, k, 2 * len, 0), 80000, "a new open reads to the end");
		CHECK_EQ(diff_at(k, model, 80000), -1, "a new open reads both writes");
		close(fresh);
	}
	if (m)
		munmap(m, len);
	nvmefs_detach(c);
	close(fd);
	close(rd);
	free(model);
	free(k);
}

/*
 * A native write by a user other than root takes setuid, and setgid when
 * the group may execute, as a write through the mount does; and the mode the
 * kernel caches (what `stat -c %A`, statx with STATX_MODE only, and exec
 * read) shows it at once. The writer is uid 65534 in a forked child.
 */
static void test_coh_kill_privs(void)
{
	struct statx stx;
	pid_t pid;
	int status;

	make_file("coh-suid", 2 * BLK, 30);
	if (chown(P("coh-suid"), 65534, 65534) || chmod(P("coh-suid"), 06754))
		die("chown/chmod: %s", strerror(errno));
	CHECK(!statx(AT_FDCWD, P("coh-suid"), 0, STATX_MODE, &stx) &&
		      (stx.stx_mode & 07777) == 06754,
	      "mode before: %o", stx.stx_mode & 07777);
	fflush(NULL);
	pid = fork();
	if (pid < 0)
		die("fork: %s", strerror(errno));
	if (pid == 0) {
		struct nvmefs_client *c;
		void *buf;
		int fd;

		/* test_native.sh opens the mount's parents to 65534. */
		if (setgroups(0, NULL) || setresgid(65534, 65534, 65534) ||
		    setresuid(65534, 65534, 65534))
			_exit(2);
		fd = open(P("coh-suid"), O_WRONLY);
		if (fd < 0) {
			fprintf(stderr, "open as uid 65534: %s\n", strerror(errno));
			_exit(3);
		}
		if (nvmefs_attach(mnt, &c)) {
			fprintf(stderr, "attach as uid 65534: %s\n", nvmefs_client_error(NULL));
			_exit(3);
		}
		if (nvmefs_buf_alloc(c, BLK, -1, &buf) || nvmefs_reg_fd(c, fd))
			_exit(4);
		memset(buf, 'n', BLK);
		_exit(nvmefs_pwrite(c, fd, buf, BLK, 0) == BLK ? 0 : 5);
	}
	CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && !WEXITSTATUS(status),
	      "the native writer as uid 65534: status %#x", status);
	CHECK(!statx(AT_FDCWD, P("coh-suid"), 0, STATX_MODE, &stx) &&
		      (stx.stx_mode & 07777) == 0754,
	      "mode after a native write by uid 65534: %o, want 754", stx.stx_mode & 07777);
}

/*
 * What was written through the mount before a native read is what it
 * reads: an overwrite, an extension with a hole, a truncate; and a native
 * write past a truncated end leaves zeros between, through the mount.
 */
static void test_coh_mount_write(void)
{
	struct nvmefs_client *c = attach();
	uint8_t *model = calloc(128 * KIB, 1), *buf = balloc(c, 128 * KIB), *k;
	uint8_t w1[5000], w2[10000];
	int fd, fm;

	make_file("coh-r", 64 * KIB, 30);
	fill(model, 64 * KIB, 30, 0);
	fd = mopen("coh-r", O_RDWR);
	fm = mopen("coh-r", O_RDWR);
	reg(c, fd);
	CHECK_EQ(nvmefs_pread(c, fd, buf, 128 * KIB, 0), 64 * KIB, "native read before");
	CHECK_EQ(kread(fm, buf, 64 * KIB, 0), 64 * KIB, "read through the mount (cached)");
	fill(w1, sizeof(w1), 31, 3000);
	kwrite(fm, w1, sizeof(w1), 3000);
	memcpy(model + 3000, w1, sizeof(w1));
	fill(w2, sizeof(w2), 32, 70000);
	kwrite(fm, w2, sizeof(w2), 70000);
	memcpy(model + 70000, w2, sizeof(w2));
	memset(buf, 0xee, 128 * KIB);
	CHECK_EQ(nvmefs_pread(c, fd, buf, 128 * KIB, 0), 80000,
		 "a native read sees the size written through the mount");
	CHECK_EQ(diff_at(buf, model, 80000), -1,
		 "a native read sees the bytes (and hole) written through the mount");
	if (ftruncate(fm, 50000))
		die("ftruncate: %s", strerror(errno));
	CHECK_EQ(nvmefs_pread(c, fd, buf, 128 * KIB, 0), 50000,
		 "a native read stops at a truncate made through the mount");
	CHECK_EQ(nvmefs_pwrite(c, fd, "0123456789", 10, 100000), 10, "native write past the end");
	CHECK_EQ(fsize(fm), 100010, "the mount sees the size");
	k = xmalloc(100010);
	CHECK_EQ(kread(fm, k, 100010, 0), 100010, "read to the end through the mount");
	CHECK_EQ(diff_at(k, model, 50000), -1, "the bytes below the truncate");
	CHECK(all_zero(k + 50000, 50000), "zeros between the truncate and the write");
	CHECK(!memcmp(k + 100000, "0123456789", 10), "the native write");
	nvmefs_detach(c);
	close(fd);
	close(fm);
	free(k);
	free(model);
}

/*
 * A native read keeps atime as a READ through the mount does (relatime:
 * an atime older than the mtime moves), and the mount shows it at once
 * though it had the attributes cached; a native write leaves atime alone.
 */
static void test_coh_atime(void)
{
	struct nvmefs_client *c = attach();
	uint8_t *buf = balloc(c, 64 * KIB);
	struct timespec times[2] = {{Y2001, 0}, {UTIME_OMIT, 0}};
	time_t t0 = time(NULL);
	struct stat st;
	int fd;

	make_file("coh-atime", 64 * KIB, 33);
	fd = mopen("coh-atime", O_RDWR);
	reg(c, fd);
	if (futimens(fd, times))
		die("futimens: %s", strerror(errno));
	CHECK(!fstat(fd, &st) && st.st_atime == Y2001, "atime before: %ld", (long)st.st_atime);
	CHECK_EQ(nvmefs_pwrite(c, fd, buf, 4 * KIB, 0), 4 * KIB, "native write");
	CHECK(!fstat(fd, &st) && st.st_atime == Y2001, "a native write leaves atime: %ld",
	      (long)st.st_atime);
	CHECK_EQ(nvmefs_pread(c, fd, buf, 64 * KIB, 0), 64 * KIB, "native read");
	CHECK(!fstat(fd, &st) && st.st_atime >= t0 - 1, "a native read moves atime: %ld (was %d)",
	      (long)st.st_atime, Y2001);
	nvmefs_detach(c);
	close(fd);
}

/*
 * Bytes written into a shared mapping and not synced (dirty pages in the
 * kernel) are what a native read of the range gets: the read has the
 * kernel write them back first.
 */
static void test_coh_mmap_dirty(void)
{
	struct nvmefs_client *c = attach();
	uint8_t *model = xmalloc(64 * KIB), *buf = balloc(c, 64 * KIB), *m;
	int fm, ro;

	make_file("coh-m", 64 * KIB, 40);
	fill(model, 64 * KIB, 40, 0);
	fm = mopen("coh-m", O_RDWR);
	m = map(fm, 64 * KIB, PROT_READ | PROT_WRITE);
	if (!m) {
		printf("     (no shared mappings on this mount: dirty pages not tried)\n");
		goto out;
	}
	ro = mopen("coh-m", O_RDONLY);
	reg(c, ro);
	fill(m + 2 * BLK, BLK, 41, 2 * BLK);
	fill(m + 20000, 333, 42, 20000);
	memcpy(model + 2 * BLK, m + 2 * BLK, BLK);
	memcpy(model + 20000, m + 20000, 333);
	CHECK_EQ(nvmefs_pread(c, ro, buf, 64 * KIB, 0), 64 * KIB, "native read");
	CHECK_EQ(diff_at(buf, model, 64 * KIB), -1,
		 "a native read sees dirty pages of a shared mapping");
	close(ro);
	munmap(m, 64 * KIB);
out:
	nvmefs_detach(c);
	close(fm);
	free(model);
}

/* ==== writeback ==== */

/*
 * With -o writeback the kernel owns sizes and times: a write-enabled
 * descriptor is refused (-EOPNOTSUPP, a message saying why), a read-only
 * one registers, and a native read sees writes the kernel still holds
 * dirty: an overwrite and an extension.
 */
static void test_writeback(void)
{
	struct nvmefs_client *c = attach();
	uint8_t *model = calloc(128 * KIB, 1), *buf = balloc(c, 128 * KIB), w[5000];
	int rw, wo, ro, fm;

	make_file("wb", 64 * KIB, 50);
	fill(model, 64 * KIB, 50, 0);
	rw = mopen("wb", O_RDWR);
	wo = mopen("wb", O_WRONLY);
	ro = mopen("wb", O_RDONLY);
	fm = mopen("wb", O_RDWR);
	CHECK_EQ(nvmefs_reg_fd(c, rw), -EOPNOTSUPP, "O_RDWR on a writeback mount");
	CHECK(strstr(nvmefs_client_error(c), "writeback"), "the refusal names writeback: %s",
	      nvmefs_client_error(c));
	CHECK_EQ(nvmefs_reg_fd(c, wo), -EOPNOTSUPP, "O_WRONLY on a writeback mount");
	CHECK_EQ(nvmefs_reg_fd(c, ro), 0, "O_RDONLY on a writeback mount: %s",
		 nvmefs_client_error(c));
	CHECK_EQ(nvmefs_pread(c, ro, buf, 128 * KIB, 0), 64 * KIB, "native read");
	CHECK_EQ(diff_at(buf, model, 64 * KIB), -1, "its bytes");
	fill(w, sizeof(w), 51, 3000);
	kwrite(fm, w, sizeof(w), 3000); /* dirty in the page cache */
	memcpy(model + 3000, w, sizeof(w));
	CHECK_EQ(nvmefs_pread(c, ro, buf, 128 * KIB, 0), 64 * KIB, "native read");
	CHECK_EQ(diff_at(buf, model, 64 * KIB), -1,
		 "a native read sees an overwrite the kernel holds dirty");
	fill(w, sizeof(w), 52, 70000);
	kwrite(fm, w, sizeof(w), 70000);
	memcpy(model + 70000, w, sizeof(w));
	CHECK_EQ(nvmefs_pread(c, ro, buf, 128 * KIB, 0), 75000,
		 "a native read sees the size of an extension the kernel holds dirty");
	CHECK_EQ(diff_at(buf, model, 75000), -1, "and its bytes");
	nvmefs_detach(c);
	close(rw);
	close(wo);
	close(ro);
	close(fm);
	free(model);
}

/* ==== hostile ==== */

/* A raw connection to the door named in .nvmefs/config. */
static int raw_connect(void)
{
	struct sockaddr_un a = {.sun_family = AF_UNIX};
	char name[128];
	socklen_t alen;
	int s;

	if (!config("native_socket", name, sizeof(name)) || name[0] != '@' ||
	    strlen(name) >= sizeof(a.sun_path))
		die("no native_socket in %s", P(".nvmefs/config"));
	memcpy(a.sun_path + 1, name + 1, strlen(name + 1));
	alen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + strlen(name));
	s = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (s < 0 || connect(s, (struct sockaddr *)&a, alen))
		die("connect %s: %s", name, strerror(errno));
	return s;
}

static int raw_send(int s, const void *msg, size_t len, const int *fds, int nfds, int flags)
{
	union {
		struct cmsghdr h;
		char space[CMSG_SPACE(8 * sizeof(int))];
	} cm;
	struct iovec iov = {(void *)msg, len};
	struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};

	if (nfds) {
		memset(&cm, 0, sizeof(cm));
		mh.msg_control = &cm;
		mh.msg_controllen = CMSG_SPACE(nfds * sizeof(int));
		cm.h.cmsg_level = SOL_SOCKET;
		cm.h.cmsg_type = SCM_RIGHTS;
		cm.h.cmsg_len = CMSG_LEN(nfds * sizeof(int));
		memcpy(CMSG_DATA(&cm.h), fds, nfds * sizeof(int));
	}
	return sendmsg(s, &mh, MSG_NOSIGNAL | flags) < 0 ? -errno : 0;
}

/* One message, within 10 s: its length, 0 when the daemon closed, -errno. */
static ssize_t raw_recv(int s, void *buf, size_t cap)
{
	struct pollfd p = {.fd = s, .events = POLLIN};
	ssize_t n;

	if (poll(&p, 1, 10000) != 1)
		return -ETIMEDOUT;
	n = recv(s, buf, cap, 0);
	return n < 0 ? -errno : n;
}

static struct nvmefs_wire_hdr hdr(uint16_t type, uint32_t count, int64_t arg)
{
	return (struct nvmefs_wire_hdr){.magic = NVMEFS_WIRE_MAGIC,
					.version = NVMEFS_WIRE_VERSION,
					.type = type,
					.count = count,
					.arg = arg};
}

#define NO_REPLY INT64_MIN

/* Send msg (with fds) and return its REPLY's arg (arg2 into *arg2), or
 * NO_REPLY when none came. */
static int64_t raw_call(int s, const void *msg, size_t len, const int *fds, int nfds, int64_t *arg2)
{
	uint8_t in[NVMEFS_WIRE_MAX_MSG];
	struct nvmefs_wire_msg m;
	ssize_t n;

	if (raw_send(s, msg, len, fds, nfds, 0))
		return NO_REPLY;
	n = raw_recv(s, in, sizeof(in));
	if (n <= 0 || nvmefs_wire_parse(in, (size_t)n, 0, &m) || m.hdr.type != NVMEFS_WIRE_REPLY)
		return NO_REPLY;
	if (arg2)
		*arg2 = m.hdr.arg2;
	return m.hdr.arg;
}

/* A header-only message of type with arg, and fd attached when >= 0. */
static int64_t raw_ctl(int s, uint16_t type, int64_t arg, int fd)
{
	struct nvmefs_wire_hdr h = hdr(type, 0, arg);

	return raw_call(s, &h, sizeof(h), &fd, fd >= 0, NULL);
}

/* Submit n entries; their results into res[] by user_data (0..n-1). */
static bool raw_submit(int s, const struct nvmefs_wire_sqe *e, unsigned n, int64_t *res)
{
	uint8_t msg[NVMEFS_WIRE_MAX_MSG];
	struct nvmefs_wire_hdr h = hdr(NVMEFS_WIRE_SUBMIT, n, 0);
	unsigned got = 0;

	memcpy(msg, &h, sizeof(h));
	memcpy(msg + sizeof(h), e, n * sizeof(*e));
	if (raw_send(s, msg, sizeof(h) + n * sizeof(*e), NULL, 0, 0))
		return false;
	while (got < n) {
		struct nvmefs_wire_msg m;
		ssize_t len = raw_recv(s, msg, sizeof(msg));

		if (len <= 0 || nvmefs_wire_parse(msg, (size_t)len, 0, &m) ||
		    m.hdr.type != NVMEFS_WIRE_COMPLETE)
			return false;
		for (uint32_t i = 0; i < m.hdr.count; i++) {
			struct nvmefs_wire_cqe c;

			memcpy(&c, (const uint8_t *)m.entries + i * sizeof(c), sizeof(c));
			if (c.user_data < n)
				res[c.user_data] = c.res;
			got++;
		}
	}
	return true;
}

/* HELLO's answer into *hello; false when none came. */
static bool raw_hello(int s, struct nvmefs_wire_hello *hello)
{
	struct nvmefs_wire_hdr h = hdr(NVMEFS_WIRE_HELLO, 0, 0);
	uint8_t in[256];
	struct nvmefs_wire_msg m;
	ssize_t n;

	if (raw_send(s, &h, sizeof(h), NULL, 0, 0))
		return false;
	n = raw_recv(s, in, sizeof(in));
	if (n != (ssize_t)(sizeof(h) + sizeof(*hello)) || nvmefs_wire_parse(in, (size_t)n, 0, &m) ||
	    m.hdr.arg)
		return false;
	memcpy(hello, m.entries, sizeof(*hello));
	return true;
}

/* The connection still answers: HELLO gives the block size. */
static bool raw_alive(int s)
{
	struct nvmefs_wire_hello hello;

	return raw_hello(s, &hello) && hello.block == BLK;
}

/* A client of the library writes and reads 1 MiB. */
static bool others_served(void)
{
	struct nvmefs_client *c = NULL;
	void *buf = NULL;
	bool ok = false;
	int fd;

	if (nvmefs_attach(mnt, &c))
		return false;
	fd = open(P("served"), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd >= 0 && !nvmefs_reg_fd(c, fd) && !nvmefs_buf_alloc(c, MIB, -1, &buf)) {
		fill(buf, MIB, 60, 0);
		ok = nvmefs_pwrite(c, fd, buf, MIB, 0) == MIB;
		memset(buf, 0, MIB);
		ok = ok && nvmefs_pread(c, fd, buf, MIB, 0) == MIB && mismatch(buf, MIB, 60, 0) < 0;
	}
	nvmefs_detach(c);
	if (buf)
		nvmefs_buf_free(NULL, buf);
	if (fd >= 0)
		close(fd);
	return ok;
}

/* A sealed memfd of size bytes, mapped into *map when map is not NULL. */
static int memfd(size_t size, unsigned seals, uint8_t **map)
{
	int fd = memfd_create("hostile", MFD_CLOEXEC | MFD_ALLOW_SEALING);

	if (fd < 0 || ftruncate(fd, (off_t)size) || (seals && fcntl(fd, F_ADD_SEALS, seals)))
		die("memfd: %s", strerror(errno));
	if (map) {
		*map = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
		if (*map == MAP_FAILED)
			die("mmap memfd: %s", strerror(errno));
	}
	return fd;
}

/*
 * Malformed messages, each answered with the error wire.h gives, the
 * connection still answering after: wrong magic, truncated, bad version,
 * types the daemon never receives, flags, wrong, huge and oversized
 * counts, bodies where none belong, descriptors where none belong (SUBMIT,
 * HELLO), two and five descriptors, REG_FD and REG_MEM without one.
 */
static void test_hostile_messages(void)
{
	struct {
		struct nvmefs_wire_hdr h;
		struct nvmefs_wire_sqe e[NVMEFS_WIRE_MAX_BATCH + 2];
	} m;
	struct held h0 = settled();
	long long refused0 = nat("refused");
	int s = raw_connect(), refusals = 0, fds[5], fd;
	struct nvmefs_wire_hdr h;

	CHECK(raw_alive(s), "HELLO answered");
	for (int i = 0; i < 5; i++)
		fds[i] = mopen("hostile", O_RDWR | O_CREAT);
	fd = fds[0];
	memset(&m, 0, sizeof(m));
#define REFUSED(want, what, msg, len, fdv, nfd)                                                    \
	do {                                                                                       \
		cur_step = what;                                                                   \
		CHECK_EQ(raw_call(s, msg, len, fdv, nfd, NULL), want, "%s", what);                 \
		CHECK(raw_alive(s), "the connection answers after %s", what);                      \
		refusals++;                                                                        \
	} while (0)
	h = hdr(NVMEFS_WIRE_HELLO, 0, 0);
	h.magic ^= 1;
	REFUSED(-EBADMSG, "wrong magic", &h, sizeof(h), NULL, 0);
	h = hdr(NVMEFS_WIRE_HELLO, 0, 0);
	REFUSED(-EBADMSG, "a truncated header", &h, 10, NULL, 0);
	REFUSED(-EBADMSG, "1 byte", &h, 1, NULL, 0);
	h.version = NVMEFS_WIRE_VERSION + 1;
	REFUSED(-EPROTO, "bad version", &h, sizeof(h), NULL, 0);
	h = hdr(NVMEFS_WIRE_REPLY, 0, 0);
	REFUSED(-EOPNOTSUPP, "a REPLY from a client", &h, sizeof(h), NULL, 0);
	h = hdr(NVMEFS_WIRE_COMPLETE, 1, 0);
	REFUSED(-EOPNOTSUPP, "a COMPLETE from a client", &h, sizeof(h), NULL, 0);
	h = hdr(0, 0, 0);
	REFUSED(-EOPNOTSUPP, "type 0", &h, sizeof(h), NULL, 0);
	h = hdr(999, 0, 0);
	REFUSED(-EOPNOTSUPP, "type 999", &h, sizeof(h), NULL, 0);
	h = hdr(NVMEFS_WIRE_HELLO, 0, 0);
	h.flags = 1;
	REFUSED(-EBADMSG, "flags set", &h, sizeof(h), NULL, 0);
	h = hdr(NVMEFS_WIRE_HELLO, 1, 0);
	REFUSED(-EBADMSG, "HELLO with a count", &h, sizeof(h), NULL, 0);
	m.h = hdr(NVMEFS_WIRE_HELLO, 0, 0);
	REFUSED(-EBADMSG, "HELLO with a body", &m, sizeof(m.h) + 8, NULL, 0);
	m.h = hdr(NVMEFS_WIRE_SUBMIT, 0, 0);
	REFUSED(-EBADMSG, "SUBMIT of 0 entries", &m, sizeof(m.h), NULL, 0);
	m.h = hdr(NVMEFS_WIRE_SUBMIT, 2, 0);
	REFUSED(-EBADMSG, "SUBMIT counting 2 with 1 entry", &m, sizeof(m.h) + sizeof(m.e[0]), NULL,
		0);
	m.h = hdr(NVMEFS_WIRE_SUBMIT, 1, 0);
	REFUSED(-EBADMSG, "SUBMIT of 1.5 entries", &m, sizeof(m.h) + sizeof(m.e[0]) * 3 / 2, NULL,
		0);
	m.h = hdr(NVMEFS_WIRE_SUBMIT, UINT32_MAX, 0);
	REFUSED(-EBADMSG, "SUBMIT counting 2^32-1", &m, sizeof(m.h) + sizeof(m.e[0]), NULL, 0);
	m.h = hdr(NVMEFS_WIRE_SUBMIT, NVMEFS_WIRE_MAX_BATCH + 1, 0);
	REFUSED(-EBADMSG, "SUBMIT of 257 entries (above one message)", &m,
		sizeof(m.h) + (NVMEFS_WIRE_MAX_BATCH + 1) * sizeof(m.e[0]), NULL, 0);
	m.h = hdr(NVMEFS_WIRE_SUBMIT, NVMEFS_WIRE_MAX_BATCH + 2, 0);
	REFUSED(-EBADMSG, "a message longer than the largest", &m, sizeof(m), NULL, 0);
	m.h = hdr(NVMEFS_WIRE_SUBMIT, 1, 0);
	m.e[0] = (struct nvmefs_wire_sqe){.op = NVMEFS_WIRE_FSYNC, .handle = 77};
	REFUSED(-EBADMSG, "a descriptor attached to SUBMIT", &m, sizeof(m.h) + sizeof(m.e[0]), &fd,
		1);
	h = hdr(NVMEFS_WIRE_HELLO, 0, 0);
	REFUSED(-EBADMSG, "a descriptor attached to HELLO", &h, sizeof(h), &fd, 1);
	h = hdr(NVMEFS_WIRE_UNREG_FD, 0, 0);
	REFUSED(-EBADMSG, "a descriptor attached to UNREG_FD", &h, sizeof(h), &fd, 1);
	h = hdr(NVMEFS_WIRE_REG_FD, 0, 0);
	REFUSED(-EBADMSG, "REG_FD with two descriptors", &h, sizeof(h), fds, 2);
	REFUSED(-EBADMSG, "REG_FD with five descriptors", &h, sizeof(h), fds, 5);
	REFUSED(-EBADMSG, "REG_FD with none", &h, sizeof(h), NULL, 0);
	h = hdr(NVMEFS_WIRE_REG_MEM, 0, 1 << 20);
	REFUSED(-EBADMSG, "REG_MEM with none", &h, sizeof(h), NULL, 0);
#undef REFUSED
	cur_step = "after the malformed messages";
	CHECK_EQ(nat("refused") - refused0, refusals, "the daemon counted every refusal");
	CHECK(others_served(), "another client is served");
	close(s);
	for (int i = 0; i < 5; i++)
		close(fds[i]);
	CHECK_HELD(h0, "after malformed messages");
}

/*
 * Registrations that lie: REG_MEM of an unsealed memfd (-EPERM), of a
 * sealed one smaller than claimed, of sizes 0, negative, unaligned and
 * above 1 TiB (-EINVAL), of a file of the mount (no seals: -EPERM), of a
 * memfd sealed against writes (refused); REG_FD of a memfd (-EXDEV), of a
 * directory (-EINVAL); UNREG of handles and regions never given.
 */
static void test_hostile_registrations(void)
{
	static const int64_t bad_sizes[] = {0, -4096, 4097, (int64_t)(1ull << 40) + 4096,
					    INT64_MIN};
	static const int64_t bad_ids[] = {0, 1, 99, -1, INT64_MAX, INT64_MIN};
	struct held h0 = settled();
	int s = raw_connect(), fd, dfd;

	fd = memfd(MIB, 0, NULL);
	CHECK_EQ(raw_ctl(s, NVMEFS_WIRE_REG_MEM, MIB, fd), -EPERM, "REG_MEM of an unsealed memfd");
	close(fd);
	fd = memfd(MIB, F_SEAL_SHRINK, NULL);
	CHECK_EQ(raw_ctl(s, NVMEFS_WIRE_REG_MEM, 2 * MIB, fd), -EINVAL,
		 "REG_MEM of a memfd smaller than claimed");
	for (size_t i = 0; i < sizeof(bad_sizes) / sizeof(bad_sizes[0]); i++)
		CHECK_EQ(raw_ctl(s, NVMEFS_WIRE_REG_MEM, bad_sizes[i], fd), -EINVAL,
			 "REG_MEM of size %" PRId64, bad_sizes[i]);
	close(fd);
	fd = memfd(MIB, F_SEAL_SHRINK | F_SEAL_WRITE, NULL);
	CHECK(raw_ctl(s, NVMEFS_WIRE_REG_MEM, MIB, fd) < 0, "REG_MEM of a write-sealed memfd");
	CHECK_EQ(raw_ctl(s, NVMEFS_WIRE_REG_FD, 0, fd), -EXDEV, "REG_FD of a memfd");
	close(fd);
	fd = mopen("hostile", O_RDWR | O_CREAT);
	CHECK_EQ(raw_ctl(s, NVMEFS_WIRE_REG_MEM, BLK, fd), -EPERM,
		 "REG_MEM of a file of the mount");
	close(fd);
	dfd = open(mnt, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	CHECK_EQ(raw_ctl(s, NVMEFS_WIRE_REG_FD, 0, dfd), -EINVAL, "REG_FD of a directory");
	close(dfd);
	for (size_t i = 0; i < sizeof(bad_ids) / sizeof(bad_ids[0]); i++) {
		CHECK_EQ(raw_ctl(s, NVMEFS_WIRE_UNREG_FD, bad_ids[i], -1), -EBADF,
			 "UNREG_FD of handle %" PRId64, bad_ids[i]);
		CHECK_EQ(raw_ctl(s, NVMEFS_WIRE_UNREG_MEM, bad_ids[i], -1), -EINVAL,
			 "UNREG_MEM of region %" PRId64, bad_ids[i]);
	}
	CHECK(raw_alive(s), "the connection answers after them");
	CHECK(others_served(), "another client is served");
	close(s);
	CHECK_HELD(h0, "after lying registrations");
}

/*
 * SUBMIT entries that lie, with real registrations beside them: ranges
 * outside the region (past its end, straddling it, mem_off + len and
 * off + len wrapping around 2^64), a length above the largest, handles and
 * regions never given or given back, unknown ops, pad set, a write on a
 * read-only handle, fsync on no handle. Each completes alone with its
 * error; the true entries among them do their I/O, into and out of the
 * region as the client sees it.
 */
static void test_hostile_submit(void)
{
	enum { N = 20 };
	struct held h0 = settled();
	int s = raw_connect(), rw = mopen("hostile-io", O_RDWR | O_CREAT | O_TRUNC), ro, mfd;
	int64_t h, hro, r, r2, res[N], arg2 = 0;
	struct nvmefs_wire_sqe e[N];
	long long want[N];
	uint8_t *mem, k[BLK];
	unsigned n = 0;

	ro = mopen("hostile-io", O_RDONLY);
	{
		struct nvmefs_wire_hdr m = hdr(NVMEFS_WIRE_REG_FD, 0, 0);

		h = raw_call(s, &m, sizeof(m), &rw, 1, &arg2);
		CHECK(h >= 0, "REG_FD of a read-write file: %" PRId64, h);
		CHECK_EQ(arg2, NVMEFS_WIRE_MAY_READ | NVMEFS_WIRE_MAY_WRITE, "its mode");
		hro = raw_call(s, &m, sizeof(m), &ro, 1, &arg2);
		CHECK(hro >= 0, "REG_FD of a read-only file: %" PRId64, hro);
		CHECK_EQ(arg2, NVMEFS_WIRE_MAY_READ, "its mode");
	}
	mfd = memfd(MIB, F_SEAL_SHRINK, &mem);
	r = raw_ctl(s, NVMEFS_WIRE_REG_MEM, MIB, mfd);
	CHECK(r >= 0, "REG_MEM of 1 MiB: %" PRId64, r);
	close(mfd);
	mfd = memfd(MIB, F_SEAL_SHRINK, NULL);
	r2 = raw_ctl(s, NVMEFS_WIRE_REG_MEM, MIB, mfd);
	close(mfd);
	CHECK(r2 >= 0 && r2 != r, "a second region: %" PRId64, r2);
	CHECK_EQ(raw_ctl(s, NVMEFS_WIRE_UNREG_MEM, r2, -1), 0, "give the second region back");
	if (h < 0 || hro < 0 || r < 0)
		die("no registrations to test with");
	fill(mem, BLK, 61, 0);

#define SQE(op_, hd, rg, off_, len_, moff, w)                                                      \
	do {                                                                                       \
		e[n] = (struct nvmefs_wire_sqe){.user_data = n,                                    \
						.off = (off_),                                     \
						.len = (len_),                                     \
						.mem_off = (moff),                                 \
						.handle = (uint32_t)(hd),                          \
						.region = (uint32_t)(rg),                          \
						.op = (op_)};                                      \
		want[n++] = (w);                                                                   \
	} while (0)
	SQE(NVMEFS_WIRE_READ, h, r, 0, BLK, MIB, -EFAULT);		 /* past the region */
	SQE(NVMEFS_WIRE_READ, h, r, 0, 2 * BLK, MIB - BLK, -EFAULT);	 /* straddling its end */
	SQE(NVMEFS_WIRE_WRITE, h, r, 0, BLK, UINT64_MAX - 100, -EFAULT); /* mem_off + len wraps */
	SQE(NVMEFS_WIRE_WRITE, h, r, UINT64_MAX - 100, BLK, 0, -EFBIG);	 /* off + len wraps */
	SQE(NVMEFS_WIRE_WRITE, h, r, UINT64_MAX - BLK + 1, BLK, 0, -EFBIG); /* ends at 2^64 */
	SQE(NVMEFS_WIRE_READ, h, r, 0, (1ull << 40) + 1, 0, -EINVAL);	    /* above max_len */
	SQE(NVMEFS_WIRE_READ, 12345, r, 0, BLK, 0, -EBADF);		    /* no such handle */
	SQE(NVMEFS_WIRE_READ, h, 999, 0, BLK, 0, -EFAULT);		    /* no such region */
	SQE(NVMEFS_WIRE_WRITE, h, r2, 7, 100, 0, -EFAULT);		    /* region given back */
	SQE(NVMEFS_WIRE_READ, h, r2, 7, 100, 0, -EFAULT);		    /* region given back */
	SQE(0, h, r, 0, BLK, 0, -EINVAL);				    /* op 0 */
	SQE(99, h, r, 0, BLK, 0, -EINVAL);				    /* op 99 */
	SQE(NVMEFS_WIRE_WRITE, hro, r, 0, BLK, 0, -EBADF);		    /* read-only handle */
	SQE(NVMEFS_WIRE_FSYNC, 777, 0, 0, 0, 0, -EBADF);		    /* fsync, no handle */
	SQE(NVMEFS_WIRE_WRITE, h, r, 0, BLK, 0, BLK);			    /* true */
	SQE(NVMEFS_WIRE_READ, hro, r, 0, BLK, BLK, BLK);		    /* true, read-only */
	SQE(NVMEFS_WIRE_FSYNC, hro, 0, 0, 0, 0, 0);			    /* true */
	e[n] = e[0];
	e[n].flags = 2;
	e[n].user_data = n;
	e[n].mem_off = 0;
	want[n++] = -EINVAL; /* a flag no op takes */
	e[n] = e[0];
	e[n].flags = NVMEFS_WIRE_SQE_BEHIND;
	e[n].user_data = n;
	e[n].mem_off = 0;
	want[n++] = -EINVAL; /* a write's flag on a read */
#undef SQE
	for (unsigned i = 0; i < n; i++)
		res[i] = NO_REPLY;
	cur_step = "SUBMIT of lying entries";
	CHECK(raw_submit(s, e, n, res), "completions for every entry");
	for (unsigned i = 0; i < n; i++)
		CHECK_EQ(res[i], want[i], "entry %u", i);
	/* The true write wrote the region's bytes; the read (issued with
	 * it, so either order) brought back old or new. */
	CHECK_EQ(kread(rw, k, BLK, 0), BLK, "the file through the mount");
	CHECK_EQ(mismatch(k, BLK, 61, 0), -1, "the true write's bytes");
	CHECK(mismatch(mem + BLK, BLK, 61, 0) == -1 || all_zero(mem + BLK, BLK),
	      "the true read's bytes in the region");
	{
		struct nvmefs_wire_sqe rd = {.op = NVMEFS_WIRE_READ,
					     .handle = (uint32_t)hro,
					     .region = (uint32_t)r,
					     .len = BLK,
					     .mem_off = 2 * BLK};

		memset(mem + 2 * BLK, 0, BLK);
		CHECK(raw_submit(s, &rd, 1, res) && res[0] == BLK, "a read after them");
		CHECK_EQ(mismatch(mem + 2 * BLK, BLK, 61, 0), -1, "it landed in the region");
	}
	/* A handle given back names nothing. */
	CHECK_EQ(raw_ctl(s, NVMEFS_WIRE_UNREG_FD, h, -1), 0, "UNREG_FD");
	e[0] = (struct nvmefs_wire_sqe){.op = NVMEFS_WIRE_READ, .handle = (uint32_t)h, .len = BLK};
	CHECK(raw_submit(s, e, 1, res) && res[0] == -EBADF, "a handle given back: %" PRId64,
	      res[0]);
	CHECK(raw_alive(s), "the connection answers after them");
	CHECK(others_served(), "another client is served");
	munmap(mem, MIB);
	close(s);
	close(rw);
	close(ro);
	CHECK_HELD(h0, "after lying requests");
}

/*
 * Writes that may complete early (NVMEFS_WIRE_SQE_BEHIND, offered in
 * HELLO): eight in one SUBMIT are answered, held back by the client's
 * thread in the daemon and sent to the devices together, once
 * (native.held_writes, held_sends); their bytes read back through the
 * mount. A commit that closes the gate on writes answered early meanwhile
 * leaves some unheld: the round is tried again, three times at most.
 */
static void test_held_writes(void)
{
	enum { N = 8 };
	struct held h0 = settled();
	int s = raw_connect(), fd = mopen("held-writes", O_RDWR | O_CREAT | O_TRUNC), mfd;
	struct nvmefs_wire_hello hello = {0};
	struct nvmefs_wire_sqe e[N];
	int64_t h, r, res[N], arg2 = 0;
	long long w0, s0, held = 0, sends = 0;
	uint8_t *mem, k[BLK];

	CHECK(raw_hello(s, &hello), "HELLO answered");
	CHECK(hello.flags & NVMEFS_WIRE_HELLO_BEHIND, "HELLO offers writes answered early (%u)",
	      hello.flags);
	{
		struct nvmefs_wire_hdr m = hdr(NVMEFS_WIRE_REG_FD, 0, 0);

		h = raw_call(s, &m, sizeof(m), &fd, 1, &arg2);
	}
	mfd = memfd(MIB, F_SEAL_SHRINK, &mem);
	r = raw_ctl(s, NVMEFS_WIRE_REG_MEM, MIB, mfd);
	close(mfd);
	if (h < 0 || r < 0)
		die("no registrations to test with");
	for (int round = 0; round < 3 && held < 2; round++) {
		for (unsigned i = 0; i < N; i++) {
			fill(mem + i * BLK, BLK, 90 + round, i * BLK);
			e[i] = (struct nvmefs_wire_sqe){.user_data = i,
							.off = i * BLK,
							.len = BLK,
							.mem_off = i * BLK,
							.handle = (uint32_t)h,
							.region = (uint32_t)r,
							.op = NVMEFS_WIRE_WRITE,
							.flags = NVMEFS_WIRE_SQE_BEHIND};
		}
		w0 = nat("held_writes");
		s0 = nat("held_sends");
		CHECK(raw_submit(s, e, N, res), "completions for the writes");
		for (unsigned i = 0; i < N; i++)
			CHECK_EQ(res[i], BLK, "write %u", i);
		/* The reads through the mount wait for the writes: the client's
		 * thread sends them within its bound, or when it goes idle. */
		CHECK(raw_alive(s), "the connection answers");
		for (unsigned i = 0; i < N; i++) {
			CHECK_EQ(kread(fd, k, BLK, (off_t)(i * BLK)), BLK,
				 "block %u through the mount", i);
			CHECK_EQ(mismatch(k, BLK, 90 + round, i * BLK), -1, "block %u's bytes", i);
		}
		held = nat("held_writes") - w0;
		sends = nat("held_sends") - s0;
	}
	CHECK(held >= 2 && held <= N, "the writes were held (%lld of %d)", held, N);
	CHECK_EQ(sends, 1, "and sent together, once");
	CHECK_EQ(raw_ctl(s, NVMEFS_WIRE_UNREG_FD, h, -1), 0, "UNREG_FD");
	CHECK_EQ(raw_ctl(s, NVMEFS_WIRE_UNREG_MEM, r, -1), 0, "UNREG_MEM");
	munmap(mem, MIB);
	close(s);
	close(fd);
	CHECK_HELD(h0, "after writes held back");
}

/*
 * A client that sends and never reads: once the daemon has as many
 * answers queued as it keeps, it reads that client no more (its sends
 * block), and serves the others meanwhile; when it reads at last, every
 * message it sent has been answered.
 */
static void test_hostile_flood(void)
{
	struct {
		struct nvmefs_wire_hdr h;
		struct nvmefs_wire_sqe e;
	} m = {hdr(NVMEFS_WIRE_SUBMIT, 1, 0),
	       {.op = NVMEFS_WIRE_FSYNC, .handle = 4242, .user_data = 7}};
	struct held h0 = settled();
	uint8_t in[NVMEFS_WIRE_MAX_MSG];
	int s = raw_connect();
	unsigned sent = 0, got = 0;
	int ret = 0;

	cur_step = "flooding";
	while (sent < 1000000 && !(ret = raw_send(s, &m, sizeof(m), NULL, 0, MSG_DONTWAIT)))
		sent++;
	CHECK_EQ(ret, -EAGAIN, "the flood ends with a full socket (after %u messages)", sent);
	printf("     (the daemon stopped reading after %u messages)\n", sent);
	cur_step = "another client while one floods";
	CHECK(others_served(), "another client is served while one floods");
	cur_step = "draining the flood";
	while (got < sent) {
		struct nvmefs_wire_msg w;
		ssize_t n = raw_recv(s, in, sizeof(in));

		if (n <= 0 || nvmefs_wire_parse(in, (size_t)n, 0, &w) ||
		    w.hdr.type != NVMEFS_WIRE_COMPLETE)
			break;
		for (uint32_t i = 0; i < w.hdr.count; i++) {
			struct nvmefs_wire_cqe c;

			memcpy(&c, (const uint8_t *)w.entries + i * sizeof(c), sizeof(c));
			if (c.user_data != 7 || c.res != -EBADF)
				break;
			got++;
		}
	}
	CHECK_EQ(got, sent, "every flooding message answered (-EBADF each)");
	close(s);
	CHECK_HELD(h0, "after a flood");
}

/*
 * An empty message ends its sender's connection, not the daemon, which
 * then holds what it held before (descriptors, threads) and maps no client
 * memory.
 */
static void test_hostile_leaks(void)
{
	struct held h0 = settled();
	ssize_t n;
	uint8_t in[256];
	int s;

	s = raw_connect();
	CHECK(raw_alive(s), "a new connection");
	CHECK(!raw_send(s, in, 0, NULL, 0, 0), "an empty message is sent");
	n = raw_recv(s, in, sizeof(in));
	CHECK(n == 0 || n == sizeof(struct nvmefs_wire_hdr),
	      "an empty message: an error or the connection closed (%zd)", n);
	close(s);
	CHECK_HELD(h0, "after an empty message");
}

/* ==== kill ==== */

/* The child of test_kill: many writes in flight, forever; a byte on out
 * once the first batch is at the daemon. */
static __attribute__((noreturn)) void kill_child(int out)
{
	enum { QD = 256, BS = 128 * 1024 };
	struct nvmefs_client *c = attach();
	struct nvmefs_io ios[QD];
	struct nvmefs_cqe cq[QD];
	uint8_t *buf = balloc(c, (size_t)QD * BS);
	int fd = mopen("killed", O_RDWR | O_CREAT | O_TRUNC);
	uint64_t next = 0;
	int n;

	reg(c, fd);
	fill(buf, (size_t)QD * BS, 70, 0);
	for (unsigned i = 0; i < QD; i++, next++)
		ios[i] = (struct nvmefs_io){.fd = fd,
					    .op = NVMEFS_OP_WRITE,
					    .buf = buf + (size_t)i * BS,
					    .len = BS,
					    .off = (next % 512) * BS,
					    .user_data = i};
	if (nvmefs_submit(c, ios, QD) != QD || write(out, "x", 1) != 1)
		_exit(2);
	for (;;) {
		n = nvmefs_wait(c, cq, QD, 1, -1);
		if (n < 0)
			_exit(3);
		for (int i = 0; i < n; i++) {
			struct nvmefs_io *io = &ios[cq[i].user_data];

			io->off = (next++ % 512) * BS;
			if (nvmefs_submit(c, io, 1) != 1)
				_exit(4);
		}
	}
}

/*
 * A client SIGKILLed with many writes in flight (the test script slows the
 * devices so that they are), to a file unlinked meanwhile: the daemon
 * finishes them and gives back everything the client had: it counts no
 * client, holds the descriptors and threads it held before, maps none of
 * its memory, and lets go of the file (its space is free once the last
 * other opener closes it). Another client and the mount work; the file
 * reads to its end through a descriptor opened before. (The script then
 * unmounts and runs fsck -n.)
 */
static void test_kill(void)
{
	struct held h0 = settled();
	unsigned long long free0 = free_bytes();
	int p[2], st = 0, fd;
	long long w0 = nat("writes");
	uint8_t *k = xmalloc(64 * MIB);
	off_t size;
	pid_t pid;
	char b;

	if (pipe2(p, O_CLOEXEC))
		die("pipe: %s", strerror(errno));
	fflush(NULL);
	pid = fork();
	if (pid < 0)
		die("fork: %s", strerror(errno));
	if (!pid) {
		close(p[0]);
		kill_child(p[1]);
	}
	close(p[1]);
	cur_step = "the child's first batch";
	CHECK_EQ(read(p[0], &b, 1), 1, "the child submitted its writes");
	close(p[0]);
	fd = mopen("killed", O_RDONLY);
	if (unlink(P("killed")))
		die("unlink: %s", strerror(errno));
	usleep(50000);
	CHECK_EQ(nat("clients"), 1, "the child is connected when it is killed");
	kill(pid, SIGKILL);
	waitpid(pid, &st, 0);
	CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL, "the child died of SIGKILL (status %d)",
	      st);
	cur_step = "after the kill";
	CHECK(clients_become(0), "the daemon counts no client after the kill (%lld)",
	      nat("clients"));
	CHECK(nat("writes") > w0, "the child's writes reached the daemon");
	CHECK_HELD(h0, "after a client was killed mid-write");
	size = fsize(fd);
	CHECK(size > 0 && size <= 64 * (off_t)MIB, "the file's size: %lld", (long long)size);
	CHECK(kread(fd, k, 64 * MIB, 0) == (size_t)size, "it reads to its end through the mount");
	close(fd);
	CHECK(space_back(free0),
	      "the killed client's file is let go of: its space is free (%llu -> %llu)", free0,
	      free_bytes());
	free(k);
}

/*
 * With the devices slowed, straight on the socket: while a read is in
 * flight its handle and its region cannot be given back (-EBUSY); once
 * it completed they can.
 */
static void test_unreg_busy(void)
{
	struct held h0 = settled();
	int s = raw_connect(), fd, mfd;
	struct nvmefs_wire_hdr m = hdr(NVMEFS_WIRE_REG_FD, 0, 0);
	struct nvmefs_wire_sqe e;
	int64_t h, r, res = NO_REPLY;
	uint8_t *mem;

	make_file("busy", MIB, 80);
	fd = mopen("busy", O_RDONLY);
	h = raw_call(s, &m, sizeof(m), &fd, 1, NULL);
	mfd = memfd(MIB, F_SEAL_SHRINK, &mem);
	r = raw_ctl(s, NVMEFS_WIRE_REG_MEM, MIB, mfd);
	close(mfd);
	close(fd);
	if (h < 0 || r < 0)
		die("registrations: %" PRId64 " %" PRId64, h, r);
	e = (struct nvmefs_wire_sqe){
		.op = NVMEFS_WIRE_READ, .handle = (uint32_t)h, .region = (uint32_t)r, .len = MIB};
	{
		struct {
			struct nvmefs_wire_hdr h;
			struct nvmefs_wire_sqe e;
		} sub = {hdr(NVMEFS_WIRE_SUBMIT, 1, 0), e};

		CHECK(!raw_send(s, &sub, sizeof(sub), NULL, 0, 0), "submit a read");
	}
	CHECK_EQ(raw_ctl(s, NVMEFS_WIRE_UNREG_FD, h, -1), -EBUSY,
		 "UNREG_FD of a handle a read in flight names");
	CHECK_EQ(raw_ctl(s, NVMEFS_WIRE_UNREG_MEM, r, -1), -EBUSY,
		 "UNREG_MEM of a region a read in flight fills");
	{
		uint8_t in[256];
		struct nvmefs_wire_msg w;
		ssize_t n = raw_recv(s, in, sizeof(in));

		if (n > 0 && !nvmefs_wire_parse(in, (size_t)n, 0, &w) &&
		    w.hdr.type == NVMEFS_WIRE_COMPLETE)
			memcpy(&res, (const uint8_t *)w.entries + 8, sizeof(res));
	}
	CHECK_EQ(res, MIB, "the read completes");
	CHECK_EQ(mismatch(mem, MIB, 80, 0), -1, "its bytes in the region");
	CHECK_EQ(raw_ctl(s, NVMEFS_WIRE_UNREG_FD, h, -1), 0, "UNREG_FD once it completed");
	CHECK_EQ(raw_ctl(s, NVMEFS_WIRE_UNREG_MEM, r, -1), 0, "UNREG_MEM once it completed");
	munmap(mem, MIB);
	close(s);
	CHECK_HELD(h0, "after requests in flight");
}

/* ==== the driver ==== */

struct test {
	const char *group, *name;
	void (*fn)(void);
};

static const struct test tests[] = {
	{"api", "attach", test_attach},
	{"api", "buf", test_buf},
	{"api", "buf_fd_taken", test_buf_fd_taken},
	{"api", "reg_fd", test_reg_fd},
	{"api", "modes", test_modes},
	{"api", "submit_wait", test_submit_wait},
	{"api", "rw_sizes", test_rw_sizes},
	{"api", "eof", test_eof},
	{"api", "fsync", test_fsync},
	{"api", "client_stats", test_client_stats},
	{"api", "daemon_stats", test_daemon_stats},
	{"api", "detach_inflight", test_detach_inflight},
	{"api", "held_writes", test_held_writes},
	{"coherence", "coh_native_write", test_coh_native_write},
	{"coherence", "coh_mount_write", test_coh_mount_write},
	{"coherence", "coh_atime", test_coh_atime},
	{"coherence", "coh_mmap_dirty", test_coh_mmap_dirty},
	{"coherence", "coh_kill_privs", test_coh_kill_privs},
	{"writeback", "writeback", test_writeback},
	{"hostile", "hostile_messages", test_hostile_messages},
	{"hostile", "hostile_registrations", test_hostile_registrations},
	{"hostile", "hostile_submit", test_hostile_submit},
	{"hostile", "hostile_flood", test_hostile_flood},
	{"hostile", "hostile_leaks", test_hostile_leaks},
	{"slow", "unreg_busy", test_unreg_busy},
	{"slow", "kill", test_kill},
};

int main(int argc, char **argv)
{
	char mode[32] = "";
	int ran = 0;

	if (argc < 3) {
		fprintf(stderr, "usage: test_client MOUNTPOINT GROUP...\n");
		fprintf(stderr, "groups: api coherence writeback hostile slow\n");
		return 2;
	}
	mnt = argv[1];
	setvbuf(stdout, NULL, _IOLBF, 0);
	signal(SIGALRM, on_alarm);
	signal(SIGPIPE, SIG_IGN);
	config("mode", mode, sizeof(mode));
	cached_mode = !strcmp(mode, "cached");
	{
		char v[8] = "0";

		config("direct_io_mmap", v, sizeof(v));
		maps_shared = cached_mode || !strcmp(v, "1");
	}
	for (int g = 2; g < argc; g++) {
		bool known = false;

		for (size_t i = 0; i < sizeof(tests) / sizeof(tests[0]); i++) {
			int before = nfail;
			double t;

			if (strcmp(tests[i].group, argv[g]))
				continue;
			known = true;
			cur_test = tests[i].name;
			cur_step = "";
			alarm(TEST_SECS);
			t = now_s();
			tests[i].fn();
			free_bufs();
			alarm(0);
			printf("%s %-24s %6.2f s (%s mode)\n", nfail == before ? "ok  " : "FAIL",
			       tests[i].name, now_s() - t, mode);
			ran++;
		}
		if (!known) {
			fprintf(stderr, "test_client: %s: no such group\n", argv[g]);
			return 2;
		}
	}
	printf("%d tests, %d failed checks\n", ran, nfail);
	return nfail ? 1 : 0;
}
