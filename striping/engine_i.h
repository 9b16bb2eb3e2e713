/* SPDX-License-Identifier: MIT */
/*
 * Engine internals shared by engine.c and the test-only fault injector
 * (fault.c). Nothing outside striping/ includes this.
 */
#ifndef NVMEFS_ENGINE_I_H
#define NVMEFS_ENGINE_I_H

#include <libaio.h>
#include <pthread.h>
#include <stdbool.h>
#include <sys/uio.h>

#include "nvmefs/engine.h"

/*
 * Pieces of one request that follow each other on a device but not in memory
 * (the chunks of one stripe row after another) travel as one vectored iocb
 * of at most this many buffers, so a device sees one I/O where the layout
 * made several.
 */
#define UNIT_IOV 16

/* One block of a request: one iocb on one device. */
struct unit {
	struct iocb cb; /* first, so &unit->cb == unit */
	struct nvmefs_io_req *req;
	struct unit *next;
	uint64_t off;	 /* byte offset on the device */
	uint64_t expect; /* bytes the block must transfer */
	bool write;
	unsigned niov; /* buffers in iov; 1: a plain pread/pwrite */
	struct iovec iov[UNIT_IOV];
	uint64_t t_submit; /* ns, for latency stats */
	int result;	   /* 0 or -errno once complete */
	bool synthetic;	   /* completes without the kernel (result set) */
	struct edev *ed;   /* its device, when carried on a caller's ring */
	/* Power-loss records of this write (fi_i.h), one per buffer, each
	 * dropped or kept on its own as the chunks were before they were
	 * merged; 0: none. */
	uint64_t fi_rec[UNIT_IOV];
};

struct unit_slab {
	struct unit_slab *next;
	unsigned n;
	struct unit units[];
};

/* Per-device state. */
struct edev {
	struct nvmefs_engine *eng;
	struct nvmefs_dev *dev;
	unsigned idx;
	io_context_t ctx;
	pthread_t thread;
	bool thread_started;
	int efd;	     /* eventfd that wakes the reaper */
	struct iocb poll_cb; /* one-shot poll on efd */
	bool poll_ok;	     /* kernel supports IOCB_CMD_POLL */

	pthread_mutex_t lock;
	struct unit *qhead, *qtail; /* queued blocks; protected by lock */
	struct unit *synth;	    /* synthetic completions; protected by lock */
	struct unit *free_units;    /* protected by lock */
	struct unit_slab *slabs;    /* protected by lock */
	unsigned inflight;	    /* blocks in the kernel; protected by lock */
	unsigned queued;	    /* blocks in qhead list; protected by lock */
	bool stopping;		    /* protected by lock */

	/* Written only by the reaper thread, read by anyone. */
	atomic_uint_fast64_t read_ops, read_bytes, write_ops, write_bytes;
	atomic_uint_fast64_t errors, busy_ns;
};

struct nvmefs_engine {
	struct nvmefs_devset *set;
	unsigned qd;
	uint64_t max_io;
	/* Requests submitted whose done callback has not returned yet. */
	atomic_uint_fast64_t outstanding;
	struct edev devs[];
};

#endif
