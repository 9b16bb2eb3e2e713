/* SPDX-License-Identifier: MIT */
/*
 * fuzz_bug.h: how every harness in tests/fuzz/ reports a failed oracle, in
 * a header of its own because fuzz_wire.c needs no volume (fuzz_vol.h
 * brings fs/core's private headers). scripts/fuzz.sh greps the log for
 * the "fuzz: BUG:" prefix.
 */
#ifndef FUZZ_BUG_H
#define FUZZ_BUG_H

#include <stdio.h>
#include <stdlib.h>

/* Print why and abort(): a harness oracle failed (a bug, not bad input). */
#define FUZZ_BUG(...)                                                                              \
	do {                                                                                       \
		fprintf(stderr, "fuzz: BUG: " __VA_ARGS__);                                        \
		fputc('\n', stderr);                                                               \
		abort();                                                                           \
	} while (0)

#endif
