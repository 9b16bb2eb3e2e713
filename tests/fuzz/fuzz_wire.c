// SPDX-License-Identifier: MIT
/*
 * libFuzzer target: the native protocol's checks (fs/native/wire.c), which
 * the daemon runs on every message a client sends it and libnvmefs on every
 * answer. An input (fuzz_wire.h) is a client's registrations, then one
 * message, received by the daemon or by the client:
 *  - nvmefs_wire_parse must give the answer of a second implementation
 *    here, written from wire.h's rules, and read nothing past the message
 *    (libFuzzer's copy of the input ends where it does: ASan sees it);
 *  - what it accepts: the header as sent, the entries right after it;
 *  - each entry of an accepted SUBMIT, through nvmefs_wire_sqe_at, is
 *    checked by nvmefs_wire_check_sqe against the registrations, which must
 *    agree with the rules in 128-bit arithmetic (no sum may wrap;
 *    ../wire_oracle.h, shared with test_wire.c); an entry it lets through
 *    has its first and last byte touched in a buffer of its region's exact
 *    size, as the daemon would move them: a range outside the region is
 *    an ASan report (the daemon would have touched memory outside the
 *    client's).
 * A disagreement aborts with "fuzz: BUG: ...".
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

#include "fuzz_bug.h"
#include "fuzz_wire.h"
#include "wire_oracle.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct table {
	int to_daemon;
	uint64_t max_len, max_off;
	unsigned may[FUZZ_WIRE_HANDLES];
	uint64_t size[FUZZ_WIRE_REGIONS];
	uint8_t *buf[FUZZ_WIRE_REGIONS]; /* regions 0-2: size bytes exactly */
};

static uint64_t le64(const uint8_t *p)
{
	uint64_t v = 0;

	for (int i = 7; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}

static void table_init(struct table *t, const uint8_t *p)
{
	unsigned m = p[1] | (unsigned)p[2] << 8;

	t->to_daemon = p[0] & FUZZ_WIRE_TO_DAEMON;
	t->max_len = p[0] & FUZZ_WIRE_MAX_LEN_SMALL ? 1u << 20 : NVMEFS_WIRE_MAX_REGION;
	t->max_off = p[0] & FUZZ_WIRE_MAX_OFF_2_64 ? UINT64_MAX : 1ull << 56;
	for (unsigned i = 0; i < FUZZ_WIRE_HANDLES; i++)
		t->may[i] = (m >> (2 * i)) & 3u;
	for (unsigned r = 0; r < FUZZ_WIRE_REGIONS; r++) {
		t->size[r] = le64(p + 3 + 8 * r);
		t->buf[r] = NULL;
		if (r == FUZZ_WIRE_REGIONS - 1)
			continue;
		t->size[r] %= FUZZ_WIRE_BUF_MAX + 1;
		t->buf[r] = malloc(t->size[r] ? t->size[r] : 1);
		if (!t->buf[r])
			abort();
	}
}

static void table_free(struct table *t)
{
	for (unsigned r = 0; r < FUZZ_WIRE_REGIONS; r++)
		free(t->buf[r]);
}

/* wire.h's rules for a message, written a second time. */
static int expect_parse(const uint8_t *msg, size_t len, int to_daemon)
{
	struct nvmefs_wire_hdr h;
	size_t body, esz = 0;
	bool type_ok;

	if (len < sizeof(h))
		return -EBADMSG;
	memcpy(&h, msg, sizeof(h));
	if (h.magic != NVMEFS_WIRE_MAGIC)
		return -EBADMSG;
	if (h.version != NVMEFS_WIRE_VERSION)
		return -EPROTO;
	type_ok = to_daemon ? (h.type >= NVMEFS_WIRE_HELLO && h.type <= NVMEFS_WIRE_SUBMIT) ||
				      h.type == NVMEFS_WIRE_CREATE || h.type == NVMEFS_WIRE_LAYOUT
			    : h.type == NVMEFS_WIRE_REPLY || h.type == NVMEFS_WIRE_COMPLETE;
	if (!type_ok)
		return -EOPNOTSUPP;
	if (h.flags)
		return -EBADMSG;
	body = len - sizeof(h);
	if (h.type == NVMEFS_WIRE_CREATE) {
		const uint8_t *name = msg + sizeof(h);
		bool dots = (body == 1 && name[0] == '.') ||
			    (body == 2 && name[0] == '.' && name[1] == '.');

		if (body != h.count || body < 1 || body > 255 || dots)
			return -EBADMSG;
		for (size_t i = 0; i < body; i++)
			if (name[i] == '/' || !name[i])
				return -EBADMSG;
		return 0;
	}
	if (h.type == NVMEFS_WIRE_SUBMIT)
		esz = sizeof(struct nvmefs_wire_sqe);
	else if (h.type == NVMEFS_WIRE_COMPLETE)
		esz = sizeof(struct nvmefs_wire_cqe);
	/* LAYOUT: exactly one request. */
	if (h.type == NVMEFS_WIRE_LAYOUT)
		return h.count == 1 && body == sizeof(struct nvmefs_wire_layout_req) ? 0 : -EBADMSG;
	if (esz)
		return h.count >= 1 && h.count <= NVMEFS_WIRE_MAX_BATCH && body / esz == h.count &&
				       body % esz == 0
			       ? 0
			       : -EBADMSG;
	if (h.count)
		return -EBADMSG;
	if (!body || (h.type == NVMEFS_WIRE_REPLY && (body == sizeof(struct nvmefs_wire_hello) ||
						      body == sizeof(struct nvmefs_wire_stat))))
		return 0;
	return -EBADMSG;
}

/* The daemon moves bytes of an entry let through: its first and last. */
static void touch(const struct table *t, const struct nvmefs_wire_sqe *e)
{
	volatile uint8_t *b;

	if (e->op == NVMEFS_WIRE_FSYNC || !e->len || e->region >= FUZZ_WIRE_REGIONS ||
	    !t->buf[e->region])
		return;
	b = t->buf[e->region];
	if (e->op == NVMEFS_WIRE_READ) { /* the devices write the region */
		b[e->mem_off] = 1;
		b[e->mem_off + e->len - 1] = 2;
	} else {
		(void)b[e->mem_off];
		(void)b[e->mem_off + e->len - 1];
	}
}

static void entries(const struct table *t, const struct nvmefs_wire_msg *m)
{
	for (uint32_t i = 0; i < m->hdr.count; i++) {
		struct nvmefs_wire_sqe e;
		unsigned may;
		uint64_t region;
		int got, want;

		nvmefs_wire_sqe_at(m, i, &e);
		may = e.handle < FUZZ_WIRE_HANDLES ? t->may[e.handle] : 0;
		region = e.region < FUZZ_WIRE_REGIONS ? t->size[e.region] : 0;
		got = nvmefs_wire_check_sqe(&e, may, region, t->max_len, t->max_off);
		want = wire_oracle_check_sqe(&e, may, region, t->max_len, t->max_off);
		if (got != want)
			FUZZ_BUG("entry %u (op %u, off %llu, len %llu, mem_off %llu, region size "
				 "%llu): check %d, the rules say %d",
				 i, e.op, (unsigned long long)e.off, (unsigned long long)e.len,
				 (unsigned long long)e.mem_off, (unsigned long long)region, got,
				 want);
		if (!got)
			touch(t, &e);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const uint8_t *msg = data + FUZZ_WIRE_PREFIX;
	size_t len = size - FUZZ_WIRE_PREFIX;
	struct nvmefs_wire_msg m;
	struct table t;
	int got, want;

	if (size < FUZZ_WIRE_PREFIX)
		return 0;
	table_init(&t, data);
	memset(&m, 0, sizeof(m));
	got = nvmefs_wire_parse(msg, len, t.to_daemon, &m);
	want = expect_parse(msg, len, t.to_daemon);
	if (got != want)
		FUZZ_BUG("a %zu-byte message to the %s: parse %d, the rules say %d", len,
			 t.to_daemon ? "daemon" : "client", got, want);
	if (!got) {
		if (memcmp(&m.hdr, msg, sizeof(m.hdr)))
			FUZZ_BUG("parse changed the header");
		if ((const uint8_t *)m.entries != msg + sizeof(m.hdr))
			FUZZ_BUG("the entries are not after the header");
		if (m.hdr.type == NVMEFS_WIRE_SUBMIT)
			entries(&t, &m);
	}
	table_free(&t);
	return 0;
}
