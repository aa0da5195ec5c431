/* version.c: the build's identity for `--version`. The commit and the build type come from
 * CMakeLists.txt as definitions on this file alone (`git describe --always --dirty` at
 * configure time, "unknown" outside a git checkout), so a new commit recompiles one file. */
#include "core/version.h"

#ifndef MT_GIT_COMMIT
#define MT_GIT_COMMIT "unknown"
#endif
#ifndef MT_BUILD_TYPE
#define MT_BUILD_TYPE "unknown"
#endif

/* the backends compiled in (kernels/backend.c picks among them at run time) */
#ifdef MT_WITH_CUDA
#define MT_BACKENDS "cpu cuda"
#else
#define MT_BACKENDS "cpu"
#endif

void mt_version_print(FILE *f, const char *program) {
    fprintf(f,
            "%s (minimax-train)\n"
            "commit: %s\n"
            "build: %s\n"
            "backends: %s\n",
            program, MT_GIT_COMMIT, MT_BUILD_TYPE, MT_BACKENDS);
}
