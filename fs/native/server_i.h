/* SPDX-License-Identifier: MIT */
/*
 * server_i.h: what the native door's two files share: the state of the
 * door, its clients, their files, regions and requests; and the sending
 * and the requests' path (server_io.c) that the control messages, the
 * client's thread and the door (server.c) use.
 */
#ifndef NVMEFS_SERVER_I_H
#define NVMEFS_SERVER_I_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "native_i.h"
#include "namei.h"
#include "rangelock_i.h"
#include "nvmefs/spin.h"
#include "nvmefs/wire.h"

#define MAX_CLIENTS 1024u
#define MAX_OUT	    64u /* messages queued for a client before it is read no more */
#define RELAXED	    memory_order_relaxed

struct nfile {
	struct nvmefs_inode *in; /* held open (nvmefs_ns_open); NULL: slot free */
	uint64_t ino;
	unsigned may;		      /* NVMEFS_WIRE_MAY_* */
	struct nvmefs_read_note note; /* relatime, as a handle of the mount keeps it */
	unsigned inflight;	      /* requests naming it (client thread) */
	/* its LAYOUT loan (NULL: none): apart, as files is reallocated
	 * while the file's range lock links it */
	struct nvmefs_rl_pub *pub;
	uint32_t lease_region; /* the region holding that word */
};

struct nregion {
	uint8_t *base; /* mapping; NULL: slot free */
	uint64_t size;
	unsigned inflight;
	unsigned leases; /* loans whose word lies in it */
	bool huge;	 /* a hugetlbfs memfd */
};

struct nclient;

struct nreq;

/* One piece of a request: what the core is asked in one call. */
struct npiece {
	struct nreq *r;
	uint64_t off, len, mem_off;
	int64_t res;
};

/* One request of a SUBMIT, from its check to its completion. */
struct nreq {
	struct nclient *c;
	struct nreq *next; /* the client's list of completed requests */
	bool sent;	   /* its completion went out from the engine's thread */
	uint64_t ino;	   /* the file's: the engine's thread reads no client table */
	struct nvmefs_wire_sqe e;
	atomic_uint left; /* pieces not yet done, and one for the issuer */
	unsigned npieces;
	struct npiece p[];
};

struct nmsg {
	size_t len;
	uint8_t data[];
};

struct nclient {
	struct nvmefs_native *srv;
	struct nclient *next; /* srv->clients (srv->mu) */
	int sock, wake;
	pthread_t thread;
	atomic_bool exited;
	struct nvmefs_cred cred;     /* SO_PEERCRED's, at the connect */
	struct nvmefs_cred msg_cred; /* the message being handled's sender (SCM_CREDENTIALS) */
	struct nvmefs_spin spin;     /* the idle wait's poll window (-o spin bounds it) */
	/* The client thread's own. */
	struct nfile *files;
	uint32_t nfiles;
	struct nregion *regions;
	uint32_t nregions;
	unsigned inflight;
	/* of those, answered by the engine's thread (send_now), not reaped */
	atomic_uint answered;
	struct nmsg *out[MAX_OUT]; /* messages not yet sent, oldest first */
	unsigned nout;
	struct nvmefs_wire_cqe *cq; /* completions not yet in a message */
	unsigned ncq, cqcap;
	/* mu: requests the engine completed, newest first; whether the
	 * client's thread has a wake-up coming for them; whether it is
	 * finishing (no completion goes out but through it then). */
	pthread_mutex_t mu;
	struct nreq *done;
	bool wake_pending, closing;
};

struct nvmefs_native {
	struct nvmefs_vol *vol;
	char *mountpoint;
	nvmefs_native_inval_fn inval;
	void *inval_arg;
	int lfd, stop;	      /* listening socket; eventfd, readable once stopping */
	atomic_bool stopping; /* stop was written */
	pthread_t acceptor;
	pthread_mutex_t mu;
	struct nclient *clients; /* mu */
	unsigned nclients;	 /* mu */
	dev_t dev;		 /* mu: st_dev of the mount, once known */
	bool dev_known;		 /* mu */
};

static inline void count(atomic_uint_fast64_t *c, uint64_t n)
{
	atomic_fetch_add_explicit(c, n, RELAXED);
}

static inline bool aligned(uint64_t v)
{
	return !(v & (NVMEFS_BLOCK - 1));
}

/* One file's range, written by completed requests or about to be read, for one
 * invalidation. */
struct span {
	uint32_t handle;
	uint64_t start, end;
};

#define MAX_SPANS 16

/* ---- server_layout.c: the read door's loans ---- */
/* LAYOUT: the bytes written, *gen the loan's generation; or -errno (with
 * -ENOBUFS, *gen the bytes needed). */
int64_t do_layout(struct nclient *c, const struct nvmefs_wire_msg *m, int64_t *gen);
/* End f's loan, if it has one. */
void layout_end(struct nclient *c, struct nfile *f);

/* ---- server_io.c: sending ---- */
/* Queue a message: the header and len bytes of body (cnt entries). 0,
 * -ENOBUFS (MAX_OUT queued) or -ENOMEM. */
int queue_msg(struct nclient *c, uint16_t type, int64_t arg, int64_t arg2, const void *body,
	      uint32_t cnt, size_t len);
/* Queue a REPLY of arg and arg2. */
int reply(struct nclient *c, int64_t arg, int64_t arg2);
/* Send what the socket takes now. Returns 0, or -errno: the client is gone. */
int flush(struct nclient *c);
/* Note a completion for user_data (sent by the next flush). */
int complete(struct nclient *c, uint64_t user_data, int64_t res);

/* ---- server_io.c: requests ---- */
/* Start a checked READ or WRITE e on the client's file and region. */
void start_io(struct nclient *c, const struct nvmefs_wire_sqe *e);
/* The client's small writes answered early, held back by its thread and
 * sent together (server_io.c, "writes held back"): from hold_begin(c) on,
 * in c's thread; hold_send sends them (also the thread's wait hook),
 * hold_send_due when there are enough or they are old enough, hold_end
 * sends them and stops. */
void hold_begin(struct nclient *c);
void hold_send(void);
void hold_send_due(void);
void hold_end(void);
/* Ask the kernel to drop what it caches of the file (native_i.h). */
void inval(struct nclient *c, uint64_t ino, int64_t off, int64_t len);
/* Add a range to v (n of MAX_SPANS): merged with its file's; a file beyond
 * MAX_SPANS is invalidated whole now. */
void span_add(struct nclient *c, struct span *v, unsigned *n, uint32_t handle, uint64_t off,
	      uint64_t len);
/* Finish the requests the engine completed (the client's thread). */
void reap(struct nclient *c);

#endif
