// SPDX-License-Identifier: MIT
/*
 * mkfs.nvmefs: format block devices or image files as one nvmefs volume.
 *
 *   mkfs.nvmefs [-c CHUNK] [-L LABEL] [-f] DEV...
 *
 * Refuses, unless -f, a member that already holds a filesystem (an nvmefs
 * label, or anything libblkid recognizes: ext4, xfs, btrfs, ...); refuses a
 * member too small or named twice, always. Writes the metadata area (the
 * run area with the first state flushed, the journal), then the labels
 * (primary and backup) last, and prints the layout it made.
 */
#include <blkid.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <uuid/uuid.h>

#include "fs_i.h"
#include "holder_i.h"
#include "util_i.h"
#include "volume_i.h"
#include "nvmefs/util.h"

#define MIN_DATA (16ull << 20) /* per member, besides metadata */
#define META_MIN (32ull << 20)
#define META_MAX (32ull << 30)

static void usage(FILE *f)
{
	fprintf(f, "usage: mkfs.nvmefs [-c CHUNK] [-L LABEL] [-f] [-K] [-q] DEV...\n"
		   "\n"
		   "Format DEV... (block devices or image files) as one nvmefs volume.\n"
		   "\n"
		   "  -c CHUNK  stripe unit, a power of two from 4K to 1G (default: 1M\n"
		   "            divided among the members, at least 64K; 256K for 4)\n"
		   "  -L LABEL  volume label, at most 63 bytes\n"
		   "  -f        format even members that hold a filesystem\n"
		   "  -K        do not discard the members' old contents (by default they\n"
		   "            are discarded, as mkfs.xfs does, with progress on a terminal)\n"
		   "  -q        print only the volume's UUID\n"
		   "  -h, -V    this text; the version\n");
}

/* What a member holds now: NULL if nothing we know of. */
static const char *signature(struct nvmefs_dev *dev, char *buf, size_t len)
{
	void *blk = nvmefs_aligned_alloc(NVMEFS_BLOCK);
	const char *found = NULL, *type = NULL;
	blkid_probe pr;

	if (blk && pread(dev->fd, blk, NVMEFS_BLOCK, 0) == NVMEFS_BLOCK && nvmefs_label_magic(blk))
		found = "an nvmefs volume member";
	if (!found && blk && dev->size >= 2 * NVMEFS_BLOCK &&
	    pread(dev->fd, blk, NVMEFS_BLOCK,
		  (off_t)((dev->size / NVMEFS_BLOCK - 1) * NVMEFS_BLOCK)) == NVMEFS_BLOCK &&
	    nvmefs_label_magic(blk))
		found = "an nvmefs volume member (backup label)";
	free(blk);
	if (found)
		return found;
	pr = blkid_new_probe_from_filename(dev->path);
	if (!pr)
		return NULL;
	blkid_probe_enable_superblocks(pr, 1);
	blkid_probe_set_superblocks_flags(pr, BLKID_SUBLKS_TYPE);
	blkid_probe_enable_partitions(pr, 1);
	if (blkid_do_safeprobe(pr) == 0) {
		if (!blkid_probe_lookup_value(pr, "TYPE", &type, NULL) ||
		    !blkid_probe_lookup_value(pr, "PTTYPE", &type, NULL)) {
			snprintf(buf, len, "a filesystem signature (%s)", type);
			found = buf;
		}
	}
	blkid_free_probe(pr);
	return found;
}

/*
 * Erase every signature libblkid finds (as wipefs -a does), so that no
 * tool mistakes a formatted member for its old filesystem: btrfs keeps its
 * superblock at 64 KiB, beyond what our label overwrites. Returns how many
 * were erased, or -errno.
 */
static int wipe_signatures(const struct nvmefs_dev *dev)
{
	int fd = open(dev->path, O_RDWR | O_CLOEXEC), n = 0, ret = 0;
	blkid_probe pr;

	if (fd < 0)
		return -errno;
	pr = blkid_new_probe();
	if (!pr || blkid_probe_set_device(pr, fd, 0, 0)) {
		ret = -ENOMEM;
		goto out;
	}
	blkid_probe_enable_superblocks(pr, 1);
	blkid_probe_set_superblocks_flags(pr, BLKID_SUBLKS_MAGIC | BLKID_SUBLKS_TYPE);
	blkid_probe_enable_partitions(pr, 1);
	blkid_probe_set_partitions_flags(pr, BLKID_PARTS_MAGIC);
	while (blkid_do_probe(pr) == 0) {
		if (blkid_do_wipe(pr, 0)) {
			ret = -EIO;
			break;
		}
		n++;
	}
	if (!ret && fsync(fd))
		ret = -errno;
out:
	blkid_free_probe(pr);
	close(fd);
	return ret ? ret : n;
}

/* Size the metadata area on member 0: about 2%, within [32 MiB, 32 GiB]
 * (the runs need room to merge beside the live ones, and keys cost about
 * 1.35 times the journal's records of the same metadata). */
static int plan_meta(struct nvmefs_label *l, uint64_t size0)
{
	uint64_t meta = size0 / 50, runs, journal;

	meta = meta < META_MIN ? META_MIN : meta > META_MAX ? META_MAX : meta;
	/* Seven eighths for the run area (the metadata's sorted runs and room
	 * to compact them), an eighth for the journal ring. */
	runs = (meta / 8 * 7) & ~(uint64_t)(NVMEFS_BLOCK - 1);
	journal = (meta / 8) & ~(uint64_t)(NVMEFS_BLOCK - 1);
	l->meta_off = NVMEFS_BLOCK;
	l->runs_size = runs;
	l->journal_size = journal;
	l->meta_size = 2 * NVMEFS_BLOCK + runs + journal;
	return 0;
}

/*
 * 1 MiB divided among the members (a power of two, at least 64 KiB): the
 * largest FUSE request, 1 MiB, then reaches every member at once, so even
 * one sequential reader or writer with one request in flight (dd, cp)
 * keeps all the drives busy. 4 members: 256 KiB.
 */
static uint64_t default_chunk(unsigned members)
{
	uint64_t chunk = 1 << 20;

	while (chunk > (64u << 10) && chunk * members > (1u << 20))
		chunk >>= 1;
	return chunk;
}

static int build_labels(struct nvmefs_devset *set, uint32_t chunk, const char *name,
			struct nvmefs_label *labels)
{
	struct nvmefs_label l = {0};
	uint64_t data_len = 0;
	struct timespec now;

	/* A random (version 4) UUID, always: not uuid_generate(), which
	 * without a random source falls back to a time-based one carrying the
	 * host's MAC address. */
	uuid_generate_random(l.uuid);
	snprintf(l.name, sizeof(l.name), "%s", name ? name : "");
	l.count = set->count;
	l.chunk_size = chunk;
	clock_gettime(CLOCK_REALTIME, &now);
	l.created_ns = (uint64_t)now.tv_sec * 1000000000ull + (uint64_t)now.tv_nsec;
	for (unsigned i = 0; i < set->count; i++)
		l.dev_size[i] = set->devs[i].size / NVMEFS_BLOCK * NVMEFS_BLOCK;
	plan_meta(&l, l.dev_size[0]);
	/* Every file is striped over every member, so each member gives the
	 * same amount of data space, the smallest's: space beyond it could
	 * never be filled by striped files, and df would promise it. */
	for (unsigned i = 0; i < set->count; i++) {
		uint64_t start = i == 0 ? l.meta_off + l.meta_size : NVMEFS_BLOCK;
		uint64_t end = l.dev_size[i] - NVMEFS_BLOCK;
		char a[32], b[32];

		if (end < start || end - start < MIN_DATA) {
			nvmefs_err("%s: too small: %s, member %u needs at least %s",
				   set->devs[i].path, nvmefs_fmt_size(l.dev_size[i], a, sizeof(a)),
				   i,
				   nvmefs_fmt_size(start + MIN_DATA + NVMEFS_BLOCK, b, sizeof(b)));
			return -ENOSPC;
		}
		if (!data_len || end - start < data_len)
			data_len = end - start;
		labels[i] = l;
		labels[i].index = i;
		labels[i].data_start = start;
	}
	for (unsigned i = 0; i < set->count; i++)
		labels[i].data_end = labels[i].data_start + data_len;
	return 0;
}

/* Discard progress on a terminal: bytes done of the total, at most 10
 * updates a second. */
struct progress {
	uint64_t done, total, shown_ns;
	bool on;
};

static void progress_add(struct progress *p, uint64_t bytes)
{
	uint64_t now = nvmefs_now_ns();
	char a[32], b[32];

	p->done += bytes;
	if (!p->on || (now - p->shown_ns < 100000000ull && p->done < p->total))
		return;
	p->shown_ns = now;
	fprintf(stderr, "\rmkfs.nvmefs: discarding old contents: %3.0f%% (%s of %s)\033[K",
		100.0 * (double)p->done / (double)p->total, nvmefs_fmt_size(p->done, a, sizeof(a)),
		nvmefs_fmt_size(p->total, b, sizeof(b)));
	if (p->done >= p->total)
		fprintf(stderr, "\r\033[K");
}

/*
 * Tell a member its old contents are garbage, as mkfs.xfs and mkfs.ext4 do:
 * an SSD gets free blocks to write into, an image file becomes sparse. In
 * 1 GiB steps, so that a terminal shows progress on large members. A member
 * that cannot discard is left as it is (its old data is unreachable anyway).
 */
static int discard_member(struct nvmefs_dev *dev, struct progress *p)
{
	const uint64_t step = 1ull << 30;

	for (uint64_t off = 0; off < dev->size; off += step) {
		uint64_t len = dev->size - off < step ? dev->size - off : step;
		int r = nvmefs_dev_discard(dev, off, len);

		if (r == -EOPNOTSUPP || r == -ENOTTY) {
			nvmefs_debug("%s: cannot discard (%s); left as it is", dev->path,
				     strerror(-r));
			progress_add(p, dev->size - off);
			return 0;
		}
		if (r) {
			nvmefs_err("%s: discard failed at %llu: %s", dev->path,
				   (unsigned long long)off, strerror(-r));
			return r;
		}
		progress_add(p, len);
	}
	return 0;
}

static int discard_all(struct nvmefs_devset *set, bool quiet)
{
	struct progress p = {.on = !quiet && isatty(STDERR_FILENO)};
	int ret = 0;

	for (unsigned i = 0; i < set->count; i++)
		p.total += set->devs[i].size;
	for (unsigned i = 0; i < set->count && !ret; i++)
		ret = discard_member(&set->devs[i], &p);
	return ret;
}

/* True when dir is one of the ':'-separated directories in list. */
static bool listed(const char *list, const char *dir)
{
	size_t n = strlen(dir);

	for (const char *p = list; *p; p += strcspn(p, ":"), p += *p == ':')
		if (!strncmp(p, dir, n) && (p[n] == ':' || !p[n]))
			return true;
	return false;
}

/*
 * The directories of the image-file members, absolute, each once, joined
 * by ':' for -o search= (empty when every member is a block device): a
 * volume named by uuid= is looked for on the block devices, and among the
 * image files only in the directories search= names.
 */
static void search_dirs(const struct nvmefs_devset *set, char *buf, size_t len)
{
	size_t used = 0;

	buf[0] = '\0';
	for (unsigned i = 0; i < set->count; i++) {
		char *abs = set->devs[i].is_blkdev ? NULL : realpath(set->devs[i].path, NULL);
		char *slash = abs ? strrchr(abs, '/') : NULL;

		if (slash) {
			slash[slash == abs] = '\0'; /* "/m0.img": the directory is "/" */
			if (!listed(buf, abs) && used < len)
				used += (size_t)snprintf(buf + used, len - used, "%s%s",
							 used ? ":" : "", abs);
		}
		free(abs);
	}
}

/* s as one word for the shell: quoted when it holds anything else than
 * [A-Za-z0-9/._+@%=:,-]. */
static void print_word(const char *s)
{
	if (!s[strspn(
		    s,
		    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789/._+@%=:,-")]) {
		fputs(s, stdout);
		return;
	}
	putchar('\'');
	for (; *s; s++)
		fputs(*s == '\'' ? "'\\''" : (char[2]){*s, '\0'}, stdout);
	putchar('\'');
}

/* How to mount the volume by its UUID, as a command that works as printed. */
static void print_mount_hint(const struct nvmefs_devset *set, const char *u)
{
	char dirs[4096], opt[4096 + 8];

	search_dirs(set, dirs, sizeof(dirs));
	printf("  mount: nvmefs uuid=%s MOUNTPOINT", u);
	if (!dirs[0]) {
		printf(" (in /etc/fstab too: lower-case uuid=)\n");
		return;
	}
	snprintf(opt, sizeof(opt), "search=%s", dirs);
	printf(" -o ");
	print_word(opt);
	printf(" (in /etc/fstab too: lower-case uuid=, and %s: image files are found only "
	       "where search= says)\n",
	       opt);
}

static void print_layout(const struct nvmefs_devset *set, const struct nvmefs_label *labels)
{
	const struct nvmefs_label *l = &labels[0];
	uint64_t total = 0;
	char u[37], a[32], b[32];

	nvmefs_uuid_str(l->uuid, u);
	printf("nvmefs: formatted %u member(s) as one volume\n", l->count);
	printf("  UUID=%s\n", u);
	print_mount_hint(set, u);
	printf("  label: %s\n", l->name[0] ? l->name : "(none)");
	printf("  chunk: %s (files striped over every member, rotated per file)\n",
	       nvmefs_fmt_size(l->chunk_size, a, sizeof(a)));
	printf("  metadata: %s on member 0 (run area %s, journal %s)\n",
	       nvmefs_fmt_size(l->meta_size, a, sizeof(a)),
	       nvmefs_fmt_size(l->runs_size, b, sizeof(b)),
	       nvmefs_fmt_size(l->journal_size, u, sizeof(u)));
	for (unsigned i = 0; i < set->count; i++) {
		uint64_t data = labels[i].data_end - labels[i].data_start;

		uint64_t unused = labels[i].dev_size[i] - NVMEFS_BLOCK - labels[i].data_end;

		total += data;
		printf("  member %u: %s: %s, data %s", i, set->devs[i].path,
		       nvmefs_fmt_size(labels[i].dev_size[i], a, sizeof(a)),
		       nvmefs_fmt_size(data, b, sizeof(b)));
		if (unused >= (1 << 20))
			printf(" (%s unused: members give equal space)",
			       nvmefs_fmt_size(unused, a, sizeof(a)));
		printf("\n");
	}
	printf("  capacity: %s\n", nvmefs_fmt_size(total, a, sizeof(a)));
}

int main(int argc, char **argv)
{
	struct nvmefs_devset_opts dopts = {.min_size = 2 * NVMEFS_BLOCK,
					   .busy_wait_ms = NVMEFS_BUSY_WAIT_MS,
					   .busy_quiet_ms = NVMEFS_BUSY_QUIET_MS,
					   .holder = nvmefs_holder_state};
	struct nvmefs_label labels[NVMEFS_MAX_DEVICES];
	struct nvmefs_devset *set = NULL;
	const char *name = NULL;
	uint64_t chunk = 0; /* default: see default_chunk() */
	bool force = false, quiet = false, discard = true;
	int opt, ret;

	nvmefs_log_set_ident("mkfs.nvmefs");
	while ((opt = getopt(argc, argv, "c:L:fKqhV")) != -1) {
		switch (opt) {
		case 'c':
			if (nvmefs_parse_size(optarg, &chunk) || chunk < NVMEFS_CHUNK_MIN ||
			    chunk > NVMEFS_CHUNK_MAX || (chunk & (chunk - 1))) {
				nvmefs_err("bad chunk '%s': want a power of two from 4K to 1G",
					   optarg);
				return 2;
			}
			break;
		case 'L':
			if (strlen(optarg) > 63) {
				nvmefs_err("label '%s' is longer than 63 bytes", optarg);
				return 2;
			}
			name = optarg;
			break;
		case 'f':
			force = true;
			break;
		case 'q':
			quiet = true;
			break;
		case 'K':
			discard = false;
			break;
		case 'h':
			usage(stdout);
			return 0;
		case 'V':
			printf("mkfs.nvmefs %s (on-disk format %u)\n", NVMEFS_VERSION,
			       NVMEFS_FORMAT_VERSION);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (optind == argc) {
		nvmefs_err("no devices given");
		usage(stderr);
		return 2;
	}
	if (argc - optind > NVMEFS_MAX_DEVICES) {
		nvmefs_err("%d devices given, at most %u supported", argc - optind,
			   NVMEFS_MAX_DEVICES);
		return 2;
	}
	ret = nvmefs_devset_open(&set, (const char *const *)argv + optind,
				 (unsigned)(argc - optind), &dopts);
	if (ret)
		return 1;
	for (unsigned i = 0; i < set->count && !force; i++) {
		char buf[64];
		const char *sig = signature(&set->devs[i], buf, sizeof(buf));

		if (sig) {
			nvmefs_err("%s: holds %s; not formatting it (use -f to overwrite)",
				   set->devs[i].path, sig);
			ret = -EEXIST;
		}
	}
	if (!chunk)
		chunk = default_chunk(set->count);
	if (!ret)
		ret = build_labels(set, (uint32_t)chunk, name, labels);
	for (unsigned i = 0; i < set->count && !ret && force; i++) {
		int n = wipe_signatures(&set->devs[i]);

		if (n < 0) {
			nvmefs_err("%s: cannot erase old signatures: %s", set->devs[i].path,
				   strerror(-n));
			ret = n;
		} else if (n > 0 && !quiet) {
			printf("%s: erased %d old signature(s)\n", set->devs[i].path, n);
		}
	}
	if (!ret && discard)
		ret = discard_all(set, quiet);
	if (!ret) {
		ret = nvmefs_vol_format(set, labels, (uint32_t)getuid(), (uint32_t)getgid());
		if (ret)
			nvmefs_err("formatting failed: %s", strerror(-ret));
	}
	if (!ret && quiet) {
		char u[37];

		nvmefs_uuid_str(labels[0].uuid, u);
		printf("%s\n", u);
	} else if (!ret) {
		print_layout(set, labels);
	}
	nvmefs_devset_close(set);
	return ret ? 1 : 0;
}
