// SPDX-License-Identifier: MIT
/*
 * Finding a volume's members by UUID or label, so that a mount (and an
 * fstab line) need not name device paths that change from boot to boot or
 * across NVMe-oF reconnects.
 *
 * The candidates are every block device the kernel lists in
 * /sys/class/block, then every regular file in the search directories
 * (image files). Each one's label is read (the primary in block 0, else the
 * backup in the last block); those of the wanted volume are kept by member
 * index. A loop device and the image file behind it are the same member
 * found twice: the block device is kept. Two different candidates for one
 * index (a copied member) and two volumes with the same label are refused,
 * naming what was found. nvmefs_vol_open() then checks the members as
 * thoroughly as for paths given by hand.
 */
#include "fs_i.h"
#include "discover_i.h"
#include "util_i.h"
#include "volume_i.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/fs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/ioctl.h>
#include <sys/sysmacros.h>
#include <sys/stat.h>
#include <unistd.h>

#include "nvmefs/util.h"

/* One volume seen during the scan. */
struct seen {
	uint8_t uuid[16];
	char name[64];
	uint32_t count;
	char *paths[NVMEFS_MAX_DEVICES]; /* by member index */
	struct stat st[NVMEFS_MAX_DEVICES];
};

struct scan {
	bool by_uuid;
	uint8_t uuid[16];
	const char *label;
	struct seen vols[8]; /* matching volumes (more than one: ambiguous) */
	unsigned nvols;
	int error;
};

bool nvmefs_discover_is_tag(const char *spec)
{
	return !strncasecmp(spec, "UUID=", 5) || !strncasecmp(spec, "LABEL=", 6);
}

/* The label of the candidate open on fd, primary else backup: 0 or -errno. */
static int probe_label(int fd, const struct stat *st, struct nvmefs_label *l)
{
	uint64_t size = (uint64_t)st->st_size;
	void *blk = nvmefs_aligned_alloc(NVMEFS_BLOCK);
	int ret = -ENODEV;

	if (!blk)
		return -ENOMEM;
	if (S_ISBLK(st->st_mode) && ioctl(fd, BLKGETSIZE64, &size))
		goto out;
	if (size < 2 * NVMEFS_BLOCK)
		goto out;
	if (pread(fd, blk, NVMEFS_BLOCK, 0) == NVMEFS_BLOCK && !nvmefs_label_decode(l, blk)) {
		ret = 0;
		goto out;
	}
	/* A backup label counts only at the end of the member it describes:
	 * a whole disk whose last partition is a member ends with that
	 * partition's backup label too. */
	if (pread(fd, blk, NVMEFS_BLOCK, (off_t)((size / NVMEFS_BLOCK - 1) * NVMEFS_BLOCK)) ==
		    NVMEFS_BLOCK &&
	    !nvmefs_label_decode(l, blk) && l->index < NVMEFS_MAX_DEVICES &&
	    l->dev_size[l->index] / NVMEFS_BLOCK == size / NVMEFS_BLOCK)
		ret = 0;
out:
	free(blk);
	return ret;
}

/* True when block device st is a loop device whose backing file is file. */
static bool loop_backs(const struct stat *st, const struct stat *file)
{
	char path[128], buf[PATH_MAX];
	struct stat bst;
	FILE *f;
	bool same = false;

	snprintf(path, sizeof(path), "/sys/dev/block/%u:%u/loop/backing_file", major(st->st_rdev),
		 minor(st->st_rdev));
	f = fopen(path, "re");
	if (!f)
		return false;
	if (fgets(buf, sizeof(buf), f)) {
		buf[strcspn(buf, "\n")] = 0;
		same = !stat(buf, &bst) && bst.st_dev == file->st_dev && bst.st_ino == file->st_ino;
	}
	fclose(f);
	return same;
}

static bool same_member(const struct stat *a, const struct stat *b)
{
	if (S_ISBLK(a->st_mode) && S_ISBLK(b->st_mode))
		return a->st_rdev == b->st_rdev;
	if (S_ISBLK(a->st_mode))
		return loop_backs(a, b);
	if (S_ISBLK(b->st_mode))
		return loop_backs(b, a);
	return a->st_dev == b->st_dev && a->st_ino == b->st_ino;
}

static struct seen *volume_of(struct scan *s, const struct nvmefs_label *l)
{
	for (unsigned i = 0; i < s->nvols; i++)
		if (!memcmp(s->vols[i].uuid, l->uuid, 16))
			return &s->vols[i];
	if (s->nvols == sizeof(s->vols) / sizeof(s->vols[0]))
		return NULL;
	memcpy(s->vols[s->nvols].uuid, l->uuid, 16);
	memcpy(s->vols[s->nvols].name, l->name, sizeof(l->name));
	s->vols[s->nvols].count = l->count;
	return &s->vols[s->nvols++];
}

/* Record path as member l->index of its volume when the volume is wanted. */
static void add_member(struct scan *s, const char *path, const struct stat *st,
		       const struct nvmefs_label *l)
{
	struct seen *v;

	if (s->by_uuid ? memcmp(l->uuid, s->uuid, 16) : strcmp(l->name, s->label))
		return;
	v = volume_of(s, l);
	if (!v || l->index >= NVMEFS_MAX_DEVICES)
		return;
	if (v->paths[l->index]) {
		if (same_member(&v->st[l->index], st))
			return;
		nvmefs_err("member %u of the volume was found twice: %s and %s (a copied "
			   "member? name the members by path)",
			   l->index, v->paths[l->index], path);
		s->error = -EEXIST;
		return;
	}
	v->paths[l->index] = strdup(path);
	v->st[l->index] = *st;
	if (!v->paths[l->index])
		s->error = -ENOMEM;
}

/* True when the kernel lists holders of block device name (device-mapper,
 * md, multipath over it): then the member is used through the holder. */
static bool held(const char *name)
{
	char path[PATH_MAX];
	struct dirent *e;
	bool any = false;
	DIR *d;

	snprintf(path, sizeof(path), "/sys/class/block/%s/holders", name);
	d = opendir(path);
	while (d && !any && (e = readdir(d)))
		any = e->d_name[0] != '.';
	if (d)
		closedir(d);
	return any;
}

static void probe(struct scan *s, const char *path, bool want_blk)
{
	struct nvmefs_label l;
	struct stat st;
	int fd;

	/* Open only what could be a member: opening a character device in a
	 * search directory (-o search=/dev) can have side effects. */
	if (stat(path, &st) || !(want_blk ? S_ISBLK(st.st_mode) : S_ISREG(st.st_mode)))
		return;
	if (want_blk && held(strrchr(path, '/') + 1))
		return;
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0)
		return;
	if (!fstat(fd, &st) && (want_blk ? S_ISBLK(st.st_mode) : S_ISREG(st.st_mode)) &&
	    !probe_label(fd, &st, &l))
		add_member(s, path, &st, &l);
	close(fd);
}

static void scan_dir(struct scan *s, const char *dir, const char *prefix, bool want_blk)
{
	char path[PATH_MAX];
	struct dirent *e;
	DIR *d = opendir(dir);

	if (!d) {
		if (!want_blk)
			nvmefs_warn("search directory %s: %s", dir, strerror(errno));
		return;
	}
	while ((e = readdir(d)) && !s->error) {
		if (e->d_name[0] == '.')
			continue;
		if (snprintf(path, sizeof(path), "%s/%s", prefix, e->d_name) < (int)sizeof(path))
			probe(s, path, want_blk);
	}
	closedir(d);
}

static int parse_tag(struct scan *s, const char *spec)
{
	if (!strncasecmp(spec, "UUID=", 5)) {
		s->by_uuid = true;
		if (nvmefs_uuid_parse(spec + 5, s->uuid)) {
			nvmefs_err("bad UUID '%s': want 36 characters like "
				   "0b6d2c1e-8f4a-4e7b-9c3d-5a6f7e8d9c0b",
				   spec + 5);
			return -EINVAL;
		}
		return 0;
	}
	s->label = spec + 6;
	if (!*s->label || strlen(s->label) >= sizeof(((struct nvmefs_label *)0)->name)) {
		nvmefs_err("bad LABEL '%s': want 1 to 63 bytes", s->label);
		return -EINVAL;
	}
	return 0;
}

/* Every directory of the colon-separated list search. */
static void scan_search(struct scan *s, const char *search)
{
	char *copy = search ? strdup(search) : NULL, *save = NULL;

	for (char *dir = copy ? strtok_r(copy, ":", &save) : NULL; dir && !s->error;
	     dir = strtok_r(NULL, ":", &save))
		scan_dir(s, dir, dir, false);
	free(copy);
}

/* The one wanted volume with all its members, else an error naming why. */
static int pick(struct scan *s, const char *spec, const char *search)
{
	struct seen *v = &s->vols[0];
	char u[NVMEFS_UUID_STR];

	if (s->nvols == 0) {
		nvmefs_err("no member of a volume with %s found (searched the block devices%s%s)",
			   spec, search ? " and " : "", search ? search : "");
		return -ENODEV;
	}
	if (s->nvols > 1) {
		nvmefs_err("%s is ambiguous: %u volumes carry that label; name one by UUID:", spec,
			   s->nvols);
		for (unsigned i = 0; i < s->nvols; i++) {
			nvmefs_uuid_str(s->vols[i].uuid, u);
			nvmefs_err("  UUID=%s", u);
		}
		return -ENOTUNIQ;
	}
	for (unsigned k = 0; k < v->count; k++) {
		if (!v->paths[k]) {
			nvmefs_err("volume %s has %u members; member %u was not found "
				   "(searched the block devices%s%s)",
				   spec, v->count, k, search ? " and " : "", search ? search : "");
			return -ENODEV;
		}
	}
	return 0;
}

int nvmefs_discover(const char *spec, const char *search, char **paths, unsigned *n)
{
	struct scan *s = calloc(1, sizeof(*s));
	int ret;

	if (!s)
		return -ENOMEM;
	ret = parse_tag(s, spec);
	if (ret)
		goto out;
	scan_dir(s, "/sys/class/block", "/dev", true);
	scan_search(s, search);
	ret = s->error ? s->error : pick(s, spec, search);
	if (ret)
		goto out;
	*n = s->vols[0].count;
	for (unsigned k = 0; k < *n; k++) {
		paths[k] = s->vols[0].paths[k];
		s->vols[0].paths[k] = NULL;
		nvmefs_debug("%s: member %u is %s", spec, k, paths[k]);
	}
out:
	for (unsigned i = 0; i < s->nvols; i++)
		for (unsigned k = 0; k < NVMEFS_MAX_DEVICES; k++)
			free(s->vols[i].paths[k]);
	free(s);
	return ret;
}
