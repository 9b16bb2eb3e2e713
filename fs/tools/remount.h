/* SPDX-License-Identifier: MIT */
/*
 * remount.h: `nvmefs SOURCE MNT -o remount,...`, what mount(8) runs (through
 * mount.fuse3) for `mount -o remount,ro MNT` (fs/tools/remount.c).
 */
#ifndef NVMEFS_REMOUNT_H
#define NVMEFS_REMOUNT_H

#include <stdbool.h>

/* Whether argv's options hold "remount". */
bool nvmefs_remount_asked(int argc, char **argv);
/* Change the mount of argv (SOURCE MOUNTPOINT -o OPTS): 0, or 1 with the
 * reason said on stderr. */
int nvmefs_remount_main(int argc, char **argv);

#endif
