"""The README's PLEG example runs as written and prints what its comments claim."""

import re
from pathlib import Path

README = Path(__file__).resolve().parent.parent / "README.md"


def test_readme_pleg_example_runs(capsys):
    section = README.read_text().split("## PLEG:", 1)[1]
    block = re.findall(r"```python\n(.*?)```", section, re.S)[0]
    exec(compile(block, "README.md", "exec"), {})
    out = capsys.readouterr().out.splitlines()
    assert out[0] == (
        '[PodLifecycleEvent(id="uid-1", type="ContainerStarted", data="c1"), '
        'PodLifecycleEvent(id="uid-1", type="ContainerStarted", data="s1")]'
    )
    assert out[1] == "(False, 'pleg was last seen active 4m0s ago; threshold is 3m0s')"
