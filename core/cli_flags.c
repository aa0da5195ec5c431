/* cli_flags.c: strict parsing of command-line numbers (see cli_flags.h). */
#include "core/cli_flags.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* "got ..." shows at most 40 bytes of the value: a flag's value may be a whole file by mistake */
#define MT_FLAG_SHOWN 40

bool mt_flag_int(const char *flag, const char *v, long long lo, long long hi, long long *out,
                 char *err, size_t n) {
    char *end = NULL;
    errno = 0;
    const long long x = v && *v ? strtoll(v, &end, 10) : 0;
    /* strtoll skips leading white space of any kind: " 5" and "\n5" are refused like "5 " */
    if (!v || !*v || *end || errno == ERANGE || x < lo || x > hi || isspace((unsigned char)*v)) {
        snprintf(err, n, "%s wants an integer in [%lld, %lld], got \"%.*s\"", flag, lo, hi,
                 MT_FLAG_SHOWN, v ? v : "");
        return false;
    }
    *out = x;
    return true;
}

bool mt_flag_int32(const char *flag, const char *v, int lo, int hi, int *out, char *err, size_t n) {
    long long x;
    if (!mt_flag_int(flag, v, lo, hi, &x, err, n)) return false;
    *out = (int)x;
    return true;
}

bool mt_flag_u64(const char *flag, const char *v, uint64_t *out, char *err, size_t n) {
    char *end = NULL;
    errno = 0;
    const bool digits = v && *v >= '0' && *v <= '9';
    const unsigned long long x = digits ? strtoull(v, &end, 10) : 0;
    if (!digits || *end || errno == ERANGE) {
        snprintf(err, n, "%s wants an integer in [0, %llu], got \"%.*s\"", flag, ULLONG_MAX,
                 MT_FLAG_SHOWN, v ? v : "");
        return false;
    }
    *out = (uint64_t)x;
    return true;
}

bool mt_flag_double(const char *flag, const char *v, double lo, bool lo_open, double hi,
                    bool hi_open, double *out, char *err, size_t n) {
    char *end = NULL;
    const bool text = v && *v && !isspace((unsigned char)*v);
    const double x = text ? strtod(v, &end) : NAN;
    const bool ok = text && !*end && isfinite(x) && (lo_open ? x > lo : x >= lo) &&
                    (hi_open ? x < hi : x <= hi);
    if (!ok) {
        snprintf(err, n, "%s wants a number in %c%g, %g%c, got \"%.*s\"", flag, lo_open ? '(' : '[',
                 lo, hi, hi_open ? ')' : ']', MT_FLAG_SHOWN, v ? v : "");
        return false;
    }
    *out = x;
    return true;
}

bool mt_flag_text(const char *flag, const char *v, char *err, size_t n) {
    if (v && *v) return true;
    snprintf(err, n, "%s wants a non-empty value", flag);
    return false;
}

bool mt_flag_list_add(const char *flag, const char *v, const char **list, int *count, int max,
                      char *err, size_t n) {
    if (!mt_flag_text(flag, v, err, n)) return false;
    if (*count >= max) {
        snprintf(err, n, "%s: at most %d values", flag, max);
        return false;
    }
    list[(*count)++] = v;
    return true;
}

/* p's parent directory and last name ("a/b/" -> "a", "b"; "b" -> ".", "b"; "/b" -> "/", "b"). */
static void path_split(const char *p, char *parent, size_t pn, char *name, size_t nn) {
    size_t len = strlen(p);
    while (len > 1 && p[len - 1] == '/') len--;
    size_t slash = len;
    while (slash > 0 && p[slash - 1] != '/') slash--;
    snprintf(name, nn, "%.*s", (int)(len - slash), p + slash);
    if (slash == 0)
        snprintf(parent, pn, ".");
    else
        snprintf(parent, pn, "%.*s", (int)(slash > 1 ? slash - 1 : 1), p);
}

/* What identifies p: its own (device, inode) when it exists (whole), else its parent's and its
 * name. false when neither exists. */
static bool path_key(const char *p, struct stat *st, char *name, size_t nn, bool *whole) {
    name[0] = '\0';
    if (stat(p, st) == 0) {
        *whole = true;
        return true;
    }
    char parent[4096];
    path_split(p, parent, sizeof(parent), name, nn);
    *whole = false;
    return stat(parent, st) == 0;
}

bool mt_path_same(const char *a, const char *b) {
    struct stat sa, sb;
    char na[256], nb[256];
    bool wa, wb;
    const bool ka = path_key(a, &sa, na, sizeof(na), &wa),
               kb = path_key(b, &sb, nb, sizeof(nb), &wb);
    if (!ka || !kb) return strcmp(a, b) == 0;
    return wa == wb && sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino &&
           (wa || strcmp(na, nb) == 0);
}

bool mt_out_not_input(const char *out_flag, const char *out, const char *in_flag, const char *in,
                      char *err, size_t n) {
    if (!out || !in || !mt_path_same(out, in)) return true;
    snprintf(err, n, "%s %s is %s %s (the same file): the output would overwrite the input",
             out_flag, out, in_flag, in);
    return false;
}

bool mt_out_not_in_dir(const char *out_flag, const char *out, const char *dir_flag, const char *dir,
                       char *err, size_t n) {
    struct stat sd, sp, so, se;
    if (!out || !dir || stat(dir, &sd) != 0 || !S_ISDIR(sd.st_mode)) return true;
    char parent[4096], name[256];
    path_split(out, parent, sizeof(parent), name, sizeof(name));
    if (stat(parent, &sp) == 0 && sp.st_dev == sd.st_dev && sp.st_ino == sd.st_ino) {
        snprintf(err, n,
                 "%s %s is inside %s %s: the tool does not write into a model directory "
                 "(its files are inputs); write it elsewhere",
                 out_flag, out, dir_flag, dir);
        return false;
    }
    if (stat(out, &so) != 0) return true;
    DIR *d = opendir(dir); /* out by another name: a link to one of dir's files */
    if (!d) return true;
    bool ok = true;
    for (struct dirent *e; ok && (e = readdir(d));) {
        char path[4400];
        snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..") && stat(path, &se) == 0 &&
            se.st_dev == so.st_dev && se.st_ino == so.st_ino) {
            snprintf(err, n,
                     "%s %s is %s (the same file) of %s %s: the output would overwrite the "
                     "model",
                     out_flag, out, path, dir_flag, dir);
            ok = false;
        }
    }
    closedir(d);
    return ok;
}

bool mt_out_writable(const char *flag, const char *out, char *err, size_t n) {
    struct stat st;
    if (stat(out, &st) == 0 && S_ISDIR(st.st_mode)) {
        snprintf(err, n, "%s %s is a directory: give a file name", flag, out);
        return false;
    }
    char probe[4200];
    snprintf(probe, sizeof(probe), "%s.tmp.%d", out, (int)getpid());
    const int fd = open(probe, O_WRONLY | O_CREAT | O_EXCL, 0644);
    if (fd < 0) {
        snprintf(err, n, "%s %s: cannot create a file there (%s): %s", flag, out, probe,
                 strerror(errno));
        return false;
    }
    close(fd);
    unlink(probe);
    return true;
}
