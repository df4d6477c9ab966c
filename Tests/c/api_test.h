// Shared by libparla's C API tests (api_test.c, api_test_live.c).
#ifndef PARLA_API_TEST_H
#define PARLA_API_TEST_H
#include <parla.h>
#include <stdint.h>

/// Failed expectations so far.
extern int failures;
/// Counts a failure, with the message and libparla's last error, unless `ok`.
void expect(int ok, const char *format, ...);
/// Expects status `want`, and a message with any error.
void expect_status(parla_status got, parla_status want, const char *what);
/// Scalars in the first `bytes` bytes of UTF-8 `s`.
int64_t scalars_in(const char *s, int64_t bytes);
/// Whether byte `at` of `s` starts a scalar.
int on_boundary(const char *s, int64_t at);
/// A range reported in `text`: inside it, on scalar boundaries, its scalar offsets agreeing
/// with its byte offsets, and (if `spoken` is given) the caller's bytes there spelling it.
void check_range(const char *what, const char *text, int64_t b0, int64_t b1, int64_t s0, int64_t s1, const char *spoken);

/// Thousands of random inputs through every call that takes them (api_test_live.c).
void test_hostile(int rounds);
/// Speaking through the sound server of PULSE_SERVER (api_test_live.c).
void test_live(void);
#endif
