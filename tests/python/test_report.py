"""census.report: the command line's page, from Python, and its refusals."""
import json
import os
import subprocess

import pytest

import census

BINARY = os.environ.get("CENSUS_BINARY", "census")


def embedded(path):
    text = open(path, encoding="utf-8").read()
    start = text.index('id="census-data">') + len('id="census-data">')
    return json.loads(text[start:text.index("</script>", start)].replace("<\\/", "</"))


def test_is_the_command_lines_page(tmp_path):
    cli_page = tmp_path / "cli.html"
    subprocess.run([BINARY, "report", "qwen3-8b", "--seq-length", "1024", "--tp", "2", "--output", str(cli_page)],
                   check=True, capture_output=True)
    page = tmp_path / "py.html"
    assert census.report(census.shipped_config("qwen3-8b"), page, seq_length=1024, tp=2, name="qwen3-8b") == str(page)
    assert page.read_bytes() == cli_page.read_bytes()


def test_draws_the_censuses_numbers(tmp_path):
    config = census.shipped_config("llama-3.1-8b")
    page = census.report(config, tmp_path / "r.html", seq_length=2048, svg_dir=tmp_path / "charts")
    data = embedded(page)
    assert (data["layer"]["saved"], data["layer"]["working"]) == census.census_layer(config, 0, 2048)
    kept, working = census.census_layer(config, 0, 2048, selective=True)
    assert data["layer"]["selective"] == {"saved": kept, "working": working}
    assert sorted(os.listdir(tmp_path / "charts")) == [
        "layer-kinds.svg", "saved-by-module.svg", "saved-by-op.svg", "sequence-length.svg", "timeline.svg"]
    assert data["model"] == "llama"  # no name given: the mapping's model_type


def test_refusals_are_value_errors_and_leave_nothing(tmp_path):
    config = census.shipped_config("llama-3.1-8b")
    with pytest.raises(ValueError, match="--output"):
        census.report(config, tmp_path / "missing" / "r.html", seq_length=512)
    with pytest.raises(ValueError, match="^layer_index: 99 is out of range"):  # the Python argument's name
        census.report(config, tmp_path / "r.html", layer_index=99)
    with pytest.raises(ValueError, match="GDN backend"):
        census.report(config, tmp_path / "r.html", gdn_backend="fast")
    assert os.listdir(tmp_path) == []
