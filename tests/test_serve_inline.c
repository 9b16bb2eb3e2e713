// SPDX-License-Identifier: MIT
/*
 * nvmefs_serve_inline (fs/fuse/door_i.h): which requests a leader of the
 * /dev/fuse loop or of an io_uring queue serves itself, and which it hands
 * the lead over for first. An IOCTL is served by the leader (a file's
 * attribute flags, or ENOTTY at once for isatty's TCGETS, which Python's
 * open() sends), but for the control directory's remount and a shutdown,
 * which flush everything. The kernel never sends an IOCTL shorter than its
 * struct; one is handed over all the same, so that the rule reads nothing
 * past the request.
 */
#include <linux/fs.h>

#include "door_i.h"
#include "test_util.h"

/* isatty(3)'s TCGETS on x86 and arm (a number nvmefs does not handle; some
 * other architectures encode it with _IOR, from a struct not declared here). */
#define TCGETS_X86 0x5401u

/* A request of opcode with an fuse_ioctl_in of cmd, len bytes long. */
static bool inline_ioctl(uint32_t cmd, size_t len)
{
	struct {
		struct fuse_in_header h;
		struct fuse_ioctl_in io;
	} r = {.h = {.opcode = FUSE_IOCTL, .len = (uint32_t)len}, .io = {.cmd = cmd}};

	return nvmefs_serve_inline(&r.h, len);
}

static bool inline_op(uint32_t opcode)
{
	struct fuse_in_header h = {.opcode = opcode, .len = sizeof(h)};

	return nvmefs_serve_inline(&h, sizeof(h));
}

int main(void)
{
	size_t whole = sizeof(struct fuse_in_header) + sizeof(struct fuse_ioctl_in);

	CHECK(inline_ioctl(TCGETS_X86, whole));
	CHECK(inline_ioctl(FS_IOC_GETFLAGS, whole));
	CHECK(inline_ioctl(FS_IOC_SETFLAGS, whole + sizeof(int)));
	CHECK(inline_ioctl(FS_IOC_FSGETXATTR, whole));
	CHECK(inline_ioctl(FS_IOC_FSSETXATTR, whole + sizeof(struct fsxattr)));
	CHECK(!inline_ioctl((uint32_t)NVMEFS_IOC_SHUTDOWN, whole));
	CHECK(!inline_ioctl((uint32_t)NVMEFS_IOC_REMOUNT, whole + 64));
	CHECK(!inline_ioctl(TCGETS_X86, whole - 1));
	CHECK(inline_op(FUSE_LOOKUP) && inline_op(FUSE_READ) && inline_op(FUSE_WRITE) &&
	      inline_op(FUSE_RELEASE) && inline_op(FUSE_CREATE));
	CHECK(!inline_op(FUSE_FSYNC) && !inline_op(FUSE_SETATTR) && !inline_op(FUSE_SETXATTR) &&
	      !inline_op(FUSE_FALLOCATE));
	return test_result();
}
