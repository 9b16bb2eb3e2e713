/* SPDX-License-Identifier: MIT */
/*
 * spin.h: an adaptive poll window, for a thread that waits for its next
 * message and would rather find it by polling for a while than sleep and
 * be woken (on this project's VM a wake-up costs 15 to 25 us, mostly the
 * interrupt enabling after each wait queue's lock). The rule is guest
 * halt-polling's: after a wait that outlasted the window, widen it
 * (doubling, up to max_ns) if the message came within max_ns, else halve
 * it; below SPIN_MIN_NS it closes, so an idle or slow-paced peer costs no
 * CPU. Used by the /dev/fuse leader (fs/fuse/loop.c, -o spin), the native
 * door's client threads (fs/native/server.c) and libnvmefs's waits for a
 * reply (client/client.c). Header-only: libnvmefs links none of the
 * daemon's code.
 */
#ifndef NVMEFS_SPIN_H
#define NVMEFS_SPIN_H

#include <stdint.h>
#include <time.h>

#define NVMEFS_SPIN_MIN_NS   2000u  /* below this the window is closed */
#define NVMEFS_SPIN_START_NS 10000u /* where it opens again */

struct nvmefs_spin {
	uint64_t ns;	 /* the window now */
	uint64_t max_ns; /* its bound; 0: never poll */
};

static inline uint64_t nvmefs_spin_clock(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static inline void nvmefs_spin_init(struct nvmefs_spin *s, uint64_t max_ns)
{
	s->max_ns = max_ns;
	s->ns = max_ns < NVMEFS_SPIN_START_NS ? max_ns : NVMEFS_SPIN_START_NS;
}

/* A wait outlasted the window: the message came waited_ns after the wait
 * began. */
static inline void nvmefs_spin_adapt(struct nvmefs_spin *s, uint64_t waited_ns)
{
	if (waited_ns <= s->max_ns) {
		s->ns = s->ns < NVMEFS_SPIN_START_NS / 2 ? NVMEFS_SPIN_START_NS : 2 * s->ns;
		if (s->ns > s->max_ns)
			s->ns = s->max_ns;
	} else {
		s->ns /= 2;
		if (s->ns < NVMEFS_SPIN_MIN_NS)
			s->ns = 0;
	}
}

#endif
