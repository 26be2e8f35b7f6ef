"""The README's Keras section runs as written, on a model.keras file Keras 3 saved."""
import os
import re
import shutil
import subprocess
import sys

import fragflow as ff

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def readme_keras() -> str:
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
        section = f.read().split("## Keras model files", 1)[1].split("\n## ", 1)[0]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


def test_readme_keras_section_runs_as_written(gl, keras_dir, tmp_path):
    shutil.copy(keras_dir / "cnn.keras", tmp_path / "model.keras")
    (tmp_path / "snippet.py").write_text(readme_keras())
    done = subprocess.run([sys.executable, "snippet.py"], capture_output=True, text=True,
                          timeout=300, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert 'Model: "cnn"' in done.stdout and "Total params:" in done.stdout
    for name in ("model.js", "model.bin", "index.html"):
        assert (tmp_path / "web" / name).is_file()
    tuned = ff.keras.models.load_model(tmp_path / "tuned.keras", backend="numpy")
    assert [la.name for la in tuned.layers] == [
        la.name for la in ff.keras.models.load_model(keras_dir / "cnn.keras").layers]
