/* SPDX-License-Identifier: MIT */
/*
 * A volume on two image files formatted by mkfs.nvmefs, opened through the
 * core (nvmefs_vol_open), for the unit tests of the core's modules: no
 * mount, no root. test_vol_setup(BUILD_DIR) formats and opens it (exit 77
 * when the tools are not built) with the shadow store on
 * (NVMEFS_META_CROSSCHECK=1: format v2's keys checked against the maps at
 * every commit, the close's included; a difference aborts);
 * test_vol_teardown() closes it, checks it with fsck.nvmefs -n and removes
 * the images.
 */
#ifndef NVMEFS_TEST_VOL_H
#define NVMEFS_TEST_VOL_H

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "fs_i.h"
#include "volume_i.h"
#include "nvmefs/util.h"
#include "test_util.h"

static char test_vol_dir[256], test_vol_img[2][300], test_vol_fsck[512];

/* Format two 64 MiB images (mkfs.nvmefs -K) and open them. */
static struct nvmefs_vol *test_vol_setup(const char *build)
{
	const char *base = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
	const char *paths[2] = {test_vol_img[0], test_vol_img[1]};
	struct nvmefs_vol *vol = NULL;
	char mkfs[512], cmd[2048];

	snprintf(mkfs, sizeof(mkfs), "%s/mkfs.nvmefs", build);
	snprintf(test_vol_fsck, sizeof(test_vol_fsck), "%s/fsck.nvmefs", build);
	if (access(mkfs, X_OK) || access(test_vol_fsck, X_OK))
		TEST_SKIP("%s or %s not built", mkfs, test_vol_fsck);
	snprintf(test_vol_dir, sizeof(test_vol_dir), "%s/test_vol.XXXXXX", base);
	if (!mkdtemp(test_vol_dir))
		TEST_SKIP("mkdtemp in %s failed", base);
	for (int i = 0; i < 2; i++) {
		snprintf(test_vol_img[i], sizeof(test_vol_img[i]), "%s/d%d.img", test_vol_dir, i);
		snprintf(cmd, sizeof(cmd), "truncate -s 64M %s", test_vol_img[i]);
		CHECK(system(cmd) == 0);
	}
	snprintf(cmd, sizeof(cmd), "%s -q -K %s %s >/dev/null", mkfs, test_vol_img[0],
		 test_vol_img[1]);
	CHECK(system(cmd) == 0);
	nvmefs_log_set_level(NVMEFS_LOG_WARN);
	setenv("NVMEFS_META_CROSSCHECK", "1", 1);
	CHECK_ERR(nvmefs_vol_open(&vol, paths, 2, NULL), 0);
	CHECK(!vol || vol->shadow);
	return vol;
}

/* Open the images of test_vol_setup again (after closing the volume). */
static inline struct nvmefs_vol *test_vol_reopen(void)
{
	const char *paths[2] = {test_vol_img[0], test_vol_img[1]};
	struct nvmefs_vol *vol = NULL;

	CHECK_ERR(nvmefs_vol_open(&vol, paths, 2, NULL), 0);
	return vol;
}

/* Close vol (a checkpoint), fsck -n the images (clean), remove them. */
static void test_vol_teardown(struct nvmefs_vol *vol)
{
	char cmd[2048];

	if (vol)
		CHECK_ERR(nvmefs_vol_close(vol), 0);
	snprintf(cmd, sizeof(cmd), "%s -n %s %s >/dev/null", test_vol_fsck, test_vol_img[0],
		 test_vol_img[1]);
	CHECKF(system(cmd) == 0, "%s", "fsck.nvmefs -n is not clean");
	snprintf(cmd, sizeof(cmd), "rm -rf %s", test_vol_dir);
	CHECK(system(cmd) == 0);
}

#endif
