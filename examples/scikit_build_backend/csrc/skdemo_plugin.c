/* A Triton plugin library, plugin API v2: one exported entry point, tritonGetPluginInfo,
 * returning the PluginInfo struct of Triton's triton/Tools/PluginUtils.h (shipped in the
 * triton 3.9 wheel under triton/include): what the plugin registers and the Triton version
 * it was built against. The packager calls it at build time, in a child process, and signs
 * what it says; pyproject.toml declares the rest of the contract. Its callbacks do nothing:
 * Triton may call them (extend_with registers every pass), so none may be NULL. */
#include <stddef.h>
#include <stdint.h>

#define EXPORT __attribute__((visibility("default")))

typedef void (*AddPass)(void *pass_manager, const void *args);
typedef void (*RegisterPass)(void);
typedef void (*RegisterDialect)(void *registry);
typedef void (*AddOp)(void *builder, void *operands);
typedef struct { const char *name; const char *version; AddPass addPass; RegisterPass registerPass; } PassInfo;
typedef struct { const char *name; const char *version; RegisterDialect registerDialect; } DialectInfo;
typedef struct { const char *name; AddOp addOp; } OpInfo;
typedef struct {
  uint32_t apiVersion; /* TRITON_PLUGIN_API_VERSION */
  const char *pluginName;
  const char *pluginVersion;
  PassInfo *passes;
  size_t numPasses;
  DialectInfo *dialects;
  size_t numDialects;
  OpInfo *ops;
  size_t numOps;
  const char *tritonVersion;
} PluginInfo;

static void skdemo_add_pass(void *pass_manager, const void *args) { (void)pass_manager; (void)args; }
static void skdemo_register_pass(void) {}

static PassInfo skdemo_passes[] = {
    {"skdemo-lower-to-device", "0.1.0", skdemo_add_pass, skdemo_register_pass},
    {"skdemo-fuse-elementwise", "0.1.0", skdemo_add_pass, skdemo_register_pass},
};

EXPORT PluginInfo *tritonGetPluginInfo(void) {
  static PluginInfo info = {2, "skdemo", "0.1.0", skdemo_passes, 2, NULL, 0, NULL, 0, "3.9.0"};
  return &info;
}
