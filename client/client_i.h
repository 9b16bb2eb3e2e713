/* SPDX-License-Identifier: MIT */
/*
 * client_i.h: what libnvmefs's files share: a client's state (its
 * connection, regions, registered descriptors and request slots) and the
 * calls each file makes of another: the connection's (client.c), the
 * regions' (client_buf.c), used by the requests (client_io.c).
 *
 * These calls are not the library's API: hidden in libnvmefs.so like
 * everything but the API, and prefixed nvmefs_cl_, so that libnvmefs.a
 * adds no short name such as fail or control to a program it is linked
 * into.
 */
#ifndef NVMEFS_CLIENT_I_H
#define NVMEFS_CLIENT_I_H

/* The API is exported; everything else stays inside (-fvisibility=hidden). */
#pragma GCC visibility push(default)
#include "libnvmefs.h"
#pragma GCC visibility pop
#include "nvmefs/spin.h"
#include "nvmefs/wire.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define BOUNCE_CAP (256ull << 20) /* bounce memory one client may hold */

/* Memory the daemon has mapped: a buffer of the process, or a bounce region. */
struct region {
	uint8_t *base;
	size_t size;
	uint32_t id;	   /* the daemon's */
	uint64_t serial;   /* the process's buffer (struct shbuf, client_buf.c); 0: bounce */
	bool stale;	   /* its buffer was freed */
	bool bounce;	   /* the library's own */
	bool busy;	   /* bounce: lent to a request */
	unsigned inflight; /* requests using it */
};

/* A descriptor registered with the daemon (nvmefs_reg_fd). */
struct reg {
	int fd;
	uint32_t handle;
	unsigned may; /* NVMEFS_WIRE_MAY_* */
	unsigned inflight;
};

/* A request in flight; its index is the wire's user_data. */
struct slot {
	bool used, sync;
	int op;
	uint64_t user_data;
	void *ubuf; /* the caller's buffer */
	size_t len;
	struct region *region; /* the one the daemon uses */
	struct reg *reg;
	uint32_t next_free;
};

/* A client: one connection to one daemon (nvmefs_attach to nvmefs_detach). */
struct nvmefs_client {
	int sock;
	dev_t sock_dev; /* what sock was made as (sys_ident): closed only while so */
	ino_t sock_ino;
	bool dead;
	dev_t dev;
	struct nvmefs_wire_hello hello;
	struct region **regions;
	size_t nregions;
	struct reg *regs;
	size_t nregs;
	struct slot *slots;	  /* hello.max_inflight */
	uint32_t free_slot;	  /* head of the free list; max_inflight: none */
	unsigned sent;		  /* requests at the daemon */
	struct nvmefs_cqe *ready; /* completed, not yet reaped */
	unsigned nready;
	uint64_t bounce_held;
	uint64_t gen; /* g_gen (client_buf.c) when the regions were last checked */
	/* a control call's reply */
	bool want_reply, got_reply;
	int64_t reply_arg, reply_arg2;
	struct nvmefs_wire_stat reply_stat; /* CREATE's */
	unsigned unanswered;		    /* messages sent whose replies nobody waits for */
	uint64_t late_errors;		    /* of those, the replies that were errors */
	/* a synchronous helper's completion */
	bool sync_done;
	int64_t sync_res;
	uint8_t *rbuf; /* receive buffer */
	/* How long a wait polls before it sleeps: for a lone request or a
	 * control call's reply (spin), and with more at the daemon (spin_q) */
	struct nvmefs_spin spin, spin_q;
	struct nvmefs_client_stats st;
	char err[512];
};

/* ---- client.c: the connection ---- */
/* Say what failed (for nvmefs_client_error) and return ret. */
__attribute__((format(printf, 3, 4))) int nvmefs_cl_fail(struct nvmefs_client *c, int ret,
							 const char *fmt, ...);
/* Send one message, with fd attached when fd >= 0. */
int nvmefs_cl_send_msg(struct nvmefs_client *c, uint16_t type, int64_t arg, int64_t arg2,
		       const void *body, uint32_t cnt, size_t len, int fd);
/* The daemon is gone: every request in flight fails. */
void nvmefs_cl_lose(struct nvmefs_client *c);
/*
 * Receive and act on one message, waiting up to timeout_ms (-1: no limit).
 * Returns 1 when one came, 0 at the timeout, -ENOTCONN when the daemon is
 * gone.
 */
int nvmefs_cl_pump(struct nvmefs_client *c, int timeout_ms);
/* A control call: send, then wait for its reply. Returns the reply's arg
 * (a count or -errno). */
int64_t nvmefs_cl_control(struct nvmefs_client *c, uint16_t type, int64_t arg, int fd);
/* The same with arg2 and a body of len one-byte entries (CREATE's name). */
int64_t nvmefs_cl_call(struct nvmefs_client *c, uint16_t type, int64_t arg, int64_t arg2,
		       const void *body, uint32_t len, int fd);
/* The same with cnt entries in len bytes. */
int64_t nvmefs_cl_call_n(struct nvmefs_client *c, uint16_t type, int64_t arg, int64_t arg2,
			 const void *body, uint32_t cnt, size_t len, int fd);
/*
 * LAYOUT of the registered fd (wire.h): the daemon writes the loan into
 * blob[0, cap) and its generation at word, both in one shared buffer of
 * the process (nvmefs_buf_alloc). Returns the bytes written, *arg2 the
 * loan's generation, or -errno (-ENOBUFS: *arg2 the bytes needed).
 */
int64_t nvmefs_cl_layout(struct nvmefs_client *c, int fd, const void *blob, size_t cap,
			 const void *word, int64_t *arg2);
/*
 * nvmefs_pwrite, but the write may complete once the daemon has its bytes,
 * before the devices do (NVMEFS_WIRE_SQE_BEHIND, where HELLO offers it):
 * what write(2) through the mount gets for a small write. A device failure
 * then fails the file's next fsync (fd's nvmefs_fsync, or one through the
 * mount) with -EIO. For the preload's write(2).
 */
ssize_t nvmefs_cl_pwrite_behind(struct nvmefs_client *c, int fd, const void *buf, size_t len,
				uint64_t off);
/* fd's registration is under the number to from now on (the descriptor
 * moved with dup; the daemon's handle is the same). */
void nvmefs_cl_reg_renumber(struct nvmefs_client *c, int fd, int to);
/* The registration of fd, or NULL. */
struct reg *nvmefs_cl_reg_of(struct nvmefs_client *c, int fd);

/* ---- client_buf.c: shared memory ---- */
/* c's region holding [buf, buf + len), registering a shared buffer of the
 * process on its first use by c; NULL when the range is in none. */
struct region *nvmefs_cl_region_of(struct nvmefs_client *c, const void *buf, size_t len);
/* A free bounce region of at least len bytes: 0 with *out, -EAGAIN when
 * the cap is reached while others are lent, or -errno. */
int nvmefs_cl_bounce_get(struct nvmefs_client *c, size_t len, struct region **out);

#endif
