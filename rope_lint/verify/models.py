"""Model-level verification of a fixed transformers tree: a tiny random model of each causal-LM architecture whose
rotary class the fix rewrote is saved by the original code and loaded by the fixed code.

For each such architecture (the `*ForCausalLM` classes of a changed `modeling_*.py` whose rotary class changed):
- a tiny random model is built from its config class (2 layers, hidden 128, 4 heads of 32, 2 key-value heads,
  vocabulary 1000; the rope settings are the config's defaults) and saved with `save_pretrained` by the original code;
- both the original and the fixed code load it with `from_pretrained` and compute the logits of one sequence of 1,024
  tokens: in fp32 they must be identical (`torch.equal`);
- in bf16, by both routes a user takes (`.to(torch.bfloat16)` after an fp32 load, and
  `from_pretrained(..., dtype=torch.bfloat16)`, spelled `torch_dtype=` before transformers 5.0), the fixed code's
  argmax agreement with the fp32 logits must be no lower than the original code's;
- the fixed load must report no missing or unexpected weights that the original load did not.

The original and the fixed code are two different `transformers` packages, so each runs in a subprocess of its own
(`sys.executable -m rope_lint.verify.models`); they exchange the saved models and the fp32 logits through a temporary
folder. The original tree is a copy of the fixed one with the changed files' original texts written back.

API, for `rope-lint fix --verify`:
- `is_transformers_package(root)`: whether a folder is a `transformers` package (test this on the fixed tree's
  package folder before calling `verify_models`).
- `causal_lm_architectures(package_root, originals)`: the architectures that `verify_models` will verify, without
  running anything.
- `verify_models(package_root, originals, pythonpath=())` -> `list[ArchitectureResult]`, one per architecture, in
  the order of `causal_lm_architectures`. `package_root` is the fixed `transformers` folder; `originals` maps each
  file the fix changed (a path inside `package_root`, absolute or relative to it) to its original text; `pythonpath`
  holds the folders of transformers' dependencies (huggingface_hub, safetensors, tokenizers, ...) when they are not
  importable by `sys.executable` already. Needs torch. Raises `ModelVerificationError` when a worker process cannot
  run at all (transformers does not import); a single architecture's failure is a result, not an exception.
- `ArchitectureResult.status` is `VERIFIED`, `FAILED` (the fixed code changed what the model computes, or could not
  load it) or `UNBUILDABLE` (the original code could not build a tiny model: `reason` says why); `describe()` gives
  the one line to print.
"""

from __future__ import annotations

import ast
import dataclasses
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from rope_lint.rules.analysis.rotary import ClassFacts, rotary_class_names

VERIFIED, FAILED, UNBUILDABLE = "verified", "failed", "unbuildable"
SEQUENCE_LENGTH = 1024
# Each worker gets this long for all its architectures; one that dies or runs out of time is restarted after the
# architecture it was on.
WORKER_TIMEOUT_S = 1800

# The tiny model's sizes, by the config attribute names that transformers' configs use for them. Only attributes
# that the config class has are set; the config derives the rest (layer types, head_dim when not given, ...).
TINY_SIZES = {
    ("num_hidden_layers", "n_layer", "num_layers", "n_layers", "decoder_layers"): 2,
    ("hidden_size", "n_embd", "d_model", "embed_dim"): 128,
    ("num_attention_heads", "n_head", "num_heads", "n_heads", "decoder_attention_heads"): 4,
    ("num_key_value_heads", "num_kv_heads", "n_kv_heads", "multi_query_group_num"): 2,
    ("head_dim", "kv_channels", "attention_head_dim", "d_head"): 32,
    ("vocab_size",): 1000,
    ("num_experts", "num_local_experts", "n_routed_experts", "moe_num_experts"): 4,
    ("num_experts_per_tok", "moe_topk", "num_experts_per_token"): 2,
    ("n_shared_experts", "num_shared_experts"): 1,
    ("n_group", "topk_group"): 1,
}
# Any attribute whose name holds one of these is a feed-forward width.
INTERMEDIATE_WORDS = ("intermediate_size", "ffn_dim", "ffn_hidden_size", "n_inner")
INTERMEDIATE_SIZE = 256
# A larger weight scale than transformers' 0.02 makes attention far from uniform, so that a position error shows in
# the logits instead of averaging out.
INIT_SCALE = 0.2
INIT_SCALE_NAMES = ("initializer_range", "init_std")


@dataclasses.dataclass(frozen=True)
class Architecture:
    name: str  # the causal-LM class, e.g. LlamaForCausalLM
    module: str  # its modeling module, e.g. transformers.models.llama.modeling_llama
    rotary_classes: tuple[str, ...]  # the rotary classes of that module that the fix changed


@dataclasses.dataclass(frozen=True)
class ArchitectureResult:
    architecture: str
    module: str
    config_class: str | None  # None when the class could not be imported
    status: str  # VERIFIED, FAILED or UNBUILDABLE
    reason: str = ""
    fp32_max_abs_diff: float | None = None  # 0.0 when the fp32 logits are identical
    # Argmax agreement with the fp32 logits over the 1,024 positions, original and fixed, by each bf16 route.
    to_bf16_original: float | None = None
    to_bf16_fixed: float | None = None
    load_bf16_original: float | None = None
    load_bf16_fixed: float | None = None

    def describe(self) -> str:
        if self.status == UNBUILDABLE:
            return f"{self.architecture}: not built ({self.reason})"
        parts = [f"{self.architecture}: {self.status}"]
        if self.fp32_max_abs_diff is not None:
            identical = self.fp32_max_abs_diff == 0.0
            parts.append("fp32 logits identical" if identical else f"fp32 logits differ by {self.fp32_max_abs_diff:g}")
        if self.to_bf16_fixed is not None:
            parts.append(f".to(bf16) agreement {self.to_bf16_original:.2%} -> {self.to_bf16_fixed:.2%}")
        if self.load_bf16_fixed is not None:
            parts.append(f"bf16 load agreement {self.load_bf16_original:.2%} -> {self.load_bf16_fixed:.2%}")
        if self.reason:
            parts.append(self.reason)
        return "; ".join(parts)


class ModelVerificationError(Exception):
    """A worker process could not run at all."""


def is_transformers_package(root: Path) -> bool:
    """A folder holding transformers' own layout: an `__init__.py`, `modeling_utils.py` and a `models` package."""
    return (
        root.name == "transformers"
        and (root / "__init__.py").is_file()
        and (root / "modeling_utils.py").is_file()
        and (root / "models" / "__init__.py").is_file()
    )


def _stored_names(cls: ast.ClassDef) -> Iterator[str]:
    """What a class stores on itself: `self.x = ...`, `register_buffer("x", ...)`, `setattr(self, "x", ...)`."""
    for node in ast.walk(cls):
        if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            if isinstance(node.value, ast.Name) and node.value.id == "self":
                yield node.attr
        elif isinstance(node, ast.Call):
            function = node.func
            name_position = 0 if isinstance(function, ast.Attribute) and function.attr == "register_buffer" else None
            if isinstance(function, ast.Name) and function.id == "setattr":
                name_position = 1
            if name_position is not None and len(node.args) > name_position:
                argument = node.args[name_position]
                if isinstance(argument, ast.Constant) and isinstance(argument.value, str):
                    yield argument.value


def _top_level_classes(source: str) -> dict[str, ast.ClassDef]:
    return {node.name: node for node in ast.parse(source).body if isinstance(node, ast.ClassDef)}


def changed_rotary_classes(original: str, fixed: str) -> list[str]:
    """The rotary classes of the fixed text whose code differs from the original's (formatting aside)."""
    before, after = _top_level_classes(original), _top_level_classes(fixed)
    rotary = rotary_class_names(
        ClassFacts(name, tuple(base.id for base in node.bases if isinstance(base, ast.Name)), _stored_names(node))
        for name, node in after.items()
    )
    return sorted(name for name in rotary if name not in before or ast.dump(before[name]) != ast.dump(after[name]))


def _resolved_originals(package_root: Path, originals: Mapping[Path, str]) -> dict[Path, str]:
    root = package_root.resolve()
    resolved = {}
    for path, text in originals.items():
        absolute = (path if path.is_absolute() else root / path).resolve()
        if not absolute.is_relative_to(root):
            raise ValueError(f"{path} is not inside {package_root}")
        resolved[absolute] = text
    return resolved


def causal_lm_architectures(package_root: Path, originals: Mapping[Path, str]) -> list[Architecture]:
    """The `*ForCausalLM` classes of each changed `modeling_*.py` whose rotary class the fix changed, by module."""
    root = package_root.resolve()
    found = []
    for path, original in sorted(_resolved_originals(package_root, originals).items()):
        if not (path.name.startswith("modeling_") and path.suffix == ".py"):
            continue
        fixed = path.read_text(encoding="utf-8")
        rotary = changed_rotary_classes(original, fixed)
        if not rotary:
            continue
        module = ".".join([root.name, *path.relative_to(root).with_suffix("").parts])
        for name in _top_level_classes(fixed):
            if name.endswith("ForCausalLM"):
                found.append(Architecture(name, module, tuple(rotary)))
    return sorted(found, key=lambda architecture: (architecture.module, architecture.name))


def _original_tree(package_root: Path, originals: Mapping[Path, str], destination: Path) -> Path:
    """A copy of the fixed package with each changed file's original text written back; returns its parent."""
    root = package_root.resolve()
    copy = destination / root.name
    shutil.copytree(root, copy, ignore=shutil.ignore_patterns("__pycache__"))
    for path, text in _resolved_originals(package_root, originals).items():
        (copy / path.relative_to(root)).write_text(text, encoding="utf-8")
    return destination


def _worker_environment(tree_parent: Path, pythonpath: Sequence[Path]) -> dict[str, str]:
    environment = dict(os.environ)
    paths = [str(tree_parent), *map(str, pythonpath)]
    if environment.get("PYTHONPATH"):
        paths.append(environment["PYTHONPATH"])
    environment["PYTHONPATH"] = os.pathsep.join(paths)
    # Nothing is downloaded, and transformers' advice on every load is noise here.
    environment.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", TRANSFORMERS_VERBOSITY="error")
    environment.update(TOKENIZERS_PARALLELISM="false", PYTHONWARNINGS="ignore")
    return environment


def _run_worker(
    phase: str, architectures: list[Architecture], tree_parent: Path, pythonpath: Sequence[Path], workdir: Path
) -> dict[str, dict[str, Any]]:
    """Run one phase over the architectures, restarting the worker after any architecture it died on."""
    results: dict[str, dict[str, Any]] = {}
    pending = list(architectures)
    while pending:
        job = workdir / f"{phase}-job.json"
        log = workdir / f"{phase}-results.jsonl"
        log.unlink(missing_ok=True)
        job.write_text(json.dumps({"phase": phase, "workdir": str(workdir), "architectures": _as_rows(pending)}))
        try:
            run = subprocess.run(
                [sys.executable, "-m", "rope_lint.verify.models", str(job), str(log)],
                env=_worker_environment(tree_parent, pythonpath),
                cwd=workdir,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                text=True,
                timeout=WORKER_TIMEOUT_S,
            )
            ending = f"the worker exited with {run.returncode}: {_last_line(run.stderr)}"
        except subprocess.TimeoutExpired:
            ending = f"the worker ran past {WORKER_TIMEOUT_S} s"
        started = None
        for line in log.read_text().splitlines() if log.exists() else []:
            row = json.loads(line)
            if "started" in row:
                started = row["started"]
            else:
                results[row["architecture"]] = row
                started = None
        if started is None and not results.keys() & {a.name for a in pending}:
            raise ModelVerificationError(f"{phase} code: {ending}")
        if started is not None:
            results[started] = {"architecture": started, "error": f"{phase} code: {ending}"}
        pending = [architecture for architecture in pending if architecture.name not in results]
    return results


def _as_rows(architectures: list[Architecture]) -> list[dict[str, str]]:
    return [{"name": a.name, "module": a.module} for a in architectures]


def _last_line(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1] if lines else "no message"


def verify_models(
    package_root: Path, originals: Mapping[Path, str], pythonpath: Sequence[Path] = ()
) -> list[ArchitectureResult]:
    """Save a tiny model of each architecture with the original code, load it with the fixed code, and compare."""
    architectures = causal_lm_architectures(package_root, originals)
    if not architectures:
        return []
    with tempfile.TemporaryDirectory(prefix="rope-lint-models-") as temporary:
        workdir = Path(temporary)
        original_parent = _original_tree(package_root, originals, workdir / "original")
        before = _run_worker("original", architectures, original_parent, pythonpath, workdir)
        buildable = [a for a in architectures if "error" not in before[a.name]]
        after = _run_worker("fixed", buildable, package_root.resolve().parent, pythonpath, workdir) if buildable else {}
    return [_judge(architecture, before[architecture.name], after.get(architecture.name)) for architecture in architectures]


def _judge(architecture: Architecture, before: dict[str, Any], after: dict[str, Any] | None) -> ArchitectureResult:
    config_class = before.get("config_class")
    if after is None:
        return ArchitectureResult(architecture.name, architecture.module, config_class, UNBUILDABLE, before["error"])
    measured = {
        "fp32_max_abs_diff": after.get("fp32_max_abs_diff"),
        "to_bf16_original": before["to_bf16"],
        "to_bf16_fixed": after.get("to_bf16"),
        "load_bf16_original": before["load_bf16"],
        "load_bf16_fixed": after.get("load_bf16"),
    }
    problems = []
    if "error" in after:
        problems.append(after["error"])
    else:
        if measured["fp32_max_abs_diff"] != 0.0:
            problems.append(f"fp32 logits differ from the original's (max abs diff {measured['fp32_max_abs_diff']:g})")
        for route in ("to_bf16", "load_bf16"):
            if after[route] < before[route]:
                problems.append(f"{route} argmax agreement fell from {before[route]:.4f} to {after[route]:.4f}")
        for kind in ("missing", "unexpected"):
            new = sorted(set(after[kind]) - set(before[kind]))
            if new:
                problems.append(f"{kind} weights on load that the original did not have: {', '.join(new[:5])}")
    status = FAILED if problems else VERIFIED
    return ArchitectureResult(
        architecture.name, architecture.module, config_class, status, "; ".join(problems), **measured
    )


# The worker: runs in a subprocess with one transformers package (original or fixed) first on its path.


def tiny_config(config_class: type) -> Any:
    """A config of the class with the tiny sizes, set by attribute name where the class has the attribute."""
    defaults = config_class()
    sizes: dict[str, Any] = {}
    for names, value in TINY_SIZES.items():
        for name in names:
            if isinstance(getattr(defaults, name, None), int):
                sizes[name] = value
    for name, default in vars(defaults).items():
        if isinstance(default, int) and any(word in name for word in INTERMEDIATE_WORDS):
            sizes[name] = INTERMEDIATE_SIZE
        if isinstance(default, float) and name in INIT_SCALE_NAMES:
            sizes[name] = INIT_SCALE
    max_positions = getattr(defaults, "max_position_embeddings", None)
    if isinstance(max_positions, int) and max_positions < SEQUENCE_LENGTH:
        sizes["max_position_embeddings"] = SEQUENCE_LENGTH
    return config_class(**sizes)


def _logits(model: Any, ids: Any) -> Any:
    import inspect

    import torch

    keywords = {"use_cache": False} if "use_cache" in inspect.signature(model.forward).parameters else {}
    with torch.no_grad():
        return model(input_ids=ids, **keywords).logits.float()


def _measure(phase: str, name: str, module_name: str, workdir: Path, dtype_keyword: str) -> dict[str, Any]:
    import importlib

    import torch

    cls = getattr(importlib.import_module(module_name), name)
    row: dict[str, Any] = {"architecture": name, "config_class": cls.config_class.__name__}
    saved = workdir / "models" / name
    if phase == "original":
        try:
            config = tiny_config(cls.config_class)
            torch.manual_seed(0)
            cls(config).save_pretrained(saved)
        except Exception as error:
            return {**row, "error": f"tiny model not built: {_describe(error)}"}
    generator = torch.Generator().manual_seed(1)
    model, info = cls.from_pretrained(saved, output_loading_info=True)
    ids = torch.randint(0, model.config.vocab_size, (1, SEQUENCE_LENGTH), generator=generator)
    fp32 = _logits(model.eval(), ids)
    row["missing"], row["unexpected"] = sorted(info["missing_keys"]), sorted(info["unexpected_keys"])
    reference_file = workdir / "models" / f"{name}.logits.pt"
    if phase == "original":
        torch.save(fp32, reference_file)
        reference = fp32
    else:
        reference = torch.load(reference_file)
        row["fp32_max_abs_diff"] = 0.0 if torch.equal(fp32, reference) else (fp32 - reference).abs().max().item()
    expected = reference.argmax(-1)
    row["to_bf16"] = (_logits(model.to(torch.bfloat16), ids).argmax(-1) == expected).float().mean().item()
    loaded = cls.from_pretrained(saved, **{dtype_keyword: torch.bfloat16})
    row["load_bf16"] = (_logits(loaded.eval(), ids).argmax(-1) == expected).float().mean().item()
    return row


def _describe(error: BaseException) -> str:
    from rope_lint.probe.build import describe

    return describe(error)


def _work(job_file: Path, log_file: Path) -> None:
    from rope_lint.probe.discover import quiet_model_code

    job = json.loads(job_file.read_text())
    with quiet_model_code():
        import torch
        import transformers

    # `dtype=` from transformers 5.0 on, `torch_dtype=` before.
    dtype_keyword = "dtype" if int(transformers.__version__.split(".")[0]) >= 5 else "torch_dtype"
    with log_file.open("a") as log:
        for row in job["architectures"]:
            log.write(json.dumps({"started": row["name"]}) + "\n")
            log.flush()
            try:
                with quiet_model_code():
                    result = _measure(job["phase"], row["name"], row["module"], Path(job["workdir"]), dtype_keyword)
            except Exception as error:
                result = {"architecture": row["name"], "error": f"{job['phase']} code: {_describe(error)}"}
            log.write(json.dumps(result) + "\n")
            log.flush()


if __name__ == "__main__":
    _work(Path(sys.argv[1]), Path(sys.argv[2]))
