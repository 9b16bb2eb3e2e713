// SPDX-License-Identifier: MIT
/*
 * Commands to the test daemon nvmefs-fi (never built into nvmefs): a
 * setxattr of trusted.nvmefs.fault on the mount root, so that a test sets a
 * fault and knows it is in force when setfattr returns. docs/RELIABILITY.md
 * lists the commands:
 *
 *   eio|short|nomem dev=N [ops=r|w|f|rw|...] [off=LO-HI] [after=N] [count=N]
 *       (nomem: the engine refuses matching requests at submission with
 *       ENOMEM, nothing sent; reads and writes only)
 *   latency dev=N us=N
 *   clear [dev=N]
 *   record
 *   powerloss [seed=S] [keep=PCT] [tear=PCT] [after=N]
 *       (keep and tear default to 33 each; the rest of the writes dropped)
 *   lose_open [count=N]
 *       (the next N, default 1, OPEN or CREATE replies are lost: the opener
 *       gets EINTR and the daemon releases the handle as for a reply the
 *       kernel refused)
 *   lose_readdir [count=N]
 *       (the next N READDIRPLUS replies are lost: the reader gets EINTR and
 *       the daemon gives back the entries' lookups as for a refused reply)
 *
 * Numbers are decimal with an optional K, M, G, T, P suffix (powers of
 * 1024, nvmefs_parse_size). A bad command is EINVAL.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fs_i.h"
#include "fault_i.h"
#include "nvmefs/util.h"
#include "testctl.h"

#define CMD_MAX 256

struct cmd {
	const char *verb;
	unsigned dev;
	bool has_dev, has_after, has_tear;
	struct nvmefs_fault f;
	struct nvmefs_powerloss pl;
	uint64_t after;
};

static int parse_ops(const char *s, unsigned *ops)
{
	*ops = 0;
	for (; *s; s++) {
		const char *at = strchr("rwf", *s);

		if (!at)
			return -EINVAL;
		*ops |= 1u << (at - "rwf"); /* the NVMEFS_FAULT_* bits, in order */
	}
	return *ops ? 0 : -EINVAL;
}

static int parse_arg(struct cmd *c, char *arg)
{
	char *val = strchr(arg, '=');
	uint64_t v = 0;

	if (!val)
		return -EINVAL;
	*val++ = 0;
	if (!strcmp(arg, "ops"))
		return parse_ops(val, &c->f.ops);
	if (!strcmp(arg, "off")) {
		char *dash = strchr(val, '-');

		if (!dash)
			return -EINVAL;
		*dash = 0;
		if (nvmefs_parse_size(val, &c->f.off_lo) ||
		    nvmefs_parse_size(dash + 1, &c->f.off_hi) || c->f.off_hi <= c->f.off_lo)
			return -EINVAL;
		return 0;
	}
	if (nvmefs_parse_size(val, &v))
		return -EINVAL;
	if (!strcmp(arg, "dev") && v < NVMEFS_MAX_DEVICES) {
		c->dev = (unsigned)v;
		c->has_dev = true;
	} else if (!strcmp(arg, "after")) {
		c->f.after = c->after = v;
		c->has_after = true;
	} else if (!strcmp(arg, "count")) {
		c->f.count = v;
	} else if (!strcmp(arg, "us") && v <= 10000000) {
		c->f.latency_us = (unsigned)v;
	} else if (!strcmp(arg, "seed")) {
		c->pl.seed = v;
	} else if (!strcmp(arg, "keep") && v <= 100) {
		c->pl.keep_pct = (unsigned)v;
	} else if (!strcmp(arg, "tear") && v <= 100) {
		c->pl.tear_pct = (unsigned)v;
		c->has_tear = true;
	} else {
		return -EINVAL;
	}
	return 0;
}

static int parse(struct cmd *c, char *line)
{
	char *save = NULL, *tok = strtok_r(line, " \t\n", &save);

	if (!tok)
		return -EINVAL;
	c->verb = tok;
	c->pl.keep_pct = 33;
	c->pl.tear_pct = 33;
	while ((tok = strtok_r(NULL, " \t\n", &save))) {
		if (parse_arg(c, tok))
			return -EINVAL;
	}
	return 0;
}

/* Power is cut: what a kill -9 leaves, with the unflushed writes decided. */
static void powerloss_exit(const struct nvmefs_powerloss_report *r)
{
	nvmefs_warn("power loss: %" PRIu64 " unflushed write(s) of %" PRIu64 " bytes: %" PRIu64
		    " kept, %" PRIu64 " torn, %" PRIu64 " dropped%s%s",
		    r->unflushed, r->bytes, r->kept, r->torn, r->dropped,
		    r->error ? "; rewriting failed: " : "", r->error ? strerror(-r->error) : "");
	_exit(NVMEFS_FI_POWERLOSS_EXIT);
}

static int run(struct nvmefs_vol *vol, struct cmd *c)
{
	bool fault =
		!strcmp(c->verb, "eio") || !strcmp(c->verb, "short") || !strcmp(c->verb, "nomem");

	if (fault || !strcmp(c->verb, "latency")) {
		if (!c->has_dev || c->dev >= vol->ndevs)
			return -EINVAL;
		if (fault)
			c->f.kind = !strcmp(c->verb, "eio")	? NVMEFS_FAULT_EIO
				    : !strcmp(c->verb, "short") ? NVMEFS_FAULT_SHORT
								: NVMEFS_FAULT_NOMEM;
		if (c->f.kind != NVMEFS_FAULT_EIO && (c->f.ops & NVMEFS_FAULT_FLUSHES))
			return -EINVAL;
		return nvmefs_dev_inject(&vol->set->devs[c->dev], &c->f);
	}
	if (!strcmp(c->verb, "clear")) {
		struct nvmefs_fault none = {0};

		if (c->has_dev && c->dev >= vol->ndevs)
			return -EINVAL;
		for (unsigned d = 0; d < vol->ndevs; d++) {
			if (!c->has_dev || d == c->dev)
				nvmefs_dev_inject(&vol->set->devs[d], &none);
		}
		return 0;
	}
	if (!strcmp(c->verb, "lose_open") || !strcmp(c->verb, "lose_readdir")) {
		atomic_uint *n = !strcmp(c->verb, "lose_open") ? &vol->test_lose_opens
							       : &vol->test_lose_readdirs;

		if (c->f.count > 1000000)
			return -EINVAL;
		atomic_store(n, c->f.count ? (unsigned)c->f.count : 1);
		return 0;
	}
	if (!strcmp(c->verb, "record"))
		return nvmefs_powerloss_record(vol->set);
	if (!strcmp(c->verb, "powerloss")) {
		if (!c->has_tear && c->pl.keep_pct + c->pl.tear_pct > 100)
			c->pl.tear_pct = 100 - c->pl.keep_pct; /* keep=80: the rest torn */
		if (c->pl.keep_pct + c->pl.tear_pct > 100)
			return -EINVAL;
		if (c->has_after)
			return nvmefs_powerloss_after(c->after, &c->pl, powerloss_exit);
		return nvmefs_powerloss_now(&c->pl, powerloss_exit);
	}
	return -EINVAL;
}

int nvmefs_testctl(struct nvmefs_vol *vol, const char *cmd, size_t len)
{
	char line[CMD_MAX];
	struct cmd c = {0};
	int ret;

	if (len >= sizeof(line) || memchr(cmd, 0, len))
		return -EINVAL;
	memcpy(line, cmd, len);
	line[len] = 0;
	ret = parse(&c, line);
	if (!ret)
		ret = run(vol, &c);
	nvmefs_info("test control '%.*s': %s", (int)len, cmd, ret ? strerror(-ret) : "done");
	return ret;
}
