"""Model-level verification of a fixed transformers tree: a tiny random model of each causal-LM architecture whose
rotary class the fix rewrote is saved by the original code and loaded by the fixed code.

For each such architecture (the `*ForCausalLM` classes of a changed `modeling_*.py` whose rotary class changed):
- a tiny random model is built from its config class (2 layers, hidden 128, 4 heads of 32, 2 key-value heads,
  vocabulary 1000; the rope settings are the config's defaults) and saved with `save_pretrained` by the original code;
- both the original and the fixed code load it with `from_pretrained` and compute the logits of one sequence of 1,024
  tokens: in fp32 they must be identical (`torch.equal`);
- in bf16, by both routes a user takes (`.to(torch.bfloat16)` after an fp32 load, and
  `from_pretrained(..., dtype=torch.bfloat16)`, spelled `torch_dtype=` before transformers 5.0), the fixed code's
  argmax agreement with the fp32 logits must be no lower than the original code's (no margin: a position the fixed
  code loses is a failure); a route that raises in the fixed code only fails, one that raises in
  both is noted;
- the fixed load must report no missing or unexpected weights that the original load did not.

Sizes are set by the config's attribute names (`TINY_SIZES`, and any `*intermediate_size*`, `*head_dim`, `*heads*`,
`*vocab_size*`, state sizes, out-of-vocabulary special token ids), never per model. When the tiny model cannot be
built or run, the fallbacks are tried in turn: the config classes of the config's sub-configs (a decoder of a
composite model), as many key-value heads as heads, full-attention layer types where the default leaves them unset,
the default rope parameters under each layer type's name, then relations that some shapes of config need (`FALLBACKS`:
no more experts per token than the default, derived head sizes left to the config, per-layer lists of the tiny
length, layer subsets below the layer count, an attention layer among state-space layers, the default rope base),
sizes by other names (other hidden sizes, vocabularies, layer counts and expert counts, and the sub-configs of a
composite config), then what a real checkpoint gives that the defaults leave unset (the rope base in sub-configs, clip
bounds). Where the model's own code reads an attribute on itself that it never sets, so that no model of it runs, the
attribute is given the default of the parameter it is passed to, in both codes (`StandIn`), and the report says so. A
model still over `MAX_PARAMETERS` is not built. A model that runs fewer positions than the measured 1,024
has the count that bounds them raised (`_counts_raised_to_the_measured_length`: a depth decoder's codebooks). A tiny
model proves something about the tables only where its logits read them: a hybrid config's layers are arranged so that
they do (`_arranged_to_read_the_tables`), and a tiny model that still reads none is verified with a note that says so.

The original and the fixed code are two different `transformers` packages, so each runs in a subprocess of its own
(`sys.executable -m rope_lint.verify.models`); they exchange the saved models and the fp32 logits through a temporary
folder. The original tree is a copy of the fixed one with the changed files' original texts written back. The
agreements are compared with no margin, so the workers pin their kernels (`REPRODUCIBLE_KERNELS`): the figures do not
move with a CPU's bf16 instructions or with the code path MKL picks for its maker.

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
import concurrent.futures
import dataclasses
import functools
import itertools
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import textwrap
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from rope_lint.engine import map_files
from rope_lint.rules.analysis.context import is_self_attribute
from rope_lint.rules.analysis.rotary import ClassFacts, rotary_class_names

VERIFIED, FAILED, UNBUILDABLE = "verified", "failed", "unbuildable"
SEQUENCE_LENGTH = 1024
# The length of the sequence a tiny model is tried on, and its rotary tables' influence measured on.
SHORT_LENGTH = 16
ORIGINAL_POLL_S = 0.05
# Each worker gets this long for all its architectures; one that dies or runs out of time is restarted after the
# architecture it was on.
WORKER_TIMEOUT_S = 1800

# The tiny model's sizes, by the config attribute names that transformers' configs use for them. Only attributes
# that the config class has are set; the config derives the rest (layer types, head_dim when not given, ...).
TINY_HEAD_DIM, TINY_VOCAB, TINY_LORA_RANK = 32, 1000, 64
KEY_VALUE_HEADS = ("num_key_value_heads", "num_kv_heads", "n_kv_heads", "multi_query_group_num")
LAYERS = ("num_hidden_layers", "n_layer", "num_layers", "n_layers", "decoder_layers")
EXPERTS = ("num_experts", "num_local_experts", "n_routed_experts", "moe_num_experts")
EXPERTS_PER_TOKEN = ("num_experts_per_tok", "moe_topk", "num_experts_per_token", "moe_k")
TINY_SIZES_BY_ROLE = {"layers": 2, "hidden": 128, "heads": 4, "key_value_heads": 2, "experts": 4}
TINY_SIZES = {
    LAYERS: TINY_SIZES_BY_ROLE["layers"],
    ("hidden_size", "n_embd", "d_model", "embed_dim"): TINY_SIZES_BY_ROLE["hidden"],
    ("num_attention_heads", "n_head", "num_heads", "n_heads", "decoder_attention_heads"): TINY_SIZES_BY_ROLE["heads"],
    KEY_VALUE_HEADS: TINY_SIZES_BY_ROLE["key_value_heads"],
    ("head_dim", "kv_channels", "attention_head_dim", "d_head"): TINY_HEAD_DIM,
    ("vocab_size",): TINY_VOCAB,
    EXPERTS: TINY_SIZES_BY_ROLE["experts"],
    EXPERTS_PER_TOKEN: 2,
    ("n_shared_experts", "num_shared_experts"): 1,
    ("n_group", "topk_group"): 1,
}
# A model over this many parameters at the tiny sizes has a size we do not know the name of; it is not built.
MAX_PARAMETERS = 10_000_000
# Any attribute whose name holds one of these is a feed-forward width.
INTERMEDIATE_WORDS = ("intermediate_size", "ffn_dim", "ffn_hidden_size", "n_inner")
INTERMEDIATE_SIZE = 256
STATE_SIZE_ENDINGS, TINY_STATE_SIZE = ("d_state", "state_size", "state_dim"), 16
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
    seconds: float = 0.0  # the time both codes took on it

    def describe(self) -> str:
        if self.status == UNBUILDABLE:
            return f"{self.architecture}: not built ({self.reason})"
        parts = [f"{self.architecture}: {self.status}"]
        if self.fp32_max_abs_diff is not None:
            identical = self.fp32_max_abs_diff == 0.0
            parts.append("fp32 logits identical" if identical else f"fp32 logits differ by {self.fp32_max_abs_diff:g}")
        if self.status == VERIFIED or self.fp32_max_abs_diff is not None:
            for words, original, fixed in (
                (".to(bf16)", self.to_bf16_original, self.to_bf16_fixed),
                ("bf16 load", self.load_bf16_original, self.load_bf16_fixed),
            ):
                parts.append(f"{words} argmax agreement {_percent(original)} -> {_percent(fixed)}")
        if self.reason:
            parts.append(self.reason)
        return "; ".join(parts)


def _percent(agreement: float | None) -> str:
    return "raises" if agreement is None else f"{agreement:.2%}"


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
            if is_self_attribute(node):
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


# The last few texts' classes, read and not changed: a changed file's fixed text is asked for its rotary classes, its
# changed ones and its causal-LM classes in turn (four parses a file: 17.8 s of the 5.24.0 package's verification).
@functools.lru_cache(maxsize=4)
def _top_level_classes(source: str) -> dict[str, ast.ClassDef]:
    return {node.name: node for node in ast.parse(source).body if isinstance(node, ast.ClassDef)}


def rotary_classes_of(source: str) -> list[str]:
    """The rotary classes that a module's text defines at its top level."""
    return sorted(
        rotary_class_names(
            ClassFacts(name, tuple(base.id for base in node.bases if isinstance(base, ast.Name)), _stored_names(node))
            for name, node in _top_level_classes(source).items()
        )
    )


def changed_rotary_classes(original: str, fixed: str) -> list[str]:
    """The rotary classes of the fixed text whose code differs from the original's (formatting aside)."""
    rotary = rotary_classes_of(fixed)
    if not rotary:  # most changed files: their original is not parsed
        return []
    before, after = _top_level_classes(original), _top_level_classes(fixed)
    return [name for name in rotary if name not in before or ast.dump(before[name]) != ast.dump(after[name])]


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
    modeling = [
        (path, original)
        for path, original in _resolved_originals(package_root, originals).items()
        if path.name.startswith("modeling_") and path.suffix == ".py"
    ]
    # Over all cores: parsing the changed files is the whole of it (12.4 s of the 5.24.0 package's verification in one
    # process, 6.3 s over two cores).
    found = map_files(functools.partial(_architectures_of, root=package_root.resolve()), modeling)
    return sorted(itertools.chain(*found), key=lambda architecture: (architecture.module, architecture.name))


def _architectures_of(change: tuple[Path, str], root: Path) -> list[Architecture]:
    """The causal-LM architectures of one changed modeling file (its path and original text) of the package `root`."""
    path, original = change
    fixed = path.read_text(encoding="utf-8")
    rotary = tuple(changed_rotary_classes(original, fixed))
    if not rotary:
        return []
    module = ".".join([root.name, *path.relative_to(root).with_suffix("").parts])
    return [Architecture(name, module, rotary) for name in _top_level_classes(fixed) if name.endswith("ForCausalLM")]


def _original_tree(package_root: Path, originals: Mapping[Path, str], destination: Path) -> Path:
    """A copy of the fixed package with each changed file's original text written back; returns its parent."""
    root = package_root.resolve()
    copy = destination / root.name
    shutil.copytree(root, copy, ignore=shutil.ignore_patterns("__pycache__"))
    for path, text in _resolved_originals(package_root, originals).items():
        (copy / path.relative_to(root)).write_text(text, encoding="utf-8")
    return destination


# The bf16 agreements are compared with no margin, so they must not depend on the machine: which kernels a CPU gets
# moves a few argmaxes of 1,024 (transformers 5.24.0's NanoChat lost one on one machine and HrmText one on another).
# oneDNN's bf16 kernels, which torch takes only on CPUs with bf16 instructions, are switched off in the worker
# (`use_reproducible_kernels`); torch's own kernels are pinned to their AVX2 build, which every x86-64 machine of the
# last decade runs; MKL (the float32 matrix products) to the one code path whose results it keeps the same on every
# x86-64 CPU, Intel's or not (its AVX2 setting is not: an AMD CPU takes another path there); and one thread, so that
# no reduction is split by the number of cores.
REPRODUCIBLE_KERNELS = {
    "ATEN_CPU_CAPABILITY": "avx2",
    "MKL_CBWR": "COMPATIBLE",
    "OMP_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
}


def _worker_environment(tree_parent: Path, pythonpath: Sequence[Path]) -> dict[str, str]:
    environment = dict(os.environ)
    paths = [str(tree_parent), *map(str, pythonpath)]
    if environment.get("PYTHONPATH"):
        paths.append(environment["PYTHONPATH"])
    environment["PYTHONPATH"] = os.pathsep.join(paths)
    # Nothing is downloaded, and transformers' advice on every load is noise here.
    environment.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", TRANSFORMERS_VERBOSITY="error")
    environment.update(TOKENIZERS_PARALLELISM="false", PYTHONWARNINGS="ignore")
    environment.update(REPRODUCIBLE_KERNELS)
    return environment


def _run_worker(
    phase: str, rows: list[dict[str, str]], tree_parent: Path, pythonpath: Sequence[Path], workdir: Path
) -> dict[str, dict[str, Any]]:
    """Run one phase over the architectures (rows of name, module, ...), by name; a worker that dies is restarted
    after the architecture it died on."""
    results: dict[str, dict[str, Any]] = {}
    pending = list(rows)
    job, log = workdir / f"{phase}-job.json", workdir / f"{phase}-results.jsonl"
    while pending:
        log.unlink(missing_ok=True)
        job.write_text(json.dumps({"phase": phase, "workdir": str(workdir), "architectures": pending}))
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
            started = row.get("started")
            if started is None:
                results[row["architecture"]] = row
        if started is None and not any(row["name"] in results for row in pending):
            raise ModelVerificationError(f"the {phase} code's worker: {ending}")
        if started is not None:
            results[started] = {"architecture": started, "error": f"{phase} code: {ending}", "seconds": 0.0}
            if phase == "original":
                _publish(workdir, results[started])
        pending = [row for row in pending if row["name"] not in results]
    return results


def _outcome_file(workdir: Path, name: str) -> Path:
    """Where the original code's outcome for an architecture lies once it is known; the fixed worker waits for it."""
    return workdir / "models" / f"{name}.original.json"


def _publish(workdir: Path, row: dict[str, Any]) -> None:
    """Make an original outcome visible at once and whole (written aside, then renamed)."""
    target = _outcome_file(workdir, row["architecture"])
    partial = target.with_suffix(".partial")
    partial.write_text(json.dumps(row))
    partial.replace(target)


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
        (workdir / "models").mkdir()
        original_parent = _original_tree(package_root, originals, workdir / "original")
        rows = [{"name": a.name, "module": a.module, "rotary_classes": list(a.rotary_classes)} for a in architectures]
        # The fixed code runs each architecture as soon as the original code has saved it: the two phases overlap.
        with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
            fixed = pool.submit(_run_worker, "fixed", rows, package_root.resolve().parent, pythonpath, workdir)
            try:
                before = _run_worker("original", rows, original_parent, pythonpath, workdir)
            finally:
                # Whatever happened, the fixed worker is not left waiting for an outcome that will not come.
                for row in rows:
                    if not _outcome_file(workdir, row["name"]).exists():
                        _publish(workdir, {"architecture": row["name"], "error": "the original code did not run"})
            after = fixed.result()
    return [_judge(a, before[a.name], after.get(a.name)) for a in architectures]


BF16_ROUTES = {"to_bf16": ".to(torch.bfloat16)", "load_bf16": "from_pretrained in bf16"}


def _judge(architecture: Architecture, before: dict[str, Any], after: dict[str, Any] | None) -> ArchitectureResult:
    config_class = before.get("config_class")
    seconds = before["seconds"] + (after["seconds"] if after else 0.0)
    if after is None or "error" in before:
        return ArchitectureResult(
            architecture.name, architecture.module, config_class, UNBUILDABLE, before["error"], seconds=seconds
        )
    measured = {
        "fp32_max_abs_diff": after.get("fp32_max_abs_diff"),
        "to_bf16_original": before.get("to_bf16"),
        "to_bf16_fixed": after.get("to_bf16"),
        "load_bf16_original": before.get("load_bf16"),
        "load_bf16_fixed": after.get("load_bf16"),
    }
    problems, notes = [], [f"built with {', '.join(before['fallbacks'])}"] if before.get("fallbacks") else []
    if "table_influence" in before and not before["table_influence"]:
        why = "its logits do not move with them" if before["table_influence"] == 0.0 else "no rotary module runs"
        notes.append(f"its tiny model does not read the rotary tables ({why})")
    if "error" in after:
        problems.append(after["error"])
    else:
        if measured["fp32_max_abs_diff"] != 0.0:
            problems.append(f"fp32 logits differ from the original's (max abs diff {measured['fp32_max_abs_diff']:g})")
        for route, words in BF16_ROUTES.items():
            original, fixed = before.get(route), after.get(route)
            if fixed is None and original is not None:
                problems.append(f"{words} raises in the fixed code only: {after[route + '_error']}")
            elif fixed is None:
                notes.append(f"{words} raises in both codes: {after[route + '_error']}")
            elif original is not None and fixed < original:
                problems.append(f"{words}: argmax agreement fell from {original:.2%} to {fixed:.2%}")
        for kind in ("missing", "unexpected"):
            new = sorted(set(after[kind]) - set(before[kind]))
            if new:
                problems.append(f"{kind} weights on load that the original did not have: {', '.join(new[:5])}")
    status = FAILED if problems else VERIFIED
    reason = "; ".join(problems or notes)
    return ArchitectureResult(
        architecture.name, architecture.module, config_class, status, reason, **measured, seconds=seconds
    )


# The worker: runs in a subprocess with one transformers package (original or fixed) first on its path.


def _is_size(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def tiny_sizes(defaults: Mapping[str, Any]) -> dict[str, Any]:
    """The keyword arguments that make a config of these default attributes tiny, set by attribute name where the
    config has the attribute."""
    sizes: dict[str, Any] = {}
    for names, value in TINY_SIZES.items():
        for name in names:
            # None: a size the config or the model derives from the others, which it then gets from us.
            if name in defaults and (defaults[name] is None or _is_size(defaults[name])):
                sizes[name] = value
    for name, default in defaults.items():
        if _is_size(default) and any(word in name for word in INTERMEDIATE_WORDS):
            sizes[name] = INTERMEDIATE_SIZE
        elif _is_size(default) and name.endswith("head_dim"):  # qk_rope_head_dim, v_head_dim, ...
            sizes[name] = TINY_HEAD_DIM
        elif _is_size(default) and name.endswith("lora_rank"):  # low-rank query and key projections
            sizes[name] = TINY_LORA_RANK
        elif _is_size(default) and "heads" in name and default > TINY_SIZES_BY_ROLE["heads"]:  # mamba_n_heads, ...
            sizes[name] = TINY_SIZES_BY_ROLE["heads"]
        elif _is_size(default) and name.endswith(STATE_SIZE_ENDINGS):  # a state-space layer's state
            sizes[name] = TINY_STATE_SIZE
        elif _is_size(default) and "vocab_size" in name:  # per-layer input vocabularies and the like
            sizes[name] = TINY_VOCAB
        elif isinstance(default, float) and name in INIT_SCALE_NAMES:
            sizes[name] = INIT_SCALE
    sizes.update(_special_tokens_inside(defaults, TINY_VOCAB))
    max_positions = defaults.get("max_position_embeddings")
    if _is_size(max_positions) and max_positions < SEQUENCE_LENGTH:
        sizes["max_position_embeddings"] = SEQUENCE_LENGTH
    return sizes


def _special_tokens_inside(attributes: Mapping[str, Any], vocabulary: int) -> dict[str, int]:
    """The special token ids (`*token_id`) of these attributes that lie outside a vocabulary of this size, moved to its
    last token: a padding index outside the vocabulary is refused."""
    return {
        name: vocabulary - 1
        for name, value in attributes.items()
        if name.endswith("token_id") and _is_size(value) and value >= vocabulary
    }


def _as_many_key_value_heads(config_class: type, sizes: dict[str, Any]) -> dict[str, Any] | None:
    """Multi-head attention: some configs and latent-attention models take no fewer key-value heads."""
    names = [name for name in KEY_VALUE_HEADS if name in sizes]
    return {**sizes, **dict.fromkeys(names, TINY_SIZES_BY_ROLE["heads"])} if names else None


def _full_attention_layers(config_class: type, sizes: dict[str, Any]) -> dict[str, Any] | None:
    """Layer types given, as the real checkpoints give them, where the config's default leaves them unset."""
    if "layer_types" in sizes or getattr(config_class(**sizes), "layer_types", ()) is not None:
        return None
    return {**sizes, "layer_types": ["full_attention"] * TINY_SIZES_BY_ROLE["layers"]}


def _rope_parameters_per_layer_type(config_class: type, sizes: dict[str, Any]) -> dict[str, Any] | None:
    """The default rope parameters under each layer type's name, for models that read them by layer type."""
    config = config_class(**sizes)
    parameters, layer_types = getattr(config, "rope_parameters", None), getattr(config, "layer_types", None)
    if not isinstance(parameters, dict) or not layer_types or set(layer_types) & parameters.keys():
        return None
    return {**sizes, "rope_parameters": {layer_type: dict(parameters) for layer_type in set(layer_types)}}


def _defaults(config_class: type) -> dict[str, Any]:
    """A default config's own attributes (the instance's: a property or a per-layer attribute may refuse to be read or
    set)."""
    return vars(config_class())


def _no_more_experts_per_token_than_the_default(config_class: type, sizes: dict[str, Any]) -> dict[str, Any] | None:
    """Experts per token no more than the default: some configs accept no other top-k than theirs (one, say)."""
    defaults = _defaults(config_class)
    lowered = {
        name: defaults[name]
        for name in EXPERTS_PER_TOKEN
        if name in sizes and _is_size(defaults.get(name)) and 0 < defaults[name] < sizes[name]
    }
    return {**sizes, **lowered} if lowered else None


def _derived_head_sizes(config_class: type, sizes: dict[str, Any]) -> dict[str, Any] | None:
    """Head sizes that the config derives itself (one its `__init__` does not take, or takes with a None default)
    left to it: a query-key head made of a no-position part and a rotary part, set on its own, disagrees with them."""
    import inspect

    parameters = inspect.signature(config_class).parameters
    derived = {
        name
        for name in sizes
        if name.endswith("head_dim") and (name not in parameters or parameters[name].default is None)
    }
    return {name: value for name, value in sizes.items() if name not in derived} if derived else None


def _per_layer_lists(config_class: type, sizes: dict[str, Any]) -> dict[str, Any] | None:
    """Lists of one entry per layer at the default layer count, given for the tiny layer count: per-layer sizes (a
    feed-forward width for each layer) shrunk by their name, and layer kinds that the config does not derive from the
    layer count (a fixed pattern of 54) cut to the tiny count, keeping as many distinct kinds as fit."""
    defaults, layers = _defaults(config_class), TINY_SIZES_BY_ROLE["layers"]
    counts = [defaults[name] for name in LAYERS if _is_size(defaults.get(name))]
    try:
        tiny = vars(config_class(**sizes))
    except Exception:  # a config that refuses the tiny sizes as they are: every list of kinds is given
        tiny = {}
    adjusted: dict[str, Any] = {}
    for name, default in defaults.items():
        if name in sizes or not counts or not isinstance(default, list) or len(default) != counts[0]:
            continue
        if all(_is_size(value) for value in default):
            per_layer = tiny_sizes({name: default[0]}).get(name)
            if per_layer is not None:
                adjusted[name] = [per_layer] * layers
        elif all(isinstance(value, str) for value in default) and len(tiny.get(name) or ()) != layers:
            kinds = list(dict.fromkeys(default))[:layers]
            adjusted[name] = kinds + kinds[-1:] * (layers - len(kinds))
    return {**sizes, **adjusted} if adjusted else None


# Layer kinds whose layers keep keys and values: a hybrid model's cache needs one to count the tokens it has seen.
KEY_VALUE_LAYER_TYPES = ("full_attention", "sliding_attention", "chunked_attention")


def _an_attention_layer(config_class: type, sizes: dict[str, Any]) -> dict[str, Any] | None:
    """The last layer full attention where the default layer types have no attention layer (a hybrid model whose
    default is all state-space layers; its real checkpoints mix in attention layers)."""
    layer_types = getattr(config_class(**sizes), "layer_types", None)
    if not isinstance(layer_types, list) or not layer_types or set(layer_types) & set(KEY_VALUE_LAYER_TYPES):
        return None
    return {**sizes, "layer_types": [*layer_types[:-1], KEY_VALUE_LAYER_TYPES[0]]}


def _default_rope_base(config_class: type, sizes: dict[str, Any]) -> dict[str, Any] | None:
    """The config's default rope base (`default_theta`) in rope parameters that give none, as a whole or for a layer
    type: a config that reads them as they are given then has no base."""
    config = config_class(**sizes)
    parameters, base = getattr(config, "rope_parameters", None), getattr(config, "default_theta", None)
    if not isinstance(parameters, dict) or not isinstance(base, (int, float)):
        return None
    nested = parameters and all(isinstance(value, dict) for value in parameters.values())
    groups = {key: dict(value) for key, value in parameters.items()} if nested else {None: dict(parameters)}
    missing = [key for key, group in groups.items() if group.get("rope_theta") is None]
    if not missing:
        return None
    for key in missing:
        groups[key] = {"rope_type": "default", **groups[key], "rope_theta": float(base)}
    return {**sizes, "rope_parameters": groups if nested else groups[None]}


def _capped(
    config_class: type, sizes: dict[str, Any], is_named: Callable[[str], bool], cap: int
) -> dict[str, Any] | None:
    """The sizes with each default size over `cap` of a name that `is_named` accepts, and that is not set yet, set to
    `cap`; None when there is none."""
    adjusted = {
        name: cap
        for name, default in _defaults(config_class).items()
        if name not in sizes and is_named(name) and _is_size(default) and default > cap
    }
    return {**sizes, **adjusted} if adjusted else None


def _layer_subsets_below_the_layer_count(config_class: type, sizes: dict[str, Any]) -> dict[str, Any] | None:
    """A count of some of the layers (`num_*_layers`: the layers that share another's cache, say) kept below the tiny
    layer count, so that the layers outside the subset are not none."""

    def is_named(name: str) -> bool:
        return name.endswith("_layers") and name not in LAYERS

    return _capped(config_class, sizes, is_named, TINY_SIZES_BY_ROLE["layers"] - 1)


def _other_hidden_sizes(config_class: type, sizes: dict[str, Any]) -> dict[str, Any] | None:
    """Other hidden widths than the model's own (`backbone_hidden_size`, `router_hidden_size`, ...) no larger than the
    tiny hidden size: a model that embeds another's states or projects to them is sized by them."""
    return _capped(config_class, sizes, lambda name: "hidden_size" in name, TINY_SIZES_BY_ROLE["hidden"])


def _fewer_experts_of_other_kinds(config_class: type, sizes: dict[str, Any]) -> dict[str, Any] | None:
    """Counts of experts by other names (`zero_expert_num`, identity experts added to the routed ones) no larger than
    the tiny count of experts."""

    def is_named(name: str) -> bool:
        return "expert" in name and ("num" in name or name.startswith("n_"))

    return _capped(config_class, sizes, is_named, TINY_SIZES_BY_ROLE["experts"])


def _other_vocabularies(config_class: type, sizes: dict[str, Any]) -> dict[str, Any] | None:
    """Other vocabularies than `*vocab_size*` (`encoder_hash_byte_group_vocab`: hashed n-gram embeddings) no larger
    than the tiny vocabulary."""
    return _capped(config_class, sizes, lambda name: "vocab" in name, TINY_VOCAB)


def _other_layer_counts(config_class: type, sizes: dict[str, Any]) -> dict[str, Any] | None:
    """Layer counts named as blocks (`num_blocks`: an audio encoder's conformer blocks) no larger than the tiny layer
    count."""

    def is_named(name: str) -> bool:
        return name.startswith(("num_", "n_")) and name.endswith("blocks")

    return _capped(config_class, sizes, is_named, TINY_SIZES_BY_ROLE["layers"])


# The fallbacks that only shrink sizes by name, applied to a composite config's sub-configs too.
SUB_CONFIG_SIZES = (_other_hidden_sizes, _other_vocabularies, _other_layer_counts)


def _sub_configs(config_class: type) -> dict[str, Any]:
    """A composite config's default sub-configs, by the attribute that holds each."""
    from transformers import PretrainedConfig

    return {name: value for name, value in _defaults(config_class).items() if isinstance(value, PretrainedConfig)}


def _tiny_sub_configs(config_class: type, sizes: dict[str, Any]) -> dict[str, Any] | None:
    """A composite config's sub-configs (a vision or audio encoder, a byte-level patcher) at tiny sizes by the same
    names: a causal LM that builds them too is otherwise as large as they are."""
    adjusted = {}
    for name, value in _sub_configs(config_class).items():
        if name not in sizes:
            sub_sizes = tiny_sizes(vars(value))
            for shrink in SUB_CONFIG_SIZES:
                sub_sizes = shrink(type(value), sub_sizes) or sub_sizes
            adjusted[name] = sub_sizes
    return {**sizes, **adjusted} if adjusted else None


def _with_sub_config_keywords(sizes: dict[str, Any], keywords: Mapping[str, dict[str, Any]]) -> dict[str, Any]:
    """The sizes with these keywords added to the named sub-configs' own (a dict each, as `_tiny_sub_configs` gives)."""
    merged = {name: {**(sizes.get(name) or {}), **added} for name, added in keywords.items()}
    return {**sizes, **merged}


def _rope_base_in_sub_configs(config_class: type, sizes: dict[str, Any]) -> dict[str, Any] | None:
    """The composite config's rope base given to each sub-config that has none (`rope_theta`), as a real checkpoint's
    attention sub-config gives it: a model whose attention reads the base from its sub-config has none otherwise."""
    config = config_class(**sizes)
    parameters = getattr(config, "rope_parameters", None)
    base = parameters.get("rope_theta") if isinstance(parameters, dict) else None
    base = base if isinstance(base, (int, float)) else getattr(config, "default_theta", None)
    if not isinstance(base, (int, float)):
        return None
    lacking = {
        name: {"rope_theta": float(base)}
        for name, value in _sub_configs(config_class).items()
        if getattr(value, "rope_theta", None) is None
    }
    return _with_sub_config_keywords(sizes, lacking) if lacking else None


# A clip bound so large that nothing the tiny model computes reaches it: clipping to it changes nothing.
NEVER_REACHED_BOUND = 1e4


def _clip_bounds_that_never_clip(config_class: type, sizes: dict[str, Any]) -> dict[str, Any] | None:
    """Clip bounds left unset (`clip_qkv=None`, in the config or a sub-config) set to `NEVER_REACHED_BOUND`, as a real
    checkpoint sets them: code that clamps to the bound unconditionally refuses None for both of a clamp's ends, and a
    bound never reached keeps what no bound means."""

    def unset_bounds(attributes: Mapping[str, Any], given: Mapping[str, Any]) -> dict[str, float]:
        return {
            name: NEVER_REACHED_BOUND
            for name, value in attributes.items()
            if "clip" in name and value is None and name not in given
        }

    adjusted = {**sizes, **unset_bounds(_defaults(config_class), sizes)}
    for name, value in _sub_configs(config_class).items():
        bounds = unset_bounds(vars(value), sizes.get(name) or {})
        if bounds:
            adjusted = _with_sub_config_keywords(adjusted, {name: bounds})
    return adjusted if adjusted != sizes else None


# Tried in turn, each on top of the ones before, when the tiny model cannot be built or run. A new one goes at the
# end: the architectures built before it keep their tiny models.
FALLBACKS = (
    ("as many key-value heads as heads", _as_many_key_value_heads),
    ("full-attention layer types", _full_attention_layers),
    ("rope parameters per layer type", _rope_parameters_per_layer_type),
    ("no more experts per token than the default", _no_more_experts_per_token_than_the_default),
    ("derived head sizes", _derived_head_sizes),
    ("per-layer lists of the tiny length", _per_layer_lists),
    ("layer subsets below the layer count", _layer_subsets_below_the_layer_count),
    ("an attention layer", _an_attention_layer),
    ("the default rope base", _default_rope_base),
    ("other hidden sizes", _other_hidden_sizes),
    ("fewer experts of other kinds", _fewer_experts_of_other_kinds),
    ("other vocabularies", _other_vocabularies),
    ("other layer counts", _other_layer_counts),
    ("tiny sub-configs", _tiny_sub_configs),
    ("the rope base in sub-configs", _rope_base_in_sub_configs),
    ("clip bounds that never clip", _clip_bounds_that_never_clip),
)


def _longest_run(model: Any) -> int:
    """The longest sequence, from `SHORT_LENGTH` to `SEQUENCE_LENGTH` tokens, that the model runs: the measured length
    itself, tried first, or the longest shorter one by bisection."""
    import torch

    def runs(length: int) -> bool:
        try:
            _logits(model, torch.zeros(1, length, dtype=torch.long))
        except Exception:
            return False
        return True

    if runs(SEQUENCE_LENGTH):
        return SEQUENCE_LENGTH
    shortest, longest = SHORT_LENGTH, SEQUENCE_LENGTH - 1
    while shortest < longest:
        length = (shortest + longest + 1) // 2
        shortest, longest = (length, longest) if runs(length) else (shortest, length - 1)
    return shortest


def _counts_raised_to_the_measured_length(
    cls: type, config_class: type, sizes: dict[str, Any], model: Any
) -> dict[str, Any]:
    """The sizes of a tiny model that runs the measured length: these, where it runs `SEQUENCE_LENGTH` tokens already.
    Otherwise a count that bounds how many positions it runs is raised to that length: a default size, not set yet,
    equal to the longest sequence it runs (a depth decoder whose position i reads codebook i - 1 runs as many positions
    as it has codebooks). Where that puts the model over `MAX_PARAMETERS` (a table per codebook of the vocabulary's
    size), its vocabularies are halved until it fits, special tokens kept inside them. Raises `NotBuilt` where no count
    bounds the positions."""
    longest = _longest_run(model)
    if longest >= SEQUENCE_LENGTH:
        return sizes
    bounds = [
        name
        for name, default in _defaults(config_class).items()
        if name not in sizes and _is_size(default) and default == longest
    ]
    if not bounds:
        raise NotBuilt(f"runs {longest} positions, not {SEQUENCE_LENGTH}")
    raised = {**sizes, **dict.fromkeys(bounds, SEQUENCE_LENGTH)}
    vocabularies = [name for name in raised if "vocab_size" in name and _is_size(raised[name])]
    while vocabularies and min(raised[name] for name in vocabularies) > SHORT_LENGTH:
        if (_parameter_count(cls, config_class(**raised)) or 0) <= MAX_PARAMETERS:
            break
        raised.update({name: raised[name] // 2 for name in vocabularies})
        smallest = min(raised[name] for name in vocabularies)
        raised.update(_special_tokens_inside({**_defaults(config_class), **raised}, smallest))
    return raised


def _parameter_count(cls: type, config: Any) -> int | None:
    """The model's size, built on the meta device (no memory); None when it cannot be built there."""
    import torch

    try:
        with torch.device("meta"):
            return sum(parameter.numel() for parameter in cls(config).parameters())
    except Exception:
        return None


def _config_classes(cls: type) -> list[type]:
    """The model's config class, then the config classes of its sub-configs: a decoder-only class of a composite model
    (a text decoder of a speech model, say) is built from one of them."""
    found = [cls.config_class]
    for value in _sub_configs(cls.config_class).values():
        if type(value) not in found:
            found.append(type(value))
    return found


@dataclasses.dataclass(frozen=True)
class StandIn:
    """A value given to an attribute that a class's code reads on itself and never sets (a release's own bug: no model
    of it runs, for anyone), taken from the default of the parameter that the attribute is passed to. It is set on the
    class, in the original and the fixed code alike, so that what the two compare is still only the fix."""

    module: str
    owner: str  # the class that reads the attribute
    attribute: str
    value: Any
    source: str  # where the value comes from: "<callable>'s <parameter>"

    def give(self) -> None:
        setattr(_import(f"{self.module}.{self.owner}"), self.attribute, self.value)

    def describe(self) -> str:
        return f"{self.owner}.{self.attribute}, read and never set, given {self.value!r} ({self.source}'s default)"


UNSET_ATTRIBUTE = re.compile(r"'(\w+)' object has no attribute '(\w+)'")


def stand_in_for(cls: type, message: str) -> StandIn | None:
    """The stand-in for the attribute that a build's error says is missing, where a class of the model's module reads it
    on itself, never stores it, and passes it only as keywords whose parameters default to one plain value."""
    import inspect

    match = UNSET_ATTRIBUTE.search(message)
    module = sys.modules[cls.__module__]
    owner = getattr(module, match[1], None) if match else None
    if not isinstance(owner, type):
        return None
    attribute = match[2]
    try:
        (tree,) = ast.parse(textwrap.dedent(inspect.getsource(owner))).body
    except (OSError, TypeError):  # no source to read
        return None
    if attribute in _stored_names(tree):
        return None
    defaults = []  # (value, where it comes from) for each keyword that passes the attribute
    for node in ast.walk(tree):
        for keyword in node.keywords if isinstance(node, ast.Call) else ():
            value = keyword.value
            if is_self_attribute(value) and value.attr == attribute:
                callee = getattr(module, node.func.id, None) if isinstance(node.func, ast.Name) else None
                try:
                    default = inspect.signature(callee).parameters[keyword.arg].default
                except (TypeError, ValueError, KeyError):
                    return None
                defaults.append((default, f"{node.func.id}'s {keyword.arg}"))
    values = [value for value, _ in defaults]
    if not values or not isinstance(values[0], int | float | str) or values.count(values[0]) != len(values):
        return None
    value, source = defaults[0]
    return StandIn(cls.__module__, owner.__name__, attribute, value, source)


def tiny_model_with_stand_ins(cls: type, rotary_classes: Sequence[str]) -> tuple[Any, list[str], list[StandIn]]:
    """The tiny model (`tiny_model`), with the stand-ins it needed given first (`stand_in_for`), and what it needed."""
    stand_ins: list[StandIn] = []
    while True:
        try:
            model, used = tiny_model(cls, rotary_classes)
        except NotBuilt as error:
            stand_in = stand_in_for(cls, str(error))
            if stand_in is None or stand_in in stand_ins:
                raise
            stand_in.give()
            stand_ins.append(stand_in)
            continue
        return model, [*(stand_in.describe() for stand_in in stand_ins), *used], stand_ins


def tiny_model(cls: type, rotary_classes: Sequence[str]) -> tuple[Any, list[str]]:
    """A tiny random model of the class that runs a short sequence, with its layers arranged to read the tables of the
    named rotary classes (`_arranged_to_read_the_tables`), and the fallbacks and arrangement it needed."""
    errors: list[str] = []
    for config_class in _config_classes(cls):
        try:
            return _tiny_model_of(cls, config_class, errors, rotary_classes)
        except Exception as error:  # the config class itself cannot be built
            errors.append(_describe(error))
    last = "" if errors[-1] == errors[0] else f" (with fallbacks: {errors[-1]})"
    raise NotBuilt(errors[0] + last)


def _tiny_model_of(
    cls: type, config_class: type, errors: list[str], rotary_classes: Sequence[str]
) -> tuple[Any, list[str]]:
    sizes = tiny_sizes(_defaults(config_class))
    used = [] if config_class is cls.config_class else [f"config {config_class.__name__}"]
    for description, adjust in ((None, None), *FALLBACKS):
        if adjust is not None:
            try:
                adjusted = adjust(config_class, sizes)
            except Exception:
                adjusted = None
            if adjusted is None:
                continue
            sizes = adjusted
            used.append(description)
        try:
            model = _built(cls, config_class, sizes)
            raised = _counts_raised_to_the_measured_length(cls, config_class, sizes, model)
            if raised != sizes:
                model = _built(cls, config_class, raised, SEQUENCE_LENGTH)
                sizes = raised
                used.append("counts that bound the positions raised to the measured length")
        except Exception as error:
            errors.append(_describe(error))
            continue
        model, arrangement = _arranged_to_read_the_tables(cls, config_class, sizes, model, rotary_classes)
        return model, [*used, arrangement] if arrangement else used
    raise NotBuilt(errors[-1])


def _built(cls: type, config_class: type, sizes: dict[str, Any], length: int = SHORT_LENGTH) -> Any:
    """The model of these config keywords, random with a fixed seed, once it has run a sequence of `length` tokens."""
    import torch

    config = config_class(**sizes)
    count = _parameter_count(cls, config)
    if count is not None and count > MAX_PARAMETERS:
        raise NotBuilt(f"{count:,} parameters at the tiny sizes")
    torch.manual_seed(0)
    model = cls(config).eval()
    _logits(model, torch.zeros(1, length, dtype=torch.long))
    return model


def _arranged_to_read_the_tables(
    cls: type, config_class: type, sizes: dict[str, Any], model: Any, rotary_classes: Sequence[str]
) -> tuple[Any, str | None]:
    """The tiny model with its layers of kinds that read the rotary tables, and what was changed (None: nothing).

    A hybrid config's default layer pattern mixes kinds (linear attention, convolutions, sliding and full attention);
    the first few that a tiny model keeps may read no rotary table (Qwen3-Next's pattern begins with linear attention)
    or read it only behind a layer that blurs what it did, so that the bf16 comparison measures chance. A kind reads the
    tables when a model whose layers are all of that kind has logits that move with them (`_table_influence`). Where a
    kind of the tiny model's layers does not: every layer of the first kind of the default pattern that reads them;
    where the config refuses layers of one kind only, one layer of each ordered pair of kinds first and the other
    behind it, taking the order in which the tables move the logits most. Otherwise the model is kept."""
    layer_types = getattr(model.config, "layer_types", None)
    default_kinds = _defaults(config_class).get("layer_types")
    if not rotary_classes or not isinstance(layer_types, list) or not isinstance(default_kinds, list):
        return model, None
    count, kinds = len(layer_types), list(dict.fromkeys([*default_kinds, *layer_types]))

    def built(types: list[str]) -> tuple[Any, float | None] | None:
        """The model of these layer types and its tables' influence; None where it cannot be built or run."""
        try:
            candidate = model if types == layer_types else _built(cls, config_class, {**sizes, "layer_types": types})
        except Exception:
            return None
        return candidate, _table_influence(candidate, rotary_classes)

    # Built when asked: the kinds the tiny model lacks only once one of its own is not shown to read the tables.
    uniform = functools.cache(lambda kind: built([kind] * count))
    if all(uniform(kind) is not None and uniform(kind)[1] for kind in layer_types):
        return model, None
    for kind in kinds:
        if uniform(kind) is not None and uniform(kind)[1]:
            return uniform(kind)[0], f"every layer {kind}"
    pairs = [[first, *[second] * (count - 1)] for first in kinds for second in kinds if first != second]
    read = [(types, outcome) for types in pairs if (outcome := built(types)) is not None and outcome[1]]
    if not read:
        return model, None
    types, (best, _) = max(read, key=lambda entry: entry[1][1])
    return best, f"layer types {', '.join(types)}"


def _table_influence(model: Any, rotary_classes: Sequence[str]) -> float | None:
    """How far the logits of a short sequence move (mean absolute change) when every module of the rotary classes
    returns its tables reversed (`_reversed`): 0.0 where the model does not read them, None where no such module runs
    in its forward."""
    calls = []

    def reversed_tables(module: Any, arguments: Any, output: Any) -> Any:
        calls.append(module)
        return _reversed(output)

    import torch

    # Tokens that differ: where every position holds the same token, attention averages equal values whatever the
    # tables make of its weights.
    sequence = torch.arange(SHORT_LENGTH)[None] % model.config.vocab_size
    plain = _logits(model, sequence)
    hooks = [m.register_forward_hook(reversed_tables) for m in model.modules() if type(m).__name__ in rotary_classes]
    try:
        moved = _logits(model, sequence)
    finally:
        for hook in hooks:
            hook.remove()
    return (moved - plain).abs().mean().item() if calls else None


def _reversed(output: Any) -> Any:
    """The tables (floating or complex tensors, alone or in a tuple or list) reversed along every axis: other angles
    at each position and frequency, of the same sizes, which no normalisation of queries and keys undoes."""
    import torch

    if isinstance(output, torch.Tensor):
        return output.flip(list(range(output.dim()))) if output.is_floating_point() or output.is_complex() else output
    if isinstance(output, tuple | list):
        return type(output)(_reversed(value) for value in output)
    return output


def _logits(model: Any, ids: Any) -> Any:
    import inspect

    import torch

    keywords = {"use_cache": False} if "use_cache" in inspect.signature(model.forward).parameters else {}
    with torch.no_grad():
        return model(input_ids=ids, **keywords).logits.float()


def _agreement(model: Any, ids: Any, expected: Any) -> float:
    return (_logits(model, ids).argmax(-1) == expected).float().mean().item()


def _import(qualified: str) -> Any:
    import importlib

    module, _, name = qualified.rpartition(".")
    return getattr(importlib.import_module(module), name)


def _measure(job: dict[str, Any], architecture: dict[str, str], dtype_keyword: str) -> dict[str, Any]:
    """One architecture: build and save it (original code only), then load and run it in fp32 and both bf16 ways."""
    import torch

    phase, name = job["phase"], architecture["name"]
    cls = _import(f"{architecture['module']}.{name}")
    row: dict[str, Any] = {"architecture": name, "config_class": cls.config_class.__name__}
    saved = Path(job["workdir"]) / "models" / name
    if phase == "original":
        try:
            model, row["fallbacks"], stand_ins = tiny_model_with_stand_ins(cls, architecture["rotary_classes"])
            row["stand_ins"] = [dataclasses.asdict(stand_in) for stand_in in stand_ins]
            row["table_influence"] = _table_influence(model, architecture["rotary_classes"])
            model.save_pretrained(saved)
        except Exception as error:
            return {**row, "error": f"tiny model not built: {_describe(error)}"}
        config_class = type(model.config)
        row["config_type"] = f"{config_class.__module__}.{config_class.__qualname__}"
    else:
        original = _original_outcome(Path(job["workdir"]), name)
        if "error" in original:
            return {**row, "skipped": True}
        config_class = _import(original["config_type"])
        for stand_in in original["stand_ins"]:
            StandIn(**stand_in).give()
    # The config is read by the class the model was built with, which may be a sub-config of `cls.config_class`.
    model, info = cls.from_pretrained(saved, config=config_class.from_pretrained(saved), output_loading_info=True)
    row["missing"], row["unexpected"] = sorted(info["missing_keys"]), sorted(info["unexpected_keys"])
    ids = torch.randint(0, model.config.vocab_size, (1, SEQUENCE_LENGTH), generator=torch.Generator().manual_seed(1))
    fp32 = _logits(model.eval(), ids)
    reference_file = saved.with_suffix(".logits.pt")
    if phase == "original":
        torch.save(fp32, reference_file)
        reference = fp32
    else:
        reference = torch.load(reference_file)
        row["fp32_max_abs_diff"] = 0.0 if torch.equal(fp32, reference) else (fp32 - reference).abs().max().item()
    expected = reference.argmax(-1)
    # Each bf16 route on its own: code that raises under one (a dtype mismatch) is reported, not fatal.
    try:
        row["to_bf16"] = _agreement(model.to(torch.bfloat16), ids, expected)
    except Exception as error:
        row["to_bf16_error"] = _describe(error)
    try:
        loaded = cls.from_pretrained(
            saved, config=config_class.from_pretrained(saved), **{dtype_keyword: torch.bfloat16}
        )
        row["load_bf16"] = _agreement(loaded.eval(), ids, expected)
    except Exception as error:
        row["load_bf16_error"] = _describe(error)
    return row


class NotBuilt(Exception):
    """No tiny model of an architecture could be built; the message says why."""


def _original_outcome(workdir: Path, name: str) -> dict[str, Any]:
    import time

    outcome = _outcome_file(workdir, name)
    while not outcome.exists():
        time.sleep(ORIGINAL_POLL_S)
    return json.loads(outcome.read_text())


def _describe(error: BaseException) -> str:
    from rope_lint.probe.build import describe

    return str(error) if isinstance(error, NotBuilt) else describe(error)


def use_reproducible_kernels() -> None:
    """The worker's kernels, beside its environment's `REPRODUCIBLE_KERNELS`: none of oneDNN's."""
    import torch

    torch.backends.mkldnn.enabled = False


def _work(job_file: Path, log_file: Path) -> None:
    """The worker's loop: one line to the log when an architecture starts and one with its result."""
    import time

    from rope_lint.probe.discover import quiet_model_code

    job = json.loads(job_file.read_text())
    use_reproducible_kernels()
    with quiet_model_code():
        import transformers

    # `dtype=` from transformers 5.0 on, `torch_dtype=` before.
    dtype_keyword = "dtype" if int(transformers.__version__.split(".")[0]) >= 5 else "torch_dtype"
    with log_file.open("a") as log:
        for architecture in job["architectures"]:
            log.write(json.dumps({"started": architecture["name"]}) + "\n")
            log.flush()
            start = time.perf_counter()
            try:
                with quiet_model_code():
                    result = _measure(job, architecture, dtype_keyword)
            except Exception as error:
                result = {"architecture": architecture["name"], "error": f"{job['phase']} code: {_describe(error)}"}
            result["seconds"] = round(time.perf_counter() - start, 2)
            if job["phase"] == "original":
                _publish(Path(job["workdir"]), result)
            log.write(json.dumps(result) + "\n")
            log.flush()


if __name__ == "__main__":
    _work(Path(sys.argv[1]), Path(sys.argv[2]))
