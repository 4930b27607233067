"""Packaging hook (metadata is in pyproject.toml): build_py also generates the stubs mcserve/v1/*_pb2*.py."""
import os
import subprocess

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))


class BuildPyWithStubs(build_py):
    """Runs generate_stubs.sh into the build directory, next to the copied package."""

    def run(self) -> None:
        super().run()
        proto_dir = os.environ.get("MCSERVE_PROTO_DIR", os.path.join(HERE, "..", "..", "proto"))
        subprocess.run(["bash", os.path.join(HERE, "generate_stubs.sh"), self.build_lib, proto_dir], check=True)


setup(cmdclass={"build_py": BuildPyWithStubs})
