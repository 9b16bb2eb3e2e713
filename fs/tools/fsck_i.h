/* SPDX-License-Identifier: MIT */
/*
 * fsck_i.h: what fsck.nvmefs's files share: the checker's state, its
 * reporting and its inode table (fsck_base.c), the passes over the
 * namespace (fsck_tree.c: 3 to 7) and over the space and the store
 * (fsck_space.c: 8 and 9); fsck.c holds pass 1 and the program, and its
 * comment lists the passes.
 */
#ifndef NVMEFS_FSCK_I_H
#define NVMEFS_FSCK_I_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "fs_i.h"

#define LOST_FOUND "lost+found"

struct fsck {
	struct nvmefs_vol *vol;
	bool repair, verbose;
	unsigned found, fixed, unfixable;
	bool changed;  /* repairs to write */
	size_t claims; /* places where two inodes claim the same bytes (pass 4) */
	/* every inode, sorted by number, and per inode: */
	struct nvmefs_inode **in;
	size_t n;
	uint32_t *links;   /* entries naming it */
	uint32_t *subdirs; /* directories: entries of subdirectories in it */
	bool *reached;
	uint64_t progress_ns, pass_start_ns;
	const char *pass;
};

/* ---- fsck_base.c: reporting ---- */
/* One problem: say what it is and whether it was fixed. fixable: -y can
 * repair it (and the caller does when f->repair). */
__attribute__((format(printf, 3, 4))) void problem(struct fsck *f, bool fixable, const char *fmt,
						   ...);
/* A line of -v. */
__attribute__((format(printf, 2, 3))) void info(struct fsck *f, const char *fmt, ...);
/* A pass called name begins (for -v and the progress line). */
void pass_begin(struct fsck *f, const char *name);
/* A progress line on a terminal, once a pass has run for a second. */
void progress(struct fsck *f, size_t done, size_t total);
/* The end of a pass's progress line. */
void progress_end(struct fsck *f);

/* ---- fsck_base.c: the inode table ---- */
/* (Re)build the sorted inode array and zero the per-inode counters. */
int index_inodes(struct fsck *f);
/* The index of inode ino in f->in, or SIZE_MAX. */
size_t slot_of(const struct fsck *f, uint64_t ino);
/* Apply a record as replay would (no journal: the final flush writes it). */
int apply(struct fsck *f, const struct nvmefs_rec *r);
/* Remove entry d, add name in parent for child (of DT_ type): through apply. */
int dirent_del(struct fsck *f, const struct nvmefs_dirent *d);
int dirent_add(struct fsck *f, uint64_t parent, const char *name, uint64_t child, uint8_t type);

/* ---- fsck_tree.c: passes 3 to 7 ---- */
/* 3: one inode's type and extents. */
void check_inode(struct fsck *f, struct nvmefs_inode *in);
/* 4: bytes claimed twice; with -y the later claim (higher inode) loses
 * them. Returns problems found or -errno. */
long check_claims(struct fsck *f);
/* 5: directory entries. 0 or -errno. */
int check_entries(struct fsck *f);
/* 6: mark everything reachable from the directory at index at. */
int reach(struct fsck *f, size_t at);
/* 6: the tree; 1 when entries moved (to /lost+found), 0, or -errno. */
int check_tree(struct fsck *f);
/* 7: link counts and orphans (*orphans: files unlinked while open). */
int check_links(struct fsck *f, size_t *orphans);

/* ---- fsck_space.c: passes 8 and 9 ---- */
/* 8: free space, used + free = the data areas, and the FREE keys. */
int check_space(struct fsck *f);
/* 9: the store's keys against the metadata. */
int check_store(struct fsck *f);

#endif
