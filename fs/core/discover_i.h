/* SPDX-License-Identifier: MIT */
/*
 * discover_i.h: the interface of fs/core/discover.c (members by uuid= / label=), for the core's
 * other modules and the doors. The shared types are in fs_i.h.
 */
#ifndef NVMEFS_DISCOVER_I_H
#define NVMEFS_DISCOVER_I_H

#include "fs_i.h"

/* True when spec names a volume by tag: UUID=... or LABEL=... (any case). */
bool nvmefs_discover_is_tag(const char *spec);
/*
 * Find the members of the volume spec names (a tag) among the block devices
 * and the regular files in search (colon-separated directories, or NULL).
 * Fills paths[0..*n) in member order, malloc'ed, the caller frees them.
 * Returns 0, or -EINVAL (bad tag), -ENODEV (none or not all found),
 * -ENOTUNIQ (a label on several volumes), -EEXIST (a member found twice),
 * having logged why.
 */
int nvmefs_discover(const char *spec, const char *search, char **paths, unsigned *n);

#endif
