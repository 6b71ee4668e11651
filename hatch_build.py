"""The build's compiled parts (:data:`EXTENSIONS`; :mod:`pipeline.compiled` says which are in use), each
built with the C compiler of the Python that builds (``sysconfig``'s ``CC``, else ``cc``) against its
headers.

They are optional by contract: when there is no compiler, or it fails, the build goes on without them
and their modules run their pure-Python forms (same results, more CPU), after a warning here.
``HBASE_INGEST_REQUIRE_COMPILED=1`` turns that into a failed build (the test command sets it, so that
a broken build cannot pass unseen). An extension is written beside its source, so that an
editable install imports it from the checkout; a wheel carries it and is tagged for its Python and
platform. The source's SHA-256 goes into the module (``SOURCE_SHA256``), so that a build of an older
source is told apart and not used (:func:`pipeline.compiled.load`).
"""

from __future__ import annotations

import hashlib
import os
import shlex
import subprocess
import sysconfig
from pathlib import Path
from typing import Any

from hatchling.builders.hooks.plugin.interface import BuildHookInterface

EXTENSIONS = {
    "connectors/hbase/_putwire.c": "connectors/hbase/_putwire",  # the putMultiple encoder
    "pipeline/core/_routerun.c": "pipeline/core/_routerun",  # the plain-topic routing loop
}


def compile_extension(root: Path, source: str, module: str) -> Path:
    """Compile ``source`` (relative to ``root``) into ``module`` + this Python's extension suffix;
    returns the file. Raises ``RuntimeError`` with the compiler's output when it fails."""
    src = root / source
    out = root / (module + str(sysconfig.get_config_var("EXT_SUFFIX") or ".so"))
    digest = hashlib.sha256(src.read_bytes()).hexdigest()
    cc = shlex.split(str(sysconfig.get_config_var("CC") or "cc"))
    include = sysconfig.get_paths()["include"]
    # built beside and then renamed over the old build: a process that has the old one loaded keeps it intact
    part = out.with_name(f".{out.name}.{os.getpid()}.part")
    argv = [*cc, "-O2", "-fPIC", "-shared", "-Wall", f"-I{include}", f'-DSOURCE_SHA256="{digest}"',
            str(src), "-o", str(part)]
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=300)
    except OSError as exc:
        raise RuntimeError(f"{' '.join(argv)}: {exc}") from exc
    if done.returncode:
        part.unlink(missing_ok=True)
        raise RuntimeError(f"{' '.join(argv)} exited {done.returncode}: {done.stderr.strip()}")
    os.replace(part, out)
    return out


class CompiledParts(BuildHookInterface[Any]):
    """Compiles :data:`EXTENSIONS` (module docstring)."""

    PLUGIN_NAME = "custom"

    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        root = Path(self.root)
        for source, module in EXTENSIONS.items():
            try:
                built = compile_extension(root, source, module)
            except RuntimeError as exc:
                if os.environ.get("HBASE_INGEST_REQUIRE_COMPILED") == "1":
                    raise
                self.app.display_warning(f"hbase-ingest: {source} not compiled, its pure-Python form is used: {exc}")
                continue
            build_data["pure_python"] = False
            build_data["infer_tag"] = True
            if version != "editable":
                build_data["force_include"][str(built)] = built.relative_to(root).as_posix()
