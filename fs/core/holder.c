// SPDX-License-Identifier: MIT
/*
 * What a process holding a busy member is doing, so that the tools wait for
 * an nvmefs daemon that is letting go of it and refuse every other holder
 * at once (nvmefs_devset_opts.holder).
 *
 * For a plain FUSE mount, umount(8) returns as soon as the kernel has cut
 * the daemon's connection; the daemon then makes its last commit and flush
 * and closes the members, a moment later. "umount MNT && fsck.nvmefs ..." must
 * work all the same. The kernel's own word on the connection is the
 * daemon's /dev/fuse descriptor: poll() on it reports POLLERR once the
 * connection is gone (what libfuse's fuse_kern_unmount tests too). A copy
 * of it is taken with pidfd_getfd(2) (root, or the daemon's owner) and
 * polled without waiting; nothing is read or written. The daemon keeps a
 * descriptor of the connection until its members are closed (fs/tools/main.c),
 * so an nvmefs daemon holding members without one is still mounting them.
 */
#include "fs_i.h"
#include "holder_i.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

/* 1: process pid runs the nvmefs daemon (or its test twin nvmefs-fi). */
static bool is_daemon(pid_t pid)
{
	char path[64], exe[PATH_MAX];
	ssize_t len;
	char *base;

	snprintf(path, sizeof(path), "/proc/%d/exe", (int)pid);
	len = readlink(path, exe, sizeof(exe) - 1);
	if (len <= 0)
		return false;
	exe[len] = '\0';
	base = strrchr(exe, '/');
	base = base ? base + 1 : exe;
	/* A binary replaced since (a rebuild, an upgrade) reads "... (deleted)". */
	base[strcspn(base, " ")] = '\0';
	return !strcmp(base, "nvmefs") || !strcmp(base, "nvmefs-fi");
}

/* Descriptor fd of process pid is a FUSE connection: 1 alive, 0 gone
 * (POLLERR), -errno when it cannot be told. */
static int conn_alive(pid_t pid, int fd)
{
	struct pollfd p = {.events = 0};
	int pidfd, ret;

	pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
	if (pidfd < 0)
		return -errno;
	p.fd = (int)syscall(SYS_pidfd_getfd, pidfd, fd, 0);
	ret = p.fd < 0 ? -errno : 0;
	close(pidfd);
	if (ret)
		return ret;
	if (poll(&p, 1, 0) < 0)
		ret = -errno;
	else
		ret = (p.revents & POLLERR) ? 0 : 1;
	close(p.fd);
	return ret;
}

/* Process pid's FUSE connections: *alive of them alive, *unknown that
 * could not be told; the number found. */
static unsigned fuse_conns(pid_t pid, unsigned *alive, unsigned *unknown)
{
	char dir[64], link[320], target[32];
	unsigned n = 0;
	struct dirent *e;
	DIR *d;

	*alive = *unknown = 0;
	snprintf(dir, sizeof(dir), "/proc/%d/fd", (int)pid);
	d = opendir(dir);
	while (d && (e = readdir(d))) {
		ssize_t len;
		char *end;
		long fd = strtol(e->d_name, &end, 10);
		int r;

		if (*end || fd < 0)
			continue;
		snprintf(link, sizeof(link), "%s/%s", dir, e->d_name);
		len = readlink(link, target, sizeof(target) - 1);
		if (len <= 0)
			continue;
		target[len] = '\0';
		if (strcmp(target, "/dev/fuse"))
			continue;
		n++;
		r = conn_alive(pid, (int)fd);
		if (r > 0)
			(*alive)++;
		else if (r < 0)
			(*unknown)++;
	}
	if (d)
		closedir(d);
	return n;
}

int nvmefs_holder_state(pid_t pid, char *state, size_t len)
{
	unsigned n, alive, unknown;

	if (!is_daemon(pid))
		return 0;
	n = fuse_conns(pid, &alive, &unknown);
	if (!n) {
		snprintf(state, len, "which is mounting the volume");
		return 0;
	}
	if (alive) {
		snprintf(state, len, "which has the volume mounted");
		return 0;
	}
	if (unknown) {
		snprintf(state, len, "which has the volume mounted or is unmounting it");
		return 0;
	}
	snprintf(state, len, "its volume is unmounted");
	return 1;
}
