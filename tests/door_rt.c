// SPDX-License-Identifier: MIT
/*
 * door_rt DIR N: what one small file costs through each door, in
 * microseconds a file (each loop timed whole, not call by call), on DIR, a
 * directory of an nvmefs mount: N files each of
 *  - mount:        open(O_CREAT) + 4 KiB write + close through the mount
 *  - create:       nvmefs_create + nvmefs_close_fd (the native door)
 *  - create+write: the same with a 4 KiB nvmefs_pwrite between them
 * and N 4 KiB nvmefs_pwrite at QD1 to one file opened through the mount.
 * A benchmark (docs/NATIVE.md, "Round trips"), not a test: this machine's
 * figures swing; compare runs made side by side (NVMEFS_CLIENT_SPIN_US
 * changes the library's polling).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "libnvmefs.h"

static char buf[4096];
static const char *dir;
static struct nvmefs_client *cl;

static double now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static void die(const char *what, int err)
{
	fprintf(stderr, "door_rt: %s: %s %s\n", what, strerror(err < 0 ? -err : err),
		cl ? nvmefs_client_error(cl) : "");
	exit(1);
}

/* A new subdirectory of dir for one pass, opened O_PATH. */
static int subdir(const char *name, char *path, size_t len)
{
	int d;

	snprintf(path, len, "%s/%s", dir, name);
	if (mkdir(path, 0755))
		die(path, errno);
	d = open(path, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (d < 0)
		die(path, errno);
	return d;
}

static double pass_mount(int n)
{
	char path[4096], p[4200];
	int d = subdir("mount", path, sizeof(path));
	double t0 = now();

	for (int i = 0; i < n; i++) {
		int fd;

		snprintf(p, sizeof(p), "%s/f%d", path, i);
		fd = open(p, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
		if (fd < 0 || write(fd, buf, sizeof(buf)) != (ssize_t)sizeof(buf))
			die(p, errno);
		close(fd);
	}
	close(d);
	return (now() - t0) / n * 1e6;
}

static double pass_door(int n, bool data)
{
	char path[4096], name[32];
	int d = subdir(data ? "door_write" : "door", path, sizeof(path));
	double t0 = now();

	for (int i = 0; i < n; i++) {
		struct stat st;
		int fd = dup(d), ret;

		snprintf(name, sizeof(name), "f%d", i);
		ret = nvmefs_create(cl, d, name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644, 022,
				    fd, &st);
		if (ret)
			die(name, ret);
		if (data && nvmefs_pwrite(cl, fd, buf, sizeof(buf), 0) != (ssize_t)sizeof(buf))
			die("nvmefs_pwrite", EIO);
		nvmefs_close_fd(cl, fd);
		close(fd);
	}
	close(d);
	return (now() - t0) / n * 1e6;
}

static double pass_pwrite(int n)
{
	char p[4200];
	int fd;
	double t0;

	snprintf(p, sizeof(p), "%s/qd1", dir);
	fd = open(p, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
	if (fd < 0 || ftruncate(fd, 1 << 20))
		die(p, errno);
	if (nvmefs_reg_fd(cl, fd))
		die("nvmefs_reg_fd", EINVAL);
	t0 = now();
	for (int i = 0; i < n; i++)
		if (nvmefs_pwrite(cl, fd, buf, sizeof(buf), (uint64_t)(i % 256) * 4096) !=
		    (ssize_t)sizeof(buf))
			die("nvmefs_pwrite", EIO);
	t0 = (now() - t0) / n * 1e6;
	nvmefs_unreg_fd(cl, fd);
	close(fd);
	return t0;
}

int main(int argc, char **argv)
{
	int n, ret;

	if (argc != 3 || (n = atoi(argv[2])) <= 0) {
		fprintf(stderr, "usage: door_rt DIR N\n");
		return 2;
	}
	dir = argv[1];
	memset(buf, 'x', sizeof(buf));
	ret = nvmefs_attach(dir, &cl);
	if (ret)
		die(dir, ret);
	printf("mount %.1f us/file, create %.1f, create+write %.1f, pwrite QD1 %.1f us\n",
	       pass_mount(n), pass_door(n, false), pass_door(n, true), pass_pwrite(n));
	nvmefs_detach(cl);
	return 0;
}
