/* SPDX-License-Identifier: MIT */
/*
 * holder_i.h: the interface of fs/core/holder.c (who holds a busy member), for the core's other
 * modules and the doors. The shared types are in fs_i.h.
 */
#ifndef NVMEFS_HOLDER_I_H
#define NVMEFS_HOLDER_I_H

#include "fs_i.h"

/*
 * For nvmefs_devset_opts.holder: 1 when process pid is an nvmefs daemon
 * whose FUSE connection is gone (its volume unmounted, it is making its
 * last commit and flush and will release the members), else 0. Puts in state
 * what the process is doing when it is an nvmefs daemon ("which has the
 * volume mounted"), for the messages.
 */
int nvmefs_holder_state(pid_t pid, char *state, size_t len);

#endif
