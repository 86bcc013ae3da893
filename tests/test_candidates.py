"""Partial parsing (rope_lint/candidates.py): parsing only the statements that hold a trigger finds what parsing the
whole file finds, keeps a small part of a real modeling file, and parses the whole file where the split is in doubt.

The baseline everywhere is the same run with `candidates.parse` replaced by a plain `ast.parse` of the whole text.
"""

from __future__ import annotations

import ast
import functools
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest
from helpers import REPO, unpacked_wheel

from rope_lint.diagnostics import Diagnostic
from rope_lint.engine import Settings, check_file, check_source, map_files
from rope_lint.prefilter import candidates
from rope_lint.rules import select_rules

ALL = Settings(select_rules(["ALL"], []), Path("."))


def _full_parse(
    source: str,
    occurrences: candidates.Occurrences,
    needles: tuple[str, ...],
    parses_whole_class: Callable[[bytes], bool] | None,
    filename: str,
) -> ast.Module:
    """`candidates.parse` as if it parsed every file whole: the baseline that partial parsing must match."""
    return ast.parse(source, filename=filename)


def full_findings(path: str, source: str, settings: Settings = ALL) -> list[Diagnostic]:
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(candidates, "parse", _full_parse)
        return check_source(path, source, settings)


def partial_and_full(source: str, settings: Settings = ALL) -> tuple[list[Diagnostic], list[Diagnostic]]:
    return check_source("model.py", source, settings), full_findings("model.py", source, settings)


def located_as_by_a_full_parse(source: str) -> list[tuple[str, int, int]]:
    """Where the findings are, after checking they are those of parsing the whole file."""
    partial, full = partial_and_full(source)
    assert partial == full
    return located(partial)


def parsed(source: str, settings: Settings = ALL) -> ast.Module:
    """The tree the rules get for `source`."""
    occurrences = candidates.Occurrences(source.encode())
    return candidates.parse(source, occurrences, settings.triggers, settings.parses_whole_class, "model.py")


def definitions(tree: ast.Module) -> set[str]:
    """The functions and classes a tree holds, at the top and in its classes: "f", "C", "C.method"."""
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef):
            found.add(node.name)
            found.update(
                f"{node.name}.{member.name}"
                for member in node.body
                if isinstance(member, ast.FunctionDef | ast.AsyncFunctionDef)
            )
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.col_offset == 0:
            found.add(node.name)
    return found


def located(found: list[Diagnostic]) -> list[tuple[str, int, int]]:
    return [(d.code, d.start.line, d.start.column) for d in found]


def at(source: str, text: str) -> tuple[int, int]:
    """The line and character column of the one occurrence of `text` in `source`."""
    lines = source.splitlines()
    hits = [(number, line.index(text)) for number, line in enumerate(lines, 1) if text in line]
    assert len(hits) == 1, f"{text!r} must occur once in the snippet"
    return hits[0]


# The corpus: every module of transformers 4.37.2's models.


@pytest.fixture(scope="module")
def models() -> list[tuple[str, bytes]]:
    folder = unpacked_wheel("transformers", "4.37.2") / "transformers" / "models"
    files = [(str(path), path.read_bytes()) for path in sorted(folder.rglob("*.py"))]
    assert len(files) > 1000
    return files


# And the bundled hazards, which hold the log-domain findings that the models lack (their three,
# `torch.round(torch.exp(d) - 1)`, are rounded at once and left alone). Small files, some of which are parsed whole.
HAZARDS = [(str(path), path.read_bytes()) for path in sorted((REPO / "fixtures" / "hazards").glob("*.py"))]


@pytest.fixture
def parsed_texts(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every text handed to `ast.parse` while the test runs: a fallback hands it the whole file."""
    seen: list[str] = []
    real_parse = ast.parse

    def recording(source: str, *args: object, **kwargs: object) -> ast.AST:
        seen.append(source)
        return real_parse(source, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(ast, "parse", recording)
    return seen


def _compared_with_a_full_parse(entry: tuple[str, bytes], settings: Settings, parsed_texts: list[str]) -> tuple:
    """One file's (findings of a full parse, whether partial parsing found the same, whether it parsed the file
    whole); run in the processes of `engine.map_files`, forked after `parsed_texts` began recording."""
    path, data = entry
    text = data.decode("utf-8")
    parsed_texts.clear()
    partial = check_source(path, text, settings, candidates.Occurrences(data))
    parsed_whole = text in parsed_texts
    full = full_findings(path, text, settings)
    return len(full), partial == full, parsed_whole


# The whole selection, and each family alone: a family's triggers decide what is kept, and the RPL1xx family
# alone reads no class whole. The files are spread over the cores, as the check spreads them.
@pytest.mark.parametrize("select", ["ALL", "RPL1", "RPL2", "RPL3"])
def test_partial_parse_finds_what_a_full_parse_finds_in_transformers_models_and_the_hazards(
    models: list[tuple[str, bytes]], parsed_texts: list[str], select: str
) -> None:
    settings = Settings(select_rules([select], []), Path("."))
    compare = functools.partial(_compared_with_a_full_parse, settings=settings, parsed_texts=parsed_texts)
    corpus = [*models, *HAZARDS]
    compared = dict(zip([path for path, _ in corpus], map_files(compare, corpus), strict=True))
    assert sum(found for found, _, _ in compared.values()) > 0, (
        "the corpus must hold findings of this selection for the comparison to mean anything"
    )
    assert [path for path, (_, same, _) in compared.items() if not same] == []
    models_parsed_whole = [path for path, _ in models if compared[path][2]]
    assert models_parsed_whole == [], "every file of the models splits cleanly: none falls back to a full parse"


def test_partial_parse_keeps_under_a_quarter_of_the_lines_of_transformers_models(
    models: list[tuple[str, bytes]],
) -> None:
    kept = total = with_trigger = 0
    for path, data in models:
        occurrences = candidates.Occurrences(data)
        if not occurrences.positions(ALL.triggers):
            continue
        with_trigger += 1
        reduced = candidates._reduced(occurrences, ALL.triggers, ALL.parses_whole_class)
        assert reduced is not None, f"{path}: nothing blanked"
        text, _ = reduced
        kept += sum(1 for line in text.splitlines() if line.strip())
        total += sum(1 for line in data.splitlines() if line.strip())
    assert with_trigger > 200
    # About 14% today: the reason the module exists. A split that starts keeping whole files shows here first.
    assert kept / total < 0.25, f"kept {kept} of {total} non-blank lines"


# Unit cases. Each compares partial and full findings, and checks what the rules were given to read.


def test_decorated_classes_keep_their_decorators_and_only_the_methods_that_matter() -> None:
    source = textwrap.dedent(
        '''\
        import torch


        def register(*args, **kwargs):
            return lambda cls: cls


        @register
        class Plain:
            def helper(self):
                return 1

            def positions(self, n):
                return torch.arange(n, dtype=torch.float16)


        @register(
            name="tricky",
            doc="""
            def forward(self):
                return torch.arange(8, dtype=torch.float16)
            @property
            """,
        )
        class Tricky:
            def __init__(self):
                self.width = 4

            def unrelated(self):
                return 2

            def positions(self, n):
                return torch.arange(n, dtype=torch.bfloat16)
        '''
    )
    assert located_as_by_a_full_parse(source) == [
        ("RPL101", *at(source, "torch.arange(n, dtype=torch.float16)")),
        ("RPL101", *at(source, "torch.arange(n, dtype=torch.bfloat16)")),
    ]
    tree = parsed(source)
    assert definitions(tree) == {"Plain", "Plain.positions", "Tricky", "Tricky.__init__", "Tricky.positions"}
    tricky = next(node for node in tree.body if isinstance(node, ast.ClassDef) and node.name == "Tricky")
    assert len(tricky.decorator_list) == 1 and isinstance(tricky.decorator_list[0], ast.Call)


def test_code_in_a_module_string_at_column_zero_is_text_not_statements() -> None:
    source = textwrap.dedent(
        '''\
        import torch

        NOTES = """
        class Foo:
            x = torch.arange(10.0)
        def bar():
            return torch.arange(4, dtype=torch.float16)
        """


        def helper():
            return 1


        def positions(n):
            return torch.arange(n, dtype=torch.bfloat16)
        '''
    )
    assert located_as_by_a_full_parse(source) == [("RPL101", *at(source, "torch.arange(n, dtype=torch.bfloat16)"))]
    tree = parsed(source)
    assert definitions(tree) == {"positions"}
    assert [type(node).__name__ for node in tree.body] == ["Import", "Assign", "FunctionDef"]


def test_a_bracket_continued_at_column_zero_holds_a_found_hazard() -> None:
    source = textwrap.dedent(
        """\
        import torch

        TABLES = [
        torch.zeros(3),
        torch.arange(8, dtype=torch.float16),
        ]


        def helper():
            return 1


        def build(n):
            return torch.cat([
        torch.arange(n, dtype=torch.bfloat16),
            ])
        """
    )
    assert located_as_by_a_full_parse(source) == [
        ("RPL101", *at(source, "torch.arange(8, dtype=torch.float16)")),
        ("RPL101", *at(source, "torch.arange(n, dtype=torch.bfloat16)")),
    ]


def test_hazards_in_the_else_and_except_clauses_of_top_level_statements_are_found() -> None:
    source = textwrap.dedent(
        """\
        import torch

        if torch.cuda.is_available():
            DEVICE = "cuda"
        else:
            STEPS = torch.arange(16, dtype=torch.float16)


        def helper():
            return 1


        try:
            import flash_attn
        except ImportError:
            POSITIONS = torch.arange(32, dtype=torch.bfloat16)
        finally:
            READY = True
        """
    )
    assert located_as_by_a_full_parse(source) == [
        ("RPL101", *at(source, "torch.arange(16, dtype=torch.float16)")),
        ("RPL101", *at(source, "torch.arange(32, dtype=torch.bfloat16)")),
    ]
    tree = parsed(source)
    assert [type(node).__name__ for node in tree.body] == ["Import", "If", "Try"]  # `helper` is not parsed


HAZARD_BETWEEN_HELPERS = textwrap.dedent(
    """\
    import torch


    def helper():
        return 1


    def positions(n):
        return torch.arange(n, dtype=torch.float16)


    def other():
        return 2
    """
)


def test_crlf_line_endings_split_and_report_the_same_places() -> None:
    source = HAZARD_BETWEEN_HELPERS.replace("\n", "\r\n")
    assert located_as_by_a_full_parse(source) == [("RPL101", *at(source, "torch.arange(n, dtype=torch.float16)"))]
    assert definitions(parsed(source)) == {"positions"}


def test_lone_carriage_returns_are_parsed_whole_and_agree_with_a_full_parse() -> None:
    source = HAZARD_BETWEEN_HELPERS.replace("\n", "\r")
    partial, full = partial_and_full(source)
    assert partial == full
    # Lines that end in a lone `\r` are lines to `ast` but not to the byte counting: the split is not attempted.
    assert candidates._reduced(candidates.Occurrences(source.encode()), ALL.triggers, ALL.parses_whole_class) is None
    assert definitions(parsed(source)) == {"helper", "positions", "other"}


def test_a_class_keeps_init_and_the_hazard_method_and_blanks_the_others() -> None:
    # The dtype comes from an attribute that `__init__` assigns: the rule reads `__init__`, which is kept, while
    # the methods that hold no trigger are not parsed.
    source = textwrap.dedent(
        """\
        import torch
        from torch import nn


        class Positions(nn.Module):
            def __init__(self):
                super().__init__()
                self.scale = torch.ones(4)

            def extra_repr(self):
                return "positions"

            def forward(self, n):
                return torch.arange(n, dtype=self.scale.dtype)

            def reset(self):
                self.scale.fill_(1.0)
        """
    )
    assert located_as_by_a_full_parse(source) == [("RPL101", *at(source, "torch.arange(n, dtype=self.scale.dtype)"))]
    assert definitions(parsed(source)) == {"Positions", "Positions.__init__", "Positions.forward"}


ROTARY_AND_ATTENTION = textwrap.dedent(
    """\
    import torch
    from torch import nn


    class ToyRotaryEmbedding(nn.Module):
        def __init__(self, dim):
            super().__init__()
            self.dim = dim
            self.build(64)

        def build(self, n):
            self.positions = torch.arange(n)

        def extra_repr(self):
            return f"dim={self.dim}"


    class Attention(nn.Module):
        def __init__(self, dim):
            super().__init__()
            self.dim = dim

        def extra_repr(self):
            return f"dim={self.dim}"

        def mask(self, n, device):
            return torch.arange(n, device=device)
    """
)


@pytest.mark.parametrize("select", ["ALL", "RPL203"])
def test_a_rotary_class_is_kept_whole(select: str) -> None:
    settings = Settings(select_rules([select], []), Path("."))
    partial, full = partial_and_full(ROTARY_AND_ATTENTION, settings)
    assert partial == full
    # `build` holds no trigger of RPL203 (`inv_freq`, `Rotary`), yet the rule follows `__init__` into it.
    assert located(partial) == [("RPL203", *at(ROTARY_AND_ATTENTION, "torch.arange(n)"))]
    kept = definitions(parsed(ROTARY_AND_ATTENTION, settings))
    assert {"ToyRotaryEmbedding.build", "ToyRotaryEmbedding.extra_repr"} <= kept
    assert "Attention.extra_repr" not in kept


def test_a_syntax_error_in_a_statement_with_a_trigger_is_reported_on_its_line() -> None:
    source = textwrap.dedent(
        """\
        import torch


        def helper():
            return 1


        def positions(n:
            return torch.arange(n, dtype=torch.float16)
        """
    )
    partial, full = partial_and_full(source)
    assert partial == full
    assert [(d.code, d.start.line) for d in partial] == [("RPL902", at(source, "def positions(n:")[0])]


# An in-place merge at module level: the trigger (`log_(`) is on the last statement, the steps before it hold none
# of RPL301's triggers, and the rule reads them.
LSE_MERGE = textwrap.dedent(
    """\
    import torch

    lse = torch.zeros(4)
    block_lse = torch.ones(4)
    lse.exp_()
    lse.add_(block_lse.exp())
    lse.log_()


    def helper():
        return 1
    """
)


@pytest.mark.parametrize("select", ["ALL", "RPL301"])
def test_module_code_before_a_later_trigger_is_kept(select: str) -> None:
    settings = Settings(select_rules([select], []), Path("."))
    partial, full = partial_and_full(LSE_MERGE, settings)
    assert partial == full
    assert [(d.code, d.start.line) for d in partial] == [("RPL301", at(LSE_MERGE, "lse.exp_()")[0])]
    tree = parsed(LSE_MERGE, settings)
    assert [type(node).__name__ for node in tree.body] == ["Import", "Assign", "Assign", "Expr", "Expr", "Expr"]


ENCODED_SOURCE = textwrap.dedent(
    """\
    import torch

    GREETING = "café"


    def helper():
        return "déjà vu"


    def positions(n):
        label = "naïve"; return torch.arange(n, dtype=torch.float16)
    """
)


@pytest.mark.parametrize(
    ("data", "text"),
    [
        (("# -*- coding: latin-1 -*-\n" + ENCODED_SOURCE).encode("latin-1"), "# -*- coding: latin-1 -*-\n"),
        (b"\xef\xbb\xbf" + ENCODED_SOURCE.encode("utf-8"), ""),
    ],
    ids=["latin-1 cookie", "utf-8 bom"],
)
def test_an_encoded_file_reports_the_columns_of_its_decoded_text(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, data: bytes, text: str
) -> None:
    path = tmp_path / "model.py"
    path.write_bytes(data)
    decoded = text + ENCODED_SOURCE
    trees: list[ast.Module] = []
    real_parse = candidates.parse

    def keeping(*args: object) -> ast.Module:
        trees.append(real_parse(*args))  # type: ignore[arg-type]
        return trees[-1]

    monkeypatch.setattr(candidates, "parse", keeping)
    partial = check_file(path, ALL)
    monkeypatch.undo()
    assert partial == full_findings(str(path), decoded)
    # Characters, not bytes: `é`, `à`, `ï` are two bytes in UTF-8 and one in latin-1, but one column each.
    assert located(partial) == [("RPL101", *at(decoded, "torch.arange(n, dtype=torch.float16)"))]
    assert len(trees) == 1 and definitions(trees[0]) == {"positions"}, "the split applies to the file's bytes"


@pytest.mark.parametrize(
    "data",
    [
        ("# -*- coding: latin-1 -*-\n" + ENCODED_SOURCE).encode("latin-1"),
        b"\xef\xbb\xbf" + ENCODED_SOURCE.encode("utf-8"),
        ENCODED_SOURCE.encode("utf-8"),
    ],
    ids=["latin-1 cookie", "utf-8 bom", "utf-8"],
)
def test_a_fix_checks_a_file_with_the_occurrences_that_reading_its_bytes_found(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, data: bytes
) -> None:
    """The prefilter's scan of a file's bytes serves its check in a fix, as in a check: the fix finds what the check
    finds, and the occurrences of its text are not searched again (those of the fixed text are, where the fix parses
    it)."""
    from rope_lint.fix import apply

    path = tmp_path / "model.py"
    path.write_bytes(data)
    searched: list[str] = []
    real_of_text = candidates.Occurrences.of_text

    def of_text(source: str, *args: object) -> candidates.Occurrences:
        searched.append(source)
        return real_of_text(source, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(candidates.Occurrences, "of_text", of_text)
    draft = apply.drafted(path, ALL, unsafe=True)
    assert isinstance(draft, apply.FixDraft)
    assert draft.source.text not in searched
    assert draft.found == check_file(path, ALL)
    assert [d.code for d in draft.found] == ["RPL101"]


# Cases where a split by lines could go wrong: each is found as a full parse finds it.


def test_a_file_with_a_bom_and_an_import_on_its_first_line_reports_its_hazard(tmp_path: Path) -> None:
    path = tmp_path / "model.py"
    path.write_bytes(b"\xef\xbb\xbfimport torch\nt = torch.arange(8, dtype=torch.float16)\n")
    assert [(d.code, d.start.line) for d in check_file(path, ALL)] == [("RPL101", 2)]


def test_a_file_with_lone_carriage_returns_reports_its_hazard() -> None:
    source = HAZARD_BETWEEN_HELPERS.replace("\n", "\r")
    assert located(check_source("model.py", source, ALL)) == [
        ("RPL101", *at(source, "torch.arange(n, dtype=torch.float16)"))
    ]


def test_a_syntax_error_outside_the_statements_with_a_trigger_goes_unnoticed() -> None:
    """As documented (docs/usage.md, `parse`): what is not parsed is not checked for syntax, as a file without
    any trigger never was. A syntax error where a trigger is stays reported (the test above)."""
    source = HAZARD_BETWEEN_HELPERS.replace("def helper():", "def helper(:")
    partial, full = partial_and_full(source)
    assert [(d.code, d.start.line) for d in full] == [("RPL902", at(source, "def helper(:")[0])]
    assert located(partial) == [("RPL101", *at(source, "torch.arange(n, dtype=torch.float16)"))]


def test_an_attribute_assigned_outside_init_still_decides_a_dtype() -> None:
    source = textwrap.dedent(
        """\
        import torch
        from torch import nn


        class Positions(nn.Module):
            def __init__(self):
                super().__init__()
                self.reset()

            def reset(self):
                self.scale = torch.ones(4)

            def forward(self, n):
                return torch.arange(n, dtype=self.scale.dtype)
        """
    )
    partial, full = partial_and_full(source)
    assert located(full) == [("RPL101", *at(source, "torch.arange(n, dtype=self.scale.dtype)"))]
    assert partial == full


def test_a_subclass_of_a_rotary_class_is_read_when_rpl203_is_selected_alone() -> None:
    source = textwrap.dedent(
        """\
        import torch
        from torch import nn


        class Base(nn.Module):
            def __init__(self, dim):
                super().__init__()
                inv_freq = 1.0 / 10000 ** (torch.arange(0, dim, 2, device="cpu").float() / dim)
                self.register_buffer("inv_freq", inv_freq)


        class Scaled(Base):
            def __init__(self, dim):
                super().__init__(dim)
                self.build(64)

            def build(self, n):
                self.positions = torch.arange(n)
        """
    )
    partial, full = partial_and_full(source, Settings(select_rules(["RPL203"], []), Path(".")))
    assert located(full) == [("RPL203", *at(source, "torch.arange(n)"))]
    assert partial == full


def test_a_definition_inside_a_backslash_continued_string_is_not_reported() -> None:
    source = 'import torch\n\nNOTE = "not code: \\\ndef fake(): return torch.arange(3, dtype=torch.float16)  # \\\n"\n'
    partial, full = partial_and_full(source)
    assert full == [] and isinstance(ast.parse(source).body[1], ast.Assign)
    assert partial == full


def test_triple_quotes_inside_one_quote_strings_do_not_turn_a_docstring_into_code() -> None:
    source = textwrap.dedent(
        """\
        import torch

        OPEN = '\"\"\"'
        DOC = \"\"\"
        def fake(): return torch.arange(3, dtype=torch.float16)
        \"\"\"
        CLOSE = '\"\"\"'
        """
    )
    partial, full = partial_and_full(source)
    assert full == [] and len(ast.parse(source).body) == 4
    assert partial == full


# The outline parse (`candidates.parse_outline`): a file's top-level statements, each definition's body cut to a
# `pass`, for what reads only a file's outline (the regeneration check).


def top_level(tree: ast.Module) -> list[object]:
    """What an outline reads of a tree: each top-level definition's kind, name, lines, decorators, bases and
    keywords, and every other top-level statement whole."""
    found: list[object] = []
    for node in tree.body:
        if isinstance(node, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            parts = [*node.decorator_list, *getattr(node, "bases", []), *getattr(node, "keywords", [])]
            lines = (node.lineno, node.end_lineno, node.col_offset)
            found.append((type(node).__name__, node.name, lines, [ast.dump(p, include_attributes=True) for p in parts]))
        else:
            found.append(ast.dump(node, include_attributes=True))
    return found


def cut_bodies(tree: ast.Module) -> int:
    """How many top-level definitions have a lone `pass` for a body."""
    return sum(
        1
        for node in tree.body
        if isinstance(node, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
        and len(node.body) == 1
        and isinstance(node.body[0], ast.Pass)
    )


def _outline_compared(entry: tuple[str, bytes]) -> tuple[str, bool, bool, int, int]:
    """One file's (path, whether its outline reads as its whole parse, whether the outline parse fell back to a
    whole parse, its non-blank lines, those the outline parse kept)."""
    path, data = entry
    text = data.decode("utf-8")
    hollowed = candidates._hollowed(candidates.Occurrences.of_text(text).data)
    outline = candidates.parse_outline(text)
    kept = sum(1 for line in hollowed[0].splitlines() if line.strip()) if hollowed else 0
    # A fallback's bodies are whole: fewer lone `pass` bodies than the text was cut to have.
    whole = hollowed is None or cut_bodies(outline) < len(hollowed[2])
    total = sum(1 for line in data.splitlines() if line.strip())
    return path, top_level(outline) == top_level(ast.parse(text)), whole, total, kept


def test_an_outline_parse_reads_every_module_of_transformers_as_a_whole_parse_and_keeps_under_a_sixth() -> None:
    package = unpacked_wheel("transformers", "5.24.0") / "transformers"
    files = [(str(path), path.read_bytes()) for path in sorted(package.rglob("*.py"))]
    assert len(files) > 2500
    compared = map_files(_outline_compared, files)
    assert [path for path, same, *_ in compared if not same] == []
    # 7 of its 2,912 modules fall back to a whole parse today (quotes in doubt); it keeps 13% of the lines.
    fallbacks = [path for path, _, whole, *_ in compared if whole]
    assert len(fallbacks) < len(files) / 100, fallbacks
    kept = sum(kept for *_, kept in compared)
    total = sum(total for *_, total, _ in compared)
    assert kept / total < 1 / 6, f"kept {kept} of {total} non-blank lines"


@pytest.mark.parametrize(
    "header",
    [
        'def f(x=":", y=lambda z: z) -> "Dict[str, int]":  # a colon: in a comment',
        "async def f(\n    x: int,\n    # not the end:\n    y: dict[str, int] = {'a': 1},\n) -> None:",
        "@decorator(\n    key=':',\n)\nclass Model(Base, metaclass=Meta):",
        "class Model(\n    Base,\n):",
        'def f(text=\'\\\':\', other="""a:\nb"""):',
    ],
)
def test_an_outline_parse_cuts_a_body_after_a_header_of_any_shape(header: str) -> None:
    # A docstring with a line like a comment at the first column, a statement of two lines, a comment after the body.
    body = "    '''Docstring.\n\n#  not a comment\n'''\n    x = (1,\n      2)\n# trailing\n"
    source = f"import torch\n\n\n{header}\n{body}\nY = 1\n"
    outline = candidates.parse_outline(source)
    assert top_level(outline) == top_level(ast.parse(source))
    assert cut_bodies(outline) == 1


def test_an_outline_parse_keeps_a_body_on_its_headers_line_and_reads_a_bracket_at_column_zero() -> None:
    one_line = "def f(): return 1\nclass C: x = 1; y = 2\n"
    assert top_level(candidates.parse_outline(one_line)) == top_level(ast.parse(one_line))
    assert cut_bodies(candidates.parse_outline(one_line)) == 0
    # A call continued at the first column splits the function in two for the text: the split does not parse, and
    # the whole file decides where the function ends.
    continued = "def f():\n    x = g(\na)\n    return x\n\n\nZ = 2\n"
    assert top_level(candidates.parse_outline(continued)) == top_level(ast.parse(continued))
    assert candidates.parse_outline(continued).body[0].end_lineno == 4


def test_an_outline_parse_reads_crlf_and_leaves_a_broken_body_unread_but_not_a_broken_header() -> None:
    crlf = "import torch\r\n\r\nclass C(torch.nn.Module):\r\n    def f(self):\r\n        return 1\r\n\r\nX = 1\r\n"
    assert top_level(candidates.parse_outline(crlf)) == top_level(ast.parse(crlf))
    broken_body = "class C:\n    def f(self):\n        return (\n\n\nX = 1\n"
    assert [node.end_lineno for node in candidates.parse_outline(broken_body).body] == [3, 6]
    with pytest.raises(SyntaxError):
        candidates.parse_outline("class C(:\n    pass\n")
    with pytest.raises(SyntaxError):  # a byte order mark is an error in a text, as for `ast.parse`
        candidates.parse_outline("\ufeffclass C:\n    pass\n")


@pytest.mark.parametrize(
    "ending",
    [
        "    '''Doc\n\n#  the docstring closes here'''\n# a comment\n",  # a string's line like a comment
        "    x = 1\n# a path: C:\\\nY = 2\n",  # a statement after a comment that ends in a backslash
        "    x = 'a \\\n# still the string'\n\n",  # a string that a backslash continues
        "    x = g(\na)\n# after\n",  # a call continued at the first column
    ],
)
def test_an_outline_parse_ends_each_definition_where_a_whole_parse_does(ending: str) -> None:
    source = f"import torch\n\n\ndef f():\n{ending}\n\nclass C:\n    pass\n"
    assert top_level(candidates.parse_outline(source)) == top_level(ast.parse(source))


def test_a_files_split_into_statements_is_read_once_for_all_the_parses_of_its_check(monkeypatch) -> None:
    # RPL101 parses the statements around `helper` to see where it is called, beside the rules' own parse.
    split: list[bytes] = []
    real = candidates._module_layout
    monkeypatch.setattr(
        candidates, "_module_layout", lambda source, strings: split.append(source) or real(source, strings)
    )
    source = (
        "import torch\n\n\ndef helper(n):\n    return torch.arange(n, dtype=torch.float32)\n\n\n"
        "class M(torch.nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.t = helper(8)\n"
    )
    found = check_source("m.py", source, Settings(select_rules(["RPL101"], []), Path(".")))
    assert [d.code for d in found] == ["RPL101"]
    assert len(split) == 1
