# SPDX-License-Identifier: MIT
# The sources of striping/, relative to this directory: one list for the
# main build (striping/CMakeLists.txt) and the fuzz build (tests/fuzz),
# so that a new file reaches both.
set(STRIPING_SOURCES layout.c util.c devset.c bufpool.c engine.c)
