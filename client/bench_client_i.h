/* SPDX-License-Identifier: MIT */
/*
 * nvmefs-bench's client mode (client/bench_client.c), for striping/bench.c:
 * passes over one file of a mounted volume through libnvmefs, each thread
 * with its own client, its own shared buffers and its own slice of the
 * file. bench.c parses the command line, times the loops and prints the
 * figures in the engine mode's form; this module knows files and the
 * mount, which striping/ does not.
 */
#ifndef NVMEFS_BENCH_CLIENT_I_H
#define NVMEFS_BENCH_CLIENT_I_H

#include <stdbool.h>
#include <stdint.h>

struct nvmefs_bench_client_opts {
	const char *path;    /* a file inside a mounted nvmefs volume */
	bool write;	     /* write (create, truncate) the file, else read it */
	uint64_t size;	     /* bytes per pass, cut into size / block_size blocks */
	uint64_t block_size; /* bytes per request: a multiple of 512 (bench.c) */
	unsigned qd;	     /* requests in flight per thread */
	unsigned threads;    /* clients, each with its own slice */
};

/* What the daemon and the clients counted over the measured passes. */
struct nvmefs_bench_client_counts {
	bool daemon_known;	/* the stats file was found and read */
	uint64_t daemon_copied; /* data.copied_bytes + native.copied_bytes */
	uint64_t daemon_invals; /* native.invalidations */
	uint64_t bounce_bytes;	/* copied through the library's bounce buffers */
	double fsync_seconds;	/* the passes' final fsyncs (write) */
};

struct nvmefs_bench_client;

/*
 * Attach o->threads clients to the volume holding o->path, open the file
 * in each (created and truncated first for a write; it must hold o->size
 * bytes for a read), register it and allocate o->qd x o->block_size of
 * shared memory per client. o is copied. On success *out is the caller's
 * until nvmefs_bench_client_destroy. Returns 0 or -errno, after logging
 * a message that names what failed.
 */
int nvmefs_bench_client_create(const struct nvmefs_bench_client_opts *o,
			       struct nvmefs_bench_client **out);

/*
 * One pass: every thread moves its slice with o->qd requests in flight;
 * a write pass ends with an fsync, which *seconds includes (and
 * fsync_seconds counts apart). Returns 0 or the first -errno (logged).
 */
int nvmefs_bench_client_pass(struct nvmefs_bench_client *b, double *seconds);

/* Start counting (after the warm-up passes), and what was counted since. */
void nvmefs_bench_client_count_start(struct nvmefs_bench_client *b);
void nvmefs_bench_client_counts(struct nvmefs_bench_client *b,
				struct nvmefs_bench_client_counts *out);

/* Detach every client (the file stays). b may be NULL. */
void nvmefs_bench_client_destroy(struct nvmefs_bench_client *b);

#endif
