"""Generates the gRPC stubs from the repository's proto at build time.

The proto package `toolgate.v1` becomes the Python package `toolgate.v1`
inside this one, so the generated absolute imports (`from toolgate.v1 import
toolgate_pb2`) resolve without any `sys.path` change.
"""

import os
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = Path(__file__).resolve().parent
PROTO = Path(os.environ.get("TOOLGATE_PROTO_DIR", HERE.parent.parent / "proto"))


class BuildWithStubs(build_py):
    def run(self) -> None:
        super().run()
        # An editable install (pip install -e) imports from src/, so the
        # stubs go there (git ignores them); a normal build puts them in
        # the wheel.
        from grpc_tools import protoc  # the build requirement
        import grpc_tools

        source = PROTO / "toolgate" / "v1" / "toolgate.proto"
        if not source.exists():
            raise SystemExit(f"toolgate-client: no proto at {source} (set TOOLGATE_PROTO_DIR)")
        out = HERE / "src" if getattr(self, "editable_mode", False) else Path(self.build_lib)
        includes = Path(grpc_tools.__file__).parent / "_proto"
        code = protoc.main([
            "grpc_tools.protoc",
            f"-I{PROTO}",
            f"-I{includes}",
            f"--python_out={out}",
            f"--pyi_out={out}",
            f"--grpc_python_out={out}",
            str(source),
        ])
        if code != 0:
            raise SystemExit(f"toolgate-client: protoc failed ({code})")
        (out / "toolgate" / "v1" / "__init__.py").write_text('"""Generated from toolgate.proto."""\n')


setup(cmdclass={"build_py": BuildWithStubs})
