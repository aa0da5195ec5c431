/* hdf5_error.c: see hdf5_error.h. */
#include "hdf5_error.h"

#include <stdio.h>
#include <string.h>

/* per thread, as HDF5's error stacks are */
static _Thread_local char hdf5_reason[512];

/* The innermost entry (n = 0 when walking upward): its minor message, then the system's text
 * from the description ("..., error message = 'File too large', ..."), else the description. */
static herr_t hdf5_error_keep(unsigned n, const H5E_error2_t *e, void *user) {
    (void)user;
    if (n != 0) return 0;
    char minor[128] = "";
    if (H5Eget_msg(e->min_num, NULL, minor, sizeof(minor)) < 0) minor[0] = '\0';
    const char *desc = e->desc ? e->desc : "";
    const char *sys = strstr(desc, "error message = '");
    if (sys) {
        sys += strlen("error message = '");
        const char *end = strchr(sys, '\'');
        int len = end ? (int)(end - sys) : (int)strlen(sys);
        snprintf(hdf5_reason, sizeof(hdf5_reason), "%s: %.*s", minor, len, sys);
    } else {
        snprintf(hdf5_reason, sizeof(hdf5_reason), "%s%s%s (%s)", minor,
                 minor[0] && desc[0] ? ": " : "", desc, e->func_name ? e->func_name : "?");
    }
    return 0;
}

/* Installed as HDF5's automatic error handler: called when an API call fails, with its stack. */
static herr_t hdf5_error_auto(hid_t stack, void *user) {
    (void)user;
    if (!hdf5_reason[0]) H5Ewalk2(stack, H5E_WALK_UPWARD, hdf5_error_keep, NULL);
    return 0;
}

mt_hdf5_errors mt_hdf5_errors_capture(void) {
    /* No clean-up at exit: after a failed H5Fclose (a full disk) HDF5's exit handler closes the
     * file again and crashes (1.10.8: SIGSEGV in H5F__close_cb), turning a clear error's exit
     * status into a segfault. Effective when it precedes HDF5's first call, as it does in the
     * token cache and the checkpoints; every file they open is closed by then anyway. */
    H5dont_atexit();
    mt_hdf5_errors saved;
    H5Eget_auto2(H5E_DEFAULT, &saved.fn, &saved.data);
    H5Eset_auto2(H5E_DEFAULT, hdf5_error_auto, NULL);
    mt_hdf5_error_clear();
    return saved;
}

void mt_hdf5_errors_restore(mt_hdf5_errors saved) {
    H5Eset_auto2(H5E_DEFAULT, saved.fn, saved.data);
}

void mt_hdf5_error_clear(void) { hdf5_reason[0] = '\0'; }

const char *mt_hdf5_error_reason(void) { return hdf5_reason[0] ? hdf5_reason : "no reason given"; }
