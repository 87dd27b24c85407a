/* A Triton plugin library, plugin API v2: one exported entry point, tritonGetPluginInfo,
 * returning what the plugin provides and the Triton version it was built against. */
#include <stddef.h>

#define EXPORT __attribute__((visibility("default")))

typedef struct {
  const char *name;
  const char *version;
  const char *const *passes;
  size_t num_passes;
  const char *const *dialects;
  size_t num_dialects;
  const char *const *ops;
  size_t num_ops;
  const char *triton_version;
} SkdemoPluginInfo;

static const char *const skdemo_passes[] = {"skdemo-lower-to-device", "skdemo-fuse-elementwise"};

EXPORT const SkdemoPluginInfo *tritonGetPluginInfo(void) {
  static const SkdemoPluginInfo info = {
      "skdemo", "0.1.0", skdemo_passes, 2, NULL, 0, NULL, 0, "3.9.0",
  };
  return &info;
}
