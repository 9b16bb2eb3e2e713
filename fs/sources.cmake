# SPDX-License-Identifier: MIT
# The sources of fs/, relative to this directory, for the main build
# (fs/CMakeLists.txt) and the fuzz build (tests/fuzz), so that a new file
# reaches both (one file per line):
#  - FS_CORE_SOURCES (core/): the filesystem with no transport: on-disk
#    format, metadata, extent maps, allocator, journal, volume, data path,
#    read-ahead, the namespace API (core/namei.h), layouts, member discovery.
#    No FUSE header; the fuzzers build these.
#  - FS_STORE_SOURCES (store/): the key/value store the metadata lives in
#    (keys and values, sorted runs, memtable, flush, compaction), behind
#    one header, store/store.h. Also built by the fuzzers.
#  - FS_FUSE_SOURCES (fuse/): the FUSE door: the low-level operations, the
#    request loop and the control files.
#  - FS_NATIVE_SOURCES (native/): the native door, libnvmefs's daemon side,
#    and the protocol's checks (native/wire.c, also in libnvmefs).
set(FS_CORE_SOURCES
    core/util.c
    core/format.c
    core/meta.c
    core/meta_keys.c
    core/meta_check.c
    core/extmap.c
    core/alloc.c
    core/journal.c
    core/journal_load.c
    core/volume.c
    core/rangelock.c
    core/data.c
    core/data_io.c
    core/behind.c
    core/prefetch.c
    core/namei.c
    core/namei_attr.c
    core/namei_acl.c
    core/acl.c
    core/icache.c
    core/lookups.c
    core/xlayout.c
    core/holder.c
    core/discover.c)
set(FS_STORE_SOURCES
    store/sorted.c
    store/runfmt.c
    store/runs.c
    store/memtable.c
    store/store.c
    store/flush.c
    store/compact.c
    store/iter.c
    store/values.c
    store/shadow.c)
list(APPEND FS_CORE_SOURCES
    core/kv.c)
set(FS_FUSE_SOURCES
    fuse/ops.c
    fuse/ops_file.c
    fuse/loop.c
    fuse/cpulat.c
    fuse/devio.c
    fuse/uring.c
    fuse/uring_setup.c
    fuse/ctl.c
    fuse/statahead.c)
set(FS_NATIVE_SOURCES
    native/server.c
    native/server_io.c
    native/server_layout.c
    native/wire.c)
