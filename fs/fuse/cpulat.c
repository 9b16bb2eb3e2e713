// SPDX-License-Identifier: MIT
/*
 * Idle CPUs kept quick to wake while the mount is busy (-o cpu_latency).
 *
 * A FUSE request puts its caller to sleep until the reply; its CPU goes
 * idle. Where idle CPUs halt at once (a KVM guest without halt polling,
 * as on this project's test machine; deep C-states on bare metal), the
 * reply's wake-up waits for the CPU to come back, and a program making one
 * request after another (a create loop: four round trips a file) pays
 * that on every one, which a kernel filesystem, answering without
 * sleeping, never does (docs/PERFORMANCE.md, "Halted vCPUs").
 *
 * The kernel's PM QoS lets a program ask for it: a CPU latency request
 * through /dev/cpu_dma_latency (Documentation/power/pm_qos_interface.rst),
 * the way latency-bound daemons and tuned's latency profiles do. With
 * 0 us asked, cpuidle keeps idle CPUs in their polling state, and a
 * wake-up only sets a flag the idle CPU is watching. The request is this
 * process's: the kernel drops it when the descriptor closes, crash
 * included; no setting of the system is changed.
 *
 * It is held only while requests come: the first request after a quiet
 * spell asks for the latency (one write(2), on the serving thread), and a
 * watcher thread, looking every IDLE_MS while it is held, lets it go (the
 * default value, -1) at a look that found no request since the one
 * before: after IDLE_MS to twice that of quiet. An idle mount thus costs
 * no CPU time; a busy one the idle CPUs' polling, as its own leader's
 * polling of /dev/fuse does.
 */
#include "door_i.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "nvmefs/util.h"

#define CPU_DMA_LATENCY "/dev/cpu_dma_latency"
/* How often the watcher looks while a hold stands. */
#define IDLE_MS 100
/* What a request is put back to (PM_QOS_DEFAULT_VALUE): no constraint. */
#define LATENCY_DEFAULT (-1)

static struct {
	atomic_bool on;		    /* the device is open: busy() may ask */
	int fd;			    /* CPU_DMA_LATENCY while open, else -1 (mu) */
	int32_t busy_us;	    /* asked while busy */
	atomic_bool held;	    /* the request stands at busy_us */
	atomic_bool seen;	    /* a request came since the watcher looked */
	atomic_uint_fast64_t holds; /* busy spells so far */
	pthread_mutex_t mu;	    /* fd and its writes, held's changes, stop */
	pthread_cond_t cond;	    /* held became true, or stop */
	bool stop;
	bool started;
	pthread_t thread;
} cl = {.fd = -1, .mu = PTHREAD_MUTEX_INITIALIZER};

/* Ask nothing any more: closing the device drops the request. mu held. */
static void give_up(void)
{
	atomic_store(&cl.on, false);
	atomic_store(&cl.held, false);
	if (cl.fd >= 0)
		close(cl.fd);
	cl.fd = -1;
}

/* Ask for us (LATENCY_DEFAULT: nothing). A failure gives the request up,
 * so that none is left standing at busy_us. mu held. */
static int ask(int32_t us)
{
	ssize_t n;

	if (cl.fd < 0)
		return -EBADF;
	n = write(cl.fd, &us, sizeof(us));
	if (n == (ssize_t)sizeof(us))
		return 0;
	nvmefs_warn("cpu_latency: cannot write %s: %s; idle CPUs are left as they are",
		    CPU_DMA_LATENCY, n < 0 ? strerror(errno) : "short write");
	give_up();
	return -EIO;
}

/*
 * seen is stored, then held loaded; the watcher stores held false, then
 * exchanges seen (all sequentially consistent): either this request sees
 * held false and asks again, under mu, after the watcher's look, or the
 * watcher sees it and keeps the hold.
 */
void nvmefs_cpulat_busy(void)
{
	if (!atomic_load_explicit(&cl.on, memory_order_relaxed))
		return;
	if (!atomic_load(&cl.seen))
		atomic_store(&cl.seen, true);
	if (atomic_load(&cl.held))
		return;
	pthread_mutex_lock(&cl.mu);
	if (!atomic_load(&cl.held) && !ask(cl.busy_us)) {
		atomic_store(&cl.held, true);
		atomic_fetch_add_explicit(&cl.holds, 1, memory_order_relaxed);
		pthread_cond_signal(&cl.cond);
	}
	pthread_mutex_unlock(&cl.mu);
}

/* The watcher: sleeps while nothing is held, else looks every IDLE_MS and
 * lets the hold go after a look that found no request since the last. */
static void *watch(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&cl.mu);
	while (!cl.stop) {
		struct timespec t;

		if (!atomic_load(&cl.held)) {
			pthread_cond_wait(&cl.cond, &cl.mu);
			continue;
		}
		clock_gettime(CLOCK_MONOTONIC, &t);
		t.tv_nsec += IDLE_MS * 1000000L;
		t.tv_sec += t.tv_nsec / 1000000000L;
		t.tv_nsec %= 1000000000L;
		while (!cl.stop && pthread_cond_timedwait(&cl.cond, &cl.mu, &t) != ETIMEDOUT) {
		}
		if (cl.stop)
			break;
		atomic_store(&cl.held, false);
		if (atomic_exchange(&cl.seen, false))
			atomic_store(&cl.held, true); /* still busy */
		else
			(void)ask(LATENCY_DEFAULT); /* said, and given up, if it fails */
	}
	pthread_mutex_unlock(&cl.mu);
	return NULL;
}

int nvmefs_cpulat_parse(const char *s, int *busy_us)
{
	unsigned long v;
	char *end;

	*busy_us = 0;
	if (!s)
		return 0;
	if (!strcmp(s, "off")) {
		*busy_us = -1;
		return 0;
	}
	errno = 0;
	v = strtoul(s, &end, 10);
	if (errno || end == s || *end || *s == '-' || v > 1000000) {
		nvmefs_err("bad cpu_latency '%s': want microseconds from 0 to 1000000, or off", s);
		return -EINVAL;
	}
	*busy_us = (int)v;
	return 0;
}

bool nvmefs_cpulat_awake(int busy_us)
{
	int fd;

	if (busy_us != 0)
		return false; /* off, or a latency that lets idle CPUs sleep lightly */
	fd = open(CPU_DMA_LATENCY, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	close(fd); /* its request, at the default value, goes with it */
	return true;
}

void nvmefs_cpulat_start(int busy_us)
{
	pthread_condattr_t ca;
	int err;

	if (busy_us < 0)
		return;
	cl.fd = open(CPU_DMA_LATENCY, O_WRONLY | O_CLOEXEC);
	if (cl.fd < 0) {
		nvmefs_warn("cpu_latency: cannot open %s (%s): idle CPUs are left as they are",
			    CPU_DMA_LATENCY, strerror(errno));
		return;
	}
	cl.busy_us = busy_us;
	cl.stop = false;
	atomic_store(&cl.held, false);
	atomic_store(&cl.seen, false);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&cl.cond, &ca);
	pthread_condattr_destroy(&ca);
	err = pthread_create(&cl.thread, NULL, watch, NULL);
	if (err) {
		nvmefs_warn("cpu_latency: cannot start its thread (%s): idle CPUs are left as "
			    "they are",
			    strerror(err));
		pthread_cond_destroy(&cl.cond);
		close(cl.fd);
		cl.fd = -1;
		return;
	}
	pthread_setname_np(cl.thread, "nvmefs-cpulat");
	cl.started = true;
	atomic_store(&cl.on, true);
}

void nvmefs_cpulat_stop(void)
{
	if (!cl.started)
		return;
	pthread_mutex_lock(&cl.mu);
	cl.stop = true;
	pthread_cond_signal(&cl.cond);
	pthread_mutex_unlock(&cl.mu);
	pthread_join(cl.thread, NULL);
	/* A serving thread left behind (uring.c's stop may leave one) finds
	 * the device closed, under mu: nothing is written to a descriptor
	 * whose number may be another file's by then. */
	pthread_mutex_lock(&cl.mu);
	give_up();
	pthread_mutex_unlock(&cl.mu);
	pthread_cond_destroy(&cl.cond);
	cl.started = false;
}

int nvmefs_cpulat_state(uint64_t *holds)
{
	*holds = atomic_load_explicit(&cl.holds, memory_order_relaxed);
	if (!atomic_load(&cl.on))
		return -1;
	return atomic_load(&cl.held);
}
