// SPDX-License-Identifier: MIT
/*
 * POSIX ACLs' rules (fs/core/acl.c), table-driven against what Linux's
 * fs/posix_acl.c gives for the same input: which values are ACLs
 * (posix_acl_from_xattr, posix_acl_valid, plus sorted named ids), the mode
 * an access ACL sets (posix_acl_equiv_mode), chmod (posix_acl_chmod) and
 * a new inode's ACL from a default (posix_acl_create_masq), the expected
 * results worked out by hand from the kernel's code and checked on tmpfs
 * with setfacl/getfacl.
 */
#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>

#include "acl_i.h"
#include "test_util.h"

/* Tags, and the id the kernel writes for entries that name no one. */
enum { UO = 0x01, U = 0x02, GO = 0x04, G = 0x08, M = 0x10, O = 0x20 };
#define NOID 0xffffffffu

struct ent {
	uint16_t tag, perm;
	uint32_t id;
};

/* The xattr value of n entries (version ver) in buf: its size. */
static size_t encode(uint8_t *buf, uint32_t ver, const struct ent *e, size_t n)
{
	size_t pos = 4;

	for (int i = 0; i < 4; i++)
		buf[i] = (uint8_t)(ver >> (8 * i));
	for (size_t i = 0; i < n; i++, pos += 8) {
		buf[pos] = (uint8_t)e[i].tag;
		buf[pos + 1] = (uint8_t)(e[i].tag >> 8);
		buf[pos + 2] = (uint8_t)e[i].perm;
		buf[pos + 3] = (uint8_t)(e[i].perm >> 8);
		for (int b = 0; b < 4; b++)
			buf[pos + 4 + b] = (uint8_t)(e[i].id >> (8 * b));
	}
	return pos;
}

/* The permission of the first entry with tag in value. */
static int perm_of(const uint8_t *v, size_t size, uint16_t tag, uint32_t id)
{
	for (size_t pos = 4; pos + 8 <= size; pos += 8) {
		uint16_t t = (uint16_t)(v[pos] | v[pos + 1] << 8);
		uint32_t i = (uint32_t)v[pos + 4] | (uint32_t)v[pos + 5] << 8 |
			     (uint32_t)v[pos + 6] << 16 | (uint32_t)v[pos + 7] << 24;

		if (t == tag && (tag != U && tag != G ? 1 : i == id))
			return v[pos + 2] | v[pos + 3] << 8;
	}
	return -1;
}

#define N(a) (sizeof(a) / sizeof((a)[0]))

static void test_check(void)
{
	static const struct {
		const char *what;
		struct ent e[6];
		size_t n;
		int want;
	} cases[] = {
		{"minimal", {{UO, 6, NOID}, {GO, 4, NOID}, {O, 4, NOID}}, 3, 0},
		{"named with mask",
		 {{UO, 7, NOID},
		  {U, 4, 1001},
		  {U, 6, 1002},
		  {GO, 5, NOID},
		  {M, 7, NOID},
		  {O, 0, NOID}},
		 6,
		 0},
		{"mask, no named",
		 {{UO, 7, NOID}, {GO, 5, NOID}, {M, 5, NOID}, {O, 0, NOID}},
		 4,
		 0},
		{"named, no mask",
		 {{UO, 7, NOID}, {U, 4, 1001}, {GO, 5, NOID}, {O, 0, NOID}},
		 4,
		 -EINVAL},
		{"no other", {{UO, 7, NOID}, {GO, 5, NOID}}, 2, -EINVAL},
		{"no owner", {{GO, 5, NOID}, {O, 0, NOID}}, 2, -EINVAL},
		{"no owning group", {{UO, 7, NOID}, {O, 0, NOID}}, 2, -EINVAL},
		{"two owners",
		 {{UO, 7, NOID}, {UO, 7, NOID}, {GO, 5, NOID}, {O, 0, NOID}},
		 4,
		 -EINVAL},
		{"two masks",
		 {{UO, 7, NOID}, {GO, 5, NOID}, {M, 5, NOID}, {M, 5, NOID}, {O, 0, NOID}},
		 5,
		 -EINVAL},
		{"out of order", {{GO, 5, NOID}, {UO, 7, NOID}, {O, 0, NOID}}, 3, -EINVAL},
		{"ids unsorted",
		 {{UO, 7, NOID},
		  {U, 4, 1002},
		  {U, 4, 1001},
		  {GO, 5, NOID},
		  {M, 7, NOID},
		  {O, 0, NOID}},
		 6,
		 -EINVAL},
		{"ids repeated",
		 {{UO, 7, NOID},
		  {U, 4, 1001},
		  {U, 6, 1001},
		  {GO, 5, NOID},
		  {M, 7, NOID},
		  {O, 0, NOID}},
		 6,
		 -EINVAL},
		{"user and group may share an id",
		 {{UO, 7, NOID},
		  {U, 4, 1001},
		  {GO, 5, NOID},
		  {G, 4, 1001},
		  {M, 7, NOID},
		  {O, 0, NOID}},
		 6,
		 0},
		{"named id -1",
		 {{UO, 7, NOID}, {U, 4, NOID}, {GO, 5, NOID}, {M, 7, NOID}, {O, 0, NOID}},
		 5,
		 -EINVAL},
		{"perm beyond rwx", {{UO, 8, NOID}, {GO, 5, NOID}, {O, 0, NOID}}, 3, -EINVAL},
		{"unknown tag", {{UO, 7, NOID}, {GO, 5, NOID}, {0x40, 0, NOID}}, 3, -EINVAL},
	};
	uint8_t buf[64];

	for (size_t i = 0; i < N(cases); i++) {
		size_t size = encode(buf, 2, cases[i].e, cases[i].n);
		int got = nvmefs_acl_check(buf, size);

		CHECKF(got == cases[i].want, "%s: got %d, want %d", cases[i].what, got,
		       cases[i].want);
	}
	/* the frame: version, whole entries, a header alone (no ACL) */
	size_t size = encode(buf, 1, cases[0].e, 3);
	CHECK_ERR(nvmefs_acl_check(buf, size), -EINVAL);
	size = encode(buf, 2, cases[0].e, 3);
	CHECK_ERR(nvmefs_acl_check(buf, size - 1), -EINVAL);
	CHECK_ERR(nvmefs_acl_check(buf, size + 3), -EINVAL);
	CHECK_ERR(nvmefs_acl_check(buf, 3), -EINVAL);
	CHECK_ERR(nvmefs_acl_check(buf, 4), 0);
	CHECK(nvmefs_acl_name(NVMEFS_ACL_ACCESS) && nvmefs_acl_name(NVMEFS_ACL_DEFAULT));
	CHECK(!nvmefs_acl_name("system.posix_acl") && !nvmefs_acl_name("user.posix_acl_access"));
}

static void test_equiv_mode(void)
{
	static const struct ent minimal[] = {{UO, 6, NOID}, {GO, 4, NOID}, {O, 1, NOID}};
	static const struct ent masked[] = {
		{UO, 7, NOID}, {GO, 7, NOID}, {M, 4, NOID}, {O, 0, NOID}};
	static const struct ent named[] = {
		{UO, 7, NOID}, {U, 2, 5}, {GO, 1, NOID}, {M, 3, NOID}, {O, 5, NOID}};
	uint8_t buf[64];
	mode_t mode;
	size_t size;

	size = encode(buf, 2, minimal, N(minimal));
	mode = S_IFREG | S_ISGID | 0777;
	CHECK_ERR(nvmefs_acl_equiv_mode(buf, size, &mode), 0);
	CHECK(mode == (S_IFREG | S_ISGID | 0641)); /* type and setgid kept */

	size = encode(buf, 2, masked, N(masked));
	mode = S_IFREG;
	CHECK_ERR(nvmefs_acl_equiv_mode(buf, size, &mode), 1); /* a mask is kept */
	CHECK(mode == (S_IFREG | 0740));		       /* the mask shows */

	size = encode(buf, 2, named, N(named));
	mode = S_IFDIR | 0700;
	CHECK_ERR(nvmefs_acl_equiv_mode(buf, size, &mode), 1);
	CHECK(mode == (S_IFDIR | 0735));
}

static void test_chmod(void)
{
	static const struct ent named[] = {
		{UO, 7, NOID}, {U, 6, 5}, {GO, 5, NOID}, {M, 7, NOID}, {O, 4, NOID}};
	static const struct ent minimal[] = {{UO, 6, NOID}, {GO, 4, NOID}, {O, 4, NOID}};
	uint8_t buf[64];
	size_t size;

	size = encode(buf, 2, named, N(named));
	nvmefs_acl_chmod(buf, size, 0510);
	CHECK(perm_of(buf, size, UO, 0) == 5 && perm_of(buf, size, M, 0) == 1 &&
	      perm_of(buf, size, O, 0) == 0);
	/* named entries and the owning group (behind the mask) keep theirs */
	CHECK(perm_of(buf, size, U, 5) == 6 && perm_of(buf, size, GO, 0) == 5);
	CHECK_ERR(nvmefs_acl_check(buf, size), 0);

	size = encode(buf, 2, minimal, N(minimal));
	nvmefs_acl_chmod(buf, size, 0751);
	CHECK(perm_of(buf, size, UO, 0) == 7 && perm_of(buf, size, GO, 0) == 5 &&
	      perm_of(buf, size, O, 0) == 1);
}

static void test_create_masq(void)
{
	/* setfacl -d -m u::rwx,u:5:rwx,g::r-x,m::rwx,o::--- */
	static const struct ent dflt[] = {
		{UO, 7, NOID}, {U, 7, 5}, {GO, 5, NOID}, {M, 7, NOID}, {O, 0, NOID}};
	/* setfacl -d -m u::rwx,g::r-x,o::r-x (minimal) */
	static const struct ent minimal[] = {{UO, 7, NOID}, {GO, 5, NOID}, {O, 5, NOID}};
	uint8_t buf[64];
	mode_t mode;
	size_t size;

	/* creat(0666): the mask takes the group bits of the mode, and the
	 * mode's group bits the mask's; named entries stay as they were */
	size = encode(buf, 2, dflt, N(dflt));
	mode = S_IFREG | 0666;
	CHECK_ERR(nvmefs_acl_create_masq(buf, size, &mode), 1);
	CHECK(mode == (S_IFREG | 0660));
	CHECK(perm_of(buf, size, UO, 0) == 6 && perm_of(buf, size, M, 0) == 6 &&
	      perm_of(buf, size, O, 0) == 0 && perm_of(buf, size, U, 5) == 7 &&
	      perm_of(buf, size, GO, 0) == 5);
	/* mkdir(0777), and a create mode narrower than the ACL */
	size = encode(buf, 2, dflt, N(dflt));
	mode = S_IFDIR | 0777;
	CHECK_ERR(nvmefs_acl_create_masq(buf, size, &mode), 1);
	CHECK(mode == (S_IFDIR | 0770));
	size = encode(buf, 2, dflt, N(dflt));
	mode = S_IFREG | S_ISUID | 0604;
	CHECK_ERR(nvmefs_acl_create_masq(buf, size, &mode), 1);
	CHECK(mode == (S_IFREG | S_ISUID | 0600));
	CHECK(perm_of(buf, size, M, 0) == 0);
	/* a minimal default: nothing to keep, only the mode */
	size = encode(buf, 2, minimal, N(minimal));
	mode = S_IFREG | 0666;
	CHECK_ERR(nvmefs_acl_create_masq(buf, size, &mode), 0);
	CHECK(mode == (S_IFREG | 0644));
}

int main(void)
{
	test_check();
	test_equiv_mode();
	test_chmod();
	test_create_masq();
	return test_result();
}
