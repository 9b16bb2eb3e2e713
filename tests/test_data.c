// SPDX-License-Identifier: MIT
/*
 * The data path (fs/core/data_io.c over data.c's plans) through the core,
 * into and out of a caller's buffers (nvmefs_data_pread /
 * nvmefs_data_pwrite, over nvmefs_data_read_into and
 * nvmefs_data_write_from), on a started volume of two image files with no
 * mount: block-aligned I/O goes between the devices and the caller's buffer
 * with no copy (the counters say so) and reads back; unaligned writes keep
 * the bytes around them (edge blocks read, asynchronously); holes read as
 * zeros; a read at the end of the file is short; the size and the data
 * survive closing and opening the volume; fsck -n is clean.
 *
 * usage: test_data BUILD_DIR   (for BUILD_DIR/mkfs.nvmefs and fsck.nvmefs)
 */
#include <fcntl.h>
#include <linux/falloc.h>
#include <stdlib.h>
#include <string.h>

#include "data_i.h"
#include "namei.h"
#include "test_vol.h"

#define MiB (1u << 20)

static uint8_t *model;
static size_t model_size;

static void *aligned(size_t len)
{
	void *p = NULL;

	return posix_memalign(&p, 4096, len) ? NULL : p;
}

static void fill(uint8_t *p, size_t len, unsigned seed)
{
	for (size_t i = 0; i < len; i++)
		p[i] = (uint8_t)((i * 131 + seed * 7 + (i >> 12)) ^ seed);
}

/* Write through the core and into the model. */
static void put(struct nvmefs_vol *vol, struct nvmefs_inode *in, const uint8_t *src, size_t len,
		uint64_t off)
{
	CHECK_ERR(nvmefs_data_pwrite(vol, in, src, len, off), (ssize_t)len);
	if (off + len > model_size)
		model_size = off + len;
	memcpy(model + off, src, len);
}

/* The file reads back as the model, aligned and not. */
static void check_all(struct nvmefs_vol *vol, struct nvmefs_inode *in, const char *when)
{
	uint8_t *got = aligned(16 * MiB);
	ssize_t n;

	if (!got)
		return;
	n = nvmefs_data_pread(vol, in, got, 16 * MiB, 0);
	CHECKF(n == (ssize_t)model_size, "%s: read %zd of %zu", when, n, model_size);
	CHECKF(n > 0 && !memcmp(got, model, (size_t)n), "%s: aligned read differs", when);
	n = nvmefs_data_pread(vol, in, got + 1, 5000, 4093);
	CHECKF(n == 5000 && !memcmp(got + 1, model + 4093, 5000), "%s: unaligned read", when);
	free(got);
}

static void test_io(struct nvmefs_vol *vol, struct nvmefs_inode *in)
{
	uint8_t *src = aligned(8 * MiB), small[7000];
	uint64_t zc0 = atomic_load(&vol->stats.zero_copy_writes);
	uint64_t cp0 = atomic_load(&vol->stats.copied_bytes);
	uint64_t edges0 = atomic_load(&vol->stats.edge_reads);
	ssize_t n;

	if (!src)
		return;
	fill(src, 8 * MiB, 1);
	put(vol, in, src, 8 * MiB, 0); /* aligned: straight from src */
	CHECK(atomic_load(&vol->stats.zero_copy_writes) > zc0);
	CHECKF(atomic_load(&vol->stats.copied_bytes) == cp0, "%llu bytes copied",
	       (unsigned long long)(atomic_load(&vol->stats.copied_bytes) - cp0));
	check_all(vol, in, "after an aligned write");
	CHECKF(atomic_load(&vol->stats.copied_bytes) - cp0 == 5000, "an unaligned read copies");
	fill(small, sizeof(small), 2); /* unaligned, inside: edges read */
	put(vol, in, small, sizeof(small), 3 * MiB + 123);
	CHECK(atomic_load(&vol->stats.edge_reads) > edges0);
	check_all(vol, in, "after an unaligned overwrite");
	fill(small, sizeof(small), 3); /* unaligned, past EOF over a hole */
	put(vol, in, small, sizeof(small), 12 * MiB + 5);
	check_all(vol, in, "after a write past a hole");
	n = nvmefs_data_pread(vol, in, small, sizeof(small), model_size - 100);
	CHECK_ERR(n, 100); /* short at EOF */
	CHECK_ERR(nvmefs_data_pread(vol, in, small, sizeof(small), model_size + 4096), 0);
	free(src);
}

/* FALLOC_FL_ZERO_RANGE (xfstests' fzero): the range reads as zeros, its
 * partial blocks keep the bytes around it; past EOF it extends the size,
 * unless KEEP_SIZE; with PUNCH_HOLE, or a punch without KEEP_SIZE, it is
 * refused. Before, every ZERO_RANGE was EOPNOTSUPP. */
static void test_zero_range(struct nvmefs_vol *vol, struct nvmefs_inode *in, uint64_t ino)
{
	uint64_t size;

	CHECK_ERR(nvmefs_ns_fallocate(vol, ino, FALLOC_FL_ZERO_RANGE, 1000, 3 * MiB + 5), 0);
	memset(model + 1000, 0, 3 * MiB + 5);
	CHECK(in->size == model_size);
	check_all(vol, in, "after zeroing a range");
	size = model_size;
	CHECK_ERR(nvmefs_ns_fallocate(vol, ino, FALLOC_FL_ZERO_RANGE, size - 10, 8192), 0);
	memset(model + size - 10, 0, 8192);
	model_size = size - 10 + 8192;
	CHECK(in->size == model_size);
	check_all(vol, in, "after zeroing past EOF");
	CHECK_ERR(nvmefs_ns_fallocate(vol, ino, FALLOC_FL_ZERO_RANGE | FALLOC_FL_KEEP_SIZE,
				      model_size + 4096, 4096),
		  0);
	CHECK(in->size == model_size);
	CHECK_ERR(
		nvmefs_ns_fallocate(vol, ino, FALLOC_FL_ZERO_RANGE | FALLOC_FL_PUNCH_HOLE, 0, 4096),
		-EOPNOTSUPP);
	CHECK_ERR(nvmefs_ns_fallocate(vol, ino, FALLOC_FL_PUNCH_HOLE, 0, 4096), -EOPNOTSUPP);
	check_all(vol, in, "after the refused modes");
}

int main(int argc, char **argv)
{
	const struct nvmefs_cred cred = {.uid = 0};
	struct nvmefs_inode *in;
	struct nvmefs_vol *vol;
	struct stat st;
	uint64_t ino = 0;

	if (argc < 2)
		TEST_SKIP("usage: test_data BUILD_DIR");
	model = calloc(1, 16 * MiB);
	vol = test_vol_setup(argv[1]);
	if (vol && model) {
		CHECK_ERR(nvmefs_vol_start(vol), 0);
		CHECK_ERR(nvmefs_ns_create(vol, &cred, NVMEFS_ROOT_INO, "d", 0644, &st, &in), 0);
		ino = st.st_ino;
		test_io(vol, in);
		CHECK(in->size == model_size);
		test_zero_range(vol, in, ino);
		nvmefs_ns_release(vol, ino);
		nvmefs_ns_forget(vol, ino, 1);
		CHECK_ERR(nvmefs_vol_close(vol), 0);
		vol = test_vol_reopen();
	}
	if (vol && ino) {
		CHECK_ERR(nvmefs_vol_start(vol), 0);
		CHECK_ERR(nvmefs_ns_open(vol, ino, O_RDONLY, &in), 0);
		check_all(vol, in, "after close and open");
		nvmefs_ns_release(vol, ino);
	}
	test_vol_teardown(vol);
	free(model);
	return test_result();
}
