// SPDX-License-Identifier: MIT
/*
 * read_door MNT [race | dead READY GO]: the bytes the preload library's read door returns
 * (client/preload_read.c), run under LD_PRELOAD by tests/test_read_door.sh.
 * Every read is compared with what the file holds, through the calls the
 * door serves: pread and read (with dup2), libaio's io_submit and
 * io_getevents, and a forked child. Then the file changes under it: an
 * overwrite, a truncate and a write beyond the end must show at once, and
 * while a thread rewrites 1 MiB blocks through the mount (each write one
 * range lock), no 1 MiB read may see two of its generations: a read of the
 * members that raced a write is done again through the mount.
 *
 * Prints "reads N": the reads the door could have served (the test script
 * compares it with the READ requests the daemon counted). With "race",
 * only the race, whose reads the door mostly hands to the mount. With
 * "dead": one read, then READY is made and the script kills the daemon;
 * once GO exists, a read must fail as the mount's do (the loan's word
 * never moves again once its daemon is gone: the door must notice).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <libaio.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MIB	  (1u << 20)
#define SIZE	  (64ull * MIB + 12345) /* a tail that ends inside a block */
#define HOLE	  (32ull * MIB)		/* [HOLE, HOLE + MIB) never written */
#define RACE_BLKS 8u

static int fails;
static unsigned long reads;
static char path[4096];

#define CHECK(cond, ...)                                                                           \
	do {                                                                                       \
		if (!(cond)) {                                                                     \
			fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);                       \
			fprintf(stderr, __VA_ARGS__);                                              \
			fputc('\n', stderr);                                                       \
			fails++;                                                                   \
		}                                                                                  \
	} while (0)

/* The byte at offset o of the file as written (seed), 0 in the hole. */
static uint8_t byte_at(uint64_t o, unsigned seed)
{
	if (o >= HOLE && o < HOLE + MIB)
		return 0;
	return (uint8_t)(((o >> 3) * 2654435761u + seed) >> 11);
}

static void fill(uint8_t *b, uint64_t off, size_t len, unsigned seed)
{
	for (size_t i = 0; i < len; i++)
		b[i] = byte_at(off + i, seed);
}

static void *xalloc(size_t len)
{
	void *p;

	if (posix_memalign(&p, 4096, len))
		abort();
	return p;
}

/* Compare buf, got bytes read at off, with the file of size bytes. */
static void expect(const char *what, const uint8_t *buf, ssize_t got, uint64_t off, size_t len,
		   uint64_t size, unsigned seed)
{
	ssize_t want = off >= size ? 0 : (ssize_t)(off + len > size ? size - off : len);

	CHECK(got == want, "%s at %llu+%zu: %zd bytes, want %zd (%s)", what,
	      (unsigned long long)off, len, got, want, got < 0 ? strerror(errno) : "");
	for (ssize_t i = 0; got == want && i < got; i++) {
		if (buf[i] != byte_at(off + (uint64_t)i, seed)) {
			CHECK(0, "%s at %llu+%zu: byte %zd is %u, want %u", what,
			      (unsigned long long)off, len, i, buf[i],
			      byte_at(off + (uint64_t)i, seed));
			break;
		}
	}
}

static void write_file(unsigned seed)
{
	uint8_t *b = xalloc(MIB);
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);

	CHECK(fd >= 0, "create %s: %s", path, strerror(errno));
	for (uint64_t off = 0; off < SIZE; off += MIB) {
		size_t len = SIZE - off < MIB ? (size_t)(SIZE - off) : MIB;

		if (off == HOLE)
			continue;
		fill(b, off, len, seed);
		CHECK(pwrite(fd, b, len, (off_t)off) == (ssize_t)len, "write: %s", strerror(errno));
	}
	CHECK(ftruncate(fd, (off_t)SIZE) == 0, "size");
	CHECK(fsync(fd) == 0, "fsync");
	close(fd);
	free(b);
}

/* pread at offsets of every kind: aligned 1 MiB and 4 KiB, across a
 * stripe unit, the hole, the tail, beyond the end, 8 and 32 MiB. */
static void preads(int fd, uint64_t size, unsigned seed)
{
	static const struct {
		uint64_t off;
		size_t len;
	} c[] = {{0, MIB},
		 {MIB, MIB},
		 {5 * MIB, MIB},
		 {4096, 4096},
		 {12 * MIB + 8192, 4096},
		 {256 * 1024 - 4096, 8192}, /* across a stripe unit */
		 {HOLE - 4096, 3 * 4096},   /* into the hole */
		 {HOLE, MIB},
		 {64 * MIB, MIB},  /* the tail: short */
		 {80 * MIB, 4096}, /* beyond the end */
		 {8 * MIB, 8 * MIB},
		 {0, 32 * MIB}};
	uint8_t *b = xalloc(32 * MIB);

	for (unsigned i = 0; i < sizeof(c) / sizeof(c[0]); i++) {
		ssize_t n = pread(fd, b, c[i].len, (off_t)c[i].off);

		reads++;
		expect("pread", b, n, c[i].off, c[i].len, size, seed);
	}
	/* 200 random 4 KiB and 64 KiB reads. */
	srand(7);
	for (unsigned i = 0; i < 200; i++) {
		size_t len = i & 1 ? 65536 : 4096;
		uint64_t off = ((uint64_t)rand() % (SIZE / 4096)) * 4096;
		ssize_t n = pread(fd, b, len, (off_t)off);

		reads++;
		expect("pread random", b, n, off, len, size, seed);
	}
	free(b);
}

/* read(2) from the start on a descriptor moved by dup2, 1 MiB at a time. */
/* A program that closes every descriptor above its own (closefrom-style)
 * and opens others keeps the door's own: its reads still return the
 * file's bytes, not those of what took their numbers. */
static void close_above(int fd, uint64_t size, unsigned seed)
{
	int extra[64];
	uint8_t *b = xalloc(MIB);

	CHECK(close_range((unsigned)fd + 1, ~0u, 0) == 0, "close_range: %s", strerror(errno));
	for (int i = 0; i < 64; i++)
		extra[i] = open("/dev/zero", O_RDONLY);
	for (uint64_t off = 0; off < 8 * MIB; off += MIB) {
		expect("pread after close_range", b, pread(fd, b, MIB, (off_t)off), off, MIB, size,
		       seed);
		reads++;
	}
	for (int i = 0; i < 64; i++)
		if (extra[i] >= 0)
			close(extra[i]);
	free(b);
}

/* A program that dup2()s onto numbers it did not open (a shell's
 * "exec 9<file", a daemon's fixed descriptors) may hit the library's own:
 * every descriptor but the file's and stdio gets /dev/zero dup2()ed onto
 * it. The door's reads still return the file's bytes, and a change of
 * the file still reaches them (a new loan through its connection). */
/* Every descriptor but fd, z and stdio whose target's name has want in
 * it (NULL: any), in v (at most max): their count. */
static int fds_naming(int fd, int z, const char *want, int *v, int max)
{
	char link[64], to[4096];
	int k = 0;

	for (int n = 3; n < 65536 && k < max; n++) {
		ssize_t len;

		if (n == fd || n == z)
			continue;
		snprintf(link, sizeof(link), "/proc/self/fd/%d", n);
		len = readlink(link, to, sizeof(to) - 1);
		if (len < 0)
			continue;
		to[len] = '\0';
		if (!want || strstr(to, want))
			v[k++] = n;
	}
	return k;
}

static void dup2_over(int fd, uint64_t size, unsigned seed)
{
	int z = open("/dev/zero", O_RDONLY), v[512], n, w;
	uint8_t *b = xalloc(MIB);

	CHECK(z >= 0, "open /dev/zero");
	/* The members first (image files here): reads must not come from
	 * what took their numbers. */
	n = fds_naming(fd, z, ".img", v, 512);
	for (int i = 0; i < n; i++)
		CHECK(dup2(z, v[i]) == v[i], "dup2 onto %d: %s", v[i], strerror(errno));
	for (uint64_t off = 0; off < 8 * MIB; off += MIB) {
		expect("pread after dup2 over the members' numbers", b,
		       pread(fd, b, MIB, (off_t)off), off, MIB, size, seed);
		reads++;
	}
	printf("dup2 onto %d members' descriptors\n", n);
	/* Then everything else, the connection too: a change still reaches
	 * the reads. */
	n = fds_naming(fd, z, NULL, v, 512);
	for (int i = 0; i < n; i++)
		CHECK(dup2(z, v[i]) == v[i], "dup2 onto %d: %s", v[i], strerror(errno));
	fill(b, 6 * MIB, MIB, seed + 5);
	w = open(path, O_WRONLY);
	CHECK(w >= 0 && pwrite(w, b, MIB, 6 * MIB) == MIB, "overwrite after dup2");
	close(w);
	expect("a change after dup2 over every descriptor", b, pread(fd, b, MIB, 6 * MIB), 6 * MIB,
	       MIB, size, seed + 5);
	fill(b, 6 * MIB, MIB, seed);
	w = open(path, O_WRONLY);
	CHECK(w >= 0 && pwrite(w, b, MIB, 6 * MIB) == MIB, "put back");
	close(w);
	reads++;
	printf("dup2 onto %d descriptors\n", n);
	n = fds_naming(fd, z, "/dev/zero", v, 512);
	for (int i = 0; i < n; i++)
		close(v[i]);
	close(z);
	free(b);
}

static void reads_dup(int fd, uint64_t size, unsigned seed)
{
	uint8_t *b = xalloc(MIB);
	int to = 100;
	uint64_t off = 0;
	ssize_t n;

	CHECK(dup2(fd, to) == to, "dup2: %s", strerror(errno));
	CHECK(lseek(to, 0, SEEK_SET) == 0, "lseek");
	do {
		n = read(to, b, MIB);
		reads++;
		expect("read", b, n, off, MIB, size, seed);
		off += n > 0 ? (uint64_t)n : 0;
	} while (n > 0);
	CHECK(off == size, "read to the end: %llu bytes, want %llu", (unsigned long long)off,
	      (unsigned long long)size);
	CHECK(lseek(fd, 0, SEEK_CUR) == (off_t)size, "the offset is the file's");
	close(to);
	free(b);
}

/* 1 MiB reads of the whole file at QD32 in a shuffled order, then 2,000
 * random 4 KiB reads at QD32, reaped with io_getevents (min 1; a timeout
 * on every other call). */
static void aio_reads(int fd, uint64_t size, unsigned seed)
{
	enum { QD = 32 };
	unsigned nblk = (unsigned)(size / MIB) + 1, next = 0, done = 0, total;
	unsigned *order = calloc(nblk, sizeof(*order));
	struct iocb cb[QD], *cbp[QD];
	struct io_event ev[QD];
	uint8_t *buf = xalloc((size_t)QD * MIB);
	io_context_t ctx = 0;
	int free_slots[QD], nfree = QD;

	CHECK(io_setup(QD, &ctx) == 0, "io_setup");
	for (unsigned i = 0; i < nblk; i++)
		order[i] = i;
	srand(11);
	for (unsigned i = nblk - 1; i > 0; i--) {
		unsigned j = (unsigned)rand() % (i + 1), t = order[i];

		order[i] = order[j];
		order[j] = t;
	}
	for (int i = 0; i < QD; i++)
		free_slots[i] = i;
	for (int pass = 0; pass < 2; pass++) {
		size_t len = pass ? 4096 : MIB;

		total = pass ? 2000 : nblk;
		next = done = 0;
		while (done < total) {
			struct timespec ts = {5, 0};
			int n, k = 0;

			while (next < total && nfree) {
				int s = free_slots[--nfree];
				uint64_t off = pass ? ((uint64_t)rand() % (SIZE / 4096)) * 4096
						    : (uint64_t)order[next] * MIB;

				io_prep_pread(&cb[s], fd, buf + (size_t)s * MIB, len,
					      (long long)off);
				cb[s].data = (void *)(uintptr_t)off;
				cbp[k++] = &cb[s];
				next++;
			}
			if (k) {
				n = io_submit(ctx, k, cbp);
				CHECK(n == k, "io_submit: %d of %d", n, k);
				if (n != k)
					break;
			}
			n = io_getevents(ctx, 1, QD, ev, done & 1 ? &ts : NULL);
			CHECK(n > 0, "io_getevents: %d", n);
			if (n <= 0)
				break;
			for (int i = 0; i < n; i++) {
				struct iocb *c = ev[i].obj;
				int s = (int)(c - cb);
				uint64_t off = (uint64_t)(uintptr_t)ev[i].data;

				CHECK(s >= 0 && s < QD && c->u.c.offset == (long long)off &&
					      c->aio_fildes == fd,
				      "an event for an iocb of ours, as submitted");
				errno = ev[i].res > (unsigned long)-4096l ? (int)-(long)ev[i].res
									  : 0;
				expect("io_getevents", buf + (size_t)s * MIB, (ssize_t)ev[i].res,
				       off, len, size, seed);
				free_slots[nfree++] = s;
				reads++;
				done++;
			}
		}
	}
	io_destroy(ctx);
	free(order);
	free(buf);
}

/* ---- the race: writes through the mount under the door's reads ---- */

static atomic_bool stop;
static atomic_uint writes;

static void *writer(void *arg)
{
	uint32_t *b = xalloc(MIB);
	int fd = open(path, O_WRONLY | O_DIRECT);

	(void)arg;
	CHECK(fd >= 0, "writer open: %s", strerror(errno));
	for (uint32_t g = 1; fd >= 0 && !atomic_load(&stop); g++) {
		uint32_t blk = g % RACE_BLKS;

		for (size_t i = 0; i < MIB / 4; i++)
			b[i] = g;
		CHECK(pwrite(fd, b, MIB, (off_t)blk * MIB) == MIB, "writer: %s", strerror(errno));
		atomic_fetch_add(&writes, 1);
	}
	if (fd >= 0)
		close(fd);
	free(b);
	return NULL;
}

static void race(int fd)
{
	enum { QD = 8 };
	uint32_t *buf = xalloc((size_t)QD * MIB);
	struct iocb cb[QD], *cbp[QD];
	struct io_event ev[QD];
	io_context_t ctx = 0;
	struct timespec t0, t;
	pthread_t th;
	unsigned torn = 0, n_reads = 0;
	uint32_t *z = xalloc(MIB);

	/* The blocks start as one generation (0). */
	memset(z, 0, MIB);
	for (unsigned i = 0; i < RACE_BLKS; i++) {
		int w = open(path, O_WRONLY);

		CHECK(w >= 0 && pwrite(w, z, MIB, (off_t)i * MIB) == MIB, "zero block");
		close(w);
	}
	CHECK(io_setup(QD, &ctx) == 0, "io_setup");
	pthread_create(&th, NULL, writer, NULL);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	do {
		int n;

		for (int i = 0; i < QD; i++) {
			io_prep_pread(&cb[i], fd, buf + (size_t)i * MIB / 4, MIB,
				      (long long)((i % RACE_BLKS) * MIB));
			cbp[i] = &cb[i];
		}
		n = io_submit(ctx, QD, cbp);
		CHECK(n == QD, "race io_submit: %d", n);
		for (int got = 0; got < n;) {
			int k = io_getevents(ctx, 1, QD, ev, NULL);

			CHECK(k > 0, "race io_getevents: %d", k);
			if (k <= 0)
				break;
			for (int i = 0; i < k; i++) {
				const uint32_t *w =
					buf + (size_t)((struct iocb *)ev[i].obj - cb) * MIB / 4;

				CHECK(ev[i].res == MIB, "race read: %ld", (long)ev[i].res);
				for (size_t j = 1; j < MIB / 4; j++) {
					if (w[j] != w[0]) {
						torn++;
						break;
					}
				}
				n_reads++;
			}
			got += k;
		}
		clock_gettime(CLOCK_MONOTONIC, &t);
	} while (t.tv_sec - t0.tv_sec < 3);
	atomic_store(&stop, true);
	pthread_join(th, NULL);
	io_destroy(ctx);
	printf("race: %u reads, %u writes, %u torn\n", n_reads, atomic_load(&writes), torn);
	CHECK(torn == 0, "%u of %u reads saw two writes' bytes", torn, n_reads);
	CHECK(atomic_load(&writes) > 10 && n_reads > 100, "the race ran (%u writes, %u reads)",
	      atomic_load(&writes), n_reads);
	free(buf);
	free(z);
}

int main(int argc, char **argv)
{
	uint8_t *b = xalloc(MIB);
	uint64_t size = SIZE;
	int fd, w;
	pid_t pid;

	if (argc < 2 || (argc == 3 && strcmp(argv[2], "race")) ||
	    (argc == 5 && strcmp(argv[2], "dead")) || argc == 4 || argc > 5) {
		fprintf(stderr, "usage: read_door MNT [race | dead READY GO]\n");
		return 2;
	}
	snprintf(path, sizeof(path), "%s/read_door.dat", argv[1]);
	write_file(1);
	fd = open(path, O_RDONLY | O_DIRECT);
	CHECK(fd >= 0, "open O_DIRECT: %s", strerror(errno));
	if (argc == 3) {
		race(fd);
		close(fd);
		free(b);
		return fails ? 1 : 0;
	}
	if (argc == 5) {
		ssize_t n = pread(fd, b, MIB, 0);

		expect("pread before the daemon dies", b, n, 0, MIB, size, 1);
		close(open(argv[3], O_WRONLY | O_CREAT, 0644));
		for (int i = 0; i < 600 && access(argv[4], F_OK); i++)
			usleep(100000);
		n = pread(fd, b, MIB, MIB);
		CHECK(n < 0, "a read once the daemon is gone fails as the mount's (got %zd bytes)",
		      n);
		free(b);
		return fails ? 1 : 0;
	}
	preads(fd, size, 1);
	reads_dup(fd, size, 1);
	aio_reads(fd, size, 1);
	dup2_over(fd, size, 1);
	close_above(fd, size, 1);

	/* A child of fork reads through the mount, the same bytes. */
	pid = fork();
	if (!pid) {
		ssize_t n = pread(fd, b, MIB, 3 * MIB);

		expect("child pread", b, n, 3 * MIB, MIB, size, 1);
		_exit(fails ? 1 : 0);
	}
	CHECK(pid > 0 && waitpid(pid, &w, 0) == pid && WIFEXITED(w) && !WEXITSTATUS(w),
	      "the child read the file's bytes");

	/* Changes through the mount show at once. */
	w = open(path, O_WRONLY);
	fill(b, 2 * MIB, MIB, 2);
	CHECK(w >= 0 && pwrite(w, b, MIB, 2 * MIB) == MIB, "overwrite");
	CHECK(pread(fd, b, MIB, 2 * MIB) == MIB, "reread");
	expect("after an overwrite", b, MIB, 2 * MIB, MIB, size, 2);
	CHECK(ftruncate(w, 10 * MIB) == 0, "truncate");
	size = 10 * MIB;
	CHECK(pread(fd, b, MIB, 20 * MIB) == 0, "a read beyond the new end is 0 bytes");
	expect("before the new end", b, pread(fd, b, MIB, 9 * MIB), 9 * MIB, MIB, size, 1);
	CHECK(ftruncate(w, 12 * MIB) == 0, "extend");
	CHECK(pread(fd, b, MIB, 11 * MIB) == MIB, "read the extension");
	for (size_t i = 0; i < MIB; i++) {
		if (b[i]) {
			CHECK(0, "the extension reads as zeros (byte %zu is %u)", i, b[i]);
			break;
		}
	}
	close(w);
	reads += 5;
	close(fd);
	free(b);
	printf("reads %lu\n", reads);
	if (fails)
		fprintf(stderr, "%d check(s) failed\n", fails);
	return fails ? 1 : 0;
}
