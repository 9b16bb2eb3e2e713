#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The main job on the embedded default, from a fresh Debian 12 machine (as
# root): install packages, build, create 4 image files standing in for NVMe
# drives, format them as one nvmefs volume, mount it, copy a directory tree
# in and check it against the original, measure sequential write and read
# throughput of a large file through the mount, and leave the volume
# mounted, printing where it is and how to unmount it.
#
# usage: scripts/main.sh
# environment: NVMEFS_MAIN_DIR   where the images and the mount point go
#                                (default: /dev/shm/nvmefs-main if /dev/shm
#                                has room, else /var/tmp/nvmefs-main)
#              NVMEFS_IMAGE_SIZE size of each image (default 1G)
#              NVMEFS_MAIN_TREE  the tree to copy in (default /usr/include)
set -euo pipefail
PROG=main.sh
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
. scripts/lib.sh

bash scripts/deps.sh
bash scripts/build.sh "$top/build"

size=${NVMEFS_IMAGE_SIZE:-1G}
tree=${NVMEFS_MAIN_TREE:-/usr/include}
dir=${NVMEFS_MAIN_DIR:-}
if [ -z "$dir" ]; then
	if [ "$(df -Pk /dev/shm 2>/dev/null | awk 'NR==2 {print $4}')" -ge $((5 << 20)) ] 2>/dev/null; then
		dir=/dev/shm/nvmefs-main
	else
		dir=/var/tmp/nvmefs-main
	fi
fi
mnt=$dir/mnt
[ -d "$tree" ] || die "$tree: no such directory to copy (set NVMEFS_MAIN_TREE)"

# A previous run's volume: unmount it and wait for its daemon to finish.
if mountpoint -q "$mnt" 2>/dev/null; then
	echo "== unmounting the previous run's volume on $mnt"
	fusermount3 -u "$mnt"
	for _ in $(seq 1 100); do
		pgrep -f "build/nvmefs .* $mnt\$" >/dev/null || break
		sleep 0.1
	done
fi
rm -rf "$dir"
mkdir -p "$mnt"
devs=()
for i in 0 1 2 3; do
	truncate -s "$size" "$dir/dev$i.img"
	devs+=("$dir/dev$i.img")
done
echo "== 4 image files of $size in $dir stand in for 4 NVMe drives"
echo "== build/mkfs.nvmefs -L main ${devs[*]}"
build/mkfs.nvmefs -L main "${devs[@]}"
list=$(IFS=,; echo "${devs[*]}")
echo "== build/nvmefs $list $mnt"
build/nvmefs "$list" "$mnt"
df -h "$mnt"

secs() { # START_NS -> seconds since, 3 decimals
	awk -v a="$1" -v b="$(date +%s%N)" 'BEGIN { printf "%.3f", (b - a) / 1e9 }'
}
echo "== cp -a $tree $mnt/tree"
t0=$(date +%s%N)
cp -a "$tree" "$mnt/tree"
t=$(secs "$t0")
nfiles=$(find "$mnt/tree" -type f | wc -l)
mb=$(du -sm --apparent-size "$tree" | awk '{print $1}')
echo "   copied $nfiles files ($mb MiB) in $t s"
echo "== diff -r --no-dereference $tree $mnt/tree"
diff -r --no-dereference "$tree" "$mnt/tree" >/dev/null || die "the copy differs from $tree"
echo "   identical"

big=1024
echo "== dd if=/dev/urandom of=$dir/src bs=1M count=$big (source data, outside the mount)"
dd if=/dev/urandom of="$dir/src" bs=1M count=$big status=none
sum=$(sha256sum <"$dir/src" | cut -d' ' -f1)
echo "== dd if=$dir/src of=$mnt/big bs=1M conv=fsync"
t0=$(date +%s%N)
dd if="$dir/src" of="$mnt/big" bs=1M conv=fsync status=none
t=$(secs "$t0")
echo "   write: $(awk -v s="$t" -v m="$big" 'BEGIN { printf "%.0f MB/s", m * 1.048576 / s }') ($big MiB in $t s)"
sync
echo 3 >/proc/sys/vm/drop_caches
echo "== dd if=$mnt/big of=/dev/null bs=1M (after dropping caches)"
t0=$(date +%s%N)
dd if="$mnt/big" of=/dev/null bs=1M status=none
t=$(secs "$t0")
echo "   read:  $(awk -v s="$t" -v m="$big" 'BEGIN { printf "%.0f MB/s", m * 1.048576 / s }') ($big MiB in $t s)"
[ "$(sha256sum <"$mnt/big" | cut -d' ' -f1)" = "$sum" ] || die "$mnt/big differs from its source"
echo "   sha256 matches the source"
rm -f "$dir/src"
df -h "$mnt"
cat <<EOM
== done. The volume is mounted on $mnt (images in $dir).
   Unmount:          fusermount3 -u $mnt     (or: umount $mnt)
   Mount again:      build/nvmefs $list $mnt
   Remove it all:    fusermount3 -u $mnt; rm -rf $dir
   Absolute MB/s here depend on the machine's load; see docs/PERFORMANCE.md.
EOM
