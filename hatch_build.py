"""The build's compiled parts (:data:`EXTENSIONS`; :mod:`pipeline.compiled` says which are in use), each
built with the C compiler of the Python that builds (``sysconfig``'s ``CC``, else ``cc``) against its
headers.

They are optional by contract: when there is no compiler, or it fails, the build goes on without them
and their modules run their pure-Python forms (same results, more CPU), after a warning here.
``HBASE_INGEST_REQUIRE_COMPILED=1`` turns that into a failed build (the test command sets it, so that
a broken build cannot pass unseen), and it is also what makes a compiler warning fail the build
(:data:`STRICT_WARNINGS`, ``-Werror``): the project's own installs and CI set it, so that a warning is
fixed when it appears. A user's plain ``pip install`` builds with :data:`WARNINGS` only (``-Wall``): a
newer compiler that warns about something new must not take the compiled parts away from them.

An extension is written beside its source, so that an editable install imports it from the checkout;
a wheel carries it and is tagged for its Python and platform. The source's SHA-256 goes into the module
(``SOURCE_SHA256``), so that a build of an older source is told apart and not used
(:func:`pipeline.compiled.load`).

``make sanitize`` builds the same sources with :data:`SANITIZE` (AddressSanitizer and
UndefinedBehaviorSanitizer) and :data:`STRICT_WARNINGS` into a folder of its own (``into``), never over
the builds in use, and runs their property tests against those builds (``tests/unit/sanitized.py``).
"""

from __future__ import annotations

import hashlib
import os
import shlex
import subprocess
import sysconfig
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from hatchling.builders.hooks.plugin.interface import BuildHookInterface

EXTENSIONS = {
    "connectors/hbase/_putwire.c": "connectors/hbase/_putwire",  # the putMultiple encoder
    "pipeline/core/routes/_routerun.c": "pipeline/core/routes/_routerun",  # the plain-topic routing loop
    "connectors/hbase/native/_multiwire.c": "connectors/hbase/native/_multiwire",  # the native Multi encoder
}

#: the warnings of a user's build: never fatal
WARNINGS = ("-Wall",)
#: the warnings of the project's own builds (``HBASE_INGEST_REQUIRE_COMPILED=1``): any of them fails the build
STRICT_WARNINGS = ("-Wall", "-Wextra", "-Wshadow", "-Wstrict-prototypes", "-Werror")
#: the code generation of a normal build
OPTIMIZE = ("-O2",)
#: the code generation of a sanitized build (``make sanitize``): the process must load the sanitizers'
#: runtimes first (``LD_PRELOAD``), as the Python interpreter is not built with them
SANITIZE = ("-fsanitize=address,undefined", "-fno-omit-frame-pointer", "-fno-sanitize-recover=undefined", "-O1", "-g")


def compile_extension(root: Path, source: str, module: str, *, strict: bool = False, into: Path | None = None,
                      codegen: Sequence[str] = OPTIMIZE) -> Path:
    """Compile ``source`` (relative to ``root``) into ``module`` + this Python's extension suffix, under
    ``into`` (default: ``root``, beside the source) with the code generation flags ``codegen``;
    returns the file. ``strict`` makes every warning an error (:data:`STRICT_WARNINGS`). Raises
    ``RuntimeError`` with the compiler's output when it fails."""
    src = root / source
    out = (into or root) / (module + str(sysconfig.get_config_var("EXT_SUFFIX") or ".so"))
    out.parent.mkdir(parents=True, exist_ok=True)
    digest = hashlib.sha256(src.read_bytes()).hexdigest()
    cc = shlex.split(str(sysconfig.get_config_var("CC") or "cc"))
    include = sysconfig.get_paths()["include"]
    # built beside and then renamed over the old build: a process that has the old one loaded keeps it intact
    part = out.with_name(f".{out.name}.{os.getpid()}.part")
    warnings = STRICT_WARNINGS if strict else WARNINGS
    argv = [*cc, *codegen, "-fPIC", "-shared", *warnings, f"-I{include}", f'-DSOURCE_SHA256="{digest}"',
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
        required = os.environ.get("HBASE_INGEST_REQUIRE_COMPILED") == "1"
        for source, module in EXTENSIONS.items():
            try:
                built = compile_extension(root, source, module, strict=required)
            except RuntimeError as exc:
                if required:
                    raise
                self.app.display_warning(f"hbase-ingest: {source} not compiled, its pure-Python form is used: {exc}")
                continue
            build_data["pure_python"] = False
            build_data["infer_tag"] = True
            if version != "editable":
                build_data["force_include"][str(built)] = built.relative_to(root).as_posix()
