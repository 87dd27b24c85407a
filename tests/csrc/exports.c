/* A library with exports of several kinds and versioned imports from libc and libm. */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

int exported_counter = 3;
__thread int exported_tls = 1;

int exported_function(int x) { return x * 2 + exported_counter; }

__attribute__((weak)) int weak_function(void) { return 7; }

static int hidden_helper(int x) { return x + 1; }

__attribute__((visibility("hidden"))) int hidden_global(void) { return 5; }

extern int optional_hook(void) __attribute__((weak));

double uses_libm(double v) { return sqrt(v) + hidden_helper(1); }

size_t uses_libc(char *dst, const char *src, size_t n) {
  memcpy(dst, src, n);
  printf("%zu\n", n);
  if (optional_hook) optional_hook();
  return strlen(dst);
}

int uses_pthread(void) { return (int)pthread_self() & 1; }
