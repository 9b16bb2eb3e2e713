// SPDX-License-Identifier: MIT
/* roundtrip FILE: write 64 MiB to FILE, a path inside a mounted nvmefs
 * volume, through libnvmefs, read them back, and exit 0 when they match. */
#include <fcntl.h>
#include <libnvmefs.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define SIZE (64u << 20)

static unsigned char pattern(size_t i)
{
	return (unsigned char)(i * 7 + i / 4096);
}

int main(int argc, char **argv)
{
	struct nvmefs_client *c;
	unsigned char *buf;
	size_t i = 0;
	int fd;

	if (argc != 2) {
		fprintf(stderr, "usage: %s FILE (a path inside an nvmefs mount)\n", argv[0]);
		return 2;
	}
	if (nvmefs_attach(argv[1], &c)) {
		fprintf(stderr, "%s\n", nvmefs_client_error(NULL));
		return 1;
	}
	/* Opened through the mount: the kernel checks the permissions, and
	 * the descriptor is the client's proof of access. */
	fd = open(argv[1], O_RDWR | O_CREAT | O_TRUNC, 0644);
	if (fd < 0) {
		perror(argv[1]);
		nvmefs_detach(c);
		return 1;
	}
	/* Shared with the daemon and 4096-aligned: no copy on either side. */
	if (nvmefs_reg_fd(c, fd) || nvmefs_buf_alloc(c, SIZE, -1, (void **)&buf))
		goto fail;
	for (i = 0; i < SIZE; i++)
		buf[i] = pattern(i);
	if (nvmefs_pwrite(c, fd, buf, SIZE, 0) != SIZE || nvmefs_fsync(c, fd))
		goto fail;
	memset(buf, 0, SIZE);
	if (nvmefs_pread(c, fd, buf, SIZE, 0) != SIZE)
		goto fail;
	for (i = 0; i < SIZE && buf[i] == pattern(i); i++)
		;
	printf("%s: 64 MiB written and read back through libnvmefs: %s\n", argv[1],
	       i == SIZE ? "identical" : "MISMATCH");
	nvmefs_buf_free(c, buf);
	nvmefs_detach(c); /* unregisters fd */
	close(fd);
	return i == SIZE ? 0 : 1;
fail:
	fprintf(stderr, "%s: %s\n", argv[1], nvmefs_client_error(c));
	nvmefs_detach(c);
	close(fd);
	return 1;
}
