import numpy as np
import pytest

from tisa._validate import check_int, check_output_dir, check_output_file


def test_accepts_integers_and_returns_python_int():
    assert check_int(3, "n") == 3
    value = check_int(np.int64(7), "n")
    assert value == 7 and type(value) is int
    assert check_int(0, "seed", minimum=0) == 0
    assert check_int(None, "n", optional=True) is None


@pytest.mark.parametrize("bad", [0, -2, 2.0, "3", True, None])
def test_rejects_with_the_argument_name_and_bound(bad):
    with pytest.raises(ValueError, match=r"batch_size must be an integer >= 1, got "):
        check_int(bad, "batch_size")


def test_minimum_is_in_the_message():
    with pytest.raises(ValueError, match=r"max_distance must be an integer >= 2, got 1"):
        check_int(1, "max_distance", minimum=2)


def _unwritable_place():
    """A folder nobody may create files in, root included (sysfs refuses new entries)."""
    from pathlib import Path

    place = Path("/sys")
    if not place.is_dir():
        pytest.skip("no /sys on this system")
    return place


def test_output_dir_that_can_be_written_is_accepted_and_nothing_is_created(tmp_path):
    deep = tmp_path / "a" / "b"
    assert check_output_dir(deep) == deep and not (tmp_path / "a").exists()
    assert check_output_dir(tmp_path) == tmp_path and list(tmp_path.iterdir()) == []


def test_output_dir_that_is_a_file_or_below_one(tmp_path):
    afile = tmp_path / "results.txt"
    afile.write_text("keep me")
    with pytest.raises(
        ValueError, match=r"^--output-dir: '.*results.txt' is a file, expected a folder$"
    ):
        check_output_dir(afile, "--output-dir")
    with pytest.raises(ValueError, match=r"output_dir: '.*results.txt/run' cannot be a folder: "):
        check_output_dir(afile / "run")
    assert afile.read_text() == "keep me"


def test_output_dir_that_cannot_be_written():
    place = _unwritable_place()
    with pytest.raises(
        ValueError,
        match=r"output_dir: cannot write to '/sys/tisa-run' \(its parent '/sys' is not writable\)",
    ):
        check_output_dir(place / "tisa-run")
    with pytest.raises(ValueError, match=r"output_dir: cannot write to '/sys': "):
        check_output_dir(place)


def test_output_file(tmp_path):
    assert check_output_file(tmp_path / "t.md", "--output") == tmp_path / "t.md"
    with pytest.raises(ValueError, match=r"--output: '.*' is a folder, expected a file name"):
        check_output_file(tmp_path, "--output")
    with pytest.raises(ValueError, match=r"--output: cannot write to '/sys'"):
        check_output_file(_unwritable_place() / "table.md", "--output")
