/* SPDX-License-Identifier: MIT */
/*
 * remount.h: `nvmefs SOURCE MNT -o remount,...`, what mount(8) runs (through
 * mount.fuse3) for `mount -o remount,ro MNT` (fs/tools/remount.c), and a
 * second mount of a mounted volume (fs/tools/remount_again.c).
 */
#ifndef NVMEFS_REMOUNT_H
#define NVMEFS_REMOUNT_H

#include <stdbool.h>

/* Whether argv's options hold "remount". */
bool nvmefs_remount_asked(int argc, char **argv);
/* Change the mount of argv (SOURCE MOUNTPOINT -o OPTS): 0, or 1 with the
 * reason said on stderr. */
int nvmefs_remount_main(int argc, char **argv);

/*
 * A second mount of a volume mounted already (fs/tools/remount_again.c):
 * when a fuse.nvmefs mount this process can see serves the members
 * paths[0..n) (in any order), bind it on mnt (read-only with ro) and
 * return 1; 0 when there is none; -errno, said, when the binding failed.
 */
int nvmefs_mount_again(const char *const *paths, unsigned n, const char *mnt, bool ro);

#endif
