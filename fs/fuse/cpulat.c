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
	int fd;			    /* CPU_DMA_LATENCY; -1: never opened */
	int32_t busy_us;	    /* asked while busy */
	atomic_bool held;	    /* the request stands at busy_us */
	atomic_bool seen;	    /* a request came since the watcher looked */
	atomic_bool broken;	    /* a write failed, or stopped: ask no more */
	atomic_uint_fast64_t holds; /* busy spells so far */
	pthread_mutex_t mu;	    /* the transitions of held; stop */
	pthread_cond_t cond;	    /* held became true, or stop */
	bool stop;
	bool started;
	pthread_t thread;
} cl = {.fd = -1, .mu = PTHREAD_MUTEX_INITIALIZER};

/* Ask for us (LATENCY_DEFAULT: nothing). mu held. */
static int ask(int32_t us)
{
	ssize_t n = write(cl.fd, &us, sizeof(us));

	if (n == (ssize_t)sizeof(us))
		return 0;
	nvmefs_warn("cpu_latency: cannot write %s: %s; idle CPUs are left as they are",
		    CPU_DMA_LATENCY, n < 0 ? strerror(errno) : "short write");
	atomic_store(&cl.broken, true);
	return -EIO;
}

void nvmefs_cpulat_busy(void)
{
	if (cl.fd < 0)
		return;
	if (!atomic_load_explicit(&cl.seen, memory_order_relaxed))
		atomic_store_explicit(&cl.seen, true, memory_order_relaxed);
	if (atomic_load_explicit(&cl.held, memory_order_acquire) ||
	    atomic_load_explicit(&cl.broken, memory_order_relaxed))
		return;
	pthread_mutex_lock(&cl.mu);
	if (!atomic_load(&cl.held) && !atomic_load(&cl.broken) && !ask(cl.busy_us)) {
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
		if (!cl.stop && !atomic_exchange(&cl.seen, false)) {
			atomic_store(&cl.held, false);
			(void)ask(LATENCY_DEFAULT);
		}
	}
	pthread_mutex_unlock(&cl.mu);
	return NULL;
}

bool nvmefs_cpulat_possible(int busy_us)
{
	return busy_us >= 0 && !access(CPU_DMA_LATENCY, W_OK);
}

int nvmefs_cpulat_start(int busy_us)
{
	pthread_condattr_t ca;
	int ret;

	if (busy_us < 0)
		return 0;
	cl.fd = open(CPU_DMA_LATENCY, O_WRONLY | O_CLOEXEC);
	if (cl.fd < 0) {
		ret = -errno;
		nvmefs_warn("cpu_latency: cannot open %s (%s): idle CPUs are left as they are",
			    CPU_DMA_LATENCY, strerror(-ret));
		return 0;
	}
	cl.busy_us = busy_us;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&cl.cond, &ca);
	pthread_condattr_destroy(&ca);
	ret = -pthread_create(&cl.thread, NULL, watch, NULL);
	if (ret) {
		pthread_cond_destroy(&cl.cond);
		close(cl.fd);
		cl.fd = -1;
		return ret;
	}
	pthread_setname_np(cl.thread, "nvmefs-cpulat");
	cl.started = true;
	return 0;
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
	/* A serving thread left behind (uring.c's stop may leave one) asks
	 * under mu, and finds broken: nothing is written to the closed
	 * descriptor, whose number may be another file's by then. */
	pthread_mutex_lock(&cl.mu);
	atomic_store(&cl.broken, true);
	atomic_store(&cl.held, false);
	close(cl.fd); /* the kernel drops the request */
	pthread_mutex_unlock(&cl.mu);
	pthread_cond_destroy(&cl.cond);
	cl.started = false;
}

int nvmefs_cpulat_state(uint64_t *holds)
{
	*holds = atomic_load_explicit(&cl.holds, memory_order_relaxed);
	if (cl.fd < 0 || atomic_load(&cl.broken))
		return -1;
	return atomic_load(&cl.held);
}
