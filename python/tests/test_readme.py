"""The README's Python example, run as it stands (on the test device)."""
import os
import pathlib
import re

README = pathlib.Path(__file__).resolve().parents[2] / "README.md"


def test_readme_example(monkeypatch, capsys):
    text = README.read_text()
    section = text[text.index("\n## Python\n"):]
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    assert len(code.strip().splitlines()) == 5
    monkeypatch.setenv("FCL_DEVICE", os.environ.get("FLASHCL_TEST_DEVICE", "pocl"))
    exec(compile(code, str(README), "exec"), {})
    printed = capsys.readouterr().out
    assert " / " in printed and "nan" not in printed
