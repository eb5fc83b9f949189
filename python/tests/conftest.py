"""Fixtures of the Python tests: one flashcl context on the test device
($FLASHCL_TEST_DEVICE, default "pocl") for the whole session."""
import os

import pytest

import flashcl


@pytest.fixture(scope="session")
def ctx():
    c = flashcl.Context(os.environ.get("FLASHCL_TEST_DEVICE", "pocl"))
    yield c
    c.queue.finish()
    c.close()


@pytest.fixture
def rng(request):
    """A generator seeded by the test's name: the same inputs on every run."""
    import numpy as np
    import zlib
    return np.random.default_rng(zlib.crc32(request.node.nodeid.encode()))
