"""Reading a workflow file without running it: name, description, input fields and a starting
input from the examples; a file with side effects is read, not run; bad files are one
sentence; inputs checked against the declared fields."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from engine.examples import EXAMPLES_DIR
from engine.workflow.declaration import DeclarationError, input_problem, read_declaration
from engine.workflow.loader import load_workflow


def test_every_example_reads_as_it_loads() -> None:
    for path in sorted(EXAMPLES_DIR.glob("*.py")):
        declared, loaded = read_declaration(path), load_workflow(path)
        assert declared.name == loaded.name, path
        model = loaded.input_model
        assert declared.input_model == (model.__name__ if model else None)
        if model is not None:
            fields = model.model_fields
            assert [f.name for f in declared.fields] == list(fields)
            assert [f.required for f in declared.fields] == [
                fields[name].is_required() for name in fields]
            assert input_problem(declared, declared.example_input()) is None


def test_a_file_is_read_never_run(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    path = tmp_path / "flow.py"
    path.write_text(f'''
"""Side effects on import."""
open({str(marker)!r}, "w").close()
from pydantic import BaseModel, Field
from engine import Workflow

class In(BaseModel):
    goal: str
    count: int = 3
    tags: list[str] = Field(default_factory=list)
    note: "str | None" = None
    strict: bool = Field(...)

workflow = Workflow("flow", input_model=In)
''')
    declared = read_declaration(path)
    assert not marker.exists()
    assert (declared.name, declared.description) == ("flow", "Side effects on import.")
    assert declared.example_input() == {"goal": "", "count": 3, "tags": [], "note": None,
                                        "strict": False}
    assert input_problem(declared, {"goal": "x", "strict": True}) is None
    assert input_problem(declared, {"goal": 3, "strict": True}) == "goal must be text"
    assert input_problem(declared, {"goal": "x"}) == "strict is required"
    assert input_problem(declared, {"goal": "x", "strict": 1}) == "strict must be true or false"
    assert input_problem(declared, {"goal": "x", "strict": True, "count": True}) == (
        "count must be a whole number")
    assert input_problem(declared, [1]) == "the input of flow is an object with fields, not list"


def test_bad_files_are_one_sentence(tmp_path: Path) -> None:
    cases = {"syntax.py": "def (:\n", "none.py": "x = 1\n", "named.py": "Workflow(name)\n"}
    for name, text in cases.items():
        (tmp_path / name).write_text(text)
    (tmp_path / "big.py").write_text("#" * (1024 * 1024 + 1))
    os.mkfifo(tmp_path / "fifo.py")
    expected = {"syntax.py": "syntax error at line 1", "none.py": "declares no Workflow",
                "named.py": "declares no Workflow", "big.py": "larger than 1 MiB",
                "fifo.py": "not a regular file"}
    for name, words in expected.items():
        with pytest.raises(DeclarationError, match=words):
            read_declaration(tmp_path / name)
