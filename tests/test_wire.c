// SPDX-License-Identifier: MIT
/*
 * The native protocol's checks (fs/native/wire.c, include/nvmefs/wire.h),
 * which both the daemon and libnvmefs run on what the other end sends:
 *  - nvmefs_wire_parse over a table of messages, each copied into a buffer
 *    of exactly its length (so that ASan sees a read past it): what each
 *    side accepts and the error of each refusal (truncated, magic, version,
 *    types the side never receives, flags, counts, bodies);
 *  - nvmefs_wire_sqe_at from an unaligned buffer;
 *  - nvmefs_wire_check_sqe over a table of edges (exact fits, one byte
 *    over, sums that wrap around 2^64, modes, ops, flags), then against an
 *    oracle in 128-bit arithmetic (wire_oracle.h, which fuzz/fuzz_wire.c
 *    shares) on a million seeded random entries.
 * No mount, no root. usage: test_wire   (exit 0 pass, 1 fail)
 */
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nvmefs/wire.h"
#include "wire_oracle.h"

#define HDR   sizeof(struct nvmefs_wire_hdr)
#define SQE   sizeof(struct nvmefs_wire_sqe)
#define CQE   sizeof(struct nvmefs_wire_cqe)
#define HELLO sizeof(struct nvmefs_wire_hello)
#define WSTAT sizeof(struct nvmefs_wire_stat)
#define MAXB  NVMEFS_WIRE_MAX_BATCH

static int nfail;

#define CHECK(cond, ...)                                                                           \
	do {                                                                                       \
		if (!(cond)) {                                                                     \
			fprintf(stderr, "FAIL line %d: ", __LINE__);                               \
			fprintf(stderr, __VA_ARGS__);                                              \
			fputc('\n', stderr);                                                       \
			nfail++;                                                                   \
		}                                                                                  \
	} while (0)

/* One message: a header with these fields, then body bytes. */
struct pcase {
	const char *what;
	int from_client;
	uint32_t magic;
	uint16_t version, type;
	uint32_t count, flags;
	size_t len; /* of the whole message */
	int want;
};

#define LREQ sizeof(struct nvmefs_wire_layout_req)
#define M    NVMEFS_WIRE_MAGIC
#define V    NVMEFS_WIRE_VERSION

static const struct pcase pcases[] = {
	{"empty", 1, M, V, NVMEFS_WIRE_HELLO, 0, 0, 0, -EBADMSG},
	{"1 byte", 1, M, V, NVMEFS_WIRE_HELLO, 0, 0, 1, -EBADMSG},
	{"a header less a byte", 1, M, V, NVMEFS_WIRE_HELLO, 0, 0, HDR - 1, -EBADMSG},
	{"HELLO", 1, M, V, NVMEFS_WIRE_HELLO, 0, 0, HDR, 0},
	{"REG_FD", 1, M, V, NVMEFS_WIRE_REG_FD, 0, 0, HDR, 0},
	{"UNREG_FD", 1, M, V, NVMEFS_WIRE_UNREG_FD, 0, 0, HDR, 0},
	{"REG_MEM", 1, M, V, NVMEFS_WIRE_REG_MEM, 0, 0, HDR, 0},
	{"UNREG_MEM", 1, M, V, NVMEFS_WIRE_UNREG_MEM, 0, 0, HDR, 0},
	{"wrong magic", 1, M ^ 0x100, V, NVMEFS_WIRE_HELLO, 0, 0, HDR, -EBADMSG},
	{"magic byte-swapped", 1, 0x4e564d46u, V, NVMEFS_WIRE_HELLO, 0, 0, HDR, -EBADMSG},
	{"version 0", 1, M, 0, NVMEFS_WIRE_HELLO, 0, 0, HDR, -EPROTO},
	{"version 2", 1, M, V + 1, NVMEFS_WIRE_HELLO, 0, 0, HDR, -EPROTO},
	{"version 0xffff", 1, M, 0xffff, NVMEFS_WIRE_SUBMIT, 1, 0, HDR + SQE, -EPROTO},
	{"type 0", 1, M, V, 0, 0, 0, HDR, -EOPNOTSUPP},
	{"type 11", 1, M, V, 11, 0, 0, HDR, -EOPNOTSUPP},
	{"LAYOUT", 1, M, V, NVMEFS_WIRE_LAYOUT, 1, 0, HDR + LREQ, 0},
	{"LAYOUT with no request", 1, M, V, NVMEFS_WIRE_LAYOUT, 0, 0, HDR, -EBADMSG},
	{"LAYOUT with two", 1, M, V, NVMEFS_WIRE_LAYOUT, 2, 0, HDR + 2 * LREQ, -EBADMSG},
	{"LAYOUT a byte short", 1, M, V, NVMEFS_WIRE_LAYOUT, 1, 0, HDR + LREQ - 1, -EBADMSG},
	{"LAYOUT to the client", 0, M, V, NVMEFS_WIRE_LAYOUT, 1, 0, HDR + LREQ, -EOPNOTSUPP},
	{"type 0xffff", 1, M, V, 0xffff, 0, 0, HDR, -EOPNOTSUPP},
	{"REPLY to the daemon", 1, M, V, NVMEFS_WIRE_REPLY, 0, 0, HDR, -EOPNOTSUPP},
	{"COMPLETE to the daemon", 1, M, V, NVMEFS_WIRE_COMPLETE, 1, 0, HDR + CQE, -EOPNOTSUPP},
	{"HELLO to the client", 0, M, V, NVMEFS_WIRE_HELLO, 0, 0, HDR, -EOPNOTSUPP},
	{"SUBMIT to the client", 0, M, V, NVMEFS_WIRE_SUBMIT, 1, 0, HDR + SQE, -EOPNOTSUPP},
	{"flags 1", 1, M, V, NVMEFS_WIRE_HELLO, 0, 1, HDR, -EBADMSG},
	{"flags top bit", 1, M, V, NVMEFS_WIRE_SUBMIT, 1, 1u << 31, HDR + SQE, -EBADMSG},
	{"HELLO counting 1", 1, M, V, NVMEFS_WIRE_HELLO, 1, 0, HDR, -EBADMSG},
	{"HELLO with a body", 1, M, V, NVMEFS_WIRE_HELLO, 0, 0, HDR + 1, -EBADMSG},
	{"REG_MEM with a hello-sized body", 1, M, V, NVMEFS_WIRE_REG_MEM, 0, 0, HDR + HELLO,
	 -EBADMSG},
	{"SUBMIT of 1", 1, M, V, NVMEFS_WIRE_SUBMIT, 1, 0, HDR + SQE, 0},
	{"SUBMIT of 256", 1, M, V, NVMEFS_WIRE_SUBMIT, MAXB, 0, HDR + MAXB *SQE, 0},
	{"SUBMIT of 0", 1, M, V, NVMEFS_WIRE_SUBMIT, 0, 0, HDR, -EBADMSG},
	{"SUBMIT of 257", 1, M, V, NVMEFS_WIRE_SUBMIT, MAXB + 1, 0, HDR + (MAXB + 1) * SQE,
	 -EBADMSG},
	{"SUBMIT counting 2, 1 there", 1, M, V, NVMEFS_WIRE_SUBMIT, 2, 0, HDR + SQE, -EBADMSG},
	{"SUBMIT counting 1, 2 there", 1, M, V, NVMEFS_WIRE_SUBMIT, 1, 0, HDR + 2 * SQE, -EBADMSG},
	{"SUBMIT of 1 and a byte", 1, M, V, NVMEFS_WIRE_SUBMIT, 1, 0, HDR + SQE + 1, -EBADMSG},
	{"SUBMIT of 1 less a byte", 1, M, V, NVMEFS_WIRE_SUBMIT, 1, 0, HDR + SQE - 1, -EBADMSG},
	{"SUBMIT counting 2^32-1", 1, M, V, NVMEFS_WIRE_SUBMIT, UINT32_MAX, 0, HDR + SQE, -EBADMSG},
	/* 2^32 / 48 * 48 wraps to a small product in 32 bits; not in size_t */
	{"SUBMIT counting 89478486", 1, M, V, NVMEFS_WIRE_SUBMIT, 89478486u, 0, HDR + 32, -EBADMSG},
	{"REPLY", 0, M, V, NVMEFS_WIRE_REPLY, 0, 0, HDR, 0},
	{"REPLY with a hello", 0, M, V, NVMEFS_WIRE_REPLY, 0, 0, HDR + HELLO, 0},
	{"REPLY with a short hello", 0, M, V, NVMEFS_WIRE_REPLY, 0, 0, HDR + HELLO - 1, -EBADMSG},
	{"REPLY with a long hello", 0, M, V, NVMEFS_WIRE_REPLY, 0, 0, HDR + HELLO + 1, -EBADMSG},
	{"REPLY counting 1", 0, M, V, NVMEFS_WIRE_REPLY, 1, 0, HDR, -EBADMSG},
	{"REPLY with a stat", 0, M, V, NVMEFS_WIRE_REPLY, 0, 0, HDR + WSTAT, 0},
	{"REPLY with a short stat", 0, M, V, NVMEFS_WIRE_REPLY, 0, 0, HDR + WSTAT - 1, -EBADMSG},
	{"CREATE of a 1-byte name", 1, M, V, NVMEFS_WIRE_CREATE, 1, 0, HDR + 1, 0},
	{"CREATE of a 255-byte name", 1, M, V, NVMEFS_WIRE_CREATE, 255, 0, HDR + 255, 0},
	{"CREATE of no name", 1, M, V, NVMEFS_WIRE_CREATE, 0, 0, HDR, -EBADMSG},
	{"CREATE of a 256-byte name", 1, M, V, NVMEFS_WIRE_CREATE, 256, 0, HDR + 256, -EBADMSG},
	{"CREATE counting 2, 3 there", 1, M, V, NVMEFS_WIRE_CREATE, 2, 0, HDR + 3, -EBADMSG},
	{"CREATE counting 3, 2 there", 1, M, V, NVMEFS_WIRE_CREATE, 3, 0, HDR + 2, -EBADMSG},
	{"CREATE to the client", 0, M, V, NVMEFS_WIRE_CREATE, 1, 0, HDR + 1, -EOPNOTSUPP},
	{"COMPLETE of 1", 0, M, V, NVMEFS_WIRE_COMPLETE, 1, 0, HDR + CQE, 0},
	{"COMPLETE of 256", 0, M, V, NVMEFS_WIRE_COMPLETE, MAXB, 0, HDR + MAXB *CQE, 0},
	{"COMPLETE of 0", 0, M, V, NVMEFS_WIRE_COMPLETE, 0, 0, HDR, -EBADMSG},
	{"COMPLETE of 257", 0, M, V, NVMEFS_WIRE_COMPLETE, MAXB + 1, 0, HDR + (MAXB + 1) * CQE,
	 -EBADMSG},
	{"COMPLETE with submission-sized entries", 0, M, V, NVMEFS_WIRE_COMPLETE, 1, 0, HDR + SQE,
	 -EBADMSG},
};

static void test_parse(void)
{
	for (size_t i = 0; i < sizeof(pcases) / sizeof(pcases[0]); i++) {
		const struct pcase *pc = &pcases[i];
		struct nvmefs_wire_hdr h = {.magic = pc->magic,
					    .version = pc->version,
					    .type = pc->type,
					    .count = pc->count,
					    .flags = pc->flags,
					    .arg = -1,
					    .arg2 = 42};
		uint8_t full[HDR + (MAXB + 1) * SQE];
		struct nvmefs_wire_msg m;
		uint8_t *buf;
		int ret;

		memset(full, 0xa5, sizeof(full));
		memcpy(full, &h, sizeof(h));
		/* Exactly len bytes: ASan catches a read past them. */
		buf = malloc(pc->len ? pc->len : 1);
		if (!buf)
			abort();
		memcpy(buf, full, pc->len);
		memset(&m, 0, sizeof(m));
		ret = nvmefs_wire_parse(buf, pc->len, pc->from_client, &m);
		CHECK(ret == pc->want, "parse %s: %d, want %d", pc->what, ret, pc->want);
		if (!ret && !pc->want) {
			CHECK(m.entries == buf + HDR, "%s: entries after the header", pc->what);
			CHECK(m.hdr.arg == -1 && m.hdr.arg2 == 42 && m.hdr.count == pc->count,
			      "%s: the header as sent", pc->what);
			CHECK(m.entry_size == (pc->type == NVMEFS_WIRE_SUBMIT	  ? SQE
					       : pc->type == NVMEFS_WIRE_COMPLETE ? CQE
					       : pc->type == NVMEFS_WIRE_CREATE	  ? 1
					       : pc->type == NVMEFS_WIRE_LAYOUT	  ? LREQ
										  : 0),
			      "%s: entry size %zu", pc->what, m.entry_size);
		}
		free(buf);
	}
}

/* CREATE's name: what a directory entry may be called, nothing else. */
static void test_create_names(void)
{
	static const struct {
		const char *name;
		size_t len;
		int want;
	} cases[] = {
		{"a", 1, 0},	    {"..a", 3, 0},	   {".hidden", 7, 0},
		{".", 1, -EBADMSG}, {"..", 2, -EBADMSG},   {"a/b", 3, -EBADMSG},
		{"/", 1, -EBADMSG}, {"a\0b", 3, -EBADMSG}, {"\0", 1, -EBADMSG},
		{"...", 3, 0},
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct nvmefs_wire_hdr h = {.magic = M,
					    .version = V,
					    .type = NVMEFS_WIRE_CREATE,
					    .count = (uint32_t)cases[i].len};
		uint8_t buf[HDR + 16];
		struct nvmefs_wire_msg m;
		int ret;

		memcpy(buf, &h, sizeof(h));
		memcpy(buf + HDR, cases[i].name, cases[i].len);
		ret = nvmefs_wire_parse(buf, HDR + cases[i].len, 1, &m);
		CHECK(ret == cases[i].want, "CREATE of name %zu (%zu bytes): %d, want %d", i,
		      cases[i].len, ret, cases[i].want);
	}
}

/* Entries come out whole from any alignment. */
static void test_sqe_at(void)
{
	struct nvmefs_wire_sqe in[3], out;
	uint8_t raw[1 + HDR + sizeof(in)];
	struct nvmefs_wire_hdr h = {
		.magic = M, .version = V, .type = NVMEFS_WIRE_SUBMIT, .count = 3};
	struct nvmefs_wire_msg m;

	for (uint32_t i = 0; i < 3; i++)
		in[i] = (struct nvmefs_wire_sqe){.user_data = 0x1111111111111111ull * (i + 1),
						 .off = UINT64_MAX - i,
						 .len = 4096u << i,
						 .mem_off = i,
						 .handle = 7 + i,
						 .region = 9 + i,
						 .op = NVMEFS_WIRE_READ + i};
	memcpy(raw + 1, &h, sizeof(h));
	memcpy(raw + 1 + HDR, in, sizeof(in));
	CHECK(!nvmefs_wire_parse(raw + 1, HDR + sizeof(in), 1, &m), "an unaligned SUBMIT parses");
	for (uint32_t i = 0; i < 3; i++) {
		nvmefs_wire_sqe_at(&m, i, &out);
		CHECK(!memcmp(&out, &in[i], SQE), "entry %u from an unaligned message", i);
	}
}

/* One entry against tables. */
struct scase {
	const char *what;
	uint32_t op, flags;
	unsigned may;
	uint64_t off, len, mem_off, region, max_len, max_off;
	int want;
};

#define R    NVMEFS_WIRE_READ
#define W    NVMEFS_WIRE_WRITE
#define F    NVMEFS_WIRE_FSYNC
#define RW   (NVMEFS_WIRE_MAY_READ | NVMEFS_WIRE_MAY_WRITE)
#define MRD  NVMEFS_WIRE_MAY_READ
#define MWR  NVMEFS_WIRE_MAY_WRITE
#define U64  UINT64_MAX
#define MIB  (1ull << 20)
#define BIG  (1ull << 40)
#define FMAX (1ull << 56)

static const struct scase scases[] = {
	{"read", R, 0, RW, 0, 4096, 0, MIB, BIG, FMAX, 0},
	{"write", W, 0, RW, 0, 4096, 0, MIB, BIG, FMAX, 0},
	{"read, read-only", R, 0, MRD, 0, 4096, 0, MIB, BIG, FMAX, 0},
	{"write, write-only", W, 0, MWR, 0, 4096, 0, MIB, BIG, FMAX, 0},
	{"write, read-only", W, 0, MRD, 0, 4096, 0, MIB, BIG, FMAX, -EBADF},
	{"read, write-only", R, 0, MWR, 0, 4096, 0, MIB, BIG, FMAX, -EBADF},
	{"read, no handle", R, 0, 0, 0, 4096, 0, MIB, BIG, FMAX, -EBADF},
	{"fsync", F, 0, MRD, U64, U64, U64, 0, 0, 0, 0},
	{"fsync, write-only", F, 0, MWR, 0, 0, 0, 0, BIG, FMAX, 0},
	{"fsync, no handle", F, 0, 0, 0, 0, 0, MIB, BIG, FMAX, -EBADF},
	{"op 0", 0, 0, RW, 0, 4096, 0, MIB, BIG, FMAX, -EINVAL},
	{"op 4", 4, 0, RW, 0, 4096, 0, MIB, BIG, FMAX, -EINVAL},
	{"op 2^32-1", UINT32_MAX, 0, RW, 0, 4096, 0, MIB, BIG, FMAX, -EINVAL},
	{"behind, write", W, NVMEFS_WIRE_SQE_BEHIND, RW, 0, 4096, 0, MIB, BIG, FMAX, 0},
	{"behind, read", R, NVMEFS_WIRE_SQE_BEHIND, RW, 0, 4096, 0, MIB, BIG, FMAX, -EINVAL},
	{"behind, fsync", F, NVMEFS_WIRE_SQE_BEHIND, RW, 0, 0, 0, 0, BIG, FMAX, -EINVAL},
	{"an unknown flag, write", W, 2, RW, 0, 4096, 0, MIB, BIG, FMAX, -EINVAL},
	{"behind and an unknown flag", W, 3, RW, 0, 4096, 0, MIB, BIG, FMAX, -EINVAL},
	{"an unknown flag, read", R, 1u << 31, RW, 0, 4096, 0, MIB, BIG, FMAX, -EINVAL},
	{"an unknown flag, fsync", F, 0x80000000u, RW, 0, 0, 0, 0, BIG, FMAX, -EINVAL},
	{"the whole region", R, 0, RW, 0, MIB, 0, MIB, BIG, FMAX, 0},
	{"the region and a byte", R, 0, RW, 0, MIB + 1, 0, MIB, BIG, FMAX, -EFAULT},
	{"the region's last byte", R, 0, RW, 0, 1, MIB - 1, MIB, BIG, FMAX, 0},
	{"a byte past the region", R, 0, RW, 0, 1, MIB, MIB, BIG, FMAX, -EFAULT},
	{"0 bytes at the region's end", R, 0, RW, 0, 0, MIB, MIB, BIG, FMAX, 0},
	{"0 bytes past the region's end", R, 0, RW, 0, 0, MIB + 1, MIB, BIG, FMAX, -EFAULT},
	{"straddling the region's end", W, 0, RW, 0, 8192, MIB - 4096, MIB, BIG, FMAX, -EFAULT},
	{"mem_off + len wraps", W, 0, RW, 0, 4096, U64 - 100, MIB, BIG, FMAX, -EFAULT},
	{"mem_off + len wraps to 0", W, 0, RW, 0, 2, U64 - 1, MIB, BIG, U64, -EFAULT},
	{"no region", R, 0, RW, 0, 4096, 0, 0, BIG, FMAX, -EFAULT},
	{"0 bytes, no region", R, 0, RW, 0, 0, 0, 0, BIG, FMAX, 0},
	{"len at max_len", R, 0, RW, 0, MIB, 0, MIB, MIB, FMAX, 0},
	{"len above max_len", R, 0, RW, 0, MIB + 1, 0, U64, MIB, FMAX, -EINVAL},
	{"len 2^64-1", R, 0, RW, 0, U64, 0, U64, BIG, FMAX, -EINVAL},
	{"up to the largest file", W, 0, RW, FMAX - 4096, 4096, 0, MIB, BIG, FMAX, 0},
	{"a byte past the largest file", W, 0, RW, FMAX - 4095, 4096, 0, MIB, BIG, FMAX, -EFBIG},
	{"at the largest file, 0 bytes", R, 0, RW, FMAX, 0, 0, MIB, BIG, FMAX, 0},
	{"off past the largest file", R, 0, RW, FMAX + 1, 0, 0, MIB, BIG, FMAX, -EFBIG},
	{"off + len wraps", W, 0, RW, U64 - 100, 4096, 0, MIB, BIG, FMAX, -EFBIG},
	{"off + len wraps, max_off 2^64-1", W, 0, RW, U64 - 100, 4096, 0, MIB, BIG, U64, -EFBIG},
	{"off + len is 2^64", W, 0, RW, U64 - 4095, 4096, 0, MIB, BIG, U64, -EFBIG},
};

static void test_check_sqe_table(void)
{
	for (size_t i = 0; i < sizeof(scases) / sizeof(scases[0]); i++) {
		const struct scase *sc = &scases[i];
		struct nvmefs_wire_sqe e = {.off = sc->off,
					    .len = sc->len,
					    .mem_off = sc->mem_off,
					    .op = sc->op,
					    .flags = sc->flags};
		int ret = nvmefs_wire_check_sqe(&e, sc->may, sc->region, sc->max_len, sc->max_off);

		CHECK(ret == sc->want, "check %s: %d, want %d", sc->what, ret, sc->want);
	}
}

static uint64_t rng = 0x853c49e6748fea9bull;

static uint64_t next(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

/* A value near an edge: small, near 2^64, near a power of two, or any. */
static uint64_t edgy(void)
{
	uint64_t r = next(), small = next() % 8193;

	switch (r % 5) {
	case 0:
		return small;
	case 1:
		return UINT64_MAX - small;
	case 2:
		return (1ull << (next() % 64)) + small - 4096;
	case 3:
		return (1ull << (next() % 64)) - small;
	default:
		return next();
	}
}

static void test_check_sqe_random(void)
{
	unsigned long counts[5] = {0};

	for (unsigned i = 0; i < 1000000 && nfail < 20; i++) {
		uint64_t r = next();
		struct nvmefs_wire_sqe e = {.user_data = next(),
					    .off = edgy(),
					    .len = edgy(),
					    .mem_off = edgy(),
					    .handle = (uint32_t)next(),
					    .region = (uint32_t)next(),
					    .op = (uint32_t)(r % 5),
					    .flags = (r >> 8) % 64 == 0 ? (uint32_t)(r >> 24) % 4
									: 0};
		unsigned may = (unsigned)(r >> 16) % 4;
		uint64_t region = edgy(), max_len = r >> 20 & 1 ? BIG : edgy(),
			 max_off = r >> 21 & 1 ? FMAX : edgy();
		int got = nvmefs_wire_check_sqe(&e, may, region, max_len, max_off),
		    want = wire_oracle_check_sqe(&e, may, region, max_len, max_off);

		CHECK(got == want,
		      "op %u flags %u may %u off %" PRIu64 " len %" PRIu64 " mem_off %" PRIu64
		      " region %" PRIu64 " max_len %" PRIu64 " max_off %" PRIu64 ": %d, want %d",
		      e.op, e.flags, may, e.off, e.len, e.mem_off, region, max_len, max_off, got,
		      want);
		counts[want == 0	 ? 0
		       : want == -EFAULT ? 1
		       : want == -EFBIG	 ? 2
		       : want == -EBADF	 ? 3
					 : 4]++;
	}
	/* The random entries reached every answer. */
	for (int k = 0; k < 5; k++)
		CHECK(counts[k] > 1000, "answer %d given only %lu times", k, counts[k]);
}

int main(void)
{
	test_parse();
	test_create_names();
	test_sqe_at();
	test_check_sqe_table();
	test_check_sqe_random();
	if (nfail) {
		fprintf(stderr, "test_wire: %d checks failed\n", nfail);
		return 1;
	}
	printf("test_wire: %zu messages, %zu entries, 1000000 random entries: all as wire.h says\n",
	       sizeof(pcases) / sizeof(pcases[0]), sizeof(scases) / sizeof(scases[0]));
	return 0;
}
