/* Helpers shared by the unit tests: each test file defines
 * `Suite *sl_test_suite(void)`; sl_test.c supplies main(), which runs it
 * with CK_FORK, and small file utilities over a per-process temp folder. */
#ifndef SL_TEST_H
#define SL_TEST_H

#include <check.h>
#include <stddef.h>
#include <stdint.h>

Suite *sl_test_suite(void);

/* A fresh directory for this test process (removed at exit). */
const char *sl_test_dir(void);
/* "<sl_test_dir()>/<name>" in a static rotating buffer (8 slots). */
const char *sl_test_path(const char *name);
/* Write bytes to a file under the temp dir; returns its path. */
const char *sl_test_write(const char *name, const void *data, size_t len);
/* Read a whole file (malloc'd, caller frees); *len set. NULL on error. */
uint8_t *sl_test_read(const char *path, size_t *len);
/* Parse hex ("0a 0b0c", spaces ignored) into out; returns byte count. */
size_t sl_test_hex(const char *hex, uint8_t *out, size_t cap);

/* XGETBV(1), the register-state components in use (XINUSE), into *out:
 * 1, or 0 when the CPU cannot tell (not x86-64, no OSXSAVE, no XGETBV(1)).
 * Bit 2: the upper halves of the ymm registers are dirty. */
int sl_test_xinuse(uint64_t *out);

#endif
