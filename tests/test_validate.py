import numpy as np
import pytest

from tisa._validate import check_int


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
