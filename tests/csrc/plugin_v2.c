/* A fake Triton plugin (API v2): one entry point returning a description struct. */
#include <stddef.h>

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
} TritonPluginInfo;

static const char *const passes[] = {"demo-pass"};

/* Provided by libtriton.so when the plugin is loaded into Triton. */
extern void tritonDemoRegisterPass(const char *name);

const TritonPluginInfo *tritonGetPluginInfo(void) {
  static const TritonPluginInfo info = {"demo", "1.0", passes, 1, NULL, 0, NULL, 0, "3.9.0"};
  tritonDemoRegisterPass(passes[0]);
  return &info;
}
