// SPDX-License-Identifier: MIT
/*
 * Per-file and per-directory layouts, read and set as the xattr
 * user.nvmefs.layout (NVMEFS_LAYOUT_XATTR), as Lustre's lfs setstripe and
 * CephFS's layout xattrs do.
 *
 * The text is "chunk=SIZE,count=N,devs=I:J:..." (member indices in stripe
 * order). A file's layout is fixed once it holds data; a directory's is the
 * default its new files and subdirectories inherit, kept in the directory
 * inode's layout field (docs/FORMAT.md): chunk_size 0 means none, and
 * devs[0] == NVMEFS_LAYOUT_ANY_DEV means "choose the members per file",
 * rotating across the volume so files spread over every member.
 */
#include "fs_i.h"
#include "icache_i.h"
#include "journal_i.h"
#include "meta_i.h"
#include "util_i.h"
#include "xlayout_i.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nvmefs/util.h"

/* "devs=I:J:K": distinct member indices below ndevs. */
static int parse_devs(const char *v, unsigned ndevs, struct nvmefs_layout *l, unsigned *n)
{
	bool used[NVMEFS_MAX_DEVICES] = {false};
	char *end;

	*n = 0;
	for (const char *p = v;; p = end + 1) {
		unsigned long d;

		errno = 0;
		d = strtoul(p, &end, 10);
		if (errno || end == p || d >= ndevs || used[d] || (*end && *end != ':'))
			return -EINVAL;
		used[d] = true;
		l->devs[(*n)++] = (uint8_t)d;
		if (!*end)
			return 0;
	}
}

static int parse_field(char *kv, const struct nvmefs_vol *vol, struct nvmefs_layout *l,
		       unsigned *count, unsigned *ndevs_given, unsigned *seen)
{
	static const char *const keys[] = {"chunk", "count", "devs"};
	char *v = strchr(kv, '=');
	uint64_t x;

	if (!v)
		return -EINVAL;
	*v++ = 0;
	/* Each key once: "devs=0:1:2,devs=1" would leave stale members. */
	for (unsigned k = 0; k < 3; k++) {
		if (!strcmp(kv, keys[k])) {
			if (*seen & (1u << k))
				return -EINVAL;
			*seen |= 1u << k;
		}
	}
	if (!strcmp(kv, "chunk")) {
		if (nvmefs_parse_size(v, &x) || x < NVMEFS_CHUNK_MIN || x > NVMEFS_CHUNK_MAX ||
		    (x & (x - 1)))
			return -EINVAL;
		l->chunk_size = (uint32_t)x;
		return 0;
	}
	if (!strcmp(kv, "count")) {
		char *end;
		unsigned long c;

		errno = 0;
		c = strtoul(v, &end, 10);
		if (errno || end == v || *end || c < 1 || c > vol->ndevs)
			return -EINVAL;
		*count = (unsigned)c;
		return 0;
	}
	if (!strcmp(kv, "devs"))
		return parse_devs(v, vol->ndevs, l, ndevs_given);
	return -EINVAL;
}

int nvmefs_xlayout_parse(const struct nvmefs_vol *vol, const char *value, size_t len,
			 struct nvmefs_layout *out)
{
	struct nvmefs_layout l = {.chunk_size = vol->label.chunk_size};
	unsigned count = 0, given = 0, seen = 0;
	char *text, *rest;
	int ret = 0;

	/* getfattr/setfattr may send a trailing NUL or newline. */
	while (len && (value[len - 1] == 0 || value[len - 1] == '\n'))
		len--;
	if (!len || len > 256)
		return -EINVAL;
	text = strndup(value, len);
	if (!text)
		return -ENOMEM;
	if (strlen(text) != len)
		ret = -EINVAL;
	/* strsep, not strtok: an empty field (",,") is an error, not nothing. */
	for (rest = text; rest && !ret;)
		ret = parse_field(strsep(&rest, ","), vol, &l, &count, &given, &seen);
	free(text);
	if (ret)
		return ret;
	if (given && count && given != count)
		return -EINVAL;
	l.stripe_count = given ? given : count ? count : vol->ndevs;
	if (!given)
		l.devs[0] = NVMEFS_LAYOUT_ANY_DEV;
	*out = l;
	return 0;
}

/* size as "4K", "1M", "2G": the chunk is a power of two, so exact. */
static void fmt_pow2(uint32_t size, char *buf, size_t len)
{
	if (size >= (1u << 30))
		snprintf(buf, len, "%uG", size >> 30);
	else if (size >= (1u << 20))
		snprintf(buf, len, "%uM", size >> 20);
	else
		snprintf(buf, len, "%uK", size >> 10);
}

int nvmefs_xlayout_format(const struct nvmefs_layout *l, char *buf, size_t len)
{
	char chunk[16];
	int n;

	fmt_pow2(l->chunk_size, chunk, sizeof(chunk));
	n = snprintf(buf, len, "chunk=%s,count=%u", chunk, l->stripe_count);
	if (l->devs[0] != NVMEFS_LAYOUT_ANY_DEV) {
		for (unsigned s = 0; s < l->stripe_count && n > 0 && (size_t)n < len; s++)
			n += snprintf(buf + n, len - (size_t)n, "%s%u",
				      s ? ":" : ",devs=", l->devs[s]);
	}
	return n > 0 && (size_t)n < len ? n : -ERANGE;
}

void nvmefs_xlayout_pick(struct nvmefs_vol *vol, const struct nvmefs_layout *d,
			 struct nvmefs_layout *out)
{
	unsigned first = vol->rotor++ % vol->ndevs;

	if (!d || !d->chunk_size) {
		nvmefs_layout_init(out, vol->label.chunk_size, vol->ndevs, first);
		return;
	}
	*out = *d;
	if (d->devs[0] != NVMEFS_LAYOUT_ANY_DEV)
		return;
	/* count members in a row from the rotor: successive files start on
	 * successive members, so a directory of 2-wide files uses them all. */
	for (unsigned s = 0; s < d->stripe_count; s++)
		out->devs[s] = (uint8_t)((first + s) % vol->ndevs);
}

int nvmefs_xlayout_get(struct nvmefs_vol *vol, uint64_t ino, char *buf, size_t len)
{
	struct nvmefs_inode *in;
	int ret;

	pthread_mutex_lock(&vol->lock);
	ret = nvmefs_inode_get(vol, ino, NVMEFS_IGET_LIVE, &in);
	if (!ret && (S_ISREG(in->mode) || (S_ISDIR(in->mode) && in->layout.chunk_size)))
		ret = nvmefs_xlayout_format(&in->layout, buf, len);
	else if (!ret)
		ret = -ENODATA;
	nvmefs_inode_put(vol, in);
	pthread_mutex_unlock(&vol->lock);
	return ret;
}

/*
 * Log in's INODE record with layout l (meta held). A record now, not the
 * dirty list at commit: replay must meet the new layout before any extent
 * written under it.
 */
static int log_layout(struct nvmefs_vol *vol, struct nvmefs_inode *in,
		      const struct nvmefs_layout *l)
{
	struct nvmefs_layout file;
	struct nvmefs_rec r;

	if (S_ISREG(in->mode)) {
		if (in->size || in->alloc_bytes)
			return -ENOTEMPTY;
		nvmefs_xlayout_pick(vol, l, &file);
		l = &file;
	}
	nvmefs_timespec_now(&in->ctime);
	nvmefs_inode_to_rec(in, &r);
	r.inode.layout = *l;
	return nvmefs_journal_log(vol, &r);
}

int nvmefs_xlayout_set(struct nvmefs_vol *vol, uint64_t ino, const char *value, size_t size)
{
	struct nvmefs_layout l = {0};
	struct nvmefs_rl_ent rl;
	struct nvmefs_inode *in;
	bool reg;
	int ret = value ? nvmefs_xlayout_parse(vol, value, size, &l) : 0;

	if (ret)
		return ret;
	/* The reference keeps in across the range lock's wait, unlocked; its
	 * type is fixed. */
	pthread_mutex_lock(&vol->lock);
	ret = nvmefs_inode_get(vol, ino, NVMEFS_IGET_LIVE | NVMEFS_IGET_EXTENTS, &in);
	pthread_mutex_unlock(&vol->lock);
	if (ret)
		return ret;
	reg = S_ISREG(in->mode);
	if ((!reg && !S_ISDIR(in->mode)) || (reg && !value)) {
		ret = -EINVAL; /* a file always has a layout */
		goto out_put;
	}
	/* A file's whole range: no write may be between its range lock and
	 * its extent record while the layout changes. */
	if (reg)
		nvmefs_rl_lock(&in->io_lock, &rl, 0, NVMEFS_RL_ALL, true);
	pthread_mutex_lock(&vol->lock);
	if (in->dead)
		ret = -ENOENT;
	else if (in->flags & (NVMEFS_IFL_IMMUTABLE | NVMEFS_IFL_APPEND))
		ret = -EPERM; /* chattr's rule on xattrs, as namei_attr.c's */
	else if (!value && !in->layout.chunk_size)
		ret = -ENODATA;
	else
		ret = log_layout(vol, in, &l);
	pthread_mutex_unlock(&vol->lock);
	if (reg)
		nvmefs_rl_unlock(&in->io_lock, &rl);
out_put:
	pthread_mutex_lock(&vol->lock);
	nvmefs_inode_put(vol, in);
	pthread_mutex_unlock(&vol->lock);
	return ret;
}
