// For libparla's Swift half only: not installed.
#ifndef PARLA_INTERNAL_H
#define PARLA_INTERNAL_H
#include "parla.h"
__attribute__((visibility("hidden"))) void parla_internal_set_error(const char *message, int status);
__attribute__((visibility("hidden"))) int parla_internal_library_path(char *out, size_t size);
__attribute__((visibility("hidden"))) void parla_internal_set_in_callback(int value);
__attribute__((visibility("hidden"))) int parla_internal_in_callback(void);
#endif
