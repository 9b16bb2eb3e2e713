/* SPDX-License-Identifier: MIT */
/*
 * Inside libnvmefs-preload.so: what client/preload.c (the door's
 * descriptors) and client/preload_at.c (the *at calls and the other calls
 * it hands to the kernel) share. Not exported (preload.map).
 */
#ifndef NVMEFS_PRELOAD_I_H
#define NVMEFS_PRELOAD_I_H

#include <dlfcn.h>
#include <stdbool.h>

#define EXPORT __attribute__((visibility("default")))
/* real_NAME: the next definition of NAME (libc's). */
#define RESOLVE(name) (*(void **)&real_##name = dlsym(RTLD_NEXT, #name))

/* Whether fd may be the door's (no lock taken). */
bool preload_has(int fd);
/* Whether fd is the door's (checked under the lock). */
bool preload_door(int fd);
/* Before a call the kernel must serve: fd in the kernel's hands. -1 with
 * errno when it cannot be. */
int preload_need_kernel(int fd);
/* Whether path is NULL; whether it names nothing (NULL or ""). Asked of
 * functions that are never inlined: glibc declares the path of most calls
 * wrapped here nonnull, which lets the compiler drop a test for NULL made
 * inside their wrappers. */
bool preload_null_path(const char *path);
bool preload_empty_path(const char *path);
/* Resolve the libc calls preload_at.c wraps (the constructor's). */
void preload_at_init(void);
/* The door's descriptor as the directory of an *at call: 0 (let it
 * through) or -1 with errno (preload_at.c; never inlined either). */
int preload_at_dir(int at, const char *path, int flags);

/* A call the kernel must serve: the file goes to it first. */
#define KERNEL_CALL(ret_t, name, params, args)                                                     \
	EXPORT ret_t name params                                                                   \
	{                                                                                          \
		if (preload_has(fd) && preload_need_kernel(fd))                                    \
			return (ret_t)-1;                                                          \
		return real_##name args;                                                           \
	}

#endif
