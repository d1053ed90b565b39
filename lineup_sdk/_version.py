"""The toolchain's version, shared by the SDK, the build and the runtime."""

__version__ = "0.3.0"
