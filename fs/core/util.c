// SPDX-License-Identifier: MIT
/*
 * Helpers every module of the core uses and that use no module of it:
 * growing arrays, block-aligned buffers, the clock, synchronous I/O on one
 * member. They sit below the rest (docs/ARCHITECTURE.md), so that no two
 * modules of the core call each other in a loop.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fs_i.h"
#include "util_i.h"

void nvmefs_timespec_now(struct timespec *ts)
{
	clock_gettime(CLOCK_REALTIME, ts);
}

int nvmefs_grow(void *vp, size_t *cap, size_t need, size_t elem)
{
	size_t c = *cap ? *cap : 16;
	void *old, *v;

	if (need <= *cap)
		return 0;
	while (c < need) {
		if (c > SIZE_MAX / 2 / elem)
			return -ENOMEM;
		c *= 2;
	}
	memcpy(&old, vp, sizeof(old));
	v = realloc(old, c * elem);
	if (!v)
		return -ENOMEM;
	memcpy(vp, &v, sizeof(v));
	*cap = c;
	return 0;
}

void *nvmefs_aligned_alloc(size_t len)
{
	void *p = NULL;

	if (posix_memalign(&p, NVMEFS_BLOCK, len ? len : NVMEFS_BLOCK))
		return NULL;
	return p;
}

int nvmefs_vol_pio(struct nvmefs_vol *vol, unsigned dev, bool write, uint64_t off, void *buf,
		   size_t len)
{
	return nvmefs_dev_pio(&vol->set->devs[dev], write, off, buf, len);
}

bool nvmefs_pid_in_group(int32_t pid, uint32_t gid)
{
	char path[64], line[4096];
	bool found = false;
	FILE *f;

	if (pid <= 0)
		return false;
	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	f = fopen(path, "re");
	if (!f)
		return false;
	while (!found && fgets(line, sizeof(line), f)) {
		char *p = line + 7, *end;

		if (strncmp(line, "Groups:", 7))
			continue;
		for (;;) {
			unsigned long g = strtoul(p, &end, 10);

			if (end == p)
				break;
			found = g == gid;
			if (found)
				break;
			p = end;
		}
		break;
	}
	fclose(f);
	return found;
}
