/* Write 64 MiB to a file of an nvmefs mount through the native client,
 * read them back, and exit 0 when they match. */
#include <fcntl.h>
#include <libnvmefs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define SIZE (64u << 20)

int main(int argc, char **argv)
{
	struct nvmefs_client *c;
	unsigned char *out, *in;
	int fd, ret;

	if (argc != 2) {
		fprintf(stderr, "usage: %s FILE-ON-AN-NVMEFS-MOUNT\n", argv[0]);
		return 2;
	}
	ret = nvmefs_attach(argv[1], &c);
	if (ret) {
		fprintf(stderr, "attach: %s\n", nvmefs_client_error(NULL));
		return 1;
	}
	fd = open(argv[1], O_RDWR | O_CREAT | O_TRUNC, 0644); /* the permission check */
	if (fd < 0 || nvmefs_reg_fd(c, fd) || nvmefs_buf_alloc(c, SIZE, -1, (void **)&out) ||
	    nvmefs_buf_alloc(c, SIZE, -1, (void **)&in)) {
		fprintf(stderr, "%s: %s\n", argv[1],
			fd < 0 ? "cannot open" : nvmefs_client_error(c));
		return 1;
	}
	for (size_t i = 0; i < SIZE; i++)
		out[i] = (unsigned char)(i * 7 + i / 4096);
	if (nvmefs_pwrite(c, fd, out, SIZE, 0) != SIZE || nvmefs_fsync(c, fd) ||
	    nvmefs_pread(c, fd, in, SIZE, 0) != SIZE) {
		fprintf(stderr, "%s: %s\n", argv[1], nvmefs_client_error(c));
		return 1;
	}
	ret = memcmp(out, in, SIZE) ? 1 : 0;
	printf("%s: 64 MiB written and read back through libnvmefs: %s\n", argv[1],
	       ret ? "MISMATCH" : "identical");
	nvmefs_unreg_fd(c, fd);
	nvmefs_detach(c);
	close(fd);
	return ret;
}
