/* SPDX-License-Identifier: MIT */
/*
 * The test daemon nvmefs-fi's command interpreter (testctl.c): built only
 * into nvmefs-fi, with the fault-injecting striping library.
 */
#ifndef NVMEFS_TESTCTL_H
#define NVMEFS_TESTCTL_H

#include <stddef.h>

struct nvmefs_vol;

/* How nvmefs-fi exits when the power is cut: as a SIGKILL'ed shell job. */
#define NVMEFS_FI_POWERLOSS_EXIT 137

/* Run one command (len bytes, not NUL-terminated); 0 or -errno. */
int nvmefs_testctl(struct nvmefs_vol *vol, const char *cmd, size_t len);

#endif
