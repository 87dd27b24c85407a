"""Compiles the driver library: a plain C shared library that driver.py loads with ctypes."""

import os

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

HERE = os.path.dirname(os.path.abspath(__file__))


class build_shared_library(build_ext):
    """Name the output lib<name>.so: it is loaded with ctypes, not imported as a module."""

    def get_ext_filename(self, fullname):
        package, _, name = fullname.rpartition(".")
        return os.path.join(*package.split("."), name + ".so")

    def get_export_symbols(self, ext):
        return ext.export_symbols  # no PyInit_ function to export

    def copy_extensions_to_source(self):
        # Editable installs copy the library into the source tree: lib/ is not a package there.
        build_py = self.get_finalized_command("build_py")
        for ext in self.extensions:
            os.makedirs(build_py.get_package_dir(ext.name.rpartition(".")[0]), exist_ok=True)
        super().copy_extensions_to_source()


driver = Extension(
    "demo_backend.lib.libdemo_driver",
    sources=["csrc/demo_driver.c"],
    # Reproducible builds: debug info must not record where the source tree happened to be.
    extra_compile_args=[f"-ffile-prefix-map={HERE}=.", "-fvisibility=hidden"],
    extra_link_args=["-Wl,--build-id", "-Wl,-soname,libdemo_driver.so"],
)

setup(ext_modules=[driver], cmdclass={"build_ext": build_shared_library})
