/* A library that needs libuuid.so.1, a system library outside every manylinux policy: auditwheel
   repair grafts it into the wheel and, since the system's package manager owns it, writes its own
   PEP 770 SBOM (.dist-info/sboms/auditwheel.cdx.json). Declared here: no uuid header needed. */
void uuid_generate(unsigned char out[16]);

void demo_new_id(unsigned char out[16]) { uuid_generate(out); }
