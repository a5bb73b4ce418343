"""The README's tuning lab example runs and prints one row per combination."""

import re
from pathlib import Path

README = Path(__file__).resolve().parent.parent / "README.md"


def test_tuning_lab_example_runs(capsys):
    section = README.read_text().split("## Tuning lab", 1)[1]
    block = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    exec(compile(block, "README.md", "exec"), {})
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 4
    assert lines[0].startswith("{'burst': 5, 'max_events': 3, 'writes': ")
    assert all("'message_share': " in line and "'unreported': " in line for line in lines)
