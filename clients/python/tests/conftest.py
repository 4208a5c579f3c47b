import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))  # fake_proxy

from fake_proxy import FakeProxy  # noqa: E402


@pytest.fixture
def fake():
    f = FakeProxy()
    yield f
    f.close()


class FakeClock:
    """time.monotonic and time.sleep for the client: sleeping advances the clock."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.sleeps: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, s: float) -> None:
        self.sleeps.append(s)
        self.now += s


@pytest.fixture
def clock():
    return FakeClock()
