"""The README's commands work as shown, and every CLI command is documented there."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

from click.testing import CliRunner

import msq
from msq.cli import main

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")


def bash_blocks() -> list[str]:
    return re.findall(r"```bash\n(.*?)```", README, re.DOTALL)


def test_readme_opens_with_install_then_demo_then_tests():
    first = bash_blocks()[0].strip().splitlines()
    assert first[0].startswith("pip install -e .")
    assert first[1].startswith("msq compare fixtures/")
    assert "python -m pytest" in bash_blocks()[1]
    assert "python -m pytest -q" in (ROOT / ".ci" / "run").read_text()


def test_demo_command_runs_and_prints_the_summary(tmp_path, monkeypatch):
    demo = bash_blocks()[0].strip().splitlines()[1].split("#")[0]
    args = shlex.split(demo)[1:]
    args[args.index("-o") + 1] = str(tmp_path / "out")
    monkeypatch.chdir(ROOT)
    result = CliRunner().invoke(main, args, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    shown = re.search(r"```\n(msq compare: .*?)```", README, re.DOTALL).group(1)
    # the README shows the real summary (times and file names aside)
    strip = lambda s: re.sub(r"\d+\.\d+s|\S*compare_result_\d+\.xlsx|\S*advisor_\d+\.txt|\S*msq\.duckdb"
                             r"|\S*blame_\d+\.json", "", s)
    assert [strip(x) for x in result.stdout.splitlines() if x.strip()] == \
        [strip(x) for x in shown.splitlines() if x.strip()]
    assert len(list((tmp_path / "out").glob("compare_result_*.xlsx"))) == 1


def test_every_command_has_help_and_is_in_the_readme():
    for name, command in main.commands.items():
        assert command.help, name
        assert f"msq {name}" in README, f"'msq {name}' is not shown in README.md"


def test_console_script_is_installed() -> None:
    """`msq` is the console script pip installs beside this Python (pyproject's [project.scripts])."""
    script = Path(sys.executable).with_name("msq")
    assert script.is_file(), f"no msq console script beside {sys.executable}: pip install -e ."
    proc = subprocess.run([str(script), "--version"], capture_output=True, text=True, timeout=60,
                          check=False)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == f"msq, version {msq.__version__}\n"


def test_python_dash_m_msq_is_the_same_command() -> None:
    proc = subprocess.run([sys.executable, "-m", "msq", "compare", "--help"], capture_output=True,
                          text=True, timeout=60, check=False)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("Usage: msq compare [OPTIONS] [COMPARE_JSON]")


def test_readme_tells_the_console_flags_golden_data_and_completion():
    for said in ("`-q`", "`-v`", "`-vv`", "MSQ_GOLDEN", "CI=true", "msq show", "compare_json",
                 "_MSQ_COMPLETE=bash_source msq"):
        assert said in README, said


def test_the_readme_completion_completes_commands_and_flags():
    """What `eval "$(_MSQ_COMPLETE=bash_source msq)"` installs answers as bash asks it."""
    script = Path(sys.executable).with_name("msq")
    source = subprocess.run([str(script)], env={"_MSQ_COMPLETE": "bash_source"},
                            capture_output=True, text=True, timeout=60, check=False)
    assert source.returncode == 0 and "complete -o nosort -F _msq_completion msq" in source.stdout

    def complete(words: str) -> list[str]:
        env = {"_MSQ_COMPLETE": "bash_complete", "COMP_WORDS": words,
               "COMP_CWORD": str(len(words.split()) - 1)}
        proc = subprocess.run([str(script)], env=env, capture_output=True, text=True,
                              timeout=60, check=False)
        return [line.split(",", 1)[1] for line in proc.stdout.splitlines()]

    assert complete("msq sh") == ["show"]
    assert complete("msq compare --fail") == ["--fail-on"]
