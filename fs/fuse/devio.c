// SPDX-License-Identifier: MIT
/*
 * The session's reads and writes of /dev/fuse, through libfuse's
 * fuse_session_custom_io() hooks: plain read(2) and writev(2), and the
 * two things libfuse 3.14 cannot do itself.
 *
 * - INIT flags it has no capability for (FUSE_DIRECT_IO_ALLOW_MMAP, FUSE
 *   7.39; FUSE_OVER_IO_URING, 7.42): the read hook notes the INIT request
 *   and the flags the kernel offers (flags2, read only with FUSE_INIT_EXT);
 *   the writev carrying its reply gets the flags asked for
 *   (nvmefs_devio_init_flags) added, with FUSE_INIT_EXT so that the kernel
 *   reads flags2. Once the kernel took that reply (the writev returned),
 *   the attach's after_init runs on the same thread: the mount's settings
 *   the kernel set inside it can be changed, and the io_uring queues
 *   registered.
 * - A reply to a request of the io_uring queues goes back there
 *   (nvmefs_uring_reply), whichever thread makes it.
 *
 * Shared by nvmefs's request loop (loop.c) and tests/fuse_null, the FUSE
 * ceiling of scripts/bench.sh, so that both speak the same transports. One
 * session per process: the hooks get the session's userdata, not ours, so
 * the state is static.
 */
#define FUSE_USE_VERSION 314
#include <fuse_lowlevel.h>
#include <linux/fuse.h>

#include "door_i.h"

#include <errno.h>
#include <stdatomic.h>
#include <sys/uio.h>
#include <unistd.h>

static struct {
	_Atomic uint64_t unique;  /* the INIT request's, until its reply is sent */
	_Atomic uint64_t offered; /* the kernel's INIT flags, flags2 above */
	_Atomic uint64_t flags;	  /* FUSE_* INIT flags to add to the reply */
	void (*after_init)(void *arg);
	void *arg;
} init;

void nvmefs_devio_init_flags(uint64_t flags)
{
	atomic_fetch_or(&init.flags, flags);
}

uint64_t nvmefs_devio_offered(void)
{
	return atomic_load(&init.offered);
}

/* The request of len bytes at buf, just read: note it if it is INIT. */
static void note_init(const void *buf, size_t len)
{
	const struct fuse_in_header *in = buf;
	const struct fuse_init_in *arg = (const void *)(in + 1);
	uint64_t flags = 0;

	if (len < sizeof(*in) || in->opcode != FUSE_INIT)
		return;
	if (len >= sizeof(*in) + offsetof(struct fuse_init_in, flags) + sizeof(arg->flags))
		flags = arg->flags;
	if ((flags & FUSE_INIT_EXT) && len >= sizeof(*in) + sizeof(*arg))
		flags |= (uint64_t)arg->flags2 << 32;
	atomic_store(&init.offered, flags);
	atomic_store(&init.unique, in->unique);
}

static ssize_t dev_read(int fd, void *buf, size_t len, void *userdata)
{
	ssize_t n = read(fd, buf, len);

	(void)userdata;
	if (n > 0)
		note_init(buf, (size_t)n);
	return n;
}

ssize_t nvmefs_devio_writev(int fd, struct iovec *iov, int count)
{
	const struct fuse_out_header *out = iov[0].iov_base;
	uint64_t unique = atomic_load_explicit(&init.unique, memory_order_relaxed);
	bool init_reply = false;
	ssize_t res;

	/* An answer to a request of the io_uring queues goes back there. */
	if (nvmefs_uring_reply(iov, count, &res))
		return res;
	if (unique && out->unique == unique && count == 2 && !out->error &&
	    iov[1].iov_len == sizeof(struct fuse_init_out) &&
	    atomic_exchange(&init.unique, 0) == unique) {
		struct fuse_init_out *arg = iov[1].iov_base;
		uint64_t add = atomic_load(&init.flags);

		if (add >> 32)
			arg->flags |= FUSE_INIT_EXT;
		arg->flags |= (uint32_t)add;
		arg->flags2 |= (uint32_t)(add >> 32);
		init_reply = true;
	}
	res = writev(fd, iov, count);
	/* The kernel applied the INIT reply inside the writev. */
	if (init_reply && res >= 0 && init.after_init)
		init.after_init(init.arg);
	return res;
}

static ssize_t dev_writev(int fd, struct iovec *iov, int count, void *userdata)
{
	(void)userdata;
	return nvmefs_devio_writev(fd, iov, count);
}

static const struct fuse_custom_io dev_io = {.read = dev_read, .writev = dev_writev};

int nvmefs_devio_attach(struct fuse_session *se, void (*after_init)(void *arg), void *arg)
{
	int ret;

	init.after_init = after_init;
	init.arg = arg;
	/* The same descriptor, through our hooks. */
	ret = fuse_session_custom_io(se, &dev_io, fuse_session_fd(se));
	return ret > 0 ? -EINVAL : ret;
}
