// SPDX-License-Identifier: MIT
/*
 * handle_probe: file handles as NFS servers and backup tools use them
 * (name_to_handle_at, open_by_handle_at), for tests/test_handles.sh.
 *
 *   handle_probe save PATH OUT     write PATH's handle to the file OUT
 *   handle_probe open MNT IN       open the handle in IN on the mount at MNT
 *                                  and print its inode number and path
 *                                  (/proc/self/fd), and for a regular file
 *                                  its first line
 *
 * Exit 0, or 1 with errno's name on stderr (ESTALE: a stale handle).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define HANDLE_MAX 128

static int fail(const char *what, const char *path)
{
	fprintf(stderr, "handle_probe: %s %s: %s (%s)\n", what, path, strerrorname_np(errno),
		strerror(errno));
	return 1;
}

static int save(const char *path, const char *out)
{
	struct file_handle *fh = calloc(1, sizeof(*fh) + HANDLE_MAX);
	int mount_id;
	FILE *f;

	if (!fh)
		return 1;
	fh->handle_bytes = HANDLE_MAX;
	if (name_to_handle_at(AT_FDCWD, path, fh, &mount_id, 0))
		return fail("name_to_handle_at", path);
	f = fopen(out, "we");
	if (!f || fwrite(fh, sizeof(*fh) + fh->handle_bytes, 1, f) != 1 || fclose(f))
		return fail("writing", out);
	free(fh);
	return 0;
}

static int open_it(const char *mnt, const char *in)
{
	struct file_handle *fh = calloc(1, sizeof(*fh) + HANDLE_MAX);
	char link[64], target[PATH_MAX], line[256];
	struct stat st;
	int mfd, fd;
	ssize_t n;
	FILE *f;

	if (!fh)
		return 1;
	f = fopen(in, "re");
	if (!f || fread(fh, 1, sizeof(*fh) + HANDLE_MAX, f) < sizeof(*fh))
		return fail("reading", in);
	fclose(f);
	mfd = open(mnt, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (mfd < 0)
		return fail("open", mnt);
	fd = open_by_handle_at(mfd, fh, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return fail("open_by_handle_at", in);
	if (fstat(fd, &st))
		return fail("fstat", in);
	snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
	n = readlink(link, target, sizeof(target) - 1);
	target[n > 0 ? n : 0] = '\0';
	printf("ino %llu path %s\n", (unsigned long long)st.st_ino, target);
	if (S_ISREG(st.st_mode)) {
		n = read(fd, line, sizeof(line) - 1);
		if (n < 0)
			return fail("read", in);
		line[n] = '\0';
		line[strcspn(line, "\n")] = '\0';
		printf("data %s\n", line);
	}
	close(fd);
	close(mfd);
	free(fh);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc == 4 && !strcmp(argv[1], "save"))
		return save(argv[2], argv[3]);
	if (argc == 4 && !strcmp(argv[1], "open"))
		return open_it(argv[2], argv[3]);
	fprintf(stderr, "usage: handle_probe save PATH OUT | open MNT IN\n");
	return 2;
}
