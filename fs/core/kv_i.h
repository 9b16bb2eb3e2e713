/* SPDX-License-Identifier: MIT */
/*
 * kv_i.h: the write-through of fs/core/kv.c: every key and value apply
 * makes of a record (meta.c, extmap.c; docs/FORMAT.md, "Keys and values") goes
 * to the store (vol->store: the metadata's durable state, flushed as
 * sorted runs, docs/FORMAT.md) and, in tests, to the shadow (vol->shadow:
 * the crosscheck's copy, store.h). meta held, or single-threaded (load,
 * replay, mkfs, fsck).
 */
#ifndef NVMEFS_KV_I_H
#define NVMEFS_KV_I_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "fs_i.h"

struct nvmefs_val;

/* Whether anything takes writes: a store not being loaded from, or a
 * shadow. Callers skip building keys when not. */
bool nvmefs_kv_on(const struct nvmefs_vol *vol);

/*
 * Put v's key and value (nvmefs_val_encode) or a tombstone of key. They
 * cannot fail back to apply, which has changed the maps by then: a store
 * put that fails (out of memory, or a value v2 refuses: a bug, logged
 * naming the key) sticks in vol->kv_err, and the next commit makes the
 * volume read-only (journal.c), since the store no longer holds the
 * state; the shadow keeps its own error for the crosscheck.
 */
void nvmefs_kv_put(struct nvmefs_vol *vol, const struct nvmefs_val *v);
void nvmefs_kv_del(struct nvmefs_vol *vol, const uint8_t *key, size_t klen);

#endif
