"""A demo Triton backend: Triton imports ``demo_backend.compiler`` and ``demo_backend.driver``
through the ``triton.backends`` entry point that the packager adds to the wheel."""

__version__ = "0.1.0"
