/* SPDX-License-Identifier: MIT */
/*
 * Test-only device fault injection for the engine.
 *
 * Only in the nvmefs_striping_fi library (built with NVMEFS_FAULT_INJECTION),
 * which tests link; the engine that programs use has no such hook. A fault is
 * set per device and applies to the blocks queued after it was set:
 *  - NVMEFS_FAULT_EIO: matching blocks are not sent to the device and
 *    complete with -EIO (as a failed medium would report);
 *  - NVMEFS_FAULT_SHORT: matching blocks are sent one device block shorter
 *    than asked, so the kernel really returns a short transfer, which the
 *    engine must turn into -EIO;
 *  - latency_us: the device's reaper sleeps that long before each reap;
 *  - eagain_ms: io_submit on the device is refused with -EAGAIN (nothing
 *    submitted) until that long after the fault was set, as the kernel does
 *    when it is short of aio resources; the engine must retry, not spin.
 */
#ifndef NVMEFS_FAULT_H
#define NVMEFS_FAULT_H

#include <stdint.h>

struct nvmefs_engine;

enum nvmefs_fault_kind {
	NVMEFS_FAULT_NONE = 0,
	NVMEFS_FAULT_EIO,
	NVMEFS_FAULT_SHORT,
};

#define NVMEFS_FAULT_READS  (1u << 0)
#define NVMEFS_FAULT_WRITES (1u << 1)

struct nvmefs_fault {
	enum nvmefs_fault_kind kind;
	unsigned ops;	     /* NVMEFS_FAULT_READS | _WRITES; 0 means both */
	uint64_t off_lo;     /* a block matches if it overlaps [off_lo, off_hi) */
	uint64_t off_hi;     /* 0: to the end of the device */
	uint64_t after;	     /* let this many matching blocks through first */
	uint64_t count;	     /* then fail this many (0: all of them) */
	unsigned latency_us; /* delay before each reap on this device */
	unsigned eagain_ms;  /* refuse io_submit with -EAGAIN for this long */
};

/* Set (or with kind NONE and no latency, clear) device dev's fault. */
int nvmefs_engine_inject(struct nvmefs_engine *eng, unsigned dev, const struct nvmefs_fault *f);

/* How many blocks device dev's fault has failed so far. */
uint64_t nvmefs_engine_fault_hits(struct nvmefs_engine *eng, unsigned dev);

/* How many io_submit calls device dev's eagain fault has refused so far. */
uint64_t nvmefs_engine_fault_refusals(struct nvmefs_engine *eng, unsigned dev);

#endif
