/* The skdemo device's driver library: "devices" come from SKDEMO_BACKEND_DEVICES (a count)
 * or /dev/skdemo0, so the backend imports everywhere and is active only where they exist. */
#include <stdlib.h>
#include <unistd.h>

#define EXPORT __attribute__((visibility("default")))

EXPORT int skdemo_device_count(void) {
  const char *env = getenv("SKDEMO_BACKEND_DEVICES");
  if (env != NULL && *env != '\0') {
    int count = atoi(env);
    return count > 0 ? count : 0;
  }
  return access("/dev/skdemo0", F_OK) == 0 ? 1 : 0;
}

EXPORT int skdemo_device_arch(int device) { return device >= 0 && device < skdemo_device_count() ? 2 : -1; }
