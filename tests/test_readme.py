"""The README's Python example runs as written and prints what it claims, and its examples type-check."""

import re
import subprocess
import sys
from pathlib import Path

import pytest

README = Path(__file__).resolve().parent.parent / "README.md"


def test_readme_example_runs(capsys):
    text = README.read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, re.S)
    assert blocks, "README has no python example"
    exec(compile(blocks[0], "README.md", "exec"), {})
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("create api-0.")
    assert out[1].startswith("patch api-0.") and '"count":2' in out[1]
    assert out[2].startswith("patch api-0.") and '"count":3' in out[2]
    assert "'events': " in out[3] and "'creates': " in out[3]


def test_readme_names_the_two_setup_commands():
    text = README.read_text()
    assert "pip install . && python -m kubevents" in text
    assert "pip install '.[test]' && pytest" in text


@pytest.mark.parametrize("index", range(len(re.findall(r"```python\n", README.read_text()))))
def test_readme_examples_pass_mypy(index, tmp_path):
    block = re.findall(r"```python\n(.*?)```", README.read_text(), re.S)[index]
    path = tmp_path / f"readme_{index}.py"
    path.write_text(block)
    p = subprocess.run([sys.executable, "-m", "mypy", "--no-incremental", str(path)], capture_output=True, text=True)
    assert p.returncode == 0, p.stdout + p.stderr
