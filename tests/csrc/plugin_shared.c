/* A real Triton plugin (API v2, the PluginInfo layout of Triton 3.9's PluginUtils.h) that
 * registers nothing and imports nothing from libtriton, so Triton's extend_with accepts it.
 * It exports one strong helper symbol: two distributions shipping it clash on that symbol. */
#include <stddef.h>
#include <stdint.h>

typedef struct {
  uint32_t api_version;
  const char *name;
  const char *version;
  void *passes;
  size_t num_passes;
  void *dialects;
  size_t num_dialects;
  void *ops;
  size_t num_ops;
  const char *triton_version;
} TritonPluginInfo;

int demo_shared_helper(int x) { return x + 1; }

const TritonPluginInfo *tritonGetPluginInfo(void) {
  static const TritonPluginInfo info = {2, "shared", "1.0", NULL, 0, NULL, 0, NULL, 0, "3.9.0"};
  return &info;
}
