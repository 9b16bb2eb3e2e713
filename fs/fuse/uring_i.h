/* SPDX-License-Identifier: MIT */
/*
 * uring_i.h: FUSE over io_uring's insides, shared by fs/fuse/uring.c (the
 * queues at work: leading, serving, replying, stopping) and
 * fs/fuse/uring_setup.c (making them before the INIT reply, freeing them,
 * what they report). The interface for the rest of the daemon is in
 * door_i.h; how the transport works, at the top of uring.c.
 */
#ifndef NVMEFS_URING_I_H
#define NVMEFS_URING_I_H

#include <liburing.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/uio.h>

#include "door_i.h"
#include "nvmefs/engine.h"

/*
 * The protocol's structures and constants (FUSE 7.42), which Debian 12's
 * <linux/fuse.h> (Linux 6.1) predates; the same layout as the kernel's uapi.
 */
#define FUSE_OVER_IO_URING_FLAG	   (1ULL << 41)
#define URING_IN_OUT_HEADER_SZ	   128
#define URING_OP_IN_OUT_SZ	   128
#define URING_CMD_REGISTER	   1
#define URING_CMD_COMMIT_AND_FETCH 2

struct uring_ent_in_out {
	uint64_t flags;
	uint64_t commit_id;  /* to echo in the commit */
	uint32_t payload_sz; /* bytes in the payload, either way */
	uint32_t padding;
	uint64_t reserved;
};

struct uring_req_header {
	char in_out[URING_IN_OUT_HEADER_SZ]; /* fuse_in_header; fuse_out_header */
	char op_in[URING_OP_IN_OUT_SZ];	     /* the opcode's own struct */
	struct uring_ent_in_out ent;
};

struct uring_cmd_req { /* in the SQE's 80-byte command area */
	uint64_t flags;
	uint64_t commit_id;
	uint16_t qid;
	uint8_t padding[6];
};

_Static_assert(sizeof(struct uring_ent_in_out) == 32, "FUSE 7.42 layout");
_Static_assert(sizeof(struct uring_req_header) == 288, "FUSE 7.42 layout");
_Static_assert(sizeof(struct uring_cmd_req) == 24, "FUSE 7.42 layout");

/*
 * Entries per queue (requests of one CPU served at once) by default:
 * DEFAULT_ENTRIES in all, at least 8 and at most 32 a queue. A queue holds
 * the requests of its CPU: a program's QD32 stream on one CPU needs 32 (fio
 * 4 KiB random O_DIRECT reads at QD32 on 4 loop devices: 34,600 IOPS with
 * 8 entries, 46,000 with 32; docs/PERFORMANCE.md). Each entry's payload
 * is 1 MiB of locked memory: 64 MiB in all up to 8 CPUs, 8 MiB a CPU
 * beyond.
 */
#define DEFAULT_ENTRIES 64u
#define MIN_DEPTH	8u
#define MAX_DEPTH	32u
/* place_note's window (requests) and the share of them that came while
 * another was served (1 / PLACE_SHARE) above which a queue's threads run
 * on any CPU. */
#define PLACE_WINDOW 256u
#define PLACE_SHARE  4u
/* The data a window's READs and WRITEs may carry (a mean of 16 KiB a
 * request) for its queue to be led away (uring.c, "Polling from another
 * CPU"). */
#define PLACE_AWAY_BYTES ((uint64_t)PLACE_WINDOW << 14)
/* The payload the kernel fills: max_write and max_pages (op_init) are 1 MiB. */
#define PAYLOAD_SZ ((size_t)1 << 20)
/* Before the payload: the fuse_in_header and the opcode's struct. */
#define HEAD_ROOM ((size_t)4096)

struct queue;

/* One registered pair of buffers, and the request in it. */
struct ent {
	struct queue *q;
	struct uring_req_header *hdr;
	char *area;    /* a page for the request's headers, then the payload (in q->areas) */
	char *payload; /* area + HEAD_ROOM: what the kernel fills */
	struct iovec iov[2];
	_Atomic uint64_t unique; /* the request being served (0: none) */
	uint64_t commit_id;
	struct ent *next; /* on its queue's handoff list */
};

struct queue {
	struct nvmefs_uring *u;
	unsigned qid;
	struct io_uring ring; /* submitted to by its leader alone */
	bool ring_ok;
	struct ent *ents;
	char *areas;	  /* the entries' areas, one mapping (uring_setup.c) */
	size_t areas_len; /* its length */
	unsigned live;	  /* entries the kernel holds (the leader) */
	/* The device blocks of the READs and WRITEs its leaders serve go on
	 * the ring too (nvmefs_engine_ring): their completions come back to
	 * the leader, which answers at once, with no I/O thread's wake-up and
	 * no hand-over. ring_io: blocks on the ring not yet completed; the
	 * queue serves on until none is left. */
	struct nvmefs_engine_ring hook;
	atomic_uint ring_io;
	/* Placement (the top): requests handed to a handler and not yet
	 * answered; this window's requests, those that came while another
	 * was served, the device reads its leaders put on the ring, and the
	 * bytes its READs asked for and its WRITEs brought;
	 * whether the threads may run anywhere (spread), or anywhere but the
	 * queue's CPU, polling (away: "Polling from another CPU"). */
	atomic_uint serving;
	atomic_uint win_n, win_busy, win_reads;
	_Atomic uint64_t win_bytes;
	atomic_bool spread, away;
	_Atomic uint64_t polled;	/* waits that polling ended (away) */
	_Atomic uint64_t idle_waits;	/* waits made as SCHED_IDLE (idle_wait) */
	_Atomic uint64_t idle_backoffs; /* times a thread stopped them (slow wakes) */
	/* Replies made on other threads (I/O completions) are handed over
	 * here and committed by the leader: a command's completion runs as
	 * task work of the thread that submitted it, which should be one of
	 * the queue's, not an I/O thread. */
	pthread_mutex_t lock;
	struct ent *handoff; /* lock: entries to commit */
	bool woken;	     /* lock: efd written since the leader last looked */
	int efd;	     /* an eventfd the leader keeps a read on */
	uint64_t efd_val;
	/* The queue's threads, on its CPU or spread (uring.c, place); one
	 * at a time leads (waits on the ring and serves what it brings). A
	 * leader about to wait for another thread (a range lock, a buffer)
	 * or to serve a request that may (fsync, truncate) resigns first,
	 * and an idle thread, or a new one, leads on: the queue's other
	 * requests are not held up. */
	pthread_cond_t follow; /* lock: the ring has no leader, or q is done */
	bool led;	       /* lock: a thread leads */
	bool done;	       /* lock: the queue serves no more */
	unsigned nthreads;     /* lock: threads started (at most depth + 1) */
	unsigned idle;	       /* lock: threads waiting to lead */
	unsigned joined;       /* threads joined (nvmefs_uring_stop) */
	pthread_t *tids;       /* depth + 1 */
};

/* NVMEFS_TEST_URING_IDLE (tests/test_uring.sh): "always" skips both of
 * the idle wait's checks of the CPUs (uring.c), "noload" the loadavg one. */
#define IDLE_TEST_NO_LOAD  1u
#define IDLE_TEST_NO_DELAY 2u

struct nvmefs_uring {
	struct fuse_session *se;
	struct nvmefs_vol *vol;
	int fd; /* /dev/fuse */
	unsigned nq, depth;
	struct queue *q;
	atomic_bool stopping;
	nvmefs_serve_fn *serve;
	void (*fail)(void *arg, int err);
	void *fail_arg;
	_Atomic uint64_t served; /* requests that came through the queues */
	cpu_set_t anywhere;	 /* the CPUs the daemon may run on (spread queues) */
	/* A leader with nothing in flight waits as SCHED_IDLE (uring.c,
	 * "Where the caller wakes"): asked for (-o uring_idle_wait), and a
	 * thread may leave SCHED_IDLE again (RLIMIT_NICE, CAP_SYS_NICE).
	 * Cleared if leaving it ever fails. Not while more threads are
	 * runnable than there are CPUs online (ncpus), from loadavg_fd
	 * (/proc/loadavg, -1: not readable, never). */
	atomic_bool idle_wait;
	/* The most a leader away from its queue's CPU polls its ring before
	 * it sleeps (uring.c, "Polling from another CPU"); 0: never away. */
	uint64_t poll_ns;
	unsigned ncpus;
	int loadavg_fd;
	unsigned idle_test; /* IDLE_TEST_*: tests/test_uring.sh */
};

#endif
