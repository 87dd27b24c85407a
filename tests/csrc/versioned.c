/* A library defining versioned symbols through a version script. */
int api_v1(void) { return 1; }
int api_v2(void) { return 2; }
