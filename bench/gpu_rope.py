"""What rope-lint's RoPE fix costs and changes on a GPU: a Llama-shaped model, original against fixed, in bf16.

"Original" is the installed transformers' own `LlamaForCausalLM`. "Fixed" is the same model from a copy of the
installed `modeling_llama.py` that `python -m rope_lint fix --unsafe-fixes --select RPL1,RPL2` rewrote at the start
of the run. Both are built from one `LlamaConfig` with the same weights and cast to bf16 on the device. Measured:

- forward latency of a batch 1 x --positions input (median of --repeat runs, ms), original and fixed, eager and with
  CUDA graphs (`torch.compile(mode="reduce-overhead")`), and the ratio fixed / original; the acceptance is a ratio
  <= 1.02 in both modes;
- a greedy decode of --new-tokens tokens after a 32-token prompt, in tokens per second, and whether both models chose
  the same tokens;
- the rotary module's cos/sin for positions 0..--positions-1 in fp32 on the CPU against fp32 on the device (max abs
  difference), and the bf16 models' tables against the fp32 CPU ones;
- host-to-device copies per steady-state forward of the rotary module and of the whole model (torch.profiler).

    python bench/gpu_rope.py --json gpu_rope.json      # on a CUDA machine: 4 layers, hidden 1024, 4,096 positions
    python bench/gpu_rope.py --device cpu --layers 1 --hidden 128 --positions 256 --new-tokens 8 --repeat 2 \\
        --skip-compile                                 # a quick check of the script itself, without a GPU

The fix runs in a subprocess that gets this process's PYTHONPATH with the repository root in front, so libcst may
live in a folder on PYTHONPATH. Exit status: 0 done; 1 done, but on CUDA a ratio is above 1.02 or was not measured
(a compile failure); 2 no fixed model to compare (the fix failed or changed nothing, the weights did not match) or
no such device.
"""

from __future__ import annotations

import argparse
import copy
import difflib
import importlib.util
import json
import logging
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import torch
import transformers

REPO = Path(__file__).resolve().parents[1]
FIXED_MODULE = "transformers.models.llama.modeling_llama_ropelint"
# transformers' own ruff setting: the fix formats what it rewrites with the settings of the file's project.
TRANSFORMERS_RUFF = "[tool.ruff]\nline-length = 119\n"
FIX_ARGUMENTS = ["fix", "--unsafe-fixes", "--select", "RPL1,RPL2"]
ACCEPTED_RATIO = 1.02
VOCAB = 32000


class BenchError(Exception):
    """A failure after which no figure would mean anything; the message says what to look at."""


def say(text: str = "") -> None:
    print(text, flush=True)


def first_line(error: BaseException) -> str:
    lines = str(error).strip().splitlines()
    return f"{type(error).__name__}: {lines[0] if lines else ''}"


def fixed_modeling_file(folder: Path) -> tuple[Path, dict[str, Any]]:
    """Copy the installed modeling_llama.py into `folder`, let rope-lint's CLI fix it in place, say what it did."""
    spec = importlib.util.find_spec("transformers.models.llama.modeling_llama")
    if spec is None or spec.origin is None:
        raise BenchError("transformers.models.llama.modeling_llama is not installed")
    installed = Path(spec.origin)
    target = folder / installed.name
    shutil.copyfile(installed, target)
    (folder / "pyproject.toml").write_text(TRANSFORMERS_RUFF)
    # The CLI rather than rope_lint's modules: their paths move, the CLI stays. The parent's PYTHONPATH may be where
    # libcst is; the checkout goes in front of it so that its rope_lint wins over an installed one.
    paths = [str(REPO), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    environment = {**os.environ, "PYTHONPATH": os.pathsep.join(paths)}
    command = [sys.executable, "-m", "rope_lint", *FIX_ARGUMENTS, target.name]
    try:
        result = subprocess.run(command, cwd=folder, env=environment, capture_output=True, text=True, timeout=600)
    except subprocess.TimeoutExpired as error:
        raise BenchError(f"`{' '.join(command)}` ran over {error.timeout} s") from error
    before, after = installed.read_text(), target.read_text()
    diff = difflib.unified_diff(before.splitlines(True), after.splitlines(True), str(installed), "fixed", n=1)
    report = {
        "command": " ".join(command),
        "pythonpath": environment["PYTHONPATH"],
        "returncode": result.returncode,
        "stdout": result.stdout,
        "stderr": result.stderr,
        "diff": "".join(diff),
    }
    # Exit 1 only says that findings remain (RPL2xx ones the fix does not touch, say); 2 is rope-lint's own error.
    problem = None
    if result.returncode not in (0, 1):
        problem = f"exit status {result.returncode}"
    elif "Traceback (most recent call last)" in result.stderr:
        problem = "a traceback on stderr"
    elif after == before:
        # rope-lint leaves a file as it was when one of its fixes fails; benchmarking that copy would compare the
        # original with itself and pass every ratio.
        problem = "it left the file unchanged"
    if problem:
        hint = (
            "\n(libcst is not importable: put it on PYTHONPATH)" if "No module named 'libcst'" in result.stderr else ""
        )
        raise BenchError(
            f"rope-lint's fix failed: {problem}.\n$ cd {folder} && PYTHONPATH={environment['PYTHONPATH']} "
            f"{report['command']}\n--- stdout\n{result.stdout}--- stderr\n{result.stderr}{hint}"
        )
    return target, report


def import_fixed(path: Path) -> ModuleType:
    """The fixed file as a module beside the installed modeling_llama, so that its relative imports resolve."""
    spec = importlib.util.spec_from_file_location(FIXED_MODULE, path)
    if spec is None or spec.loader is None:
        raise BenchError(f"cannot import {path}")
    module = importlib.util.module_from_spec(spec)
    # Registered before it runs, as the import system does: `from ...activations import ACT2FN` resolves through
    # the name's parent package, the installed transformers.models.llama.
    sys.modules[FIXED_MODULE] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[FIXED_MODULE]
        raise
    return module


def build_models(fixed_module: ModuleType, args: argparse.Namespace) -> tuple[Any, torch.nn.Module, torch.nn.Module]:
    """The original and the fixed LlamaForCausalLM from one config, with the original's weights, in fp32 on the CPU."""
    config = transformers.LlamaConfig(
        vocab_size=VOCAB,
        hidden_size=args.hidden,
        intermediate_size=args.intermediate or args.hidden * 11 // 4,
        num_hidden_layers=args.layers,
        num_attention_heads=args.heads,
        num_key_value_heads=args.heads,
        max_position_embeddings=args.positions,
    )
    torch.manual_seed(args.seed)
    original = transformers.LlamaForCausalLM(config).eval()
    fixed = fixed_module.LlamaForCausalLM(config).eval()
    try:
        fixed.load_state_dict(original.state_dict(), strict=True)
    except RuntimeError as error:
        raise BenchError(f"the fixed model's parameters do not match the original's: {error}") from error
    rotary_module = type(fixed.model.rotary_emb).__module__
    if rotary_module != FIXED_MODULE:
        raise BenchError(f"the fixed model's rotary class comes from {rotary_module}, not from the fixed file")
    return config, original, fixed


def synchronizer(device: torch.device) -> Callable[[], None]:
    if device.type == "cuda":
        return lambda: torch.cuda.synchronize(device)
    return lambda: None


def time_calls(
    calls: dict[str, Callable[[], object]], warmup: int, repeat: int, sync: Callable[[], None]
) -> dict[str, list[float]]:
    """Milliseconds of each call, `repeat` times after `warmup` untimed runs."""
    for call in calls.values():
        for _ in range(warmup):
            call()
        sync()
    times: dict[str, list[float]] = {name: [] for name in calls}
    names = list(calls)
    for index in range(repeat):
        # The models take turns, in alternating order, so that a drift of clocks or temperature falls on both alike
        # and neither always runs right after the other.
        for name in names if index % 2 == 0 else names[::-1]:
            sync()
            start = time.perf_counter()
            calls[name]()
            sync()
            times[name].append((time.perf_counter() - start) * 1000)
    return times


def latency_row(times: dict[str, list[float]]) -> dict[str, Any]:
    original, fixed = statistics.median(times["original"]), statistics.median(times["fixed"])
    return {
        "original_ms": original,
        "fixed_ms": fixed,
        "ratio": fixed / original,
        "accepted": fixed / original <= ACCEPTED_RATIO,
        "runs_ms": times,
    }


def rotary_tables(
    rotary: torch.nn.Module, device: torch.device, positions: int, hidden: int, dtype: torch.dtype = torch.float32
) -> tuple[torch.Tensor, torch.Tensor]:
    """cos and sin for positions 0..positions-1, as the model calls the module, brought back to the CPU in fp32."""
    # The module reads only the dtype and device of x; the shape is the hidden states' the model passes.
    x = torch.zeros(1, positions, hidden, dtype=dtype, device=device)
    position_ids = torch.arange(positions, device=device)[None]
    with torch.no_grad():
        cos, sin = rotary(x, position_ids)
    return cos.float().cpu(), sin.float().cpu()


def max_difference(first: tuple[torch.Tensor, ...], second: tuple[torch.Tensor, ...]) -> float:
    return max((a - b).abs().max().item() for a, b in zip(first, second, strict=True))


def host_to_device_copies(
    call: Callable[[], object], sync: Callable[[], None], iterations: int = 5
) -> dict[str, float]:
    """Host-to-device memcpys per call, in steady state, as the CUDA profiler sees them."""
    from torch.profiler import ProfilerActivity, profile

    for _ in range(3):
        call()
    sync()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as profiler:
        for _ in range(iterations):
            call()
        sync()
    names = [event.name for event in profiler.events()]
    return {
        "memcpy_htod": sum("Memcpy HtoD" in name for name in names) / iterations,
        "cuda_memcpy_calls": sum(name.startswith("cudaMemcpy") for name in names) / iterations,
    }


class CudagraphSkips(logging.Handler):
    """The reasons inductor gives for running a graph without CUDA graphs, which it only logs as a warning."""

    LOGGER = "torch._inductor.cudagraph_utils.__cudagraphs"

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage().splitlines()[0])

    def __enter__(self) -> CudagraphSkips:
        logging.getLogger(self.LOGGER).addHandler(self)
        return self

    def __exit__(self, *exc_info: object) -> None:
        logging.getLogger(self.LOGGER).removeHandler(self)


def dynamo_counts() -> dict[str, int]:
    """Graph breaks and CUDA-graph skips so far, from dynamo's private counters (empty where they are not)."""
    try:
        from torch._dynamo.utils import counters
    except ImportError:
        return {}
    return {
        "graph_breaks": sum(counters["graph_break"].values()),
        "cudagraph_skips": counters["inductor"]["cudagraph_skips"],
    }


def compiled_latency(
    models: dict[str, torch.nn.Module], input_ids: torch.Tensor, args: argparse.Namespace, sync: Callable[[], None]
) -> dict[str, Any]:
    """The forward latency with CUDA graphs; a model that fails to compile is reported, not raised."""
    calls: dict[str, Callable[[], object]] = {}
    details: dict[str, Any] = {}
    for name, model in models.items():
        before = dynamo_counts()
        start = time.perf_counter()
        try:
            compiled = torch.compile(model, mode="reduce-overhead")

            def call(compiled: Callable[..., object] = compiled) -> None:
                # A new step for the CUDA-graph trees at each call: the previous call's outputs are not used again.
                torch.compiler.cudagraph_mark_step_begin()
                compiled(input_ids=input_ids, use_cache=False)

            with CudagraphSkips() as skips:
                call()
                sync()
                compile_s = time.perf_counter() - start
                # The graphs are recorded on a later call than the compiling one; the warm-ups include it.
                for _ in range(max(args.warmup, 3)):
                    call()
                sync()
        except Exception as error:
            details[name] = {"error": first_line(error)}
            say(f"  {name}: failed while compiling or warming up: {details[name]['error']}")
            continue
        after = dynamo_counts()
        details[name] = {
            "compile_s": compile_s,
            "cudagraph_skip_messages": skips.messages,
            **{key: after[key] - before[key] for key in after},
        }
        calls[name] = call
        say(f"  {name}: compiled in {compile_s:.1f} s")
    result: dict[str, Any] = {"models": details}
    if len(calls) == len(models):
        try:
            result.update(latency_row(time_calls(calls, 0, args.repeat, sync)))
        except Exception as error:
            result["error"] = first_line(error)
    else:
        result["error"] = "compile failed for " + ", ".join(name for name in models if name not in calls)
    return result


def decode(
    models: dict[str, torch.nn.Module], config: Any, args: argparse.Namespace, sync: Callable[[], None]
) -> dict[str, Any]:
    """Tokens per second of a greedy decode of exactly --new-tokens tokens, and whether both models chose alike."""
    generator = torch.Generator().manual_seed(args.seed + 1)
    prompt = torch.randint(VOCAB, (1, args.prompt_tokens), generator=generator).to(args.device)
    settings = {
        "attention_mask": torch.ones_like(prompt),
        "do_sample": False,
        "max_new_tokens": args.new_tokens,
        "min_new_tokens": args.new_tokens,
        # A random-weight model has no pad token; say which one, rather than have generate warn and pick eos.
        "pad_token_id": config.eos_token_id,
    }
    # The first greedy run is the warm-up too, and its tokens are the ones compared.
    tokens = {name: model.generate(prompt, **settings)[0, prompt.shape[1] :].cpu() for name, model in models.items()}
    sync()
    calls = {name: (lambda model=model: model.generate(prompt, **settings)) for name, model in models.items()}
    times = time_calls(calls, 0, args.decode_repeat, sync)
    rates = {name: args.new_tokens / (statistics.median(runs) / 1000) for name, runs in times.items()}
    differing = (tokens["original"] != tokens["fixed"]).nonzero()
    return {
        "original_tokens_per_s": rates["original"],
        "fixed_tokens_per_s": rates["fixed"],
        "ratio": rates["fixed"] / rates["original"],
        "new_tokens": {name: len(found) for name, found in tokens.items()},
        "same_tokens": bool(len(differing) == 0 and len(tokens["original"]) == len(tokens["fixed"])),
        "first_differing_token": int(differing[0, 0]) if len(differing) else None,
        "runs_ms": times,
    }


def git_version() -> str | None:
    try:
        result = subprocess.run(["git", "describe", "--always", "--dirty"], cwd=REPO, capture_output=True, text=True)
    except OSError:
        return None
    return result.stdout.strip() or None


def figure(value: float | None, digits: int = 3) -> str:
    return "n/a" if value is None else f"{value:.{digits}f}"


def print_latency(label: str, row: dict[str, Any]) -> None:
    if "skipped" in row or "error" in row:
        say(f"  {label:<30} " + (f"skipped: {row['skipped']}" if "skipped" in row else f"failed: {row['error']}"))
        return
    verdict = "yes" if row["accepted"] else "NO"
    say(
        f"  {label:<30} {figure(row['original_ms']):>10} {figure(row['fixed_ms']):>10} "
        f"{figure(row['ratio']):>14} {verdict:>8}"
    )


def arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda", help="cuda (default), cuda:N or cpu")
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--hidden", type=int, default=1024)
    parser.add_argument("--intermediate", type=int, default=None, help="default: 11/4 of --hidden (2816 for 1024)")
    parser.add_argument("--heads", type=int, default=16)
    parser.add_argument("--positions", type=int, default=4096, help="max_position_embeddings and the forward's length")
    parser.add_argument("--prompt-tokens", type=int, default=32)
    parser.add_argument("--new-tokens", type=int, default=256)
    parser.add_argument("--repeat", type=int, default=20, help="timed forwards per model and mode")
    parser.add_argument("--warmup", type=int, default=5, help="untimed forwards before them")
    parser.add_argument("--decode-repeat", type=int, default=3, help="timed decodes per model")
    parser.add_argument("--skip-compile", action="store_true", help="no CUDA-graphs row")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", type=Path, help="also write every figure to this file")
    return parser.parse_args()


def main() -> int:
    args = arguments()
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        say(f"--device {args.device}: CUDA is not available here (torch {torch.__version__}); try --device cpu")
        return 2
    sync = synchronizer(device)
    results: dict[str, Any] = {
        "environment": {
            "device": torch.cuda.get_device_name(device) if device.type == "cuda" else platform.processor() or "cpu",
            "torch": torch.__version__,
            "cuda": torch.version.cuda,
            "transformers": transformers.__version__,
            "python": platform.python_version(),
            # TF32 would round the fp32 tables' inputs on the GPU: say whether it was on.
            "cuda_matmul_allow_tf32": torch.backends.cuda.matmul.allow_tf32,
            "float32_matmul_precision": torch.get_float32_matmul_precision(),
            "rope_lint": git_version(),
        },
        "arguments": {key: str(value) if isinstance(value, Path) else value for key, value in vars(args).items()},
    }

    def save() -> None:
        # After every section, so that a run cut short by a time limit still leaves the figures it reached.
        if args.json:
            args.json.write_text(json.dumps(results, indent=2, default=str) + "\n")

    environment = results["environment"]
    say(f"device        {environment['device']} ({args.device})")
    say(
        f"torch         {environment['torch']} (CUDA {environment['cuda']}), fp32 matmul precision "
        f"{environment['float32_matmul_precision']}, TF32 matmul {environment['cuda_matmul_allow_tf32']}"
    )
    say(f"transformers  {environment['transformers']}")
    say(f"python        {environment['python']}, rope-lint {environment['rope_lint']}")
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="gpu-rope-") as folder:
        # Kept until the end: the fixed module's source stays readable for tracebacks and torch.compile.
        try:
            path, results["fix"] = fixed_modeling_file(Path(folder))
            config, original, fixed = build_models(import_fixed(path), args)
        except BenchError as error:
            say(f"ERROR: {error}")
            results["error"] = str(error)
            save()
            return 2
        models = {"original": original, "fixed": fixed}
        summary = (results["fix"]["stdout"].strip().splitlines() or ["(no output)"])[-1]
        say(f"rope-lint     {summary} (exit {results['fix']['returncode']})")
        say(results["fix"]["diff"].rstrip())
        attention = getattr(original.config, "_attn_implementation", None)
        results["config"] = config.to_dict()
        say(
            f"model         Llama, {args.layers} layers, hidden {args.hidden}, intermediate "
            f"{config.intermediate_size}, {args.heads} heads, vocab {VOCAB}, {args.positions} positions, bf16, "
            f"attention {attention}"
        )

        # fp32 tables on both devices, from copies of the fp32 rotary modules taken before the models go to bf16.
        say()
        say(f"rotary cos/sin, positions 0..{args.positions - 1}, max abs difference")
        reference = {}
        tables: dict[str, Any] = {}
        for name, model in models.items():
            rotary = model.model.rotary_emb
            reference[name] = rotary_tables(rotary, torch.device("cpu"), args.positions, args.hidden)
            on_device = rotary_tables(copy.deepcopy(rotary).to(device), device, args.positions, args.hidden)
            tables[name] = {"fp32_cpu_vs_fp32_device": max_difference(reference[name], on_device)}
        tables["fp32_cpu_fixed_vs_original"] = max_difference(reference["fixed"], reference["original"])
        results["tables"] = tables

        for model in models.values():
            model.to(device=device, dtype=torch.bfloat16)
        results["rotary"] = {}
        for name, model in models.items():
            rotary = model.model.rotary_emb
            # What the model actually computes with: fp32 x as above, through the bf16 model's own rotary module.
            in_model = rotary_tables(rotary, device, args.positions, args.hidden)
            tables[name]["bf16_model_vs_fp32_cpu"] = max_difference(reference[name], in_model)
            inv_freq = rotary.inv_freq
            results["rotary"][name] = {"inv_freq_dtype": str(inv_freq.dtype), "inv_freq_device": str(inv_freq.device)}
        say(f"  {'':<42} {'original':>10} {'fixed':>10}")
        for key, label in (
            ("fp32_cpu_vs_fp32_device", f"fp32 CPU vs fp32 {args.device}"),
            ("bf16_model_vs_fp32_cpu", "bf16 model's module vs fp32 CPU"),
        ):
            say(f"  {label:<42} {tables['original'][key]:>10.3g} {tables['fixed'][key]:>10.3g}")
        say(f"  {'fp32 CPU, fixed vs original':<42} {tables['fp32_cpu_fixed_vs_original']:>10.3g}")
        for name, found in results["rotary"].items():
            say(f"  {name} inv_freq: {found['inv_freq_dtype']} on {found['inv_freq_device']}")
        save()

        generator = torch.Generator().manual_seed(args.seed)
        input_ids = torch.randint(VOCAB, (1, args.positions), generator=generator).to(device)
        say()
        say(f"forward latency, batch 1 x {args.positions}, median of {args.repeat} (ms)")
        say(f"  {'':<30} {'original':>10} {'fixed':>10} {'fixed/original':>14} {'<= ' + str(ACCEPTED_RATIO):>8}")
        forward: dict[str, Any] = {}
        results["forward"] = forward
        with torch.no_grad():
            logits = {
                name: model(input_ids=input_ids, use_cache=False).logits.float() for name, model in models.items()
            }
            forward["logits_max_difference"] = (logits["fixed"] - logits["original"]).abs().max().item()
            del logits
            calls = {
                name: (lambda model=model: model(input_ids=input_ids, use_cache=False))
                for name, model in models.items()
            }
            forward["eager"] = latency_row(time_calls(calls, args.warmup, args.repeat, sync))
            print_latency("eager", forward["eager"])
            save()

            say()
            say("host-to-device copies per steady-state forward")
            copies: dict[str, Any] = {}
            results["host_to_device"] = copies
            if device.type != "cuda":
                copies["skipped"] = "needs CUDA"
                say("  skipped: needs CUDA")
            else:
                hidden_states = torch.zeros(1, args.positions, args.hidden, dtype=torch.bfloat16, device=device)
                position_ids = torch.arange(args.positions, device=device)[None]
                for name, model in models.items():
                    try:
                        copies[name] = {
                            "rotary": host_to_device_copies(
                                lambda model=model: model.model.rotary_emb(hidden_states, position_ids), sync
                            ),
                            "model": host_to_device_copies(calls[name], sync),
                        }
                        found = copies[name]
                        say(
                            f"  {name:<10} rotary module: {found['rotary']['memcpy_htod']:g} memcpy HtoD "
                            f"({found['rotary']['cuda_memcpy_calls']:g} cudaMemcpy* calls); whole model: "
                            f"{found['model']['memcpy_htod']:g} ({found['model']['cuda_memcpy_calls']:g})"
                        )
                    except Exception as error:
                        copies[name] = {"error": first_line(error)}
                        say(f"  {name}: profiler failed: {copies[name]['error']}")
            save()

        say()
        say(
            f"greedy decode, {args.prompt_tokens}-token prompt + {args.new_tokens} new tokens, median of "
            f"{args.decode_repeat}"
        )
        results["decode"] = decoded = decode(models, config, args, sync)
        say(f"  {'':<30} {'original':>10} {'fixed':>10} {'fixed/original':>14}")
        say(
            f"  {'tokens per second':<30} {decoded['original_tokens_per_s']:>10.1f} "
            f"{decoded['fixed_tokens_per_s']:>10.1f} {decoded['ratio']:>14.3f}"
        )
        first = decoded["first_differing_token"]
        say(f"  same tokens: {'yes' if decoded['same_tokens'] else f'no, from new token {first}'}")
        save()

        say()
        say("CUDA graphs, torch.compile(mode='reduce-overhead'), compiled separately for each model")
        if device.type != "cuda" or args.skip_compile:
            forward["cuda_graphs"] = {"skipped": "needs CUDA" if device.type != "cuda" else "--skip-compile"}
            say(f"  skipped: {forward['cuda_graphs']['skipped']}")
        else:
            with torch.no_grad():
                forward["cuda_graphs"] = compiled_latency(models, input_ids, args, sync)
            for name, found in forward["cuda_graphs"]["models"].items():
                for message in found.get("cudagraph_skip_messages", []):
                    say(f"  {name}: {message}")
                if found.get("graph_breaks"):
                    say(f"  {name}: {found['graph_breaks']} graph breaks")
        say()
        say(f"summary: forward latency, batch 1 x {args.positions}, median of {args.repeat} (ms)")
        say(f"  {'':<30} {'original':>10} {'fixed':>10} {'fixed/original':>14} {'<= ' + str(ACCEPTED_RATIO):>8}")
        print_latency("eager", forward["eager"])
        print_latency("CUDA graphs (reduce-overhead)", forward["cuda_graphs"])
        say(f"  eager logits, max |fixed - original|: {forward['logits_max_difference']:.3g}")

        accepted = {mode: forward[mode].get("accepted") for mode in ("eager", "cuda_graphs")}
        results["acceptance"] = accepted
        results["elapsed_s"] = time.perf_counter() - started
        save()
        say()
        say(f"done in {results['elapsed_s']:.0f} s")
        if device.type != "cuda":
            say("acceptance: not judged off CUDA")
            return 0
        passed = all(accepted.values())
        say(f"acceptance (fixed/original <= {ACCEPTED_RATIO}, eager and CUDA graphs): {'PASS' if passed else 'FAIL'}")
        return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main())
