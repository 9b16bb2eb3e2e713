// SPDX-License-Identifier: MIT
/*
 * A second mount of a volume this host has mounted already (xfstests
 * generic/732): a kernel filesystem gives the same superblock at both
 * places; nvmefs binds the running mount there (MS_BIND), so that both
 * places are one mount's, served by one daemon, coherent by construction.
 * A second daemon on the same members could not be (each would cache the
 * metadata), and the members' locks refuse it.
 *
 * The running mount is found as the kernel shows it to this process: a
 * fuse.nvmefs entry of /proc/self/mountinfo whose .nvmefs/config names the
 * same members (as many, each one of ours). A mount in another mount namespace is
 * not seen, and the members' locks then refuse the mount as before.
 */
#include "remount.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>

#include "nvmefs/util.h"

/* mountinfo's escapes (\040 for a space, \011, \012, \134) undone in place. */
static void unescape(char *s)
{
	char *d = s;

	for (; *s; s++) {
		if (s[0] == '\\' && s[1] >= '0' && s[1] <= '3' && s[2] >= '0' && s[2] <= '7' &&
		    s[3] >= '0' && s[3] <= '7') {
			*d++ = (char)((s[1] - '0') * 64 + (s[2] - '0') * 8 + (s[3] - '0'));
			s += 3;
		} else {
			*d++ = *s;
		}
	}
	*d = '\0';
}

/* Whether the nvmefs mount on mnt serves the members paths[0..n), in any
 * order (its .nvmefs/config's member.K lines, in the volume's). */
static bool serves(const char *mnt, const char *const *paths, unsigned n)
{
	char cfg[4096 + 64], line[4352];
	unsigned seen = 0, k;
	bool same = true;
	FILE *f;

	if (snprintf(cfg, sizeof(cfg), "%s/.nvmefs/config", mnt) >= (int)sizeof(cfg))
		return false;
	f = fopen(cfg, "re");
	if (!f)
		return false;
	while (same && fgets(line, sizeof(line), f)) {
		char *eq;

		if (sscanf(line, "member.%u = ", &k) != 1 || !(eq = strstr(line, " = ")))
			continue;
		eq += 3;
		eq[strcspn(eq, "\n")] = '\0';
		same = false;
		for (unsigned i = 0; i < n && !same; i++)
			same = !strcmp(eq, paths[i]);
		seen++;
	}
	fclose(f);
	return same && seen == n;
}

int nvmefs_mount_again(const char *const *paths, unsigned n, const char *mnt, bool ro)
{
	char line[8192], *where = NULL;
	FILE *f = fopen("/proc/self/mountinfo", "re");

	if (!f)
		return 0;
	while (!where && fgets(line, sizeof(line), f)) {
		/* ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTS [FIELDS...] - TYPE SOURCE SUPER */
		char *dash = strstr(line, " - "), *mp = NULL, *save = NULL, *tok;
		unsigned i = 0;

		if (!dash || strncmp(dash + 3, "fuse.nvmefs ", 12))
			continue;
		*dash = '\0';
		for (tok = strtok_r(line, " ", &save); tok; tok = strtok_r(NULL, " ", &save))
			if (i++ == 4)
				mp = tok;
		if (!mp)
			continue;
		unescape(mp);
		if (strcmp(mp, mnt) && serves(mp, paths, n))
			where = strdup(mp);
	}
	fclose(f);
	if (!where)
		return 0;
	if (mount(where, mnt, NULL, MS_BIND, NULL)) {
		int err = errno;

		nvmefs_err("the volume is mounted on %s already; binding it on %s failed: %s",
			   where, mnt, strerror(err));
		free(where);
		return -err;
	}
	if (ro && mount(NULL, mnt, NULL, MS_REMOUNT | MS_BIND | MS_RDONLY, NULL)) {
		int err = errno;

		nvmefs_err("the volume is mounted on %s already; making its binding on %s "
			   "read-only failed: %s",
			   where, mnt, strerror(err));
		(void)umount2(mnt, MNT_DETACH); /* the binding just made */
		free(where);
		return -err;
	}
	nvmefs_info("the volume is mounted on %s already: bound on %s as well%s", where, mnt,
		    ro ? ", read-only" : "");
	free(where);
	return 1;
}
