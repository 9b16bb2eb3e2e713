// SPDX-License-Identifier: MIT
/*
 * What every pass of fsck.nvmefs uses (fsck_i.h): the reporting (problems,
 * -v lines, the progress line) and the inode table (the inodes sorted by
 * number, the per-inode counters, repairs applied as replay would apply
 * records). It calls no pass, so that the passes (fsck_tree.c,
 * fsck_space.c) and the program that runs them (fsck.c) sit above it.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fsck_i.h"
#include "meta_i.h"
#include "nvmefs/util.h"

/* ---- reporting ---- */

/* One problem: say what it is and whether it was fixed. fixable: -y can
 * repair it (and the caller does when f->repair). */
void problem(struct fsck *f, bool fixable, const char *fmt, ...)
{
	va_list ap;

	f->found++;
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	if (!fixable) {
		f->unfixable++;
		printf(": cannot be repaired\n");
	} else if (f->repair) {
		f->fixed++;
		f->changed = true;
		printf(": fixed\n");
	} else {
		printf(": not fixed (-n)\n");
	}
}

void info(struct fsck *f, const char *fmt, ...)
{
	va_list ap;

	if (!f->verbose)
		return;
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	putchar('\n');
}

void pass_begin(struct fsck *f, const char *name)
{
	f->pass = name;
	f->pass_start_ns = f->progress_ns = nvmefs_now_ns();
	info(f, "pass: %s", name);
}

/* A progress line on a terminal, once a pass has run for a second. */
void progress(struct fsck *f, size_t done, size_t total)
{
	uint64_t now;

	if ((done & 4095) || !total || !isatty(STDERR_FILENO))
		return;
	now = nvmefs_now_ns();
	if (now - f->progress_ns < 1000000000ull || now - f->pass_start_ns < 1000000000ull)
		return;
	f->progress_ns = now;
	fprintf(stderr, "\r%s: %zu of %zu (%.0f%%)  ", f->pass, done, total,
		100.0 * (double)done / (double)total);
}

void progress_end(struct fsck *f)
{
	if (isatty(STDERR_FILENO) && f->progress_ns != f->pass_start_ns)
		fprintf(stderr, "\r\033[K");
}

/* ---- the inode table ---- */

static int ino_cmp(const void *a, const void *b)
{
	const struct nvmefs_inode *x = *(struct nvmefs_inode *const *)a;
	const struct nvmefs_inode *y = *(struct nvmefs_inode *const *)b;

	return x->ino < y->ino ? -1 : x->ino > y->ino;
}

/* (Re)build the sorted inode array and zero the per-inode counters. */
int index_inodes(struct fsck *f)
{
	struct nvmefs_vol *vol = f->vol;
	size_t n = 0;

	free(f->in);
	free(f->links);
	free(f->subdirs);
	free(f->reached);
	f->in = malloc((vol->ninodes + 1) * sizeof(*f->in));
	f->links = calloc(vol->ninodes + 1, sizeof(*f->links));
	f->subdirs = calloc(vol->ninodes + 1, sizeof(*f->subdirs));
	f->reached = calloc(vol->ninodes + 1, sizeof(*f->reached));
	if (!f->in || !f->links || !f->subdirs || !f->reached)
		return -ENOMEM;
	for (size_t b = 0; b < vol->itab_size; b++) {
		for (struct nvmefs_inode *in = vol->itab[b]; in; in = in->hnext)
			f->in[n++] = in;
	}
	f->n = n;
	qsort(f->in, n, sizeof(*f->in), ino_cmp);
	return 0;
}

size_t slot_of(const struct fsck *f, uint64_t ino)
{
	size_t lo = 0, hi = f->n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (f->in[mid]->ino < ino)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < f->n && f->in[lo]->ino == ino ? lo : SIZE_MAX;
}

/* Apply a record as replay would (no journal: the final flush writes it). */
int apply(struct fsck *f, const struct nvmefs_rec *r)
{
	int ret;

	f->vol->replaying = true;
	ret = nvmefs_meta_apply(f->vol, r);
	f->vol->replaying = false;
	return ret;
}

int dirent_del(struct fsck *f, const struct nvmefs_dirent *d)
{
	struct nvmefs_rec r = {.type = NVMEFS_REC_DIRENT_DEL};

	r.dirent.parent = d->parent;
	r.dirent.child = d->child;
	r.dirent.type = d->type;
	r.dirent.name = d->name;
	r.dirent.name_len = d->name_len;
	return apply(f, &r);
}

int dirent_add(struct fsck *f, uint64_t parent, const char *name, uint64_t child, uint8_t type)
{
	struct nvmefs_rec r = {.type = NVMEFS_REC_DIRENT_ADD};

	r.dirent.parent = parent;
	r.dirent.child = child;
	r.dirent.type = type;
	r.dirent.name = name;
	r.dirent.name_len = (uint16_t)strlen(name);
	return apply(f, &r);
}
