/* version.h: what `--version` prints in every binary (core/version.c). */
#pragma once
#include <stdio.h>

/* "PROGRAM (minimax-train)", then the commit the build was configured from, the build type and
 * the backends built in, one "key: value" line each. */
void mt_version_print(FILE *f, const char *program);
