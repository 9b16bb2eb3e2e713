/* SPDX-License-Identifier: MIT */
/*
 * memtable_i.h: the in-memory ordered map of fs/store/memtable.c (key ->
 * value or tombstone, format v2's key order), for the LSM store
 * (fs/store/store.c, flush.c, iter.c; docs/ARCHITECTURE.md, "The store") and
 * the shadow (shadow.c).
 *
 * A skip list: O(log n) expected put and find, an in-order walk by the
 * level-0 links (a flush writes it as a run, an iterator copies a key
 * range), no rebalancing to get wrong, and the structure LevelDB and
 * RocksDB use for the same job. A sorted array would make each put O(n);
 * a balanced tree gives the same bounds with more code. Each node is one
 * allocation: the node, its links, the key and the value.
 *
 * Not thread-safe: the store's lock protects the memtable being written;
 * a frozen one (being flushed) is only read.
 */
#ifndef NVMEFS_MEMTABLE_I_H
#define NVMEFS_MEMTABLE_I_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sorted_i.h"

#define NVMEFS_MEM_HEIGHT 24 /* 4^24 entries before the list degrades */

struct nvmefs_mem_node {
	uint16_t klen;
	uint8_t height;
	bool tomb;
	uint32_t vlen;
	uint8_t *key; /* into this node's allocation; the value follows it */
	struct nvmefs_mem_node *next[];
};

struct nvmefs_memtable {
	struct nvmefs_mem_node *head; /* a sentinel of NVMEFS_MEM_HEIGHT links */
	unsigned height;	      /* levels in use */
	uint64_t rng;		      /* xorshift state for node heights */
	size_t n;		      /* entries, tombstones included */
	size_t bytes;		      /* memory the entries take: nodes, keys, values */
	size_t ent_bytes;	      /* what the entries take in run blocks */
	unsigned refs;		      /* the store's: its own, and walks' of a frozen one
				       * (protected by the store's lock) */
};

/* An empty memtable; 0 or -ENOMEM. End with nvmefs_mem_exit. */
int nvmefs_mem_init(struct nvmefs_memtable *m, uint64_t seed);
/* Free every node; m is then empty and must be initialized again. */
void nvmefs_mem_exit(struct nvmefs_memtable *m);

/*
 * Set key (klen bytes, checked by the caller) to val (vlen bytes) or, with
 * tomb, to a tombstone (vlen 0), replacing what the memtable had for it.
 * 0 or -ENOMEM (the memtable then unchanged).
 */
int nvmefs_mem_put(struct nvmefs_memtable *m, const uint8_t *key, size_t klen, const void *val,
		   size_t vlen, bool tomb);

/* The node of key, or NULL. Valid until the next put. */
const struct nvmefs_mem_node *nvmefs_mem_find(const struct nvmefs_memtable *m, const uint8_t *key,
					      size_t klen);

/* The first node whose key is >= key (key NULL: the first node), or NULL;
 * the next ones by ->next[0]. */
const struct nvmefs_mem_node *nvmefs_mem_seek(const struct nvmefs_memtable *m, const uint8_t *key,
					      size_t klen);

/* A node as a run entry (pointing into the node). */
void nvmefs_mem_ent(const struct nvmefs_mem_node *x, struct nvmefs_run_ent *e);

#endif
