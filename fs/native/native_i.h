/* SPDX-License-Identifier: MIT */
/*
 * native_i.h: the native door (fs/native/server.c, server_io.c), the
 * daemon's side of libnvmefs. It serves clients over the protocol of
 * include/nvmefs/wire.h with the core's own functions, as the FUSE door
 * does; it includes no FUSE header: what it needs of the kernel's caches
 * it asks of the caller through nvmefs_native_inval_fn.
 */
#ifndef NVMEFS_NATIVE_I_H
#define NVMEFS_NATIVE_I_H

#include <stdint.h>

#include "fs_i.h"

/*
 * Drop what the kernel caches of file ino: its attributes, and when
 * off >= 0 its pages of [off, off + len) (len 0: to the end), writing
 * back dirty ones first. Called from the door's own threads, never from
 * an I/O completion; may block until the kernel is done. Failures are the
 * callee's to log.
 */
typedef void (*nvmefs_native_inval_fn)(void *arg, uint64_t ino, int64_t off, int64_t len);

struct nvmefs_native;

/*
 * Open the door of vol, mounted at mountpoint: bind the abstract socket
 * named after the volume and this process (vol->native_socket) and start
 * accepting. inval(arg, ...) keeps the kernel's caches coherent with
 * native writes and creates. *out is the
 * caller's until nvmefs_native_stop. Returns 0
 * or -errno (the mount can go on without the door).
 */
int nvmefs_native_start(struct nvmefs_vol *vol, const char *mountpoint,
			nvmefs_native_inval_fn inval, void *arg, struct nvmefs_native **out);

/*
 * Close the door: stop accepting, disconnect every client, wait for their
 * requests in flight and give back their files and memory. Call before
 * nvmefs_data_drain and the volume's close. srv may be NULL.
 */
void nvmefs_native_stop(struct nvmefs_native *srv);

#endif
