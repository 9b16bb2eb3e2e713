# SPDX-License-Identifier: MIT
# Helpers shared by the scripts in this folder; source it after setting PROG.
# shellcheck shell=bash

die() {
	printf '%s: %s\n' "$PROG" "$*" >&2
	exit 1
}

bad_arg() {
	printf '%s: %s\n' "$PROG" "$*" >&2
	printf "Try '%s -h' for help.\n" "$PROG" >&2
	exit 2
}

# parse_size STR -> bytes on stdout; returns 1 if STR is not a size.
parse_size() {
	local s=$1 num mult=1
	[[ $s =~ ^([0-9]+)([KkMmGg]?)$ ]] || return 1
	num=$((10#${BASH_REMATCH[1]}))
	case ${BASH_REMATCH[2]} in
	K | k) mult=1024 ;;
	M | m) mult=$((1024 * 1024)) ;;
	G | g) mult=$((1024 * 1024 * 1024)) ;;
	esac
	printf '%d\n' $((num * mult))
}

# log MSG...: "PROG: MSG" on stderr.
log() { printf '%s: %s\n' "$PROG" "$*" >&2; }

# quote ARGS... -> one shell-quoted command line (for logs of commands run)
quote() {
	local out='' a
	for a in "$@"; do
		out+="${out:+ }$(printf '%q' "$a")"
	done
	printf '%s\n' "$out"
}
