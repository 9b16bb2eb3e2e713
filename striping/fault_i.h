/* SPDX-License-Identifier: MIT */
/*
 * Test-only device faults and power-loss emulation.
 *
 * Only in the nvmefs_striping_fi library (built with NVMEFS_FAULT_INJECTION),
 * which tests and the test daemon nvmefs-fi link; the library that programs
 * use has none of it. So this header sits here, not in include/nvmefs/
 * (the interfaces fs/ builds on): only what links nvmefs_striping_fi has
 * striping/ on its include path, and a program that included it would not
 * compile. Everything here acts at the lowest level, on a member's
 * descriptor, so it sees the engine's libaio blocks, the synchronous
 * metadata I/O (nvmefs_dev_pio) and flushes alike.
 *
 * Faults are set per member and apply to the I/O started after they were set:
 *  - NVMEFS_FAULT_EIO: matching blocks are not sent to the device and fail
 *    with -EIO (as a failed medium would report); a matching flush fails;
 *  - NVMEFS_FAULT_SHORT: matching blocks are sent one device block shorter
 *    than asked, so the kernel really returns a short transfer, which the
 *    caller must turn into -EIO;
 *  - NVMEFS_FAULT_NOMEM: the engine refuses a whole request with a
 *    matching segment at submission, -ENOMEM and nothing sent (as when it
 *    cannot allocate its blocks), so that its caller's path for a request
 *    never sent is exercised; not for flushes or synchronous I/O;
 *  - latency_us: the member's engine reaper sleeps that long before each
 *    reap;
 *  - eagain_ms: io_submit on the member is refused with -EAGAIN (nothing
 *    submitted) until that long after the fault was set, as the kernel does
 *    when it is short of aio resources; the engine must retry, not spin.
 *
 * Power loss, the way CrashMonkey emulates it at block level: once recording
 * is on, every write to a member is remembered (its old and new contents)
 * until a flush of that member that started after the write completed. At
 * the crash point further writes fail without reaching a member, the writes
 * in flight are waited for, and then each remembered write is independently
 * kept, dropped (the old contents put back) or torn (only a prefix of it,
 * in device blocks, kept), chosen by a seed. What is left on the members is
 * what a power cut could have left; the process must then exit at once.
 */
#ifndef NVMEFS_FAULT_I_H
#define NVMEFS_FAULT_I_H

#include <stdbool.h>
#include <stdint.h>

struct nvmefs_engine;
struct nvmefs_dev;
struct nvmefs_devset;

enum nvmefs_fault_kind {
	NVMEFS_FAULT_NONE = 0,
	NVMEFS_FAULT_EIO,
	NVMEFS_FAULT_SHORT,
	NVMEFS_FAULT_NOMEM,
};

#define NVMEFS_FAULT_READS   (1u << 0)
#define NVMEFS_FAULT_WRITES  (1u << 1)
#define NVMEFS_FAULT_FLUSHES (1u << 2) /* EIO only */

struct nvmefs_fault {
	enum nvmefs_fault_kind kind;
	unsigned ops;	     /* NVMEFS_FAULT_*; 0 means reads and writes */
	uint64_t off_lo;     /* a block matches if it overlaps [off_lo, off_hi) */
	uint64_t off_hi;     /* 0: to the end of the device */
	uint64_t after;	     /* let this many matching operations through first */
	uint64_t count;	     /* then fail this many (0: all of them) */
	unsigned latency_us; /* delay before each reap on this device */
	unsigned eagain_ms;  /* refuse io_submit with -EAGAIN for this long */
};

/* Set (or with kind NONE and no latency, clear) a member's fault. 0, or
 * -EINVAL for a set not opened by this library. */
int nvmefs_dev_inject(struct nvmefs_dev *dev, const struct nvmefs_fault *f);
/* Operations the member's fault has failed so far. */
uint64_t nvmefs_dev_fault_hits(struct nvmefs_dev *dev);
/* io_submit calls the member's eagain fault has refused so far. */
uint64_t nvmefs_dev_fault_refusals(struct nvmefs_dev *dev);

/* The same, naming the member by its index in the engine's device set. */
int nvmefs_engine_inject(struct nvmefs_engine *eng, unsigned dev, const struct nvmefs_fault *f);
uint64_t nvmefs_engine_fault_hits(struct nvmefs_engine *eng, unsigned dev);
uint64_t nvmefs_engine_fault_refusals(struct nvmefs_engine *eng, unsigned dev);

/* ---- power loss ---- */

struct nvmefs_powerloss {
	uint64_t seed;
	unsigned keep_pct; /* chance that an unflushed write is kept whole */
	unsigned tear_pct; /* chance that it is torn; the rest are dropped */
};

struct nvmefs_powerloss_report {
	uint64_t unflushed; /* writes not followed by a flush at the crash */
	uint64_t kept, torn, dropped;
	uint64_t bytes; /* of those writes */
	int error;	/* 0, or the first -errno while rewriting members */
};

/* Called at the crash point with what was done; must not return. */
typedef void (*nvmefs_powerloss_fn)(const struct nvmefs_powerloss_report *r);

/* Start recording unflushed writes on every member of set (one set per
 * process). 0, -EBUSY (another set records) or -ENOMEM. */
int nvmefs_powerloss_record(struct nvmefs_devset *set);

/* Cut the power now: returns only if recording is off (-EINVAL); otherwise
 * rewrites the members and calls fn. */
int nvmefs_powerloss_now(const struct nvmefs_powerloss *pl, nvmefs_powerloss_fn fn);

/* Has the power been cut (the process is about to end)? A daemon then
 * answers nothing more: a real power cut returns no error to anyone. */
bool nvmefs_powerloss_cut(void);

/* Cut the power when n more writes have been started (counting blocks on
 * every member): the (n+1)-th and every later one never reaches a member,
 * and the thread that started it cuts once it has queued its request
 * (never from a completion thread). 0 or -EINVAL. */
int nvmefs_powerloss_after(uint64_t n, const struct nvmefs_powerloss *pl, nvmefs_powerloss_fn fn);

#endif
