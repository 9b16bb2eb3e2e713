// SPDX-License-Identifier: MIT
/*
 * nvmefs SOURCE MOUNTPOINT -o remount[,ro|rw][,...]: change a mounted
 * volume, as `mount -o remount,ro MNT` does for a kernel filesystem.
 *
 * mount(8) runs the filesystem's helper for a remount too: mount.fuse3,
 * which runs nvmefs with "remount" among the options (and the mount's
 * others: relatime, user_id=, allow_other, dev, suid, and those of its
 * fstab line). Starting a second daemon would find the members busy, so
 * this process reaches the running one instead:
 *  - the kernel's side is a remount of the mount (mount(2), MS_REMOUNT):
 *    MS_RDONLY and the per-mount flags (nosuid, nodev, noexec, the atime
 *    flags). The kernel refuses read-only while a file is open for writing
 *    (EBUSY), and syncs the page cache's dirty data before it says yes;
 *  - the daemon's side is an ioctl on the control directory
 *    (NVMEFS_IOC_REMOUNT, root only; fs/fuse/ctl.c): read-only, it stops
 *    the committer and the compactor and makes one clean flush, so the
 *    members hold a whole volume and nothing more is written to them until
 *    read-write (the moment for a backup of the members); read-write, it
 *    starts them again. Its atime policy (which the daemon keeps, not the
 *    kernel) follows the options too.
 * Read-only: the kernel first (it may refuse), then the daemon. Read-write:
 * the daemon first (it refuses a volume mounted with -o ro, or one that
 * turned read-only after a metadata write error), then the kernel, and the
 * daemon back to read-only if the kernel refuses.
 *
 * The other options (mode=, pool=, ...) are the mount's for its lifetime:
 * a remount takes them without changing them, as fstab lines pass them on.
 */
#include "remount.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "door_i.h"
#include "xlayout_i.h"

#define FUSE_SUPER_MAGIC 0x65735546

struct remount {
	const char *source, *mountpoint;
	int ro; /* 1 ro, 0 rw, -1 neither given: as it is */
	/* The options' MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_NODIRATIME and
	 * atime flags: set, and cleared; the mount's others stay (mount(2)
	 * sets them all, so the mount's own are the start). */
	unsigned long set, clear;
	unsigned long flags; /* what mount(2) is given */
	unsigned atime;	     /* NVMEFS_ATIME_* + 1; 0: unchanged */
};

/* The options of argv, comma-separated after -o (or -oOPTS), each to fn. */
static bool each_opt(int argc, char **argv, bool (*fn)(struct remount *r, const char *opt),
		     struct remount *r)
{
	for (int i = 1; i < argc; i++) {
		const char *list = NULL;
		char *copy, *save = NULL;

		if (!strcmp(argv[i], "-o") && i + 1 < argc)
			list = argv[++i];
		else if (!strncmp(argv[i], "-o", 2) && argv[i][2])
			list = argv[i] + 2;
		else if (r && argv[i][0] != '-') {
			if (!r->source)
				r->source = argv[i];
			else if (!r->mountpoint)
				r->mountpoint = argv[i];
		}
		if (!list || !(copy = strdup(list)))
			continue;
		for (char *o = strtok_r(copy, ",", &save); o; o = strtok_r(NULL, ",", &save)) {
			if (fn(r, o)) {
				free(copy);
				return true;
			}
		}
		free(copy);
	}
	return false;
}

static bool is_remount(struct remount *r, const char *opt)
{
	(void)r;
	return !strcmp(opt, "remount");
}

bool nvmefs_remount_asked(int argc, char **argv)
{
	return each_opt(argc, argv, is_remount, NULL);
}

/* The flags of one option; the last of ro/rw and of the atime ones wins. */
static bool take_opt(struct remount *r, const char *o)
{
	static const struct {
		const char *name;
		unsigned long set, clear;
	} flags[] = {
		{"nosuid", MS_NOSUID, 0},	  {"suid", 0, MS_NOSUID},
		{"nodev", MS_NODEV, 0},		  {"dev", 0, MS_NODEV},
		{"noexec", MS_NOEXEC, 0},	  {"exec", 0, MS_NOEXEC},
		{"nodiratime", MS_NODIRATIME, 0}, {"diratime", 0, MS_NODIRATIME},
	};
	static const struct {
		const char *name;
		unsigned long flag;
		unsigned policy;
	} atimes[] = {
		{"noatime", MS_NOATIME, NVMEFS_ATIME_NOATIME},
		{"relatime", MS_RELATIME, NVMEFS_ATIME_RELATIME},
		{"strictatime", MS_STRICTATIME, NVMEFS_ATIME_STRICTATIME},
	};
	const unsigned long all_atimes = MS_NOATIME | MS_RELATIME | MS_STRICTATIME;

	if (!strcmp(o, "ro") || !strcmp(o, "rw"))
		r->ro = o[1] == 'o';
	for (size_t i = 0; i < sizeof(atimes) / sizeof(atimes[0]); i++) {
		if (strcmp(o, atimes[i].name))
			continue;
		r->set = (r->set & ~all_atimes) | atimes[i].flag;
		r->clear = (r->clear | all_atimes) & ~atimes[i].flag;
		r->atime = atimes[i].policy + 1;
	}
	for (size_t i = 0; i < sizeof(flags) / sizeof(flags[0]); i++) {
		if (strcmp(o, flags[i].name))
			continue;
		r->set = (r->set | flags[i].set) & ~flags[i].clear;
		r->clear = (r->clear | flags[i].clear) & ~flags[i].set;
	}
	return false;
}

/* The daemon's side: 0 or -errno. */
static int tell_daemon(const struct remount *r, bool ro)
{
	char path[PATH_MAX];
	struct nvmefs_remount_arg arg = {.flags = ro ? NVMEFS_REMOUNT_RO : 0, .atime = r->atime};
	int fd, ret = 0;

	snprintf(path, sizeof(path), "%s/%s", r->mountpoint, NVMEFS_CTL_NAME);
	fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (ioctl(fd, NVMEFS_IOC_REMOUNT, &arg))
		ret = -errno;
	close(fd);
	return ret;
}

static int kernel_remount(const struct remount *r, bool ro)
{
	if (mount(r->source, r->mountpoint, NULL, MS_REMOUNT | r->flags | (ro ? MS_RDONLY : 0),
		  NULL))
		return -errno;
	return 0;
}

static void say_daemon_error(const struct remount *r, int err, bool ro)
{
	const char *mnt = r->mountpoint;

	if (err == -ENOTTY || err == -ENOENT)
		fprintf(stderr,
			"nvmefs: %s: its daemon does not take remounts (an older nvmefs?)\n", mnt);
	else if (err == -EPERM || err == -EACCES)
		fprintf(stderr, "nvmefs: %s: only root may remount it\n", mnt);
	else if (!ro && err == -EROFS)
		fprintf(stderr,
			"nvmefs: %s: cannot remount read-write: the volume was mounted with -o ro, "
			"or turned read-only after a metadata write error (see the log: journalctl "
			"-t nvmefs); unmount it and mount it again\n",
			mnt);
	else
		fprintf(stderr, "nvmefs: %s: the daemon could not go %s: %s\n", mnt,
			ro ? "read-only" : "read-write", strerror(-err));
}

int nvmefs_remount_main(int argc, char **argv)
{
	struct remount r = {.ro = -1};
	char *mnt = NULL;
	struct statvfs sv;
	struct statfs sf;
	bool ro;
	int err;

	each_opt(argc, argv, take_opt, &r); /* and SOURCE, MOUNTPOINT */
	if (!r.source || !r.mountpoint) {
		fprintf(stderr, "nvmefs: remount: give SOURCE MOUNTPOINT -o remount,...\n");
		return 1;
	}
	mnt = realpath(r.mountpoint, NULL);
	if (!mnt || statfs(mnt, &sf) || statvfs(mnt, &sv)) {
		fprintf(stderr, "nvmefs: remount: %s: %s\n", r.mountpoint, strerror(errno));
		free(mnt);
		return 1;
	}
	r.mountpoint = mnt;
	if (sf.f_type != FUSE_SUPER_MAGIC) {
		fprintf(stderr, "nvmefs: remount: %s: not an nvmefs mount\n", mnt);
		free(mnt);
		return 1;
	}
	/* The options change the flags the mount has; with no atime flag
	 * given, the kernel keeps the mount's. */
	r.flags = (sv.f_flag & ST_NOSUID ? MS_NOSUID : 0) | (sv.f_flag & ST_NODEV ? MS_NODEV : 0) |
		  (sv.f_flag & ST_NOEXEC ? MS_NOEXEC : 0) |
		  (sv.f_flag & ST_NODIRATIME ? MS_NODIRATIME : 0);
	r.flags = (r.flags & ~r.clear) | r.set;
	ro = r.ro < 0 ? (sv.f_flag & ST_RDONLY) != 0 : r.ro;
	if (ro) {
		if ((err = kernel_remount(&r, true))) {
			if (err == -EBUSY)
				fprintf(stderr,
					"nvmefs: %s: cannot remount read-only: a file is open for "
					"writing (fuser -vm %s shows who has it)\n",
					mnt, mnt);
			else
				fprintf(stderr, "nvmefs: %s: cannot remount read-only: %s\n", mnt,
					strerror(-err));
		} else if ((err = tell_daemon(&r, true))) {
			say_daemon_error(&r, err, true);
		}
	} else {
		if ((err = tell_daemon(&r, false))) {
			say_daemon_error(&r, err, false);
		} else if ((err = kernel_remount(&r, false))) {
			fprintf(stderr, "nvmefs: %s: cannot remount read-write: %s\n", mnt,
				strerror(-err));
			if (sv.f_flag & ST_RDONLY)
				(void)tell_daemon(&r, true); /* as the kernel keeps it */
		}
	}
	free(mnt);
	return err ? 1 : 0;
}
