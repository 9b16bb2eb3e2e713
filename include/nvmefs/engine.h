/* SPDX-License-Identifier: MIT */
/*
 * nvmefs I/O engine: parallel libaio O_DIRECT I/O over a device set.
 *
 * One libaio context and one completion thread per device (the thread runs on
 * the device's NUMA node). A request is a list of segments, each naming a
 * device, an offset on it, a length and a buffer. The engine splits segments
 * into blocks of at most max_io bytes (pieces that follow each other on a
 * device travel as one vectored block), queues them on their devices and keeps
 * up to queue_depth blocks in flight per device (a sliding window: every
 * completion reaped lets a queued block go). The request completes exactly
 * once, when its last block has, through its done callback.
 *
 * Every completion is checked: a failed block fails the request with the
 * device's error, a short one with -EIO. Nothing is retried silently except
 * -EAGAIN from io_submit, which only means "not now".
 */
#ifndef NVMEFS_ENGINE_H
#define NVMEFS_ENGINE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/uio.h>

#include "nvmefs/devset.h"

struct nvmefs_engine;

enum nvmefs_io_op {
	NVMEFS_IO_READ = 0,
	NVMEFS_IO_WRITE = 1,
};

/* A piece of a request on one device. All three of off, len and buf must be
 * aligned for O_DIRECT on that device (block_size, mem_align). */
struct nvmefs_io_seg {
	uint32_t dev; /* index in the device set */
	uint64_t off; /* byte offset on the device */
	uint64_t len; /* bytes, > 0 */
	void *buf;    /* source (write) or destination (read) */
};

struct nvmefs_io_req;
typedef void (*nvmefs_io_done_fn)(struct nvmefs_io_req *req, int res);

/*
 * A request. The caller owns it and the segment array, and keeps both alive
 * and unchanged from nvmefs_engine_submit() until done has been called.
 */
struct nvmefs_io_req {
	enum nvmefs_io_op op;
	unsigned nr_segs;
	const struct nvmefs_io_seg *segs;
	/* Called once from a completion thread with 0 or the first -errno.
	 * It may submit new requests; it must not block for long. */
	nvmefs_io_done_fn done;
	void *priv; /* for the caller */

	/* Private to the engine. */
	atomic_uint_fast64_t pending;
	atomic_int error;
};

struct nvmefs_engine_opts {
	unsigned queue_depth; /* blocks in flight per device (0: 32) */
	uint64_t max_io;      /* split segments into blocks of at most this
			       * (0: 1 MiB); a multiple of every block size */
};

/* Per-device counters, updated as completions are reaped. */
struct nvmefs_engine_dev_stats {
	uint64_t read_ops, read_bytes; /* ops: blocks, vectored ones once */
	uint64_t write_ops, write_bytes;
	uint64_t errors;
	uint64_t busy_ns;   /* sum of block latencies (submit to reap) */
	unsigned in_flight; /* blocks in the kernel now */
	unsigned queued;    /* blocks waiting for a slot */
};

/*
 * Create an engine over set, which must outlive it. Starts one completion
 * thread per device. Returns 0 or -errno (-EINVAL for bad options).
 */
int nvmefs_engine_create(struct nvmefs_engine **out, struct nvmefs_devset *set,
			 const struct nvmefs_engine_opts *opts);

/*
 * Wait for every submitted request to complete, then stop the threads and
 * free the engine. NULL is allowed.
 */
void nvmefs_engine_destroy(struct nvmefs_engine *eng);

/*
 * Queue req. Returns 0 and later calls req->done exactly once, or returns
 * without calling it -EINVAL (no segment, a device index out of range, a
 * misaligned or out-of-bounds segment) or -ENOMEM (no memory for its
 * blocks). Thread-safe; never holds a lock across io_submit.
 */
int nvmefs_engine_submit(struct nvmefs_engine *eng, struct nvmefs_io_req *req);

/*
 * A plug: small requests gathered and sent together. From
 * nvmefs_engine_plug(eng) on, a request the calling thread submits to eng
 * with nvmefs_engine_submit_held (not on a ring thread; elsewhere it is
 * nvmefs_engine_submit) is queued on its devices but not sent, until
 * nvmefs_engine_plug_send(), which sends what the thread holds and
 * returns how many requests it held since the last send (some may have
 * gone already: see next). Held blocks sit in their devices' queues in
 * order: any later submission to a device, by any thread, or a completion
 * there, sends them too. So holding delays, and only the holder can
 * stretch that: it must send what it holds before it waits for anything
 * or sleeps (nvmefs_engine_run does it for its own wait), and soon;
 * nvmefs_engine_plug_held() says how many it holds and since when
 * (nvmefs_now_ns). nvmefs_engine_unplug() sends them and ends the plug.
 * Only what nobody waits for directly should be held: the core holds a
 * write answered early (NVMEFS_WRITE_BEHIND), and the native door's
 * threads plug to gather their clients' (fs/native/server_io.c).
 */
int nvmefs_engine_submit_held(struct nvmefs_engine *eng, struct nvmefs_io_req *req);
void nvmefs_engine_plug(struct nvmefs_engine *eng);
unsigned nvmefs_engine_plug_send(void);
unsigned nvmefs_engine_plug_held(uint64_t *since_ns);
/* Whether the calling thread holds max requests or more, or the first of
 * those it holds was held max_ns ago or more: time to send (a clock read
 * only when it holds some). */
bool nvmefs_engine_plug_due(unsigned max, uint64_t max_ns);
void nvmefs_engine_unplug(void);

/* Submit req and wait for it; returns its result. req->done is overridden. */
int nvmefs_engine_run(struct nvmefs_engine *eng, struct nvmefs_io_req *req);

/*
 * A thread that waits on an io_uring of its own (a FUSE queue's leader,
 * fs/fuse/uring.c) may carry on that ring the blocks of the requests it
 * submits: their completions then come back to it with its other work,
 * without a reaper's wake-up and hand-over. queue() puts one block on the
 * ring (a read or write of iovcnt buffers at off on fd) with token, and
 * returns 0, or -errno to leave the block to the engine's libaio path. The
 * thread then calls nvmefs_engine_ring_done(token, res) with the block's
 * result (bytes, or -errno) when its ring brings it, and must keep doing
 * so until none is left: nothing else completes it. The hook is the
 * thread's (nvmefs_engine_ring, NULL: none); nvmefs_engine_run never uses
 * it (its caller waits), nor does the test build with fault injection.
 * Blocks on the ring count as in flight for nvmefs_engine_fence.
 */
struct nvmefs_engine_ring {
	int (*queue)(void *arg, int fd, bool write, const struct iovec *iov, unsigned iovcnt,
		     uint64_t off, void *token);
	void *arg;
};
extern __thread const struct nvmefs_engine_ring *nvmefs_engine_ring;
void nvmefs_engine_ring_done(void *token, long res);

/* True on an engine's completion thread: the one that completes its
 * device's blocks, so it must not wait for any of them (it would wait
 * for itself). */
bool nvmefs_engine_reaping(void);

/* Make completed writes on device dev durable (see nvmefs_dev_flush). */
int nvmefs_engine_flush(struct nvmefs_engine *eng, unsigned dev);

/*
 * Fence the engine's device set (nvmefs_devset_fence) and wait until none
 * of its blocks is in the kernel: from then on nothing reaches a member;
 * queued and new blocks complete with -EIO. For a shutdown; not from an
 * engine callback (it waits for completions).
 */
void nvmefs_engine_fence(struct nvmefs_engine *eng);

/* Snapshot of device dev's counters. */
void nvmefs_engine_dev_stats(struct nvmefs_engine *eng, unsigned dev,
			     struct nvmefs_engine_dev_stats *st);

/* The engine's queue depth and block size after defaults were applied. */
unsigned nvmefs_engine_queue_depth(const struct nvmefs_engine *eng);
uint64_t nvmefs_engine_max_io(const struct nvmefs_engine *eng);

#endif
