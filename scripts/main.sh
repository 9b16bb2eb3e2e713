#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The main job on the embedded default, from a fresh Debian 12 machine (as
# root): install packages, build, then run the engine benchmark on 4 image
# files standing in for NVMe drives: a validated write pass (pattern written,
# read back and compared), then sequential write and read throughput.
#
# usage: scripts/main.sh
# environment: NVMEFS_IMAGE_DIR  where to put the images (default: /dev/shm
#                                if it has room, else /var/tmp)
#              NVMEFS_IMAGE_SIZE size of each image (default 1G)
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"

bash scripts/deps.sh
bash scripts/build.sh "$top/build"

size=${NVMEFS_IMAGE_SIZE:-1G}
need_kb=$((5 * 1024 * 1024)) # 4 x 1 GiB plus slack
dir=${NVMEFS_IMAGE_DIR:-}
if [ -z "$dir" ]; then
	if [ "$(df -Pk /dev/shm 2>/dev/null | awk 'NR==2 {print $4}')" -ge "$need_kb" ] 2>/dev/null; then
		dir=/dev/shm
	else
		dir=/var/tmp
	fi
fi
work=$(mktemp -d "$dir/nvmefs-main.XXXXXX")
trap 'rm -rf "$work"' EXIT INT TERM

imgs=()
for i in 0 1 2 3; do
	truncate -s "$size" "$work/dev$i.img"
	imgs+=("$work/dev$i.img")
done
echo "== 4 image files of $size in $work stand in for 4 NVMe drives"
bench=(build/nvmefs-bench --block-size 1M --queue-depth 32 --size 2G --loops 3)
echo "== ${bench[*]} --write --validate ${imgs[*]}"
"${bench[@]}" --write --validate "${imgs[@]}"
echo "== ${bench[*]} --read ${imgs[*]}"
"${bench[@]}" --read "${imgs[@]}"
echo "== done; image files removed. For loop devices and fio side by side: scripts/bench-engine.sh"
