/* SPDX-License-Identifier: MIT */
/*
 * stat_i.h: what nvmefs-stat's two files share: the sample (one read of
 * MOUNTPOINT/.nvmefs/stats, decoded) and the arithmetic on two samples,
 * from stat_sample.c, for the reports and the program in stat.c.
 * Standalone as they are: libc and json-c only.
 */
#ifndef NVMEFS_STAT_I_H
#define NVMEFS_STAT_I_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define STATS_FILE     ".nvmefs/stats"
#define SCHEMA_VERSION 1

/* Set by SIGINT/SIGTERM (stat.c): stop after the report being made, exit 0. */
extern volatile sig_atomic_t stop;

struct json_object;

/*
 * One device (schema: devices[i]). The counters are cumulative since
 * mount; in_flight and queued are the state at the moment of the sample.
 */
struct dev_stats {
	uint64_t index;
	const char *path; /* owned by the sample's JSON tree */
	uint64_t read_ops, read_bytes, write_ops, write_bytes, errors;
	uint64_t latency_sum_ns; /* sum of the latencies of the completed I/Os */
	double mean_latency_us;
	uint64_t in_flight, queued;
};

struct pool_stats {
	uint64_t buffer_bytes, buffers, allocated, in_use;
	bool pinned;
};

/* FUSE requests of one opcode (schema: requests.NAME). */
struct req_count {
	const char *name; /* owned by the sample's JSON tree */
	uint64_t count;
};

struct data_stats {
	uint64_t reads, writes, zero_copy_writes, copied_bytes, in_flight, peak_in_flight;
	/* Writes answered early, those of them held back, and their sends
	 * (false: a daemon from before write-behind or the hold). */
	bool has_held;
	uint64_t behind_writes, held_writes, held_sends;
};

/* The native door's (schema: native). clients is a gauge, the rest counters. */
struct native_stats {
	uint64_t clients, connects, reads, writes, fsyncs, read_bytes, write_bytes;
	uint64_t copied_requests, copied_bytes, refused, invalidations;
};

struct sample {
	struct json_object *root; /* owns every string below; NULL when empty */
	const char *mountpoint, *uuid, *label;
	uint64_t uptime_ns;
	bool shut_down;	   /* FS_IOC_SHUTDOWN (false from a daemon before it) */
	uint64_t taken_ns; /* our CLOCK_MONOTONIC at the read: the stand-in clock */
	struct dev_stats *dev;
	size_t ndev;
	struct pool_stats pool;
	struct req_count *req; /* sorted: biggest count first */
	size_t nreq;
	struct data_stats data;
	bool has_native; /* false: a daemon without the native door's counters */
	struct native_stats native;
	/* The transport (none: a daemon from before FUSE over io_uring). */
	const char *transport;
	uint64_t uring_queues, uring_depth, uring_requests;
	uint64_t uring_spread; /* queues whose threads may run on any CPU */
	bool has_away;	       /* the two below are in the stats */
	uint64_t uring_away;   /* queues led from another CPU, polling */
	uint64_t uring_polled; /* their leaders' waits that polling ended */
	bool has_spread;       /* false: a daemon from before placement */
	/* -o cpu_latency: 1 held now, 0 not now, -1 asked nothing (off, or
	 * not allowed); the busy spells it was held for. has_cpulat false: a
	 * daemon from before it. */
	bool has_cpulat;
	int cpulat_held;
	uint64_t cpulat_holds;
};

/* A uint64_t member of a struct, named by its schema key. */
struct u64_field {
	const char *key;
	size_t off;
};

#define NFIELDS(t) (sizeof(t) / sizeof((t)[0]))

/* The native door's counters (its one gauge, clients, is decoded apart). */
extern const struct u64_field native_counters[];
extern const size_t native_ncounters;

static inline uint64_t *field(void *base, const struct u64_field *f)
{
	return (uint64_t *)((char *)base + f->off);
}

static inline uint64_t field_get(const void *base, const struct u64_field *f)
{
	return *(const uint64_t *)((const char *)base + f->off);
}

/* ---- stat_sample.c ---- */
/* "nvmefs-stat: " and the message on stderr. */
__attribute__((format(printf, 1, 2))) void errmsg(const char *fmt, ...);
/* CLOCK_MONOTONIC in ns: the stand-in clock. */
uint64_t now_ns(void);
/*
 * Read, parse and decode the stats file FILE under MNT into S (empty on
 * entry). 0 or -errno with a message; on error S is left empty.
 */
int sample_read(struct sample *s, const char *mnt, const char *file);
/* Free what S holds; S is empty after. */
void sample_destroy(struct sample *s);
/* Every device of S added up into *TOT (path "-"). */
void sum_devices(const struct sample *s, struct dev_stats *tot);
/* *D = what happened between A and B: counters differenced, gauges B's. */
void dev_delta(const struct dev_stats *a, const struct dev_stats *b, struct dev_stats *d);
/* Why PREV and CUR cannot be differenced, or NULL when they can. */
const char *reset_reason(const struct sample *prev, const struct sample *cur);
/* Seconds between PREV and CUR, on the daemon's clock when it moved. */
double interval_s(const struct sample *prev, const struct sample *cur);
/* The requests of each type between PREV and CUR, sorted, into *OUTP (malloc'd). */
int request_deltas(const struct sample *prev, const struct sample *cur, struct req_count **outp);

#endif
