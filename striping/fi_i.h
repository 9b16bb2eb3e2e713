/* SPDX-License-Identifier: MIT */
/*
 * Hooks of the test-only fault injector and power-loss recorder
 * (fault_i.h) in the device set and the engine. Without
 * NVMEFS_FAULT_INJECTION they are empty inline functions, so the library
 * that programs link has no trace of them. Nothing outside striping/
 * includes this.
 */
#ifndef NVMEFS_FI_I_H
#define NVMEFS_FI_I_H

#include <stdbool.h>
#include <stdint.h>

#include "nvmefs/devset.h"
#include "fault_i.h"

#define FI_WRITE_DROPPED UINT64_MAX

/* What becomes of an operation about to start on a member. */
enum fi_action {
	FI_GO,	  /* as asked */
	FI_FAIL,  /* not sent: fails with -EIO */
	FI_SHORT, /* sent one device block shorter */
};

#ifdef NVMEFS_FAULT_INJECTION
int fi_dev_init(struct nvmefs_dev *dev);
void fi_dev_exit(struct nvmefs_dev *dev);
/* op is one NVMEFS_FAULT_READS/_WRITES/_FLUSHES bit. */
enum fi_action fi_check(struct nvmefs_dev *dev, unsigned op, uint64_t off, uint64_t len);
/* A write of buf to [off, off + len) is about to start: remember it if
 * power loss is being recorded. Returns the record's id, 0 when nothing was
 * recorded, or FI_WRITE_DROPPED when the power is cut: then the write must
 * not be sent (fail it with -EIO) and the caller must call fi_submit_done
 * once it has queued what it had recorded. */
uint64_t fi_write_begin(struct nvmefs_dev *dev, uint64_t off, const void *buf, uint64_t len);
/* The write with that id finished; written: it reached the kernel. */
void fi_write_end(struct nvmefs_dev *dev, uint64_t id, bool written);
/* After queueing a request's blocks: cut the power if a write asked to. */
void fi_submit_done(void);
/* A flush starts / succeeded: writes finished before it started are
 * durable once it succeeds. */
uint64_t fi_flush_begin(struct nvmefs_dev *dev);
void fi_flush_end(struct nvmefs_dev *dev, uint64_t mark);
unsigned fi_latency_us(struct nvmefs_dev *dev);
bool fi_refuse_submit(struct nvmefs_dev *dev);
/* A request with a segment of op (one NVMEFS_FAULT_* bit) on dev at [off,
 * off + len) is about to be submitted: true when the member's NOMEM fault
 * refuses it (the engine then fails the submission, nothing sent). */
bool fi_refuse_request(struct nvmefs_dev *dev, unsigned op, uint64_t off, uint64_t len);
#else
static inline int fi_dev_init(struct nvmefs_dev *dev)
{
	(void)dev;
	return 0;
}
static inline void fi_dev_exit(struct nvmefs_dev *dev)
{
	(void)dev;
}
static inline enum fi_action fi_check(struct nvmefs_dev *dev, unsigned op, uint64_t off,
				      uint64_t len)
{
	(void)dev, (void)op, (void)off, (void)len;
	return FI_GO;
}
static inline uint64_t fi_write_begin(struct nvmefs_dev *dev, uint64_t off, const void *buf,
				      uint64_t len)
{
	(void)dev, (void)off, (void)buf, (void)len;
	return 0;
}
static inline void fi_write_end(struct nvmefs_dev *dev, uint64_t id, bool written)
{
	(void)dev, (void)id, (void)written;
}
static inline void fi_submit_done(void)
{
}
static inline uint64_t fi_flush_begin(struct nvmefs_dev *dev)
{
	(void)dev;
	return 0;
}
static inline void fi_flush_end(struct nvmefs_dev *dev, uint64_t mark)
{
	(void)dev, (void)mark;
}
static inline unsigned fi_latency_us(struct nvmefs_dev *dev)
{
	(void)dev;
	return 0;
}
static inline bool fi_refuse_submit(struct nvmefs_dev *dev)
{
	(void)dev;
	return false;
}
static inline bool fi_refuse_request(struct nvmefs_dev *dev, unsigned op, uint64_t off,
				     uint64_t len)
{
	(void)dev, (void)op, (void)off, (void)len;
	return false;
}
#endif

#endif
