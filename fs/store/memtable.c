// SPDX-License-Identifier: MIT
/*
 * The LSM store's memtable (memtable_i.h): a skip list of format v2 keys
 * with p = 1/4 (a node has height h with probability 3/4^h), so a lookup
 * follows about 2 log4(n) links.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "memtable_i.h"

static struct nvmefs_mem_node *node_new(unsigned height, const uint8_t *key, size_t klen,
					const void *val, size_t vlen, bool tomb)
{
	size_t links = height * sizeof(struct nvmefs_mem_node *);
	struct nvmefs_mem_node *x = malloc(sizeof(*x) + links + klen + vlen);

	if (!x)
		return NULL;
	x->klen = (uint16_t)klen;
	x->height = (uint8_t)height;
	x->tomb = tomb;
	x->vlen = (uint32_t)vlen;
	x->key = (uint8_t *)x + sizeof(*x) + links;
	memset(x->next, 0, links);
	if (klen)
		memcpy(x->key, key, klen);
	if (vlen)
		memcpy(x->key + klen, val, vlen);
	return x;
}

static size_t node_bytes(const struct nvmefs_mem_node *x)
{
	return sizeof(*x) + x->height * sizeof(x->next[0]) + x->klen + x->vlen;
}

int nvmefs_mem_init(struct nvmefs_memtable *m, uint64_t seed)
{
	*m = (struct nvmefs_memtable){.height = 1, .rng = seed | 1};
	m->head = node_new(NVMEFS_MEM_HEIGHT, NULL, 0, NULL, 0, false);
	return m->head ? 0 : -ENOMEM;
}

void nvmefs_mem_exit(struct nvmefs_memtable *m)
{
	struct nvmefs_mem_node *x = m->head, *next;

	while (x) {
		next = x->next[0];
		free(x);
		x = next;
	}
	*m = (struct nvmefs_memtable){0};
}

static unsigned random_height(struct nvmefs_memtable *m)
{
	unsigned h = 1;

	m->rng ^= m->rng << 13; /* xorshift64 */
	m->rng ^= m->rng >> 7;
	m->rng ^= m->rng << 17;
	for (uint64_t r = m->rng; h < NVMEFS_MEM_HEIGHT && (r & 3) == 0; r >>= 2)
		h++;
	return h;
}

/* The last node before key at each level into prev (head when none). */
static struct nvmefs_mem_node *find_prev(const struct nvmefs_memtable *m, const uint8_t *key,
					 size_t klen, struct nvmefs_mem_node **prev)
{
	struct nvmefs_mem_node *x = m->head;

	for (int l = (int)m->height - 1; l >= 0; l--) {
		while (x->next[l] &&
		       nvmefs_key_cmp(x->next[l]->key, x->next[l]->klen, key, klen) < 0)
			x = x->next[l];
		if (prev)
			prev[l] = x;
	}
	return x->next[0]; /* the first node >= key */
}

static size_t ent_bytes(size_t klen, size_t vlen)
{
	return NVMEFS_RUN_ENT_HDR + klen + vlen;
}

int nvmefs_mem_put(struct nvmefs_memtable *m, const uint8_t *key, size_t klen, const void *val,
		   size_t vlen, bool tomb)
{
	struct nvmefs_mem_node *prev[NVMEFS_MEM_HEIGHT], *old, *x;
	unsigned h;

	old = find_prev(m, key, klen, prev);
	if (old && nvmefs_key_cmp(old->key, old->klen, key, klen))
		old = NULL;
	h = old ? old->height : random_height(m);
	x = node_new(h, key, klen, val, vlen, tomb);
	if (!x)
		return -ENOMEM;
	for (unsigned l = m->height; l < h; l++)
		prev[l] = m->head;
	if (h > m->height)
		m->height = h;
	for (unsigned l = 0; l < h; l++) { /* in the old node's place, or linked in */
		x->next[l] = old ? old->next[l] : prev[l]->next[l];
		prev[l]->next[l] = x;
	}
	if (old) {
		m->bytes -= node_bytes(old);
		m->ent_bytes -= ent_bytes(old->klen, old->vlen);
		free(old);
	} else {
		m->n++;
	}
	m->bytes += node_bytes(x);
	m->ent_bytes += ent_bytes(klen, vlen);
	return 0;
}

const struct nvmefs_mem_node *nvmefs_mem_find(const struct nvmefs_memtable *m, const uint8_t *key,
					      size_t klen)
{
	const struct nvmefs_mem_node *x = find_prev(m, key, klen, NULL);

	return x && !nvmefs_key_cmp(x->key, x->klen, key, klen) ? x : NULL;
}

const struct nvmefs_mem_node *nvmefs_mem_seek(const struct nvmefs_memtable *m, const uint8_t *key,
					      size_t klen)
{
	return key ? find_prev(m, key, klen, NULL) : m->head->next[0];
}

void nvmefs_mem_ent(const struct nvmefs_mem_node *x, struct nvmefs_run_ent *e)
{
	*e = (struct nvmefs_run_ent){.key = x->key,
				     .klen = x->klen,
				     .val = x->key + x->klen,
				     .vlen = x->vlen,
				     .tomb = x->tomb};
}
