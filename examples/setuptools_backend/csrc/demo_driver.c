/* The demo device's driver library. A real vendor library would talk to a kernel driver;
 * this one finds "devices" through DEMO_BACKEND_DEVICES (a count) or /dev/demo0, so that the
 * backend is importable everywhere and active only where its device is present. */
#include <stdlib.h>
#include <unistd.h>

#define EXPORT __attribute__((visibility("default")))

EXPORT int demo_device_count(void) {
  const char *env = getenv("DEMO_BACKEND_DEVICES");
  if (env != NULL && *env != '\0') {
    int count = atoi(env);
    return count > 0 ? count : 0;
  }
  return access("/dev/demo0", F_OK) == 0 ? 1 : 0;
}

/* Architecture number of a device: the demo device has one generation. */
EXPORT int demo_device_arch(int device) { return device >= 0 && device < demo_device_count() ? 1 : -1; }

EXPORT const char *demo_driver_version(void) { return "0.1.0"; }
