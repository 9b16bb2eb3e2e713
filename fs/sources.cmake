# SPDX-License-Identifier: MIT
# The sources of fs/, relative to this directory, for the main build
# (fs/CMakeLists.txt) and the fuzz build (tests/fuzz), so that a new file
# reaches both:
#  - FS_CORE_SOURCES: the format, metadata, journal and data path, which
#    need neither FUSE nor json-c; the fuzzers build these. A file that
#    one of them calls belongs here.
#  - FS_FUSE_SOURCES: the FUSE operations and receive loop, member
#    discovery and the control files.
set(FS_CORE_SOURCES util.c format.c meta.c extmap.c alloc.c journal.c volume.c rangelock.c data.c prefetch.c namei.c
                    xlayout.c holder.c)
set(FS_FUSE_SOURCES ops.c loop.c discover.c ctl.c)
