// The per-thread message of parla_last_error(), set by the Swift half (ParlaC) through
// parla_internal_set_error (hidden from the library's exported symbols by parla.map).
#define _GNU_SOURCE
#include "parla_internal.h"
#include <dlfcn.h>
#include <string.h>

static _Thread_local char last_error[2048];
static _Thread_local parla_status last_status;

const char *parla_last_error(void) { return last_error; }

parla_status parla_last_status(void) { return last_status; }

const char *parla_status_string(parla_status status) {
    switch (status) {
    case PARLA_OK: return "no error";
    case PARLA_ERROR_INVALID_ARGUMENT: return "invalid argument";
    case PARLA_ERROR_INVALID_HANDLE: return "invalid handle";
    case PARLA_ERROR_INVALID_UTF8: return "invalid UTF-8";
    case PARLA_ERROR_OUT_OF_RANGE: return "value out of range";
    case PARLA_ERROR_UNKNOWN_VOICE: return "unknown voice";
    case PARLA_ERROR_UNKNOWN_LANGUAGE: return "unknown language";
    case PARLA_ERROR_SSML: return "malformed SSML";
    case PARLA_ERROR_AUDIO: return "audio failure";
    case PARLA_ERROR_ENGINE: return "engine failure";
    case PARLA_ERROR_IO: return "input or output failure";
    case PARLA_ERROR_TIMEOUT: return "timed out";
    case PARLA_ERROR_FAILED: return "failed";
    }
    return "unknown status";
}

__attribute__((visibility("hidden"))) void parla_internal_set_error(const char *message, int status) {
    last_status = (parla_status)status;
    if (!message) message = "";
    size_t n = strlen(message);
    if (n >= sizeof last_error) n = sizeof last_error - 1;
    memcpy(last_error, message, n);
    last_error[n] = 0;
}

// The file this code was loaded from (libparla.so.0, or the program it is linked into), or
// NULL: Parla's engine and voices are looked for beside it.
__attribute__((visibility("hidden"))) int parla_internal_library_path(char *out, size_t size) {
    Dl_info info;
    if (!dladdr((void *)parla_internal_library_path, &info) || !info.dli_fname || !out || size == 0) return 0;
    size_t n = strlen(info.dli_fname);
    if (n >= size) return 0;
    memcpy(out, info.dli_fname, n + 1);
    return 1;
}

// Whether the calling thread is delivering an event (parla_wait and the like refuse to block it).
static _Thread_local int in_callback;
__attribute__((visibility("hidden"))) void parla_internal_set_in_callback(int value) { in_callback = value; }
__attribute__((visibility("hidden"))) int parla_internal_in_callback(void) { return in_callback; }
