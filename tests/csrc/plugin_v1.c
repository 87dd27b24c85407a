/* A fake Triton plugin using the older v1 entry points. */
#include <stdint.h>

int tritonEnumeratePluginPasses(uint32_t *count, const char **names) { *count = 0; (void)names; return 0; }
int tritonAddPluginPass(void *pm, const char *name) { (void)pm; (void)name; return 0; }
int tritonRegisterPluginPass(const char *name) { (void)name; return 0; }
