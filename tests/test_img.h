/* SPDX-License-Identifier: MIT */
/*
 * One image file in a temporary directory, opened as a member (O_DIRECT)
 * through a device set, for the tests of the run area and the store
 * (tests/test_runs.c, tests/test_store.c): test_img_setup(NAME, SIZE)
 * creates and opens it (exit 77 when the directory or O_DIRECT is not
 * available) and captures the log's last message; test_img_teardown()
 * closes it and removes the directory. test_img_copy() saves and restores
 * the image around a power-loss child.
 */
#ifndef NVMEFS_TEST_IMG_H
#define NVMEFS_TEST_IMG_H

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "nvmefs/devset.h"
#include "nvmefs/util.h"
#include "test_util.h"

static char test_img_dir[256], img[300], base_img[300];
static struct nvmefs_devset *set;
static char last_msg[512];

static void test_img_sink(enum nvmefs_log_level level, const char *msg)
{
	(void)level;
	snprintf(last_msg, sizeof(last_msg), "%s", msg);
}

static struct nvmefs_dev *dev(void)
{
	return &set->devs[0];
}

/* A size-byte image NAME.XXXXXX/d0.img under $TMPDIR, opened as set. */
static void test_img_setup(const char *name, off_t size)
{
	const char *tmp = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
	const char *paths[1] = {img};
	int fd;

	snprintf(test_img_dir, sizeof(test_img_dir), "%s/%s.XXXXXX", tmp, name);
	if (!mkdtemp(test_img_dir))
		TEST_SKIP("mkdtemp in %s failed", tmp);
	snprintf(img, sizeof(img), "%s/d0.img", test_img_dir);
	snprintf(base_img, sizeof(base_img), "%s/base.img", test_img_dir);
	fd = open(img, O_RDWR | O_CREAT, 0600);
	CHECK(fd >= 0 && ftruncate(fd, size) == 0);
	if (fd >= 0)
		close(fd);
	nvmefs_log_set_sink(test_img_sink);
	if (nvmefs_devset_open(&set, paths, 1, NULL))
		TEST_SKIP("cannot open %s for O_DIRECT: %s", img, last_msg);
}

static void test_img_teardown(void)
{
	char cmd[300];

	nvmefs_devset_close(set);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", test_img_dir);
	CHECK(system(cmd) == 0);
}

/* Copy the file from over to: 0 or -1. */
static int test_img_copy(const char *from, const char *to)
{
	char buf[65536];
	int in = open(from, O_RDONLY), out = open(to, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	ssize_t n = 0;

	while (in >= 0 && out >= 0 && (n = read(in, buf, sizeof(buf))) > 0)
		if (write(out, buf, (size_t)n) != n)
			n = -1;
	if (in >= 0)
		close(in);
	if (out >= 0)
		close(out);
	return in < 0 || out < 0 || n < 0 ? -1 : 0;
}

#endif
