/* SPDX-License-Identifier: MIT */
/*
 * shadow_i.h: the shadow store of fs/core/shadow.c, format v2's keys and
 * values of a volume's metadata kept beside today's maps while those stay
 * the truth (docs/METADATA-V2-STEP4.md, commit C2). meta.c's apply and
 * extmap.c's mutations write through into it; nvmefs_meta_crosscheck
 * (meta.c) compares it with the maps both ways. It proved the record ->
 * key translation before the store was made persistent; the same keys now
 * also go to the volume's store (vol->store, through kv.c), and the
 * shadow stays as the crosscheck's copy, on only in tests and with
 * NVMEFS_META_CROSSCHECK=1 (and built apart by fsck's store pass).
 *
 * Not thread-safe: every call holds vol->lock, or runs single-threaded
 * (load, replay, a test).
 */
#ifndef NVMEFS_SHADOW_I_H
#define NVMEFS_SHADOW_I_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sorted.h"
#include "values.h"

struct nvmefs_shadow;

/* An empty shadow (*out), or -ENOMEM. End with nvmefs_shadow_destroy. */
int nvmefs_shadow_create(struct nvmefs_shadow **out);
/* Free it and everything in it; NULL is fine. */
void nvmefs_shadow_destroy(struct nvmefs_shadow *sh);

/*
 * Put the key and value v encodes (nvmefs_val_encode), or a tombstone of
 * key (klen bytes). Returns 0, -EINVAL (v is not a value format v2 takes:
 * logged, naming the key) or -ENOMEM. The first failure also sticks
 * (nvmefs_shadow_error): apply has changed the maps by then and cannot
 * undo, so the shadow is no longer whole and a crosscheck must say so.
 */
int nvmefs_shadow_put(struct nvmefs_shadow *sh, const struct nvmefs_val *v);
int nvmefs_shadow_del(struct nvmefs_shadow *sh, const uint8_t *key, size_t klen);

/* The first put or tombstone that failed (-EINVAL, -ENOMEM), else 0. */
int nvmefs_shadow_error(const struct nvmefs_shadow *sh);

/* Whether a periodic check (at a commit) is due: always while the last
 * check saw fewer than 10,000 live keys; past that, once the puts and
 * tombstones since it reach a sixteenth of what it saw, so that checking
 * at every commit costs in proportion to the writes. _checked records a
 * check that saw keys live keys. */
bool nvmefs_shadow_check_due(const struct nvmefs_shadow *sh);
void nvmefs_shadow_checked(struct nvmefs_shadow *sh, size_t keys);

/* The live value of key: 0 (*val, *vlen point into the shadow until the
 * next put or tombstone) or -ENOENT (never put, or a tombstone). */
int nvmefs_shadow_get(const struct nvmefs_shadow *sh, const uint8_t *key, size_t klen,
		      const uint8_t **val, size_t *vlen);

/* Every entry, tombstones too, in key order: *pos starts NULL; false after
 * the last. e points into the shadow until the next put or tombstone. */
bool nvmefs_shadow_next(const struct nvmefs_shadow *sh, const void **pos, struct nvmefs_run_ent *e);

/* A key as text for messages: INODE(12), DIRENT(1, "a"), EXTENT(12, 0,
 * 8192)... Writes at most size bytes (NUL-terminated) into buf. */
void nvmefs_shadow_key_name(const uint8_t *key, size_t klen, char *buf, size_t size);

#endif
