"""The README's recording example runs as written and prints what its comments say."""

import re
from pathlib import Path

README = Path(__file__).resolve().parent.parent / "README.md"


def test_readme_recording_example_runs(capsys):
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), re.S)
    example = next(b for b in blocks if "Broadcaster" in b)
    exec(compile(example, "README.md", "exec"), {})
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith('Event(v1.ObjectReference{Kind:"Pod", Namespace:"prod", Name:"web-0"')
    assert out[0].endswith("reason: 'BackOff' Back-off restarting app")
    assert out[-2] == "3 Back-off restarting app ['create', 'patch', 'patch']"
    assert out[-1] == "1 2"
