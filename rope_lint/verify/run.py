"""`fix --verify` for the run layer: the fixes held back, verified, and written only where they pass.

The fix computes every file's fixed text without writing it (`fix_file(..., hold=True)`). Each changed file is then
verified (`changes.verify_changes`); a file that passes is written, one that fails is left as it was and its findings
stay. In a transformers tree, the written files are then verified at the model level (`models.verify_models`: a tiny
model saved by the original code, loaded by the fixed code); the modeling file of an architecture that fails is
restored to its original bytes. With `--diff` nothing is written, so only the first stage runs.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from rope_lint import banner
from rope_lint.fix.apply import FileFixOutcome, restored, with_held_fix_written, without_held_fix
from rope_lint.output.fix_report import FAILED, NOT_BUILT, VERIFIED, Verification
from rope_lint.verify.changes import verify_changes
from rope_lint.verify.models import (
    UNBUILDABLE,
    ArchitectureResult,
    ModelVerificationError,
    is_transformers_package,
    verify_models,
)


def verified_outcomes(
    outcomes: Sequence[FileFixOutcome], write: bool, models: bool = True
) -> tuple[list[FileFixOutcome], list[Verification]]:
    """The outcomes once each held fix is verified and then written (when `write`) or dropped, and what was found;
    with `models`, the written files of a transformers tree are then verified at the model level.

    A dropped fix leaves its file as it was, with its findings, and says why in the outcome's error."""
    held = [o for o in outcomes if o.held is not None]
    verifications = verify_changes([(Path(o.path), o.held.source.text, o.held.text) for o in held if o.held])
    failures: dict[str, str] = {}
    for verification in verifications:
        if verification.status == FAILED:
            failures.setdefault(verification.path, f"{verification.name}: {verification.detail}")
    results = []
    for outcome in outcomes:
        if outcome.held is None:
            results.append(outcome)
        elif outcome.path in failures:
            results.append(without_held_fix(outcome, _left_as_it_was(failures[outcome.path], write)))
        else:
            results.append(with_held_fix_written(outcome) if write else outcome)
    if write and models:
        results, model_verifications = _models_verified(results)
        verifications += model_verifications
    return results, verifications


def _left_as_it_was(reason: str, written: bool) -> str:
    return f"verification failed, file left as it was: {reason}" if written else f"verification failed: {reason}"


def _models_verified(outcomes: list[FileFixOutcome]) -> tuple[list[FileFixOutcome], list[Verification]]:
    """Model-level verification of each transformers package that written files lie in; the modeling file of an
    architecture that fails is restored to its original bytes."""
    written = {Path(o.path).resolve(): index for index, o in enumerate(outcomes) if o.original is not None}
    roots = sorted({root for path in written if (root := _transformers_root(path)) is not None})
    found: list[Verification] = []
    outcomes = list(outcomes)
    for root in roots:
        originals = {path: outcomes[index].original for path, index in written.items() if path.is_relative_to(root)}
        try:
            results = verify_models(root, {path: text for path, text in originals.items() if text is not None})
        except ModelVerificationError as error:
            found.append(Verification(str(root), 1, "transformers", NOT_BUILT, f"no model could be built: {error}"))
            continue
        for result in results:
            path = root.parent.joinpath(*result.module.split(".")).with_suffix(".py")
            index = written.get(path)
            shown = outcomes[index].path if index is not None else str(path)
            verification = _architecture(shown, result)
            found.append(verification)
            if verification.status == FAILED and index is not None and outcomes[index].original is not None:
                reason = f"model verification failed, file restored: {verification.name}: {verification.detail}"
                # The modular source the file is generated from goes back with it: the rewrite its classes got was
                # this file's (`fix.origins.carried_rewrites`), and regeneration must still give this file back.
                modular = banner.modular_source(path, outcomes[index].original or "")
                outcomes[index] = restored(outcomes[index], reason)
                twin = written.get(Path(modular).resolve()) if modular else None
                if twin is not None and outcomes[twin].original is not None:
                    outcomes[twin] = restored(outcomes[twin], f"{reason} (generated from it)")
    return outcomes, found


def _transformers_root(path: Path) -> Path | None:
    for folder in path.parents:
        if is_transformers_package(folder):
            return folder
    return None


def _architecture(path: str, result: ArchitectureResult) -> Verification:
    """A model-level result as a line of the report: the architecture, at its class in the modeling file."""
    status = VERIFIED if result.status == "verified" else NOT_BUILT if result.status == UNBUILDABLE else FAILED
    detail = result.reason if result.status == UNBUILDABLE else result.describe().partition("; ")[2]
    return Verification(
        path, _class_line(path, result.architecture), f"{result.architecture} (tiny model)", status, detail
    )


def _class_line(path: str, name: str) -> int:
    try:
        with open(path, encoding="utf-8") as source:
            return next((number for number, line in enumerate(source, 1) if line.startswith(f"class {name}(")), 1)
    except OSError:
        return 1
