// SPDX-License-Identifier: MIT
/*
 * The native protocol's checks (include/nvmefs/wire.h), shared by the
 * daemon's native door and libnvmefs, and fuzzed (tests/fuzz/fuzz_wire.c):
 * everything a peer sends is checked here before it is believed.
 */
#include "nvmefs/wire.h"

#include <errno.h>
#include <stdbool.h>
#include <string.h>

/* The size of one entry of a type's message, 0 when it carries none. */
static size_t entry_size(uint16_t type)
{
	switch (type) {
	case NVMEFS_WIRE_SUBMIT:
		return sizeof(struct nvmefs_wire_sqe);
	case NVMEFS_WIRE_COMPLETE:
		return sizeof(struct nvmefs_wire_cqe);
	case NVMEFS_WIRE_CREATE:
		return 1; /* the name's bytes */
	case NVMEFS_WIRE_LAYOUT:
		return sizeof(struct nvmefs_wire_layout_req);
	default:
		return 0;
	}
}

int nvmefs_wire_name_ok(const char *name, size_t len)
{
	if (!len || len > NVMEFS_WIRE_NAME_MAX || memchr(name, '/', len) || memchr(name, '\0', len))
		return 0;
	return !(name[0] == '.' && (len == 1 || (len == 2 && name[1] == '.')));
}

static bool type_ok(uint16_t type, int from_client)
{
	if (from_client)
		return (type >= NVMEFS_WIRE_HELLO && type <= NVMEFS_WIRE_SUBMIT) ||
		       type == NVMEFS_WIRE_CREATE || type == NVMEFS_WIRE_LAYOUT;
	return type == NVMEFS_WIRE_REPLY || type == NVMEFS_WIRE_COMPLETE;
}

int nvmefs_wire_parse(const void *buf, size_t len, int from_client, struct nvmefs_wire_msg *m)
{
	size_t esz, body;

	if (len < sizeof(m->hdr))
		return -EBADMSG;
	memcpy(&m->hdr, buf, sizeof(m->hdr));
	if (m->hdr.magic != NVMEFS_WIRE_MAGIC)
		return -EBADMSG;
	if (m->hdr.version != NVMEFS_WIRE_VERSION)
		return -EPROTO;
	if (!type_ok(m->hdr.type, from_client))
		return -EOPNOTSUPP;
	if (m->hdr.flags)
		return -EBADMSG;
	esz = entry_size(m->hdr.type);
	body = len - sizeof(m->hdr);
	if (m->hdr.type == NVMEFS_WIRE_CREATE) {
		if (!nvmefs_wire_name_ok((const char *)buf + sizeof(m->hdr), body) ||
		    body != m->hdr.count)
			return -EBADMSG;
	} else if (esz) {
		if (!m->hdr.count || m->hdr.count > NVMEFS_WIRE_MAX_BATCH ||
		    (m->hdr.type == NVMEFS_WIRE_LAYOUT && m->hdr.count != 1) ||
		    body != (size_t)m->hdr.count * esz)
			return -EBADMSG;
	} else if (m->hdr.count) {
		return -EBADMSG;
	} else if (m->hdr.type == NVMEFS_WIRE_REPLY) {
		/* A REPLY may carry HELLO's or CREATE's answer, nothing else. */
		if (body && body != sizeof(struct nvmefs_wire_hello) &&
		    body != sizeof(struct nvmefs_wire_stat))
			return -EBADMSG;
	} else if (body) {
		return -EBADMSG;
	}
	m->entries = (const char *)buf + sizeof(m->hdr);
	m->entry_size = esz;
	return 0;
}

void nvmefs_wire_sqe_at(const struct nvmefs_wire_msg *m, uint32_t i, struct nvmefs_wire_sqe *e)
{
	memcpy(e, (const char *)m->entries + (size_t)i * sizeof(*e), sizeof(*e));
}

int nvmefs_wire_check_sqe(const struct nvmefs_wire_sqe *e, unsigned may, uint64_t region_size,
			  uint64_t max_len, uint64_t max_off)
{
	unsigned need;

	if (e->flags & ~(e->op == NVMEFS_WIRE_WRITE ? NVMEFS_WIRE_SQE_BEHIND : 0u))
		return -EINVAL;
	switch (e->op) {
	case NVMEFS_WIRE_READ:
		need = NVMEFS_WIRE_MAY_READ;
		break;
	case NVMEFS_WIRE_WRITE:
		need = NVMEFS_WIRE_MAY_WRITE;
		break;
	case NVMEFS_WIRE_FSYNC:
		return may ? 0 : -EBADF;
	default:
		return -EINVAL;
	}
	if (!(may & need))
		return -EBADF;
	if (e->len > max_len)
		return -EINVAL;
	/* Written so that no sum can wrap: mem_off + len <= region_size. */
	if (e->mem_off > region_size || e->len > region_size - e->mem_off)
		return -EFAULT;
	if (e->off > max_off || e->len > max_off - e->off)
		return -EFBIG;
	return 0;
}
