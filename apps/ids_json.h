/* ids_json.h: token id batches as JSON (the minimax-forward / minimax-generate inputs):
 * a list of equal-length lists of integers, e.g. [[1, 2, 3], [4, 5, 6]]. */
#pragma once
#include <stdint.h>

/* Reads path into a malloc'ed row-major (B,T) array. Dies naming the file, row and column
 * when the file is not such a list or a value is not an int32. */
int32_t *mt_ids_json_load(const char *path, int *B, int *T);
/* Dies unless every value is in [0, V) or equals allowed (pass 0 to allow nothing extra;
 * labels pass -100). what names the data in the message. */
void mt_ids_check_range(const int32_t *ids, int B, int T, int V, int allowed, const char *what,
                        const char *path);
