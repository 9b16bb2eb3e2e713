/* SPDX-License-Identifier: MIT */
/*
 * wire_oracle.h: include/nvmefs/wire.h's rules for a SUBMIT entry written a
 * second time, in arithmetic that cannot wrap, for the tests that hold
 * nvmefs_wire_check_sqe (fs/native/wire.c) against them: test_wire.c on
 * seeded random entries and the libFuzzer target fuzz/fuzz_wire.c on the
 * fuzzer's. Header-only: the fuzz project (tests/fuzz/CMakeLists.txt)
 * builds apart from the main one and links none of its test code.
 */
#ifndef NVMEFS_TESTS_WIRE_ORACLE_H
#define NVMEFS_TESTS_WIRE_ORACLE_H

#include <errno.h>
#include <stdint.h>

#include "nvmefs/wire.h"

/*
 * What nvmefs_wire_check_sqe must answer for entry e, given the access
 * modes of its handle (may, NVMEFS_WIRE_MAY_*; 0: not registered), the size
 * of its region (0: not registered) and the daemon's limits: 0 or -errno.
 * The sums are taken in 128 bits, so that one wrapping around 2^64 in the
 * code under test shows as a disagreement.
 */
static inline int wire_oracle_check_sqe(const struct nvmefs_wire_sqe *e, unsigned may,
					uint64_t region, uint64_t max_len, uint64_t max_off)
{
	unsigned need;

	if (e->flags && !(e->op == NVMEFS_WIRE_WRITE && e->flags == NVMEFS_WIRE_SQE_BEHIND))
		return -EINVAL;
	if (e->op == NVMEFS_WIRE_FSYNC)
		return may ? 0 : -EBADF;
	if (e->op != NVMEFS_WIRE_READ && e->op != NVMEFS_WIRE_WRITE)
		return -EINVAL;
	need = e->op == NVMEFS_WIRE_READ ? NVMEFS_WIRE_MAY_READ : NVMEFS_WIRE_MAY_WRITE;
	if (!(may & need))
		return -EBADF;
	if (e->len > max_len)
		return -EINVAL;
	if ((unsigned __int128)e->mem_off + e->len > region)
		return -EFAULT;
	if ((unsigned __int128)e->off + e->len > max_off)
		return -EFBIG;
	return 0;
}

#endif
