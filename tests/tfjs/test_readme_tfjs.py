"""The README's "Run a TF.js model" runs as written (with the corpus installed)."""
import os
import re
import subprocess
import sys

import tfjs_corpus as corpus

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_the_readme_section_runs_as_written(gl, tmp_path):
    corpus.corpus()
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
        section = f.read().split("## Run a TF.js model", 1)[1].split("\n## ", 1)[0]
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    code = code.replace('os.path.expanduser("~/.cache/fragflow/tfjs/node_modules/@vladmandic/"\n'
                        '                          "human-models/models/emotion.json")',
                        repr(os.path.join(corpus.MODELS, "emotion.json")))
    script = tmp_path / "tfjs_readme.py"
    script.write_text(code)
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          timeout=300, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    assert "input_1" in done.stdout and "Identity" in done.stdout
    scores = re.findall(r"\d+\.?\d*(?:e-?\d+)?", done.stdout.rsplit("[[", 1)[1])
    assert len(scores) == 7 and abs(sum(map(float, scores)) - 1) < 0.01
