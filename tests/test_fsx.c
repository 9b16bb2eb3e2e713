// SPDX-License-Identifier: MIT
/*
 * A file-operation exerciser in the manner of fsx: random writes, reads,
 * truncates, hole punches, fallocates and mmap reads and writes on one file,
 * every result compared against an in-memory model of what the file must
 * hold, at unaligned offsets and lengths that cross blocks and chunks.
 *
 *   test_fsx FILE [OPS] [MAXLEN]     (seed: NVMEFS_TEST_SEED)
 *
 * NVMEFS_TEST_NO_SHARED_MMAP=1 leaves out shared writable mappings (FUSE's
 * direct_io refuses them before Linux 6.6).
 * Exit 0 pass, 1 fail (with the op log's tail).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "test_util.h"

static uint64_t rng;
static uint8_t *model, *buf;
static size_t size, maxlen;
static int fd;
static char log_[64][96];
static unsigned nlog;

static uint64_t rnd(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

/* Offsets near interesting boundaries half of the time. */
static size_t pick_off(size_t limit)
{
	static const size_t edges[] = {0, 1, 511, 512, 4095, 4096, 4097, 65536, 1 << 20};
	size_t o;

	if (!limit)
		return 0;
	if (rnd() % 2) {
		o = edges[rnd() % (sizeof(edges) / sizeof(edges[0]))] + (rnd() % 3) - 1;
		if (o < limit)
			return o;
	}
	return rnd() % limit;
}

static void __attribute__((format(printf, 1, 2))) note(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(log_[nlog++ % 64], sizeof(log_[0]), fmt, ap);
	va_end(ap);
}

static int fail(const char *what)
{
	fprintf(stderr, "FAIL: %s (size %zu); last operations:\n", what, size);
	for (unsigned i = nlog > 64 ? nlog - 64 : 0; i < nlog; i++)
		fprintf(stderr, "  %u: %s\n", i, log_[i % 64]);
	return 1;
}

static int check_range(size_t off, size_t len)
{
	ssize_t n = pread(fd, buf, len, (off_t)off);
	size_t want = off >= size ? 0 : (len < size - off ? len : size - off);

	if (n != (ssize_t)want)
		return fail("short or failed read");
	for (size_t i = 0; i < want; i++) {
		if (buf[i] != model[off + i]) {
			fprintf(stderr, "byte %zu: got %u want %u\n", off + i, buf[i],
				model[off + i]);
			return fail("read mismatch");
		}
	}
	return 0;
}

static int op_write(void)
{
	size_t off = pick_off(maxlen), len = 1 + rnd() % (maxlen / 8);

	if (off + len > maxlen)
		len = maxlen - off;
	for (size_t i = 0; i < len; i++)
		buf[i] = (uint8_t)rnd();
	note("write %zu +%zu", off, len);
	if (pwrite(fd, buf, len, (off_t)off) != (ssize_t)len)
		return fail("write");
	if (off > size)
		memset(model + size, 0, off - size);
	memcpy(model + off, buf, len);
	if (off + len > size)
		size = off + len;
	return 0;
}

static int op_truncate(void)
{
	size_t n = pick_off(maxlen);

	note("truncate %zu", n);
	if (ftruncate(fd, (off_t)n))
		return fail("truncate");
	if (n > size)
		memset(model + size, 0, n - size);
	size = n;
	return 0;
}

static int op_punch(void)
{
	size_t off = pick_off(size + 1), len = 1 + rnd() % (maxlen / 4);

	note("punch %zu +%zu", off, len);
	if (fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)off, (off_t)len))
		return fail("punch");
	if (off < size)
		memset(model + off, 0, (off + len < size ? off + len : size) - off);
	return 0;
}

static int op_falloc(void)
{
	size_t off = pick_off(maxlen), len = 1 + rnd() % (maxlen / 4);
	int keep = (int)(rnd() % 2);

	if (off + len > maxlen)
		len = maxlen - off;
	note(keep ? "falloc keep %zu +%zu" : "falloc %zu +%zu", off, len);
	if (fallocate(fd, keep ? FALLOC_FL_KEEP_SIZE : 0, (off_t)off, (off_t)len))
		return fail("fallocate");
	if (!keep && off + len > size) {
		memset(model + size, 0, off + len - size);
		size = off + len;
	}
	return 0;
}

static int op_mmap(bool write)
{
	size_t off, len;
	uint8_t *p;

	if (!size)
		return 0;
	off = pick_off(size);
	len = 1 + rnd() % (size - off);
	note(write ? "mapwrite %zu +%zu" : "mapread %zu +%zu", off, len);
	p = mmap(NULL, size, write ? PROT_READ | PROT_WRITE : PROT_READ,
		 write ? MAP_SHARED : MAP_PRIVATE, fd, 0);
	if (p == MAP_FAILED)
		return fail("mmap");
	if (write) {
		for (size_t i = 0; i < len; i++)
			model[off + i] = p[off + i] = (uint8_t)rnd();
		if (msync(p, size, MS_SYNC))
			return fail("msync");
	} else if (memcmp(p + off, model + off, len)) {
		munmap(p, size);
		return fail("mapped read mismatch");
	}
	munmap(p, size);
	return 0;
}

int main(int argc, char **argv)
{
	unsigned long ops = argc > 2 ? strtoul(argv[2], NULL, 0) : 20000;
	bool no_shared_mmap = getenv("NVMEFS_TEST_NO_SHARED_MMAP") != NULL;
	uint64_t seed = test_seed();
	struct stat st;
	int ret = 0;

	if (argc < 2) {
		fprintf(stderr, "usage: test_fsx FILE [OPS] [MAXLEN]\n");
		return 2;
	}
	maxlen = argc > 3 ? strtoul(argv[3], NULL, 0) : 4u << 20;
	rng = seed | 1;
	printf("test_fsx %s: %lu ops, max length %zu, seed 0x%llx (NVMEFS_TEST_SEED repeats it)\n",
	       argv[1], ops, maxlen, (unsigned long long)seed);
	model = calloc(1, maxlen);
	buf = malloc(maxlen);
	fd = open(argv[1], O_RDWR | O_CREAT | O_TRUNC, 0644);
	if (!model || !buf || fd < 0) {
		perror(argv[1]);
		return 1;
	}
	for (unsigned long i = 0; i < ops && !ret; i++) {
		switch (rnd() % 16) {
		case 0 ... 5:
			ret = op_write();
			break;
		case 6 ... 8: {
			size_t off = pick_off(size + 10), len = 1 + rnd() % (maxlen / 8);

			note("read %zu +%zu", off, len);
			ret = check_range(off, len);
			break;
		}
		case 9:
			ret = op_truncate();
			break;
		case 10:
			ret = op_punch();
			break;
		case 11:
			ret = op_falloc();
			break;
		case 12:
			ret = op_mmap(false);
			break;
		case 13:
			ret = no_shared_mmap ? 0 : op_mmap(true);
			break;
		case 14:
			note("fsync");
			ret = fsync(fd) ? fail("fsync") : 0;
			break;
		default:
			if (fstat(fd, &st) || (size_t)st.st_size != size) {
				note("stat size %zu", (size_t)st.st_size);
				ret = fail("st_size differs from the model");
			}
		}
	}
	if (!ret)
		ret = check_range(0, maxlen);
	close(fd);
	free(model);
	free(buf);
	if (!ret)
		printf("all checks passed\n");
	return ret;
}
