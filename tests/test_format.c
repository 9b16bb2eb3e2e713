// SPDX-License-Identifier: MIT
/*
 * fs/core/format.c: every on-disk structure round-trips through its encoder and
 * decoder, and the decoders refuse what is not well formed: every single
 * flipped bit of a label, superblock, journal transaction and checkpoint
 * block; truncated and over-long records; names with '/' or NUL; bad
 * layouts, versions and lengths; the UUID's text both ways.
 */
#include <endian.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "format.h"
#include "test_util.h"

static const uint8_t uuid[16] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};

static void make_label(struct nvmefs_label *l)
{
	memset(l, 0, sizeof(*l));
	memcpy(l->uuid, uuid, 16);
	strcpy(l->name, "vol");
	l->index = 1;
	l->count = 3;
	l->chunk_size = 1 << 20;
	l->created_ns = 123456789;
	for (int i = 0; i < 3; i++)
		l->dev_size[i] = 256ull << 20;
	l->meta_off = NVMEFS_BLOCK;
	l->runs_size = 16 << 20;
	l->journal_size = 4 << 20;
	l->meta_size = 2 * NVMEFS_BLOCK + l->runs_size + l->journal_size;
	l->data_start = NVMEFS_BLOCK;
	l->data_end = (256ull << 20) - NVMEFS_BLOCK;
}

static void test_label(void)
{
	struct nvmefs_label l, out;
	static uint8_t blk[NVMEFS_BLOCK], bad[NVMEFS_BLOCK];
	unsigned refused = 0;

	make_label(&l);
	nvmefs_label_encode(&l, blk);
	CHECK_ERR(nvmefs_label_decode(&out, blk), 0);
	CHECK(memcmp(&l, &out, sizeof(l)) == 0);
	CHECK(nvmefs_label_magic(blk));
	/* Every bit flip anywhere in the block is caught. */
	for (unsigned bit = 0; bit < NVMEFS_BLOCK * 8; bit++) {
		memcpy(bad, blk, sizeof(bad));
		bad[bit / 8] ^= (uint8_t)(1u << (bit % 8));
		refused += nvmefs_label_decode(&out, bad) != 0;
	}
	CHECKF(refused == NVMEFS_BLOCK * 8, "%u of %u flips refused", refused, NVMEFS_BLOCK * 8);
	memset(bad, 0, sizeof(bad));
	CHECK(nvmefs_label_decode(&out, bad) != 0);
	/* Fields that cannot be true are refused even with a good crc. */
	l.index = 3;
	nvmefs_label_encode(&l, bad);
	CHECK_ERR(nvmefs_label_decode(&out, bad), -EINVAL);
	make_label(&l);
	l.chunk_size = 3 << 20;
	nvmefs_label_encode(&l, bad);
	CHECK_ERR(nvmefs_label_decode(&out, bad), -EINVAL);
	make_label(&l);
	l.data_end = l.dev_size[1];
	nvmefs_label_encode(&l, bad);
	CHECK_ERR(nvmefs_label_decode(&out, bad), -EINVAL);
	make_label(&l);
	l.meta_size += NVMEFS_BLOCK;
	nvmefs_label_encode(&l, bad);
	CHECK_ERR(nvmefs_label_decode(&out, bad), -EINVAL);
	/* Parts whose size only adds up modulo 2^64 (found by fuzz_label). */
	make_label(&l);
	l.runs_size = (1ull << 63) + 3 * NVMEFS_BLOCK;
	l.journal_size = (1ull << 63) - 2 * NVMEFS_BLOCK;
	l.meta_size = 2 * NVMEFS_BLOCK + l.runs_size + l.journal_size; /* wraps */
	nvmefs_label_encode(&l, bad);
	CHECK_ERR(nvmefs_label_decode(&out, bad), -EINVAL);
	/* A run area too small for its two manifest slots and a run. */
	make_label(&l);
	l.runs_size = NVMEFS_RUNS_MIN - NVMEFS_BLOCK;
	l.meta_size = 2 * NVMEFS_BLOCK + l.runs_size + l.journal_size;
	nvmefs_label_encode(&l, bad);
	CHECK_ERR(nvmefs_label_decode(&out, bad), -EINVAL);
	/* No area over the label in block 0 (found by fuzz_label). */
	make_label(&l);
	l.data_start = 0;
	nvmefs_label_encode(&l, bad);
	CHECK_ERR(nvmefs_label_decode(&out, bad), -EINVAL);
	make_label(&l);
	l.meta_off = 0;
	nvmefs_label_encode(&l, bad);
	CHECK_ERR(nvmefs_label_decode(&out, bad), -EINVAL);
	/* Another version, older (a v1 volume) or newer, is told apart from
	 * garbage. */
	for (uint8_t v = 1; v <= 3; v += 2) {
		/* re-seal the crc by hand so only the version differs */
		uint32_t crc;

		make_label(&l);
		nvmefs_label_encode(&l, bad);
		bad[8] = v;
		memset(bad + 12, 0, 4);
		crc = nvmefs_crc32c(bad, NVMEFS_BLOCK);
		memcpy(bad + 12, &crc, 4);
		CHECK_ERR(nvmefs_label_decode(&out, bad), -EPROTO);
		CHECK_ERR(nvmefs_label_version(bad), v);
	}
	CHECK_ERR(nvmefs_label_version(blk), NVMEFS_FORMAT_VERSION);
}

static void test_super(void)
{
	struct nvmefs_super s = {.seq = 7, .manifest_floor = 42, .clean = 1};
	struct nvmefs_super out;
	static uint8_t blk[NVMEFS_BLOCK];

	memcpy(s.uuid, uuid, 16);
	nvmefs_super_encode(&s, blk);
	memset(&out, 0xa5, sizeof(out)); /* padding included: compare fields */
	CHECK_ERR(nvmefs_super_decode(&out, blk), 0);
	CHECK(!memcmp(s.uuid, out.uuid, 16) && s.seq == out.seq &&
	      s.manifest_floor == out.manifest_floor && s.clean == out.clean);
	blk[100] ^= 4;
	CHECK(nvmefs_super_decode(&out, blk) != 0);
}

static size_t put_rec(uint8_t *buf, const struct nvmefs_rec *r)
{
	return nvmefs_rec_encode(r, buf);
}

static void test_records(void)
{
	static uint8_t buf[NVMEFS_REC_MAX + 64];
	struct nvmefs_rec r = {.type = NVMEFS_REC_INODE}, out;
	size_t n;
	long got;

	r.inode.ino = 5;
	r.inode.mode = S_IFREG | 0644;
	r.inode.nlink = 1;
	r.inode.size = 12345;
	r.inode.mtime = (struct nvmefs_time){-5, 999999999};
	nvmefs_layout_init(&r.inode.layout, 1 << 20, 4, 2);
	n = put_rec(buf, &r);
	CHECK(n == nvmefs_rec_size(&r));
	got = nvmefs_rec_decode(&out, buf, n);
	CHECK(got == (long)n);
	CHECK(out.inode.ino == 5 && out.inode.size == 12345 && out.inode.mtime.sec == -5 &&
	      out.inode.mtime.nsec == 999999999 && out.inode.layout.devs[0] == 2);
	/* Every truncation of a record is refused. */
	for (size_t k = 0; k < n; k++)
		CHECKF(nvmefs_rec_decode(&out, buf, k) < 0, "truncated to %zu accepted", k);
	/* So is every record whose own length ends early, also inside the
	 * device list (this used to memcpy from NULL). */
	for (uint32_t k = 8; k < n; k++) {
		uint32_t le = htole32(k);

		put_rec(buf, &r);
		memcpy(buf + 4, &le, 4);
		CHECKF(nvmefs_rec_decode(&out, buf, n) < 0, "length %u accepted", k);
	}
	put_rec(buf, &r);
	/* A symlink inode carries its target; a file may not. */
	memset(&r, 0, sizeof(r));
	r.type = NVMEFS_REC_INODE;
	r.inode.ino = 6;
	r.inode.mode = S_IFLNK | 0777;
	r.inode.target = "some/where";
	r.inode.target_len = 10;
	n = put_rec(buf, &r);
	CHECK(nvmefs_rec_decode(&out, buf, n) == (long)n);
	CHECK(out.inode.target_len == 10 && !memcmp(out.inode.target, "some/where", 10));
	r.inode.mode = S_IFREG | 0644;
	n = put_rec(buf, &r);
	CHECK(nvmefs_rec_decode(&out, buf, n) < 0);
	/* Bad nanoseconds. */
	memset(&r, 0, sizeof(r));
	r.type = NVMEFS_REC_INODE;
	r.inode.ino = 7;
	r.inode.mode = S_IFDIR | 0755;
	r.inode.atime.nsec = 1000000000;
	n = put_rec(buf, &r);
	CHECK(nvmefs_rec_decode(&out, buf, n) < 0);

	/* Directory entries: names are 1..255 bytes with no '/' or NUL. */
	memset(&r, 0, sizeof(r));
	r.type = NVMEFS_REC_DIRENT_ADD;
	r.dirent.parent = 1;
	r.dirent.child = 9;
	r.dirent.name = "hello";
	r.dirent.name_len = 5;
	n = put_rec(buf, &r);
	CHECK(nvmefs_rec_decode(&out, buf, n) == (long)n);
	CHECK(out.dirent.name_len == 5 && !memcmp(out.dirent.name, "hello", 5));
	r.dirent.name = "a/b";
	r.dirent.name_len = 3;
	n = put_rec(buf, &r);
	CHECK(nvmefs_rec_decode(&out, buf, n) < 0);
	r.dirent.name = "..";
	r.dirent.name_len = 2;
	n = put_rec(buf, &r);
	CHECK(nvmefs_rec_decode(&out, buf, n) < 0);
	r.dirent.name = "a\0b";
	r.dirent.name_len = 3;
	n = put_rec(buf, &r);
	CHECK(nvmefs_rec_decode(&out, buf, n) < 0);

	/* Extents: block-aligned, non-empty, no overflow. */
	memset(&r, 0, sizeof(r));
	r.type = NVMEFS_REC_EXTENT;
	r.extent.ino = 9;
	r.extent.slot = 1;
	r.extent.comp_off = 4096;
	r.extent.dev_off = 1 << 20;
	r.extent.len = 8192;
	n = put_rec(buf, &r);
	CHECK(nvmefs_rec_decode(&out, buf, n) == (long)n);
	CHECK(out.extent.len == 8192 && out.extent.slot == 1);
	r.extent.len = 100;
	n = put_rec(buf, &r);
	CHECK(nvmefs_rec_decode(&out, buf, n) < 0);
	r.extent.len = 4096;
	r.extent.dev_off = UINT64_MAX - 4095;
	n = put_rec(buf, &r);
	CHECK(nvmefs_rec_decode(&out, buf, n) < 0);

	/* xattrs */
	memset(&r, 0, sizeof(r));
	r.type = NVMEFS_REC_XATTR_SET;
	r.xattr.ino = 9;
	r.xattr.name = "user.k";
	r.xattr.name_len = 6;
	r.xattr.value = "";
	r.xattr.value_len = 0;
	n = put_rec(buf, &r);
	CHECK(nvmefs_rec_decode(&out, buf, n) == (long)n);
	r.type = NVMEFS_REC_XATTR_DEL;
	r.xattr.value = "x";
	r.xattr.value_len = 1;
	n = put_rec(buf, &r);
	CHECK(nvmefs_rec_decode(&out, buf, n) < 0);

	/* Unknown type and a length field pointing past the buffer. */
	memset(buf, 0, 16);
	buf[0] = 99;
	buf[4] = 16;
	CHECK(nvmefs_rec_decode(&out, buf, 16) < 0);
	buf[0] = NVMEFS_REC_INODE_FREE;
	buf[4] = 200;
	CHECK(nvmefs_rec_decode(&out, buf, 16) < 0);
}

static void test_txn(void)
{
	static uint8_t buf[3 * NVMEFS_BLOCK];
	struct nvmefs_txn t = {.seq = 77, .nblocks = 2, .payload_len = 5000}, out;
	uint8_t other[16];
	unsigned refused = 0;

	for (size_t i = 0; i < sizeof(buf); i++)
		buf[i] = (uint8_t)(i * 7);
	nvmefs_txn_encode(&t, uuid, buf);
	CHECK_ERR(nvmefs_txn_decode(&out, uuid, buf, 2 * NVMEFS_BLOCK), 0);
	CHECK(out.seq == 77 && out.nblocks == 2 && out.payload_len == 5000 && !out.pad);
	CHECK(nvmefs_txn_nblocks(buf) == 2);
	/* Shorter than the transaction: the end of the log. */
	CHECK(nvmefs_txn_decode(&out, uuid, buf, NVMEFS_BLOCK) != 0);
	/* Another volume's journal. */
	memcpy(other, uuid, 16);
	other[0] ^= 1;
	CHECK(nvmefs_txn_decode(&out, other, buf, 2 * NVMEFS_BLOCK) != 0);
	/* A torn write: any flipped bit in header or payload. */
	for (unsigned bit = 0; bit < (NVMEFS_TXN_HDR + 5000) * 8; bit += 7) {
		buf[bit / 8] ^= (uint8_t)(1u << (bit % 8));
		refused += nvmefs_txn_decode(&out, uuid, buf, 2 * NVMEFS_BLOCK) != 0;
		buf[bit / 8] ^= (uint8_t)(1u << (bit % 8));
	}
	CHECKF(refused == ((NVMEFS_TXN_HDR + 5000) * 8 + 6) / 7, "%u refused", refused);
	/* Bytes after the payload are not covered and may be anything. */
	buf[NVMEFS_TXN_HDR + 5000 + 10] ^= 0xff;
	CHECK_ERR(nvmefs_txn_decode(&out, uuid, buf, 2 * NVMEFS_BLOCK), 0);
}

/* The UUID's text both ways: the exact form tools print (lower case, the
 * label's bytes in order), any case read back, anything else refused and
 * the output left alone. */
static void test_uuid_text(void)
{
	static const uint8_t mixed[16] = {0x0b, 0x6d, 0x2c, 0x1e, 0x4f, 0x3a, 0x4c, 0x1d,
					  0x9e, 0x2f, 0x5a, 0x7b, 0x8c, 0x9d, 0x0e, 0xff};
	static const char *const bad[] = {
		"",
		"0b6d2c1e-4f3a-4c1d-9e2f-5a7b8c9d0eff0", /* 37 characters */
		"0b6d2c1e-4f3a-4c1d-9e2f-5a7b8c9d0ef",	 /* 35 */
		"0b6d2c1e-4f3a-4c1d-9e2f5a7b8c9d0effa",	 /* a hyphen moved */
		"0b6d2c1e:4f3a-4c1d-9e2f-5a7b8c9d0eff",	 /* not a hyphen */
		"0b6d2c1e-4f3a-4c1d-9e2f-5a7b8c9d0efg",	 /* not hex */
		"0b6d2c1e-4f3a-4c1d-9e2f-5a7b8c9d0e f",	 /* a space */
		"{0b6d2c1e-4f3a-4c1d-9e2f-5a7b8c9d0ef}", /* braces */
	};
	char text[NVMEFS_UUID_STR];
	uint8_t out[16];

	nvmefs_uuid_str(uuid, text);
	CHECKF(!strcmp(text, "01020304-0506-0708-090a-0b0c0d0e0f10"), "%s", text);
	nvmefs_uuid_str(mixed, text);
	CHECKF(!strcmp(text, "0b6d2c1e-4f3a-4c1d-9e2f-5a7b8c9d0eff"), "%s", text);
	CHECK_ERR(nvmefs_uuid_parse(text, out), 0);
	CHECK(!memcmp(out, mixed, 16));
	memset(out, 0, sizeof(out));
	CHECK_ERR(nvmefs_uuid_parse("0B6D2C1E-4F3A-4C1D-9E2F-5A7B8C9D0EFF", out), 0);
	CHECK(!memcmp(out, mixed, 16));
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		memset(out, 0xa5, sizeof(out));
		CHECKF(nvmefs_uuid_parse(bad[i], out) == -EINVAL, "'%s' accepted", bad[i]);
		CHECKF(out[0] == 0xa5 && out[15] == 0xa5, "'%s' written out", bad[i]);
	}
}

int main(void)
{
	test_uuid_text();
	test_label();
	test_super();
	test_records();
	test_txn();
	return test_result();
}
