/* SPDX-License-Identifier: MIT */
/*
 * Limits shared by every layer of nvmefs.
 */
#ifndef NVMEFS_LIMITS_H
#define NVMEFS_LIMITS_H

/* Most member devices in one volume (and so in one file's layout). */
#define NVMEFS_MAX_DEVICES 32

#endif
