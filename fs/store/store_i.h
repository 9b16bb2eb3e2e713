/* SPDX-License-Identifier: MIT */
/*
 * store_i.h: what the store's own files and its tests see beyond store.h:
 * the run area under a store (runs_i.h).
 */
#ifndef NVMEFS_STORE_I_H
#define NVMEFS_STORE_I_H

#include "runs_i.h"
#include "store.h"

/* The run area (for its free space and manifest; the store's); NULL for
 * a memory-only store. */
struct nvmefs_runs *nvmefs_store_area(struct nvmefs_store *s);

#endif
