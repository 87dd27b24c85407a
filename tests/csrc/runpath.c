/* A library with a SONAME and a RUNPATH that needs another library of ours. */
extern int exported_function(int x);

int calls_dependency(int x) { return exported_function(x) + 1; }
