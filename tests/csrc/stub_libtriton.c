/* A stand-in libtriton.so (soname libtriton.so) for test plugins that need one: it exports
 * the one symbol they import, so the dynamic linker resolves their NEEDED entry. */
int tritonStubAbi(void) { return 1; }
