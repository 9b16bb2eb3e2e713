// SPDX-License-Identifier: MIT
/*
 * libFuzzer target: a key and its value of format v2 (fs/store/store.h)
 * through nvmefs_val_decode(). The input is the key's length (u16,
 * little-endian), the key, and the value (the rest). Whatever decodes must
 * re-encode to the input's key and value; a value one byte shorter must be
 * refused (an XATTR's raw bytes aside), and one with another version byte
 * give -EPROTO; and the record it decodes to must be one v1's record
 * decoder accepts (v2 takes nothing v1 would refuse).
 */
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "fuzz_bug.h"
#include "store.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static uint8_t key2[NVMEFS_KEY_MAX], val2[NVMEFS_VAL_MAX];
static uint8_t rec[NVMEFS_REC_MAX];

/* The decoded record through v1's encoder and decoder. */
static void check_v1(const struct nvmefs_val *v)
{
	struct nvmefs_rec r;
	size_t n;

	if (!v->rec.type)
		return; /* FREE: no record */
	n = nvmefs_rec_encode(&v->rec, rec);
	if (nvmefs_rec_decode(&r, rec, n) != (long)n)
		FUZZ_BUG("kind %u: v1 refuses the record of an accepted value", v->kind);
}

static void check_pair(const uint8_t *key, size_t klen, uint8_t *val, size_t vlen)
{
	struct nvmefs_val v, d;
	size_t klen2 = 0;
	ssize_t n;

	if (nvmefs_val_decode(key, klen, val, vlen, &v))
		return;
	n = nvmefs_val_encode(&v, key2, &klen2, val2);
	if (n != (ssize_t)vlen || klen2 != klen || memcmp(key2, key, klen) ||
	    memcmp(val2, val, vlen))
		FUZZ_BUG("kind %u: an accepted value (%zu bytes) re-encodes as %zd bytes", v.kind,
			 vlen, n);
	check_v1(&v);
	if (v.kind == NVMEFS_KEY_XATTR)
		return;
	if (nvmefs_val_decode(key, klen, val, vlen - 1, &d) != -EINVAL)
		FUZZ_BUG("kind %u: a value cut by a byte accepted", v.kind);
	val[0]++;
	if (nvmefs_val_decode(key, klen, val, vlen, &d) != -EPROTO)
		FUZZ_BUG("kind %u: another version not -EPROTO", v.kind);
	val[0]--;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t *key, *val;
	size_t klen, vlen;

	if (size < 2)
		return 0;
	klen = (size_t)data[0] | (size_t)data[1] << 8;
	if (klen > NVMEFS_KEY_MAX || klen > size - 2)
		return 0;
	vlen = size - 2 - klen;
	if (vlen > NVMEFS_VAL_MAX)
		vlen = NVMEFS_VAL_MAX;
	/* Copies of their exact lengths, so that ASan sees a read past
	 * either (its malloc(0) is a pointer to no bytes). */
	key = malloc(klen);
	val = malloc(vlen);
	if ((!key && klen) || (!val && vlen))
		FUZZ_BUG("out of memory");
	memcpy(key, data + 2, klen);
	if (vlen)
		memcpy(val, data + 2 + klen, vlen);
	check_pair(key, klen, val, vlen);
	free(key);
	free(val);
	return 0;
}
