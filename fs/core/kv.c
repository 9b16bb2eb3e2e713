// SPDX-License-Identifier: MIT
/*
 * The metadata's write-through (kv_i.h): one place that knows where apply's
 * keys go, so that meta.c and extmap.c name neither the store nor the
 * shadow, and extmap.c need not call back into meta.c (which calls it).
 */
#include "kv_i.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/types.h>

#include "store.h"
#include "nvmefs/util.h"

bool nvmefs_kv_on(const struct nvmefs_vol *vol)
{
	return !vol->filling && (vol->shadow || (vol->store && !vol->loading));
}

static void fail(struct nvmefs_vol *vol, int err, const uint8_t *key, size_t klen)
{
	char name[320];

	if (vol->kv_err)
		return;
	vol->kv_err = err;
	nvmefs_shadow_key_name(key, klen, name, sizeof(name));
	nvmefs_err("%s: metadata: %s could not be written to the store (%s); the volume goes "
		   "read-only at the next commit",
		   nvmefs_meta_where(vol), name, strerror(-err));
}

void nvmefs_kv_put(struct nvmefs_vol *vol, const struct nvmefs_val *v)
{
	if (vol->filling)
		return;
	if (vol->shadow)
		(void)nvmefs_shadow_put(vol->shadow, v); /* its error sticks there */
	if (vol->store && !vol->loading) {
		uint8_t key[NVMEFS_KEY_MAX];
		size_t klen = 0;
		ssize_t vlen = nvmefs_val_encode(v, key, &klen, vol->kv_val);
		int ret = vlen < 0 ? (int)vlen
				   : nvmefs_store_put(vol->store, key, klen, vol->kv_val,
						      (size_t)vlen);

		if (ret)
			fail(vol, ret, key, klen);
	}
}

void nvmefs_kv_del(struct nvmefs_vol *vol, const uint8_t *key, size_t klen)
{
	if (vol->filling)
		return;
	if (vol->shadow)
		(void)nvmefs_shadow_del(vol->shadow, key, klen);
	if (vol->store && !vol->loading) {
		int ret = nvmefs_store_del(vol->store, key, klen);

		if (ret)
			fail(vol, ret, key, klen);
	}
}
