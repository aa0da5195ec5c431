/* hdf5_error.h: HDF5's own reason for a failed call, for the one-line errors of the token cache
 * and the checkpoints.
 *
 * By default HDF5 prints its whole error stack to stderr, and the next call clears it. Between
 * mt_hdf5_errors_capture and mt_hdf5_errors_restore nothing is printed; instead the innermost
 * entry of the first failure since mt_hdf5_error_clear is kept: its minor message and, where the
 * system reported one, errno's text ("Write failed: File too large"). */
#pragma once
#include <hdf5.h>

typedef struct {
    H5E_auto2_t fn;
    void *data;
} mt_hdf5_errors;

/* Silences the printing, clears the reason, and returns what was installed before. */
mt_hdf5_errors mt_hdf5_errors_capture(void);
void mt_hdf5_errors_restore(mt_hdf5_errors saved);
/* Forgets the kept reason, so that the next failure sets it. */
void mt_hdf5_error_clear(void);
/* The kept reason, or "no reason given" when none was kept. */
const char *mt_hdf5_error_reason(void);
