"""preflight(scan=True) scans the script that called it, also when a launcher owns
sys.modules["__main__"] (python -m cProfile script.py: found in review, cProfile.py was scanned)."""

import json
import os
import subprocess
import sys
import textwrap

SCRIPT = textwrap.dedent("""\
    import json
    import gpudoctor
    result = gpudoctor.preflight(scan=True, raise_on_error=False, quiet=True)
    print(json.dumps({"ids": [r["id"] for r in result.records], "scan": result.scan}))
    if False:
        from transformers import TrainingArguments
        TrainingArguments(output_dir="o", evaluation_strategy="steps")
    """)


def test_the_script_is_scanned_under_cprofile(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    env = {**os.environ, "HOME": str(home), "XDG_CACHE_HOME": str(home / "cache"), "XDG_CONFIG_HOME": str(home / "config")}
    done = subprocess.run([sys.executable, "-m", "cProfile", "-o", os.devnull, str(script)], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["scan"]["script"] == str(script)
    assert "transformers-removed-kwarg" in result["ids"]
