/* jinja_filters.h: what the filters' two files share (jinja/jinja_filters.c: collections and
 * strings, the table; jinja/jinja_filters_num.c: numbers and tojson). */
#pragma once
#include "jinja/jinja_vm.h"

/* argument helpers */
bool jinja_fa_arg_bool(const jinja_args *a, int i, const char *kw, bool def);
int64_t jinja_fa_arg_int(jinja_vm *vm, const jinja_args *a, int i, const char *kw, int64_t def);
void jinja_fa_undefined_raises(jinja_vm *vm, jinja_value x);
jinja_value jinja_fa_buf_value(jinja_vm *vm, jinja_buf *b);

jinja_value jinja_f_int(jinja_vm *vm, jinja_value x, const jinja_args *a);
jinja_value jinja_f_float(jinja_vm *vm, jinja_value x, const jinja_args *a);
jinja_value jinja_f_abs(jinja_vm *vm, jinja_value x, const jinja_args *a);
jinja_value jinja_f_round(jinja_vm *vm, jinja_value x, const jinja_args *a);
jinja_value jinja_f_tojson(jinja_vm *vm, jinja_value x, const jinja_args *a);
