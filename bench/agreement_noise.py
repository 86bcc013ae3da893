"""How much of a tiny model's bf16 argmax agreement with fp32 is its rotary tables, and how much is chance (issue 15).

`fix --verify` builds a tiny random model of each causal-LM architecture whose rotary class the fix changed
(`rope_lint.verify.models`) and asks that its agreement after `.to(torch.bfloat16)` be no lower than the original
code's. The fixed code computes its tables from float32 frequencies that `.to` cannot round; the original computes
them from frequencies rounded to bf16. This script builds the same tiny model with the original code, rounds it with
`.to(torch.bfloat16)`, and measures it twice on the same 1,024 tokens: with the rounded frequencies (what the original
code computes) and with the float32 ones put back (what the fixed code computes). For each it prints the agreement,
the positions whose bf16 maximum is tied, the share where fp32's choice is among the bf16 maxima, and the RMS error of
the logits against fp32; then how many positions only one of the two gets right. `--sequences N` measures N sequences
of tokens (the first is the one `verify_models` measures), each on its own: where the rounding of the frequencies moves
the logits less than bf16 does everywhere else, which of the two agreements is higher changes from one sequence to the
next. It runs with the kernels `verify_models`' workers run with (`REPRODUCIBLE_KERNELS`), so that its first sequence
is what they measure on any x86-64 machine.

    PYTHONPATH=<site-packages of transformers 5.24.0> python bench/agreement_noise.py \\
        transformers.models.olmo_hybrid.modeling_olmo_hybrid.OlmoHybridForCausalLM [--sequences 6]
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import os
import sys

import torch

from rope_lint.probe.discover import quiet_model_code
from rope_lint.verify.models import (
    REPRODUCIBLE_KERNELS,
    SEQUENCE_LENGTH,
    rotary_classes_of,
    tiny_model,
    use_reproducible_kernels,
)


def _logits(model: torch.nn.Module, ids: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():
        return model(input_ids=ids, use_cache=False).logits.float()[0]


def _describe(name: str, logits: torch.Tensor, reference: torch.Tensor) -> torch.Tensor:
    """Print the agreement of `logits` with the reference's argmax, and return which positions agree."""
    expected = reference.argmax(-1)
    agrees = logits.argmax(-1) == expected
    maxima = logits == logits.max(-1, keepdim=True).values
    tied = maxima.sum(-1) > 1
    # A tie is broken by the order of the vocabulary: the share where fp32's choice is among the tied maxima says
    # whether that order decides the agreement.
    among = maxima.gather(-1, expected[:, None]).float().mean().item()
    rms = (logits - reference).pow(2).mean().sqrt().item()
    share = agrees.float().mean().item()
    print(
        f"{name}: agreement {share:.2%}, {int(tied.sum())} positions tied, fp32's choice among the maxima at "
        f"{among:.2%}, RMS error {rms:.5f}"
    )
    return agrees


def _put_back(model: torch.nn.Module, frequencies: dict[str, torch.Tensor]) -> None:
    """The float32 frequencies, by buffer name, in place of the model's own."""
    for key, value in frequencies.items():
        owner, _, attribute = key.rpartition(".")
        setattr(model.get_submodule(owner), attribute, value)


def _measure(model: torch.nn.Module, ids: torch.Tensor) -> int:
    """Print both agreements of the model (float32 as built) on `ids`; return how many more positions the fixed code
    gets right than the original. The model is left as it was built."""
    reference = _logits(model, ids)
    exact = {key: value.clone() for key, value in model.named_buffers() if key.endswith("inv_freq")}
    model.to(torch.bfloat16)
    rounded = _describe("frequencies rounded by .to(bf16) (the original code)", _logits(model, ids), reference)
    _put_back(model, exact)
    fixed = _describe("float32 frequencies (the fixed code)", _logits(model, ids), reference)
    _put_back(model.float(), exact)  # `.float()` of the rounded model would keep the rounding
    only_original, only_fixed = int((rounded & ~fixed).sum()), int((fixed & ~rounded).sum())
    print(f"positions only the original gets right: {only_original}, only the fixed: {only_fixed}")
    return only_fixed - only_original


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("architecture", help="module.Class of a causal-LM model: ...modeling_llama.LlamaForCausalLM")
    parser.add_argument("--sequences", type=int, default=1, help="how many sequences of tokens to measure (default 1)")
    arguments = parser.parse_args()
    if REPRODUCIBLE_KERNELS.items() - os.environ.items():  # read when torch starts: run again with them set
        os.execve(sys.executable, [sys.executable, *sys.argv], {**os.environ, **REPRODUCIBLE_KERNELS})
    use_reproducible_kernels()
    module_name, _, name = arguments.architecture.rpartition(".")
    with quiet_model_code():  # model code prints while it is imported and built
        module = importlib.import_module(module_name)
        # The rotary classes of its module: the tiny model's layers are arranged to read their tables, as there.
        model, _ = tiny_model(getattr(module, name), rotary_classes_of(inspect.getsource(module)))
    differences = []
    for seed in range(1, arguments.sequences + 1):  # seed 1: the tokens `verify_models` measures
        print(f"sequence {seed}:")
        generator = torch.Generator().manual_seed(seed)
        ids = torch.randint(0, model.config.vocab_size, (1, SEQUENCE_LENGTH), generator=generator)
        differences.append(_measure(model, ids))
    if len(differences) > 1:
        print(f"the fixed code's gain in positions, by sequence: {differences}")


if __name__ == "__main__":
    main()
