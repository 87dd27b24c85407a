/* A Triton plugin with the real PluginInfo layout (plugin API v2, triton/Tools/PluginUtils.h
 * of the triton 3.9 wheel) that needs libtriton.so (the tests link it against
 * stub_libtriton.c). Names and behaviour come from -D flags, so one source gives plugins that
 * share a pass, dialect or op name, hang, crash, claim another API version or hog memory. */
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

#ifndef PLUGIN_NAME
#define PLUGIN_NAME "contract"
#endif
#ifndef PLUGIN_VERSION
#define PLUGIN_VERSION "1.0"
#endif
#ifndef PASS_A
#define PASS_A "contract-lower"
#endif
#ifndef PASS_B
#define PASS_B "contract-fuse"
#endif
#ifndef DIALECT
#define DIALECT "ContractDialect"
#endif
#ifndef OP
#define OP "contract_op"
#endif
#ifndef TRITON_VERSION
#define TRITON_VERSION "3.9.0"
#endif
#ifndef API_VERSION
#define API_VERSION 2
#endif

typedef void (*Callback)(void);
typedef struct { const char *name; const char *version; void (*addPass)(void *, const void *); Callback registerPass; } PassInfo;
typedef struct { const char *name; const char *version; void (*registerDialect)(void *); } DialectInfo;
typedef struct { const char *name; void (*addOp)(void *, void *); } OpInfo;
typedef struct {
  uint32_t apiVersion;
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

#ifdef NO_LIBTRITON
static int tritonStubAbi(void) { return 1; }
#else
extern int tritonStubAbi(void); /* from libtriton.so: what makes it NEEDED */
#endif

/* Callbacks that register nothing: Triton may call them, so none is NULL. */
static void add_pass(void *pass_manager, const void *args) { (void)pass_manager; (void)args; }
static void register_pass(void) {}
static void register_dialect(void *registry) { (void)registry; }
static void add_op(void *builder, void *operands) { (void)builder; (void)operands; }

static PassInfo passes[] = {{PASS_A, PLUGIN_VERSION, add_pass, register_pass},
                            {PASS_B, PLUGIN_VERSION, add_pass, register_pass}};
static DialectInfo dialects[] = {{DIALECT, PLUGIN_VERSION, register_dialect}};
static OpInfo ops[] = {{OP, add_op}};

PluginInfo *tritonGetPluginInfo(void) {
  static PluginInfo info = {API_VERSION, PLUGIN_NAME, PLUGIN_VERSION, passes, 2, dialects, 1, ops, 1, TRITON_VERSION};
#ifdef HANG
  for (;;) pause();
#endif
#ifdef CRASH
  *(volatile int *)NULL = 1;
#endif
#ifdef DIE_BY_SIGNAL /* a signal Python has no name for: a real-time one */
  signal(DIE_BY_SIGNAL, SIG_DFL);
  raise(DIE_BY_SIGNAL);
#endif
#ifdef HOG
  if (malloc((size_t)HOG << 20) == NULL) return NULL;
#endif
  return tritonStubAbi() == 1 ? &info : NULL;
}
